"""Tests for terrain_analysis.analysis: the whole analysis and its fit.json document."""

from __future__ import annotations

import json

import numpy as np
import pytest

from terrain_analysis.analysis import analyse_gev
from terrain_analysis.fit_json import FORMAT


@pytest.fixture(scope="module")
def analysis(read_sample):
    return analyse_gev(read_sample("frechet"), return_periods=(10.0, 250.0))


def test_document_holds_the_fit_in_the_convention_of_henwood_et_al(analysis):
    document = analysis.to_document(source="durations.csv", column="total_s")
    fit = analysis.fit
    assert document["format"] == FORMAT
    assert document["n"] == fit.n == 150
    assert (document["location"], document["scale"], document["shape"]) == fit.parameters
    assert document["shape"] > 0  # the sample was drawn Frechet type, xi = 0.3
    assert document["se"] == {"location": fit.se.location, "scale": fit.se.scale, "shape": fit.se.shape}
    assert document["nll"] == fit.nll
    assert document["source"] == {"file": "durations.csv", "column": "total_s"}
    assert document["support"] == {"lower": pytest.approx(fit.location - fit.scale / fit.shape), "upper": None}


def test_document_is_strict_json(analysis):
    text = json.dumps(analysis.to_document(), allow_nan=False)
    assert json.loads(text)["covariance"] == analysis.fit.covariance.tolist()


def test_document_reports_every_derived_quantity(analysis):
    document = analysis.to_document()
    assert document["shape_interval"]["lower"] == analysis.shape_interval.lower
    assert document["shape_interval"]["upper"] == analysis.shape_interval.upper
    assert document["gumbel_test"]["p_value"] == analysis.gumbel_test.p_value
    assert [model["name"] for model in document["models"]] == [model.name for model in analysis.models]
    assert document["models"][0]["delta_aic"] == 0.0
    assert [entry["period"] for entry in document["return_levels"]] == [10.0, 250.0]
    np.testing.assert_allclose([entry["level"] for entry in document["return_levels"]], analysis.return_levels.levels)
    assert document["quantile_band"]["outside"] == int(analysis.band.outside.sum())
    assert len(document["quantile_band"]["outside_durations"]) == document["quantile_band"]["outside"]
    assert document["summary"]["max"] == analysis.fit.durations.max()


def test_level_is_used_throughout(read_sample):
    analysis = analyse_gev(read_sample("frechet"), level=0.8)
    wide = analyse_gev(read_sample("frechet"), level=0.99)
    assert analysis.shape_interval.level == analysis.return_levels.level == analysis.band.level == 0.8
    assert wide.shape_interval.lower < analysis.shape_interval.lower
    assert wide.shape_interval.upper > analysis.shape_interval.upper


def test_bad_level_is_rejected(read_sample):
    with pytest.raises(ValueError, match=r"'level' must lie in \(0, 1\), got 95"):
        analyse_gev(read_sample("frechet"), level=95)

"""Tests for terrain_analysis.comparison: AIC ranking of GEV, Gumbel, normal and lognormal."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from terrain_analysis.comparison import compare_models, fit_lognormal, fit_normal
from terrain_analysis.gev import fit_gev, fit_gumbel


def test_normal_fit_is_the_maximum_likelihood_fit():
    x = np.random.default_rng(3).normal(5.0, 2.0, size=500)
    model = fit_normal(x)
    mean, sd = stats.norm.fit(x)
    assert model.parameters == pytest.approx({"mean": mean, "sd": sd})
    assert model.nll == pytest.approx(-stats.norm.logpdf(x, mean, sd).sum())
    assert model.aic == pytest.approx(2 * 2 + 2 * model.nll)


def test_lognormal_fit_is_the_maximum_likelihood_fit():
    x = np.random.default_rng(4).lognormal(1.0, 0.5, size=500)
    model = fit_lognormal(x)
    assert model is not None
    assert model.parameters["meanlog"] == pytest.approx(np.log(x).mean())
    assert model.parameters["sdlog"] == pytest.approx(np.log(x).std())
    expected = -stats.lognorm.logpdf(x, model.parameters["sdlog"], scale=np.exp(model.parameters["meanlog"])).sum()
    assert model.nll == pytest.approx(expected)


def test_lognormal_is_left_out_when_a_duration_is_zero():
    x = np.r_[0.0, np.random.default_rng(5).gumbel(3.0, 0.5, size=99)]
    assert fit_lognormal(x) is None
    assert [model.name for model in compare_models(fit_gev(x))].count("lognormal") == 0


def test_models_are_ranked_by_aic_and_the_gev_family_wins_on_skewed_extremes(read_sample):
    fit = fit_gev(read_sample("frechet"))
    models = compare_models(fit)
    assert sorted(model.name for model in models) == ["gev", "gumbel", "lognormal", "normal"]
    aics = [model.aic for model in models]
    assert aics == sorted(aics)
    assert models[0].name == "gev"
    gev_model = next(model for model in models if model.name == "gev")
    assert gev_model.aic == pytest.approx(fit.aic)
    assert gev_model.n_parameters == 3


def test_lognormal_wins_on_lognormal_data():
    x = np.random.default_rng(6).lognormal(0.0, 0.8, size=2000)
    assert compare_models(fit_gev(x))[0].name == "lognormal"


def test_a_given_gumbel_fit_is_used_as_is(read_sample):
    x = read_sample("gumbel")
    gumbel = fit_gumbel(x)
    models = compare_models(fit_gev(x), gumbel)
    entry = next(model for model in models if model.name == "gumbel")
    assert entry.nll == gumbel.nll
    assert entry.parameters == {"location": gumbel.location, "scale": gumbel.scale}

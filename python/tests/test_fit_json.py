"""Tests for terrain_analysis.fit_json: the terrain.gev/1 document on disk."""

from __future__ import annotations

import json

import pytest

from terrain_analysis.fit_json import FORMAT, read_fit_json, write_fit_json

MINIMAL = {
    "format": FORMAT,
    "n": 400,
    "location": 11.1679,
    "scale": 0.2120,
    "shape": -0.00105,
    "se": {"location": 0.0140, "scale": 0.0101, "shape": 0.0415},
    "nll": 12.5,
}


def test_round_trip(tmp_path):
    path = write_fit_json(MINIMAL, tmp_path / "fit.json")
    assert read_fit_json(path) == MINIMAL
    assert not list(tmp_path.glob(".*.tmp"))


def test_unknown_format_is_rejected_on_read(tmp_path):
    path = tmp_path / "fit.json"
    path.write_text(json.dumps({**MINIMAL, "format": "terrain.gev/2"}))
    with pytest.raises(ValueError, match=r"format 'terrain\.gev/2', expected 'terrain\.gev/1'"):
        read_fit_json(path)


def test_missing_keys_are_listed(tmp_path):
    path = tmp_path / "fit.json"
    path.write_text(json.dumps({key: value for key, value in MINIMAL.items() if key not in ("se", "nll")}))
    with pytest.raises(ValueError, match=r"lacks the keys se, nll"):
        read_fit_json(path)


def test_non_positive_scale_is_rejected(tmp_path):
    with pytest.raises(ValueError, match=r"must have 'scale' > 0, got -0\.2"):
        write_fit_json({**MINIMAL, "scale": -0.2}, tmp_path / "fit.json")


def test_not_json_is_rejected(tmp_path):
    path = tmp_path / "fit.json"
    path.write_text("location = 3")
    with pytest.raises(ValueError, match=r"fit.json: not JSON"):
        read_fit_json(path)


def test_nan_cannot_be_written(tmp_path):
    with pytest.raises(ValueError, match="JSON compliant"):
        write_fit_json({**MINIMAL, "nll": float("nan")}, tmp_path / "fit.json")
    assert not (tmp_path / "fit.json").exists()

"""Tests for the terrain_analysis package itself: version, exports, type marker."""

from __future__ import annotations

from importlib import resources
from importlib.metadata import version

import terrain_analysis


def test_version_is_the_installed_distribution_version():
    assert terrain_analysis.__version__ == version("terrain-analysis") == "0.1.0"


def test_everything_in_all_exists():
    for name in terrain_analysis.__all__:
        assert hasattr(terrain_analysis, name), name


def test_package_ships_the_py_typed_marker():
    assert resources.files("terrain_analysis").joinpath("py.typed").is_file()

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


def test_the_module_list_names_every_module_and_nothing_else():
    import pkgutil
    import re

    modules = {m.name for m in pkgutil.iter_modules(terrain_analysis.__path__) if not m.name.startswith("_")}
    listed = set(re.findall(r"^(\w+)\n    ", terrain_analysis.__doc__.split("Modules\n-------\n")[1], re.M))
    assert listed == modules


def test_package_ships_the_registry_of_formats():
    from terrain_analysis.formats import FORMATS, KINDS

    assert resources.files("terrain_analysis").joinpath("formats.json").is_file()
    assert "terrain.latency/1" in FORMATS and "latency" in KINDS

"""Shared fixtures for the terrain-analysis tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import settings

DATA = Path(__file__).parent / "data"

# Deterministic property tests: the same examples on every run and machine, no deadline
# (CI machines are shared and slow; timing goals live in python/bench).
settings.register_profile("terrain", derandomize=True, deadline=None, max_examples=40)
settings.load_profile("terrain")


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The directory of committed test data."""
    return DATA


@pytest.fixture(scope="session")
def fgev_reference() -> dict[str, Any]:
    """R evd::fgev estimates written by tests/data/fgev_reference.R."""
    return json.loads((DATA / "fgev_reference.json").read_text())


@pytest.fixture(scope="session")
def read_durations_file() -> Callable[[str], np.ndarray]:
    """Read the total_s column of a CSV file in tests/data without the package under test."""

    def read(name: str) -> np.ndarray:
        return np.loadtxt(DATA / name, delimiter=",", skiprows=1, usecols=1)

    return read


@pytest.fixture(scope="session")
def read_sample(read_durations_file) -> Callable[[str], np.ndarray]:
    """Read one of the samples fitted by tests/data/fgev_reference.R: gev_<name>.csv."""

    def read(name: str) -> np.ndarray:
        return read_durations_file(f"gev_{name}.csv")

    return read

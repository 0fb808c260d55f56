"""Write and read ``fit.json``, the fitted GEV model (format ``terrain.gev/1``).

``fit.json`` is how a fit reaches the BEAM: ``terrain_variability:load/1``
reads ``location``, ``scale`` and ``shape`` from it to flag unlikely durations
online. Every terrain JSON file names its format; readers reject formats they
do not know. ``docs/GEV.md`` lists the keys.

Examples
--------
>>> from terrain_analysis.fit_json import read_fit_json
>>> model = read_fit_json("runs/20240607T101500Z/gev/fit.json")  # doctest: +SKIP
>>> model["shape"]  # doctest: +SKIP
-0.00105
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from terrain_analysis.formats import check_format, read_document, tag
from terrain_analysis.output import write_atomically

__all__ = ["FORMAT", "REQUIRED_KEYS", "read_fit_json", "write_fit_json"]

FORMAT = tag("gev")
"""The ``format`` value of the documents this module writes and reads."""

REQUIRED_KEYS = ("format", "n", "location", "scale", "shape", "se", "nll")
"""Top-level keys every ``terrain.gev/1`` document holds."""


def write_fit_json(document: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write a ``terrain.gev/1`` document, replacing ``path`` atomically.

    Parameters
    ----------
    document : mapping
        The document, e.g. from :meth:`terrain_analysis.analysis.GEVAnalysis.to_document`.
    path : str or path-like
        Destination file.

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    ValueError
        If the document is not ``terrain.gev/1``, lacks a required key, or holds NaN or
        infinity (JSON has neither; use None).
    OutputError
        If the file cannot be written (:func:`terrain_analysis.output.write_atomically`).
    """
    _check(document, "document")
    text = json.dumps(document, indent=2, allow_nan=False) + "\n"
    return write_atomically(path, text)


def read_fit_json(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and check a ``terrain.gev/1`` document.

    Parameters
    ----------
    path : str or path-like
        The file.

    Returns
    -------
    dict
        The document.

    Raises
    ------
    OSError
        If the file cannot be read.
    ValueError
        If it is not JSON, names another format, or lacks a required key.
    """
    document = read_document(path, FORMAT)
    _check(document, str(path))
    return dict(document)


def _check(document: Any, what: str) -> None:
    check_format(document, FORMAT, what)
    missing = [key for key in REQUIRED_KEYS if key not in document]
    if missing:
        raise ValueError(f"{what!r} lacks the keys {', '.join(missing)}")
    for key in ("location", "scale", "shape"):
        value = document[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"{what!r} must have a finite number as {key!r}, got {value!r}")
    if not document["scale"] > 0:
        raise ValueError(f"{what!r} must have 'scale' > 0, got {document['scale']!r}")

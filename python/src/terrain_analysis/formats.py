"""The registry of terrain's file formats and manifest kinds, and the one format check.

Every ``format`` tag a writer puts in a file (``terrain.latency/1``, ...) and every
``kind`` a run's ``manifest.json`` lists is named once, in ``spec/formats.json`` at
the top of the repository (installed with the package as ``formats.json``). The
Erlang side includes ``apps/terrain_json/include/terrain_formats.hrl``, generated from the
same file by ``python/tools/formats_hrl.py``; ``python/tests/test_formats.py`` checks
that the two agree, that no Erlang or Python source uses a tag or a manifest kind the
registry lacks, and that the report renders or explicitly lists every kind.

Readers check a document's tag with :func:`check_format` or read and check a JSON file
with :func:`read_document` (strict JSON: a NaN or an infinity is an error, see
:mod:`terrain_analysis.values`).

Examples
--------
>>> tag("latency")
'terrain.latency/1'
>>> check_format({"format": "terrain.gev/1", "n": 3}, tag("gev"), "fit.json")["n"]
3
>>> check_format({"format": "terrain.gev/1"}, [tag("latency"), tag("topology")], "x.json")
Traceback (most recent call last):
...
ValueError: x.json: format 'terrain.gev/1', expected 'terrain.latency/1' or 'terrain.topology/1'
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from terrain_analysis.values import loads_json

__all__ = ["FORMATS", "KINDS", "Kind", "check_format", "read_document", "tag"]


@dataclass(frozen=True)
class Kind:
    """A kind of output a manifest lists.

    Attributes
    ----------
    name : str
    formats : tuple of str
        The format tags its JSON files carry (none for CSV files and figures).
    report : str
        ``rendered`` (a section of its own) or ``listed`` (in "Other outputs", with why).
    what : str
        One sentence: what the files hold (for ``listed`` kinds, also why the report does not draw them).
    """

    name: str
    formats: tuple[str, ...]
    report: str
    what: str


def _load() -> dict[str, Any]:
    document = json.loads(resources.files(__package__).joinpath("formats.json").read_text(encoding="utf-8"))
    assert isinstance(document, dict)
    return document


_REGISTRY = _load()

FORMATS: Mapping[str, Mapping[str, str]] = _REGISTRY["formats"]
"""Format tag → what the file is, who writes it and who reads it."""

KINDS: Mapping[str, Kind] = {
    name: Kind(name, tuple(entry["formats"]), entry["report"], entry["what"])
    for name, entry in _REGISTRY["kinds"].items()
}
"""Manifest kind → :class:`Kind`."""

_BY_NAME = {tag_.split("/")[0].removeprefix("terrain."): tag_ for tag_ in FORMATS}


def tag(name: str) -> str:
    """The registered tag of a format, by its name: ``tag("latency")`` is ``terrain.latency/1``.

    Parameters
    ----------
    name : str
        The part between ``terrain.`` and ``/``.

    Returns
    -------
    str

    Raises
    ------
    KeyError
        If no format of that name is registered (a programming error).
    """
    return _BY_NAME[name]


def check_format(document: Any, expected: str | Sequence[str], source: str) -> dict[str, Any]:
    """``document`` if it is a JSON object whose ``format`` is one of ``expected``.

    Parameters
    ----------
    document : Any
        Parsed JSON.
    expected : str or sequence of str
        Registered tags.
    source : str
        Names the document in the message (a file).

    Returns
    -------
    dict

    Raises
    ------
    ValueError
        ``SOURCE: format FOUND, expected 'terrain.<name>/<n>' or ...``.
    """
    tags = [expected] if isinstance(expected, str) else list(expected)
    unknown = [t for t in tags if t not in FORMATS]
    if unknown:
        raise KeyError(f"format tags {unknown} are not in the registry (spec/formats.json)")
    found = document.get("format") if isinstance(document, dict) else None
    if found not in tags:
        raise ValueError(f"{source}: format {found!r}, expected {' or '.join(repr(t) for t in tags)}")
    assert isinstance(document, dict)
    return document


def read_document(path: str | os.PathLike[str], expected: str | Sequence[str]) -> dict[str, Any]:
    """Read a JSON file and check its format (:func:`check_format`), naming the file in every error.

    Parameters
    ----------
    path : str or path-like
    expected : str or sequence of str
        Registered tags.

    Returns
    -------
    dict

    Raises
    ------
    OSError
        If it cannot be read.
    ValueError
        If it is not JSON, holds a NaN or an infinity, or has another format.
    """
    source = str(path)
    try:
        document = loads_json(Path(path).read_text(encoding="utf-8"), source)
    except json.JSONDecodeError as error:
        raise ValueError(f"{source}: not JSON ({error})") from None
    return check_format(document, expected, source)

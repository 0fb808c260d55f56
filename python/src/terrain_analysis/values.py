"""Checks on the numbers read from terrain's files: no NaN, no infinity, no negative measurement.

terrain's writers never put a NaN, an infinity or a negative time, size or count in a
file; one that is there was typed in, cut short or corrupted, and a summary of it would
be wrong without a word (a median of ``nan``, a minimum of −500 ms). Every reader of
the package goes through these functions and each file has one rule, written in
docs/CLI.md ("terrain-analysis: the numbers it reads"):

* tables of measurements (``durations.csv``, ``sweep.csv``, ``collective.json``,
  ``attributes.csv``) are **rejected**: the reader raises :class:`ValueError` naming the
  file, the row (line or JSON path) and the value;
* ``events.jsonl`` is a stream of independent events: a bad one is **skipped with a
  warning** (:class:`DataWarning`) naming the file and the line, and the others are kept.

JSON has no NaN or infinity, but Python's ``json`` module accepts ``NaN``, ``Infinity``
and overflowing literals such as ``1e999``; :func:`loads_json` rejects them, naming where
they are.

Examples
--------
>>> measurement(12.5, "sweep.csv line 3", "throughput")
12.5
>>> measurement(float("nan"), "sweep.csv line 3", "throughput")
Traceback (most recent call last):
...
ValueError: sweep.csv line 3: throughput is nan, expected a finite number >= 0
>>> loads_json('{"results": [{"median_us": NaN}]}', "collective.json")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
terrain_analysis.values.NonFiniteError: collective.json: results[0].median_us is NaN, expected a finite number ...
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["DataWarning", "NonFiniteError", "loads_json", "measurement", "non_finite_path"]


class DataWarning(UserWarning):
    """A value a reader skipped (the message names the file, the line and the value)."""


class NonFiniteError(ValueError):
    """JSON text that parses, but holds a NaN, an infinity or a number too large for a float."""


class _Constant(float):
    """A NaN or infinity as the JSON text spelled it."""

    literal: str

    def __new__(cls, literal: str) -> _Constant:
        value = super().__new__(cls, float(literal))
        value.literal = literal
        return value


def loads_json(text: str, source: str) -> Any:
    """Parse JSON text, rejecting NaN, infinities and numbers too large for a float.

    Parameters
    ----------
    text : str
        The JSON text.
    source : str
        Names the text in messages (a file name, ``file line N``).

    Returns
    -------
    Any
        The document.

    Raises
    ------
    json.JSONDecodeError
        If the text is not JSON (a ValueError).
    NonFiniteError
        If it holds a non-finite number (a ValueError); the message names ``source`` and
        the JSON path.
    """
    document = json.loads(text, parse_constant=_Constant)
    path = non_finite_path(document)
    if path is not None:
        where, value = path
        spelled = value.literal if isinstance(value, _Constant) else repr(value)
        raise NonFiniteError(
            f"{source}: {where or 'the document'} is {spelled}, expected a finite number (JSON has no NaN or infinity)"
        )
    return document


def non_finite_path(document: Any, prefix: str = "") -> tuple[str, float] | None:
    """The JSON path of the first NaN or infinity in a parsed document, and the value.

    Parameters
    ----------
    document : Any
        Parsed JSON.
    prefix : str
        The path of ``document`` itself.

    Returns
    -------
    (str, float) or None
        ``("results[3].median_us", nan)``; None when every number is finite.
    """
    if isinstance(document, float):
        return None if math.isfinite(document) else (prefix, document)
    if isinstance(document, dict):
        for key, value in document.items():
            found = non_finite_path(value, f"{prefix}.{key}" if prefix else str(key))
            if found is not None:
                return found
    elif isinstance(document, list):
        for index, value in enumerate(document):
            found = non_finite_path(value, f"{prefix}[{index}]")
            if found is not None:
                return found
    return None


def measurement(value: float, where: str, name: str) -> float:
    """``value`` if it is a finite number ≥ 0 (a time, a size, a count, a rate).

    Parameters
    ----------
    value : float
        The number read.
    where : str
        The file and row (``sweep.csv line 3``, ``collective.json results[2]``).
    name : str
        The column or field.

    Returns
    -------
    float
        ``value``.

    Raises
    ------
    ValueError
        If ``value`` is NaN, infinite or negative; the message names ``where`` and ``name``.
    """
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{where}: {name} is {value!r}, expected a finite number >= 0")
    return value

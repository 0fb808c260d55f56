"""Read durations CSV files written by ``terrain write-test`` and ``terrain time-task``.

The format (docs/DESIGN.md, "File formats"): a header line, then one row per
run, with columns at least ``run`` and ``total_s`` and one column per measured
part (for instance ``open_s``, ``write_s``, ``close_s``). Values are seconds.
When the file has a ``status`` column (``terrain time-task`` marks runs in which a
node failed or missed the deadline as ``failed``), only rows whose status is ``ok``
are read: a failed run's time is not a duration of the task.

Examples
--------
>>> from terrain_analysis.durations import read_durations
>>> totals = read_durations("runs/20240607T101500Z/durations.csv")  # doctest: +SKIP
>>> writes = read_durations("runs/20240607T101500Z/durations.csv", column="write_s")  # doctest: +SKIP
"""

from __future__ import annotations

import csv
import math
import os
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

__all__ = ["DEFAULT_COLUMN", "read_durations"]

DEFAULT_COLUMN = "total_s"
"""The column the analysis reads unless told otherwise: the duration of a whole run."""


def read_durations(path: str | os.PathLike[str], column: str = DEFAULT_COLUMN) -> NDArray[np.float64]:
    """Read one column of a durations CSV file.

    Parameters
    ----------
    path : str or path-like
        The CSV file.
    column : str, default "total_s"
        Header of the column to read.

    Returns
    -------
    ndarray
        The values in file order.

    Raises
    ------
    OSError
        If the file cannot be opened or read.
    ValueError
        If the file has no header, lacks ``column`` (the message lists the columns there are),
        or a row's value is missing or not a number.
    """
    path = Path(path)
    with path.open(newline="", encoding="utf-8") as stream:
        reader = csv.reader(stream)
        header = next(reader, None)
        if header is None or not any(name.strip() for name in header):
            raise ValueError(f"'path' must be a CSV file with a header line, got empty file {str(path)!r}")
        names = [name.strip() for name in header]
        if column not in names:
            raise ValueError(
                f"'column' must name a column of {str(path)!r}, got {column!r}; its columns are {', '.join(names)}"
            )
        index = names.index(column)
        status = names.index("status") if "status" in names else None
        values = []
        for row in reader:
            if not row or (len(row) == 1 and not row[0].strip()):
                continue  # a blank line, e.g. at the end of the file
            line = reader.line_num
            if status is not None and status < len(row) and row[status].strip() != "ok":
                continue  # a failed run: its time is not a duration of the task
            if index >= len(row) or not row[index].strip():
                raise ValueError(f"line {line} of {str(path)!r} has no value in column {column!r}")
            text = row[index].strip()
            try:
                value = float(text)
            except ValueError:
                raise ValueError(
                    f"line {line} of {str(path)!r} holds {text!r} in column {column!r}, not a number"
                ) from None
            if not math.isfinite(value):
                raise ValueError(
                    f"line {line} of {str(path)!r} holds {text!r} in column {column!r}, not a finite number"
                )
            values.append(value)
    return np.array(values, dtype=float)

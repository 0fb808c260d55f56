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
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

__all__ = ["DEFAULT_COLUMN", "DurationTable", "read_duration_table", "read_durations"]

DEFAULT_COLUMN = "total_s"
"""The column the analysis reads unless told otherwise: the duration of a whole run."""


@dataclass(frozen=True)
class DurationTable:
    """The successful runs of a durations CSV file.

    Attributes
    ----------
    runs : list of int
        Each value's run: the ``run`` column when it holds a whole number, else the row's
        position among the file's rows (1-based).
    values : ndarray
        The column's values, in file order, seconds.
    failed : int
        Rows whose ``status`` is not ``ok`` (not read).
    """

    runs: list[int]
    values: NDArray[np.float64]
    failed: int


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
        or a row's value is missing, not a number, not finite or negative (a duration is
        never negative: the file is rejected, naming the line).
    """
    return read_duration_table(path, column).values


def read_duration_table(path: str | os.PathLike[str], column: str = DEFAULT_COLUMN) -> DurationTable:
    """Read one column of a durations CSV file with the run of each value (see :func:`read_durations`).

    Parameters
    ----------
    path : str or path-like
    column : str, default "total_s"

    Returns
    -------
    DurationTable
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
        run = names.index("run") if "run" in names else None
        values = []
        runs = []
        failed = 0
        position = 0
        for row in reader:
            if not row or (len(row) == 1 and not row[0].strip()):
                continue  # a blank line, e.g. at the end of the file
            position += 1
            line = reader.line_num
            if status is not None and status < len(row) and row[status].strip() != "ok":
                failed += 1
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
            if not math.isfinite(value) or value < 0:
                raise ValueError(
                    f"line {line} of {str(path)!r} holds {text!r} in column {column!r}, not a finite number >= 0"
                )
            values.append(value)
            label = row[run].strip() if run is not None and run < len(row) else ""
            runs.append(int(label) if label.isdigit() else position)
    return DurationTable(runs, np.array(values, dtype=float), failed)

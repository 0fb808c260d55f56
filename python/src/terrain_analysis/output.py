"""Writing output files whole or not at all.

Every file the package writes (``fit.json``, ``topology.json``, the report's HTML, each
figure) goes through :func:`write_atomically`: the bytes go to a temporary file beside
the target, which is renamed over it once complete. A full disk, a read-only directory
or a missing one leaves the old file (if any) untouched and no temporary file behind,
and raises :class:`OutputError`, an ``OSError`` whose ``filename`` is the file that was
to be written (not the input it was made from), so the command line can say
``cannot write OUT/report.html: No space left on device``.

Figures are drawn into memory first (:func:`save_figure`), so they take the same path.

Examples
--------
>>> import tempfile, pathlib
>>> directory = pathlib.Path(tempfile.mkdtemp())
>>> write_atomically(directory / "a.json", '{"format": "terrain.gev/1"}\\n').name
'a.json'
>>> sorted(p.name for p in directory.iterdir())
['a.json']
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

__all__ = ["OutputError", "make_directory", "save_figure", "write_atomically"]


class OutputError(OSError):
    """An output file could not be written; ``filename`` names it, ``strerror`` says why."""


def write_atomically(path: str | os.PathLike[str], data: str | bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same directory and a rename.

    Parameters
    ----------
    path : str or path-like
        The file to write (replaced if it exists).
    data : str or bytes
        Text is written as UTF-8.

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    OutputError
        If the directory refuses the temporary file, the bytes or the rename (full disk,
        read-only, missing); the temporary file is removed first.
    """
    path = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as error:
        raise OutputError(error.errno, error.strerror, str(path)) from None
    try:
        with os.fdopen(descriptor, "wb") as stream:
            stream.write(payload)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, 0o666 & ~_umask())
        os.replace(temporary, path)
    except BaseException as error:  # an interrupt too: no temporary file is left behind
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        if isinstance(error, OSError):
            raise OutputError(error.errno, error.strerror, str(path)) from None
        raise
    return path


def make_directory(path: str | os.PathLike[str]) -> Path:
    """Create an output directory and its parents if missing.

    Parameters
    ----------
    path : str or path-like

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    OutputError
        If it cannot be created (``filename`` names it).
    """
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise OutputError(error.errno, error.strerror, str(error.filename or path)) from None
    return path


def save_figure(figure: Figure, path: str | os.PathLike[str], **options: Any) -> Path:
    """Draw ``figure`` into memory with ``figure.savefig(buffer, **options)`` and write it atomically.

    Parameters
    ----------
    figure : matplotlib.figure.Figure
    path : str or path-like
        The image file; its suffix is the format unless ``options`` has ``format``.
    **options
        Passed to ``savefig`` (``dpi``, ``metadata``, ...).

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    OutputError
        As :func:`write_atomically`.
    """
    path = Path(path)
    options.setdefault("format", path.suffix.lstrip(".") or "png")
    buffer = io.BytesIO()
    figure.savefig(buffer, **options)
    return write_atomically(path, buffer.getvalue())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask

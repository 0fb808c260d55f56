"""The report's data model: a run directory and its manifest entries, the blocks a section is made of
(text, tables, figures), and the readers renderers share (an entry's JSON with its format checked against the
registry, a CSV file with no NaN or infinity)."""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure as MplFigure

from terrain_analysis.formats import check_format, read_document, tag
from terrain_analysis.values import loads_json

MANIFEST_FORMAT = tag("manifest")
"""The format of ``manifest.json`` this module reads."""


TABLE_ROW_LIMIT = 40  # rows of a CSV file or JSON list shown; the rest are counted


IMAGE_TYPES = {".svg": "image/svg+xml", ".png": "image/png"}


@dataclass(frozen=True)
class Entry:
    """One output listed in a manifest.

    Attributes
    ----------
    kind : str
        What the file holds (``cluster``, ``latency``, ...).
    file : str
        The file, relative to the run directory.
    parameters : dict
        How it was produced; ``command`` (when the writer knew it) is the command that made it.
    """

    kind: str
    file: str
    parameters: dict[str, Any] = field(default_factory=dict)


@dataclass
class Run:
    """A run directory and its manifest.

    Attributes
    ----------
    directory : Path
        The run directory.
    manifest : dict
        ``manifest.json`` as read.
    entries : list of Entry
        Its outputs, in manifest order.
    cache : dict
        Results shared between renderers of the same run (e.g. one topology discovery for the
        latency and topology sections).
    """

    directory: Path
    manifest: dict[str, Any]
    entries: list[Entry]
    cache: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The run directory's own name (its UTC stamp)."""
        return self.directory.resolve().name

    def path(self, entry_or_file: Entry | str) -> Path:
        """The path of a file of the run; raises ``ValueError`` for one outside the directory."""
        file = entry_or_file.file if isinstance(entry_or_file, Entry) else entry_or_file
        path = (self.directory / file).resolve()
        if not path.is_relative_to(self.directory.resolve()):
            raise ValueError(f"'file' {file!r} in {self.directory / 'manifest.json'} lies outside the run directory")
        return path

    def command(self, entry: Entry) -> str:
        """The command that made ``entry``: its ``command`` parameter, else ``terrain <manifest kind>``."""
        command = entry.parameters.get("command")
        if isinstance(command, str) and command:
            return command
        return f"terrain {self.manifest.get('kind', '?')}"

    def first(self, kind: str) -> Entry | None:
        """The first entry of ``kind`` in the manifest, if any."""
        return next((e for e in self.entries if e.kind == kind), None)


@dataclass(frozen=True)
class Text:
    """A paragraph (plain text; escaped when rendered)."""

    text: str


@dataclass(frozen=True)
class Pre:
    """Preformatted text, a command's output as it printed it (escaped when rendered)."""

    text: str
    caption: str = ""


@dataclass(frozen=True)
class Table:
    """A table of values; ``None`` shows as a dash, floats with 4 significant digits.

    Attributes
    ----------
    columns : list of str
    rows : list of list
    caption : str
        What the table shows (may be empty).
    """

    columns: list[str]
    rows: list[list[Any]]
    caption: str = ""


@dataclass(frozen=True)
class Figure:
    """An image embedded in the page.

    Attributes
    ----------
    title : str
        Shown above the image (the image carries its own title and axis labels).
    data : bytes
        The image file's bytes.
    media_type : str
        ``image/svg+xml`` or ``image/png``.
    caption : str
        What the figure shows.
    command : str
        The command that made it.
    """

    title: str
    data: bytes
    media_type: str
    caption: str
    command: str


Block = Text | Pre | Table | Figure
"""What a section is made of."""


@dataclass(frozen=True)
class Section:
    """What a renderer returns for one manifest entry.

    Attributes
    ----------
    title : str
        The heading of the kind's section (``Cluster``, ``Latency``, ...).
    blocks : list of Block
    """

    title: str
    blocks: list[Block]


Renderer = Callable[[Entry, Run], Section]
"""A function from a manifest entry and its run to a section."""


def read_run(directory: str | os.PathLike[str]) -> Run:
    """Read a run directory's ``manifest.json``.

    Parameters
    ----------
    directory : str or path-like
        A run directory (``runs/<stamp>``).

    Returns
    -------
    Run

    Raises
    ------
    OSError
        If the manifest cannot be read.
    ValueError
        If it is not a ``terrain.manifest/1`` document or an output lacks ``kind`` or ``file``.
    """
    directory = Path(directory)
    path = directory / "manifest.json"
    manifest = read_document(path, MANIFEST_FORMAT)
    outputs = manifest.get("outputs", [])
    if not isinstance(outputs, list):
        raise ValueError(f"'directory' {str(directory)!r}: manifest.json 'outputs' must be a list, got {outputs!r}")
    entries = []
    for k, output in enumerate(outputs):
        if not (
            isinstance(output, dict) and isinstance(output.get("kind"), str) and isinstance(output.get("file"), str)
        ):
            raise ValueError(
                f"'directory' {str(directory)!r}: manifest.json output {k} must have a 'kind' and a 'file', "
                f"got {output!r}"
            )
        parameters = output.get("parameters") or {}
        entries.append(Entry(output["kind"], output["file"], parameters if isinstance(parameters, dict) else {}))
    return Run(directory, manifest, entries)


def read_json(run: Run, entry: Entry, formats: Sequence[str]) -> dict[str, Any]:
    """Read an entry's JSON file (no NaN, no infinity) and check its ``format`` is one of ``formats``
    (registered tags: :func:`terrain_analysis.formats.check_format`)."""
    try:
        document = loads_json(run.path(entry).read_text(), entry.file)
    except json.JSONDecodeError as error:
        raise ValueError(f"{entry.file}: not JSON ({error})") from None
    return check_format(document, formats, entry.file)


def read_csv(path: Path, name: str) -> tuple[list[str], list[dict[str, str]]]:
    """A CSV file's columns and rows; a NaN or infinite cell rejects the file (``name`` names it)."""
    with path.open(newline="") as stream:
        reader = csv.DictReader(stream)
        rows = []
        for row in reader:
            for column, cell in row.items():
                if isinstance(cell, str) and _non_finite(cell):
                    raise ValueError(
                        f"{name} line {reader.line_num}: {column} is {cell.strip()!r}, expected a finite number"
                    )
            rows.append(row)
        return list(reader.fieldnames or []), rows


def _non_finite(cell: str) -> bool:
    try:
        return not math.isfinite(float(cell))
    except ValueError:
        return False


def figure_from_matplotlib(figure: MplFigure, *, title: str, caption: str, command: str) -> Figure:
    """Render a matplotlib figure to SVG for the page.

    Parameters
    ----------
    figure : matplotlib.figure.Figure
        With its own title and axis labels.
    title, caption, command : str
        See :class:`Figure`.

    Returns
    -------
    Figure
    """
    buffer = io.BytesIO()
    # Text as paths: the page shows exactly the fonts matplotlib laid the figure out with.
    with matplotlib.rc_context({"svg.hashsalt": "terrain", "svg.fonttype": "path"}):
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    return Figure(title, buffer.getvalue(), "image/svg+xml", caption, command)


def figure_from_file(run: Run, file: str, *, title: str, caption: str, command: str) -> Figure:
    """Embed an image file of the run (``.svg`` or ``.png``).

    Parameters
    ----------
    run : Run
    file : str
        Relative to the run directory.
    title, caption, command : str
        See :class:`Figure`.

    Returns
    -------
    Figure

    Raises
    ------
    ValueError
        If the file is neither SVG nor PNG, or is not what its extension says.
    OSError
        If it cannot be read.
    """
    path = run.path(file)
    media_type = IMAGE_TYPES.get(path.suffix.lower())
    if media_type is None:
        raise ValueError(f"'file' {file!r} is not an image the report embeds (.svg or .png)")
    data = path.read_bytes()
    if media_type == "image/png" and not data.startswith(b"\x89PNG\r\n\x1a\n"):
        raise ValueError(f"'file' {file!r} is not a PNG file")
    if media_type == "image/svg+xml" and b"<svg" not in data[:4096]:
        raise ValueError(f"'file' {file!r} is not an SVG file")
    return Figure(title, data, media_type, caption, command)


def preferred_images(files: Sequence[str]) -> list[str]:
    """One file per stem, in the order given: the PNG where both PNG and SVG exist (a tool's SVG may
    leave its text to the browser's fonts, which need not match the ones it was laid out with)."""
    stems: dict[str, str] = {}
    for file in files:
        stem, suffix = os.path.splitext(file)
        if suffix.lower() not in IMAGE_TYPES:
            continue
        if stem not in stems or suffix.lower() == ".png":
            stems[stem] = file
    return list(stems.values())


def new_figure(width: float, height: float) -> tuple[MplFigure, Any]:
    figure = MplFigure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    return figure, figure.subplots()


def report_command(run: Run) -> str:
    return f"terrain report {run.directory}"


def table_cell(value: Any) -> Any:
    if value is None:
        return "undefined"
    if isinstance(value, dict | list):
        return json.dumps(value)
    return value

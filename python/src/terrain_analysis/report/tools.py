"""Sections of the tools' outputs: JSON summaries and CSV files as tables, figures, events."""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from terrain_analysis.events import read_events
from terrain_analysis.report.model import (
    IMAGE_TYPES,
    TABLE_ROW_LIMIT,
    Block,
    Entry,
    Figure,
    Renderer,
    Run,
    Section,
    Table,
    Text,
    figure_from_file,
    preferred_images,
    read_csv,
    read_json,
    table_cell,
)
from terrain_analysis.values import DataWarning


def _summary_tables(document: Mapping[str, Any], *, skip: Sequence[str] = ("format",)) -> list[Block]:
    """A JSON summary as tables: scalars as one key/value table, each list of objects and each object
    of objects as a table of its own (nested objects flattened to dotted columns)."""
    scalars: list[list[Any]] = []
    blocks: list[Block] = []
    for key, value in document.items():
        if key in skip:
            continue
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            blocks.append(_records_table([_flatten(v) for v in value], f"{key} ({len(value)})"))
        elif isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
            records = [{"": name, **_flatten(v)} for name, v in value.items()]
            blocks.append(_records_table(records, f"{key} ({len(value)})"))
        elif isinstance(value, dict):
            scalars.extend([f"{key}.{k}", table_cell(v)] for k, v in _flatten(value).items())
        else:
            scalars.append([key, table_cell(value)])
    if scalars:
        blocks.insert(0, Table(["", "value"], scalars, ""))
    return blocks


def _flatten(value: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, item in value.items():
        name = f"{prefix}{key}"
        if isinstance(item, dict):
            flat.update(_flatten(item, name + "."))
        else:
            flat[name] = item
    return flat


def _records_table(records: Sequence[Mapping[str, Any]], caption: str) -> Table:
    columns: list[str] = []
    for record in records:
        columns.extend(k for k in record if k not in columns)
    rows = [[table_cell(r.get(c)) if c in r else None for c in columns] for r in records[:TABLE_ROW_LIMIT]]
    if len(records) > TABLE_ROW_LIMIT:
        caption += f"; the first {TABLE_ROW_LIMIT} rows of {len(records)}"
    return Table(columns, rows, caption)


def _csv_table(run: Run, entry: Entry) -> Table:
    columns, rows = read_csv(run.path(entry), entry.file)
    shown = [[row.get(c) for c in columns] for row in rows[:TABLE_ROW_LIMIT]]
    note = f"; the first {TABLE_ROW_LIMIT} of {len(rows)} rows" if len(rows) > TABLE_ROW_LIMIT else ""
    return Table(columns, shown, f"{entry.file}{note}, made by {run.command(entry)}.")


def _listed_figures(entry: Entry, run: Run) -> list[Figure]:
    """Figures of an entry: the entry's file itself when it is an image, and the files in its
    ``figures`` or ``plots`` parameter (relative to the run directory, or to the entry's directory)."""
    files: list[str] = []
    if os.path.splitext(entry.file)[1].lower() in IMAGE_TYPES:
        files.append(entry.file)
    for key in ("figures", "plots"):
        listed = entry.parameters.get(key)
        if isinstance(listed, list):
            for item in listed:
                item = str(item)
                beside = os.path.join(os.path.dirname(entry.file), item)
                files.append(item if (run.directory / item).exists() or not os.path.dirname(entry.file) else beside)
    listed_captions = entry.parameters.get("captions")
    captions: dict[str, Any] = listed_captions if isinstance(listed_captions, dict) else {}
    figures = []
    for file in preferred_images(files):
        stem = os.path.splitext(os.path.basename(file))[0]
        caption = str(captions.get(stem) or entry.parameters.get("caption") or f"{os.path.basename(file)}.")
        title = str(entry.parameters.get("title") or stem.replace("_", " "))
        figures.append(figure_from_file(run, file, title=title, caption=caption, command=run.command(entry)))
    return figures


def summary_renderer(
    title: str, formats: Sequence[str], checks: Mapping[str, Callable[[Path], object]] | None = None
) -> Renderer:
    """A renderer for a tool's outputs: JSON summaries (``format`` one of ``formats``)
    as tables, CSV files as tables, images as figures.

    Parameters
    ----------
    title : str
        The section heading.
    formats : sequence of str
        Accepted ``format`` tags of JSON files (registered: a kind's ``KINDS[kind].formats``).
    checks : mapping of str to callable, optional
        Readers that check a file's values before it is shown, by the JSON file's format
        (``terrain.collective/1``) or the CSV file's name (``sweep.csv``); they raise
        ``ValueError`` naming the row (a NaN, a negative time).

    Returns
    -------
    Renderer
    """
    checks = dict(checks or {})

    def render(entry: Entry, run: Run) -> Section:
        suffix = os.path.splitext(entry.file)[1].lower()
        blocks: list[Block] = []
        if suffix == ".json":
            document = read_json(run, entry, formats)
            check = checks.get(str(document.get("format")))
            if check is not None:
                check(run.path(entry))
            blocks.append(Text(f"{entry.file} ({document.get('format')}), made by {run.command(entry)}."))
            blocks.extend(_summary_tables(document))
        elif suffix == ".csv":
            check = checks.get(os.path.basename(entry.file))
            if check is not None:
                check(run.path(entry))
            blocks.append(_csv_table(run, entry))
        elif suffix not in IMAGE_TYPES:
            blocks.append(Text(f"{entry.file} (not rendered: neither JSON, CSV nor an image)."))
        blocks.extend(_listed_figures(entry, run))
        return Section(title, blocks)

    render.__doc__ = f"{title}: JSON ({', '.join(formats)}), CSV and image files of the kind."
    return render


def render_events(entry: Entry, run: Run) -> Section:
    """``events``: ``trace.json`` (Chrome trace-event format) summarised; timeline figures embedded."""
    suffix = os.path.splitext(entry.file)[1].lower()
    blocks: list[Block] = []
    if suffix == ".json":
        try:
            document = json.loads(run.path(entry).read_text())
        except json.JSONDecodeError as error:
            raise ValueError(f"{entry.file}: not JSON ({error})") from None
        events = document.get("traceEvents") if isinstance(document, dict) else document
        if not isinstance(events, list):
            raise ValueError(f"{entry.file}: neither a list of trace events nor an object with 'traceEvents'")
        timed = [e for e in events if isinstance(e, dict) and isinstance(e.get("ts"), int | float)]
        tracks = {(e.get("pid"), e.get("tid")) for e in timed}
        names: dict[str, int] = {}
        for e in timed:
            names[str(e.get("name"))] = names.get(str(e.get("name")), 0) + 1
        span = (max(e["ts"] + (e.get("dur") or 0) for e in timed) - min(e["ts"] for e in timed)) if timed else 0
        blocks.append(
            Table(
                ["", "value"],
                [["events", len(events)], ["tracks (pid, tid)", len(tracks)], ["time span (ms)", span / 1000]],
                f"{entry.file} in the Chrome trace-event format (open it in ui.perfetto.dev); made by "
                f"{run.command(entry)}.",
            )
        )
        blocks.append(
            Table(
                ["event name", "count"],
                [[k, v] for k, v in sorted(names.items(), key=lambda kv: -kv[1])][:TABLE_ROW_LIMIT],
                "Events by name, most frequent first.",
            )
        )
    elif suffix == ".jsonl":
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", DataWarning)
            header, events = read_events(run.path(entry))
        skipped = [str(w.message) for w in caught if issubclass(w.category, DataWarning)]
        names = {}
        for event in events:
            name = str(event.get("name"))
            names[name] = names.get(name, 0) + 1
        blocks.append(
            Table(
                ["", "value"],
                [
                    ["format", header.get("format")],
                    ["events", len(events)],
                    ["names", len(names)],
                    ["events skipped (a NaN, an infinity or a negative time)", len(skipped)],
                ],
                f"{entry.file}: raw events, one JSON object a line; made by {run.command(entry)}.",
            )
        )
        for message in skipped:
            blocks.append(Text(f"Skipped: {message}."))
            warnings.warn(message, DataWarning, stacklevel=2)
        blocks.append(
            Table(
                ["event name", "count"],
                [[k, v] for k, v in sorted(names.items(), key=lambda kv: -kv[1])][:TABLE_ROW_LIMIT],
                "Events by name, most frequent first.",
            )
        )
    elif suffix == ".csv":
        blocks.append(_csv_table(run, entry))
    blocks.extend(_listed_figures(entry, run))
    return Section("Events", blocks)

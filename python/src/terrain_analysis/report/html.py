"""The page: sections side by side per run, tables and figures as HTML, one self-contained file."""

from __future__ import annotations

import base64
import html
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from terrain_analysis import __version__
from terrain_analysis.output import write_atomically
from terrain_analysis.report.model import (
    Block,
    Entry,
    Pre,
    Run,
    Section,
    Table,
    Text,
    read_run,
)
from terrain_analysis.report.registry import LISTED_KINDS, RENDERERS

_CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: #1d2327;
       margin: 0; background: #f6f7f8; }
pre { background: #f1f3f5; padding: .6em .9em; overflow-x: auto; font-size: .82em; line-height: 1.3; }
p.pre-caption { margin: .9em 0 .2em; font-weight: 600; }
header { background: #24313a; color: #fff; padding: 1.2em 2em; }
header h1 { margin: 0 0 .3em; font-size: 1.6em; }
header p { margin: .2em 0; color: #d5dde2; }
header code { background: #33434e; color: #e8eef2; }
nav { padding: .6em 2em; background: #e9edf0; border-bottom: 1px solid #cfd6db; }
nav a { margin-right: 1.2em; color: #1f5c8a; text-decoration: none; }
main { padding: 0 2em 2em; }
section.kind { background: #fff; margin: 1.4em 0; padding: .8em 1.4em 1.2em; border: 1px solid #dde2e6;
               border-radius: 6px; }
section.kind > h2 { margin: .2em 0 .6em; font-size: 1.35em; border-bottom: 2px solid #3d7ab8; padding-bottom: .2em; }
.runs { display: grid; grid-template-columns: repeat(var(--runs), minmax(0, 1fr)); gap: 1.6em; }
.run > h3 { margin: .4em 0; font-size: 1em; color: #555; }
.entry > h4 { margin: .8em 0 .3em; font-size: .95em; font-family: ui-monospace, monospace; color: #444; }
div.table { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; margin: .5em 0 1em; font-size: .85em; }
th, td { border: 1px solid #d7dce0; padding: .2em .55em; text-align: left; vertical-align: top; }
th { background: #eef2f5; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
caption { caption-side: bottom; text-align: left; color: #555; font-size: .92em; padding-top: .3em; }
figure { margin: 1em 0 1.4em; }
figure img { max-width: 100%; height: auto; border: 1px solid #e3e6e9; background: #fff; }
figcaption { color: #444; font-size: .9em; max-width: 60em; }
figcaption .command, code { font-family: ui-monospace, monospace; font-size: .92em; background: #f0f2f4;
                            padding: 0 .25em; }
.error { color: #9b1c1c; background: #fdecec; border: 1px solid #f3b9b9; padding: .5em .8em; }
.missing { color: #777; font-style: italic; }
footer { color: #777; font-size: .85em; padding: 1em 2em 2em; }
"""


def _escape(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _format_cell(value: Any) -> tuple[str, bool]:
    if value is None:
        return "–", False
    if isinstance(value, bool):
        return str(value).lower(), False
    if isinstance(value, int):
        return f"{value}", True
    if isinstance(value, float):
        if not math.isfinite(value):
            return "–", False  # the readers reject NaN and infinities; a computed one is shown as no value
        if abs(value) >= 1e7 or (0 < abs(value) < 1e-4):
            return f"{value:.4e}", True
        return (f"{value:.1f}" if abs(value) >= 1000 else f"{value:.4g}"), True
    return str(value), False


def _html_block(block: Block, number: list[int]) -> str:
    if isinstance(block, Text):
        return f"<p>{_escape(block.text)}</p>"
    if isinstance(block, Pre):
        caption = f'<p class="pre-caption">{_escape(block.caption)}</p>' if block.caption else ""
        return f"{caption}<pre>{_escape(block.text)}</pre>"
    if isinstance(block, Table):
        head = "".join(f"<th>{_escape(c)}</th>" for c in block.columns)
        body = []
        for row in block.rows:
            cells = []
            for value in row:
                text, numeric = _format_cell(value)
                cells.append(f'<td class="num">{_escape(text)}</td>' if numeric else f"<td>{_escape(text)}</td>")
            body.append("<tr>" + "".join(cells) + "</tr>")
        caption = f"<caption>{_escape(block.caption)}</caption>" if block.caption else ""
        return (
            f'<div class="table"><table>{caption}<thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody>'
            "</table></div>"
        )
    number[0] += 1
    encoded = base64.b64encode(block.data).decode("ascii")
    return (
        f'<figure><img src="data:{block.media_type};base64,{encoded}" alt="{_escape(block.title)}">'
        f"<figcaption><b>Figure {number[0]}. {_escape(block.title)}.</b> {_escape(block.caption)} "
        f'Made by <span class="command">{_escape(block.command)}</span>.</figcaption></figure>'
    )


@dataclass(frozen=True)
class _Rendered:
    run: Run
    entry: Entry
    section: Section | None
    error: str | None


def _render(run: Run, entry: Entry) -> _Rendered:
    renderer = RENDERERS[entry.kind]
    try:
        return _Rendered(run, entry, renderer(entry, run), None)
    except OSError as error:
        where = os.path.relpath(error.filename, run.directory) if error.filename else entry.file
        return _Rendered(run, entry, None, f"{where}: {error.strerror or error}")
    except (ValueError, KeyError, TypeError) as error:  # ValueErrors name their file; the others are bad data
        text = str(error)
        detail = text if entry.file in text else f"{entry.file}: {type(error).__name__} {text}"
        return _Rendered(run, entry, None, detail)


def build_report(directories: Sequence[str | os.PathLike[str]]) -> tuple[str, list[str]]:
    """The HTML page for run directories, and the errors of sections that could not be rendered.

    Parameters
    ----------
    directories : sequence of str or path-like
        One or more run directories; several are shown side by side.

    Returns
    -------
    html : str
        The page.
    errors : list of str
        One line per entry whose renderer failed (the page shows it in place of the section).

    Raises
    ------
    ValueError
        If ``directories`` is empty or a manifest is not valid.
    OSError
        If a manifest cannot be read.
    """
    if not directories:
        raise ValueError("'directories' must name at least one run directory, got none")
    runs = [read_run(d) for d in directories]
    kinds = [k for k in RENDERERS if any(run.first(k) for run in runs)]
    unknown = sorted({e.kind for run in runs for e in run.entries if e.kind not in RENDERERS})
    errors: list[str] = []
    figure_number = [0]
    sections = []
    headings: list[tuple[str, str]] = []
    for kind in kinds:
        columns = []
        title = None
        for run in runs:
            parts = []
            for entry in (e for e in run.entries if e.kind == kind):
                rendered = _render(run, entry)
                heading = f"<h4>{_escape(entry.file)}</h4>"
                if rendered.section is not None:
                    title = title or rendered.section.title
                    body = "".join(_html_block(b, figure_number) for b in rendered.section.blocks)
                else:
                    errors.append(f"{run.directory}: {rendered.error}")
                    body = f'<p class="error">Could not render this output: {_escape(rendered.error)}</p>'
                parts.append(f'<div class="entry">{heading}{body}</div>')
            if not parts:
                parts.append('<p class="missing">Not in this run.</p>')
            columns.append(_run_column(run, runs, "".join(parts)))
        headings.append((kind, title or kind))
        sections.append(_section(kind, title or kind, columns, len(runs)))
    if unknown:
        columns = []
        for run in runs:
            rows = [
                f"<tr><td>{_escape(e.kind)}</td><td><code>{_escape(e.file)}</code></td>"
                f"<td class=\"num\">{_escape(_size(run, e))}</td><td>{_escape(run.command(e))}</td>"
                f"<td>{_escape(LISTED_KINDS.get(e.kind, 'a kind this report does not know'))}</td></tr>"
                for e in run.entries
                if e.kind not in RENDERERS
            ]
            body = (
                "<table><caption>Outputs the report lists without drawing them, with their files (in the run "
                "directory) and why.</caption><thead><tr><th>kind</th><th>file</th><th>bytes</th><th>made by</th>"
                f"<th>why not drawn</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
                if rows
                else '<p class="missing">None in this run.</p>'
            )
            columns.append(_run_column(run, runs, body))
        headings.append(("other", "Other outputs"))
        sections.append(_section("other", "Other outputs", columns, len(runs)))
    return _page(runs, headings, "".join(sections)), errors


def _size(run: Run, entry: Entry) -> str:
    try:
        return str(run.path(entry).stat().st_size)
    except (OSError, ValueError):
        return "missing"


def _run_column(run: Run, runs: Sequence[Run], body: str) -> str:
    heading = f"<h3>{_escape(run.name)}</h3>" if len(runs) > 1 else ""
    return f'<div class="run">{heading}{body}</div>'


def _section(kind: str, title: str, columns: Sequence[str], count: int) -> str:
    return (
        f'<section class="kind" id="kind-{_escape(kind)}"><h2>{_escape(title)}</h2>'
        f'<div class="runs" style="--runs: {count}">{"".join(columns)}</div></section>'
    )


def _page(runs: Sequence[Run], headings: Sequence[tuple[str, str]], sections: str) -> str:
    if len(runs) == 1:
        title = f"terrain run {runs[0].name}"
    else:
        title = f"terrain runs {', '.join(r.name for r in runs)}"
    described = "".join(
        f"<p><b>{_escape(r.name)}</b>: {_escape(r.manifest.get('kind', '?'))} run, created "
        f"{_escape(r.manifest.get('created_at', '?'))} with terrain {_escape(r.manifest.get('terrain_version', '?'))}, "
        f"{len(r.entries)} outputs — <code>{_escape(r.directory)}</code></p>"
        for r in runs
    )
    links = [f'<a href="#kind-{_escape(kind)}">{_escape(heading)}</a>' for kind, heading in headings]
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_escape(title)}</title><style>{_CSS}</style></head><body>"
        f"<header><h1>{_escape(title)}</h1>{described}</header>"
        f"<nav>{''.join(links)}</nav><main>{sections}</main>"
        f"<footer>Written by terrain-analysis {__version__} report from the manifests alone; one file, no requests, "
        "no scripts.</footer></body></html>\n"
    )


def write_report(
    directories: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str] | None = None
) -> tuple[Path, list[str]]:
    """Build the report and write it.

    Parameters
    ----------
    directories : sequence of str or path-like
        Run directories.
    out : str or path-like, optional
        The file to write; default ``report.html`` in the first run directory.

    Returns
    -------
    path : Path
        The file written.
    errors : list of str
        As for :func:`build_report`.

    Raises
    ------
    OutputError
        If the page cannot be written (``filename`` is the page, not the runs).
    """
    page, errors = build_report(directories)
    path = Path(out) if out is not None else Path(directories[0]) / "report.html"
    return write_atomically(path, page), errors

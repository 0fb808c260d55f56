"""One self-contained HTML page for one or more run directories (``terrain report``).

A run directory (``runs/<UTC stamp>/``) holds a ``manifest.json`` (format
``terrain.manifest/1``) that lists every file the run produced, each with a
*kind* (``cluster``, ``latency``, ``gev_fit``, ...) and the parameters it was made
with. :func:`build_report` reads the manifest alone and renders one section per
kind, in the order of :data:`RENDERERS`; kinds it does not know are listed with
their files. With several run directories every section shows the runs side by
side, one column each.

The page needs nothing else: CSS is inline, every figure is an ``<img>`` whose
source is a ``data:`` URI (SVG or PNG), there is no JavaScript and no reference
to any other file or server.

Adding a kind
-------------
A renderer is a function ``(entry, run) -> Section``: ``entry`` is the manifest's
output (:class:`Entry`: kind, file, parameters) and ``run`` the run directory
(:class:`Run`: paths, the manifest, the other entries). It returns a
:class:`Section` of blocks — :class:`Text`, :class:`Pre`, :class:`Table`, :class:`Figure`.
Register the kind in ``spec/formats.json`` (the registry of formats and kinds) and the
renderer in :data:`RENDERERS` (``report/registry.py``); a kind the report deliberately
does not draw goes into :data:`LISTED_KINDS` with the reason, shown under "Other
outputs". ``python/tests/test_formats.py`` checks that every registered kind is one or
the other. A renderer raises
``OSError`` or ``ValueError`` (naming the file) when its input is unreadable; the
report then shows the error in place of the section and the command exits 1.

Examples
--------
Shell::

    terrain-analysis report runs/20261123T214048Z                      # -> runs/20261123T214048Z/report.html
    terrain-analysis report runs/A runs/B --out compare.html            # two runs side by side

Python::

    >>> from terrain_analysis.report import build_report
    >>> html = build_report(["runs/20261123T214048Z"])  # doctest: +SKIP

Layout
------
``model`` (runs, entries, blocks, the shared readers), one module of renderers per
concern (``cluster``, ``topology``, ``durations``, ``tools``, ``pipeline``), ``registry`` (kind →
renderer) and ``html`` (the page).
"""

from __future__ import annotations

from terrain_analysis.report.html import build_report, write_report
from terrain_analysis.report.model import (
    MANIFEST_FORMAT,
    Block,
    Entry,
    Figure,
    Pre,
    Renderer,
    Run,
    Section,
    Table,
    Text,
    figure_from_file,
    figure_from_matplotlib,
    read_run,
)
from terrain_analysis.report.registry import LISTED_KINDS, RENDERERS
from terrain_analysis.report.tools import summary_renderer

__all__ = [
    "LISTED_KINDS",
    "MANIFEST_FORMAT",
    "RENDERERS",
    "Block",
    "Entry",
    "Figure",
    "Pre",
    "Renderer",
    "Run",
    "Section",
    "Table",
    "Text",
    "build_report",
    "figure_from_matplotlib",
    "figure_from_file",
    "read_run",
    "summary_renderer",
    "write_report",
]

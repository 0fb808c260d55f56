"""The ``terrain-analysis`` command.

Subcommands are data: each is a :class:`Subcommand` in :data:`SUBCOMMANDS`,
with a function that declares its arguments and one that runs it. A later
subcommand (``topology``, ``report``) is one more entry. Every failure leaves
through one path: a message ``terrain-analysis: error: ...`` on stderr and exit
status 1 (2 for a bad invocation, as argparse does; 141 when stdout is closed, as
the ``terrain`` escript). Results reach stdout only after the work is done; files
are written through :mod:`terrain_analysis.output`, so a failed write names the
output file and leaves nothing half-written.

Examples
--------
Shell::

    terrain-analysis gev runs/20240607T101500Z/durations.csv --out runs/20240607T101500Z/gev
    terrain-analysis gev durations.csv --column write_s --out gev-write
    terrain-analysis topology runs/20240607T101500Z/latency.json --out runs/20240607T101500Z/topology
    terrain-analysis emas runs/emas-hybrid runs/emas-skel --scaling runs/emas-scaling/scaling.json --out plots
    terrain-analysis events runs/windtunnel --highlight-step 250 --worker 8
    terrain-analysis report runs/20240607T101500Z runs/20240608T090000Z --out compare.html

Python, as the tests do::

    >>> from terrain_analysis.cli import main
    >>> main(["--version"])  # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from terrain_analysis import __version__
from terrain_analysis.analysis import DEFAULT_RETURN_PERIODS, GEVAnalysis, analyse_gev
from terrain_analysis.bench import merged_log_percentiles, read_summary, write_bench_plots
from terrain_analysis.collective import read_collective, write_collective_plot
from terrain_analysis.durations import DEFAULT_COLUMN, read_durations
from terrain_analysis.emas import read_run, read_scaling, write_emas_plots
from terrain_analysis.events import read_events, write_event_views
from terrain_analysis.experiment_plots import write_experiment_plots
from terrain_analysis.fit_json import write_fit_json
from terrain_analysis.output import OutputError, make_directory, write_atomically
from terrain_analysis.plots import write_plots
from terrain_analysis.report import read_run as read_report_run
from terrain_analysis.report import write_report
from terrain_analysis.scale import read_scale, write_scale_plot
from terrain_analysis.topology import Discovery, Latency, discover, read_latency, read_topology, topology_document
from terrain_analysis.topology_plots import write_topology_plots
from terrain_analysis.values import DataWarning

__all__ = ["CLOSED_STDOUT", "PROGRAM", "SUBCOMMANDS", "CommandError", "Subcommand", "build_parser", "main"]

PROGRAM = "terrain-analysis"


class CommandError(Exception):
    """A failure to report as ``terrain-analysis: error: <message>`` with exit status 1."""


def _io_error(error: OSError, fallback: Path) -> CommandError:
    """``cannot write FILE: reason`` for an output (:class:`OutputError`: FILE is the output, never the
    input it was made from), ``cannot read FILE: reason`` for anything else."""
    verb = "write" if isinstance(error, OutputError) else "read"
    return CommandError(f"cannot {verb} {error.filename or fallback}: {error.strerror or error}")


@dataclass(frozen=True)
class Subcommand:
    """One subcommand of ``terrain-analysis``.

    Attributes
    ----------
    name : str
        What the user types.
    summary : str
        One line for ``terrain-analysis --help``.
    description : str
        The paragraph ``terrain-analysis NAME --help`` opens with.
    add_arguments : callable
        Declares the subcommand's arguments on its parser.
    run : callable
        Runs it with the parsed arguments and an output stream; returns the exit status or
        raises :class:`CommandError`.
    """

    name: str
    summary: str
    description: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, TextIO], int]


# --------------------------------------------------------------------------------------------------
# gev
# --------------------------------------------------------------------------------------------------


def _gev_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("durations", type=Path, help="durations CSV file (header line; one row per run)")
    parser.add_argument("--column", default=DEFAULT_COLUMN, help=f"column to fit (default: {DEFAULT_COLUMN})")
    parser.add_argument(
        "--out",
        type=Path,
        required=True,
        metavar="DIR",
        help="directory for fit.json and the plots (created if missing)",
    )
    parser.add_argument(
        "--level",
        type=_probability,
        default=0.95,
        help="confidence level of intervals and the quantile band (default: 0.95)",
    )
    parser.add_argument(
        "--return-periods",
        type=_periods,
        default=DEFAULT_RETURN_PERIODS,
        metavar="T,T,...",
        help="return periods in runs, comma-separated (default: 10,100,1000)",
    )


def _probability(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1), got {text!r}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1), got {text!r}")
    return value


def _periods(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be numbers > 1 separated by commas, got {text!r}") from None
    if not all(value > 1 for value in values):
        raise argparse.ArgumentTypeError(f"must be numbers > 1 separated by commas, got {text!r}")
    return values


def _run_gev(arguments: argparse.Namespace, out: TextIO) -> int:
    source: Path = arguments.durations
    try:
        durations = read_durations(source, arguments.column)
    except OSError as error:
        raise CommandError(f"cannot read {str(source)!r}: {error.strerror or error}") from None
    except ValueError as error:
        raise CommandError(str(error)) from None
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", RuntimeWarning)
            analysis = analyse_gev(durations, level=arguments.level, return_periods=arguments.return_periods)
    except ValueError as error:
        raise CommandError(f"{source} column {arguments.column!r}: {error}") from None
    for warning in caught:
        print(f"{PROGRAM}: warning: {warning.message}", file=sys.stderr)
    directory: Path = arguments.out
    try:
        make_directory(directory)
        plots = write_plots(analysis, directory)
        document = analysis.to_document(source=str(source), column=arguments.column)
        document["plots"] = [path.name for path in plots]
        fit_path = write_fit_json(document, directory / "fit.json")
    except OSError as error:
        raise _io_error(error, directory) from None
    _print_summary(analysis, out)
    print(f"wrote {fit_path}", file=out)
    for path in plots:
        print(f"wrote {path}", file=out)
    return 0


def _print_summary(analysis: GEVAnalysis, out: TextIO) -> None:
    fit = analysis.fit
    interval = analysis.shape_interval
    test = analysis.gumbel_test

    def bound(value: float | None, unbounded: str) -> str:
        return unbounded if value is None else f"{value:.4g}"

    print(f"GEV fit of {fit.n} durations (shape xi: > 0 Frechet, < 0 Weibull type; scipy's c = -xi)", file=out)
    print(f"  location  {fit.location:12.6g}  se {fit.se.location:.3g}", file=out)
    print(f"  scale     {fit.scale:12.6g}  se {fit.se.scale:.3g}", file=out)
    print(
        f"  shape     {fit.shape:12.6g}  se {fit.se.shape:.3g}  "
        f"{interval.level:.0%} profile interval [{bound(interval.lower, '-1')}, {bound(interval.upper, 'inf')}]",
        file=out,
    )
    print(f"  nll {fit.nll:.6f}  converged {fit.converged} after {fit.iterations} iterations", file=out)
    print(f"Gumbel (xi = 0) likelihood-ratio test: statistic {test.statistic:.4g}, p = {test.p_value:.3g}", file=out)
    print("AIC: " + ", ".join(f"{model.name} {model.aic:.2f}" for model in analysis.models), file=out)
    levels = analysis.return_levels
    print(
        "Return levels: "
        + ", ".join(
            f"{t:g} runs {z:.5g} (se {s:.2g})" for t, z, s in zip(levels.periods, levels.levels, levels.se, strict=True)
        ),
        file=out,
    )
    outside = int(analysis.band.outside.sum())
    print(f"{outside} of {fit.n} durations outside the {analysis.band.level:.0%} quantile band", file=out)


# --------------------------------------------------------------------------------------------------
# topology
# --------------------------------------------------------------------------------------------------


def _topology_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("latency", type=Path, help="latency.json written by 'terrain probe'")
    parser.add_argument(
        "--out", type=Path, required=True, metavar="DIR", help="directory for the plots and topology.json"
    )
    parser.add_argument(
        "--statistic", choices=("min", "median", "mean", "p95"), default="min", help="per-pair matrix to cluster"
    )
    parser.add_argument(
        "--symmetrise", choices=("min", "mean", "max"), default="min", help="how to combine the two directions"
    )
    parser.add_argument("--linkage", choices=("average", "complete", "single"), default="average")
    parser.add_argument("--alpha", type=_alpha, default="auto", help="auto (per level, default) or a number >= 1")
    parser.add_argument("--outliers", choices=("repair", "keep"), default="repair")
    parser.add_argument(
        "--topology",
        type=Path,
        metavar="FILE",
        help="draw this tree ('terrain topology --format json') instead of clustering here",
    )


def _collective_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("collective", type=Path, help="collective.json written by 'terrain collective bench'")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR", help="directory for the plot")


def _scale_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("scale", type=Path, help="scale.json written by 'terrain experiment scale'")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR", help="directory for the plot")


def _plot_document(source: Path, read: Callable, directory: Path, draw: Callable, out: TextIO) -> int:
    """Read ``source`` with ``read``, draw with ``draw(document, directory)`` and print the files written,
    turning unreadable input and unwritable output into a :class:`CommandError` naming the path."""
    try:
        document = read(source)
    except OSError as error:
        raise CommandError(f"cannot read {str(source)!r}: {error.strerror or error}") from None
    except ValueError as error:
        message = str(error)
        raise CommandError(message if str(source) in message else f"{source}: {message}") from None
    try:
        make_directory(directory)
        written = draw(document, directory)
    except OSError as error:
        raise _io_error(error, directory) from None
    for path in written:
        print(path, file=out)
    return 0


def _run_scale(arguments: argparse.Namespace, out: TextIO) -> int:
    def draw(document_rows: tuple, directory: Path) -> list[Path]:
        document, rows = document_rows
        machine = document.get("machine_at_start") or {}
        title = (f"terrain's operations against cluster size ({machine.get('logical_processors', '?')} cores, "
                 f"load {machine.get('loadavg1', '?')} at start)")
        return write_scale_plot(rows, directory, title)

    return _plot_document(arguments.scale, read_scale, arguments.out, draw, out)


def _run_collective(arguments: argparse.Namespace, out: TextIO) -> int:
    def draw(header_results: tuple, directory: Path) -> list[Path]:
        header, results = header_results
        title = (f"allreduce on {header.get('spec', '?')}: {header.get('nodes', '?')} nodes, "
                 f"{header.get('members', '?')} members")
        return write_collective_plot(results, directory, title)

    return _plot_document(arguments.collective, read_collective, arguments.out, draw, out)


def _alpha(text: str) -> float | str:
    if text == "auto":
        return text
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be 'auto' or a number >= 1, got {text!r}") from None
    if not value >= 1:
        raise argparse.ArgumentTypeError(f"must be 'auto' or a number >= 1, got {text!r}")
    return value


def _run_topology(arguments: argparse.Namespace, out: TextIO) -> int:
    source: Path = arguments.latency
    try:
        latency = read_latency(source)
    except OSError as error:
        raise CommandError(f"cannot read {str(source)!r}: {error.strerror or error}") from None
    except ValueError as error:
        raise CommandError(str(error)) from None
    try:
        found = discover(
            latency,
            statistic=arguments.statistic,
            symmetrise=arguments.symmetrise,
            linkage=arguments.linkage,
            alpha=arguments.alpha,
            outliers=arguments.outliers,
        )
        if arguments.topology is not None:
            tree = read_topology(arguments.topology, latency.nodes)
            found = Discovery(
                tree,
                found.nodes,
                found.distances,
                [],
                found.repaired,
                {**found.options, "alpha": "from " + str(arguments.topology)},
                found.missing,
            )
    except OSError as error:
        raise CommandError(f"cannot read {str(arguments.topology)!r}: {error.strerror or error}") from None
    except ValueError as error:
        raise CommandError(f"{source}: {error}") from None
    directory: Path = arguments.out
    try:
        make_directory(directory)
        written = write_topology_plots(found, directory)
        if arguments.topology is None:
            document_path = directory / "topology.json"
            write_atomically(document_path, json.dumps(topology_document(found), indent=2) + "\n")
            written.append(document_path)
    except OSError as error:
        raise _io_error(error, directory) from None
    bottom = [c for c in found.tree.clusters() if all(isinstance(x, int) for x in c.children)]
    print(
        f"{len(found.nodes)} nodes, {len(found.tree.clusters())} clusters "
        f"({len(bottom)} at the lowest level), root height {found.tree.height:.1f} us",
        file=out,
    )
    for level in found.levels:
        alpha = "root" if level.alpha is None else f"alpha {level.alpha:.3g}"
        print(f"  level: {level.points} points -> {level.clusters} clusters ({alpha})", file=out)
    if found.repaired:
        print(f"  {found.repaired} outlying round trips repaired", file=out)
    _print_pairs(latency, found, out)
    for path in written:
        print(f"wrote {path}", file=out)
    return 0


def _print_pairs(latency: Latency, found: Discovery, out: TextIO) -> None:
    """How much of the matrix was measured, and where that leaves the tree undetermined."""
    n = len(found.nodes)
    print(
        f"  pairs: {latency.pairs_measured} of {latency.pairs_total} ordered pairs measured; "
        f"{found.missing} of {n * (n - 1) // 2} node pairs missing (no round trip in either direction)",
        file=out,
    )
    for place in found.undetermined():
        names = " ".join(found.nodes[i] for i in place.nodes)
        print(
            f"  undetermined: {len(place.nodes)} nodes below cluster {place.cluster} "
            f"({place.height:.1f} us): no measured pair tells whether they belong with a sibling: {names}",
            file=out,
        )


def _experiment_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", type=Path, help="the directory 'terrain experiment --out' wrote")
    parser.add_argument("--out", type=Path, metavar="DIR", help="where to write the figures (default: DIRECTORY)")


def _run_experiment(arguments: argparse.Namespace, out: TextIO) -> int:
    directory: Path = arguments.directory
    try:
        written = write_experiment_plots(directory, arguments.out)
    except OSError as error:
        raise _io_error(error, directory) from None
    except ValueError as error:  # names its file
        raise CommandError(str(error)) from None
    except KeyError as error:
        raise CommandError(f"{directory}: summary.json lacks {error}") from None
    for path in written:
        print(f"wrote {path}", file=out)
    return 0


# --------------------------------------------------------------------------------------------------
# bench
# --------------------------------------------------------------------------------------------------


def _bench_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", type=Path, help="sweep.csv ('terrain bench sweep') or summary.json ('terrain bench')")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR", help="directory for the plots")


def _run_bench(arguments: argparse.Namespace, out: TextIO) -> int:
    source: Path = arguments.source
    if source.suffix not in (".csv", ".json"):
        raise CommandError(f"'source' must be a sweep.csv or a summary.json, got {str(source)!r}")
    try:
        written = write_bench_plots(source, arguments.out)
        if source.suffix == ".json":
            _print_logs(read_summary(source), source.parent, out)
    except OSError as error:
        raise _io_error(error, source) from None
    except ValueError as error:
        raise CommandError(str(error)) from None
    for path in written:
        print(f"wrote {path}", file=out)
    return 0


# --------------------------------------------------------------------------------------------------
# emas
# --------------------------------------------------------------------------------------------------


def _emas_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", type=Path, nargs="*", metavar="RUN_DIR", help="--out directories of 'terrain emas'")
    parser.add_argument("--scaling", type=Path, metavar="FILE", help="scaling.json of 'terrain emas scaling'")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR", help="directory for the plots")


def _run_emas(arguments: argparse.Namespace, out: TextIO) -> int:
    if not arguments.runs and arguments.scaling is None:
        raise CommandError("give at least one RUN_DIR or --scaling FILE")
    runs = []
    for directory in arguments.runs:
        try:
            runs.append(read_run(directory))
        except OSError as error:
            missing = Path(error.filename) if error.filename else Path(directory)
            hint = ""
            if missing.name == "summary.json" and (Path(directory) / "emas.csv").is_file():
                hint = ("; a run stopped by SIGTERM keeps only emas.csv (marked partial in manifest.json), "
                        "and this command draws complete runs")
            raise CommandError(f"cannot read {str(missing)!r}: {error.strerror or error}{hint}") from None
        except ValueError as error:
            raise CommandError(str(error)) from None
    scaling = None
    if arguments.scaling is not None:
        try:
            scaling = read_scaling(arguments.scaling)
        except OSError as error:
            raise CommandError(f"cannot read {str(arguments.scaling)!r}: {error.strerror or error}") from None
        except ValueError as error:
            raise CommandError(str(error)) from None
    try:
        written = write_emas_plots(arguments.out, runs, scaling)
    except OSError as error:
        raise _io_error(error, arguments.out) from None
    for run in runs:
        summary = run.summary
        print(
            f"{run.model}: best fitness {summary['best_fitness']:.2f} after {summary['duration_s']:.1f} s, "
            f"{summary['reproductions_per_s']:,.0f} reproductions/s, utilisation {summary['utilisation']:.2f}",
            file=out,
        )
    for path in written:
        print(f"wrote {path}", file=out)
    return 0


# --------------------------------------------------------------------------------------------------
# events
# --------------------------------------------------------------------------------------------------


def _events_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "directory", type=Path, metavar="RUN", help="run directory of 'terrain events record' (holds events.jsonl)"
    )
    parser.add_argument("--out", type=Path, metavar="DIR", help="directory for the views (default: the run)")
    parser.add_argument(
        "--highlight-step", type=int, metavar="S", help="step to highlight in the timeline (default: the middle one)"
    )
    parser.add_argument(
        "--worker", type=int, metavar="I", help="worker of the reads view (default: the middle one)"
    )


def _run_events(arguments: argparse.Namespace, out: TextIO) -> int:
    source: Path = arguments.directory / "events.jsonl"
    try:
        header, events = read_events(source)
    except OSError as error:
        raise CommandError(f"cannot read {str(source)!r}: {error.strerror or error}") from None
    except ValueError as error:
        raise CommandError(str(error)) from None
    steps = int(header.get("steps", 0))
    workers = int(header.get("workers", 0))
    highlight = arguments.highlight_step if arguments.highlight_step is not None else max(1, steps // 2)
    worker = arguments.worker if arguments.worker is not None else workers // 2
    directory: Path = arguments.out if arguments.out is not None else arguments.directory
    try:
        make_directory(directory)
        written = write_event_views(events, directory, highlight, worker)
    except OSError as error:
        raise _io_error(error, directory) from None
    except ValueError as error:
        raise CommandError(f"{source}: {error}") from None
    print(f"{len(events)} events, {workers} workers, {steps} steps; step {highlight} highlighted", file=out)
    for path in written:
        print(f"wrote {path}", file=out)
    return 0


def _print_logs(summary: dict[str, object], directory: Path, out: TextIO) -> None:
    """Per operation, the nodes' interval logs merged by the hdrhistogram package, beside summary.json."""
    nodes = summary.get("nodes")
    operations = summary.get("operations")
    if not isinstance(nodes, list) or not isinstance(operations, dict):
        return
    header = f"{'op':<18} {'count':>9} {'p50':>8} {'p99':>8} {'p99.9':>8}"
    print(header + "   (interval logs, read by hdrhistogram)", file=out)
    for op in sorted(operations):
        logs = [directory / str(node) / f"{op}.hlog" for node in nodes]
        present = [log for log in logs if log.exists()]
        if not present:
            continue
        figures = merged_log_percentiles(present)
        print(
            f"{op:<18} {figures['count']:>9} {figures['p50']:>8} {figures['p99']:>8} {figures['p999']:>8}",
            file=out,
        )


# --------------------------------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------------------------------


def _report_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", type=Path, nargs="+", metavar="RUN_DIR", help="run directories (with manifest.json)")
    parser.add_argument(
        "--out", type=Path, metavar="FILE", help="the HTML file to write (default: RUN_DIR/report.html of the first)"
    )


def _run_report(arguments: argparse.Namespace, out: TextIO) -> int:
    runs: list[Path] = arguments.runs
    for run in runs:
        if not (run / "manifest.json").is_file():
            raise CommandError(f"{str(run)!r} is not a run directory: it has no manifest.json")
    if arguments.out is not None:
        _refuse_inputs(runs, arguments.out)
    try:
        path, errors = write_report(runs, arguments.out)
    except OSError as error:
        raise _io_error(error, runs[0]) from None
    except ValueError as error:
        raise CommandError(str(error)) from None
    for problem in errors:
        print(f"{PROGRAM}: error: {problem}", file=sys.stderr)
    print(path, file=out)
    return 1 if errors else 0


def _refuse_inputs(runs: Sequence[Path], out: Path) -> None:
    """--out must not be a run's manifest.json or a file its manifest lists (the report would destroy its input)."""
    target = out.resolve()
    for run in runs:
        try:
            read = read_report_run(run)
            listed = [run / "manifest.json"] + [read.path(entry) for entry in read.entries]
        except (OSError, ValueError):
            continue  # write_report names the problem
        if any(path.resolve() == target for path in listed):
            raise CommandError(f"--out {out} is an input of the run {run}: give another file")


# --------------------------------------------------------------------------------------------------
# The command
# --------------------------------------------------------------------------------------------------

SUBCOMMANDS: tuple[Subcommand, ...] = (
    Subcommand(
        name="gev",
        summary="fit a GEV distribution to run durations and draw its diagnostics",
        description=(
            "Fit a generalised extreme value distribution by maximum likelihood to one column of a "
            "durations CSV file. Writes fit.json (format terrain.gev/1) and the diagnostic plots "
            "(gev_diagnostics, gev_return_levels; PNG and SVG) to --out."
        ),
        add_arguments=_gev_arguments,
        run=_run_gev,
    ),
    Subcommand(
        name="topology",
        summary="discover the topology of a latency matrix and draw it",
        description=(
            "Cluster latency.json (format terrain.latency/1) with RELEASE D3.5's non-binary alpha algorithm, as "
            "'terrain topology' does, and draw the heatmap ordered by the tree (RELEASE D3.5, Figure 16), the binary "
            "complete-linkage dendrogram and the non-binary tree (PNG and SVG) to --out, with topology.json "
            "(format terrain.topology/1). --topology draws a tree found by terrain instead."
        ),
        add_arguments=_topology_arguments,
        run=_run_topology,
    ),
    Subcommand(
        name="scale",
        summary="plot the lab's operation times against cluster size",
        description=(
            "Read scale.json (format terrain.scale/1, written by 'terrain experiment scale') and draw each "
            "operation's wall time against the number of VMs, log-log, with the least-squares power law "
            "(time proportional to n^b) dashed and b in the legend (PNG and SVG) to --out."
        ),
        add_arguments=_scale_arguments,
        run=_run_scale,
    ),
    Subcommand(
        name="collective",
        summary="plot collective-operation times against value size per algorithm",
        description=(
            "Read collective.json (format terrain.collective/1, written by 'terrain collective bench') and draw "
            "the median time against the value size, log-log, one line per algorithm and rank order, with the "
            "hierarchical lower bound (PNG and SVG) to --out."
        ),
        add_arguments=_collective_arguments,
        run=_run_collective,
    ),
    Subcommand(
        name="bench",
        summary="draw the figures of a DE-Bench run or sweep",
        description=(
            "Draw a sweep.csv from 'terrain bench sweep' (throughput vs nodes per operation; latency "
            "percentiles of the merged histograms vs nodes, with DE-Bench's mean of per-node p99) or a "
            "summary.json from 'terrain bench' (merged percentiles beside the mean of per-node ones) to --out "
            "(PNG and SVG). For a summary.json it also merges the nodes' HdrHistogram interval logs with the "
            "hdrhistogram package and prints their percentiles, an independent check of summary.json."
        ),
        add_arguments=_bench_arguments,
        run=_run_bench,
    ),
    Subcommand(
        name="emas",
        summary="draw EMAS runs and the scaling table",
        description=(
            "Read the --out directories of 'terrain emas' (emas.csv, summary.json of format terrain.emas/1) and "
            "optionally the scaling.json of 'terrain emas scaling' (terrain.emas_scaling/1); draw the best "
            "fitness over time per run (emas_fitness), reproductions per second per model and per number of "
            "schedulers (emas_throughput) and each model's speed-up beside its scheduler utilisation "
            "(emas_utilisation), as PNG and SVG in --out."
        ),
        add_arguments=_emas_arguments,
        run=_run_emas,
    ),
    Subcommand(
        name="events",
        summary="draw the EventSpace views of a recorded wind tunnel",
        description=(
            "Read RUN/events.jsonl (format terrain.events/1, from 'terrain events record') and draw the "
            "per-worker timeline with communication dark, computation light and one step highlighted "
            "(timeline; the EventSpace paper's Fig. 3) and one worker's read times from the worker above "
            "(solid) and below (dotted) over the steps (reads; Fig. 4), PNG and SVG, to --out or RUN."
        ),
        add_arguments=_events_arguments,
        run=_run_events,
    ),
    Subcommand(
        name="report",
        summary="write one self-contained HTML page of run directories",
        description=(
            "Read each RUN_DIR's manifest.json (format terrain.manifest/1) and write one HTML file with a section "
            "per kind of output (cluster, attributes, latency, topology, durations, GEV fit, ...; kinds it does not "
            "know are listed with their files), figures inline, no scripts and no requests. Several run "
            "directories are shown side by side. Prints the path of the file written; exits 1 (after writing) "
            "if an output could not be rendered."
        ),
        add_arguments=_report_arguments,
        run=_run_report,
    ),
    Subcommand(
        name="experiment",
        summary="draw the figures of a placement experiment",
        description=(
            "Read summary.json (format terrain.experiment/1) and its CSV file from the directory "
            "'terrain experiment --out' wrote and draw the experiment's figures (PNG and SVG): for "
            "attributes the times with and without attribute placement against the ants and their ratio "
            "(RELEASE D3.5 Figs. 2-3); for distances the times of each placement and topology."
        ),
        add_arguments=_experiment_arguments,
        run=_run_experiment,
    ),
)
"""The subcommands, in the order ``--help`` lists them."""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser that suggests ``--help`` after a usage error."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n(see '{self.prog} --help')\n")


def build_parser(subcommands: Sequence[Subcommand] = SUBCOMMANDS) -> argparse.ArgumentParser:
    """Build the argument parser for ``subcommands``.

    Parameters
    ----------
    subcommands : sequence of Subcommand, default SUBCOMMANDS
        The subcommands to offer.

    Returns
    -------
    argparse.ArgumentParser
    """
    parser = _Parser(
        prog=PROGRAM,
        description="Statistics and plots for terrain runs.",
    )
    parser.add_argument("--version", action="version", version=f"{PROGRAM} {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=_Parser)
    for subcommand in subcommands:
        sub = commands.add_parser(subcommand.name, help=subcommand.summary, description=subcommand.description)
        subcommand.add_arguments(sub)
        sub.set_defaults(run=subcommand.run)
    return parser


CLOSED_STDOUT = 141
"""Exit status when stdout was closed before the results were written (as the ``terrain`` escript:
a program killed by SIGPIPE, 128 + 13)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``terrain-analysis`` with ``argv`` (default: ``sys.argv[1:]``).

    A subcommand writes its results (the lines naming the files written, summaries) into
    a buffer that goes to stdout at the end. When stdout is closed (``>&-``) or its
    reader has gone (``| head -0``), the command ends quietly with status 141, after
    writing its files, as the ``terrain`` escript does; warnings (:class:`DataWarning`
    and others) go to stderr as ``terrain-analysis: warning: ...``.

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments after the program name.

    Returns
    -------
    int
        Exit status: 0 on success, 1 on an error, 2 on a bad invocation, 141 when stdout
        was closed.
    """
    parser = build_parser()
    results = io.StringIO()
    try:
        with contextlib.redirect_stdout(results):  # --help and --version print to stdout
            arguments = parser.parse_args(argv)
    except SystemExit as exit_:  # --help, --version, or a usage error
        code = exit_.code
        status = 0 if code is None else code if isinstance(code, int) else 1
        return _deliver(results.getvalue(), status)
    failure = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DataWarning)
        try:
            run: Callable[[argparse.Namespace, TextIO], int] = arguments.run
            status = run(arguments, results)
        except CommandError as error:
            failure, status = error, 1
    for warning in caught:
        print(f"{PROGRAM}: warning: {warning.message}", file=sys.stderr)
    if failure is not None:
        print(f"{PROGRAM}: error: {failure}", file=sys.stderr)
    return _deliver(results.getvalue(), status)


def _deliver(text: str, status: int) -> int:
    """Write the results to stdout; :data:`CLOSED_STDOUT` if it is closed or its reader has gone."""
    if not text:
        return status
    stdout = sys.stdout
    if stdout is None:  # started with stdout closed (>&-)
        return CLOSED_STDOUT
    try:
        stdout.write(text)
        stdout.flush()
    except (OSError, ValueError):  # | head -0 (EPIPE), >&- (EBADF), /dev/full (ENOSPC); ValueError: stream closed
        _silence_stdout()
        return CLOSED_STDOUT
    return status


def _silence_stdout() -> None:
    """Point fd 1 at /dev/null, so that the interpreter's last flush at exit does not fail again."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())

"""Tests of terrain_analysis.report (the HTML page) and, marked ``browser``, of the page in Chromium."""

from __future__ import annotations

import base64
import html
import json
import re
import shutil
from pathlib import Path

import pytest
from matplotlib.figure import Figure as MplFigure

from terrain_analysis import report
from terrain_analysis.browser import check_page
from terrain_analysis.cli import main
from terrain_analysis.report import RENDERERS, build_report, read_run, write_report
from terrain_analysis.report import cluster as report_cluster
from terrain_analysis.report import durations as report_durations
from terrain_analysis.report import topology as report_topology

KNOWN_KINDS = [
    "cluster",
    "attributes",
    "latency",
    "topology",
    "topology_comparison",
    "durations",
    "gev_fit",
    "bench",
    "collective",
    "events",
    "emas",
    "experiment",
    "summary",
    "attributes_times",
]


def _section_ids(page: str) -> list[str]:
    return re.findall(r'<section class="kind" id="kind-([a-z_]+)">', page)


def test_report_has_one_section_per_kind_in_registry_order(run_directory):
    page, errors = build_report([run_directory])
    assert errors == []
    assert _section_ids(page) == KNOWN_KINDS + ["other"]
    assert list(RENDERERS)[: len(KNOWN_KINDS)] == KNOWN_KINDS


def test_every_registered_kind_is_rendered_or_listed_with_why(run_directory):
    from terrain_analysis.formats import KINDS

    page, errors = build_report([run_directory])
    assert errors == []
    kinds = {o["kind"] for o in json.loads((run_directory / "manifest.json").read_text())["outputs"]}
    assert {"summary", "placement_dot", "latency_csv", "bench_point", "bench_node_files", "attributes_times",
            "topology_term"} <= kinds
    other = page.split('id="kind-other"', 1)[1]
    for name in kinds & set(KINDS):
        if KINDS[name].report == "rendered":
            assert f'id="kind-{name}"' in page, name
        else:
            assert f"<td>{name}</td>" in other and html.escape(KINDS[name].what) in other, name


def test_unknown_kinds_are_listed_with_their_files(run_directory):
    page, _ = build_report([run_directory])
    other = page.split('id="kind-other"', 1)[1]
    assert "<td>hostlist</td><td><code>hosts.txt</code></td>" in other
    assert f'<td class="num">{(run_directory / "hosts.txt").stat().st_size}</td>' in other


def test_the_page_is_self_contained(run_directory):
    page, _ = build_report([run_directory])
    assert "<script" not in page.lower()
    assert "<link" not in page.lower()
    assert not re.search(r"(?i)\b(?:https?|ftp)://", page)
    sources = re.findall(r'<img src="([^"]*)"', page)
    assert len(sources) >= 9
    assert all(re.fullmatch(r"data:image/(?:png|svg\+xml);base64,[A-Za-z0-9+/=]+", s) for s in sources)
    assert not re.search(r'\b(?:src|href)="(?!data:|#)', page)


def test_every_image_is_a_whole_png_or_svg(run_directory):
    page, _ = build_report([run_directory])
    for media_type, data in re.findall(r'<img src="data:(image/[a-z+]+);base64,([^"]*)"', page):
        raw = base64.b64decode(data, validate=True)
        if media_type == "image/png":
            assert raw.startswith(b"\x89PNG\r\n\x1a\n") and raw.endswith(b"IEND\xaeB`\x82")
        else:
            assert b"<svg" in raw[:2000] and raw.rstrip().endswith(b"</svg>")


def test_every_figure_has_a_numbered_title_caption_and_command(run_directory):
    page, _ = build_report([run_directory])
    figures = re.findall(r"<figure>.*?</figure>", page, flags=re.S)
    captions = [re.search(r"<figcaption>(.*?)</figcaption>", f, flags=re.S).group(1) for f in figures]
    assert len(captions) == len(re.findall("<img ", page))
    for number, caption in enumerate(captions, 1):
        assert caption.startswith(f"<b>Figure {number}. ")
        assert re.search(r'Made by <span class="command">[^<]+</span>\.$', caption), caption
    commands = " ".join(captions)
    assert "terrain-analysis gev durations.csv" in commands  # the manifest's command parameter
    assert f"terrain report {run_directory}" in commands  # figures the report draws itself


def test_figures_drawn_by_the_report_have_a_title_and_axis_labels_with_units(run_directory, monkeypatch):
    drawn: list[MplFigure] = []
    original = report.figure_from_matplotlib

    def record(figure, **kwargs):
        drawn.append(figure)
        return original(figure, **kwargs)

    for module in (report_cluster, report_topology, report_durations):  # the renderers that draw
        monkeypatch.setattr(module, "figure_from_matplotlib", record)
    build_report([run_directory])
    assert len(drawn) == 5  # group tree, heatmap, dendrogram, discovered tree, durations
    for figure in drawn:
        ax = figure.axes[0]
        assert ax.get_title(), figure
        assert ax.get_xlabel() and ax.get_ylabel(), ax.get_title()
    units = " ".join(f.axes[0].get_ylabel() + " " + " ".join(a.get_ylabel() for a in f.axes[1:]) for f in drawn)
    assert units.count("(µs)") >= 3 and "(ms)" in units


def test_gev_diagnostics_axes_carry_seconds(run_directory):
    svg = (run_directory / "gev" / "gev_diagnostics.svg").read_text()
    for label in ("model quantile (s)", "observed duration (s)", "duration (s)", "density (1/s)"):
        assert label in svg


def test_tables_render_the_summaries_of_other_tools(run_directory):
    page, _ = build_report([run_directory])
    bench = page.split('id="kind-bench"', 1)[1].split("</section>", 1)[0]
    assert "<th>latency_us.p99</th>" in bench and '<td class="num">1900</td>' in bench
    assert "<th>per_node_percentile_mean.p99</th>" in bench
    assert "bench/sweep.csv" in bench and "throughput.png" in bench
    experiment = page.split('id="kind-experiment"', 1)[1].split("</section>", 1)[0]
    assert "<th>ratio</th>" in experiment and '<td class="num">3.3</td>' in experiment
    events = page.split('id="kind-events"', 1)[1].split("</section>", 1)[0]
    assert "<td>tracks (pid, tid)</td><td class=\"num\">4</td>" in events


def test_summaries_without_optional_keys_still_render(tmp_path, make_run):
    run = make_run(tmp_path / "run")
    (run / "bench" / "summary.json").write_text(json.dumps({"format": "terrain.bench/1"}))
    (run / "emas" / "summary.json").write_text(json.dumps({"format": "terrain.emas/1", "model": "sequential"}))
    page, errors = build_report([run])
    assert errors == []
    assert "<td>model</td><td>sequential</td>" in page


def test_a_missing_file_or_wrong_format_is_shown_in_place_and_exits_1(tmp_path, make_run, capsys):
    run = make_run(tmp_path / "run")
    (run / "latency.json").unlink()
    (run / "collective" / "collective.json").write_text(json.dumps({"format": "terrain.bench/1"}))
    assert main(["report", str(run)]) == 1
    page = (run / "report.html").read_text()
    assert page.count('class="error"') == 2
    assert "Could not render this output: latency.json: No such file or directory" in page
    assert "Not drawn: the run&#x27;s latency matrix (latency.json) could not be read." in page
    assert (
        "Could not render this output: collective/collective.json: format &#x27;terrain.bench/1&#x27;, expected" in page
    )
    err = capsys.readouterr().err
    assert "terrain-analysis: error:" in err and "latency.json" in err and "collective.json" in err
    assert 'id="kind-cluster"' in page  # the other sections are still there


def test_several_runs_are_shown_side_by_side(tmp_path, run_directory, make_run):
    second = make_run(tmp_path / "20261124T080000Z")
    (second / "manifest.json").write_text(
        json.dumps(
            {**json.loads((second / "manifest.json").read_text()),
             "outputs": [{"kind": "cluster", "file": "cluster.json"}, {"kind": "gev_fit", "file": "gev/fit.json"}]}
        )
    )
    out = tmp_path / "compare.html"
    path, errors = write_report([run_directory, second], out)
    page = out.read_text()
    assert path == out and errors == []
    assert page.count('<div class="runs" style="--runs: 2">') == len(_section_ids(page))
    latency = page.split('id="kind-latency"', 1)[1].split("</section>", 1)[0]
    assert "<h3>20261123T210000Z</h3>" in latency and "<h3>20261124T080000Z</h3>" in latency
    assert "Not in this run." in latency
    cluster = page.split('id="kind-cluster"', 1)[1].split("</section>", 1)[0]
    assert cluster.count("<figure>") == 2


def test_cli_writes_report_html_in_the_run_directory_and_prints_its_path(tmp_path, make_run, capsys):
    run = make_run(tmp_path / "run")
    assert main(["report", str(run)]) == 0
    assert capsys.readouterr().out.strip() == str(run / "report.html")
    assert (run / "report.html").read_text().startswith("<!DOCTYPE html>")


def test_cli_rejects_a_directory_without_manifest(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 1
    assert f"{str(tmp_path)!r} is not a run directory: it has no manifest.json" in capsys.readouterr().err


def test_read_run_rejects_other_formats_and_bad_outputs(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps({"format": "terrain.state/1"}))
    with pytest.raises(ValueError, match="format 'terrain.state/1', expected 'terrain.manifest/1'"):
        read_run(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps({"format": "terrain.manifest/1", "outputs": [{"kind": "x"}]}))
    with pytest.raises(ValueError, match="output 0 must have a 'kind' and a 'file'"):
        read_run(tmp_path)


def test_a_file_outside_the_run_directory_is_refused(tmp_path, make_run):
    run = make_run(tmp_path / "run")
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["outputs"] = [{"kind": "cluster", "file": "../../etc/passwd"}]
    (run / "manifest.json").write_text(json.dumps(manifest))
    page, errors = build_report([run])
    assert len(errors) == 1 and "lies outside the run directory" in errors[0]


# --------------------------------------------------------------------------------------------------
# In a real browser (pytest -m browser)


@pytest.mark.browser
def test_report_in_chromium_has_no_errors_no_requests_and_every_image_decodes(tmp_path, make_run):
    run = make_run(tmp_path / "run")
    page, _ = write_report([run])
    result = check_page(page, screenshot=run / "report.png")
    assert result.console_errors == []
    assert result.requests == []
    assert len(result.images) == page.read_text().count("<img ") >= 9
    assert result.broken_images == []
    assert result.problems() == []
    titles = [report.RENDERERS[k](e, read_run(run)).title for k, e in _first_entries(run)]
    assert result.headings == titles + ["Other outputs"]
    shot = (run / "report.png").read_bytes()
    assert shot.startswith(b"\x89PNG") and len(shot) > 50_000


def _first_entries(run: Path):
    seen = {}
    for entry in read_run(run).entries:
        if entry.kind in RENDERERS and entry.kind not in seen:
            seen[entry.kind] = entry
    return sorted(seen.items(), key=lambda item: list(RENDERERS).index(item[0]))


def _page(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "page.html"
    path.write_text(
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>t</title></head><body>{body}</body></html>"
    )
    return path


_PIXEL = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


@pytest.mark.browser
def test_chromium_check_passes_a_good_inline_image(tmp_path):
    result = check_page(_page(tmp_path, f'<h2>One</h2><img src="data:image/png;base64,{_PIXEL}">'))
    assert result.problems() == [] and result.headings == ["One"]
    assert [i.natural_width for i in result.images] == [1]


@pytest.mark.browser
def test_chromium_check_detects_a_broken_data_uri(tmp_path):
    broken = base64.b64encode(base64.b64decode(_PIXEL)[:30]).decode()
    result = check_page(_page(tmp_path, f'<img src="data:image/png;base64,{broken}">'))
    assert len(result.broken_images) == 1 and result.broken_images[0].natural_width == 0
    assert any(p.startswith("image did not decode: data:image/png;base64,") for p in result.problems())


@pytest.mark.browser
def test_chromium_check_detects_an_external_request(tmp_path):
    result = check_page(_page(tmp_path, '<img src="http://127.0.0.1:9/figure.png">'))
    assert "http://127.0.0.1:9/figure.png" in result.requests
    assert "network request: http://127.0.0.1:9/figure.png" in result.problems()


@pytest.mark.browser
def test_chromium_check_detects_a_file_beside_the_page(tmp_path):
    (tmp_path / "figure.png").write_bytes(base64.b64decode(_PIXEL))
    result = check_page(_page(tmp_path, '<img src="figure.png">'))
    assert result.requests == [(tmp_path / "figure.png").as_uri()]
    assert result.broken_images == []  # it loaded: the page is still not self-contained


@pytest.mark.browser
def test_chromium_check_detects_console_errors(tmp_path):
    result = check_page(_page(tmp_path, "<script>console.error('bad thing'); undefined_function();</script>"))
    assert "bad thing" in result.console_errors
    assert any("undefined_function" in e for e in result.console_errors)


def test_check_page_refuses_a_missing_page(tmp_path):
    with pytest.raises(ValueError, match="'page' .* is not a file"):
        check_page(tmp_path / "missing.html")


@pytest.mark.browser
def test_chromium_is_installed():
    assert shutil.which("chromium"), "Debian's chromium is missing: 'make setup' installs it"


def test_events_as_json_lines_are_counted_by_name(tmp_path, make_run):
    run = make_run(tmp_path / "run")
    (run / "events" / "events.jsonl").write_text(
        '{"format": "terrain.events/1", "nodes": ["a@h"]}\n{"name": "compute", "time_us": 10}\n'
        '{"name": "send", "time_us": 20}\n{"name": "compute", "time_us": 30}\n'
    )
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["outputs"] = [{"kind": "events", "file": "events/events.jsonl"}]
    (run / "manifest.json").write_text(json.dumps(manifest))
    page, errors = build_report([run])
    assert errors == []
    assert '<td>events</td><td class="num">3</td>' in page
    assert '<td>compute</td><td class="num">2</td>' in page and '<td>send</td><td class="num">1</td>' in page


def test_a_pipeline_run_shows_each_step_slurm_topology_and_aco_placement(tmp_path, make_run):
    run = make_run(tmp_path / "run")
    (run / "up.txt").write_text("NODE  GROUP PATH\np1_tb1_1@10.0.0.2  root/s1/tb1\n")
    (run / "compare.txt").write_text("clades: recall 1.000 (2 of 2 true clades found)\n" + "x\n" * 100)
    (run / "pipeline.json").write_text(json.dumps({
        "format": "terrain.pipeline/1", "job": "7", "nodelist": "tb[1-4]", "strategy": "tree",
        "statistic": "median", "payload_bytes": 8000, "seconds": 19.2,
        "steps": [{"title": "1. start one VM per allocated node", "started_s": 0.0, "seconds": 3.0, "output": "up.txt"},
                  {"title": "5. compare", "started_s": 8.5, "seconds": 2.1, "output": "compare.txt"}]}))
    (run / "slurm.json").write_text(json.dumps({
        "format": "terrain.topology/1", "metric": "ultrametric",
        "tree": {"name": "root", "children": [{"name": "s1", "children": [{"node": "tb1"}, {"node": "tb2"}]},
                                              {"name": "s2", "children": [{"node": "tb3"}, {"node": "tb4"}]}]}}))
    (run / "aco.jsonl").write_text(
        "".join(json.dumps({"format": "terrain.aco/1", "placement": p, "seed": s, "main_s": t, "setup_s": 0.001,
                            "best_cost": 1012, "colonies": 3, "nodes": 4}) + "\n"
                for p, s, t in [("distance", 1, 0.02), ("distance", 2, 0.04), ("random", 1, 0.06), ("random", 2, 0.06)]))
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["outputs"] = [{"kind": "slurm_topology", "file": "slurm.json"},
                           {"kind": "aco_placement", "file": "aco.jsonl"},
                           {"kind": "pipeline", "file": "pipeline.json"}]
    (run / "manifest.json").write_text(json.dumps(manifest))
    page, errors = build_report([run])
    assert errors == []
    assert _section_ids(page) == ["slurm_topology", "aco_placement", "pipeline"]
    assert "<td>s1</td><td class=\"num\">1</td><td class=\"num\">2</td><td>tb1 tb2</td>" in page
    assert "random / distance: 2.00" in page
    assert "<td>1. start one VM per allocated node</td>" in page and "p1_tb1_1@10.0.0.2  root/s1/tb1" in page
    assert "... 21 more lines in compare.txt" in page  # 101 lines, 80 shown


def test_aco_placement_lines_that_are_not_json_are_reported(tmp_path, make_run):
    run = make_run(tmp_path / "run")
    (run / "aco.jsonl").write_text('{"placement": "random", "main_s": 0.1}\nnot json\n')
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["outputs"] = [{"kind": "aco_placement", "file": "aco.jsonl"}]
    (run / "manifest.json").write_text(json.dumps(manifest))
    page, errors = build_report([run])
    assert len(errors) == 1 and "aco.jsonl: line 2 is not JSON" in errors[0]


def test_the_live_demo_step_renders_its_timeline_and_places(tmp_path, make_run):
    run = make_run(tmp_path / "run")
    (run / "live").mkdir()
    (run / "live" / "live.json").write_text(
        json.dumps(
            {
                "format": "terrain.live/1",
                "healed_ms": 66,
                "timeline": [{"t_s": 2.9, "what": "node joined", "version": 1, "detail": "n9 placed next to n3, n4"}],
                "places": [{"node": "n9", "before": "-", "after": "live/s1/s1r2"}],
            }
        )
    )
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["outputs"].append({"kind": "live", "file": "live/live.json", "parameters": {}})
    (run / "manifest.json").write_text(json.dumps(manifest))
    page, errors = build_report([run])
    assert errors == []
    assert "Live cluster" in page
    assert "<td>node joined</td>" in page and "<td>live/s1/s1r2</td>" in page

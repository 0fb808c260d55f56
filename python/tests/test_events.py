"""Tests for terrain_analysis.events: reading events.jsonl and the two EventSpace views."""

from __future__ import annotations

import json

import numpy as np
import pytest

from terrain_analysis.cli import main
from terrain_analysis.events import read_events, reads_figure, spans, timeline_figure, write_event_views


def _run(workers: int = 3, steps: int = 4) -> list[dict]:
    """A small wind tunnel's events: each step a worker communicates 100 us then computes 400 us;
    worker w starts 50 us later per step than worker 0 (a drifting wavefront); reads from above
    take 10 us before step 3 and 90 us from it on, reads from below the other way round."""
    events = []
    for w in range(workers):
        t = 1_000_000 + 20 * w
        for s in range(1, steps + 1):
            t += 50 * w
            meta = {"worker": w, "step": s}
            for source in ("above", "below"):
                slow = (source == "above") == (s >= 3)
                events.append(
                    {"time_us": t + 90, "name": "windtunnel.read", "node": "a@h", "pid": "<0.1.0>",
                     "collector": "explicit", "measurements": {"duration_us": 90 if slow else 10},
                     "metadata": {**meta, "from": source}}
                )
            events.append({"time_us": t + 100, "name": "windtunnel.communicate", "node": "a@h", "pid": "<0.1.0>",
                           "collector": "explicit", "measurements": {"duration_us": 100}, "metadata": meta})
            events.append({"time_us": t + 500, "name": "windtunnel.compute", "node": "a@h", "pid": "<0.1.0>",
                           "collector": "explicit", "measurements": {"duration_us": 400}, "metadata": meta})
            events.append({"time_us": t + 5, "name": "windtunnel.send", "node": "a@h", "pid": "<0.1.0>",
                           "collector": "explicit", "measurements": {}, "metadata": {**meta, "message": s}})
            t += 500
    return events


def _write(path, events, workers=3, steps=4):
    header = {"format": "terrain.events/1", "nodes": ["a@h"], "workers": workers, "steps": steps, "lost": 0}
    path.write_text("\n".join(json.dumps(x) for x in [header, *events]) + "\n")
    return path


def test_read_events_round_trip(tmp_path):
    events = _run()
    header, read = read_events(_write(tmp_path / "events.jsonl", events))
    assert header["workers"] == 3
    assert read == events


@pytest.mark.parametrize(
    ("text", "message"),
    [("", "is empty"),
     ('{"format": "terrain.latency/1"}\n', "line 1: format 'terrain.latency/1', expected 'terrain.events/1'"),
     ('{"format": "terrain.events/1"}\n{"name": "x"}\n', "line 2 is not an event")],
)
def test_read_events_rejects_what_is_not_an_events_file(tmp_path, text, message):
    path = tmp_path / "events.jsonl"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        read_events(path)


def test_spans_start_a_duration_before_their_time():
    compute = spans(_run(), "windtunnel.compute")
    assert compute.worker.size == 12
    # worker 0, step 1 computes from 100 us to 500 us after the first span began
    first = (compute.worker == 0) & (compute.step == 1)
    assert compute.start_s[first][0] == pytest.approx(100e-6)
    assert compute.duration_s[first][0] == pytest.approx(400e-6)


def test_timeline_draws_a_bar_per_worker_and_the_highlighted_step():
    figure = timeline_figure(_run(), highlight_step=2)
    ax = figure.axes[0]
    assert list(ax.get_yticks()) == [0, 1, 2]
    # 2 kinds x 3 workers, then the highlighted step's 2 kinds x 3 workers
    assert len(ax.collections) == 12
    highlighted = ax.collections[6:]
    assert all(len(c.get_paths()) == 1 for c in highlighted)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["communication", "computation", "step 2 computation", "step 2 communication"]


def test_timeline_needs_span_events():
    with pytest.raises(ValueError, match="'events' has no windtunnel.communicate"):
        timeline_figure([e for e in _run() if e["name"] == "windtunnel.send"])


def test_reads_view_shows_the_switch_from_above_to_below():
    ax = reads_figure(_run(), worker=1).axes[0]
    above, below = ax.lines
    assert list(above.get_xdata()) == [1, 2, 3, 4]
    np.testing.assert_allclose(above.get_ydata(), [0.01, 0.01, 0.09, 0.09])
    np.testing.assert_allclose(below.get_ydata(), [0.09, 0.09, 0.01, 0.01])
    assert above.get_linestyle() == "-" and below.get_linestyle() == ":"


def test_reads_view_names_a_worker_without_reads():
    with pytest.raises(ValueError, match="'worker' 7 has no windtunnel.read events"):
        reads_figure(_run(), worker=7)


def test_write_event_views_writes_png_and_svg(tmp_path):
    written = write_event_views(_run(), tmp_path, 2, 1)
    assert [p.name for p in written] == ["timeline.png", "timeline.svg", "reads.png", "reads.svg"]
    assert all(p.stat().st_size > 1000 for p in written)


def test_cli_events_draws_the_views_into_the_run(tmp_path, capsys):
    _write(tmp_path / "events.jsonl", _run())
    assert main(["events", str(tmp_path), "--highlight-step", "3"]) == 0
    out = capsys.readouterr().out
    assert "60 events, 3 workers, 4 steps; step 3 highlighted" in out
    assert (tmp_path / "timeline.png").is_file() and (tmp_path / "reads.svg").is_file()


def test_cli_events_reports_a_bad_worker(tmp_path, capsys):
    _write(tmp_path / "events.jsonl", _run())
    assert main(["events", str(tmp_path), "--worker", "9"]) == 1
    assert "'worker' 9 has no windtunnel.read events" in capsys.readouterr().err

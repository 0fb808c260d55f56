"""Tests for the registry of format tags and manifest kinds (spec/formats.json, terrain_analysis.formats):
both languages agree, no source uses a tag or a manifest kind the registry lacks, the report renders or lists
every kind."""

from __future__ import annotations

import ast
import importlib.util
import json
import re
from pathlib import Path

import pytest

from terrain_analysis.formats import FORMATS, KINDS, check_format, read_document, tag
from terrain_analysis.report import LISTED_KINDS, RENDERERS

ROOT = Path(__file__).resolve().parents[2]
ERLANG = sorted([*ROOT.glob("apps/*/src/**/*.erl"), *ROOT.glob("apps/*/include/*.hrl")])
PYTHON = sorted((ROOT / "python" / "src").rglob("*.py"))
TAG = re.compile(r"terrain\.([a-z_]+)/(\d+)")
HRL = ROOT / "apps" / "terrain_json" / "include" / "terrain_formats.hrl"


def _generator():
    spec = importlib.util.spec_from_file_location("formats_hrl", ROOT / "python" / "tools" / "formats_hrl.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_package_reads_the_registry_at_the_top_of_the_repository():
    registry = json.loads((ROOT / "spec" / "formats.json").read_text())
    assert set(FORMATS) == set(registry["formats"]) and set(KINDS) == set(registry["kinds"])


def test_the_erlang_header_is_generated_from_the_registry():
    generator = _generator()
    assert HRL.read_text() == generator.render(json.loads((ROOT / "spec" / "formats.json").read_text())), (
        "apps/terrain_json/include/terrain_formats.hrl is not current: run 'make formats'"
    )
    defined = dict(re.findall(r'-define\((TERRAIN_FORMAT_\w+), <<"([^"]+)">>\)', HRL.read_text()))
    assert sorted(defined.values()) == sorted(FORMATS)


def _lines(path: Path) -> list[tuple[int, str]]:
    """Numbered lines; Erlang comment lines left out (an edoc usage example may show a made-up tag)."""
    lines = enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
    if path.suffix in (".erl", ".hrl"):
        return [(n, text) for n, text in lines if not text.lstrip().startswith("%")]
    return list(lines)


@pytest.mark.parametrize("language, files", [("Erlang", ERLANG), ("Python", PYTHON)])
def test_every_tag_in_the_sources_is_registered(language, files):
    assert files, f"no {language} sources found under {ROOT}"
    unregistered = sorted(
        f"{path.relative_to(ROOT)}:{line}: {match.group(0)}"
        for path in files
        for line, text in _lines(path)
        for match in TAG.finditer(text)
        if match.group(0) not in FORMATS
    )
    assert unregistered == [], "register these in spec/formats.json (then 'make formats')"


def test_erlang_writers_use_the_registry_macros():
    literals = sorted(
        f"{path.relative_to(ROOT)}:{line}"
        for path in ERLANG
        if path != HRL
        for line, text in _lines(path)
        if re.search(r'<<"terrain\.[a-z_]+/\d+">>', text)
    )
    assert literals == [], "use ?TERRAIN_FORMAT_<NAME> from terrain_json/include/terrain_formats.hrl"
    macros = set(re.findall(r"-define\((TERRAIN_FORMAT_\w+),", HRL.read_text()))
    used = {m for path in ERLANG for m in re.findall(r"\?(TERRAIN_FORMAT_\w+)", path.read_text(encoding="utf-8"))}
    assert used and used <= macros


def _code_strings(path: Path) -> list[tuple[int, str]]:
    """String constants of a module's code, docstrings left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def test_python_code_spells_no_tag_of_its_own():
    spelled = sorted(
        f"{path.relative_to(ROOT)}:{line}: {text!r}"
        for path in PYTHON
        for line, text in _code_strings(path)
        if re.fullmatch(r"terrain\.[a-z_]+/\d*", text)
    )
    assert spelled == [], "use terrain_analysis.formats.tag(name) or KINDS[kind].formats"


def test_every_manifest_kind_an_erlang_writer_uses_is_registered():
    kinds = {
        (path.relative_to(ROOT), kind)
        for path in ERLANG
        for text in path.read_text(encoding="utf-8").splitlines()
        if "file =>" in text
        for kind in re.findall(r"\bkind => ([a-z_]+)", text)
    }
    assert len(kinds) > 20
    assert sorted(f"{path}: {kind}" for path, kind in kinds if kind not in KINDS) == []


def test_the_report_renders_or_lists_every_registered_kind():
    for name, kind in KINDS.items():
        assert kind.report in ("rendered", "listed"), name
        assert (name in RENDERERS) == (kind.report == "rendered"), name
        assert (name in LISTED_KINDS) == (kind.report == "listed"), name
        assert set(kind.formats) <= set(FORMATS), name
    assert set(RENDERERS) <= set(KINDS)
    for name in ("summary", "placement_dot", "latency_csv", "bench_point", "bench_node_files", "attributes_times"):
        assert name in RENDERERS or name in LISTED_KINDS


def test_tag_check_format_and_read_document(tmp_path):
    assert tag("topology_comparison") == "terrain.topology_comparison/1"
    with pytest.raises(KeyError):
        tag("nonesuch")
    with pytest.raises(KeyError, match="not in the registry"):
        check_format({"format": "terrain.nonesuch/1"}, "terrain.nonesuch/1", "x")
    with pytest.raises(ValueError, match=r"^x.json: format None, expected 'terrain.gev/1'$"):
        check_format([1, 2], tag("gev"), "x.json")
    path = tmp_path / "t.json"
    path.write_text('{"format": "terrain.topology/1", "height": NaN}')
    with pytest.raises(ValueError, match="t.json: height is NaN"):
        read_document(path, tag("topology"))
    path.write_text("{")
    with pytest.raises(ValueError, match="t.json: not JSON"):
        read_document(path, tag("topology"))

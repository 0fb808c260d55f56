"""Write apps/terrain_json/include/terrain_formats.hrl from spec/formats.json (the registry of format tags).

Run from anywhere: ``python python/tools/formats_hrl.py`` (``make formats``). ``--check`` exits 1 when the
file is not what the registry gives (python/tests/test_formats.py runs the same comparison).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REGISTRY = ROOT / "spec" / "formats.json"
HRL = ROOT / "apps" / "terrain_json" / "include" / "terrain_formats.hrl"


def macro(tag: str) -> str:
    """``terrain.topology_comparison/1`` -> ``TERRAIN_FORMAT_TOPOLOGY_COMPARISON``."""
    return "TERRAIN_FORMAT_" + tag.split("/")[0].removeprefix("terrain.").upper()


def render(registry: dict) -> str:
    """The header file's text for a registry document."""
    tags = sorted(registry["formats"])
    names = [macro(t) for t in tags]
    if len(set(names)) != len(names):
        raise SystemExit("spec/formats.json: two versions of one format are registered; give the old one up first")
    lines = [
        "%% The format tags of terrain's files, one macro each.",
        "%% Generated from spec/formats.json by python/tools/formats_hrl.py (make formats): do not edit;",
        "%% python/tests/test_formats.py fails when this file and the registry differ.",
        "-ifndef(TERRAIN_FORMATS_HRL).",
        "-define(TERRAIN_FORMATS_HRL, true).",
        "",
    ]
    lines += [f'-define({macro(t)}, <<"{t}">>).' for t in tags]
    lines += ["", "-endif.", ""]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    text = render(json.loads(REGISTRY.read_text(encoding="utf-8")))
    if argv[1:] == ["--check"]:
        if not HRL.exists() or HRL.read_text(encoding="utf-8") != text:
            print(f"{HRL} is not current: run 'make formats'", file=sys.stderr)
            return 1
        return 0
    HRL.write_text(text, encoding="utf-8")
    print(HRL)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

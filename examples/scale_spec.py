#!/usr/bin/env python3
"""Writes a cluster spec of N one-scheduler nodes in sites x 4 racks (docs/BENCHMARKS.md, "256 VMs").

usage: scale_spec.py N [--connect-all false] [--latency SITE,RACK,NODE] [--args "VM ARGS"]
  --latency: one-way microseconds per level; --args: extra VM arguments of every node (split at spaces)
"""
import sys


def spec(n, connect_all=True, latency=None, args=None):
    sites = 4 if n >= 64 else 2 if n >= 16 else 1
    racks = 4 if n >= 16 else 2
    per = n // (sites * racks)
    if per * sites * racks != n:
        raise SystemExit(f"N must be a multiple of {sites * racks}, got {n}")

    def opts(level, extra=""):
        parts = [f"latency => {latency[level]}"] if latency else []
        if extra:
            parts.append(extra)
        return "#{" + ", ".join(parts) + "}"

    lines = [f"%% {n} nodes: {sites} sites x {racks} racks x {per} nodes",
             f"{{cluster, scale{n}, {opts(0, '' if connect_all else 'connect_all => false')}}}."]
    for s in range(1, sites + 1):
        groups = []
        for r in range(1, racks + 1):
            node_opts = "schedulers => 1" + (", args => [" + ", ".join(f'"{a}"' for a in args) + "]" if args else "")
            nodes = ", ".join(f"{{node, s{s}r{r}n{k}, #{{{node_opts}}}}}" for k in range(1, per + 1))
            groups.append(f"    {{group, s{s}r{r}, {opts(2)}, [{nodes}]}}")
        lines.append(f"{{group, s{s}, {opts(1)}, [\n" + ",\n".join(groups) + "]}.")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    args = sys.argv[1:]
    if not args or args[0] in ("-h", "--help"):
        print(__doc__)
        raise SystemExit(0 if args else 2)
    n = int(args[0])
    connect_all = not ("--connect-all" in args and args[args.index("--connect-all") + 1] == "false")
    latency = None
    if "--latency" in args:
        latency = [int(x) for x in args[args.index("--latency") + 1].split(",")]
    vm_args = args[args.index("--args") + 1].split() if "--args" in args else None
    sys.stdout.write(spec(n, connect_all, latency, vm_args))

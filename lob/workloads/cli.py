"""`lob workloads list` and `lob workloads describe NAME [--scale S]` (thin wrappers)."""

from __future__ import annotations

import argparse
import textwrap


def _cmd_list(args) -> int:
    from lob.workloads import spec, workload_names

    for name in workload_names():
        s = spec(name)
        short = textwrap.shorten(s["description"], 60, placeholder=" ...")
        print(f"{name:<18} {s['family']:<13} {short}")
    return 0


def _cmd_describe(args) -> int:
    from lob.workloads import describe

    print(describe(args.name, scale=args.scale))
    return 0


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``workloads`` command group to the ``lob`` parser."""
    p = subparsers.add_parser("workloads", help="list and describe workloads")
    sub = p.add_subparsers(dest="workloads_cmd", required=True)
    s = sub.add_parser("list", help="registered workloads")
    s.set_defaults(func=_cmd_list)
    s = sub.add_parser("describe", help="parameters, provenance and diagnostics of a workload")
    s.add_argument("name")
    s.add_argument("--scale", type=float, default=0.1,
                   help="1.0 = published size (default 0.1: the reference replay is slow)")
    s.set_defaults(func=_cmd_describe)

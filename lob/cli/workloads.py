"""`lob workloads list [--full]` and `lob workloads describe NAME [--scale S]` (thin wrappers)."""

from __future__ import annotations

import argparse
import sys
import textwrap


def _cmd_list(args) -> int:
    from lob.workloads import spec, workload_names

    for name in workload_names():
        s = spec(name)
        if args.full:
            print(f"{name}  ({s['family']})")
            print(textwrap.fill(s["description"], 96, initial_indent="  ",
                                subsequent_indent="  "))
            print(textwrap.fill(f"provenance: {s['provenance']}", 96, initial_indent="  ",
                                subsequent_indent="    "))
        else:
            short = textwrap.shorten(s["description"], 60, placeholder=" ...")
            print(f"{name:<18} {s['family']:<13} {short}")
    if not args.full:
        print("(descriptions shortened: `lob workloads list --full` or "
              "`lob workloads describe NAME` shows them whole)", file=sys.stderr)
    return 0


def _cmd_describe(args) -> int:
    from lob.workloads import build, spec
    from lob.workloads.diagnostics import diagnose, summary_text

    wl = build(args.name, scale=args.scale)
    size = "the published size" if args.scale == 1.0 else f"{args.scale:g} x the published size"
    params = {k: v for k, v in wl.params.items() if k != "scale"}
    print(f"{wl.name}  ({wl.family})")
    print(textwrap.fill(wl.description, 96, initial_indent="  ", subsequent_indent="  "))
    print(f"  provenance: {wl.provenance}")
    print(f"  scale: {args.scale:g} ({size}): {len(wl):,} commands ({wl.n_timed:,} timed)")
    print(f"  params: {params}")
    print(f"  config: {wl.config}")
    extra = spec(args.name).get("describe")  # a family's own notes (a real stream's conversion)
    if extra is not None:
        print(extra(wl))
    if args.no_diagnostics:
        return 0
    if len(wl) > 200_000:
        print(f"  (replaying {len(wl):,} commands on the reference engine for the diagnostics; "
              "this takes a while: --scale 0.01 for a quick look, --no-diagnostics to skip)",
              file=sys.stderr, flush=True)
    print(summary_text(diagnose(wl)))
    return 0


def _scale(text: str) -> float:
    v = float(text)
    if not 0 < v <= 100:  # also rejects nan
        raise argparse.ArgumentTypeError(f"must be in (0, 100], got {text}")
    return v


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``workloads`` command group to the ``lob`` parser."""
    p = subparsers.add_parser("workloads", help="list and describe workloads")
    sub = p.add_subparsers(dest="workloads_cmd", required=True)
    s = sub.add_parser("list", help="registered workloads")
    s.add_argument("--full", action="store_true",
                   help="whole descriptions and provenance, not one shortened line each")
    s.set_defaults(func=_cmd_list)
    s = sub.add_parser("describe", help="parameters, provenance and diagnostics of a workload")
    s.add_argument("name")
    s.add_argument("--scale", type=_scale, default=1.0,
                   help="workload size, 1.0 = the published (seed's) size (the default)")
    s.add_argument("--no-diagnostics", action="store_true",
                   help="skip the reference replay that measures what the stream does")
    s.set_defaults(func=_cmd_describe)

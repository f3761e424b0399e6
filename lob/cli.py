"""`lob ...`: a thin command-line wrapper over the package API.

Each subcommand is one small function that calls the API and prints; nothing here
computes anything a notebook could not get from ``lob`` itself.
"""

from __future__ import annotations

import argparse
import sys


def _cmd_engines(args) -> int:
    from lob.engines import engine_info, engine_names

    for name in engine_names():
        info = engine_info(name)
        print(f"{name:<16} {info.backend:<7} {info.description}")
    return 0


def _cmd_main(args) -> int:
    """The default batch (see README): every experiment at the default preset."""
    from lob.experiments import run_batch
    from lob.report import write_index

    code = run_batch(preset=args.preset)
    print(f"index of the latest complete runs: {write_index()}")
    return code


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lob", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)

    s = sub.add_parser("engines", help="list registered engines and lineage versions")
    s.set_defaults(func=_cmd_engines)

    s = sub.add_parser("main", help="the main job: the default experiment batch")
    s.add_argument("--preset", default="default", help="quick | default | full")
    s.set_defaults(func=_cmd_main)

    # subcommands of the other areas register themselves here
    for mod in ("lob.workloads.cli", "lob.measure.cli", "lob.experiments.cli"):
        try:
            m = __import__(mod, fromlist=["add_parsers"])
        except ModuleNotFoundError as e:
            if e.name != mod:
                raise
            continue
        m.add_parsers(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, TypeError, FileNotFoundError, PermissionError) as e:
        print(f"lob {args.cmd}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

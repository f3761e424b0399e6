"""`lob ...`: a thin command-line wrapper over the package API.

One module of this package per command group (:data:`GROUPS`). Each subcommand is one small
function that calls the API and prints; nothing here computes anything a notebook could not
get from ``lob`` itself. Every command's detail is in its ``--help``.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# the command groups, in the order `lob --help` lists them
GROUPS = ("lob.cli.engines", "lob.cli.experiments", "lob.cli.workloads", "lob.cli.data",
          "lob.cli.fuzz", "lob.cli.bench", "lob.cli.profile", "lob.cli.compare",
          "lob.cli.bisect")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lob", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    for mod in GROUPS:
        importlib.import_module(mod).add_parsers(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    from lob.paths import absolute_env

    absolute_env()  # paths in the environment, resolved once, here: children inherit them
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, TypeError, FileNotFoundError, PermissionError) as e:
        print(f"lob {args.cmd}: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `lob engines | head`: the reader left; no traceback
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


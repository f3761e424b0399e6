"""``lob main`` (the default batch), ``lob experiments list|run`` and ``lob report``: thin
wrappers over the runner and the report."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

OUT_HELP = "artifacts directory (default: artifacts/ of the checkout)"


def parse_assignment(text: str) -> tuple[str, object]:
    """``key=value`` with the value read as YAML (``3`` -> int, ``[v0, v1]`` -> list)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"parameter {text!r} is not key=value")
    try:
        return key.strip(), yaml.safe_load(value) if value.strip() else ""
    except yaml.YAMLError as e:  # one line: where the value stops being YAML
        why = " ".join(str(getattr(e, "problem", None) or e).split())
        raise ValueError(f"parameter {text!r}: the value is not valid YAML ({why}); quote "
                         "a string that holds ':', '[', '{' or '#'") from None


def _cmd_main(args) -> int:
    """The default batch (see README): every experiment at the default preset."""
    from lob.experiments import run_batch
    from lob.experiments.lock import ArtifactsLocked

    try:
        return run_batch(preset=args.preset)  # refreshes artifacts/index.md itself
    except ArtifactsLocked as e:  # another batch writes this folder: nothing was touched
        print(f"lob main: {e}", file=sys.stderr)
        return 3


def _cmd_list(args) -> int:
    from lob.experiments import experiment_names, get_experiment

    for name in experiment_names():
        exp = get_experiment(name)
        print(f"{name:<22} [{', '.join(exp.tags)}] {exp.description.splitlines()[0]}")
    return 0


def _cmd_run(args) -> int:
    from lob.experiments import experiment_names, run_batch
    from lob.experiments.lock import ArtifactsLocked

    if bool(args.all) == bool(args.names):
        raise ValueError("give experiment names or --all (not both)")
    overrides = dict(parse_assignment(p) for p in args.param)
    if args.out and Path(args.out).exists() and not Path(args.out).is_dir():
        raise ValueError(f"--out {args.out} is a file, not an artifacts directory")
    names = experiment_names() if args.all else args.names
    if args.wait < 0:
        raise ValueError(f"--wait must be >= 0 seconds, got {args.wait}")
    try:
        return run_batch(names, preset=args.preset, overrides=overrides, artifacts=args.out,
                         force=args.force, executor=args.executor, scheduler=args.scheduler,
                         workers=args.workers, concurrent_timing=args.concurrent_timing,
                         lock_wait=args.wait)
    except ArtifactsLocked as e:  # another batch writes this folder: nothing was touched
        print(f"lob experiments run: {e}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print("\ninterrupted: complete runs are kept; the same command resumes (the run that "
              "was going on is redone from scratch)", file=sys.stderr)
        return 130


def _cmd_report(args) -> int:
    from lob.experiments.report import write_index

    if args.out and Path(args.out).exists() and not Path(args.out).is_dir():
        raise ValueError(f"--out {args.out} is a file, not an artifacts directory")
    if args.reruns is not None:  # the claims' experiments K times from scratch, tallied
        from lob.experiments.lock import ArtifactsLocked
        from lob.experiments.reruns import RerunsFailed, markdown_section, run_reruns

        try:
            path = run_reruns(args.reruns, args.experiments or None, args.preset, args.out)
        except ArtifactsLocked as e:
            print(f"lob report: {e}", file=sys.stderr)
            return 3
        except RerunsFailed as e:  # shown with the exit codes; the previous tally stays
            print("\n".join(markdown_section(e.record)))
            print(f"lob report: {e}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print("\ninterrupted: the previous reruns (if any) are kept as they were",
                  file=sys.stderr)
            return 130
        print("\n".join(markdown_section(json.loads(path.read_text()))))
        print(path)
    elif args.experiments:
        raise ValueError("--experiments only goes with --reruns K")
    print(write_index(args.out))
    return 0


MAIN_DESC = (
    "The default batch (`make run`): every experiment at the default preset, then `lob "
    "report`.")
RUN_DESC = (
    "The notebooks run by papermill into artifacts/<experiment>/<run_id>/; values are checked "
    "before any kernel starts. --force reruns into a scratch folder and swaps on success (a "
    "swap killed between its renames is undone by the next batch, first of all).")
REPORT_DESC = (
    "Writes artifacts/index.md: the latest complete run of each experiment, every run listed. "
    "With --reruns K, first the experiments that measure the seeds' claims run K times from "
    "scratch (each notebook in a fresh process, into artifacts/reruns/), each claim's "
    "verdicts are counted (\"reproduced 5/5\", \"direction only 3/5, inconclusive 2/5\") and "
    "shown at the top of the index; checked first, under the folder's lock, built in a "
    "scratch folder and swapped in only when all K completed (a failed rerun is no verdict: "
    "named with its exit code, exit 1, the previous tally kept).")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Register ``main``, ``experiments`` and ``report`` under the ``lob`` command."""
    s = sub.add_parser("main", description=MAIN_DESC,
                       help="the main job: the default experiment batch")
    s.add_argument("--preset", default="default", help="quick | default | full")
    s.set_defaults(func=_cmd_main)

    e = sub.add_parser("experiments", help="list and run the parameterised notebooks")
    esub = e.add_subparsers(dest="experiments_cmd", required=True)
    s = esub.add_parser("list", help="experiments with their tags and description")
    s.set_defaults(func=_cmd_list)
    s = esub.add_parser("run", description=RUN_DESC,
                        help="run experiments with papermill into artifacts/")
    s.add_argument("names", nargs="*", help="experiment names (see `lob experiments list`)")
    s.add_argument("--all", action="store_true", help="every experiment")
    s.add_argument("--preset", default="default", help="quick | default | full")
    s.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE",
                   help="override a notebook parameter (value parsed as YAML); repeatable")
    s.add_argument("--out", default=None, help=OUT_HELP)
    s.add_argument("--force", action="store_true", help="redo runs that are already complete")
    s.add_argument("--wait", type=float, default=0.0, metavar="SECONDS",
                   help="if another batch holds the artifacts folder, wait this long for it "
                        "(default 0: refuse at once, naming the holder; exit code 3)")
    s.add_argument("--executor", choices=("local", "dask"), default="local",
                   help="local: one run after another here (default); dask: one task per run "
                        "on a Dask cluster")
    s.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="dask: an existing scheduler (tcp://host:8786); default: start a "
                        "local cluster")
    s.add_argument("--workers", type=int, default=None, metavar="N",
                   help="dask: worker processes of the local cluster (default: CPU count)")
    s.add_argument("--concurrent-timing", action="store_true",
                   help="dask: let timing runs share a host (default: one at a time per host)")
    s.set_defaults(func=_cmd_run)

    r = sub.add_parser("report", description=REPORT_DESC,
                       help="write artifacts/index.md: latest complete run of each, "
                            "every run listed")
    r.add_argument("--out", default=None, help=OUT_HELP)
    r.add_argument("--reruns", type=int, default=None, metavar="K",
                   help="first run the experiments that measure the seeds' claims K times "
                        "from scratch (each notebook in a fresh process, into "
                        "<out>/reruns/), and count each claim's verdicts over the K reruns "
                        "(index.md shows the tally)")
    r.add_argument("--experiments", nargs="+", default=None, metavar="NAME",
                   help="with --reruns: only these experiments (default: every experiment "
                        "of the default batch that measures a claim)")
    r.add_argument("--preset", default="default", help="with --reruns: quick | default | full")
    r.set_defaults(func=_cmd_report)

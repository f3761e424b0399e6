"""``lob bench``: print the percentile table and throughput line, write .hgrm + JSON."""

from __future__ import annotations

import argparse
import os
import sys


def _cmd_bench(args) -> int:
    from lob.engines.foreign import ForeignEngineError, crash
    from lob.engines.registry import engine_spec
    from lob.measure.bench import bench

    if engine_spec(args.engine).backend == "foreign" and not os.environ.get(crash.ENV):
        return crash.run_child(_argv(args))  # a crash of the engine is reported, not mute
    try:
        res = bench(args.engine, args.workload, repeat=args.repeat, scale=args.scale,
                    seed=args.seed, alloc=args.alloc, gc=not args.no_gc,
                    progress=not args.no_progress, latency=not args.no_latency, out=args.out)
    except ForeignEngineError as e:  # one line: which engine misbehaved, and how
        print(f"lob bench: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as e:
        print(f"lob bench: interrupted{': ' + str(e) if str(e) else ''}", file=sys.stderr)
        return 130
    print(res.table())
    stem = f"{res.engine}__{res.workload}"
    print(f"wrote {args.out}/{stem}.hgrm and {stem}.json")
    return 0


def _argv(args) -> list[str]:
    """The ``lob bench`` command line of ``args`` (for the child process)."""
    argv = ["bench", "--engine", args.engine, "--workload", args.workload, "--scale",
            repr(args.scale), "--repeat", str(args.repeat), "--out", str(args.out)]
    if args.seed is not None:
        argv += ["--seed", str(args.seed)]
    flags = {"--alloc": args.alloc, "--no-gc": args.no_gc, "--no-latency": args.no_latency,
             "--no-progress": args.no_progress}
    return argv + [f for f, on in flags.items() if on]


BENCH_DESC = (
    "HDR percentiles, throughput over repeats, clock overhead and run conditions of one "
    "engine on one workload (a foreign engine's library named by the sha256 of the bytes "
    "loaded), written as .hgrm + JSON. An engine whose replay disagrees with `reference` "
    "(checksum, counters) is refused, not measured.")


def add_parsers(sub) -> None:
    """Register ``lob bench`` on the ``lob`` CLI's subparsers."""
    s = sub.add_parser("bench", description=BENCH_DESC,
                       help="latency percentiles + throughput of one engine on one "
                            "workload; writes .hgrm and JSON",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    s.add_argument("--engine", required=True, help="engine name (see `lob engines`)")
    s.add_argument("--workload", required=True, help="workload name (see `lob workloads`)")
    s.add_argument("--scale", type=float, default=1.0, help="workload scale (1.0 = published)")
    s.add_argument("--seed", type=int, default=None, help="override the workload seed")
    s.add_argument("--repeat", type=int, default=5,
                   help="latency captures (merged) and throughput replays")
    s.add_argument("--out", default="artifacts/bench", help="output folder")
    s.add_argument("--alloc", action="store_true", help="count allocations (+ tracemalloc)")
    s.add_argument("--no-gc", action="store_true", help="disable the cyclic GC while measuring")
    s.add_argument("--no-latency", action="store_true", help="throughput only")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.set_defaults(func=_cmd_bench)

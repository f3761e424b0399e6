"""``lob profile``: engines side by side in interleaved rounds, as ratios to a base, written as
JSON with the run conditions (:func:`lob.diagnose.profile.versus_base`); ``lob hotspots``: a
compiled kernel's time by source line; ``lob callgrind``: counts per command under valgrind."""

from __future__ import annotations

import argparse
import sys


def _cmd_profile(args) -> int:
    import datetime as dt
    import json
    from pathlib import Path

    from lob.diagnose.profile import versus_base, versus_base_text

    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)  # before minutes of measuring, not after
    except OSError as e:
        print(f"lob profile: error: cannot write into {out}: {e.strerror}", file=sys.stderr)
        return 2
    try:
        rep = versus_base(args.engines, args.workload or ("lobster_replay", "cpp_comprehensive"),
                          rounds=args.rounds, scale=args.scale, clock=args.clock,
                          top_up=args.top_up)
    except KeyboardInterrupt:
        print("lob profile: interrupted (nothing written)", file=sys.stderr)
        return 130
    print(versus_base_text(rep))
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    path = out / f"profile-{stamp}.json"
    path.write_text(json.dumps(rep, indent=1) + "\n")
    print(f"wrote {path}")
    return 0


def _run_tool(name: str, available, call):
    """``call()`` of a tool that needs something installed: (result, None), or (None, exit
    status) after one line on stderr: 2 when ``available()`` says why it cannot run here, 1
    when the call refuses or fails."""
    why = available()
    if why is not None:
        print(f"lob {name}: {why}", file=sys.stderr)
        return None, 2
    try:
        return call(), None
    except (RuntimeError, ValueError, KeyError) as e:
        print(f"lob {name}: error: {e}", file=sys.stderr)
        return None, 1


def _stream_args(s) -> None:
    """The stream a diagnostic replays: ``--workload`` and ``--scale``."""
    s.add_argument("--workload", default="lobster_replay", help="workload name")
    s.add_argument("--scale", type=float, default=1.0, help="workload scale")


def _cmd_hotspots(args) -> int:
    from lob.diagnose.hotspots import available, hotspots

    h, rc = _run_tool("hotspots", available, lambda: hotspots(
        args.engine, args.workload, scale=args.scale, seconds=args.seconds, top=args.top))
    if rc is not None:
        return rc
    print(f"{h['engine']} on {h['workload']} ({h['commands']:,} commands), {h['reps']} "
          f"replays sampled by perf's cpu-clock: {h['kernel_samples']:,} of {h['samples']:,} "
          f"samples in the compiled kernel; the debug-info build ran "
          f"{h['ns_per_op']:.1f} ns/op under sampling")
    print("functions: " + ", ".join(f"{k} {v:.1%}" for k, v in h["functions"].items()))
    print(f"{'share':>6}  {'line':<18} {'function':<22} source")
    for r in h["lines"]:
        print(f"{r['share']:6.1%}  {r['where']:<18} {r['function']:<22} {r['code']}")
        if args.asm:
            for i in r["instructions"]:
                print(f"{'':8}{i['samples'] / h['kernel_samples']:6.1%}  {i['function']}"
                      f"+{i['offset']:#x}  {i['insn']}")
    return 0


def _add_hotspots(sub) -> None:
    """Register ``lob hotspots`` on the ``lob`` CLI's subparsers."""
    s = sub.add_parser("hotspots", description=HOTSPOTS_DESC,
                       help="where a compiled engine's kernel spends its time, "
                            "source line by source line (perf's cpu-clock samples)",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    s.add_argument("engine", help="a compiled engine (see `lob engines`), e.g. v5@numba")
    _stream_args(s)
    s.add_argument("--seconds", type=float, default=2.0,
                   help="kernel time sampled (fresh engines replay until it has run this long)")
    s.add_argument("--top", type=int, default=25, help="lines shown")
    s.add_argument("--asm", action="store_true",
                   help="under each line, its most sampled machine instructions")
    s.set_defaults(func=_cmd_hotspots)


def _cmd_callgrind(args) -> int:
    from lob.diagnose.callgrind import available, counts

    df, rc = _run_tool("callgrind", available,
                       lambda: counts(args.engines, args.workload, scale=args.scale))
    if rc is not None:
        return rc
    import pandas as pd

    shown = df.drop(columns=["checksum"] + (["note"] if df.note.isna().all() else []))
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        print(shown.to_string(index=False, float_format="%.3f"))
    return 0


def _add_callgrind(sub) -> None:
    """Register ``lob callgrind`` on the ``lob`` CLI's subparsers."""
    s = sub.add_parser("callgrind", description=CALLGRIND_DESC,
                       help="instructions, branches, mispredicts and cache "
                            "misses per command of each engine's replay (valgrind's callgrind)",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    s.add_argument("engines", nargs="+", help="engine names (see `lob engines`); the first "
                                              "is the base of the ratios")
    _stream_args(s)
    s.set_defaults(func=_cmd_callgrind)


PROFILE_DESC = (
    "Engines side by side in interleaved rounds on the same streams (default lobster_replay "
    "and cpp_comprehensive): kernel and whole-replay ns/op with intervals, replay/kernel, the "
    "ratio to the first engine with its interval, change call and the rounds it won, "
    "checksums compared, load and steal per stream. The core's clock and issue width are "
    "probed around every replay (a dependent xorshift chain and four independent ones), each "
    "kernel in cycles/op; the replays that ran on a core shared with another hardware thread "
    "are marked (below 0.85 of the stream's widest probe, or of this machine's quiet width "
    "remembered from its earlier streams in lob's cache), with the correlation of the first "
    "engine's kernel with that probe (whether the marks mean anything on this host), each "
    "engine's median over the others (\"quiet core\") and its ratio to the first engine over "
    "the rounds where both were quiet (--top-up N: up to N rounds more while fewer than "
    "--rounds were quiet), and the stream's own floor (reading every command and writing "
    "every outcome, no book) as ns/op and as a share of the first engine's kernel. c_book: "
    "`make -C examples/c_engine`, then LOB_ENGINES_TOML=examples/c_engine/engine.toml. Prints "
    "the table and writes it with every round and the run conditions to "
    "artifacts/profile/profile-<UTC time>.json.")
CALLGRIND_DESC = (
    "Instructions, loads, stores, branches, mispredicts and cache misses per command of each "
    "engine's replay, counted by valgrind's callgrind on a simulated CPU: exact and "
    "repeatable where the machine has no hardware counters (needs `apt-get install "
    "valgrind`). The mispredicts and misses are a model's: they rank engines, they do not "
    "price a step.")
HOTSPOTS_DESC = (
    "Where a compiled engine's kernel spends its time, source line by source line: perf "
    "samples a child on its cpu-clock timer (no hardware counter needed) while fresh engines "
    "replay the stream until the kernel has run --seconds, and each sample's instruction is "
    "mapped through the line table of a debug-info build of the kernel to the line of "
    "kernel_v4.py (or kernel.py) it came from, an inlined helper (rest, drop, bm_next) named "
    "as itself. A timer interrupt is taken once the instruction in hand retires, so a sample "
    "names the instruction after the one the core waited on: a line carries the cost of the "
    "missed load just before it (sometimes on the line above, which --asm shows) and of the "
    "mispredicted branch that resumes on it. The debug-info build's ns/op under sampling is "
    "printed beside the lines (not a benchmark). Needs perf (`apt-get install linux-perf`) "
    "and objdump.")


def add_parsers(sub) -> None:
    """Register ``lob profile``, ``lob hotspots`` and ``lob callgrind`` on the ``lob`` CLI's
    subparsers."""
    s = sub.add_parser("profile", description=PROFILE_DESC,
                       help="engines side by side in interleaved rounds: kernel and "
                            "whole-replay ns/op with intervals, ratios to the first "
                            "engine, checksums compared; writes JSON",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    s.add_argument("engines", nargs="+", help="engine names (see `lob engines`); the first is "
                                              "the base of the ratios")
    s.add_argument("--workload", action="append", default=None,
                   help="workload name, repeatable (default: lobster_replay and "
                        "cpp_comprehensive)")
    s.add_argument("--rounds", type=int, default=21, help="interleaved rounds")
    s.add_argument("--top-up", type=int, default=0,
                   help="up to this many rounds more per stream while fewer than --rounds ran "
                        "every replay on a quiet core (none shared with another hardware "
                        "thread)")
    s.add_argument("--scale", type=float, default=1.0, help="workload scale (1.0 = published)")
    s.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                   help="cpu: the measuring thread's CPU clock; wall: the wall clock")
    s.add_argument("--out", default="artifacts/profile", help="output folder")
    s.set_defaults(func=_cmd_profile)
    _add_callgrind(sub)
    _add_hotspots(sub)

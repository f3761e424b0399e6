"""``lob profile``: engines side by side in interleaved rounds, as ratios to a base, written as
JSON with the run conditions (:func:`lob.diagnose.profile.versus_base`)."""

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


def add_parsers(sub) -> None:
    """Register ``lob profile`` on the ``lob`` CLI's subparsers."""
    s = sub.add_parser("profile", help="engines side by side in interleaved rounds: kernel and "
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

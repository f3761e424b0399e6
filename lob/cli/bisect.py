"""``lob bisect``: the command line over :func:`lob.studies.gitbisect.bisect_versions`.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime

from lob.measure.stats import MIN_RATIO_N
from lob.studies.gitbisect import bisect_versions, metric_name


def _cmd_bisect(args) -> int:
    out = args.out
    if out is None:
        from lob.paths import artifacts_dir

        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        out = artifacts_dir() / "bisect" / f"{stamp}-{args.engine}-{metric_name(args.metric)}"
    try:
        res = bisect_versions(args.good, args.bad, args.engine, args.workload, args.metric,
                              repo=args.repo, scale=args.scale, runs=args.runs,
                              max_runs=args.max_runs, threshold=args.threshold / 100,
                              confidence=args.confidence, inner=args.inner, cache=args.cache,
                              out=out, endpoints=args.endpoints)
    except KeyboardInterrupt:
        print("\nlob bisect: interrupted; nothing written to the run folder (completed "
              "checkouts stay cached, a half-built one is discarded)", file=sys.stderr)
        return 130
    print(f"wrote {out}/bisect.json, bisect.png and {sum(bool(r.hists) for r in res.revisions)} "
          f".hgrm ({res.wall_s:.0f} s)")
    return 0


BISECT_DESC = (
    "The first commit whose metric moved beyond noise: revisions measured in interleaved "
    "rounds in one session on one host, each compared with good by the interval of their "
    "per-round ratios.")


def add_parsers(sub) -> None:
    """Register ``lob bisect`` on the ``lob`` CLI's subparsers."""
    import argparse

    s = sub.add_parser("bisect", description=BISECT_DESC,
                       help="find the first commit that moved a metric beyond noise "
                            "(interleaved, one host, one session)",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    s.add_argument("--good", required=True, help="a revision before the change")
    s.add_argument("--bad", required=True, help="a revision after it (first-parent descendant)")
    s.add_argument("--engine", required=True, help="engine name at every revision")
    s.add_argument("--workload", required=True, help="workload name")
    s.add_argument("--metric", default="ns_per_op", help="ns_per_op | p50 | p99 | p99_9 | "
                                                         "allocs_per_op")
    s.add_argument("--scale", type=float, default=0.002, help="workload scale")
    s.add_argument("--runs", type=int, default=5,
                   help="rounds before a first decision (there is no interval before "
                        f"{MIN_RATIO_N}: fewer values do not hold its coverage)")
    s.add_argument("--max-runs", type=int, default=None,
                   help=f"rounds at most per comparison, >= {MIN_RATIO_N} (default 3 x runs)")
    s.add_argument("--threshold", type=float, default=5.0, metavar="PCT",
                   help="a change is called when its interval clears 1 +/- PCT%%")
    s.add_argument("--confidence", type=float, default=0.95, help="interval level")
    s.add_argument("--endpoints", action="store_true",
                   help="compare good and bad only (interleaved rounds, the same call) and "
                        "never search between them: a before/after benchmark")
    s.add_argument("--inner", type=int, default=3, help="replays per process (min taken)")
    s.add_argument("--repo", default=".", help="the git repository to search")
    s.add_argument("--cache", default=None, help="worktree cache folder (default "
                                                 "$LOB_BISECT_CACHE or ~/.cache/lob/bisect)")
    s.add_argument("--out", default=None, help="run folder (default artifacts/bisect/...)")
    s.set_defaults(func=_cmd_bisect)

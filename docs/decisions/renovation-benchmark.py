"""Issue 42's closing benchmark: is any engine slower beyond noise after the renovation?

Before: 1096b83 (the parent of 0551a95 "Compiled engines on one core"); after: main. For each
engine (v5@numba, v4@numba, v2@numba, c_book) and stream (lobster_replay, cpp_comprehensive)
one ``lob bisect --endpoints`` comparison: the two revisions measured in interleaved rounds
in one session (rotating order; every sample a fresh process of this venv with the
revision's checkout first on the path, timing ``engine.replay`` of the whole stream, the
minimum of ``--inner`` replays), bad over good as the ratio of medians with its bootstrap
interval, and the one call of ``lob.measure.stats.change`` (slower / faster beyond
``--threshold``, within noise, or inconclusive after ``--max-runs`` rounds). Why this way and
what it costs: docs/decisions/renovation-benchmark.md.

c_book (examples/c_engine) is built by each revision's own Makefile into its own checkout,
and ``$LOB_ENGINES_TOML`` names it by a path relative to the checkout (each sample runs in its
checkout), so each revision loads its own build.

Run it on a quiet machine, from the checkout (nothing of the checkout is modified; the
checkouts live in lob's bisect cache)::

    .venv/bin/python docs/decisions/renovation-benchmark.py     # 10-25 min quiet: the record
    .venv/bin/python docs/decisions/renovation-benchmark.py --scale 0.05 --max-runs 5  # dry run

It writes one ``lob bisect`` run folder per comparison and ``renovation.json`` /
``renovation.md`` (the table) into ``--out`` (default artifacts/bisect/renovation-<stamp>).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from lob.studies.gitbisect import Checkouts, bisect_versions

BEFORE = "1096b83"  # parent of 0551a95 "Compiled engines on one core"
ENGINES = ("v5@numba", "v4@numba", "v2@numba", "c_book")
# stream -> scale: about a million commands each, so one replay of the fastest engine lasts
# tens of ms (a process start and the clock's resolution are small beside it)
STREAMS = {"lobster_replay": 1.0, "cpp_comprehensive": 0.5}
C_BOOK_TOML = "examples/c_engine/engine.toml"  # relative: resolved in each checkout


def commit(repo: Path, rev: str) -> str:
    """``rev``'s full sha, resolved once: a branch that moves during the run (main) must not
    change what the later comparisons measure."""
    r = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", f"{rev}^{{commit}}"],
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"renovation: {rev!r} is not a commit of {repo}: {r.stderr.strip()}")
    return r.stdout.strip()


def build_c_book(repo: Path, shas: list[str], cache) -> None:
    """Each revision's c_book, built by its own Makefile inside its own checkout."""
    ck = Checkouts(repo, cache)
    for sha in shas:
        where = ck.path(sha) / "examples" / "c_engine"
        r = subprocess.run(["make", "-s", "-C", str(where)], capture_output=True, text=True)
        if r.returncode:
            sys.exit(f"renovation: building c_book at {sha[:10]} failed: {r.stderr.strip()}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--before", default=BEFORE)
    ap.add_argument("--after", default="main")
    ap.add_argument("--engines", nargs="+", default=list(ENGINES))
    ap.add_argument("--streams", nargs="+", default=list(STREAMS))
    ap.add_argument("--scale", type=float, default=None,
                    help="one scale for every stream (default: about 1M commands each)")
    ap.add_argument("--runs", type=int, default=5, help="rounds before the first decision")
    ap.add_argument("--max-runs", type=int, default=15, help="rounds at most")
    ap.add_argument("--threshold", type=float, default=5.0, metavar="PCT")
    ap.add_argument("--inner", type=int, default=3, help="replays per process (min taken)")
    ap.add_argument("--repo", default=".")
    ap.add_argument("--cache", default=None, help="bisect cache (default lob's)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    repo = Path(a.repo).resolve()
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    out = Path(a.out or repo / "artifacts" / "bisect" / f"renovation-{stamp}")
    out.mkdir(parents=True, exist_ok=True)
    before, after = commit(repo, a.before), commit(repo, a.after)
    print(f"before {a.before} = {before[:10]}, after {a.after} = {after[:10]}", flush=True)
    if "c_book" in a.engines:
        build_c_book(repo, [before, after], a.cache)
        os.environ["LOB_ENGINES_TOML"] = C_BOOK_TOML
    t0 = time.perf_counter()
    rows = []
    for w in a.streams:
        scale = a.scale if a.scale is not None else STREAMS[w]
        for e in a.engines:
            print(f"\n== {e} on {w} (scale {scale})", flush=True)
            try:
                res = bisect_versions(before, after, e, w, "ns_per_op", repo=repo,
                                      scale=scale, runs=a.runs, max_runs=a.max_runs,
                                      threshold=a.threshold / 100, inner=a.inner,
                                      cache=a.cache, endpoints=True,
                                      out=out / f"{e.replace('@', '-')}__{w}")
            except ValueError as err:  # a revision could not be measured: say it, go on
                print(f"renovation: {e} on {w}: {err}", flush=True)
                rows.append({"engine": e, "workload": w, "scale": scale,
                             "decision": f"not measured: {err}"})
                continue
            s = res.steps[0]
            rows.append({"engine": e, "workload": w, "scale": scale,
                         "before_ns_per_op": s.good_median, "after_ns_per_op": s.median,
                         "after_over_before": s.ratio, "ci_low": s.ci_low,
                         "ci_high": s.ci_high, "decision": s.decision, "rounds": s.rounds})
    wall = time.perf_counter() - t0
    head = ("| engine | stream | before ns/op | after ns/op | after / before (95% CI) | call "
            "| rounds |\n|---|---|---|---|---|---|---|")
    lines = [head]
    for r in rows:
        if "ci_low" not in r:
            lines.append(f"| {r['engine']} | {r['workload']} | | | | {r['decision']} | |")
            continue
        ci = (f" ({r['ci_low']:.3f}-{r['ci_high']:.3f})" if r["ci_low"] is not None else "")
        lines.append(f"| {r['engine']} | {r['workload']} | {r['before_ns_per_op']:.1f} | "
                     f"{r['after_ns_per_op']:.1f} | {r['after_over_before']:.3f}{ci} | "
                     f"{r['decision']} | {r['rounds']} |")
    md = (f"{a.before} ({before[:10]}, before) against {a.after} ({after[:10]}, after), "
          f"threshold {a.threshold:g}%, "
          f"{wall / 60:.0f} min\n\n" + "\n".join(lines) + "\n")
    (out / "renovation.md").write_text(md)
    (out / "renovation.json").write_text(json.dumps(
        {"before": before, "after": after, "threshold": a.threshold / 100,
         "runs": a.runs, "max_runs": a.max_runs, "inner": a.inner, "wall_s": round(wall),
         "rows": rows}, indent=1) + "\n")
    print("\n" + md + f"\nwrote {out}/renovation.md and renovation.json")
    slower = [r for r in rows if r.get("decision") == "slower"]
    return 1 if slower else 0


if __name__ == "__main__":
    sys.exit(main())

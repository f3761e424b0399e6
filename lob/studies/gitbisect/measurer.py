"""Measuring one revision: the probe program (:mod:`lob.studies.gitbisect.probe`) run as
a script in a fresh process with the revision's checkout first on the path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from lob.studies.gitbisect.checkouts import Checkouts

CHANGED = ("slower", "faster")  # the calls of lob.measure.stats.change that name a change
BISECT_METRICS = {"ns_per_op": "ns/op", "p50": "p50 (ns)", "p99": "p99 (ns)",
                  "p99_9": "p99.9 (ns)", "allocs_per_op": "allocs/op"}
_METRIC_ALIASES = {"ns/op": "ns_per_op", "p99.9": "p99_9", "allocs/op": "allocs_per_op"}

# The measuring program (lob.studies.gitbisect.probe.py), run as a script file inside a
# revision's checkout: ``python -c _RUN <probe file> '<json args>'`` (``-c`` keeps the
# checkout, the working directory, first on sys.path, as a revision's own script would).
PROBE_FILE = Path(__file__).with_name("probe.py")
_RUN = ("import runpy, sys; sys.argv = sys.argv[1:]; "
        "runpy.run_path(sys.argv[0], run_name='__main__')")


def metric_name(metric: str) -> str:
    m = _METRIC_ALIASES.get(metric, metric)
    if m not in BISECT_METRICS:
        raise ValueError(f"unknown metric {metric!r}; metrics: {', '.join(BISECT_METRICS)}")
    return m



@dataclass
class Sample:
    status: str  # ok | missing | broken
    value: float | None = None
    hist: str | None = None
    error: str = ""
    via: str = ""  # how the engine was found: registry | entry point
    output: str | None = None  # what the replay did (checksum, counters); None: not said


class SubprocessMeasurer:
    """Measures one revision in a fresh process: ``measurer(sha, nonce, hist) -> Sample``."""

    def __init__(self, repo, engine: str, workload: str, metric: str, *, scale: float = 0.002,
                 inner: int = 3, cache=None, timeout: float = 900.0):
        self.checkouts = Checkouts(repo, cache)
        self.args = {"engine": engine, "workload": workload, "metric": metric_name(metric),
                     "scale": float(scale), "inner": int(inner)}
        self.timeout = timeout

    def __call__(self, sha: str, nonce: int, hist: bool) -> Sample:
        try:
            wt = self.checkouts.path(sha)
        except ValueError as e:
            return Sample("broken", error=f"checkout: {e}")
        env = dict(os.environ)
        parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        env["PYTHONPATH"] = os.pathsep.join([str(wt), *parts])
        args = json.dumps({**self.args, "nonce": int(nonce), "hist": bool(hist)})
        try:
            p = subprocess.run([sys.executable, "-c", _RUN, str(PROBE_FILE), args], cwd=wt,
                               env=env,
                               capture_output=True, text=True, timeout=self.timeout)
        except subprocess.TimeoutExpired:
            return Sample("broken", error=f"timed out after {self.timeout:.0f} s")
        for line in p.stdout.splitlines():
            if line.startswith("LOBPROBE "):
                d = json.loads(line[len("LOBPROBE "):])
                own, got = wt / "lob" / "__init__.py", d.get("lob_file")
                if own.exists() and got and Path(got).resolve() != own.resolve():
                    # bisecting lob itself: the worktree's lob must be the one measured
                    return Sample("broken", error=f"measured lob from {got}, not {own}")
                return Sample(d["status"], d.get("value"), d.get("hist"), d.get("error", ""),
                              d.get("via", ""), d.get("output"))
        tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
        return Sample("broken", error=f"exit {p.returncode}: " + " | ".join(tail))

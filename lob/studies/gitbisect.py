"""``lob bisect``: the first commit that moved a metric beyond noise, measured honestly.

Which commit of a repository (lob itself, or a package that registers engines through the
``lob.engines`` entry point) moved ``metric`` of ``engine`` on ``workload``, and by how much?
:func:`bisect_versions` binary-searches ``git rev-list --first-parent good..bad``:

* each probed revision is checked out into a cache folder (``LOB_BISECT_CACHE``, default
  ``~/.cache/lob/bisect``) managed by lob alone (:class:`Checkouts`: the repository is only
  read, its worktrees are never touched; a checkout is trusted only once it is complete;
  the cache has a lock) and kept there, so numba's cache, which lives beside the sources,
  is kept per checkout too;
* a revision is measured in a fresh process of the current interpreter (this venv) with the
  checkout first on ``PYTHONPATH`` and as the working directory. The measuring program
  (:mod:`lob.studies.bisect_probe`, run as a script file) is not imported from any
  revision: it uses only what every revision of lob and any foreign package provides
  (``lob.workload``, ``lob.get_engine`` or a ``lob.engines`` entry point, ``engine.replay``
  timed from outside, ``engine.execute`` one row at a time for per-op latency), so the
  measuring method is the same at every revision and only the engine's code changes;
* the revisions in play (good, bad, the probe) are measured in rounds, interleaved, in a
  rotating order, so drift of the machine hits them alike; a comparison with good uses only
  good's values from the same rounds, gets a bootstrap interval of the ratio of medians
  (none below :data:`lob.measure.stats.MIN_RATIO_N` rounds: from fewer the interval does
  not hold its coverage) and gets the one call of :func:`lob.measure.stats.change`:
  ``slower`` or ``faster`` (a change) when the interval clears ``1 +/- threshold``,
  ``within noise`` when it lies inside; otherwise one more round, up to ``max_runs``, then
  ``inconclusive`` (no change called). Within the search an undecided probe goes to the
  side, good or bad, whose median it is nearer, and says so. Looking again after every
  round is a sequential test: each look uses an interval at
  :func:`lob.measure.stats.sequential_level` (Bonferroni over the looks that can give an
  interval). In simulation (tests/test_bisect.py: lognormal noise per value, identical
  code): no more than 5% false calls at the default and quick settings; with 10% noise,
  5 to 15 rounds and a 5% threshold, a 30% step at commit 7 of 12 is named exactly;
* a revision where the engine or the workload does not exist, or the code does not import,
  is skipped, as ``git bisect skip`` does: the search probes a neighbour instead.

Why not asv? asv (``asv run A..B``, ``asv find``, ``asv compare``) builds one environment
per commit and measures commits one after another, possibly days apart; ``asv find`` takes
one result per commit and follows the larger of two differences with no noise bound, so one
slow sample can steer it. lob keeps what asv does well (a result file per run that carries
the machine's identity, comparisons refused across machines, the before/after/ratio table
of ``asv compare``, worktree-style checkouts that are reused) and measures the way seed 000
did its release bisection: one host, one session, the candidates interleaved, a change called
only when it clears the noise. The environment is the current venv (lob's dependencies do not
change with the engine under test); an engine whose dependencies moved between revisions
needs asv's environment-per-commit, which is out of scope here.

>>> from lob.studies.gitbisect import bisect_versions
>>> res = bisect_versions(good="HEAD~8", bad="HEAD", engine="v3", workload="mixed_70_20_10",
...                       metric="ns_per_op", scale=0.002)
>>> res.line()     # 'first change: <sha> <subject> (1.31, CI 1.22-1.40)' or 'no change ...'
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from lob.measure.stats import MIN_RATIO_N, change, ratio_interval, sequential_level

CHANGED = ("slower", "faster")  # the calls of lob.measure.stats.change that name a change
BISECT_METRICS = {"ns_per_op": "ns/op", "p50": "p50 (ns)", "p99": "p99 (ns)",
                  "p99_9": "p99.9 (ns)", "allocs_per_op": "allocs/op"}
_METRIC_ALIASES = {"ns/op": "ns_per_op", "p99.9": "p99_9", "allocs/op": "allocs_per_op"}

# The measuring program (lob/studies/bisect_probe.py), run as a script file inside a
# revision's checkout: ``python -c _RUN <probe file> '<json args>'`` (``-c`` keeps the
# checkout, the working directory, first on sys.path, as a revision's own script would).
PROBE_FILE = Path(__file__).with_name("bisect_probe.py")
_RUN = ("import runpy, sys; sys.argv = sys.argv[1:]; "
        "runpy.run_path(sys.argv[0], run_name='__main__')")


def metric_name(metric: str) -> str:
    m = _METRIC_ALIASES.get(metric, metric)
    if m not in BISECT_METRICS:
        raise ValueError(f"unknown metric {metric!r}; metrics: {', '.join(BISECT_METRICS)}")
    return m


# --- git ------------------------------------------------------------------------------

def _git(repo, *args, check=True) -> str:
    try:
        p = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                           timeout=120)
    except OSError as e:
        raise ValueError(f"git is not available: {e}") from None
    if check and p.returncode != 0:
        raise ValueError(f"git {' '.join(args)} in {repo}: {p.stderr.strip() or p.stdout}")
    return p.stdout.strip()


@dataclass
class Revision:
    """One commit of the searched range and what was measured on it."""

    index: int
    sha: str
    subject: str
    status: str = "untested"  # untested | ok | skipped
    reason: str = ""
    values: list[tuple[int, float]] = field(default_factory=list)  # (round, value)
    hists: list[str] = field(default_factory=list)

    @property
    def median(self) -> float | None:
        return float(np.median([v for _, v in self.values])) if self.values else None


def revisions(repo, good: str, bad: str) -> list[Revision]:
    """good, then ``git rev-list --first-parent good..bad`` oldest first (bad last)."""
    repo = Path(repo)
    if not (repo / ".git").exists() and _git(repo, "rev-parse", "--git-dir", check=False) == "":
        raise ValueError(f"{repo} is not a git repository")
    g = _git(repo, "rev-parse", "--verify", f"{good}^{{commit}}")
    b = _git(repo, "rev-parse", "--verify", f"{bad}^{{commit}}")
    if g == b:
        raise ValueError(f"good and bad are the same commit {g}")
    if subprocess.run(["git", "-C", str(repo), "merge-base", "--is-ancestor", g, b]
                      ).returncode != 0:
        raise ValueError(f"good {good} ({g[:10]}) is not an ancestor of bad {bad} ({b[:10]})")
    out = _git(repo, "log", "--first-parent", "--reverse", "--format=%H%x00%s", f"{g}..{b}")
    revs = [Revision(0, g, _git(repo, "log", "-1", "--format=%s", g))]
    for line in out.splitlines():
        sha, _, subject = line.partition("\x00")
        revs.append(Revision(len(revs), sha, subject))
    if revs[-1].sha != b:
        raise ValueError(f"bad {bad} is not on the first-parent line from good {good}")
    return revs


def cache_root() -> Path:
    return Path(os.environ.get("LOB_BISECT_CACHE")
                or Path.home() / ".cache" / "lob" / "bisect")


CHECKOUT_MARK = ".lob-checkout"  # written last into a checkout: it is complete


class Checkouts:
    """Checkouts of one repository's commits under a cache folder, one per commit, kept.

    Managed by lob alone: a checkout is the commit's tree written by ``git checkout-index``
    from a private index file (``GIT_INDEX_FILE``), so the repository is only read: no
    ``git worktree`` entry, no prune, nothing of the user's worktrees, index or refs is
    touched. A checkout is built in a staging folder, gets its :data:`CHECKOUT_MARK`
    (the sha) last and is then renamed into place, so a half-written one (Ctrl-C, a full
    disk) is never found, let alone trusted; building holds the cache's lock
    (``<cache>/.lock``, ``flock``), so two searches sharing the cache take turns and
    reuse each other's checkouts.
    """

    def __init__(self, repo, cache: str | os.PathLike | None = None, *, wait: float = 600.0):
        self.repo = Path(repo).resolve()
        key = hashlib.sha256(str(self.repo).encode()).hexdigest()[:12]
        self.root = Path(cache or cache_root()) / f"{self.repo.name}-{key}"
        self.wait = wait

    def complete(self, sha: str) -> Path | None:
        """The checkout of ``sha`` if one was completed, else None."""
        p = self.root / sha
        try:
            return p if (p / CHECKOUT_MARK).read_text().strip() == sha else None
        except OSError:
            return None

    def path(self, sha: str) -> Path:
        """The checkout of ``sha`` (a full 40-hex commit id), built if missing."""
        got = self.complete(sha)
        if got is not None:
            return got
        self.root.mkdir(parents=True, exist_ok=True)
        with self._locked():
            got = self.complete(sha)  # built by another search meanwhile
            if got is not None:
                return got
            for old in self.root.glob(".staging-*"):  # left by an interrupted build
                _rmtree(old)
            p = self.root / sha
            if p.exists():  # an unmarked folder: never trusted
                _rmtree(p)
            stage = self.root / f".staging-{sha}-{os.getpid()}"
            index = stage.with_name(stage.name + ".index")
            env = {**os.environ, "GIT_INDEX_FILE": str(index)}
            try:
                stage.mkdir()
                for cmd in (["read-tree", sha],
                            ["checkout-index", "--all", "--force", f"--prefix={stage}/"]):
                    r = subprocess.run(["git", "-C", str(self.repo), *cmd], env=env,
                                       capture_output=True, text=True, timeout=600)
                    if r.returncode != 0:
                        raise ValueError(f"git {cmd[0]} {sha[:10]}: {r.stderr.strip()}")
                (stage / CHECKOUT_MARK).write_text(sha + "\n")
                stage.rename(p)
            finally:
                index.unlink(missing_ok=True)
                if stage.exists():
                    _rmtree(stage)
            return p

    def _locked(self):
        import fcntl
        from contextlib import contextmanager

        @contextmanager
        def held():
            fd = os.open(self.root / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
            try:
                deadline = time.monotonic() + self.wait
                while True:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        if time.monotonic() > deadline:
                            raise ValueError(f"the bisect cache {self.root} is busy (another "
                                             f"search builds a checkout there) for more than "
                                             f"{self.wait:.0f} s") from None
                        time.sleep(0.1)
                yield
            finally:
                os.close(fd)

        return held()


Worktrees = Checkouts  # the name of lob <= 0.1's cache (git worktrees)


def _rmtree(p: Path) -> None:
    import shutil

    shutil.rmtree(p, ignore_errors=True)


@dataclass
class Sample:
    status: str  # ok | missing | broken
    value: float | None = None
    hist: str | None = None
    error: str = ""
    via: str = ""  # how the engine was found: registry | entry point


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
                              d.get("via", ""))
        tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
        return Sample("broken", error=f"exit {p.returncode}: " + " | ".join(tail))


# --- the search -----------------------------------------------------------------------

@dataclass
class Step:
    """One comparison with good: the probed revision, its interval and the decision."""

    index: int
    sha: str
    subject: str
    median: float | None
    good_median: float | None
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    # lob.measure.stats.change's words: slower | faster (a change) | within noise |
    # inconclusive, with "(nearer bad)" or "(nearer good)" when undecided within the search;
    # or skipped
    decision: str
    rounds: int
    reason: str = ""

    def line(self, unit: str, width: int) -> str:
        head = f"[{self.index:>{width}}] {self.sha[:10]} {self.subject[:48]:<48}"
        if self.decision == "skipped":
            return f"{head}  skipped: {self.reason}"
        ci = (f"CI {self.ci_low:.4f}-{self.ci_high:.4f}" if self.ci_low is not None
              else "no interval")
        return (f"{head}  median {self.median:,.4g} {unit} (good {self.good_median:,.4g})  "
                f"ratio {self.ratio:.4f} {ci}  {self.decision} ({self.rounds} rounds)")


@dataclass
class BisectResult:
    """The search: every revision of the range, every step, and the first change."""

    repo: str
    good: str
    bad: str
    engine: str
    workload: str
    metric: str
    scale: float
    threshold: float
    runs: int
    max_runs: int
    confidence: float
    revisions: list[Revision]
    steps: list[Step]
    first_change: dict | None
    candidates: list[str]  # skipped revisions the first change could also be
    wall_s: float = 0.0
    out: str | None = None

    def line(self) -> str:
        fc = self.first_change
        if fc is None:
            return "no change beyond noise"
        s = (f"first change: {fc['sha']} {fc['subject']} ({fc['ratio']:.4f}, "
             f"CI {fc['ci_low']:.4f}-{fc['ci_high']:.4f})")
        if fc.get("decision") not in CHANGED:
            s += " [its own interval does not clear the threshold: nearer bad than good]"
        if self.candidates:
            s += f" [or one of the skipped {', '.join(c[:10] for c in self.candidates)}]"
        return s

    @property
    def measured(self) -> list[Revision]:
        return [r for r in self.revisions if r.values]

    def to_dict(self) -> dict:
        d = {k: v for k, v in asdict(self).items() if k not in ("revisions", "steps")}
        d["revisions"] = [{"index": r.index, "sha": r.sha, "subject": r.subject,
                           "status": r.status, "reason": r.reason, "median": r.median,
                           "values": [v for _, v in r.values],
                           "rounds": [k for k, _ in r.values]} for r in self.revisions]
        d["steps"] = [asdict(s) for s in self.steps]
        d["n_revisions"] = len(self.revisions)
        d["n_measured"] = len(self.measured)
        d["conclusion"] = self.line()
        return d

    def plot(self, path) -> Path:
        """Left: the metric of every measured revision (values, median) along the range;
        right: each step's ratio to good with its interval."""
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt

        fig, (a1, a2) = plt.subplots(1, 2, figsize=(13, 4.2))
        unit = BISECT_METRICS[self.metric]
        for r in self.revisions:
            if r.status == "skipped":
                a1.axvline(r.index, color="tab:orange", lw=0.8, ls=":")
            if r.values:
                a1.scatter([r.index] * len(r.values), [v for _, v in r.values], s=10,
                           alpha=0.5, color="tab:blue")
                a1.plot([r.index - 0.3, r.index + 0.3], [r.median] * 2, color="k")
        if self.first_change is not None:
            a1.axvline(self.first_change["index"] - 0.5, color="tab:red", lw=1.2,
                       label="first change")
            a1.legend(loc="best")
        meds = [r.median for r in self.revisions if r.values]
        if meds and min(meds) > 0 and max(meds) / min(meds) > 4:
            a1.set_yscale("log")
        a1.set(xlabel="revision (0 = good; dots values, bars medians, dotted skipped)",
               ylabel=unit, title=f"{self.engine} on {self.workload}")
        steps = [s for s in self.steps if s.ratio is not None]
        colors = {"slower": "tab:red", "faster": "tab:green", "within noise": "grey",
                  "inconclusive": "tab:olive"}
        for i, s in enumerate(steps):
            c = colors.get(s.decision.split(" (")[0], "k")
            if s.ci_low is not None:
                a2.plot([s.ci_low, s.ci_high], [i, i], color=c, lw=2)
            a2.plot([s.ratio], [i], "o", color=c)
        a2.axvline(1, color="k", lw=0.8)
        for x in (1 - self.threshold, 1 + self.threshold):
            a2.axvline(x, color="k", lw=0.5, ls=":")
        a2.set_yticks(range(len(steps)), [f"{s.index}: {s.sha[:8]}" for s in steps])
        a2.invert_yaxis()
        xs = [x for s in steps for x in (s.ratio, s.ci_low, s.ci_high) if x]
        if xs and max(xs) / min(xs) > 4:
            a2.set_xscale("log")
        else:
            a2.ticklabel_format(axis="x", useOffset=False)
        a2.set(xlabel=f"ratio to good ({self.confidence:.0%} bootstrap CI; red slower, "
                      "green faster, grey within noise, olive inconclusive)",
               title="steps of the search, in order")
        fig.tight_layout()
        path = Path(path)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return path

    def save(self, out) -> dict[str, Path]:
        """Write ``bisect.json`` (a result record with ``first_change``), one ``.hgrm`` per
        measured revision that has per-op latencies, and ``bisect.png`` into ``out``."""
        from lob.measure.conditions import run_conditions
        from lob.measure.hgrm import merge, write_hgrm
        from lob.measure.results import write_result

        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        paths = {}
        for r in self.revisions:
            if r.hists:
                paths[r.sha] = write_hgrm(merge(r.hists), out / f"{r.index:03d}-{r.sha[:12]}.hgrm")
        self.out = str(out)
        rec = {"kind": "bisect", **self.to_dict(), "conditions": run_conditions()}
        paths["json"] = write_result(rec, out / "bisect.json")
        paths["png"] = self.plot(out / "bisect.png")
        return paths


def _say(line: str) -> None:
    print(line, flush=True)  # as it goes, also into a pipe or a log file


def bisect_versions(good: str, bad: str, engine: str, workload: str, metric: str = "ns_per_op",
                    *, repo=".", scale: float = 0.002, runs: int = 5, max_runs: int | None = None,
                    threshold: float = 0.05, confidence: float = 0.95, n_boot: int = 4000,
                    seed: int = 1, inner: int = 3, cache=None, out=None,
                    measure: Callable[[str, int, bool], Sample] | None = None,
                    log: Callable[[str], None] | None = _say) -> BisectResult:
    """Binary search of ``good..bad`` for the first revision whose ``metric`` differs from
    good's beyond noise (see the module docstring). ``runs``: rounds before the first
    decision on a comparison (no interval, so no decision, before
    :data:`~lob.measure.stats.MIN_RATIO_N` rounds); ``max_runs``: rounds at most (default
    ``3 * runs``, at least ``MIN_RATIO_N``);
    ``threshold``: the relative change an interval must clear; ``inner``: replays per process
    (the process's value is their minimum). ``measure`` replaces the subprocess measurement
    (tests); ``out`` writes the run folder.
    """
    t0 = time.perf_counter()
    metric = metric_name(metric)
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise ValueError(f"runs must be an int >= 1, got {runs!r}")
    max_runs = max(3 * runs, MIN_RATIO_N) if max_runs is None else int(max_runs)
    if max_runs < runs:
        raise ValueError(f"max_runs ({max_runs}) must be >= runs ({runs})")
    if max_runs < MIN_RATIO_N:
        raise ValueError(f"max_runs ({max_runs}) must be >= {MIN_RATIO_N}: an interval of "
                         f"the stated coverage needs {MIN_RATIO_N} rounds a side")
    if not 0 <= threshold < 1:
        raise ValueError(f"threshold must be a fraction in [0, 1), got {threshold!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    # every look at a comparison is a test: Bonferroni over the looks keeps the family's
    # false-call rate under 1 - confidence
    # (only looks that can give an interval count: from MIN_RATIO_N rounds on)
    level = sequential_level(confidence, max_runs - max(runs, MIN_RATIO_N) + 1)
    revs = revisions(repo, good, bad)
    if measure is None:
        measure = SubprocessMeasurer(repo, engine, workload, metric, scale=scale, inner=inner,
                                     cache=cache)
    say = log or (lambda s: None)
    unit = BISECT_METRICS[metric]
    width = len(str(len(revs) - 1))
    say(f"bisecting {len(revs) - 1} commits after {revs[0].sha[:10]} (good) up to "
        f"{revs[-1].sha[:10]} (bad): {unit} of {engine} on {workload} (scale {scale}); "
        f"{runs}-{max_runs} interleaved rounds per comparison, threshold {threshold:.0%}, "
        f"{confidence:.0%} bootstrap intervals ({level:.2%} per look)")
    rounds = [0]  # the round counter, shared by every comparison (the nonce of each sample)
    steps: list[Step] = []

    def run_rounds(in_play: list[Revision], k: int) -> Revision | None:
        """k more rounds over ``in_play``; returns a revision that could not be measured."""
        for _ in range(k):
            rnd = rounds[0]
            rounds[0] += 1
            order = in_play[rnd % len(in_play):] + in_play[:rnd % len(in_play)]
            for r in order:
                s = measure(r.sha, rnd * 1000 + r.index, not r.hists)
                if s.status != "ok":
                    r.status, r.reason = "skipped", f"{s.status}: {s.error}"
                    return r
                r.status = "ok"
                r.values.append((rnd, float(s.value)))
                if s.hist:
                    r.hists.append(s.hist)
        return None

    def compare(probe: Revision, in_play: list[Revision]) -> Step:
        done = 0
        good_r = revs[0]
        while True:
            k = runs if done == 0 else 1
            failed = run_rounds(in_play, k)
            if failed is not None:
                return Step(failed.index, failed.sha, failed.subject, None, None, None, None,
                            None, "skipped", done, failed.reason)
            done += k
            mine = {rnd: v for rnd, v in probe.values}
            ref = [v for rnd, v in good_r.values if rnd in mine]
            vals = [mine[rnd] for rnd, _ in good_r.values if rnd in mine]
            # no interval below MIN_RATIO_N rounds (it would not hold its coverage)
            ratio, lo, hi = ratio_interval(ref, vals, n_boot=n_boot, confidence=level,
                                           min_n=MIN_RATIO_N, seed=seed + probe.index)
            decision = change(lo, hi, threshold)
            if decision == "inconclusive" and done < max_runs:
                continue
            if decision == "inconclusive" and probe is not bad_r and bad_r.values:
                # undecided at max_runs: which side is it nearer?
                bad_v = [v for rnd, v in bad_r.values if rnd in mine]
                r_bad = float(np.median(bad_v) / np.median(ref)) if bad_v else 1.0
                near_bad = abs(np.log(ratio)) > abs(np.log(ratio) - np.log(r_bad))
                decision += " (nearer bad)" if near_bad else " (nearer good)"
            return Step(probe.index, probe.sha, probe.subject, float(np.median(vals)),
                        float(np.median(ref)), ratio, lo, hi, decision, done)

    def record(step: Step) -> Step:
        steps.append(step)
        say(step.line(unit, width))
        return step

    good_r, bad_r = revs[0], revs[-1]
    first = record(compare(bad_r, [good_r, bad_r]))
    if first.decision == "skipped":
        raise ValueError(f"cannot measure {'good' if first.index == 0 else 'bad'} revision "
                         f"{first.sha[:10]}: {first.reason}")
    fc, candidates = None, []
    if first.decision in CHANGED:
        lo, hi = 0, len(revs) - 1
        hi_step = first
        while hi - lo > 1:
            todo = [i for i in range(lo + 1, hi) if revs[i].status != "skipped"]
            if not todo:
                candidates = [revs[i].sha for i in range(lo + 1, hi)]
                break
            mid = (lo + hi) // 2
            i = min(todo, key=lambda j: (abs(j - mid), j))
            step = record(compare(revs[i], [good_r, bad_r, revs[i]]))
            if step.decision == "skipped":
                if step.index in (0, len(revs) - 1):
                    raise ValueError(f"revision {step.sha[:10]} stopped measuring: "
                                     f"{step.reason}")
                continue
            if step.decision in (*CHANGED, "inconclusive (nearer bad)"):
                hi, hi_step = i, step
            else:
                lo = i
        r = revs[hi]
        fc = {"index": r.index, "sha": r.sha, "subject": r.subject, "ratio": hi_step.ratio,
              "ci_low": hi_step.ci_low, "ci_high": hi_step.ci_high,
              "median": hi_step.median, "good_median": hi_step.good_median,
              "decision": hi_step.decision}
    res = BisectResult(str(Path(repo).resolve()), good, bad, engine, workload, metric,
                       float(scale), float(threshold), runs, max_runs, confidence, revs, steps,
                       fc, candidates)
    res.wall_s = round(time.perf_counter() - t0, 1)
    say(res.line())
    measured = res.measured
    say(f"{len(measured)} of {len(revs)} revisions measured "
        f"({sum(len(r.values) for r in measured)} processes), "
        f"{sum(r.status == 'skipped' for r in revs)} skipped, {rounds[0]} rounds, "
        f"{res.wall_s:.0f} s")
    if out is not None:
        res.save(out)
        res.wall_s = round(time.perf_counter() - t0, 1)
    return res


# --- the demo repository (the notebook's quick preset, the tests) ----------------------

_DEMO_ENGINE = '''"""lobdemo: lob's reference engine plus a fixed cost per command (bisect demo)."""

import time

SPIN_NS = {spin}  # the deliberate cost per command, in ns


def _spin(ns):
    end = time.perf_counter_ns() + ns
    while time.perf_counter_ns() < end:
        pass


class DemoEngine:
    def __init__(self, config):
        import lob

        self._inner = lob.get_engine("reference", config)
        self.name, self.config = "demo", config

    def __getattr__(self, attr):
        return getattr(self._inner, attr)

    def execute(self, row):
        _spin(SPIN_NS)
        return self._inner.execute(row)

    def replay(self, commands):
        _spin(SPIN_NS * len(commands))
        return self._inner.replay(commands)


def factory(config):
    return DemoEngine(config)


try:
    from lob.engines.registry import EngineSpec
except ImportError:  # a lob without the registry module: a spec-shaped stand-in
    from collections import namedtuple

    EngineSpec = namedtuple("EngineSpec", "name factory description")

ENGINES = [EngineSpec("demo", factory, "reference + a fixed cost per command")]
'''


def demo_repo(path, *, n_commits: int = 12, slow_at: int | None = 7,
              broken_at: int | None = 5, spin_ns: int = 20_000) -> list[str]:
    """A git repository at ``path`` holding a package ``lobdemo`` that registers engine
    ``demo`` through the ``lob.engines`` entry point (a committed ``.dist-info`` makes
    ``importlib.metadata`` find it from ``PYTHONPATH``, no install). ``n_commits`` commits;
    commit ``slow_at`` adds ``spin_ns`` per command; commit ``broken_at`` does not import and
    the next one repairs it; the others change a notes file. Returns the shas, oldest first."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GIT_AUTHOR_NAME": "lob", "GIT_AUTHOR_EMAIL": "lob@example.invalid",
           "GIT_COMMITTER_NAME": "lob", "GIT_COMMITTER_EMAIL": "lob@example.invalid",
           "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}

    def git(*a):
        subprocess.run(["git", "-C", str(path), *a], check=True, capture_output=True, env=env)

    git("init", "-q", "-b", "main")
    dist = path / "lobdemo-0.1.dist-info"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: lobdemo\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[lob.engines]\ndemo = lobdemo:ENGINES\n")
    pkg = path / "lobdemo"
    pkg.mkdir(exist_ok=True)
    spin = 0
    shas = []
    for i in range(n_commits):
        if i == 0:
            msg = "demo engine: reference behind lob.engines entry point"
        elif i == slow_at:
            spin, msg = spin_ns, f"demo engine: {spin_ns} ns of extra work per command"
        elif i == broken_at:
            msg = "demo engine: a syntax error (does not import)"
        elif broken_at is not None and i == broken_at + 1:
            msg = "demo engine: repair the syntax error"
        else:
            msg = f"notes: entry {i}"
        src = _DEMO_ENGINE.format(spin=spin)
        if i == broken_at:
            src += "\ndef broken(:\n"
        (pkg / "__init__.py").write_text(src)
        with open(path / "NOTES.md", "a") as f:
            f.write(f"- {msg}\n")
        git("add", "-A")
        git("commit", "-q", "-m", msg)
        shas.append(subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], check=True,
                                   capture_output=True, text=True).stdout.strip())
    return shas


# --- CLI ---------------------------------------------------------------------------------

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
                              out=out)
    except KeyboardInterrupt:
        print("\nlob bisect: interrupted; nothing written to the run folder (completed "
              "checkouts stay cached, a half-built one is discarded)", file=sys.stderr)
        return 130
    print(f"wrote {out}/bisect.json, bisect.png and {sum(bool(r.hists) for r in res.revisions)} "
          f".hgrm ({res.wall_s:.0f} s)")
    return 0


def add_parsers(sub) -> None:
    """Register ``lob bisect`` on the ``lob`` CLI's subparsers."""
    import argparse

    s = sub.add_parser("bisect", help="find the first commit that moved a metric beyond noise "
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
    s.add_argument("--inner", type=int, default=3, help="replays per process (min taken)")
    s.add_argument("--repo", default=".", help="the git repository to search")
    s.add_argument("--cache", default=None, help="worktree cache folder (default "
                                                 "$LOB_BISECT_CACHE or ~/.cache/lob/bisect)")
    s.add_argument("--out", default=None, help="run folder (default artifacts/bisect/...)")
    s.set_defaults(func=_cmd_bisect)

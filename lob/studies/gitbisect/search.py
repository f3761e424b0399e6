"""The search: revisions measured in interleaved rounds, each compared with good by the one
change call of :mod:`lob.measure.stats`, and its result (table, plot, files).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from lob.measure.rounds import interleaved_rounds
from lob.measure.stats import MIN_RATIO_N, change, ratio_interval, sequential_level
from lob.studies.gitbisect.checkouts import Revision, revisions
from lob.studies.gitbisect.measurer import (
    BISECT_METRICS,
    CHANGED,
    Sample,
    SubprocessMeasurer,
    metric_name,
)

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
    endpoints: bool = False  # good against bad only: a before/after benchmark, no search

    def line(self) -> str:
        if self.endpoints:
            s = self.steps[0]
            ci = (f"CI {s.ci_low:.4f}-{s.ci_high:.4f}" if s.ci_low is not None
                  else "no interval")
            return f"bad over good: {s.ratio:.4f} ({ci}): {s.decision} ({s.rounds} rounds)"
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


def check_rounds(runs, max_runs: int | None, threshold: float, confidence: float) -> int:
    """``max_runs`` resolved (default ``3 * runs``, at least ``MIN_RATIO_N``), every search
    parameter checked (ValueError naming the one that is wrong)."""
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
    return max_runs


@dataclass
class _Search:
    """The comparisons of one search: the revisions, the measurer and the shared round
    counter (the nonce of each sample), what each replay did, and the steps taken."""

    revs: list[Revision]
    measure: Callable[[str, int, bool], Sample]
    runs: int
    max_runs: int
    threshold: float
    level: float
    n_boot: int
    seed: int
    say: Callable[[str], None]
    unit: str
    rounds: int = 0
    outputs: dict = field(default_factory=dict)  # sha -> what its replay did (checksum, ...)
    steps: list = field(default_factory=list)

    def run_rounds(self, in_play: list[Revision], k: int) -> Revision | None:
        """k more rounds over ``in_play``; returns a revision that could not be measured."""

        def one(r: Revision, rnd: int) -> Revision | None:
            self.rounds = rnd + 1
            s = self.measure(r.sha, rnd * 1000 + r.index, not r.hists)
            if s.status != "ok":
                r.status, r.reason = "skipped", f"{s.status}: {s.error}"
                return r
            r.status = "ok"
            r.values.append((rnd, float(s.value)))
            if s.hist:
                r.hists.append(s.hist)
            if s.output is not None:
                self.outputs.setdefault(r.sha, s.output)
            return None

        def same_work(*_) -> Revision | None:
            for r in in_play:  # a revision that does other work is not slower or faster
                mine, ref = self.outputs.get(r.sha), self.outputs.get(self.revs[0].sha)
                if r is not self.revs[0] and mine is not None and ref is not None \
                        and mine != ref:
                    r.status = "skipped"
                    r.reason = (f"its replay does other work than good's ({mine} vs {ref}): "
                                "a different answer, not a timing to compare")
                    return r
            return None

        return interleaved_rounds(in_play, one, k, after=same_work, first=self.rounds)

    def compare(self, probe: Revision, in_play: list[Revision]) -> Step:
        """Rounds over ``in_play`` until ``probe`` against good is decided (or max_runs)."""
        done = 0
        good_r, bad_r = self.revs[0], self.revs[-1]
        while True:
            k = self.runs if done == 0 else 1
            failed = self.run_rounds(in_play, k)
            if failed is not None:
                return Step(failed.index, failed.sha, failed.subject, None, None, None, None,
                            None, "skipped", done, failed.reason)
            done += k
            mine = {rnd: v for rnd, v in probe.values}
            ref = [v for rnd, v in good_r.values if rnd in mine]
            vals = [mine[rnd] for rnd, _ in good_r.values if rnd in mine]
            # no interval below MIN_RATIO_N rounds (it would not hold its coverage)
            ratio, lo, hi = ratio_interval(ref, vals, n_boot=self.n_boot, confidence=self.level,
                                           min_n=MIN_RATIO_N, seed=self.seed + probe.index)
            decision = change(lo, hi, self.threshold)
            if decision == "inconclusive" and done < self.max_runs:
                continue
            if decision == "inconclusive" and probe is not bad_r and bad_r.values:
                # undecided at max_runs: which side is it nearer?
                bad_v = [v for rnd, v in bad_r.values if rnd in mine]
                r_bad = float(np.median(bad_v) / np.median(ref)) if bad_v else 1.0
                near_bad = abs(np.log(ratio)) > abs(np.log(ratio) - np.log(r_bad))
                decision += " (nearer bad)" if near_bad else " (nearer good)"
            return Step(probe.index, probe.sha, probe.subject, float(np.median(vals)),
                        float(np.median(ref)), ratio, lo, hi, decision, done)

    def record(self, step: Step) -> Step:
        self.steps.append(step)
        self.say(step.line(self.unit, len(str(len(self.revs) - 1))))
        return step

    def walk(self, first: Step) -> tuple[dict | None, list[str]]:
        """The binary search after a first comparison that changed: (first change, the
        skipped revisions it could also be)."""
        revs = self.revs
        good_r, bad_r = revs[0], revs[-1]
        lo, hi = 0, len(revs) - 1
        hi_step = first
        candidates: list[str] = []
        while hi - lo > 1:
            todo = [i for i in range(lo + 1, hi) if revs[i].status != "skipped"]
            if not todo:
                candidates = [revs[i].sha for i in range(lo + 1, hi)]
                break
            mid = (lo + hi) // 2
            i = min(todo, key=lambda j: (abs(j - mid), j))
            step = self.record(self.compare(revs[i], [good_r, bad_r, revs[i]]))
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
        return fc, candidates


def bisect_versions(good: str, bad: str, engine: str, workload: str, metric: str = "ns_per_op",
                    *, repo=".", scale: float = 0.002, runs: int = 5, max_runs: int | None = None,
                    threshold: float = 0.05, confidence: float = 0.95, n_boot: int = 4000,
                    seed: int = 1, inner: int = 3, cache=None, out=None,
                    endpoints: bool = False,
                    measure: Callable[[str, int, bool], Sample] | None = None,
                    log: Callable[[str], None] | None = _say) -> BisectResult:
    """Binary search of ``good..bad`` for the first revision whose ``metric`` differs from
    good's beyond noise (see the module docstring). ``runs``: rounds before the first
    decision on a comparison (no interval, so no decision, before
    :data:`~lob.measure.stats.MIN_RATIO_N` rounds); ``max_runs``: rounds at most (default
    ``3 * runs``, at least ``MIN_RATIO_N``);
    ``threshold``: the relative change an interval must clear; ``inner``: replays per process
    (the process's value is their minimum). ``endpoints``: compare good and bad only, in
    the same interleaved rounds and with the same call, and never search between them even
    when they differ (a before/after benchmark of a range whose middle need not build: the
    result's line gives bad over good with its interval). ``measure`` replaces the
    subprocess measurement (tests); ``out`` writes the run folder.
    """
    t0 = time.perf_counter()
    metric = metric_name(metric)
    max_runs = check_rounds(runs, max_runs, threshold, confidence)
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
    say(f"{'comparing' if endpoints else 'bisecting'} {len(revs) - 1} commits after "
        f"{revs[0].sha[:10]} (good) up to "
        f"{revs[-1].sha[:10]} (bad): {unit} of {engine} on {workload} (scale {scale}); "
        f"{runs}-{max_runs} interleaved rounds per comparison, threshold {threshold:.0%}, "
        f"{confidence:.0%} bootstrap intervals ({level:.2%} per look)")
    search = _Search(revs, measure, runs, max_runs, threshold, level, n_boot, seed, say, unit)
    first = search.record(search.compare(revs[-1], [revs[0], revs[-1]]))
    if first.decision == "skipped":
        raise ValueError(f"cannot measure {'good' if first.index == 0 else 'bad'} revision "
                         f"{first.sha[:10]}: {first.reason}")
    walk = first.decision in CHANGED and not endpoints
    fc, candidates = search.walk(first) if walk else (None, [])
    res = BisectResult(str(Path(repo).resolve()), good, bad, engine, workload, metric,
                       float(scale), float(threshold), runs, max_runs, confidence, revs,
                       search.steps, fc, candidates, endpoints=endpoints)
    res.wall_s = round(time.perf_counter() - t0, 1)
    say(res.line())
    measured = res.measured
    say(f"{len(measured)} of {len(revs)} revisions measured "
        f"({sum(len(r.values) for r in measured)} processes), "
        f"{sum(r.status == 'skipped' for r in revs)} skipped, {search.rounds} rounds, "
        f"{res.wall_s:.0f} s")
    if out is not None:
        res.save(out)
        res.wall_s = round(time.perf_counter() - t0, 1)
    return res

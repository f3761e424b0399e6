"""Version bisection: the tables and the conclusion of ``notebooks/version_bisection.ipynb``.

The search itself is :func:`lob.studies.gitbisect.bisect_versions`; this module holds what
the notebook shows of it: where to search (:func:`target`: lob's checkout, a path, or the
synthetic demo repository built from :data:`DEMO`), the steps and revisions as tables, and
the conclusion, whose every number is shown by its table or the note under it.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from lob.studies import conclude as K
from lob.studies.shape import Parameters as _Parameters
from lob.studies.shape import Shape, at_least_one

__all__ = ["Parameters", "SHAPE",
           "claims", "DEMO", "SHA", "SUBJECT", "target", "steps_table", "revisions_table"]

# the demo repository: commit 1 of 3 adds a fixed cost per command (20 us), none is broken
DEMO = {"n_commits": 3, "slow_at": 1, "broken_at": None, "spin_ns": 20_000}
SHA = 12  # characters of a sha shown
SUBJECT = 60  # characters of a commit subject shown


@dataclass(frozen=True)
class Parameters(_Parameters):
    """The notebook's parameters this study checks (names and defaults as in its cell; the
    revisions are checked where they are read, :func:`target`)."""

    metric: str = "ns_per_op"
    runs: int = 2
    max_runs: int = 6
    threshold: float = 0.2
    inner: int = 1

    def check(self) -> None:
        from lob.studies.gitbisect.measurer import metric_name
        from lob.studies.gitbisect.search import check_rounds

        metric_name(self.metric)
        check_rounds(self.runs, self.max_runs, self.threshold, 0.5)
        at_least_one(self.inner, "inner")


def target(repo: str, good: str, bad: str, engine: str) -> dict:
    """Where and what to search: ``{"repo", "good", "bad", "engine", "cache"}``.

    ``repo="demo"`` builds the synthetic repository (:data:`DEMO`) in a fresh temp folder
    (good / bad / engine default to its first commit, last commit and ``demo``; its
    checkouts cached beside it); ``"lob"`` is lob's own checkout, anything else a path; a
    real repository needs good, bad and engine (one clear ValueError) and uses the shared
    checkout cache (``cache`` None)."""
    from lob.paths import repo_root
    from lob.studies.gitbisect import demo_repo

    if repo == "demo":
        scratch = Path(tempfile.mkdtemp(prefix="lob-bisect-demo-"))
        shas = demo_repo(scratch / "repo", **DEMO)
        return {"repo": scratch / "repo", "good": good or shas[0], "bad": bad or shas[-1],
                "engine": engine or "demo", "cache": scratch / "checkouts"}
    if not (good and bad and engine):
        raise ValueError("give good, bad and engine for a real repository")
    return {"repo": repo_root() if repo == "lob" else Path(repo), "good": good, "bad": bad,
            "engine": engine, "cache": None}


def _note(res) -> str:
    measured = res.measured
    first, last = res.revisions[0], res.revisions[-1]
    return (f"Search over {last.index - first.index} commits, {first.sha[:SHA]}.."
            f"{last.sha[:SHA]}: {res.line()}; {len(measured)} revisions measured in "
            f"{sum(len(r.values) for r in measured)} processes, "
            f"{sum(r.status == 'skipped' for r in res.revisions)} skipped, {res.wall_s:.0f} s.")


def steps_table(res) -> K.Conclusion:
    """Each comparison of the search with good (probed revision, interval, decision); the
    note under it sums the search up, and the sentence says what moved the metric."""
    from lob.studies.gitbisect import BISECT_METRICS

    rows = [{**vars(s), "sha": s.sha[:SHA], "subject": s.subject[:SUBJECT]} for s in res.steps]
    c = K.Conclusion("steps", rows, key="sha", note=_note(res),
                     kinds={"index": "label", "rounds": "count", "ratio": "ratio",
                            "ci_low": "ratio", "ci_high": "ratio"})
    c.say(f"{BISECT_METRICS[res.metric]} of {res.engine} on {res.workload}: "
          + _note(res).removeprefix("Search over "))
    return c


def revisions_table(res) -> K.Conclusion:
    """Every revision of the range: status (ok, skipped, untested), runs, median."""
    rows = [{"index": r.index, "sha": r.sha[:SHA], "subject": r.subject[:SUBJECT],
             "status": r.status, "n": len(r.values), "median": r.median}
            for r in res.revisions]
    return K.Conclusion("revisions", rows, key="sha", kinds={"index": "label", "n": "count"})


def claims(*_args) -> dict[str, dict]:
    """No seed claim rests on this study (it searches a repository's history for a change):
    it records no claim measurement."""
    return {}


def _search(*args, **kwargs):
    """The search (:func:`lob.studies.gitbisect.bisect_versions`)."""
    from lob.studies.gitbisect import bisect_versions

    return bisect_versions(*args, **kwargs)


SHAPE = Shape(parameters=Parameters, measure=(target, _search),
              tables=(steps_table, revisions_table), claims=claims)

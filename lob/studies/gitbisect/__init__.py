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
  (:mod:`lob.studies.gitbisect.probe`, run as a script file) is not imported from any
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
  interval). In simulation (tests/studies/test_bisect.py: lognormal noise per value, identical
  code): no more than 5% false calls at the default and quick settings; with 10% noise,
  5 to 15 rounds and a 5% threshold, a 30% step at commit 7 of 12 is named exactly;
* a revision where the engine or the workload does not exist, or the code does not import,
  is skipped, as ``git bisect skip`` does: the search probes a neighbour instead;
* ``endpoints=True`` (``lob bisect --endpoints``) stops after good against bad, whatever
  the call: a before/after benchmark of a range whose middle need not build, its line bad
  over good with the interval.

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

from lob.studies.gitbisect.checkouts import Checkouts, Revision, cache_root, revisions
from lob.studies.gitbisect.demo import demo_repo
from lob.studies.gitbisect.measurer import (
    BISECT_METRICS,
    CHANGED,
    PROBE_FILE,
    Sample,
    SubprocessMeasurer,
    metric_name,
)
from lob.studies.gitbisect.search import BisectResult, Step, bisect_versions

__all__ = ["BISECT_METRICS", "CHANGED", "PROBE_FILE", "BisectResult", "Checkouts", "Revision",
           "Sample", "Step", "SubprocessMeasurer", "bisect_versions",
           "cache_root", "demo_repo", "metric_name", "revisions"]

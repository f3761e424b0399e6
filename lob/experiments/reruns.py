"""``lob report --reruns K``: does each claim's verdict survive a rerun?

The experiments that measure the seeds' claims (those of the default batch named by
``experiments/claims.yaml``) are run ``K`` times, each time from scratch: every notebook in a
fresh kernel (a fresh process: nothing compiled, cached or warmed carries over from one
rerun to the next but what any first run also finds on disk), into
``<artifacts>/reruns/<i>/``. Each rerun's claims are judged as the report judges the main
runs (:func:`lob.studies.claims.verdicts`), and per claim the verdicts are counted:
``reproduced 5/5``, ``direction only 3/5, inconclusive 2/5``. A claim *agrees* when all K
verdicts are the same.

The tally is written to ``<artifacts>/reruns/reruns.json`` and ``reruns.md``; ``index.md``
shows it when present (:func:`markdown_section`). The reruns folder is the command's own: a
new ``--reruns`` replaces it, once all of its reruns completed (a failed rerun is not a
verdict; see :func:`run_reruns`).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from lob.experiments.report import RERUNS, TALLY, markdown_section, read

__all__ = ["RERUNS", "TALLY", "RerunsFailed", "claim_experiments", "markdown_section", "read",
           "run_reruns", "summarise", "tally"]


def claim_experiments() -> list[str]:
    """The default batch's experiments that measure at least one claim, in batch order."""
    from lob.experiments.registry import batch_names
    from lob.studies.claims import load

    wanted = {c.experiment for c in load()}
    return [n for n in batch_names() if n in wanted]


def tally(verdicts: list[str]) -> str:
    """``"reproduced 5/5"``, or the verdicts by count, most frequent first
    (``"direction only 3/5, inconclusive 2/5"``)."""
    if not verdicts:
        raise ValueError("no verdicts to tally")
    n = len(verdicts)
    counts = Counter(verdicts)
    order = sorted(counts, key=lambda v: (-counts[v], verdicts.index(v)))
    return ", ".join(f"{v} {counts[v]}/{n}" for v in order)


def summarise(per_rerun: list[dict[str, dict]]) -> dict[str, dict]:
    """Claim id -> ``{"verdicts", "figures", "tally", "agree"}`` from a list (one per rerun)
    of claim id -> ``{"verdict", "lob_figure"}``; a claim missing from a rerun counts as
    ``not measured`` there."""
    ids = sorted({cid for r in per_rerun for cid in r})
    out = {}
    for cid in ids:
        vs = [r.get(cid, {}).get("verdict", "not measured") for r in per_rerun]
        out[cid] = {"verdicts": vs,
                    "figures": [r.get(cid, {}).get("lob_figure", "-") for r in per_rerun],
                    "tally": tally(vs), "agree": len(set(vs)) == 1}
    return out


def run_reruns(k: int, names: list[str] | None = None, preset: str = "default",
               artifacts: Path | str | None = None, *, progress: bool = True,
               execute: Callable | None = None, lock_wait: float = 0.0) -> Path:
    """Run ``names`` (default: :func:`claim_experiments`) ``k`` times from scratch, judge
    each rerun's claims, write the tally; return the path of ``reruns.json``.

    The rules of ``lob experiments run``: everything is validated before anything is
    touched (``ValueError``: ``k < 2``, an experiment that measures no claim, an unknown
    preset or parameter); the artifacts folder's lock is held throughout
    (:class:`~lob.experiments.lock.ArtifactsLocked` if another batch holds it); the reruns
    are built in ``.scratch/`` and replace ``<artifacts>/reruns`` only when every one of
    them completed. A failed rerun is not a verdict: its exit code is recorded, the tally
    (``reruns.json``, whose ``failed`` lists them) is left in the scratch folder, the
    previous reruns stay in place, and :class:`RerunsFailed` is raised (its ``path``: that
    tally). Ctrl-C leaves the previous reruns in place too."""
    from lob.experiments.job import (
        RERUNS_SCRATCH,
        SCRATCH,
        _clear,
        _swap,
        default_artifacts,
        git_sha,
        restore_swaps,
        write_atomic,
    )
    from lob.experiments.lock import artifacts_lock
    from lob.experiments.runner import plan, run_batch
    from lob.measure.conditions import run_conditions as conditions
    from lob.studies.claims import load, verdicts

    if not isinstance(k, int) or isinstance(k, bool) or k < 2:
        raise ValueError(f"--reruns needs K >= 2 (a verdict against itself), got {k!r}")
    names = list(names or claim_experiments())
    measured = {c.experiment for c in load()}
    if bad := [n for n in names if n not in measured]:
        raise ValueError(f"{', '.join(bad)} measure(s) no claim of experiments/claims.yaml")
    art = Path(artifacts or default_artifacts())
    if art.exists() and not art.is_dir():
        raise ValueError(f"--out {art} is a file, not an artifacts directory")
    plan(names, preset, None, art / SCRATCH / RERUNS_SCRATCH / "new" / "1")  # validates
    ids = {c.id for c in load() if c.experiment in names}
    with artifacts_lock(art, lock_wait):
        restore_swaps(art, lambda msg: print(msg, file=sys.stderr))
        work = art / SCRATCH / RERUNS_SCRATCH / "new"
        if work.exists():
            _clear(work)  # an earlier attempt's leftovers
        start = datetime.now(UTC)
        before = conditions()
        per_rerun, codes = [], []
        for i in range(1, k + 1):
            if progress:
                print(f"rerun {i} of {k}: {', '.join(names)}", flush=True)
            codes.append(run_batch(names, preset, None, work / str(i), force=True,
                                   execute=execute, progress=progress))
            per_rerun.append({v.claim.id: {"verdict": v.verdict, "lob_figure": v.lob_figure}
                              for v in verdicts(work / str(i)) if v.claim.id in ids})
        failed = [i for i, c in enumerate(codes, 1) if c != 0]
        # a failed rerun gives no verdict: only the reruns that completed are tallied
        claims = summarise([r for i, r in enumerate(per_rerun, 1) if i not in failed])
        record = {"k": k, "preset": preset, "experiments": names,
                  "started": start.isoformat(timespec="seconds"),
                  "ended": datetime.now(UTC).isoformat(timespec="seconds"),
                  "git_sha": git_sha(), "exit_codes": codes, "failed": failed,
                  "conditions_before": _brief(before), "conditions_after": _brief(conditions()),
                  "claims": claims}
        path = write_atomic(work / TALLY, json.dumps(record, indent=1, sort_keys=True))
        write_atomic(work / "reruns.md", "\n".join(markdown_section(record)) + "\n")
        if failed:
            raise RerunsFailed(path, record)
        if (art / RERUNS).exists():
            _swap(work, art / RERUNS)  # recoverable: see lob.experiments.job.restore_swaps
        else:
            work.rename(art / RERUNS)
    return art / RERUNS / TALLY


class RerunsFailed(RuntimeError):
    """Some reruns failed: no tally replaced the previous one (``path``: this attempt's)."""

    def __init__(self, path: Path, record: dict):
        codes = record["exit_codes"]
        super().__init__(
            f"{len(record['failed'])} of {record['k']} reruns failed (exit codes "
            f"{codes}): a failed rerun is not a verdict, so the previous reruns are kept; "
            f"this attempt's runs and tally are in {path.parent}")
        self.path, self.record = path, record


def _brief(cond: dict) -> dict:
    keys = ("cpu_model", "cpu_count", "load_avg", "python", "hostname")
    return {k: cond.get(k) for k in keys if k in cond}

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
new ``--reruns`` replaces it.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from lob.experiments.report import RERUNS, TALLY, markdown_section, read

__all__ = ["RERUNS", "TALLY", "claim_experiments", "markdown_section", "read", "run_reruns",
           "summarise", "tally"]


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
               execute: Callable | None = None) -> Path:
    """Run ``names`` (default: :func:`claim_experiments`) ``k`` times from scratch, judge
    each rerun's claims, write the tally; return the path of ``reruns.json``.

    Raises ``ValueError`` for ``k < 2`` or an experiment that measures no claim."""
    from lob.experiments.job import default_artifacts, git_sha
    from lob.experiments.runner import run_batch
    from lob.measure.conditions import run_conditions as conditions
    from lob.studies.claims import load, verdicts

    if not isinstance(k, int) or k < 2:
        raise ValueError(f"--reruns needs K >= 2 (a verdict against itself), got {k!r}")
    names = list(names or claim_experiments())
    measured = {c.experiment for c in load()}
    if bad := [n for n in names if n not in measured]:
        raise ValueError(f"{', '.join(bad)} measure(s) no claim of experiments/claims.yaml")
    art = Path(artifacts or default_artifacts())
    base = art / RERUNS
    if base.exists():
        shutil.rmtree(base)
    ids = {c.id for c in load() if c.experiment in names}
    start = datetime.now(UTC)
    before = conditions()
    per_rerun, codes = [], []
    for i in range(1, k + 1):
        if progress:
            print(f"rerun {i} of {k}: {', '.join(names)}", flush=True)
        codes.append(run_batch(names, preset, None, base / str(i), force=True,
                               execute=execute, progress=progress))
        per_rerun.append({v.claim.id: {"verdict": v.verdict, "lob_figure": v.lob_figure}
                          for v in verdicts(base / str(i)) if v.claim.id in ids})
    claims = summarise(per_rerun)
    record = {"k": k, "preset": preset, "experiments": names,
              "started": start.isoformat(timespec="seconds"),
              "ended": datetime.now(UTC).isoformat(timespec="seconds"),
              "git_sha": git_sha(), "exit_codes": codes,
              "conditions_before": _brief(before), "conditions_after": _brief(conditions()),
              "claims": claims}
    base.mkdir(parents=True, exist_ok=True)
    path = base / TALLY
    path.write_text(json.dumps(record, indent=1, sort_keys=True))
    (base / "reruns.md").write_text("\n".join(markdown_section(record)) + "\n")
    return path


def _brief(cond: dict) -> dict:
    keys = ("cpu_model", "cpu_count", "load_avg", "python", "hostname")
    return {k: cond.get(k) for k in keys if k in cond}

"""Collecting: lob's claim measurements from the runs in an artifacts folder, and the verdict
on every claim from them (the report's reproduction table).

A notebook records its measurements in ``summary.json`` (``claims.<id>``); seed 003's
pipeline claims are derived again from the pipeline notebook's tables
(:func:`lob.studies.pipeline_latency.claims`) and take the place of what it recorded.
"""

from __future__ import annotations

import json
from pathlib import Path

from lob.studies.claims.judging import Verdict, judge
from lob.studies.claims.model import Claim, load


def collect(artifacts: Path | str) -> dict[str, tuple[dict, Path, dict]]:
    """Claim id -> (measurement, run dir, conditions) from the latest complete runs.

    For each experiment the newest complete run sets the preset; every complete run of that
    preset (a grid has several) contributes its claims, newer runs winning.
    """
    root = Path(artifacts)
    by_exp: dict[str, list[tuple[float, Path]]] = {}
    for marker in root.glob("*/*/COMPLETE"):
        by_exp.setdefault(marker.parent.parent.name, []).append(
            (marker.stat().st_mtime, marker.parent))
    out: dict[str, tuple[dict, Path, dict]] = {}
    for runs in by_exp.values():
        runs.sort()
        preset = runs[-1][1].name.split("-")[0]
        for _, run in runs:
            if run.name.split("-")[0] != preset:
                continue
            try:
                s = json.loads((run / "summary.json").read_text())
            except (OSError, ValueError):
                continue
            found = dict(s.get("claims") or {})
            if run.parent.name == "pipeline_latency":
                # derived again from its tables with today's definitions (a run recorded
                # before a definition changed is judged as a fresh one would be)
                from lob.studies.pipeline_latency import claims as pipeline_claims

                cond = s.get("conditions") or {}
                found.update(pipeline_claims(s.get("tables") or {}, cond.get("cpu_count"),
                                             here=False))
            for cid, m in found.items():
                out[cid] = (m, run, s.get("conditions") or {})
    return out


def verdicts(artifacts: Path | str, claims: list[Claim] | None = None) -> list[Verdict]:
    """One verdict per claim, from what the runs in ``artifacts`` recorded."""
    root = Path(artifacts)
    found = collect(root)
    out = []
    for c in claims or load():
        if c.id in found:
            m, run, cond = found[c.id]
            rel = run.relative_to(root)
            out.append(judge(c, m, link=f"{rel}/{c.experiment}.ipynb",
                             machine=cond.get("cpu_model", "")))
        else:
            out.append(judge(c, None))
    return out

"""Collecting: lob's claim measurements from the runs in an artifacts folder, and the verdict
on every claim from them (the report's reproduction table).

A notebook records its measurements in ``summary.json`` (``claims.<id>``); seed 003's
pipeline claims are derived again from the pipeline notebook's tables (:func:`pipeline_claims`)
and take the place of what it recorded.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from lob.measure.stats import median_interval, share_interval
from lob.studies.claims.judging import Verdict, judge, measurement
from lob.studies.claims.model import Claim, load
from lob.studies.conclude import fmt


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
                cond = s.get("conditions") or {}
                found.update(pipeline_claims(s.get("tables") or {}, cond.get("cpu_count")))
            for cid, m in found.items():
                out[cid] = (m, run, s.get("conditions") or {})
    return out


def _num(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and v == v and v > 0


def _measured_saturation(r: dict) -> bool | None:
    """Did the row's own run fail to keep up? ``keeps_up`` when recorded, else achieved below
    99% of offered; None when neither was measured (an offered rate above capacity is not a
    measurement of saturation)."""
    if r.get("keeps_up") is not None:
        return not bool(r["keeps_up"])
    if _num(r.get("achieved_rate")) and _num(r.get("offered_rate")):
        return r["achieved_rate"] < 0.99 * r["offered_rate"]
    return None


def pipeline_claims(tables: dict, cpu_count: int | None = None) -> dict[str, dict]:
    """Seed 003's pipeline claims measured from the pipeline notebook's tables.

    ``tables["capacity"]``: rows with ``batch`` and ``capacity`` (or ``capacity_compiled``);
    ``tables["sweep"]``: rows with ``batch``, ``pinning`` (pinned | unpinned), ``fraction``
    (offered rate over capacity), ``keeps_up`` (or ``achieved_rate`` and ``offered_rate``),
    ``lat_p99``, optionally ``above_capacity`` (offered above the top of the capacity's
    bracket), ``lat_growth`` and ``transport``; ``tables["tail_runs"]`` (optional): the
    notebook's repeated batch-1 runs (``fraction``, ``pinning`` (pinned, unpinned, and
    ``unpinned (A/A)``: a second unpinned run in the same round, the A/A control), ``run``,
    ``p99``, optionally ``tick_ns`` (the clock's grid measured from the run's samples), and
    ``variant`` (or ``mode``) when it compares transport variants: a round is then one
    variant's), used for the pinning claim instead of the sweep's rows when present.
    Gives
    ``s003_pipeline_capacity`` (batch 1; the compiled transport's when it ran),
    ``s003_pipeline_saturation`` (the share of rows offered above capacity, every batch and
    pinning of the compiled transport when it ran, that were *measured* not to keep up:
    ``keeps_up`` false, or achieved below 99% of offered; a row above capacity is one
    offered above the top of the capacity's bracket when the table says
    (``above_capacity``), else one at a fraction above 1, and none of a batch whose search
    found no capacity (``capacity_found``, or the capacity table's ``all_found``, false);
    with its Clopper-Pearson interval,
    and the growth of p99 and of latency over the run as the explanation) and
    ``s003_pinning`` (the median over rounds and rates below capacity of p99
    pinned / p99 unpinned, with its interval from 5 ratios on, its A/A control (the band of
    the ratios unpinned (A/A) / unpinned of the same rounds, ``aa``), its count of runs and
    the clock's grid; one part per transport variant, each with its own interval and A/A
    band, when the runs name variants); a claim whose rows are missing is left out.
    """
    from lob.measure.stats import aa_band

    aa_label = "unpinned (A/A)"  # lob.studies.pipeline_latency.AA_PINNING
    out: dict[str, dict] = {}
    cap = [r for r in tables.get("capacity") or [] if r.get("batch") == 1]
    key = next((k for k in ("capacity", "capacity_compiled") if cap and cap[0].get(k)), None)
    if key:
        out["s003_pipeline_capacity"] = measurement(cap[0][key],
                                                    detail=f"{key}, commands/s at batch 1")
    sweep = tables.get("sweep") or []
    if any(r.get("transport") == "compiled" for r in sweep):  # the seed's is compiled code
        sweep = [r for r in sweep if r.get("transport") == "compiled"]

    # a batch whose capacity search found no rate that kept up has no capacity to be above
    # (its "capacity" is the best rate achieved while falling behind): its rows do not count
    found = {r.get("batch"): r["all_found"] for r in tables.get("capacity") or []
             if r.get("all_found") is not None}

    def is_above(r):
        if r.get("capacity_found", found.get(r.get("batch"), True)) is False:
            return False
        if r.get("above_capacity") is not None:
            return bool(r["above_capacity"])
        return (r.get("fraction") or 0) > 1

    # both pinnings: pinning changes no offered rate
    above = [r for r in sweep if is_above(r) and _measured_saturation(r) is not None]
    if above:
        sat = [_measured_saturation(r) for r in above]
        k, n = sum(sat), len(sat)
        lo, hi = share_interval(k, n)
        below = [r.get("lat_p99") for r in sweep if r.get("pinning", "unpinned") == "unpinned"
                 and (r.get("fraction") or 0) < 1 and _num(r.get("lat_p99"))]
        over = [r.get("lat_p99") for r in above if _num(r.get("lat_p99"))]
        explain = {}
        if below and over:
            explain["p99 above / below capacity (medians)"] = (statistics.median(over)
                                                                / statistics.median(below))
        growth = [r["lat_growth"] for r in above if _num(r.get("lat_growth"))]
        if growth:
            explain["latency growth above capacity (median, last / first tenth)"] = \
                statistics.median(growth)
        ach = [r["achieved_rate"] / r["offered_rate"] for r in above
               if _num(r.get("achieved_rate")) and _num(r.get("offered_rate"))]
        if ach:
            explain["achieved / offered above capacity (median)"] = statistics.median(ach)
        out["s003_pipeline_saturation"] = measurement(
            k / n, diagnostics={"count": n}, explain=explain, ci=(lo, hi),
            ci_what=f"95% Clopper-Pearson interval of {k} of {n} rows",
            detail=f"{k} of {n} rows offered above capacity (above the top of its bracket; "
                   "every batch and pinning) measured not to keep up (achieved rate or "
                   "backlog)")
    # p99 pinned / unpinned within each round (a round runs both pinnings at one rate): the
    # tail section's repeated batch-1 runs when recorded, else the sweep's batch-1 rows (the
    # k-th row of a rate and pinning in round k); the median of the per-round ratios, with
    # its interval once there are 5 or more; the A/A control: unpinned (A/A) / unpinned
    def p99_of(v):
        return isinstance(v, int | float) and v == v and v > 0

    tail = [r for r in tables.get("tail_runs") or [] if p99_of(r.get("p99"))]
    runs = [(r.get("fraction"), r.get("pinning") or "unpinned",
             (r.get("variant", r.get("mode")), r.get("run")), r["p99"]) for r in tail]
    ticks = [r["tick_ns"] for r in tail if _num(r.get("tick_ns"))]
    if not runs:
        seen: dict = {}
        for r in sweep:
            if r.get("batch") == 1 and p99_of(r.get("lat_p99")):
                key = (r.get("fraction"), r.get("pinning") or "unpinned")
                seen[key] = seen.get(key, 0) + 1
                runs.append((*key, seen[key], r["lat_p99"]))

    def pinning(runs):
        rounds: dict = {}
        counts: dict = {}
        for f, pin, k, p99 in runs:
            if (f or 0) < 1:
                rounds.setdefault((f, k), {})[pin] = p99
                counts[(f, pin)] = counts.get((f, pin), 0) + 1
        per_round = [x["pinned"] / x["unpinned"] for x in rounds.values()
                     if "pinned" in x and "unpinned" in x]
        if not per_round:
            return None
        aa = aa_band([x[aa_label] / x["unpinned"] for x in rounds.values()
                      if aa_label in x and "unpinned" in x])
        rates = {f for f, _ in counts if (f, "pinned") in counts and (f, "unpinned") in counts}
        repeats = min(counts[(f, p)] for f in rates for p in ("pinned", "unpinned"))
        mi = median_interval(per_round, of="per-round ratios")
        used = [p99 for f, pin, _, p99 in runs if (f or 0) < 1 and pin in ("pinned", "unpinned")]
        clock = ({"tick_ns": statistics.median(ticks), "what": "median over the runs of the "
                  "grid measured from each run's latencies",
                  "percentiles": {"p99 (lowest run)": min(used)}} if ticks else None)
        return measurement(
            mi["median"], diagnostics={"cpu_count": cpu_count, "repeats": repeats},
            explain={"rate points": len(rates)}, ci=mi["ci"], ci_what=mi["what"],
            aa=aa, runs=len(per_round), clock=clock,
            detail=f"median of {len(per_round)} per-round ratios of p99 pinned / unpinned, "
                   f"batch 1, {repeats} run(s) each")

    whole = pinning(runs)
    variants = sorted({k[0] for _, _, k, _ in runs if isinstance(k, tuple) and k[0]}, key=str)
    if whole and len(variants) > 1:  # one interval per transport variant, never pooled
        parts = {str(v): p for v in variants
                 if (p := pinning([r for r in runs if r[2][0] == v]))}
        whole = measurement(
            whole["value"], diagnostics={**whole["diagnostics"],
                                         "repeats": min(p["diagnostics"]["repeats"]
                                                        for p in parts.values())},
            explain=whole["explain"], parts=parts, aa=whole.get("aa"), runs=whole["runs"],
            clock=whole.get("clock"),
            detail=f"per transport variant ({', '.join(parts)}), each its own interval and "
                   f"A/A band; pooled median {fmt(whole['value'])} shown only")
    if whole:
        out["s003_pinning"] = whole
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

"""Which mechanism makes the tail (seed 000): the mechanism table of ``tail_analysis``.

orderbook-rs explains each scenario's tail by a mechanism of its engine: allocator churn of
its ``Arc<PriceLevel>`` objects and skip-list cache misses (``add_only``), shard locking in
its ``DashMap`` order index (``cancel_only``), multi-level sweeps (the two walks). lob has
those mechanisms as one C++ engine with one compile-time toggle each (``lob.engines.native``:
a chain from a plain array ladder, each engine one toggle from its parent), so each
explanation becomes a hypothesis this table tests: add the mechanisms one at a time, and see
which step widens which scenario's tail.

:func:`measure_mechanisms` runs every engine of the chain on every scenario, ``captures``
fresh captures each, interleaved in rotated order over the (scenario, engine) cells; each
capture gives its own p50, p99, p99.9, p99.99 (where its count supports them) and the tail
ratios p99 / p50 and p99.99 / p50. :func:`mechanism_table` shows, per cell, the medians over
the captures and each ratio's interval (:func:`lob.measure.stats.median_interval`).
:func:`step_call` says whether one step widens a tail: ``widens`` when the child's whole
interval lies above the parent's, ``no widening`` when it lies below, or when each median
lies inside the other's interval (the captures cannot tell the two apart), ``undecided``
otherwise (or without intervals).
:func:`attributions` turns each seed attribution (:data:`ATTRIBUTIONS`, each quoting the
seed's sentence) into a call, ``supported`` / ``not supported`` / ``not decidable``:

- an attribution crediting mechanisms (toggles) is supported when a step adding one of them
  widens the scenario's tail, not supported when every such step shows no widening, and not
  decidable otherwise (or when the chain has no such step);
- an attribution crediting the scenario's own work (no mechanism: the walks' multi-level
  sweeps) is supported when no step widens the tail (the plain ladder has the same tail),
  not supported when a step does, not decidable otherwise.

Procedures return plain data, so the table and the calls are tested on synthetic captures
(``tests/studies/test_study_tail_mechanisms.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np

from lob.measure.stats import median_interval, rotations, supported
from lob.studies import conclude as K

__all__ = ["CHAIN", "QS", "RATIOS", "CONFIDENCE", "ATTRIBUTIONS", "Attribution",
           "check_chain", "capture_stats", "measure_mechanisms", "mechanism_table",
           "step_call", "attributions", "attribution_table"]

# the chain from the plain ladder to orderbook-rs's mechanisms (lob.engines.native)
CHAIN = ("ladder@cpp", "ladder+heap@cpp", "skiplist+heap@cpp", "skiplist+heap+levelobj@cpp",
         "orderbook_rs@cpp")
QS = (50, 99, 99.9, 99.99)
RATIOS = {"p99/p50": (99, 50), "p99.99/p50": (99.99, 50)}
CONFIDENCE = 0.9  # coverage of each ratio's interval (the regime table's)


@dataclass(frozen=True)
class Attribution:
    """One of the seed's explanations of a tail, as a hypothesis the table can test."""

    scenario: str
    ratio: str  # a key of RATIOS: the tail the seed speaks of
    credits: tuple[str, ...]  # toggles whose step should widen it; (): the scenario's work
    hypothesis: str
    quote: str  # the seed's sentence it rests on (orderbook-rs's HDR bench notes)


ATTRIBUTIONS = (
    Attribution("add_only", "p99.99/p50", ("level_objects", "levels"),
                "add_only's tail comes from allocator churn of level objects and from "
                "skip-list cache misses",
                "The dominant contributor at p99.99 is allocator jitter when Arc<PriceLevel> "
                "allocations churn under the system allocator; secondary is L2 cache misses "
                "on the price-side SkipMap when the working set outgrows L1."),
    Attribution("cancel_only", "p99/p50", ("index",),
                "cancel_only's tail comes from shard locking in the sharded order index",
                "DashMap::remove on the order index is a shard-local lock acquisition; the "
                "median is dominated by that single-cycle CAS path. The very long max tail "
                "reflects shard-contention windows when multiple removals land on the same "
                "shard back to back"),
    Attribution("aggressive_walk", "p99/p50", (),
                "aggressive_walk's tail comes from multi-level sweeps (the walk's own work), "
                "not from a mechanism of the engine",
                "Tail is driven by sweeps that span multiple levels and drop several "
                "Arc<PriceLevel>s at once."),
    Attribution("notional_walk", "p99/p50", (),
                "notional_walk's tail comes from multi-level sweeps (the walk's own work), "
                "not from a mechanism of the engine",
                "the tail tracks multi-level walks exactly like the base-qty sweep."),
)


def _pname(q: float) -> str:
    return f"p{q:g}"


# --- the chain -------------------------------------------------------------------------------

def check_chain(engines: Sequence[str], *, spec: Callable | None = None) -> list[dict]:
    """The steps of ``engines`` as a chain: ``[{"engine", "parent", "toggle", "value"}]``,
    the first with parent None. Each engine after the first must be registered with the one
    before as its parent and differ from it in exactly one toggle (ValueError otherwise).
    ``spec`` (default :func:`lob.engines.engine_spec`) is injectable."""
    if spec is None:
        from lob.engines import engine_spec as spec
    if not engines:
        raise ValueError("mechanism_engines: give at least one engine (the chain's base)")
    steps = [{"engine": engines[0], "parent": None, "toggle": None, "value": None}]
    for parent, child in zip(engines, engines[1:], strict=False):
        s, p = spec(child), spec(parent)
        if s.parent != parent:
            raise ValueError(f"mechanism_engines: {child}'s parent is {s.parent!r}, not "
                             f"{parent!r}: each engine must be one step from the one before")
        diff = [t for t in sorted(set(s.toggles) | set(p.toggles))
                if s.toggles.get(t) != p.toggles.get(t)]
        if len(diff) != 1:
            raise ValueError(f"mechanism_engines: {parent} -> {child} changes "
                             f"{len(diff)} toggles ({', '.join(diff) or 'none'}), not one")
        steps.append({"engine": child, "parent": parent, "toggle": diff[0],
                      "value": s.toggles.get(diff[0])})
    return steps


# --- measuring -------------------------------------------------------------------------------

def capture_stats(durations) -> dict:
    """One capture's percentiles (QS; None where its count does not support one) and tail
    ratios (RATIOS; None where a percentile is missing)."""
    d = np.asarray(durations, dtype=float)
    out: dict = {"count": int(len(d))}
    for q in QS:
        out[_pname(q)] = (float(np.percentile(d, q, method="inverted_cdf"))
                          if len(d) and supported(q, len(d)) else None)
    for name, (hi, lo) in RATIOS.items():
        a, b = out[_pname(hi)], out[_pname(lo)]
        out[name] = a / b if a is not None and b else None
    return out


def measure_mechanisms(engines: Sequence[str], scenarios: Sequence[str], scale: float,
                       captures: int, scale_overrides: Mapping[str, float] | None = None, *,
                       steps: Sequence[dict] | None = None, workload: Callable | None = None,
                       capture: Callable | None = None) -> dict:
    """Every engine on every scenario at ``scale`` (or its ``scale_overrides`` entry: e.g.
    enough ops for a p99.99 in one scenario, fewer bursts in another), ``captures`` fresh
    captures per cell, interleaved (round ``r`` captures every cell once, in
    :func:`rotations` order).

    Returns ``{"engines", "scenarios", "scale", "scales": {scenario: scale}, "captures",
    "steps" (:func:`check_chain`),
    "cells": {scenario: {engine: [capture_stats of each capture]}}, "skipped":
    [{"scenario", "engine", "reason"}]}``. A cell outside the engine's declared capabilities
    is not run (``skipped``). ``steps``, ``workload`` and ``capture`` are injectable."""
    from lob.studies.declared import refusal

    if steps is None:
        steps = check_chain(engines)
    if workload is None:
        from lob.workloads import build

        def workload(name, scale):
            return build(name, scale=scale)
    # the table reads only the durations: no capture measures its clock's grid
    capture = capture or partial(K.capture, grid=False)
    scales = {s: float((scale_overrides or {}).get(s, scale)) for s in scenarios}
    unknown = set(scale_overrides or {}) - set(scenarios)
    if unknown:
        raise ValueError(f"mechanism scale_overrides names scenarios not in `scenarios`: "
                         f"{sorted(unknown)}")
    wls = {s: workload(s, scales[s]) for s in scenarios}
    cells, skipped = [], []
    for s in scenarios:
        for e in engines:
            why = refusal(e, wls[s])
            if why:
                skipped.append({"scenario": s, "engine": e, "reason": why})
            else:
                cells.append((s, e))
    got: dict[str, dict[str, list]] = {s: {} for s in scenarios}
    for order in rotations(cells, captures):
        for s, e in order:
            got[s].setdefault(e, []).append(capture_stats(capture(e, wls[s])["durations"]))
    return {"engines": list(engines), "scenarios": list(scenarios), "scale": scale,
            "scales": scales, "captures": captures, "steps": list(steps), "cells": got,
            "skipped": skipped}


# --- the table -------------------------------------------------------------------------------

def _interval(values: Sequence) -> dict | None:
    xs = [v for v in values if v is not None]
    return median_interval(xs, CONFIDENCE, of="fresh captures") if xs else None


def _summary(caps: Sequence[dict]) -> dict:
    """Medians of a cell's captures and each ratio's interval."""
    out: dict = {"captures": len(caps), "count": min(c["count"] for c in caps)}
    for q in QS:
        xs = [c[_pname(q)] for c in caps if c[_pname(q)] is not None]
        out[_pname(q)] = float(np.median(xs)) if xs else None
    for name in RATIOS:
        mi = _interval([c[name] for c in caps])
        ci = (mi or {}).get("ci") or (None, None)
        out[name] = mi["median"] if mi else None
        out[f"{name} low"], out[f"{name} high"] = ci
    return out


def step_call(parent: Mapping, child: Mapping, ratio: str) -> str:
    """Does the step parent -> child widen ``ratio`` (cells of :func:`_summary`)?
    ``widens``: the child's interval lies wholly above the parent's; ``no widening``: the
    child's interval lies wholly below the parent's, or each median lies inside (or on the
    near side of) the other's interval (the captures do not tell the two apart);
    ``undecided``: anything else, or an interval is missing."""
    plo, pmed, phi = (parent.get(k) for k in (f"{ratio} low", ratio, f"{ratio} high"))
    clo, cmed, chi = (child.get(k) for k in (f"{ratio} low", ratio, f"{ratio} high"))
    if None in (plo, pmed, phi, clo, cmed, chi):
        return "undecided"
    if clo > phi:
        return "widens"
    if chi < plo or (cmed <= phi and pmed >= clo):
        return "no widening"
    return "undecided"


def _summaries(mech: dict) -> dict[str, dict[str, dict]]:
    return {s: {e: _summary(caps) for e, caps in by.items() if caps}
            for s, by in mech["cells"].items()}


def _step_label(step: Mapping) -> str:
    return "base" if step["parent"] is None else f"+{step['toggle']}={step['value']}"


def mechanism_table(mech: dict) -> K.Conclusion:
    """Per (scenario, engine): the step it adds, the medians over the captures of p50, p99,
    p99.9 and the two tail ratios with their intervals, and whether the step widens each
    ratio over its parent (:func:`step_call`). Says, per scenario, which steps widen its
    p99 / p50."""
    sums = _summaries(mech)
    steps = {st["engine"]: st for st in mech["steps"]}
    rows = []
    for s in mech["scenarios"]:
        for e in mech["engines"]:
            if e not in sums.get(s, {}):
                continue
            c, st = sums[s][e], steps[e]
            par = sums[s].get(st["parent"]) if st["parent"] else None
            rows.append({"scenario": s, "engine": e, "step": _step_label(st),
                         "scale": mech.get("scales", {}).get(s, mech["scale"]),
                         "captures": c["captures"], "count": c["count"],
                         "p50": c["p50"], "p99": c["p99"], "p99.9": c["p99.9"],
                         **{k: c[k] for name in RATIOS
                            for k in (name, f"{name} low", f"{name} high")},
                         **{f"{name} step": (step_call(par, c, name) if par else "")
                            for name in RATIOS}})
    kinds = {"step": "label", "scale": "ratio", "captures": "count", "count": "count",
             **{f"{n} step": "label" for n in RATIOS},
             **{k: "ratio" for n in RATIOS for k in (n, f"{n} low", f"{n} high")}}
    t = K.Conclusion("which mechanism makes the tail", rows,
                     key=["scenario", "engine"], kinds=kinds,
                     note=f"Each engine adds one mechanism to the one above it (step). Columns "
                          f"p50..p99.9: medians over the fresh captures; each ratio: the "
                          f"median of the per-capture ratios with its {CONFIDENCE:.0%} "
                          f"interval (low-high); `step`: widens (the interval wholly above "
                          f"the parent's), no widening (wholly below it, or each median inside "
                          f"the other's interval) or undecided.")
    for s in mech["scenarios"]:
        wid = [r["step"] for r in t.rows if r["scenario"] == s and r["p99/p50 step"] == "widens"]
        if wid:
            t.say(f"{s}: p99 / p50 widens at {', '.join(wid)}.")
    for sk in mech.get("skipped", []):
        t.say(f"Not run: {sk['engine']} on {sk['scenario']} ({sk['reason']}).")
    return t


# --- the seed's attributions, called --------------------------------------------------------

def attributions(mech: dict, hypotheses: Sequence[Attribution] = ATTRIBUTIONS) -> list[dict]:
    """Each hypothesis's call from the table: ``[{"scenario", "hypothesis", "ratio",
    "credits", "evidence", "call", "quote"}]`` (rules in the module docstring; a hypothesis
    whose scenario was not measured is ``not decidable``)."""
    sums = _summaries(mech)
    out = []
    for h in hypotheses:
        cells = sums.get(h.scenario, {})
        steps = [st for st in mech["steps"] if st["parent"] is not None
                 and st["engine"] in cells and st["parent"] in cells]
        if h.credits:
            steps = [st for st in steps if st["toggle"] in h.credits]
        calls = [(st, step_call(cells[st["parent"]], cells[st["engine"]], h.ratio))
                 for st in steps]
        words = [c for _, c in calls]
        if not calls:
            call = "not decidable"
        elif h.credits:
            call = ("supported" if "widens" in words else
                    "not supported" if all(w == "no widening" for w in words) else
                    "not decidable")
        else:
            call = ("not supported" if "widens" in words else
                    "supported" if all(w == "no widening" for w in words) else
                    "not decidable")
        evidence = "; ".join(
            f"{_step_label(st)}: {_fmt_cell(cells[st['parent']], h.ratio)} -> "
            f"{_fmt_cell(cells[st['engine']], h.ratio)} ({w})" for st, w in calls) \
            or "no step of the chain adds " + (" or ".join(h.credits) or "a mechanism")
        out.append({"scenario": h.scenario, "hypothesis": h.hypothesis, "ratio": h.ratio,
                    "credits": ", ".join(h.credits) or "the scenario's own work",
                    "evidence": evidence, "call": call, "quote": h.quote})
    return out


def _fmt_cell(c: Mapping, ratio: str) -> str:
    if c.get(ratio) is None:
        return "n/a"
    lo, hi = c.get(f"{ratio} low"), c.get(f"{ratio} high")
    ci = f" [{K.fmt(lo)}-{K.fmt(hi)}]" if lo is not None and hi is not None else ""
    return f"{K.fmt(c[ratio])}{ci}"


def attribution_table(mech: dict, hypotheses: Sequence[Attribution] = ATTRIBUTIONS
                      ) -> K.Conclusion:
    """:func:`attributions` as a table, one row per seed attribution, and one sentence per
    call naming the evidence it rests on."""
    rows = attributions(mech, hypotheses)
    t = K.Conclusion("the seed's attributions, called by the mechanism table", rows,
                     key="scenario",
                     kinds={k: "label" for k in ("hypothesis", "ratio", "credits", "evidence",
                                                 "call", "quote")},
                     note=f"captures per cell: {mech['captures']}; scale (fraction of the "
                          f"seed's op counts): {K.fmt(mech['scale'])}" + "".join(
                              f", {s} {K.fmt(v)}" for s, v in mech.get("scales", {}).items()
                              if v != mech["scale"]) + ".")
    for r in t.rows:
        t.say(f"{r['hypothesis']}: {r['call']} ({r['ratio']}: {r['evidence']}).")
    return t

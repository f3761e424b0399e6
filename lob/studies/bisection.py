"""Bisection along the lineage: the study behind ``notebooks/bisection.ipynb``.

Between two versions of lob's lineage and one metric, the change is attributed step by step
(each step changes one toggle). Every version is measured ``runs`` times after one warm-up
run (dropped and counted), interleaved in rotated order (:func:`lob.measure.stats.rotations`)
so drift hits every version alike. An A/A control runs inside the same interleaving: the start
version measured a second time as if it were one more version (:data:`AA`), one ratio per
round, whose spread is the band of "no change" on this machine in this run
(:func:`lob.measure.stats.aa_band`). Each step's ratio of medians gets a bootstrap interval
(:func:`lob.measure.stats.ratio_interval`) and the call
:func:`lob.measure.stats.change_beyond_aa` (``faster`` / ``slower`` only when the whole
interval lies beyond the A/A band, ``within noise`` inside it, else ``inconclusive``); a
step is **called** when that call is ``faster`` or ``slower``.

seed 000 (orderbook-rs, Apple M4 Max) bisected its 0.12.0 release in three points; its
figures come from ``claims.yaml``'s ``published`` section (:mod:`lob.studies.published`),
never typed here. lob's lineage steps are not orderbook-rs's upgrades: only ratios are set
beside the seed's.

Procedures (``prepare``, ``measure_walk``) take the notebook's parameters and return plain
data; the table builders, the plot and :func:`claims` work on that data, so
``tests/studies/test_study_bisection.py`` reaches every sentence on synthetic samples.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lob.measure.stats import (
    aa_band,
    change_beyond_aa,
    min_count,
    ratio_interval,
    ratio_interval_what,
    rotations,
    supported,
)
from lob.studies import conclude as K
from lob.studies.shape import Parameters as _Parameters
from lob.studies.shape import Shape, at_least_one

__all__ = ["METRICS", "BACKENDS", "WARMUP", "SEED_POINTS", "AA", "resolve_metric", "changed",
           "prepare", "path_table", "measure_walk", "raw_table", "steps_table",
           "three_points_table", "seed_points_table", "plot_walk", "claims"]

METRICS = ("ns_per_op", "p50", "p99")
BACKENDS = {"": "python", "@numba": "numba"}
WARMUP = 1  # runs dropped at the start of every version (run 0 warms every version up)
SEED_POINTS = (("start", "0.11.0"), ("midpoint", "post-upgrade midpoint"), ("end", "0.12.0"))
CALLED = ("faster", "slower")  # the change calls that clear the noise
AA = " (A/A)"  # suffix of the A/A control's name in the interleaving: the start version again


# --- parameters and the walk ------------------------------------------------------------------

@dataclass(frozen=True)
class Parameters(_Parameters):
    """The notebook's parameters this study checks up front (names and defaults as in its
    cell); the walk's versions and the workload's size are checked by :func:`prepare`."""

    start: str = "v0"
    end: str = "v3"
    metric: str = "p50"
    runs: int = 5
    n_boot: int = 2000
    confidence: float = 0.95
    backend: str = ""

    def check(self) -> None:
        from lob.engines.toggles import CHAIN
        from lob.studies.shape import one_of

        one_of(self.start, CHAIN, "start", "the lineage chain")
        one_of(self.end, CHAIN, "end", "the lineage chain")
        one_of(self.metric, (*METRICS, "auto"), "metric", "the metrics")
        one_of(self.backend, list(BACKENDS), "backend", "the backends")
        if isinstance(self.runs, bool) or not isinstance(self.runs, int) or self.runs < 3:
            raise ValueError(f"runs must be >= 3 (one warm-up is dropped), got {self.runs!r}")
        at_least_one(self.n_boot, "n_boot")
        if not 0 < self.confidence < 1:
            raise ValueError(f"confidence must be in (0, 1), got {self.confidence!r}")


def resolve_metric(metric: str, workload: str) -> str:
    """``auto``: ns/op for the C++ streams (throughput is their published figure), else p50;
    anything else must be one of :data:`METRICS` (one clear ValueError)."""
    if metric == "auto":
        metric = "ns_per_op" if workload.startswith("cpp_") else "p50"
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS} or auto, got {metric!r}")
    return metric


def changed(a: str, b: str) -> str:
    """The toggles two versions differ in, ``"levels: deque -> pool"`` style."""
    from lob.engines.toggles import version_toggles

    ta, tb = version_toggles(a), version_toggles(b)
    return ", ".join(f"{k}: {ta[k]} -> {tb[k]}" for k in ta if ta[k] != tb[k])


def prepare(start: str, end: str, workload: str, metric: str, *, scale: float,
            scale_overrides: dict | None = None, runs: int, backend: str = "") -> dict:
    """Check the parameters and build the walk: ``{"metric", "path" (versions), "names"
    (engines: version + backend), "wl", "n_timed"}``. Only the versions the backend really
    runs are walked (the compiled one has no deque levels: its walk starts at v0+pool), so
    every step changes at least one toggle."""
    from lob.engines.toggles import CHAIN, chain
    from lob.workloads import build

    metric = resolve_metric(metric, workload)
    if runs < 3:
        raise ValueError(f"runs must be >= 3 (one warm-up is dropped), got {runs}")
    for v in (start, end):
        if v not in CHAIN:
            raise ValueError(f"{v!r} is not on the lineage chain {CHAIN}")
    if CHAIN.index(start) >= CHAIN.index(end):
        raise ValueError(f"start {start!r} must come before end {end!r} on {CHAIN}")
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {sorted(BACKENDS)}, got {backend!r}")
    have = [v.removesuffix(backend) for v in chain(BACKENDS[backend])]
    path = [v for v in CHAIN[CHAIN.index(start):CHAIN.index(end) + 1] if v in have]
    if len(path) < 2:
        raise ValueError(f"{start} .. {end} has fewer than two versions on backend "
                         f"{backend!r}: {have}")
    for a, b in zip(path, path[1:], strict=False):
        if not changed(a, b):
            raise ValueError(f"{a} -> {b} changes no toggle")
    wl = build(workload, scale=(scale_overrides or {}).get(workload, scale))
    n_timed = int(np.count_nonzero(wl.commands["timed"]))
    if metric != "ns_per_op" and not supported(float(metric[1:]), n_timed):
        raise ValueError(f"{metric} needs {min_count(float(metric[1:])):,} timed ops per run; "
                         f"{workload} at this scale has {n_timed:,}")
    return {"metric": metric, "path": path, "names": [v + backend for v in path], "wl": wl,
            "n_timed": n_timed, "workload": workload, "backend": backend}


def path_table(plan: dict):
    """The walk: each version and the toggles its step changes (a DataFrame to display)."""
    import pandas as pd

    p = plan["path"]
    return pd.DataFrame({"version": plan["names"], "step from the previous": [""] + [
        changed(a, b) for a, b in zip(p, p[1:], strict=False)]})


# --- the measurement --------------------------------------------------------------------------

def _measure_one(engine: str, wl, metric: str) -> tuple[float, dict | None, np.ndarray | None]:
    """One run: ns/op of a replay, or a percentile of one latency capture (its clock and its
    durations too)."""
    from lob.engines.registry import replay
    from lob.studies.capture import capture

    if metric == "ns_per_op":
        return replay(engine, wl).elapsed_ns / len(wl.commands), None, None
    cp = capture(engine, wl)
    q = float(np.percentile(cp["durations"], float(metric[1:]), method="inverted_cdf"))
    return q, cp["clock"], cp["durations"]


def measure_walk(plan: dict, runs: int, out: Path | None = None, *,
                 measure: Callable | None = None) -> dict:
    """Every version and the A/A control (the start version again, named ``start + AA``)
    ``runs + WARMUP`` times, round by round in rotated order; the latency histogram of each
    version's kept runs saved as ``<engine>__<workload>.hgrm`` in ``out`` (for ns/op, one
    capture per version after the walk).

    Returns ``{"samples": {engine: [all runs]}, "kept": {engine: runs after the warm-up},
    "dropped": {engine: n}, "aa": {"samples", "kept", "ratios": one A/A over start ratio per
    kept round, "band": stats.aa_band}, "clock": the latency clock or None, "durations":
    {engine: the kept runs' durations merged} (latency metrics), "hgrm": [file names]}``.
    ``measure(engine, wl, metric) -> (value, clock[, durations])`` is injectable for
    tests."""
    measure = measure or _measure_one
    names, wl, metric = plan["names"], plan["wl"], plan["metric"]
    aa = names[0] + AA
    samples: dict[str, list[float]] = {e: [] for e in [*names, aa]}
    durs: dict[str, list] = {e: [] for e in names}
    clock = None
    for order in rotations([*names, aa], runs + WARMUP):
        for e in order:
            v, c, *d = measure(e.removesuffix(AA), wl, metric)
            samples[e].append(float(v))
            clock = c or clock
            if d and d[0] is not None and e in durs and len(samples[e]) > WARMUP:
                durs[e].append(np.asarray(d[0]))
    warm = {e: K.drop_warmup(samples[e], WARMUP) for e in samples}
    kept = {e: [float(x) for x in warm[e][0]] for e in samples}
    ratios = [b / a for a, b in zip(kept[names[0]], kept[aa], strict=True) if a > 0 and b > 0]
    merged = {e: np.concatenate(durs[e]) for e in names if durs[e]}
    hgrm = []
    if out is not None:
        from lob.studies.capture import capture, save_hgrm

        hgrm = [save_hgrm(merged[e] if e in merged else capture(e, wl)["durations"],
                          Path(out) / f"{e}__{plan['workload']}.hgrm") for e in names]
    return {"samples": {e: samples[e] for e in names},
            "kept": {e: kept[e] for e in names},
            "dropped": {e: warm[e][1] for e in names},
            "aa": {"name": aa, "samples": samples[aa], "kept": kept[aa], "ratios": ratios,
                   "band": aa_band(ratios)},
            "clock": clock, "durations": merged, "hgrm": hgrm}


def raw_table(walk: dict):
    """Every run of every version and of the A/A control (a DataFrame; run 0 is the dropped
    warm-up)."""
    import pandas as pd

    aa = walk.get("aa")
    raw = pd.DataFrame({**walk["samples"], **({aa["name"]: aa["samples"]} if aa else {})})
    raw.index.name = "run (0: warm-up, dropped)"
    return raw


# --- the steps, with their intervals and calls ------------------------------------------------

def _step_row(step: str, toggle: str, a: Sequence[float], b: Sequence[float], dropped: int,
              confidence: float, n_boot: int, seed: int, band: dict) -> dict:
    ratio, lo, hi = ratio_interval(a, b, confidence=confidence, n_boot=n_boot, seed=seed)
    call = change_beyond_aa(lo, hi, band)
    return {"step": step, "toggle": toggle, "runs": len(b), "warmup_dropped": dropped,
            "median_before": float(np.median(a)), "median_after": float(np.median(b)),
            "ratio": ratio, "ci_low": lo, "ci_high": hi, "change": call,
            "called": call in CALLED}


def _with_interval(c: K.Conclusion, row: str) -> str:
    if c.value(row, "ci_low") is None:
        return f"{c.cell(row, 'ratio')}x, no interval from {c.cell(row, 'runs')} runs"
    return (f"{c.cell(row, 'ratio')}x, interval {c.cell(row, 'ci_low')}-"
            f"{c.cell(row, 'ci_high')}")


def _band(walk: dict) -> dict:
    """The walk's A/A band (no A/A control recorded: no band, so no step is called)."""
    aa = walk.get("aa")
    return aa["band"] if aa else {"low": None, "high": None, "n": 0,
                                  "what": "no A/A control in this walk"}


def _grid_note(walk: dict) -> str:
    """The clock grid measured from the walk's latency durations, in one sentence ("" for
    ns/op: no durations)."""
    from lob.studies.tail_analysis import grid_line, grid_of

    if not walk.get("durations"):
        return ""
    return grid_line(grid_of(walk["durations"].values()), marked=False)


def steps_table(walk: dict, plan: dict, *, confidence: float = 0.95, n_boot: int = 2000,
                boot_seed: int = 1) -> K.Conclusion:
    """One row per step plus the whole walk: medians before and after, the ratio after /
    before with its bootstrap interval, the call against the A/A band, and each step's share
    of the walk's (log) change. The A/A band (the start version measured twice in the same
    interleaving) and the clock grid measured from the samples go in the note. Sentences:
    the whole walk; the A/A band; the steps clear of the band and the largest; the rest."""
    names, kept, metric = plan["names"], walk["kept"], plan["metric"]
    b, band = plan["backend"], _band(walk)
    rows = [_step_row(f"{x} -> {y}", changed(x.removesuffix(b), y.removesuffix(b)), kept[x],
                      kept[y], walk["dropped"][y], confidence, n_boot, boot_seed, band)
            for x, y in zip(names, names[1:], strict=False)]
    logs = np.abs(np.log([r["ratio"] for r in rows]))
    for r, x in zip(rows, logs, strict=True):
        r["share_of_change"] = float(x / logs.sum()) if logs.sum() else None
    whole = f"{names[0]} -> {names[-1]} (whole walk)"
    rows.append({**_step_row(whole, "", kept[names[0]], kept[names[-1]],
                             walk["dropped"][names[-1]], confidence, n_boot, boot_seed, band),
                 "share_of_change": None})
    unit = "ns/op" if metric == "ns_per_op" else "ns"
    aa_what = (f"A/A control ({names[0]} measured twice in the same interleaving, one ratio "
               f"per round): {band['what']}")
    note = (f"Intervals: {confidence:.0%} percentile bootstrap of the ratio of medians "
            f"({n_boot:,} resamples); a step is called when the whole interval lies beyond "
            f"the A/A band. {aa_what}.")
    grid = _grid_note(walk)
    if grid:
        note += " " + grid
    elif walk.get("clock"):
        note += " " + K.clock_line(walk["clock"])
    c = K.Conclusion(f"steps ({metric} on {plan['workload']})", rows, key="step",
                     kinds={"toggle": "label", "runs": "count", "warmup_dropped": "count",
                            "ratio": "ratio", "ci_low": "ratio", "ci_high": "ratio",
                            "change": "label", "called": "label",
                            "share_of_change": "ratio"}, note=note)
    c.say(f"{metric} on {plan['workload']} went from {c.cell(whole, 'median_before')} to "
          f"{c.cell(whole, 'median_after')} {unit} ({_with_interval(c, whole)}): "
          f"{c.value(whole, 'change')}.")
    if band.get("low") is None:
        c.say(f"No A/A band here ({band['what'].removeprefix('no A/A band: ')}): no step can "
              "be told apart from noise, so none is called.")
    else:
        c.say(f"The A/A control puts no change at {band['low']:.4g}-{band['high']:.4g} here: "
              "a step inside that band is within noise.")
    called = [r for r in rows[:-1] if r["called"]]
    if called:
        top = max(called, key=lambda r: abs(np.log(r["ratio"])))["step"]
        c.say("Steps clear of the A/A band: " + ", ".join(
            f"{r['step']} ({r['change']}, {_with_interval(c, r['step'])})" for r in called)
            + f"; the largest of them is {top}, {c.cell(top, 'share_of_change')} of the "
            "walk's change.")
    else:
        c.say(f"No step's {confidence:.0%} interval lies beyond the A/A band.")
    quiet = [r for r in rows[:-1] if not r["called"]]
    if quiet:
        c.say("Not told apart from noise: " + ", ".join(
            f"{r['step']} ({r['change']})" for r in quiet) + ".")
    return c


# --- three points, as seed 000 bisected its release -------------------------------------------

def three_points_table(walk: dict, plan: dict) -> K.Conclusion:
    """lob's start, midpoint (the middle version of the walk) and end, as ratios to the
    start, with the clock grid measured from the walk's durations under it."""
    names, kept = plan["names"], walk["kept"]
    base = float(np.median(kept[names[0]]))
    rows = [{"point": p, "version": v, "runs": len(kept[v]), "median": float(np.median(kept[v])),
             "vs_start": float(np.median(kept[v])) / base}
            for p, v in zip((p for p, _ in SEED_POINTS),
                            (names[0], names[len(names) // 2], names[-1]), strict=True)]
    c = K.Conclusion(f"three points ({plan['metric']} on {plan['workload']})", rows,
                     key="point", kinds={"runs": "count", "vs_start": "ratio"},
                     note=_grid_note(walk))
    c.say(f"lob's midpoint ({c.cell('midpoint', 'version')}) is "
          f"{c.cell('midpoint', 'vs_start')}x the start, the end {c.cell('end', 'vs_start')}x.")
    return c


def seed_points_table(metric: str, workload: str) -> K.Conclusion | None:
    """seed 000's published three points of ``workload`` as ratios to its start (only the
    points it published), or None when the seed did not bisect this metric and workload."""
    from lob.studies import published
    from lob.studies.claims import get

    pts = published.SEED000_BISECTION.get(workload)
    if metric != "p50" or not pts:
        return None
    machine = get("s000_stp_one_step").machine
    rows = [{"point": p, "version": v, "vs_start": x / pts[0]}
            for (p, v), x in zip(SEED_POINTS, pts, strict=True) if x is not None]
    c = K.Conclusion(f"seed 000 three points ({machine})", rows, key="point",
                     kinds={"vs_start": "ratio"}, machine=f"{machine} (seed 000)")
    if any(r["point"] == "midpoint" for r in rows):
        c.say(f"The seed's p50 at the midpoint is {c.cell('midpoint', 'vs_start')}x its "
              f"start and at the end {c.cell('end', 'vs_start')}x.")
    else:
        c.say(f"The seed published only the release's ends: its p50 at the end is "
              f"{c.cell('end', 'vs_start')}x its start.")
    return c


# --- the plot ---------------------------------------------------------------------------------

def plot_walk(walk: dict, steps: K.Conclusion, plan: dict, *, confidence: float = 0.95,
              n_boot: int = 2000, boot_seed: int = 1):
    """Left: every kept run per version (the warm-up as a grey x) with the median and its
    bootstrap interval; right: each step's ratio with its interval, labelled called / noise,
    over the A/A control's band (shaded)."""
    from lob.measure.stats import median_interval
    from lob.studies import plots as lp

    names, kept, samples = plan["names"], walk["kept"], walk["samples"]
    unit = "ns/op" if plan["metric"] == "ns_per_op" else "ns"
    fig, axes = lp.subplots(1, 2, panel=(6.2, 3.8))
    bars = True
    for i, e in enumerate(names):
        axes[0].scatter(np.full(len(kept[e]), i), kept[e], s=12, alpha=0.6)
        axes[0].scatter([i], samples[e][:WARMUP], marker="x", color="grey", s=20)
        mi = median_interval(kept[e], confidence)
        bars = bars and mi["ci"] is not None
        lo, hi = mi["ci"] or (mi["median"], mi["median"])
        axes[0].errorbar(i, mi["median"], yerr=[[mi["median"] - lo], [hi - mi["median"]]],
                         fmt="k_", capsize=6)
    axes[0].set_xticks(range(len(names)), names)
    lp.category_axis(axes[0])
    lp.value_axis(axes[0], [x for e in names for x in samples[e]])
    n = len(kept[names[0]])
    bar = (f"bar: {confidence:.0%} interval of the median" if bars else
           f"—: median (no {confidence:.0%} interval from {n} runs)")
    axes[0].set(ylabel=unit, title=f"{plan['metric']} on {plan['workload']}\n"
                                   f"({n} runs each; x: warm-up, dropped; {bar})")
    rows = steps.rows[:-1]
    y = np.arange(len(rows))
    r = np.array([s["ratio"] for s in rows])
    lo = np.array([s["ci_low"] if s["ci_low"] is not None else s["ratio"] for s in rows])
    hi = np.array([s["ci_high"] if s["ci_high"] is not None else s["ratio"] for s in rows])
    axes[1].errorbar(r, y, xerr=[r - lo, hi - r], fmt="o", capsize=4)
    axes[1].set_yticks(y, [s["step"] for s in rows])
    axes[1].set_ylim(-0.5, len(rows) - 0.5)
    lp.value_axis(axes[1], [*lo, *hi, 1.0, *(v for v in (_band(walk).get("low"),
                                                       _band(walk).get("high")) if v)],
                  axis="x")
    lp.reference(axes[1], 1.0, axis="x", color="grey", ls="-", lw=0.8)
    band = _band(walk)
    if band.get("low") is not None:  # the A/A control's band of no change
        axes[1].axvspan(band["low"], band["high"], color="grey", alpha=0.2,
                        label=f"A/A band ({band['n']} ratios)")
        axes[1].legend(loc="best")
    axes[1].grid(True, axis="x")
    axes[1].grid(False, axis="y")
    lp.label_points(axes[1], r, y, ["called" if s["called"] else "noise" for s in rows])
    axes[1].set(xlabel=f"ratio after/before ({confidence:.0%} bootstrap interval)",
                title="attribution per step")
    return fig


# --- the claims -------------------------------------------------------------------------------

def _clock(walk: dict, plan: dict) -> dict | None:
    """The claims' clock record: the tick measured from the walk's durations and the median
    p50 of every version (each enters the figure); None for ns/op."""
    from lob.studies.tail_analysis import clock_of

    if plan["metric"] == "ns_per_op" or not walk.get("durations"):
        return None
    d = np.concatenate(list(walk["durations"].values()))
    return clock_of(d, {f"{plan['metric']} {e}": float(np.median(walk["kept"][e]))
                        for e in plan["names"]})


def claims(steps: K.Conclusion, plan: dict, walk: dict | None = None) -> dict[str, dict]:
    """The seed claims this walk measures: ``s000_stp_one_step`` (p50 on stp_sweep: the
    largest step's share of the walk's log change) and ``s000_mass_cancel_gain`` (p50 on
    mass_cancel_burst: last / first, with its interval); {} for any other walk. Each records
    the walk's A/A band (``aa``), its count of kept runs a version (``runs``) and, from
    ``walk``'s durations, the clock record (the clock-floor check)."""
    from lob.studies.claims import measurement

    metric, workload, names = plan["metric"], plan["workload"], plan["names"]
    whole = steps.rows[-1]
    walk = walk or {}
    common = {"aa": _band(walk), "runs": whole["runs"], "clock": _clock(walk, plan)}
    out = {}
    if metric == "p50" and workload == "stp_sweep":
        shares = [r["share_of_change"] for r in steps.rows[:-1]
                  if r["share_of_change"] is not None]
        out["s000_stp_one_step"] = measurement(
            max(shares) if shares else float("nan"),
            diagnostics={"total_change_called": bool(whole["called"]),
                         "count": plan["n_timed"]},
            explain={"whole walk ratio": whole["ratio"]},
            detail=f"largest step's share of the {metric} change, {names[0]} -> {names[-1]}",
            **common)
    if metric == "p50" and workload == "mass_cancel_burst":
        ci = (whole["ci_low"], whole["ci_high"]) if whole["ci_low"] is not None else None
        out["s000_mass_cancel_gain"] = measurement(
            whole["ratio"], diagnostics={"count": plan["n_timed"]}, ci=ci,
            ci_what=ratio_interval_what(whole["runs"], whole["runs"], of="kept runs"),
            detail=f"p50 {names[-1]} / {names[0]}", **common)
    return out


SHAPE = Shape(parameters=Parameters, measure=(prepare, measure_walk),
              tables=(path_table, raw_table, steps_table, three_points_table,
                      seed_points_table),
              claims=claims, plots=(plot_walk,))

"""Seed 003's pipeline study (``notebooks/pipeline_latency.ipynb``) as functions over plain data.

A paced sender process publishes batches of commands through a shared-memory SPSC ring to an
engine process (:mod:`lob.pipeline.session`); latency runs from each command's due time to
its published outcome. The notebook is a view over this module, section by section:

* **service**: :func:`measure_service` (the engine's closed-loop per-op latency and the python
  transport's executor cost per command) -> :func:`service_table`;
* **sweep**: :func:`measure_sweep` (capacity per transport and batch size, then runs at
  fractions of it, one .hgrm per row) -> :func:`sweep_table`, :func:`saturation_table`,
  :func:`plot_latency_by_rate`,
  :func:`capacity_table`, :func:`plot_capacity`, :func:`at_fraction_table`,
  :func:`at_fraction_pivot`;
* **scenarios**: :func:`measure_scenarios` (the eight orderbook-rs scenarios open loop at
  fractions of their own capacity) -> :func:`scenarios_table`;
* **pauses**: :func:`measure_pauses` (a bare clock-reading loop on every CPU) ->
  :func:`pauses_raw`, :func:`pauses_table`;
* **tail**: :func:`measure_tail` (repeated batch-1 runs of a lineage of compiled variants,
  pauses recorded between the rounds, an A/A control beside the pinned runs) ->
  :func:`tail_model` (the model on those pauses) -> :func:`tail_table`,
  :func:`tail_runs_table`, :func:`plot_tail_vs_model`, :func:`pinning_table`,
  :func:`stalls_table`, :func:`steps_table`;
* **claims**: :func:`claims` (``s003_*`` from the tables: :func:`capacity_claim`,
  :func:`saturation_claim`, :func:`pinning_claim`).

Every table is a :class:`~lob.studies.conclude.Conclusion` whose sentences quote its own
cells; the thresholds the sentences turn on are the constants below.
"""

from __future__ import annotations

import contextlib
import math
import os
import statistics
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from lob.measure.stats import (
    CLOCK_FLOOR_TICKS,
    aa_band,
    change_of_ratios,
    marker,
    median_interval,
    share_interval,
)
from lob.studies import plots as lp
from lob.studies.claims.judging import measurement
from lob.studies.conclude import (
    Conclusion,
    capacity_bound,
    conclude_suppressed,
    fmt,
    percentile_row,
)
from lob.studies.shape import Parameters as _Parameters
from lob.studies.shape import Shape, at_least_one, need

__all__ = [
    "Parameters", "SHAPE",
    "PCTS", "AT_FRACTIONS", "TAIL_FRACTIONS", "BASE_VARIANT", "TICK_LOCKED_PCT", "TICK_PERIODS",
    "MIN_SPAN_MS_NO_HZ", "MODEL_FACTOR", "SAME_BAND", "STALL_COVERAGE", "AA_PINNING",
    "Plan", "Service", "Sweep", "Tail", "TailModel",
    "resolve_engine", "plan", "measure_service", "service_table", "measure_sweep",
    "sweep_table", "saturation_table", "plot_latency_by_rate", "capacity_table", "plot_capacity",
    "at_fraction_table", "at_fraction_pivot", "measure_scenarios", "scenarios_table",
    "measure_pauses", "pauses_raw", "pauses_table", "measure_tail", "pinnings", "tail_model",
    "tail_table", "tail_runs_table", "plot_tail_vs_model", "pinning_table", "poisson_upper",
    "stall_rates",
    "stalls_table", "steps_table", "claims", "capacity_claim", "saturation_claim",
    "pinning_claim", "BESIDE", "BESIDE_FRACTION", "measure_engines",
    "engines_table",
]

PCTS = {"p50": 0.5, "p90": 0.9, "p99": 0.99, "p99.9": 0.999, "p99.99": 0.9999}
AT_FRACTIONS = (0.5, 0.9)  # the sweep's rows the key comparison reads (fractions of capacity)
TAIL_FRACTIONS = (0.5, 0.9)  # the tail section's offered rates (fractions of capacity)
BASE_VARIANT = "command/line"  # seed 003's capacity: every command published on its own
TICK_LOCKED_PCT = 50.0  # pauses at one tick phase above this share come with the tick (~12% if not)
TICK_PERIODS = 10  # a run shorter than this many tick periods may meet no pause: not compared
MIN_SPAN_MS_NO_HZ = 40.0  # that span when the kernel's tick rate is unknown (250 Hz's)
MODEL_FACTOR = 2.0  # the model holds when the runs' p99 lie within this factor of its p99
SAME_BAND = 0.05  # a step whose whole interval lies within this of no change changes nothing
STALL_COVERAGE = 0.99  # stalled runs up to this quantile of the expected count: the machine's
SERVICE_REPEAT = 2  # fresh-engine passes of the executor's cost per command (the best kept)
BESIDE = ("v5@numba", "v2@numba")  # the engines compared on the compiled transport (B=1)
BESIDE_FRACTION = 0.5  # their latency is read at this fraction of each one's own capacity
AA_PINNING = "unpinned (A/A)"  # the second unpinned run of a round: the pinning's A/A control


@dataclass(frozen=True)
class Parameters(_Parameters):
    """The notebook's parameters this study checks up front (names and defaults as in its
    cell; the engine is resolved and checked by :func:`resolve_engine`)."""

    transports: tuple[str, ...] = ("python", "compiled")
    batches: tuple[int, ...] = (1, 8)
    fractions: tuple[float, ...] = (0.5, 0.9, 1.2)
    steps: int = 1
    mode: str = "chunk"
    beside_rounds: int = 1
    scenario_fractions: tuple[float, ...] = (0.5, 0.9)
    tail_repeat: int = 1

    def check(self) -> None:
        from lob.studies.shape import one_of

        need(self.transports, "transports", "transport (python, compiled)")
        for t in self.transports:
            one_of(t, ("python", "compiled"), "transport", "the transports")
        need(self.batches, "batches", "batch size")
        for b in self.batches:
            at_least_one(b, "a batch size")
        for name in ("fractions", "scenario_fractions"):
            values = getattr(self, name)
            need(values, name, "fraction of capacity")
            if any(isinstance(f, bool) or not isinstance(f, int | float) or not f > 0
                   for f in values):
                raise ValueError(f"{name} must be > 0 (fractions of capacity), got "
                                 f"{list(values)!r}")
        at_least_one(self.steps, "steps")
        one_of(self.mode, ("chunk", "command"), "mode", "the engine loops")
        at_least_one(self.beside_rounds, "beside_rounds")
        at_least_one(self.tail_repeat, "tail_repeat")


def _pct_cells(lat, qs=("p50", "p99", "p99.9")) -> dict:
    """count + each percentile the sample count supports (else its marker n<...)."""
    row = percentile_row(lat, [100 * PCTS[k] for k in qs])
    return {"count": row["count"], **{k: row[k] for k in qs}}


def _num(v) -> bool:
    """A measured number (not None, NaN or a marker)."""
    return isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool) \
        and v == v


# --- the plan -------------------------------------------------------------------------------

def resolve_engine(engine: str) -> str:
    """``engine``, or (empty) the first of :data:`BESIDE` registered (``v5@numba``, the
    fastest compiled engine), else the sweep's default (the pure-Python ``v2``)."""
    from lob.engines.registry import engine_names
    from lob.pipeline.sweep import default_engine

    return engine or next((e for e in BESIDE if e in engine_names()), default_engine())


@dataclass
class Plan:
    """What the notebook runs: the engine, the transports it runs on, workload, pinnings."""

    engine: str
    workload: str
    scale: float
    transports: list[str]
    skipped: list[str]
    wl: object
    pins: list

    def describe(self) -> str:
        skip = "".join(f"transport {t!r} skipped: {self.engine} is not a compiled engine\n"
                       for t in self.skipped)
        load = os.getloadavg()[0]
        return (f"{skip}{self.engine} on {self.workload} x {self.scale}: "
                f"{len(self.wl.commands):,} commands; transports {self.transports}; pinnings "
                f"{self.pins}; load average {load:.2f} on {os.cpu_count()} CPUs")

    @property
    def tail_transport(self) -> str:
        """The transport of the scenario and tail sections: compiled when it runs."""
        return "compiled" if "compiled" in self.transports else "python"


def plan(engine: str, workload: str, scale: float, transports, pin_compare: bool) -> Plan:
    """The transports ``engine`` runs on, the workload, and the pinnings (unpinned, then
    sender on the first CPU and engine on the second when ``pin_compare`` and 2+ CPUs)."""
    from lob.pipeline.session import runs_on
    from lob.workloads import build as build_workload

    runs = [t for t in transports if runs_on(engine, t)]
    pins: list = [None]
    cpus = sorted(os.sched_getaffinity(0))
    if pin_compare and len(cpus) >= 2:
        pins.append((cpus[0], cpus[1]))
    return Plan(engine, workload, scale, runs, [t for t in transports if t not in runs],
                build_workload(workload, scale=scale), pins)


# --- closed-loop service time ----------------------------------------------------------------

@dataclass
class Service:
    """The engine's closed-loop per-op latency and the executor's cost per command."""

    closed: object  # lob.measure.latency.LatencyStats
    method: str  # how the closed-loop samples were timed
    rows: list[dict]  # service_time rows: engine, mode, batch, ns_per_op, rate_bound


def measure_service(p: Plan, batches) -> Service:
    """Closed-loop per-op latency (:func:`lob.measure.latency.capture_latency`) and the cost
    per command of the python transport's executor fed chunks of B, both modes."""
    from lob.engines.registry import get_engine
    from lob.measure.latency import LatencyStats, capture_latency, histogram_from
    from lob.pipeline.sweep import service_time

    cap = capture_latency(get_engine(p.engine, p.wl.config), p.wl.commands)
    closed = LatencyStats.of(*histogram_from(cap.durations_ns))
    rows = [service_time(p.engine, p.wl.commands, config=p.wl.config, batch=b, mode=m,
                         repeat=SERVICE_REPEAT) for b in batches for m in ("chunk", "command")]
    return Service(closed, cap.method, rows)


def service_table(svc: Service) -> Conclusion:
    """The executor's cost per command per batch and mode; the closed-loop figures in the
    note (their sample count with them)."""
    c = svc.closed
    return Conclusion("service", svc.rows, key=["batch", "mode"],
                      kinds={"batch": "label", "mode": "label", "engine": "label"},
                      note=f"Closed-loop per op ({c.count:,} samples, {svc.method}): p50 "
                           f"{fmt(c.p50)} ns, p99 {fmt(c.p99)} ns, p99.9 {fmt(c.p99_9)} ns. "
                           "rate_bound = 1e9 / ns_per_op bounds the python transport's "
                           "capacity.")


# --- the sweep ------------------------------------------------------------------------------

SWEEP_COLUMNS = ["transport", "batch", "pinning", "fraction", "offered_rate", "capacity_high",
                 "above_capacity", "achieved_rate", "saturated", "keeps_up", "count", "lat_p50",
                 "lat_p99", "lat_p99_9", "lat_max", "backlog_end", "lat_growth"]


@dataclass
class Sweep:
    """The sweep's rows (one per transport, batch, pinning and rate), capacities, result file."""

    rows: pd.DataFrame
    caps: pd.DataFrame  # transport, batch, capacity, unpaced_rate, bracket, found
    result_path: Path | None = None


def measure_sweep(p: Plan, *, batches, fractions, steps: int, mode: str, gc_enabled: bool,
                  out) -> Sweep:
    """One sender/engine pair per transport: capacity per batch, then the rows at
    ``fractions`` of it per pinning (:func:`lob.pipeline.sweep.sweep`); one .hgrm per row and
    the result JSON written to ``out``. The capacity is searched once per batch, in its own
    pass before the rows, and never again from what the rows show (``research=False``): a row
    at a fixed multiple above it that keeps up stands as measured, so the saturation claim
    (:func:`saturation_claim`) can fail."""
    from lob.pipeline.sweep import save_rows, sweep

    rows, caps = [], []
    for tr in p.transports:
        r, c = sweep(p.engine, p.wl.commands, batches=batches, fractions=fractions, steps=steps,
                     pins=p.pins, config=p.wl.config, mode=mode if tr == "python" else None,
                     gc_enabled=gc_enabled, transport=tr, research=False,
                     confirm=3 if tr == "compiled" else 1)  # the claim's rows are compiled
        rows += r
        caps += c
    path = save_rows(rows, out, params={"engine": p.engine, "workload": p.workload,
                                        "scale": p.scale, "mode": mode,
                                        "transports": p.transports})
    return Sweep(_sweep_frame(rows), pd.DataFrame(caps), path)


def _sweep_frame(rows: list[dict]) -> pd.DataFrame:
    res = pd.DataFrame(rows).drop(columns=["encoded"], errors="ignore")
    res["pinning"] = np.where(res.pinned, "pinned", "unpinned")
    return res


def sweep_table(sw: Sweep) -> Conclusion:
    """Every row of the sweep (percentiles the sample count cannot support as markers).
    Sentences: per transport, batch and pinning, each row that fell behind yet reads a lower
    p50 than a row offered less: its latency is read at its achieved rate, apart from the
    curve (:func:`plot_latency_by_rate`)."""
    t = sw.rows.rename(columns={"lat_count": "count"})[SWEEP_COLUMNS].reset_index(drop=True)
    c = Conclusion("sweep", t, kinds={"transport": "label", "batch": "label",
                                      "pinning": "label", "fraction": "ratio"})
    p50 = pd.to_numeric(t.lat_p50, errors="coerce")
    for _, g in t.groupby(["transport", "batch", "pinning"], sort=False):
        order = g.sort_values("offered_rate").index
        for k, i in enumerate(order):
            before = [j for j in order[:k] if p50[j] > p50[i]]
            if not t.saturated[i] or not before:
                continue
            j = max(before, key=lambda j: p50[j])
            state = "fell behind too" if t.saturated[j] else "kept up"
            c.say(f"{c.cell(i, 'transport')} B={c.cell(i, 'batch')} {c.cell(i, 'pinning')}: "
                  f"the row offered {c.cell(i, 'offered_rate')}/s fell behind (achieved "
                  f"{c.cell(i, 'achieved_rate')}/s) and reads a p50 of {c.cell(i, 'lat_p50')} "
                  f"ns, below the {c.cell(j, 'lat_p50')} ns of the row offered "
                  f"{c.cell(j, 'offered_rate')}/s, which {state}. A run that falls behind has "
                  "no steady state: its queue grows for as long as the run lasts, so its "
                  "percentiles say how long it ran at the rate it achieved, not what the "
                  "offered rate costs (the plot draws such rows hollow at their achieved rate, "
                  "apart from the curve).")
    return c


def saturation_table(sw: Sweep) -> Conclusion:
    """Per transport: of the rows offered above capacity (above the top of
    the capacity's bracket: ``above_capacity``), how many were *measured* not to keep up
    (``keeps_up`` false: achieved below 99% of offered, or a backlog), the Clopper-Pearson
    interval of that share, the median achieved / offered rate and latency growth (last
    tenth over first tenth of the run); beside it the rows above 1 inside the bracket and
    the rows below capacity that fell behind, and the rows of a batch whose search found no
    capacity (not counted). The compiled transport's row (else the only
    one) is the s003_pipeline_saturation figure (:func:`saturation_claim`,
    which computes every row). Sentences: no row above capacity;
    per group the share; rows that kept up; rows inside the bracket; rows without a capacity;
    rows below capacity that fell behind."""
    res = sw.rows
    rows = []
    groups = [(tr, res[res.transport == tr]) for tr in dict.fromkeys(res.transport)]
    for name, d in groups:
        recs = d.drop(columns=["encoded"], errors="ignore").to_dict("records")
        m = claims({"sweep": recs}, 1).get("s003_pipeline_saturation")
        lost = (~d["capacity_found"].astype(bool) if "capacity_found" in d
                else pd.Series(False, index=d.index))
        over = d[(d.fraction > 1) & ~lost]
        below = d[d.fraction < 1]
        ex = (m or {}).get("explain") or {}
        n = m["diagnostics"]["count"] if m else 0
        k = round(m["value"] * n) if m else 0
        rows.append({"transport": name, "rows above capacity": n, "fell behind": k,
                     "kept up": n - k, "share": m["value"] if m else None,
                     "interval low": m["ci"][0] if m else None,
                     "interval high": m["ci"][1] if m else None,
                     "achieved / offered": next((v for kk, v in ex.items()
                                                 if kk.startswith("achieved")), None),
                     "latency growth": next((v for kk, v in ex.items()
                                             if kk.startswith("latency growth")), None),
                     "inside the bracket": int((~over.above_capacity.astype(bool)).sum())
                     if "above_capacity" in over else 0,
                     "no capacity found": int((lost & (d.fraction > 1)).sum()),
                     "rows below capacity": len(below),
                     "below capacity, fell behind": int((~below.keeps_up.astype(bool)).sum())})
    c = Conclusion("saturation", rows, key="transport",
                   kinds={"transport": "label", "rows above capacity": "count",
                          "fell behind": "count", "kept up": "count", "share": "ratio",
                          "interval low": "ratio", "interval high": "ratio",
                          "achieved / offered": "ratio", "latency growth": "ratio",
                          "inside the bracket": "count", "no capacity found": "count",
                          "rows below capacity": "count",
                          "below capacity, fell behind": "count"},
                   note="Above capacity: offered above the top of the capacity's bracket (the "
                        "lowest rate the search saw fall behind). Fell behind: achieved below "
                        "99% of offered, or a backlog at the end (the keeps-up test). Interval: "
                        "95% Clopper-Pearson. Latency growth: median latency of the run's last "
                        "tenth of commands over its first tenth's (medians over the rows). Seed "
                        "003's saturation claim is the compiled transport's row (the seed's "
                        "pipeline is compiled code), else the only one.")
    for r in c.rows:
        t = r["transport"]
        if not r["rows above capacity"]:
            c.say(f"{t}: no row was offered above the top of its capacity's bracket, so "
                  "saturation is not measured (add fractions well above capacity).")
        else:
            c.say(f"{t}: {c.cell(t, 'fell behind')} of {c.cell(t, 'rows above capacity')} rows "
                  f"offered above capacity fell behind (share {c.cell(t, 'share')}, interval "
                  f"{c.cell(t, 'interval low')} to {c.cell(t, 'interval high')}); median "
                  f"achieved / offered {c.cell(t, 'achieved / offered')}, latency growth "
                  f"{c.cell(t, 'latency growth')}x over the run.")
        if r["kept up"]:
            c.say(f"{t}: {c.cell(t, 'kept up')} row(s) above capacity kept up by their own "
                  "measurement: there the capacity found understates what the pipeline "
                  "sustained (on a busy machine the search's longer, slower runs fall behind "
                  "on a preemption near their end).")
        if r["inside the bracket"]:
            c.say(f"{t}: {c.cell(t, 'inside the bracket')} row(s) offered above the capacity "
                  "found lie inside its bracket (the search's resolution) and are not "
                  "counted.")
        if r["no capacity found"]:
            c.say(f"{t}: {c.cell(t, 'no capacity found')} row(s) at fractions of a batch whose "
                  "capacity search found no rate that kept up are not counted: there is no "
                  "capacity to be above.")
        if r["below capacity, fell behind"]:
            c.say(f"{t}: {c.cell(t, 'below capacity, fell behind')} of "
                  f"{c.cell(t, 'rows below capacity')} rows offered below capacity fell behind "
                  "as well: the machine was busy (see the load), so keeping up is noisy here.")
    return c


def plot_latency_by_rate(sw: Sweep, closed_p50: float):
    """Per batch size: p50/p99/p99.9 against the rate (solid: the first transport, dashed:
    the second; verticals: capacity). A row that kept up achieved its offered rate and is
    drawn there, joined to its neighbours. A row measured not to keep up (saturated) has no
    steady state to read: its queue grew for as long as the run lasted, so its latency is
    set by the run's length at the rate it *achieved*, not by the rate offered. It is drawn
    hollow at its achieved rate and joined to nothing (an offered-rate curve through it
    could fall past capacity while those rows fall behind)."""
    res, caps = sw.rows, sw.caps
    batches = list(dict.fromkeys(res.batch))
    fig, axes = lp.subplots(1, len(batches), panel=(4.6, 3.8), squeeze=False)
    for ax, b in zip(axes.flat, batches, strict=True):
        for tr, ls in zip(dict.fromkeys(res.transport), ("-", "--"), strict=False):
            d = res[(res.batch == b) & ~res.pinned & (res.transport == tr)].sort_values(
                "offered_rate")
            ok = ~d.saturated.astype(bool)
            for q, c in (("lat_p50", "C0"), ("lat_p99", "C1"), ("lat_p99_9", "C3")):
                y = pd.to_numeric(d[q], errors="coerce")
                ax.plot(d.offered_rate[ok], y[ok], ls, marker="o", color=c, ms=4,
                        label=f"{tr} {q.removeprefix('lat_').replace('_', '.')}")
                ax.plot(d.achieved_rate[~ok], y[~ok], "o", mfc="none", color=c, ms=5)
            cap = caps[(caps.transport == tr) & (caps.batch == b)].capacity
            if len(cap):
                ax.axvline(cap.iloc[0], color="k", lw=0.8, ls=ls)
        ax.set(title=f"batch {b} (verticals: capacity)", xlabel="rate (commands/s)",
               ylabel="latency (ns)")
        lp.value_axis(ax, axis="x")
        # the scale first (from the latencies and the reference), then the reference line:
        # a reference placed on a linear range before the switch to log left a negative limit
        ys = pd.to_numeric(res[res.batch == b][["lat_p50", "lat_p99", "lat_p99_9"]].stack(),
                           errors="coerce")
        lp.value_axis(ax, [*ys, closed_p50], axis="y")
        lp.reference(ax, closed_p50, "closed-loop p50")
    axes.flat[0].plot([], [], "o", mfc="none", color="grey",
                      label="fell behind: at its achieved rate, not joined")
    lp.legend_outside(fig)
    return fig


def capacity_table(caps: pd.DataFrame, service_rows: list[dict], mode: str) -> Conclusion:
    """Capacity per batch and transport; beside it the python transport's closed-loop bound
    (never below its capacity: :func:`lob.studies.conclude.capacity_bound`) and the
    compiled/python ratio when both transports ran. ``all_found`` False: no rate kept up."""
    svc = pd.DataFrame(service_rows)
    bound = svc[svc["mode"] == mode].set_index("batch").ns_per_op if len(svc) else {}
    capt = caps.pivot_table(index="batch", columns="transport", values="capacity")
    capt.columns = [f"capacity_{c}" for c in capt.columns]
    capt["all_found"] = caps.groupby("batch").found.all()
    if "bracket" in caps.columns:  # the search's resolution: the lowest rate seen to fall behind
        top = caps.assign(top=[b[1] for b in caps.bracket]).pivot_table(
            index="batch", columns="transport", values="top")
        for tr in top.columns:
            capt[f"bracket_top_{tr}"] = top[tr]
    if not caps.found.all():  # which transport's search found no rate that kept up
        for tr, f in caps.pivot_table(index="batch", columns="transport", values="found",
                                      aggfunc="all").items():
            capt[f"found_{tr}"] = f.astype(bool)
    again = caps[caps.searches > 1] if "searches" in caps.columns else caps.iloc[:0]
    if len(again):  # a second search: a row above the first one's bracket kept up
        capt["searches"] = caps.groupby("batch").searches.max()
        first = again.pivot_table(index="batch", columns="transport", values="first_capacity")
        for tr in first.columns:
            capt[f"first_capacity_{tr}"] = first[tr]
    if "capacity_python" in capt.columns:
        # the executor's closed-loop cost bounds the PYTHON transport only
        cb = {b: capacity_bound(capt.capacity_python[b], bound[b]) for b in capt.index}
        capt["python_bound"] = [cb[b]["bound"] for b in capt.index]
        capt["python_bound_source"] = [cb[b]["source"] for b in capt.index]
    if {"capacity_python", "capacity_compiled"} <= set(capt.columns):
        capt["compiled_over_python"] = capt.capacity_compiled / capt.capacity_python
    c = Conclusion("capacity", capt.reset_index(), key="batch",
                   kinds={"batch": "label", "all_found": "label", "searches": "count",
                          "compiled_over_python": "ratio",
                          **{c: "label" for c in capt.columns if c.startswith("found_")}})
    for r in c.rows:
        k = r["batch"]
        parts = [f"{col.removeprefix('capacity_')} {c.cell(k, col)}/s" for col in c.columns
                 if col.startswith("capacity_")]
        ratio = (f" (compiled/python {c.cell(k, 'compiled_over_python')}x)"
                 if "compiled_over_python" in c.columns else "")
        pb = (f"; the python transport's closed-loop bound is {c.cell(k, 'python_bound')}/s "
              f"({c.cell(k, 'python_bound_source')})" if "python_bound" in c.columns else "")
        c.say(f"Capacity at B={c.cell(k, 'batch')}: {', '.join(parts)}{ratio}{pb}.")
        for tr in [col.removeprefix("first_capacity_") for col in c.columns
                   if col.startswith("first_capacity_") and r[col] == r[col]]:
            c.say(f"At B={c.cell(k, 'batch')} the {tr} transport's first search read "
                  f"{c.cell(k, f'first_capacity_{tr}')}/s, but a row offered above it kept up "
                  "(no run keeps up above capacity): the capacity was searched again from that "
                  "row's rate and the batch's rows ran again at fractions of the new figure.")
    return c


def plot_capacity(cap: Conclusion, engine: str):
    """A dot per batch and transport at its capacity (the highest rate that kept up), with
    the search's bracket as its interval (up to the lowest rate seen to fall behind; a dot
    is hollow where no rate kept up), beside the python transport's closed-loop bound (a
    bound, no interval). Dots, not bars: on the log axis these rates need, a bar's length
    from the axis floor would mean nothing."""
    t = pd.DataFrame(cap.rows).set_index("batch")
    trs = [c.removeprefix("capacity_") for c in t.columns if c.startswith("capacity_")]
    vals = pd.DataFrame({f"capacity {tr}": t[f"capacity_{tr}"] for tr in trs})
    high = pd.DataFrame({f"capacity {tr}": t.get(f"bracket_top_{tr}", np.nan) for tr in trs})
    hollow = pd.DataFrame({f"capacity {tr}": ~t.get(f"found_{tr}", t.all_found).astype(bool)
                           for tr in trs})
    if "python_bound" in t.columns:
        vals["python bound"] = t.python_bound
        high["python bound"] = np.nan
        hollow["python bound"] = False
    vals.index = [f"B={b}" for b in t.index]
    fig, ax = lp.subplots()
    lp.dots(ax, vals, low=vals.where(high.notna().to_numpy()), high=high.set_axis(vals.index),
            hollow=hollow.set_axis(vals.index), ylabel="commands/s",
            title=f"{engine}: capacity per batch size")
    ax.set_xlabel("dot: highest rate kept up; line: up to the lowest seen to fall behind",
                  fontsize=8)
    return fig


def _at(res: pd.DataFrame) -> pd.DataFrame:
    return res[res.fraction.isin(AT_FRACTIONS)]


def at_fraction_table(res: pd.DataFrame) -> Conclusion:
    """p50/p99/p99.9 at :data:`AT_FRACTIONS` of capacity per transport, batch and pinning;
    a sentence for each unpinned row of the smallest batch, then the hidden percentiles."""
    at = _at(res)
    rows = [{"transport": r.transport, "B": r.batch, "fraction": r.fraction,
             "pinning": r.pinning, "count": r.lat_count, "p50": r.lat_p50, "p99": r.lat_p99,
             "p99.9": r.lat_p99_9, "keeps_up": r.keeps_up} for r in at.itertuples()]
    name = " and ".join(f"{f:.0%}" for f in AT_FRACTIONS)
    c = Conclusion(f"at {name} of capacity", rows, key=["transport", "B", "fraction", "pinning"],
                   kinds={"B": "label", "fraction": "ratio"})
    smallest = min((r["B"] for r in c.rows), default=None)
    for r in c.rows:
        if r["pinning"] == "unpinned" and r["B"] == smallest:
            k = (r["transport"], r["B"], r["fraction"], r["pinning"])
            c.say(f"{r['transport']} B={c.cell(k, 'B')} at {c.cell(k, 'fraction')} of "
                  f"capacity: p50 {c.cell(k, 'p50')} ns, p99 {c.cell(k, 'p99')} ns.")
    return conclude_suppressed(c)


def at_fraction_pivot(res: pd.DataFrame) -> Conclusion:
    """The same rows flat: one per transport, batch and fraction, a column per percentile
    and pinning (``lat_p99_pinned``, ...); summary.json's ``at_fraction``."""
    key = _at(res).pivot_table(index=["transport", "batch", "fraction"], columns="pinning",
                               values=["lat_p50", "lat_p99", "lat_p99_9"])
    key.columns = [f"{a}_{b}" for a, b in key.columns]
    return Conclusion("at_fraction", key.reset_index(),
                      kinds={"transport": "label", "batch": "label", "fraction": "ratio"})


# --- engines beside each other on the compiled transport ------------------------------------

def measure_engines(p: Plan, engines=BESIDE, *, steps: int, rounds: int,
                    fraction: float = BESIDE_FRACTION, gc_enabled: bool = False) -> list[dict]:
    """Capacity at B=1 on the compiled transport (``command/line``) and the latency at
    ``fraction`` of that capacity, per engine of ``engines`` that runs there, in ``rounds``
    rounds (one session per engine, the engines' order flipped every round so that neither
    always runs first). One row per engine and round."""
    from lob.pipeline.session import PipelineSession, runs_on
    from lob.pipeline.sweep import find_capacity, summarize

    engines = [e for e in engines if runs_on(e, "compiled")]
    rows = []
    with contextlib.ExitStack() as stack:
        sess = {e: stack.enter_context(PipelineSession(e, transport="compiled",
                                                       config=p.wl.config,
                                                       gc_enabled=gc_enabled))
                for e in engines}
        for k in range(rounds):
            for e in (engines if k % 2 == 0 else engines[::-1]):
                cap = find_capacity(e, p.wl.commands, batch=1, steps=steps, session=sess[e])
                r = summarize(sess[e].run(p.wl.commands, rate=fraction * cap["capacity"],
                                          batch=1))
                rows.append({"engine": e, "round": k, "capacity": cap["capacity"],
                             "found": cap["found"], "fraction": fraction,
                             "keeps_up": r["keeps_up"], "count": r["lat_count"],
                             "p50": r["lat_p50"], "p99": r["lat_p99"]})
    return rows


def engines_table(rows: list[dict]) -> Conclusion:
    """Per engine: the median capacity at B=1 and the median p50 / p99 at the fraction of it,
    over the rounds, with each one's range (``count``: the fewest latency samples of a round,
    which the percentiles shown must be supported by); a sentence per engine and one comparing the
    first engine's capacity with each other's (the median of per-round ratios)."""
    df = pd.DataFrame(rows)
    out = []
    for e, g in df.groupby("engine", sort=False):
        out.append({"engine": e, "batch": 1, "rounds": len(g),
                    "capacity": float(g.capacity.median()),
                    "capacity_min": float(g.capacity.min()),
                    "capacity_max": float(g.capacity.max()),
                    "fraction": float(g.fraction.iloc[0]), "count": int(g["count"].min()),
                    "p50": float(g.p50.median()),
                    "p99": float(g.p99.median()), "all_found": bool(g.found.all()),
                    "all_kept_up": bool(g.keeps_up.all())})
    first = out[0]["engine"] if out else None
    for r in out:
        a = df[df.engine == first].set_index("round").capacity
        b = df[df.engine == r["engine"]].set_index("round").capacity
        r[f"capacity_over_{first}"] = float((b / a).median()) if r["engine"] != first else 1.0
    c = Conclusion("engines", out, key="engine",
                   kinds={"engine": "label", "batch": "label", "rounds": "count",
                          "all_found": "label",
                          "all_kept_up": "label", "fraction": "ratio",
                          f"capacity_over_{first}": "ratio"})
    for r in c.rows:
        k = r["engine"]
        c.say(f"{k}: capacity at B={c.cell(k, 'batch')} {c.cell(k, 'capacity')}/s (median of "
              f"{c.cell(k, 'rounds')} rounds, {c.cell(k, 'capacity_min')}-"
              f"{c.cell(k, 'capacity_max')}); at {c.cell(k, 'fraction')} of it p50 "
              f"{c.cell(k, 'p50')} ns, p99 {c.cell(k, 'p99')} ns.")
        if k != first:
            c.say(f"{k}'s capacity is {c.cell(k, f'capacity_over_{first}')}x {first}'s "
                  "(the median of the per-round ratios).")
    return c


# --- the orderbook-rs scenarios open loop ----------------------------------------------------

def measure_scenarios(p: Plan, *, scale: float, fractions, steps: int,
                      gc_enabled: bool) -> pd.DataFrame:
    """Each orderbook-rs scenario at ``fractions`` of its own capacity (B=1), beside its
    closed-loop figures (:func:`lob.pipeline.sweep.open_loop_scenarios`)."""
    from lob.pipeline.sweep import SCENARIOS, open_loop_scenarios

    sc = pd.DataFrame(open_loop_scenarios(p.engine, SCENARIOS, scale=scale, fractions=fractions,
                                          steps=steps, transport=p.tail_transport,
                                          gc_enabled=gc_enabled))
    sc["transport"] = p.tail_transport
    return sc


def scenarios_table(sc: pd.DataFrame) -> Conclusion:
    """Closed- and open-loop p50/p99/p99.9 per scenario and fraction; a percentile the
    samples do not support (NaN from the procedure) shows its marker ``n<...``."""
    rows = []
    for r in sc.to_dict("records"):
        row = {k: r[k] for k in ("scenario", "transport", "fraction", "capacity",
                                 "capacity_found", "achieved_rate", "keeps_up", "samples")}
        for k, q in (("p50", 0.5), ("p99", 0.99), ("p99_9", 0.999)):
            for side in ("closed", "open"):
                v = r[f"{side}_{k}"]
                row[f"{side}_{k}"] = marker(100 * q) if not _num(v) else float(v)
        rows.append(row)
    return Conclusion("scenarios", rows, key=["scenario", "fraction"],
                      kinds={"scenario": "label", "transport": "label", "fraction": "ratio"})


# --- the machine's pauses --------------------------------------------------------------------

def measure_pauses(seconds: float) -> list:
    """A bare clock-reading loop on every CPU at once
    (:func:`lob.diagnose.hiccup.record_hiccups`)."""
    from lob.diagnose.hiccup import record_hiccups

    return record_hiccups(seconds)


def pauses_raw(hic) -> Conclusion:
    """Each recording's summary (:meth:`lob.diagnose.hiccup.Hiccups.summary`): ``pauses``."""
    return Conclusion("pauses", [h.summary() for h in hic], key="cpu",
                      kinds={"cpu": "label", "kernel_hz": "label"})


def pauses_table(summaries: list[dict]) -> Conclusion:
    """Per CPU: pauses over 10 µs per second, median and longest, time lost; when most of them
    begin at one phase of the tick (>= :data:`TICK_LOCKED_PCT`), that they come with it."""
    def pct(v):
        return None if v is None else 100 * v

    pz = [{"cpu": str(h["cpu"]), "seconds": h["seconds"],
           "pauses > 10 µs per s": h["pauses_gt_10us_per_s"],
           "pauses > 100 µs per s": h["pauses_gt_100us_per_s"],
           "median pause > 10 µs (µs)": h["median_pause_gt_10us_us"],
           "longest (µs)": h["longest_us"],
           "time lost in pauses > 10 µs %": pct(h["lost_share_gt_10us"]),
           "timer interrupts per s": h["timer_irqs_per_s"], "kernel HZ": h["kernel_hz"],
           "pauses at one tick phase %": pct(h["tick_locked_share"])} for h in summaries]
    c = Conclusion("pauses of a bare clock-reading loop", pz, key="cpu",
                   kinds={k: "ratio" for r in pz for k in r if k != "cpu"},
                   note=f"Pauses at one tick phase: within 1/8 of the tick period; at least "
                        f"{fmt(TICK_LOCKED_PCT)}% of them there means they come with the "
                        "scheduler tick.")
    for r in c.rows:
        k = r["cpu"]
        c.say(f"CPU {k}: the loop was paused for more than 10 µs "
              f"{c.cell(k, 'pauses > 10 µs per s')} times a second (median "
              f"{c.cell(k, 'median pause > 10 µs (µs)')} µs, longest "
              f"{c.cell(k, 'longest (µs)')} µs), {c.cell(k, 'time lost in pauses > 10 µs %')}% "
              "of its time.")
        lock, irq = r["pauses at one tick phase %"], r["timer interrupts per s"]
        if _num(lock) and _num(irq) and lock >= TICK_LOCKED_PCT:
            c.say(f"{c.cell(k, 'pauses at one tick phase %')}% of those pauses began at one "
                  f"phase of the {c.cell(k, 'kernel HZ')} Hz tick, and the CPU took "
                  f"{c.cell(k, 'timer interrupts per s')} timer interrupts a second: the "
                  "pauses come with the scheduler tick.")
    return c


# --- the tail against the machine's pauses ---------------------------------------------------

@dataclass
class Tail:
    """The tail section's runs: a lineage of variants at :data:`TAIL_FRACTIONS` of the base
    variant's capacity at B=1, ``repeat`` rounds per pinning, pauses recorded between rounds."""

    transport: str
    variants: list[str]
    realtime_of: dict[str, bool]  # variant -> ran under SCHED_FIFO
    base: str  # the variant whose capacity sets the rates
    capacity: float
    unpaced: dict[str, float]  # variant -> its unpaced (flat out) rate, commands/s
    n: int  # commands per run
    runs: pd.DataFrame  # one row per run (variant, fraction, pinning, run, percentiles, ...)
    latencies: dict = field(default_factory=dict)  # (variant, fraction, pinning) -> [arrays]
    recordings: dict = field(default_factory=dict)  # realtime -> [[Hiccups per CPU], ...]

    @property
    def policies(self) -> list[bool]:
        """The scheduling policies the variants ran under (False: ordinary, True: FIFO)."""
        return sorted(set(self.realtime_of.values()))


def _tail_variants(transport: str, variants, mode: str) -> list[str]:
    vs = list(dict.fromkeys(variants)) if transport == "compiled" else [f"{mode}/fields"]
    if any(v.endswith("/realtime") for v in vs):
        from lob.pipeline.session import check_realtime

        try:
            check_realtime()
        except PermissionError as e:
            print(f"skipped the realtime variants: {e}")
            vs = [v for v in vs if not v.endswith("/realtime")]
    return vs


def _fit_realtime(vs: list[str], commands, slowest_rate: float) -> list[str]:
    """``vs`` without its realtime variants when a row at ``slowest_rate`` would outrun the
    kernel's real-time budget (a busy machine's low capacity makes long rows; the session
    would refuse them: :func:`lob.pipeline.session.check_row`)."""
    if not any(v.endswith("/realtime") for v in vs):
        return vs
    from lob.pipeline.session import check_row

    try:
        check_row(commands, slowest_rate, 1, 1, realtime=True)
    except ValueError as e:
        print(f"skipped the realtime variants: {e}")
        return [v for v in vs if not v.endswith("/realtime")]
    return vs


def pinnings(pins: list) -> dict[str, object]:
    """The tail section's pinnings by label: ``unpinned``; with a CPU pair also ``pinned`` and
    :data:`AA_PINNING` (a second unpinned run in the same round: the A/A control)."""
    if len(pins) < 2:
        return {"unpinned": None}
    return {"unpinned": None, "pinned": pins[1], AA_PINNING: None}


def _tick(run, exact_below_ns: int = 2048, most: int = 2000) -> float | None:
    """The clock's grid (ns) measured from one run's own stamps
    (:func:`lob.measure.stats.clock_grid`): its latencies and gaps between successive
    publishes under ``exact_below_ns`` (the first ``most`` of them; longer durations only
    widen the search), or None with fewer than 100 such."""
    from lob.measure.stats import clock_grid

    gaps = np.diff(np.sort(run.done_ns))
    v = np.concatenate([x[(x > 0) & (x < exact_below_ns)] for x in (run.latency_ns, gaps)])
    return clock_grid(v[:most])["tick_ns"] if len(v) >= 100 else None


def measure_tail(p: Plan, *, variants, mode: str, scale: float, repeat: int, steps: int,
                 hiccup_s: float, stall_us: float, gc_enabled: bool) -> Tail:
    """The compiled transport's ``variants`` (the python one in ``mode`` only), one session
    each, at :data:`TAIL_FRACTIONS` of the capacity at B=1 of :data:`BASE_VARIANT`; each round
    records the pauses under each policy the variants use (``hiccup_s / repeat`` seconds in
    all), then runs every pinning (:func:`pinnings`, their order rotated round by round:
    :func:`lob.measure.stats.rotations`) and rate, the variants' order reversed every other
    round (so each step's two variants run back to back in every round). A run whose longest
    publish gap exceeds ``stall_us`` is marked ``stalled``; ``tick_ns``: the clock's grid
    measured from the stamps of each variant's first run (:func:`_tick`; None on the others:
    the search costs a fraction of a second)."""
    from lob.diagnose.hiccup import record_hiccups
    from lob.measure.stats import rotations
    from lob.pipeline.session import PipelineSession, variant_options
    from lob.pipeline.sweep import find_capacity
    from lob.workloads import build as build_workload

    tr = p.tail_transport
    vs = _tail_variants(tr, variants, mode)
    wl = build_workload(p.workload, scale=scale)
    rt_of = {v: variant_options(v)["realtime"] for v in vs}
    pins = pinnings(p.pins)
    order = rotations(list(pins), repeat)
    rows, lats, ticked = [], {}, {}
    with contextlib.ExitStack() as stack:
        sess = {v: stack.enter_context(PipelineSession(p.engine, transport=tr, config=wl.config,
                                                       gc_enabled=gc_enabled,
                                                       **variant_options(v))) for v in vs}
        base = BASE_VARIANT if BASE_VARIANT in vs else vs[0]
        tcap = find_capacity(p.engine, wl.commands, batch=1, steps=steps, session=sess[base])
        vs = _fit_realtime(vs, wl.commands, min(TAIL_FRACTIONS) * tcap["capacity"])
        rt_of = {v: rt_of[v] for v in vs}
        policies = sorted(set(rt_of.values()))
        recs: dict = {rt: [] for rt in policies}
        unpaced = {v: tcap["unpaced_rate"] if v == base else
                   sess[v].run(wl.commands, rate=math.inf).achieved_rate for v in vs}
        for rep in range(repeat):
            for rt in policies:  # the pauses come in bursts: recorded between the rounds
                recs[rt].append(record_hiccups(hiccup_s / repeat / len(policies), realtime=rt))
            for pinning in order[rep]:
                for f in TAIL_FRACTIONS:
                    for v in (vs if rep % 2 == 0 else vs[::-1]):
                        r = sess[v].run(wl.commands, rate=f * tcap["capacity"], batch=1,
                                        pin=pins[pinning])
                        lat = r.latency_ns
                        lats.setdefault((v, f, pinning), []).append(lat)
                        gap_us = r.longest_gap_ns() / 1e3
                        rows.append({"variant": v, "fraction": f, "pinning": pinning,
                                     "run": rep + 1,
                                     "span_ms": (r.done_ns.max() - r.due_ns[0]) / 1e6,
                                     "keeps_up": r.keeps_up(), "drain_ns": r.drain_ns(),
                                     "longest gap (µs)": gap_us, "stalled": gap_us > stall_us,
                                     "tick_ns": None if (v, rt_of[v]) in ticked else
                                     ticked.setdefault((v, rt_of[v]), _tick(r)),
                                     **_pct_cells(lat, ("p50", "p90", "p99", "p99.9"))})
    return Tail(tr, vs, rt_of, base, tcap["capacity"], unpaced, len(wl.commands),
                pd.DataFrame(rows), lats, recs)


@dataclass
class TailModel:
    """The model on the recorded pauses, and the tail table's rows."""

    model: dict  # (variant, fraction) -> [latency arrays, one per window]
    rows: list[dict]
    min_span_ms: float  # shorter runs are not compared (ten tick periods)


def _windows(tail: Tail, f: float, service_ns: float, send_ns: float, rt: bool) -> list:
    """Latencies of runs as long as the measured ones on the pauses recorded under policy
    ``rt``: the traces cut into windows of as many commands, each from an empty queue,
    the sender on either CPU."""
    from lob.diagnose.hiccup import floor_runs

    pairs = [pr for h in tail.recordings.get(rt, [])
             for pr in ([(h[0], h[1]), (h[1], h[0])] if len(h) > 1 else [(h[0], h[0])])]
    return [w for a, b in pairs for w in floor_runs(a, b, rate=f * tail.capacity,
                                                    service_ns=service_ns, send_ns=send_ns,
                                                    n=tail.n)]


def _p99_median(ws) -> float | None:
    p = [x for x in (_pct_cells(w, ("p99",))["p99"] for w in ws) if _num(x)]
    return float(np.median(p)) if p else None


def _model_check(ratios: list[float], factor: float = MODEL_FACTOR) -> tuple:
    """(median, low, high, check) of the per-run ratios run p99 / model p99: ``holds`` when
    the interval of their median (:func:`lob.measure.stats.median_interval`) lies within
    ``factor`` of 1 either way, ``fails: above`` / ``fails: below`` when the whole interval
    lies beyond it, ``cannot tell`` when it reaches across an edge, ``too few runs`` without
    an interval."""
    from lob.measure.stats import median_interval

    mi = median_interval(ratios, of="runs")
    if mi["ci"] is None:
        return mi["median"], None, None, "too few runs"
    lo, hi = mi["ci"]
    check = ("fails: above" if lo > factor else "fails: below" if hi < 1 / factor else
             "holds" if lo >= 1 / factor and hi <= factor else "cannot tell")
    return mi["median"], lo, hi, check


def tail_model(tail: Tail, hic) -> TailModel:
    """Per rate and variant (unpinned runs): the measured p99 (median, lowest, highest run)
    beside the model (an engine working off queues at the runs' drain speed, behind a sender
    that catches up at the variant's unpaced rate, on the pauses recorded under the
    variant's policy) and the model's check (:func:`_model_check` on each run's p99 over
    the model's). ``hic``: the pauses section's recording (its tick rate sets the shortest
    run compared)."""
    hz = next((h.hz for h in hic if h.hz), None)
    min_span = TICK_PERIODS * 1e3 / hz if hz else MIN_SPAN_MS_NO_HZ
    model, rows = {}, []
    rt = tail.runs
    for f in TAIL_FRACTIONS:
        for v in tail.variants:
            pol = tail.realtime_of[v]
            sel = rt[(rt["variant"] == v) & (rt.fraction == f) & (rt.pinning == "unpinned")]
            p99s = [x for x in sel.p99 if _num(x)]
            dr = [x for x in sel.drain_ns if _num(x)]
            drain = float(np.median(dr)) if dr else None
            send_ns = 1e9 / tail.unpaced[v]  # the pipeline's time per command flat out
            model[v, f] = _windows(tail, f, drain, send_ns, pol) if drain else []
            mo = _p99_median(model[v, f])
            med99 = float(np.median(p99s)) if p99s else marker(99)
            p50s = [x for x in sel.p50 if _num(x)]
            ratio, lo, hi, check = (_model_check([x / mo for x in p99s]) if p99s and mo
                                    else (None, None, None, "no model"))
            rows.append({"variant": v, "fraction": f, "runs": len(sel),
                         "count": int(sel["count"].min()) if len(sel) else 0,
                         "shortest run (ms)": float(sel.span_ms.min()) if len(sel) else None,
                         "p50": float(np.median(p50s)) if p50s else marker(50), "p99": med99,
                         "p99 lowest run": min(p99s) if p99s else None,
                         "p99 highest run": max(p99s) if p99s else None,
                         "drain ns/command": drain, "send ns/command": send_ns,
                         "unpaced /s": tail.unpaced[v],
                         "pauses under": "SCHED_FIFO" if pol else "ordinary",
                         "windows": len(model[v, f]), "model p99": mo,
                         "run p99 over model": ratio, "interval low": lo, "interval high": hi,
                         "model check": check})
    return TailModel(model, rows, min_span)


_CHECK_WORDS = {
    "holds": "within a factor of {w} either way: the model holds, the tail is the machine's "
             "pauses worked off at this variant's speeds (its engine's drain and its sender's "
             "catch-up)",
    "fails: above": "the whole interval above {t} the model: the model fails, the transport "
                    "adds to the tail beyond the pauses and its speeds",
    "fails: below": "the whole interval below {p} the model: the model fails the other way, "
                    "the runs met fewer or shorter pauses than the recordings did",
    "cannot tell": "the interval reaches past a factor of {w}: the runs cannot tell whether "
                   "the model holds",
}


def tail_table(tm: TailModel, tail: Tail) -> Conclusion:
    """The tail against the model, per variant and rate. Sentences: each variant's unpaced
    rate (at the first rate); no model to compare, or a run too short to meet the pauses;
    the measured p99 and the model's; and the model's check (:func:`_model_check`): holds,
    fails above, fails below, cannot tell, or too few runs for an interval."""
    c = Conclusion(f"tail against the machine's pauses ({tail.transport}, B=1, "
                   f"{tail.n:,} commands, unpinned, medians over runs and windows)",
                   tm.rows, key=["variant", "fraction"],
                   kinds={"variant": "label", "fraction": "ratio", "runs": "count",
                          "pauses under": "label", "windows": "count",
                          "run p99 over model": "ratio", "interval low": "ratio",
                          "interval high": "ratio", "model check": "label"},
                   note=f"Offered rates: fractions of {fmt(tail.capacity)}/s, the capacity at "
                        f"B=1 of variant {tail.base}, for every variant. Model: an engine "
                        "working off a queue at the drain speed measured in the runs, behind a "
                        "sender that catches up no faster than the pipeline runs flat out (send "
                        "ns/command, from the variant's unpaced rate), on the pauses recorded "
                        "under the variant's scheduling policy between the rounds. Check: the "
                        "interval of the median over runs of run p99 / model p99 (sign test, "
                        f"90% or more); the model holds when it lies within a factor of "
                        f"{fmt(MODEL_FACTOR)} of 1 either way, fails when it lies wholly beyond. "
                        "No floor is drawn: a transport costing nothing, simulated on pauses "
                        "recorded between the runs, is no lower bound for runs that met other "
                        "pauses (it lay above the measured p99 on a busy machine). A run is "
                        f"compared only if it spans at least {fmt(tm.min_span_ms)} ms "
                        f"({TICK_PERIODS} periods of the kernel's tick).")
    first_f = c.rows[0]["fraction"] if c.rows else None
    w = {"w": _word(MODEL_FACTOR), "t": _times(MODEL_FACTOR), "p": _part(MODEL_FACTOR)}
    for r in c.rows:
        k = (r["variant"], r["fraction"])
        at_f = f"{r['variant']} at {c.cell(k, 'fraction')} of capacity:"
        if r["fraction"] == first_f:
            c.say(f"Flat out (unpaced), {r['variant']} ran {c.cell(k, 'unpaced /s')} "
                  "commands/s.")
        if r["model check"] == "no model":
            c.say(f"{at_f} no model to compare: too few samples, or a recording of the pauses "
                  "shorter than one run (raise hiccup_s).")
            continue
        if r["shortest run (ms)"] < tm.min_span_ms:
            c.say(f"{at_f} the shortest run spans {c.cell(k, 'shortest run (ms)')} ms, too "
                  "short to meet the machine's pauses: its p99 is not compared (raise "
                  "tail_scale).")
            continue
        head = (f"{at_f} measured p99 {c.cell(k, 'p99')} ns (runs {c.cell(k, 'p99 lowest run')}"
                f" to {c.cell(k, 'p99 highest run')} ns), the model's {c.cell(k, 'model p99')} "
                f"ns; the median run is {c.cell(k, 'run p99 over model')}x the model")
        if r["model check"] == "too few runs":
            c.say(f"{head}, from {c.cell(k, 'runs')} runs: too few for an interval, so the "
                  "model is not tested.")
            continue
        c.say(f"{head} (interval {c.cell(k, 'interval low')} to {c.cell(k, 'interval high')}), "
              f"{_CHECK_WORDS[r['model check']].format(**w)}.")
    return c


_WORDS = {2.0: ("twice", "half", "two"), 3.0: ("three times", "a third of", "three")}


def _times(x: float) -> str:
    return _WORDS[x][0] if x in _WORDS else f"{fmt(x)} times"


def _part(x: float) -> str:
    return _WORDS[x][1] if x in _WORDS else f"1/{fmt(x)} of"


def _word(x: float) -> str:
    return _WORDS[x][2] if x in _WORDS else fmt(x)


def tail_runs_table(tail: Tail) -> Conclusion:
    """Every run of the tail section: summary.json's ``tail_runs`` (the pinning claim); under
    it the clock's grid measured from the runs' latencies."""
    c = Conclusion("tail_runs", tail.runs,
                   kinds={"variant": "label", "fraction": "ratio", "pinning": "label",
                          "run": "label", "tick_ns": "ratio"})
    ticks = [t for t in tail.runs.get("tick_ns", []) if _num(t)]
    if not ticks:
        c.say("Clock: no grid found in the runs' latencies (tick_ns empty), so no percentile "
              "is marked as under ten ticks.")
        return c
    tick = float(np.median(ticks))
    row = min(range(len(c.rows)), key=lambda i: abs((c.rows[i].get("tick_ns") or 0) - tick))
    c.note = (f"Clock: durations fall on a {fmt(c.rows[row]['tick_ns'])} ns grid (measured "
              "from the samples of each variant's first run, tick_ns); a percentile under "
              f"{CLOCK_FLOOR_TICKS} ticks ({fmt(CLOCK_FLOOR_TICKS * c.rows[row]['tick_ns'])} ns) "
              "enters no claim's ratio.")
    lows = [x for x in tail.runs.get("p50", []) if _num(x)]
    if lows and min(lows) < CLOCK_FLOOR_TICKS * tick:
        c.say("Some runs' p50 lie under ten ticks of the clock: they are known only to a "
              "tick, a tenth of themselves or worse.")
    return c


def plot_tail_vs_model(tail: Tail, tm: TailModel, engine: str):
    """Per rate: each variant's percentiles (thin: each run; thick: the median run) and its
    model (dashed, the median window), on a log scale."""
    from lob.measure.stats import supported

    fig, axes = lp.subplots(1, len(TAIL_FRACTIONS), panel=(4.6, 3.6), squeeze=False)
    names = list(PCTS)
    xs = np.arange(len(names))
    colors = {v: f"C{i}" for i, v in enumerate(tail.variants)}
    for ax, f in zip(axes.flat, TAIL_FRACTIONS, strict=True):
        for v in tail.variants:
            lats = [x for (vv, ff, pin), ls in tail.latencies.items()
                    if (vv, ff, pin) == (v, f, "unpinned") for x in ls]
            if lats:
                ok = [j for j, k in enumerate(names)
                      if supported(100 * PCTS[k], min(len(x) for x in lats))]
                if ok:
                    qs = np.array([[np.quantile(x, PCTS[names[j]]) for j in ok] for x in lats])
                    for row in qs:
                        ax.plot(xs[ok], row, "-", color=colors[v], lw=0.6, alpha=0.35)
                    ax.plot(xs[ok], np.median(qs, axis=0), "-", color=colors[v], lw=2.2,
                            marker="o", ms=3, label=f"{v}, median run")
            ws = tm.model.get((v, f)) or []
            ok = [j for j, k in enumerate(names) if ws and supported(100 * PCTS[k], len(ws[0]))]
            if ok:
                mq = np.array([[np.quantile(w, PCTS[names[j]]) for j in ok] for w in ws])
                ax.plot(xs[ok], np.median(mq, axis=0), "--", color=colors[v], lw=1.5,
                        label=f"{v}, model (median window)")
        ax.set(xticks=xs, xticklabels=[n.removeprefix("p") for n in names],
               xlabel="percentile", ylabel="latency (ns)", title=f"{f:.0%} of capacity")
        ax.set_yscale("log")
        lp.value_axis(ax, axis="y")
    fig.suptitle(f"{engine}, {tail.transport} transport, B=1, unpinned: the variants against "
                 "the model on this machine's pauses")
    lp.legend_outside(axes.flat[-1])
    return fig


_PIN_WORDS = {
    "within noise": "inside the A/A band: pinning changes the p99 by no more than the same "
                    "runs unpinned twice do (within noise)",
    "faster": "wholly below the A/A band: pinning lowers the p99 beyond noise",
    "slower": "wholly above the A/A band: pinning raises the p99 beyond noise",
    "inconclusive": "reaching past an edge of the A/A band: the runs cannot tell a pinning "
                    "effect from noise",
}


def pinning_table(tail: Tail, cpu_count: int | None = None) -> Conclusion:
    """Per variant: the median of the per-round ratios p99 pinned / p99 unpinned (rates below
    capacity) with its interval, beside the A/A control (unpinned (A/A) / unpinned of the
    same rounds, :func:`lob.measure.stats.aa_band`) and the call
    (:func:`lob.measure.stats.change_beyond_aa`): the s003_pinning claim's figures, part by
    part (:func:`pinning_claim`). Sentences: no pinned runs; per
    variant no interval, no A/A band, or the call."""
    from lob.measure.stats import change_beyond_aa

    m = claims({"tail_runs": tail.runs.to_dict("records")}, cpu_count).get("s003_pinning")
    parts = (m.get("parts") or {tail.variants[0]: m}) if m else {}
    rows = []
    for v, pm in parts.items():
        ci, aa = pm.get("ci") or [None, None], pm.get("aa") or {}
        rows.append({"variant": v, "pairs": pm.get("runs"), "pinned / unpinned p99": pm["value"],
                     "interval low": ci[0], "interval high": ci[1],
                     "A/A pairs": aa.get("n"), "A/A band low": aa.get("low"),
                     "A/A band high": aa.get("high"),
                     "call": change_beyond_aa(ci[0], ci[1], aa) if aa else "inconclusive"})
    c = Conclusion(f"pinning per variant ({tail.transport}, B=1, p99 pinned / unpinned, round "
                   "by round, against the A/A control)", rows, key="variant",
                   kinds={"variant": "label", "pairs": "count", "A/A pairs": "count",
                          "pinned / unpinned p99": "ratio", "interval low": "ratio",
                          "interval high": "ratio", "A/A band low": "ratio",
                          "A/A band high": "ratio", "call": "label"},
                   note="pairs: rounds x rates with a pinned and an unpinned run. Interval: "
                        "the sign test's for the median ratio (90% or more; none below 5 "
                        "pairs). A/A band: 95% of the ratios of a second unpinned run over the "
                        "first in the same rounds lie inside it (none below 5).")
    if not rows:
        c.say("No pinned runs (pin_compare off, or one CPU): pinning is not compared.")
    for r in c.rows:
        v = r["variant"]
        head = (f"{v}: pinned / unpinned p99 {c.cell(v, 'pinned / unpinned p99')} over "
                f"{c.cell(v, 'pairs')} pairs")
        if not _num(r["interval low"]):
            c.say(f"{head}; too few pairs for an interval, so no statement on pinning.")
        elif not _num(r["A/A band low"]):
            c.say(f"{head} (interval {c.cell(v, 'interval low')} to "
                  f"{c.cell(v, 'interval high')}); no A/A band (fewer than 5 A/A pairs), so "
                  "the difference is not told apart from noise.")
        else:
            c.say(f"{head} (interval {c.cell(v, 'interval low')} to "
                  f"{c.cell(v, 'interval high')}), A/A band {c.cell(v, 'A/A band low')} to "
                  f"{c.cell(v, 'A/A band high')}: {_PIN_WORDS[r['call']]}.")
    return c


# --- stalls and the lineage's steps ----------------------------------------------------------

def poisson_upper(mu: float, q: float = STALL_COVERAGE) -> int:
    """The smallest k with P(Poisson(mu) <= k) >= q."""
    if mu < 0 or not math.isfinite(mu):
        raise ValueError(f"mu must be a finite number >= 0, got {mu!r}")
    k, p = 0, math.exp(-mu)
    c = p
    while c < q:
        k += 1
        p *= mu / k
        c += p
    return k


def stall_rates(tail: Tail, stall_us: float) -> dict[bool, float]:
    """Per policy: pauses over ``stall_us`` per second, on either CPU, in the recordings
    between the rounds."""
    over = int(stall_us * 1e3)
    out = {}
    for rt, rs in tail.recordings.items():
        secs = sum(h[0].seconds for h in rs)
        out[rt] = sum(x.count(over) for h in rs for x in h) / secs if secs else 0.0
    return out


def stalls_table(tail: Tail, stall_us: float) -> Conclusion:
    """Per variant: runs with a publish gap over ``stall_us`` against what the machine's
    recorded pauses predict for runs of that length (expected, and the most at
    :data:`STALL_COVERAGE`). Sentences: none stalled; the pauses explain them; more than
    the pauses explain (the variant stalls)."""
    rates = stall_rates(tail, stall_us)
    rows = []
    for v in tail.variants:
        sel = tail.runs[tail.runs["variant"] == v]
        rate = rates.get(tail.realtime_of[v], 0.0)
        exp = float(sum(1 - math.exp(-rate * s / 1e3) for s in sel.span_ms))
        rows.append({"variant": v, "runs": len(sel), "stalled runs": int(sel.stalled.sum()),
                     "pauses over it per s": rate, "expected": exp,
                     "at most (99%)": poisson_upper(exp)})
    c = Conclusion(f"runs with a publish gap over {fmt(stall_us)} µs ({tail.transport}, every "
                   "rate and pinning)", rows, key="variant",
                   kinds={"variant": "label", "runs": "count", "stalled runs": "count",
                          "at most (99%)": "count"},
                   note=f"A stall: a publish gap over {fmt(stall_us)} µs. Pauses over it per "
                        "s: on either CPU, in the recordings between the rounds under the "
                        "variant's scheduling policy; expected = the sum over runs of "
                        "1 - exp(-rate x span).")
    for r in c.rows:
        v = r["variant"]
        if r["stalled runs"] == 0:
            c.say(f"{v}: none of {c.cell(v, 'runs')} runs had a publish gap over "
                  f"{fmt(stall_us)} µs.")
            continue
        s = (f"{v}: {c.cell(v, 'stalled runs')} of {c.cell(v, 'runs')} runs had a publish gap "
             f"over {fmt(stall_us)} µs, against {c.cell(v, 'expected')} expected from the "
             "machine's pauses")
        if r["stalled runs"] <= r["at most (99%)"]:
            c.say(s + ": the machine's pauses explain them.")
        else:
            c.say(s + f" (at most {c.cell(v, 'at most (99%)')} at 99%): more than the "
                  "machine's pauses explain, so the variant itself stalls.")
    return c


_STEP_WORDS = {
    "within noise": "within {band}% either way, so the step changes the {q} by nothing that "
                    "matters at these rates",
    "faster": "the step lowers the {q} at these rates, by more than {band}%",
    "slower": "the step raises the {q} at these rates, by more than {band}%",
    "inconclusive": "the interval reaches across 1 or across an edge of the {band}% band, so "
                    "the runs cannot tell whether the step changes the {q} by more than "
                    "{band}%",
}


def steps_table(tail: Tail, same_band: float = SAME_BAND) -> Conclusion:
    """Each step of the lineage, run against run (same round, rate and pinning): the median
    of the per-pair ratios after / before of p50 and p99 with its interval
    (:func:`lob.measure.stats.change_of_ratios`, threshold ``same_band``), over all pairs and
    over the pairs in which neither run stalled. Sentences: too few pairs for an interval,
    or the call (within noise / faster / slower / inconclusive)."""
    idx = ["run", "fraction", "pinning"]
    runs = tail.runs
    rows = []
    for before, after in zip(tail.variants, tail.variants[1:], strict=False):
        two = runs[runs["variant"].isin([before, after])]
        calm = two[~two.groupby(idx).stalled.transform("any")] if len(two) else two
        for which, sel in (("all pairs", two), ("pairs without a stall", calm)):
            sel = sel.assign(**{q: pd.to_numeric(sel[q], errors="coerce")
                                for q in ("p50", "p99")})
            paired = sel.pivot_table(index=idx, columns="variant", values=["p50", "p99"],
                                     aggfunc="first") if len(sel) else None
            for q in ("p50", "p99"):
                if paired is None or q not in paired.columns.get_level_values(0):
                    continue  # too few samples for this percentile in every run
                x = paired[q].reindex(columns=[before, after]).dropna()
                ratios = list(x[after] / x[before])
                ch = change_of_ratios(ratios, threshold=same_band) if ratios else None
                ci = ch["ci"] if ch else None
                rows.append({"step": f"{before} -> {after}", "pairs": which, "percentile": q,
                             "count": len(ratios),
                             "median before": float(np.median(x[before])) if ratios else None,
                             "median after": float(np.median(x[after])) if ratios else None,
                             "after over before": ch["median"] if ch else None,
                             "interval low": ci[0] if ci else None,
                             "interval high": ci[1] if ci else None,
                             "call": ch["change"] if ch else "inconclusive"})
    band = fmt(round(100 * same_band))
    c = Conclusion(f"each step of the lineage, run against run ({tail.transport}, B=1, "
                   f"{tail.n:,} commands, every rate and pinning)", rows,
                   key=["step", "pairs", "percentile"],
                   kinds={"step": "label", "pairs": "label", "percentile": "label",
                          "count": "count", "after over before": "ratio",
                          "interval low": "ratio", "interval high": "ratio", "call": "label"},
                   note="count: paired runs. Interval: the sign test's interval for the median "
                        "ratio, at 90% coverage or more (none below 5 pairs). Call "
                        "(lob.measure.stats.change): a step whose whole interval lies within "
                        f"{band}% of 1 changes nothing that matters; faster / slower: the whole "
                        f"interval beyond {band}% below / above 1.")
    for r in c.rows:
        k = (r["step"], r["pairs"], r["percentile"])
        q = r["percentile"]
        n = f"{c.cell(k, 'count')} pair" + ("s" if r["count"] != 1 else "")
        head = (f"{r['step']}, {q} ({r['pairs']}): median ratio "
                f"{c.cell(k, 'after over before')} over {n}")
        if not _num(r["interval low"]):
            c.say(f"{head}; too few pairs for an interval, so no statement on the difference.")
            continue
        iv = f" (interval {c.cell(k, 'interval low')} to {c.cell(k, 'interval high')})"
        c.say(f"{head}{iv}: {_STEP_WORDS[r['call']].format(band=band, q=q)}.")
    return c


# --- the seed's claims -----------------------------------------------------------------------

def _measured_saturation(r: dict) -> bool | None:
    """Did the row's own run fail to keep up? ``keeps_up`` when recorded, else achieved below
    99% of offered; None when neither was measured (an offered rate above capacity is not a
    measurement of saturation)."""
    if r.get("keeps_up") is not None:
        return not bool(r["keeps_up"])
    if _num(r.get("achieved_rate")) and _num(r.get("offered_rate")):
        return r["achieved_rate"] < 0.99 * r["offered_rate"]
    return None


def capacity_claim(tables: dict) -> dict | None:
    """``s003_pipeline_capacity``: batch 1's capacity (the compiled transport's when it ran)."""
    cap = [r for r in tables.get("capacity") or [] if r.get("batch") == 1]
    key = next((k for k in ("capacity", "capacity_compiled") if cap and cap[0].get(k)), None)
    return measurement(cap[0][key], detail=f"{key}, commands/s at batch 1") if key else None


def _compiled_rows(tables: dict) -> list[dict]:
    """The sweep's rows, only the compiled transport's when it ran (the seed's is compiled)."""
    sweep = tables.get("sweep") or []
    if any(r.get("transport") == "compiled" for r in sweep):
        return [r for r in sweep if r.get("transport") == "compiled"]
    return sweep


def _saturation_explain(sweep: list[dict], above: list[dict]) -> dict:
    """Why the rows above capacity fell behind: p99 above / below capacity, latency growth over
    the run, achieved / offered (medians; each where measured)."""
    explain = {}
    below = [r.get("lat_p99") for r in sweep if r.get("pinning", "unpinned") == "unpinned"
             and (r.get("fraction") or 0) < 1 and _num(r.get("lat_p99"))]
    over = [r.get("lat_p99") for r in above if _num(r.get("lat_p99"))]
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
    return explain


def saturation_claim(tables: dict) -> dict | None:
    """``s003_pipeline_saturation``: the share of rows offered above capacity (every batch
    and pinning of the compiled transport when it ran; rows at fixed multiples of a capacity
    searched once, before them: :func:`measure_sweep`) that were *measured* not to keep up
    (``keeps_up`` false, or achieved below 99% of offered), with its Clopper-Pearson
    interval and the growth of p99 and of latency over the run as the explanation. A row
    above capacity is one offered above the top of the capacity's bracket when the table
    says (``above_capacity``), else one at a fraction above 1; none of a batch whose search
    found no capacity (``capacity_found``, or the capacity table's ``all_found``, false)."""
    sweep = _compiled_rows(tables)
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
    if not above:
        return None
    k = sum(_measured_saturation(r) for r in above)
    n = len(above)
    return measurement(
        k / n, diagnostics={"count": n}, explain=_saturation_explain(sweep, above),
        ci=tuple(share_interval(k, n)), ci_what=f"95% Clopper-Pearson interval of {k} of {n} rows",
        detail=f"{k} of {n} rows offered above capacity (above the top of its bracket; "
               "every batch and pinning) measured not to keep up (achieved rate or backlog)")


def _pinning_runs(tables: dict) -> tuple[list[tuple], list[float]]:
    """(fraction, pinning, round key, p99) per batch-1 run, and the runs' clock grids: the
    tail section's repeated runs when recorded, else the sweep's batch-1 rows (the k-th row
    of a rate and pinning in round k)."""
    tail = [r for r in tables.get("tail_runs") or [] if _num(r.get("p99"))]
    runs = [(r.get("fraction"), r.get("pinning") or "unpinned",
             (r.get("variant", r.get("mode")), r.get("run")), r["p99"]) for r in tail]
    ticks = [r["tick_ns"] for r in tail if _num(r.get("tick_ns"))]
    if not runs:
        seen: dict = {}
        for r in _compiled_rows(tables):
            if r.get("batch") == 1 and _num(r.get("lat_p99")):
                key = (r.get("fraction"), r.get("pinning") or "unpinned")
                seen[key] = seen.get(key, 0) + 1
                runs.append((*key, seen[key], r["lat_p99"]))
    return runs, ticks


def _pinning_of(runs: list[tuple], ticks: list[float], cpu_count: int | None) -> dict | None:
    """The median over rounds and rates below capacity of p99 pinned / unpinned (a round
    runs both pinnings at one rate), its interval from 5 ratios on, and its A/A control:
    the band of unpinned (A/A) / unpinned of the same rounds."""
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
    aa = aa_band([x[AA_PINNING] / x["unpinned"] for x in rounds.values()
                  if AA_PINNING in x and "unpinned" in x])
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


def pinning_claim(tables: dict, cpu_count: int | None) -> dict | None:
    """``s003_pinning`` (:func:`_pinning_of`); one part per transport variant, each with its
    own interval and A/A band, when the runs name variants (never pooled)."""
    runs, ticks = _pinning_runs(tables)
    whole = _pinning_of(runs, ticks, cpu_count)
    variants = sorted({k[0] for _, _, k, _ in runs if isinstance(k, tuple) and k[0]}, key=str)
    if not whole or len(variants) < 2:
        return whole
    parts = {str(v): p for v in variants
             if (p := _pinning_of([r for r in runs if r[2][0] == v], ticks, cpu_count))}
    return measurement(
        whole["value"], diagnostics={**whole["diagnostics"],
                                     "repeats": min(p["diagnostics"]["repeats"]
                                                    for p in parts.values())},
        explain=whole["explain"], parts=parts, aa=whole.get("aa"), runs=whole["runs"],
        clock=whole.get("clock"),
        detail=f"per transport variant ({', '.join(parts)}), each its own interval and "
               f"A/A band; pooled median {fmt(whole['value'])} shown only")


def claims(tables, cpu_count: int | None = None, *, here: bool = True) -> dict[str, dict]:
    """Seed 003's pipeline claims from the study's tables (Conclusions, or name -> records as
    in summary.json): ``s003_pipeline_capacity`` (:func:`capacity_claim`),
    ``s003_pipeline_saturation`` (:func:`saturation_claim`) and ``s003_pinning``
    (:func:`pinning_claim`); a claim whose rows are missing is left out.

    ``tables["capacity"]``: rows with ``batch`` and ``capacity`` (or ``capacity_compiled``);
    ``tables["sweep"]``: rows with ``batch``, ``pinning``, ``fraction``, ``keeps_up`` (or
    ``achieved_rate`` and ``offered_rate``), ``lat_p99``, optionally ``above_capacity``,
    ``lat_growth`` and ``transport``; ``tables["tail_runs"]`` (optional): the repeated
    batch-1 runs (``fraction``, ``pinning`` incl. :data:`AA_PINNING`, ``run``, ``p99``,
    optionally ``tick_ns`` and ``variant`` (or ``mode``)), used for the pinning claim
    instead of the sweep's rows when present. ``cpu_count``: this machine's when None and
    ``here`` (a run read back from its summary passes its own, or None)."""
    if not isinstance(tables, dict):
        tables = {c.name: c.plain_rows() for c in tables}
    if cpu_count is None and here:
        cpu_count = os.cpu_count()
    found = {"s003_pipeline_capacity": capacity_claim(tables),
             "s003_pipeline_saturation": saturation_claim(tables),
             "s003_pinning": pinning_claim(tables, cpu_count)}
    return {k: m for k, m in found.items() if m is not None}


SHAPE = Shape(parameters=Parameters,
              measure=(measure_service, measure_sweep, measure_engines, measure_scenarios,
                       measure_pauses, measure_tail),
              tables=(service_table, sweep_table, saturation_table, capacity_table,
                      at_fraction_table, at_fraction_pivot, engines_table, scenarios_table,
                      pauses_raw, pauses_table, tail_table, tail_runs_table, pinning_table,
                      stalls_table, steps_table),
              claims=claims, plots=(plot_latency_by_rate, plot_capacity, plot_tail_vs_model))

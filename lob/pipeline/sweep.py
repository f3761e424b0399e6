"""Rate x batch sweeps of the pipeline, capacity, closed-loop service time, and result files.

Capacity (per batch size B): the highest offered rate at which a run *keeps up*: its achieved
completion rate (commands / (last publish - first due)) is >= 99% of the offered rate and the
backlog left when the last command falls due is at most max(2 B, 1% of the commands). It is
found by an unpaced run (every command due at once: its achieved rate is taken as an upper
bound), then offered rates from 80% of it down by halves until one keeps up, then a
bisection between the last rate that kept up and the first that did not; the bracket (the
resolution) is reported. In a :func:`sweep`, a rate falls behind only when three runs at it in
a row do (one run keeping up proves the rate sustainable; one falling behind may be another
process's time slice). A row of a sweep is ``saturated`` when it was measured not to keep up
(the same test, on that row's own run), whatever its offered rate; ``above_capacity`` says
whether its offered rate exceeds the top of the capacity's bracket (``capacity_high``: the
lowest offered rate the search saw fall behind), so a row inside the search's resolution is
not taken for one above capacity. ``lat_growth`` (every row): the median latency of the
run's last tenth of commands over its first tenth's (a run that falls behind grows its
queue, and its latency with it).

Every function here runs its rows on one :class:`~lob.pipeline.session.PipelineSession` (one
sender/engine pair for the whole sweep, the book reset between rows): pass ``session=`` to
share one across calls, else one is started with the session keywords in ``kw``
(``transport``, ``mode``, ``layout``, ``realtime``, ``gc_enabled``, ``ring_capacity``,
``max_take``, ``timeout_s``, ``liveness_s``) and closed at the end.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
import warnings
from pathlib import Path

import numpy as np

from lob.measure.stats import supported
from lob.pipeline.run import PipelineRun, make_step_runner
from lob.semantics import OUTCOME_DTYPE, BookConfig, as_commands

__all__ = ["default_engine", "summarize", "service_time", "find_capacity", "sweep", "save_rows",
           "open_loop_scenarios", "SCENARIOS"]

_SESSION_KW = ("transport", "mode", "layout", "realtime", "gc_enabled", "ring_capacity",
               "max_take", "timeout_s", "liveness_s", "check_ms", "spin_us")
# the eight orderbook-rs HDR bench scenarios (seed 000)
SCENARIOS = ("add_only", "cancel_only", "aggressive_walk", "notional_walk", "mixed_70_20_10",
             "thin_book_sweep", "mass_cancel_burst", "stp_sweep")


@contextlib.contextmanager
def _session(engine: str, session, kw: dict):
    """(session, row keywords): the given session, or a new one from ``kw``'s session keys."""
    from lob.pipeline.session import PipelineSession

    row_kw = {k: v for k, v in kw.items() if k not in _SESSION_KW}
    if session is not None:
        yield session, row_kw
        return
    with PipelineSession(engine, config=kw.get("config"),
                         **{k: v for k, v in kw.items() if k in _SESSION_KW}) as s:
        yield s, row_kw


def default_engine() -> str:
    """The compiled ``v2@numba`` when registered, else the pure-Python ``v2``."""
    from lob.engines.registry import engine_names

    return "v2@numba" if "v2@numba" in engine_names() else "v2"


def summarize(run: PipelineRun) -> dict:
    """One result row: rate, batch, achieved rate, keeps-up, percentiles (ns), encoded HDR."""
    from lob.measure.latency import LatencyStats, histogram_from

    h, clamped = histogram_from(run.latency_ns)
    st = LatencyStats.of(h, clamped)
    return {"engine": run.engine, "transport": run.transport, "mode": run.mode,
            "layout": run.layout, "realtime": run.realtime, "batch": run.batch,
            "offered_rate": run.rate, "achieved_rate": run.achieved_rate,
            "keeps_up": run.keeps_up(), "backlog_end": run.backlog_end, "n": run.n,
            "pinned": run.pin is not None, "pin": list(run.pin) if run.pin else None,
            "gc_enabled": run.gc_enabled,
            "late_batches_1ms": run.extra.get("sender", {}).get("late_batches_1ms"),
            **{f"lat_{k}": v for k, v in st.to_dict().items()},
            "lat_growth": _growth(run.latency_ns), "encoded": h.encode().decode()}


def _growth(lat: np.ndarray) -> float | None:
    """Median latency of the last tenth of the commands (due order) over the first tenth's;
    None with fewer than 20 commands or a first tenth at 0 ns."""
    k = len(lat) // 10
    if k < 2:
        return None
    first = float(np.median(lat[:k]))
    return float(np.median(lat[-k:])) / first if first > 0 else None


def service_time(engine: str, commands: np.ndarray, *, config: BookConfig | None = None,
                 batch: int = 1, mode: str = "chunk", repeat: int = 3) -> dict:
    """Closed-loop cost per command of the engine path the pipeline uses, in one process.

    The same executor as the engine process, fed chunks of ``batch`` with no ring and no
    pacing; the best of ``repeat`` fresh-engine passes. ``1e9 / ns_per_op`` bounds capacity.
    """
    from lob.engines.registry import get_engine
    from lob.pipeline.run import warmup_commands

    cmds = as_commands(commands)
    config = config or BookConfig()
    n = len(cmds)
    out = np.zeros(n, OUTCOME_DTYPE)
    done = np.zeros(n, np.int64)
    wc = warmup_commands(config)
    make_step_runner(get_engine(engine, config), mode)(wc, np.zeros(len(wc), OUTCOME_DTYPE),
                                                    np.zeros(len(wc), np.int64))
    best = math.inf
    for _ in range(repeat):
        run = make_step_runner(get_engine(engine, config), mode)
        t0 = time.perf_counter_ns()
        for k in range(0, n, batch):
            run(cmds[k:k + batch], out[k:k + batch], done[k:k + batch])
        best = min(best, (time.perf_counter_ns() - t0) / n)
    return {"engine": engine, "mode": mode, "batch": batch, "ns_per_op": best,
            "rate_bound": 1e9 / best}


def find_capacity(engine: str, commands: np.ndarray, *, batch: int, steps: int = 4,
                  session=None, max_run_s: float = 2.0, confirm: int = 1, floor: float = 0.0,
                  **kw) -> dict:
    """Capacity at one batch size (see the module docstring); ``kw`` go to the session and
    its rows (``pin``, ``config``, ``warmup``, ``lead_s``).

    Returns the capacity, the unpaced rate, the bisection bracket [ok, saturated] and the
    runs made. ``steps`` bisection runs set the resolution (bracket width / 2**steps). A rate
    is taken as not kept up only when ``confirm`` runs at it in a row all fall behind: a run
    cannot keep up above the pipeline's capacity, but one can fall behind below it when
    another process takes a time slice (a short run, 20k commands at a few M/s, lasts a few
    ms: one slice), and a search that believed one such run could measure a capacity far too
    low on a shared 2-core machine (docs/decisions/capacity-confirm-runs.md).
    :func:`sweep` (whose rows above capacity judge saturation) confirms with 3 runs; a search
    that only sets rates below capacity (the scenarios, the tail) keeps the default 1: every
    row costs a book reset and a lead time. When
    no rate keeps up before the next halving would make a run longer than ``max_run_s`` (a
    machine too busy to pace: another process's time slice at the end of a run is a backlog),
    it warns and returns the best achieved rate with ``found=False``. ``floor``: a rate
    already seen to keep up at this batch (a proof that capacity is at least that); the
    bisection then starts from [floor, the unpaced rate] (:func:`sweep` searches again from
    one when a row offered above the first search's bracket kept up).
    """
    if not isinstance(confirm, int) or confirm < 1:
        raise ValueError(f"confirm must be an integer >= 1, got {confirm!r}")
    if not isinstance(floor, int | float) or not floor >= 0 or math.isinf(floor):
        raise ValueError(f"floor must be a finite rate >= 0, got {floor!r}")
    with _session(engine, session, kw) as (s, row_kw):
        def run(rate):
            for k in range(confirm):
                r = s.run(commands, rate=rate, batch=batch, **row_kw)
                if k + 1 < confirm and not r.keeps_up():
                    tried.append(r)  # a fall behind not yet confirmed: recorded, run again
                    continue
                return r

        tried: list = []
        unpaced = s.run(commands, rate=math.inf, batch=batch, **row_kw)
        top = unpaced.achieved_rate  # taken as not kept up: a paced run cannot beat unpaced
        lo, hi, rate = 0.0, top, 0.8 * top
        if floor > 0:  # known to keep up: bisect above it (the unpaced run can read low too)
            lo, hi = floor, (top if top > floor else 2 * floor)
        for _ in range(0 if lo else 10):  # down by halves until a rate keeps up
            if tried and len(commands) / rate > max_run_s:
                break  # the next run would be too long: report what was found
            r = run(rate)
            tried.append(r)
            if r.keeps_up():
                lo = rate
                break
            hi, rate = rate, rate / 2
        found = lo > 0.0
        if not found:  # e.g. a machine too busy for any run to keep up: report, do not fail
            lo = max(r.achieved_rate for r in tried)
            warnings.warn(f"batch {batch}: no offered rate down to {hi:,.0f}/s kept up; "
                          f"capacity taken as the best achieved rate {lo:,.0f}/s",
                          RuntimeWarning, stacklevel=2)
        for _ in range(steps if found else 0):
            mid = (lo + hi) / 2
            r = run(mid)
            tried.append(r)
            if r.keeps_up():
                lo = mid
            else:
                hi = mid
    return {"batch": batch, "capacity": lo, "unpaced_rate": top, "bracket": (lo, hi),
            "found": found, "runs": [summarize(x) for x in [unpaced, *tried]]}


def sweep(engine: str, commands: np.ndarray, *, batches=(1, 8, 64), fractions=(0.25, 0.5, 0.9,
          1.1, 1.5), steps: int = 3, pins=(None,), session=None, confirm: int = 3,
          research: bool = True, **kw):
    """Capacity per batch size, then runs at ``fractions`` x capacity -> (rows, capacities).

    ``pins`` lists CPU pinnings to compare (None = unpinned, or (sender_cpu, engine_cpu));
    capacity is found unpinned-or-first-pin (a rate too fast only when ``confirm`` runs in a
    row fall behind: :func:`find_capacity`), then every pinning runs the same offered rates.
    Each row carries ``fraction`` (of capacity), ``capacity_high`` (the top of the capacity's
    bracket), ``above_capacity`` (offered > that top) and ``saturated`` (measured: the row's
    run did not keep up). All
    rows run on one session (one process pair).

    With ``research`` (default), a row offered above the top of the bracket that kept up
    proves the search under-measured (no run keeps up above capacity: a slow stretch of the
    machine made every confirming run fall behind): the batch's capacity is searched once
    more from that rate up (``floor``, :func:`find_capacity`) and its rows run again at the
    fractions of the new figure; the capacity record keeps ``first_capacity``, ``searches``
    (1 or 2) and ``superseded_rows`` (the first rows, not returned). The second rows stand
    as measured, whatever they show: the claim they judge can still fail.
    """
    kw.pop("pin", None)
    rows, caps = [], []
    with _session(engine, session, kw) as (s, row_kw):
        def batch_rows(b, cap):
            out = []
            for pin in pins:
                for f in fractions:
                    run = s.run(commands, rate=f * cap["capacity"], batch=b, pin=pin, **row_kw)
                    row = summarize(run)
                    top = cap["bracket"][1]
                    row.update(fraction=f, capacity=cap["capacity"], capacity_high=top,
                               capacity_found=cap["found"],
                               above_capacity=bool(f * cap["capacity"] > top),
                               saturated=not row["keeps_up"])
                    out.append(row)
            return out

        for b in batches:
            search = dict(batch=b, steps=steps, pin=pins[0], session=s, confirm=confirm)
            cap = find_capacity(engine, commands, **search, **row_kw)
            got = batch_rows(b, cap)
            first, superseded = cap["capacity"], 0
            kept = [r["offered_rate"] for r in got if r["above_capacity"] and r["keeps_up"]]
            if research and kept and cap["found"]:
                cap = find_capacity(engine, commands, floor=max(kept), **search, **row_kw)
                superseded, got = len(got), batch_rows(b, cap)
            caps.append({"transport": s.transport, "first_capacity": first,
                         "searches": 2 if superseded else 1, "superseded_rows": superseded,
                         **{k: v for k, v in cap.items() if k != "runs"}})
            rows += got
    return rows, caps


def open_loop_scenarios(engine: str, scenarios=SCENARIOS, *, scale: float = 0.01,
                        fractions=(0.5, 0.9), batch: int = 1, steps: int = 2, session=None,
                        **kw) -> list[dict]:
    """Open-loop latency of each orderbook-rs scenario at ``fractions`` of *its own* capacity,
    beside its closed-loop per-op figures, on one session (the book config per row).

    One row per (scenario, fraction): capacity, closed-loop p50/p99/p99.9 (the engine's
    per-op latency, :func:`lob.measure.latency.capture_latency`), open-loop p50/p99/p99.9
    and the timed sample count. A percentile the sample count does not support
    (:func:`supported`) is NaN, and ``*_ok`` says so.
    """
    from lob.engines.registry import get_engine
    from lob.measure.latency import capture_latency
    from lob.workloads import build

    qs = {"p50": 0.5, "p99": 0.99, "p99_9": 0.999}
    rows = []
    with _session(engine, session, kw) as (s, row_kw):
        row_kw.pop("config", None)
        for name in scenarios:
            wl = build(name, scale=scale)
            cmds, cfg = wl.commands, wl.config
            cl = capture_latency(get_engine(engine, cfg), cmds).durations_ns
            cap = find_capacity(engine, cmds, batch=batch, steps=steps, session=s, config=cfg,
                                **row_kw)
            for f in fractions:
                run = s.run(cmds, rate=f * cap["capacity"], batch=batch, config=cfg, **row_kw)
                lat = run.latency_ns
                row = {"scenario": name, "fraction": f, "capacity": cap["capacity"],
                       "capacity_found": cap["found"],
                       "n": run.n, "samples": int(len(lat)), "keeps_up": run.keeps_up(),
                       "achieved_rate": run.achieved_rate}
                for k, q in qs.items():
                    ok_open, ok_closed = supported(100 * q, len(lat)), supported(100 * q, len(cl))
                    row[f"closed_{k}"] = float(np.quantile(cl, q)) if ok_closed else math.nan
                    row[f"open_{k}"] = float(np.quantile(lat, q)) if ok_open else math.nan
                    row[f"{k}_ok"] = ok_open
                rows.append(row)
    return rows


def save_rows(rows: list[dict], out_dir: str | os.PathLike, *, name: str = "pipeline",
              params: dict | None = None) -> Path:
    """One .hgrm per row and one JSON result (rows + run conditions) in ``out_dir``."""
    from lob.measure.conditions import run_conditions
    from lob.measure.hgrm import decode, write_hgrm
    from lob.measure.results import write_result

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for r in rows:
        pin = "pinned" if r["pinned"] else "unpinned"
        tr = r.get("transport", "python")
        stem = f"{name}_{r['engine']}_{tr}_b{r['batch']}_r{r['offered_rate']:.0f}_{pin}"
        r["hgrm"] = write_hgrm(decode(r["encoded"]), out / f"{stem}.hgrm".replace("@", "-")).name
    return write_result({"kind": "pipeline_latency", "rows": rows,
                         "conditions": run_conditions(params=params)}, out / f"{name}.json")

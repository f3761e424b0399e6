"""Rate x batch sweeps of the pipeline, capacity, closed-loop service time, and result files.

Capacity (per batch size B): the highest offered rate at which a run *keeps up*: its achieved
completion rate (commands / (last publish - first due)) is >= 99% of the offered rate and the
backlog left when the last command falls due is at most max(2 B, 1% of the commands). It is
found by an unpaced run (every command due at once: its achieved rate is taken as an upper
bound), then offered rates from 80% of it down by halves until one keeps up, then a
bisection between the last rate that kept up and the first that did not; the bracket (the
resolution) is reported. Rows of a sweep whose offered rate exceeds that capacity are marked
``saturated``.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import numpy as np

from lob.pipeline.run import PipelineRun, make_step_runner, run_pipeline
from lob.semantics import OUTCOME_DTYPE, BookConfig, as_commands

__all__ = ["default_engine", "summarize", "service_time", "find_capacity", "sweep", "save_rows"]


def default_engine() -> str:
    """The compiled ``v2@numba`` when registered, else the pure-Python ``v2``."""
    from lob.engines.registry import engine_names

    return "v2@numba" if "v2@numba" in engine_names() else "v2"


def summarize(run: PipelineRun) -> dict:
    """One result row: rate, batch, achieved rate, keeps-up, percentiles (ns), encoded HDR."""
    from lob.measure.latency import LatencyStats, histogram_from

    h, clamped = histogram_from(run.latency_ns)
    st = LatencyStats.of(h, clamped)
    return {"engine": run.engine, "mode": run.mode, "batch": run.batch,
            "offered_rate": run.rate, "achieved_rate": run.achieved_rate,
            "keeps_up": run.keeps_up(), "backlog_end": run.backlog_end, "n": run.n,
            "pinned": run.pin is not None, "pin": list(run.pin) if run.pin else None,
            "gc_enabled": run.gc_enabled,
            "late_batches_1ms": run.extra.get("sender", {}).get("late_batches_1ms"),
            **{f"lat_{k}": v for k, v in st.to_dict().items()},
            "encoded": h.encode().decode()}


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
                  **kw) -> dict:
    """Capacity at one batch size (see the module docstring); ``kw`` go to run_pipeline.

    Returns the capacity, the unpaced rate, the bisection bracket [ok, saturated] and the
    runs made. ``steps`` bisection runs set the resolution (bracket width / 2**steps).
    """
    unpaced = run_pipeline(engine, commands, rate=math.inf, batch=batch, **kw)
    top = unpaced.achieved_rate  # taken as not kept up: a paced run cannot beat unpaced
    lo, hi, rate, tried = 0.0, top, 0.8 * top, []
    for _ in range(10):  # down by halves until a rate keeps up
        r = run_pipeline(engine, commands, rate=rate, batch=batch, **kw)
        tried.append(r)
        if r.keeps_up():
            lo = rate
            break
        hi, rate = rate, rate / 2
    if lo == 0.0:
        raise RuntimeError(f"batch {batch}: no offered rate down to {hi:,.0f}/s kept up")
    for _ in range(steps):
        mid = (lo + hi) / 2
        r = run_pipeline(engine, commands, rate=mid, batch=batch, **kw)
        tried.append(r)
        if r.keeps_up():
            lo = mid
        else:
            hi = mid
    return {"batch": batch, "capacity": lo, "unpaced_rate": top, "bracket": (lo, hi),
            "runs": [summarize(x) for x in [unpaced, *tried]]}


def sweep(engine: str, commands: np.ndarray, *, batches=(1, 8, 64), fractions=(0.25, 0.5, 0.9,
          1.1, 1.5), steps: int = 3, pins=(None,), **kw):
    """Capacity per batch size, then runs at ``fractions`` x capacity -> (rows, capacities).

    ``pins`` lists CPU pinnings to compare (None = unpinned, or (sender_cpu, engine_cpu));
    capacity is found unpinned-or-first-pin, then every pinning runs the same offered rates.
    Each row carries ``fraction`` (of capacity) and ``saturated`` (offered > capacity).
    """
    rows, caps = [], []
    for b in batches:
        cap = find_capacity(engine, commands, batch=b, steps=steps, pin=pins[0], **kw)
        caps.append({k: v for k, v in cap.items() if k != "runs"})
        for pin in pins:
            for f in fractions:
                run = run_pipeline(engine, commands, rate=f * cap["capacity"], batch=b, pin=pin,
                                   **kw)
                row = summarize(run)
                row.update(fraction=f, capacity=cap["capacity"],
                           saturated=bool(f * cap["capacity"] > cap["capacity"]))
                rows.append(row)
    return rows, caps


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
        stem = f"{name}_{r['engine']}_b{r['batch']}_r{r['offered_rate']:.0f}_{pin}"
        r["hgrm"] = write_hgrm(decode(r["encoded"]), out / f"{stem}.hgrm".replace("@", "-")).name
    return write_result({"kind": "pipeline_latency", "rows": rows,
                         "conditions": run_conditions(params=params)}, out / f"{name}.json")

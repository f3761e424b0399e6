"""The compiled pipeline's figures (issue 15): a benchmark, not a test - ``make bench`` runs it.

v2@numba on cpp_comprehensive (``LOB_BENCH_PIPELINE_SCALE``, default 0.1: 200,000 commands),
batch 1: capacity of both transports in one run and their ratio (the compiled one as its
default variant, ``command/line``: each command published on its own); then ``REPEAT`` rounds
of (unpinned, pinned) x (50%, 90% of that capacity) x the compiled variants of ``VARIANTS``
(a lineage, one change per step; the order flips each round), each row's p50/p99/p99.9 and
its publish gaps; the machine's pauses recorded right before (a bare clock-reading loop on
every CPU) and the floor they set (a zero-cost transport on those pauses); each step's p50 and
p99 run against run, over all pairs and over the pairs in which neither run stalled. Writes
``artifacts/bench/pipeline/report.json`` and ``report.md`` and prints the markdown, then
checks the report it wrote (read back from disk): every row of every table present with its
fields, every figure positive and finite (a percentile the row's sample count cannot support,
:func:`lob.measure.stats.supported`, is None and shown as ``n<...``), percentiles in order,
every variant measured once per round, rate and pinning, and the floor's windows in range.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
from pathlib import Path

import numpy as np
import pytest

import lob
from lob.diagnose.hiccup import floor_runs, record_hiccups
from lob.measure.conditions import run_conditions
from lob.measure.stats import marker, median_interval, supported
from lob.pipeline.session import (
    PipelineSession,
    realtime_allowed,
    realtime_budget_s,
    variant_options,
)
from lob.pipeline.sweep import find_capacity

REPEAT = 3
FRACTIONS = (0.5, 0.9)
VARIANTS = ("command/fields", "command/line", "chunk/line", "chunk/line/realtime")
BASE = "command/line"
HICCUP_S = 2.0  # the machine's pauses recorded for this long on every CPU
STALL_NS = 500_000  # a publish gap this long: the run met a stall that alone sets its p99
OUT = Path(__file__).resolve().parents[2] / "artifacts" / "bench" / "pipeline"
QS = {"p50": 0.5, "p99": 0.99, "p99.9": 0.999}
ROW_FIELDS = ("round", "variant", "pinning", "fraction", "keeps_up", "samples", *QS,
              "gaps_gt_10us", "longest_gap_us", "gap_share", "span_ms", "stalled", "drain_ns",
              "load")


def _pcts(lat) -> dict:
    """The percentiles of ``lat`` its count supports (None for the others)."""
    return {k: float(np.quantile(lat, q)) if supported(100 * q, len(lat)) else None
            for k, q in QS.items()}


def _cell(row: dict, q: str) -> str:
    return f"{row[q]:,.0f}" if row[q] is not None else marker(100 * QS[q])


def _gaps(run, over_ns: int = 10_000) -> dict:
    """Gaps between successive publishes longer than ``over_ns``: count, longest, time share."""
    d = np.diff(np.sort(run.done_ns))
    span = int(run.done_ns.max() - run.due_ns[0])
    big = d[d > over_ns]
    return {"gaps_gt_10us": int(len(big)), "longest_gap_us": float(d.max()) / 1e3,
            "gap_share": float(big.sum()) / span, "span_ms": span / 1e6}


@pytest.mark.bench
def test_pipeline_report():
    scale = float(os.environ.get("LOB_BENCH_PIPELINE_SCALE", "0.1"))
    wl = lob.workload("cpp_comprehensive", scale=scale)
    cmds, engine = wl.commands, "v2@numba"
    cpus = sorted(os.sched_getaffinity(0))
    pin = (cpus[0], cpus[1]) if len(cpus) >= 2 else None
    t0 = time.time()
    rep: dict = {"engine": engine, "workload": "cpp_comprehensive", "n": len(cmds),
                 "batch": 1, "load_before": os.getloadavg()}
    with PipelineSession(engine, transport="python", config=wl.config) as s:
        py = find_capacity(engine, cmds, batch=1, steps=3, session=s)
    variants = [v for v in VARIANTS if realtime_allowed() or not v.endswith("/realtime")]
    with contextlib.ExitStack() as stack:
        ss = {v: stack.enter_context(PipelineSession(engine, transport="compiled",
                                                     config=wl.config, **variant_options(v)))
              for v in variants}
        cap = find_capacity(engine, cmds, batch=1, steps=4, session=ss[BASE])
        longest_s = len(cmds) / (min(FRACTIONS) * cap["capacity"])
        if longest_s > 0.9 * realtime_budget_s():  # a machine too busy for real-time rows
            rep["dropped"] = {v: f"a {longest_s:.2f} s row outruns the real-time budget"
                              for v in variants if v.endswith("/realtime")}
            variants = [v for v in variants if v not in rep["dropped"]]
        rep.update(capacity_python=py["capacity"], capacity_compiled=cap["capacity"],
                   unpaced_compiled=cap["unpaced_rate"],
                   compiled_over_python=cap["capacity"] / py["capacity"],
                   unpaced={v: cap["unpaced_rate"] if v == BASE else
                            ss[v].run(cmds, rate=math.inf).achieved_rate for v in variants})
        hic = record_hiccups(HICCUP_S)
        rep["pauses"] = [h.summary() for h in hic]
        pairs = [(hic[0], hic[1]), (hic[1], hic[0])] if len(hic) > 1 else [(hic[0], hic[0])]
        rows = []
        for k in range(REPEAT):
            for p in ([None, pin] if pin else [None]):
                for f in FRACTIONS:
                    for v in (variants if k % 2 == 0 else variants[::-1]):
                        r = ss[v].run(cmds, rate=f * cap["capacity"], batch=1, pin=p)
                        rows.append({"round": k + 1, "variant": v,
                                     "pinning": "pinned" if p else "unpinned",
                                     "fraction": f, "keeps_up": r.keeps_up(),
                                     "samples": len(r.latency_ns),
                                     **_pcts(r.latency_ns), **_gaps(r),
                                     "stalled": r.longest_gap_ns() > STALL_NS,
                                     "drain_ns": r.drain_ns(), "load": os.getloadavg()[0]})
        rep["rows"] = rows
    # references on the recorded pauses, in windows as long as a run: the floor (a transport
    # costing nothing beyond the engine's closed-loop time per command) and the model (the
    # engine working off queues at the drain speed measured in the unpinned runs)
    rep["engine_ns"] = min(lob.get_engine(engine, wl.config).replay(cmds).elapsed_ns
                           for _ in range(3)) / len(cmds)
    rep["floor"] = {}
    for f in FRACTIONS:
        drains = [r["drain_ns"] for r in rows if r["fraction"] == f and r["variant"] == BASE
                  and r["pinning"] == "unpinned" and r["drain_ns"]]
        ref = {}
        for what, svc in (("floor", rep["engine_ns"]),
                          ("model", float(np.median(drains)) if drains else None)):
            w = [] if svc is None else [
                float(np.quantile(x, QS["p99"])) for a, b in pairs
                for x in floor_runs(a, b, rate=f * cap["capacity"], service_ns=svc,
                                    n=len(cmds))]
            ref[what] = {"p99": float(np.median(w)) if w else None,
                         "lowest": min(w, default=None), "highest": max(w, default=None),
                         "windows": len(w), "service_ns": svc}
        rep["floor"][f] = ref
    rep["load_after"] = os.getloadavg()
    rep["seconds"] = time.time() - t0
    rep["conditions"] = run_conditions(params={"scale": scale, "repeat": REPEAT})

    md = [f"# Pipeline benchmark: {engine}, {len(cmds):,} commands of cpp_comprehensive, B=1",
          "", f"load average {rep['load_before'][0]:.2f} before, {rep['load_after'][0]:.2f} "
          f"after; {rep['seconds']:.0f} s; {rep['conditions'].get('cpu_model')} x "
          f"{os.cpu_count()}", "",
          f"capacity: compiled {rep['capacity_compiled']:,.0f}/s (unpaced "
          f"{rep['unpaced_compiled']:,.0f}/s), python {rep['capacity_python']:,.0f}/s: "
          f"{rep['compiled_over_python']:.1f}x (compiled: {BASE}, each command published on "
          "its own); unpaced: " + ", ".join(f"{v} {u:,.0f}/s" for v, u in rep["unpaced"].items()),
          "", *(f"{v} left out: {why}" for v, why in rep.get("dropped", {}).items()), "",
          "| cpu | pauses >10 µs /s | >100 µs /s | median µs | longest µs | lost % | "
          "timer irq /s | at one tick phase % |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for h in rep["pauses"]:
        lock = h["tick_locked_share"]
        md.append(f"| {h['cpu']} | {h['pauses_gt_10us_per_s']:.0f} | "
                  f"{h['pauses_gt_100us_per_s']:.0f} | {h['median_pause_gt_10us_us'] or 0:.1f} | "
                  f"{h['longest_us']:.0f} | {100 * h['lost_share_gt_10us']:.2f} | "
                  f"{h['timer_irqs_per_s'] or math.nan:.0f} | "
                  f"{100 * lock if lock is not None else math.nan:.0f} |")
    md += ["", "| round | variant | pinning | fraction | p50 ns | p99 ns | p99.9 ns | "
           "gaps >10 µs | longest gap µs | gap share % | load |", "|---|---|---|" + "---:|" * 8]
    for r in rows:
        md.append(f"| {r['round']} | {r['variant']} | {r['pinning']} | {r['fraction']:.0%} | "
                  f"{_cell(r, 'p50')} | {_cell(r, 'p99')} | {_cell(r, 'p99.9')} | "
                  f"{r['gaps_gt_10us']} | "
                  f"{r['longest_gap_us']:,.0f} | {100 * r['gap_share']:.2f} | {r['load']:.2f} |")
    md += ["", f"Floor: a transport costing nothing beyond the engine's closed-loop "
           f"{rep['engine_ns']:.0f} ns/command; model: the engine working off queues at the "
           f"drain speed of the unpinned {BASE} runs, behind a sender catching up at "
           "1 / unpaced rate; "
           "both on the recorded pauses, in windows as long as a run (median p99 over "
           "windows, and its range)", "",
           "| fraction | windows | floor p99 ns (range) | drain ns/cmd | model p99 ns (range) | "
           "median measured p99 (unpinned) | over floor | over model |", "|---:|" + "---:|" * 7]
    for f, ref in rep["floor"].items():
        ms = [r["p99"] for r in rows if r["fraction"] == f and r["variant"] == BASE
              and r["pinning"] == "unpinned" and r["p99"] is not None]
        m = float(np.median(ms)) if ms else math.nan
        fl, mo = ref["floor"], ref["model"]
        if not (fl["windows"] and mo["windows"]):
            md.append(f"| {f:.0%} | {fl['windows']} | no window (runs longer than the traces "
                      f"or no queued publish) | - | - | {m:,.0f} | - | - |")
            continue
        md.append(f"| {f:.0%} | {fl['windows']} | {fl['p99']:,.0f} ({fl['lowest']:,.0f}-"
                  f"{fl['highest']:,.0f}) | {mo['service_ns']:.0f} | {mo['p99']:,.0f} "
                  f"({mo['lowest']:,.0f}-{mo['highest']:,.0f}) | {m:,.0f} | "
                  f"{m / fl['p99']:.2f} | {m / mo['p99']:.2f} |")
    # each step of the lineage run against run: after / before of the same round, rate, pinning
    md += ["", "| step | pairs | percentile | count | median ratio after / before | "
           "interval (sign test, >= 90%) |", "|---|---|---|---:|---:|---|"]
    key = {(r["round"], r["pinning"], r["fraction"], r["variant"]): r for r in rows}
    rep["steps"] = {}
    for before, after in zip(variants[:-1], variants[1:], strict=True):
        both = [(key[k[:3] + (before,)], key[k[:3] + (after,)]) for k in key if k[3] == before]
        calm = [(a, b) for a, b in both if not a["stalled"] and not b["stalled"]]
        for which, sel in (("all", both), ("without a stall", calm)):
            for q in ("p50", "p99"):
                sel = [(a, b) for a, b in sel if a[q] and b[q]]  # both supported
                if not sel:
                    md.append(f"| {before} -> {after} | {which} | {q} | 0 | - | - |")
                    continue
                mi = median_interval([b[q] / a[q] for a, b in sel], of="paired runs")
                ci = f"{mi['ci'][0]:.2f}-{mi['ci'][1]:.2f}" if mi["ci"] else "none (< 5 pairs)"
                md.append(f"| {before} -> {after} | {which} | {q} | {len(sel)} | "
                          f"{mi['median']:.2f} | {ci} |")
                rep["steps"][f"{before} -> {after} {which} {q}"] = mi
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "report.json").write_text(json.dumps(rep, indent=1, default=str))
    (OUT / "report.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    _check_report(json.loads((OUT / "report.json").read_text()),
                  (OUT / "report.md").read_text(), variants)


def _positive(x) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and 0 < x < math.inf


def _check_report(rep: dict, md: str, variants: list[str]) -> None:
    """The report as written: every table complete, every figure positive and finite."""
    for k in ("capacity_python", "capacity_compiled", "unpaced_compiled",
              "compiled_over_python", "engine_ns", "seconds"):
        assert _positive(rep[k]), (k, rep[k])
    assert sorted(rep["unpaced"]) == sorted(variants)
    assert all(_positive(u) for u in rep["unpaced"].values()), rep["unpaced"]
    cpus = sorted(os.sched_getaffinity(0))
    assert [h["cpu"] for h in rep["pauses"]] == cpus
    for h in rep["pauses"]:
        assert _positive(h["seconds"]) and h["reads"] > 0 and _positive(h["ns_per_read"])
        assert 0 <= h["lost_share_gt_10us"] < 1 and h["longest_us"] >= 0

    rows = rep["rows"]
    pinnings = ["unpinned", "pinned"] if len(cpus) >= 2 else ["unpinned"]
    cells = [(r["round"], r["pinning"], r["fraction"], r["variant"]) for r in rows]
    want = [(k + 1, p, f, v) for k in range(REPEAT) for p in pinnings for f in FRACTIONS
            for v in variants]
    assert sorted(cells, key=str) == sorted(want, key=str)  # each variant once per cell
    for r in rows:
        assert set(ROW_FIELDS) <= set(r), set(ROW_FIELDS) - set(r)
        assert 0 < r["samples"] == rows[0]["samples"] <= rep["n"], r  # one stream, one count
        pct = [r[q] for q in QS if r[q] is not None]
        assert r["p50"] is not None and all(_positive(x) for x in pct), r
        assert pct == sorted(pct), r  # p50 <= p99 <= p99.9
        for q, v in QS.items():
            assert (r[q] is None) == (not supported(100 * v, r["samples"])), (q, r)
        assert _positive(r["span_ms"]) and _positive(r["longest_gap_us"])
        assert 0 <= r["gap_share"] < 1 and r["gaps_gt_10us"] >= 0
        assert r["drain_ns"] is None or _positive(r["drain_ns"])
        assert r["stalled"] == (r["longest_gap_us"] * 1e3 > STALL_NS)
    for f in FRACTIONS:
        for what in ("floor", "model"):
            ref = rep["floor"][str(f)][what]
            if ref["windows"]:
                assert _positive(ref["p99"]) and _positive(ref["service_ns"])
                assert ref["lowest"] <= ref["p99"] <= ref["highest"], ref
        # as many run-long windows as the traces hold (floor_runs), for each pairing of CPUs
        length = math.ceil(rep["n"] * 1e9 / (f * rep["capacity_compiled"]))
        per_pair = max(0, (int(HICCUP_S * 1e9) - length) // length + 1)
        pairs = 2 if len(cpus) > 1 else 1
        assert rep["floor"][str(f)]["floor"]["windows"] == pairs * per_pair, length
    for name, mi in rep["steps"].items():
        assert mi["n"] >= 1 and _positive(mi["median"]), (name, mi)
        assert mi["ci"] is None or mi["ci"][0] <= mi["median"] <= mi["ci"][1], (name, mi)
    # the markdown shows every row, one table line each
    heads = tuple(f"| {k + 1} | {v} | " for k in range(REPEAT) for v in variants)
    assert len([ln for ln in md.splitlines() if ln.startswith(heads)]) == len(rows)

"""The compiled backend's figures (issue 5): a benchmark, not a test - ``make bench`` runs it.

Writes ``artifacts/bench/compiled/report.json``, ``report.md`` and the in-kernel latency
``.hgrm``, and prints the markdown. Every throughput figure is the min and median of
``REPEAT`` replays whose rounds are interleaved across engines (round 1 of every engine,
then round 2, ...), so a noisy stretch of the shared machine hits every engine alike.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

import lob
from lob.engines.compiled import kernel_clock_overhead
from lob.engines.compiled.engine import CompiledEngine
from lob.engines.toggles import backend_versions, version_toggles
from lob.measure.alloc import count_allocations
from lob.measure.conditions import run_conditions
from lob.measure.hgrm import write_hgrm
from lob.measure.latency import histogram_from

REPEAT = 5
OUT = Path(__file__).resolve().parents[2] / "artifacts" / "bench" / "compiled"
PERCENTILES = (50, 90, 99, 99.9, 99.99)


def _interleaved(makers: dict, cmds: np.ndarray, repeat: int = REPEAT) -> dict:
    """ns/op of each engine: {name: {"min", "median", "all"}} over interleaved rounds."""
    runs = {name: [] for name in makers}
    for _ in range(repeat):
        for name, make in makers.items():
            runs[name].append(make().replay(cmds).elapsed_ns / len(cmds))
    return {n: {"min": min(v), "median": float(np.median(v)), "all": [round(x, 1) for x in v]}
            for n, v in runs.items()}


NUMBA = list(backend_versions("numba"))  # the versions the compiled backend implements
TWINS = [v.removesuffix("@numba") for v in NUMBA]


def _maker(name: str, config, **kw):
    if kw:
        return lambda: CompiledEngine(config, **{**version_toggles(name), **kw})
    return lambda: lob.get_engine(name, config)


def _table(rows: dict, unit: str = "ns/op") -> list[str]:
    lines = [f"| engine | min {unit} | median {unit} | all |", "|---|---:|---:|---|"]
    for name, r in rows.items():
        lines.append(f"| {name} | {r['min']:.1f} | {r['median']:.1f} | {r['all']} |")
    return lines


@pytest.mark.bench
def test_compiled_backend_report():
    OUT.mkdir(parents=True, exist_ok=True)
    report: dict = {"conditions": run_conditions(params={"repeat": REPEAT})}
    md: list[str] = ["# Compiled backend report (issue 5)", ""]

    # warm every kernel first (compile or load from the cache), and time a cold-process load
    t0 = time.perf_counter()
    full = lob.workload("cpp_comprehensive")
    cfg = full.config
    for v in NUMBA:
        lob.get_engine(v, cfg).replay(full.commands[:100])
    report["warm_seconds"] = round(time.perf_counter() - t0, 2)

    # 1. the full 2M C++ comprehensive stream: every compiled version, the two fast Python
    #    versions, and the id-index layout ablation of the fastest compiled version
    makers = {v: _maker(v, cfg) for v in NUMBA}
    makers["v2@numba ids=array"] = _maker("v2", cfg, ids="array")
    makers["v2"] = _maker("v2", cfg)
    makers["v3"] = _maker("v3", cfg)
    rows = _interleaved(makers, full.commands)
    report["cpp_comprehensive_full"] = rows
    compiled = {k: v for k, v in rows.items() if k.endswith("@numba")}
    best_c = min(compiled, key=lambda k: compiled[k]["min"])
    best_p = min(("v2", "v3"), key=lambda k: rows[k]["min"])
    report["fastest"] = {"compiled": best_c, "python": best_p,
                         "ratio_min": rows[best_p]["min"] / rows[best_c]["min"],
                         "ratio_median": rows[best_p]["median"] / rows[best_c]["median"]}
    md += [f"## cpp_comprehensive, 2,000,000 commands, min/median of {REPEAT}", ""]
    md += _table(rows)
    md += ["", f"Fastest compiled {best_c}: {rows[best_c]['min']:.1f} ns/op (min), "
           f"{rows[best_c]['median']:.1f} (median); fastest Python {best_p}: "
           f"{rows[best_p]['min']:.1f}; ratio {report['fastest']['ratio_min']:.1f}x (min), "
           f"{report['fastest']['ratio_median']:.1f}x (median).", ""]

    # 2. the lineage on both backends, on the first 10% of the stream (the Python versions
    #    with the `full` FOK scan need ~100 s per full replay)
    part = lob.workload("cpp_comprehensive", scale=0.1)
    makers = {}
    for v in TWINS:
        makers[v] = _maker(v, cfg)
        makers[f"{v}@numba"] = _maker(f"{v}@numba", cfg)
    rows = _interleaved(makers, part.commands)
    report["lineage_200k"] = rows
    md += [f"## Lineage on both backends: first 200,000 commands, min/median of {REPEAT}", "",
           "| version | python ns/op | numba ns/op | python/numba |", "|---|---:|---:|---:|"]
    for v in TWINS:
        p, c = rows[v]["min"], rows[f"{v}@numba"]["min"]
        md.append(f"| {v} | {p:.0f} | {c:.1f} | {p / c:.0f}x |")
    md.append("")

    # 3. in-kernel latency of the fastest compiled version over the full stream
    res, durs = lob.get_engine(best_c, cfg).replay_timed(full.commands)
    hist, _ = histogram_from(durs)
    write_hgrm(hist, OUT / f"{best_c.replace('@', '_')}_cpp_comprehensive.hgrm")
    clock = kernel_clock_overhead()
    lat = {f"p{q:g}": int(hist.get_value_at_percentile(q)) for q in PERCENTILES}
    report["latency"] = {"engine": best_c, "samples": int(durs.size), "ns": lat,
                         "max": int(durs.max()), "clock_overhead_ns": clock}
    md += [f"## In-kernel latency, {best_c}, {durs.size:,} ops (ns, clock read included)", "",
           " ".join(f"{k}={v}" for k, v in lat.items()) + f" max={int(durs.max())}",
           f"(one in-kernel clock read: min {clock['min']:.0f}, median "
           f"{clock['median']:.0f} ns)", ""]

    # 4. allocations per op on mixed_70_20_10
    wl = lob.workload("mixed_70_20_10", scale=0.1)
    allocs = {}
    for name in ("v2", "v3", "v2@numba", "v3@numba"):
        lob.get_engine(name, wl.config).replay(wl.commands[:10])
        a = count_allocations(lob.get_engine(name, wl.config), wl.commands)
        allocs[name] = {"ops": a.ops, "allocs_per_op": a.allocs_per_op,
                        "bytes_per_op": a.bytes_per_op}
    report["allocs_mixed_70_20_10"] = allocs
    md += [f"## Allocations per op, mixed_70_20_10 ({len(wl):,} commands)", "",
           "| engine | allocs/op | bytes/op |", "|---|---:|---:|"]
    md += [f"| {k} | {v['allocs_per_op']:.4f} | {v['bytes_per_op']:.1f} |"
           for k, v in allocs.items()]
    md.append("")

    # 5. FOK check cost against book depth: one never-fillable FOK per timed op
    depth_rows = {}
    for depth in (1_000, 10_000, 100_000, 1_000_000):
        wl = lob.workload("fok_depth", depth=depth, n=500 if depth < 1_000_000 else 100)
        for name in ("v1@numba", "v2@numba", "v3@numba"):
            meds = []
            for _ in range(3):
                _, d = lob.get_engine(name, wl.config).replay_timed(wl.commands)
                meds.append(float(np.median(d)))
            depth_rows.setdefault(name, {})[depth] = min(meds)
    report["fok_depth_median_ns"] = depth_rows
    md += ["## FOK check vs book depth (median ns per never-fillable FOK, best of 3)", "",
           "| engine (fok) | 1k | 10k | 100k | 1M | 1M / 1k |", "|---|---:|---:|---:|---:|---:|"]
    for name, r in depth_rows.items():
        vals = list(r.values())
        md.append(f"| {name} ({version_toggles(name)['fok']}) | "
                  + " | ".join(f"{x:,.0f}" for x in vals) + f" | {vals[-1] / vals[0]:.1f}x |")

    (OUT / "report.json").write_text(json.dumps(report, indent=1, default=str))
    (OUT / "report.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    assert res.counters["trades"] > 0  # the timed replay ran the stream


def _fmt(t, cols) -> list[str]:
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, r in t.iterrows():
        cells = []
        for c in cols:
            v = r.get(c)
            cells.append(f"{v:.3g}" if isinstance(v, float) else str(v))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _with_c_book(monkeypatch) -> None:
    """Build the example C engine (examples/c_engine) and register it as ``c_book``."""
    import subprocess

    from lob.engines import registry

    build = OUT / "c_book"
    repo = Path(__file__).resolve().parents[2]
    subprocess.run(["make", "-s", "-C", str(repo / "examples" / "c_engine"),
                    f"BUILD={build}"], check=True)
    toml = build / "engine.toml"
    toml.write_text(f'name = "c_book"\npath = "{build / "liblob_c_book.so"}"\n'
                    'description = "example C engine (examples/c_engine), -O2"\n')
    monkeypatch.setenv("LOB_ENGINES_TOML", str(toml))
    registry.refresh()


@pytest.mark.bench
def test_lineage_and_side_by_side_report(monkeypatch):
    """The v4 step against its lineage and every other engine (issue 27): the lineage
    profile, the side-by-side ratios and v4's per-class breakdown, at the seeds' sizes,
    into ``artifacts/bench/compiled/profile.md`` and ``profile.json``."""
    from lob.diagnose import profile as pf

    OUT.mkdir(parents=True, exist_ok=True)
    if "c_book" not in lob.engine_names():
        _with_c_book(monkeypatch)
    cond = run_conditions(params={"rounds": 7, "clock": "cpu"})
    lin = pf.lineage_profile(rounds=7)
    sbs = pf.side_by_side(rounds=7)
    brk = {w: pf.command_breakdown("v4@numba", w, rounds=3) for w in pf.DEFAULT_WORKLOADS}
    md = ["# The compiled lineage and every engine side by side (issue 27)", "",
          f"load {cond.get('load_avg', '?')}; CPU time of the measuring thread; medians of 7 "
          "interleaved rounds with 90% sign-test intervals", "",
          "## Lineage: each step on each workload", ""]
    md += _fmt(lin, ["step", "workload", "kernel_ns", "kernel_lo", "kernel_hi", "replay_ns",
                     "replay_over_kernel", "vs_parent", "vs_parent_lo", "vs_parent_hi",
                     "change"])
    md += ["", "## Side by side, ratios to " + sbs.attrs["base"], ""]
    md += _fmt(sbs, ["engine", "workload", "kernel_ns", "replay_ns", "vs_base", "vs_base_lo",
                     "vs_base_hi", "change", "same_checksum"])
    for w, t in brk.items():
        md += ["", f"## v4@numba per class of command, {w} (in-kernel, one clock read "
               f"{t.attrs['clock_ns']:.0f} ns; untimed {t.attrs['untimed_ns_per_op']:.1f} "
               "ns/op)", ""]
        md += _fmt(t, ["class", "commands", "share", "median_ns", "p90_ns", "time_share"])
    (OUT / "profile.md").write_text("\n".join(md) + "\n")
    (OUT / "profile.json").write_text(json.dumps(
        {"conditions": cond, "lineage": lin.to_dict("records"),
         "side_by_side": sbs.to_dict("records"),
         "breakdown": {w: t.to_dict("records") for w, t in brk.items()}},
        indent=1, default=str))
    print("\n".join(md))
    assert sbs[sbs.kernel_ns.notna()].same_checksum.all()

"""A wrapped third-party engine measured beside lob's own, in one interleaved run.

:func:`measure_beside` replays each workload through every engine in rounds whose order
rotates (:func:`lob.measure.stats.rotations`), a fresh book per replay:

* ns/op: the whole stream through ``engine.replay`` (time inside the library / kernel
  calls, so the shim's work is in it and Python's is not), divided by the commands;
* p50 / p99 / p99.9: per-op durations from ``engine.replay_timed`` (each engine's own
  clock around each whole command; for a foreign engine the shim's work is inside);
* work ns/op: the mean of those durations at most ``GAP_NS`` (50 us: no command of these
  engines does that much work; above it the process was preempted, which on a loaded
  machine inflates ns/op several fold), with the count of the durations left out;
* per command type (kind, order type): the median and p99 of those durations, to show
  where a shim's emulation costs (:func:`per_type`), with the shim's own counters
  (``oc_shim_stats``: depth walks and pages, modifies done as cancel + re-add, ...).

Ratios engine / other are the medians of the per-round ratios with their sign-test
interval (:func:`lob.measure.stats.change_of_ratios`). A workload whose config the engine
does not declare (the C++ seed's streams run with STP CANCEL_MAKER; orderly_chaos declares
NONE only) is measured with its STP mode set to one the engine declares, for every engine
alike, and the result says so. Every engine must agree with the others (checksum) on each
stream first.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from pathlib import Path

import numpy as np

from lob.engines.foreign.adapters import SHIM_STATS, shim_stats
from lob.semantics import BookConfig, Kind, OrderType, Scope

QUANTILES = (50, 99, 99.9)
GAP_NS = 50_000  # a per-op duration above this is the machine (preemption), not the engine


def c_book_toml() -> Path:
    """The engine list :func:`c_book` writes beside the library it builds: what another
    process (a child run under valgrind, say) puts in ``$LOB_ENGINES_TOML`` to load it."""
    from lob.engines.foreign.adapters import cache_dir

    return cache_dir() / "engines" / "c_book" / "engine.toml"


def c_book(name: str = "c_book") -> str:
    """Build lob's example C engine (examples/c_engine) into the cache with gcc and register
    it in this process as ``name`` (once); returns the name."""
    from lob.engines.foreign import HEADER, foreign_specs
    from lob.engines.foreign.adapters import BuildUnavailable
    from lob.engines.registry import engine_names, register_engine

    if name in engine_names():
        return name
    src = Path(__file__).resolve().parents[2] / "examples" / "c_engine" / "lob_book.c"
    if not src.is_file():
        raise BuildUnavailable(f"{src} not found: the example C engine is in lob's checkout")
    cc = shutil.which("gcc")
    if cc is None:
        raise BuildUnavailable("no C compiler: gcc not found")
    out = c_book_toml().parent
    out.mkdir(parents=True, exist_ok=True)
    lib = out / "liblob_c_book.so"
    header = HEADER.parent
    r = subprocess.run([cc, "-O2", "-std=c11", "-fwrapv", "-fPIC", "-shared", f"-I{header}",
                        str(src), "-o", str(lib)], capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"building c_book failed: {r.stderr.strip()}")
    toml = c_book_toml()
    toml.write_text(f'name = "{name}"\npath = "{lib.name}"\n'
                    f'description = "example C engine (examples/c_engine)"\n')
    for spec in foreign_specs(toml):
        register_engine(spec)
    return name


def declared_workload(engine: str, wl):
    """``wl`` itself, or a copy whose STP mode is one ``engine`` declares (and the change in
    words); raises :class:`~lob.engines.capabilities.Unsupported` if nothing helps."""
    from lob.engines.capabilities import Unsupported
    from lob.engines.registry import engine_capabilities

    caps = engine_capabilities(engine)
    if caps.config_refusal(engine, wl.config) is None:
        return wl, None
    stp = min(caps.stp_modes)
    cfg = BookConfig(wl.config.min_price, wl.config.max_price, stp)
    why = caps.config_refusal(engine, cfg) or caps.commands_refusal(engine, wl.commands, cfg)
    if why:
        raise Unsupported(why)
    note = (f"{wl.name}: STP {wl.config.stp.name} -> {stp.name} for every engine "
            f"({engine} declares {', '.join(m.name for m in sorted(caps.stp_modes))} only)")
    return dataclasses.replace(wl, config=cfg), note


def type_labels(cmds: np.ndarray) -> np.ndarray:
    """One label per command: the order type of a submit, else the kind (MASS_CANCEL:scope)."""
    out = np.empty(len(cmds), dtype=object)
    kind, otype = cmds["kind"], cmds["otype"]
    for k in Kind:
        m = kind == k
        if k == Kind.SUBMIT:
            for t in OrderType:
                out[m & (otype == t)] = t.name
        elif k == Kind.MASS_CANCEL:
            for s in Scope:
                out[m & (otype == s)] = f"MASS_CANCEL:{s.name}"
        else:
            out[m] = k.name
    out[out == None] = "other"  # noqa: E711 (object array)
    return out


def per_type(durations: np.ndarray, labels: np.ndarray) -> dict[str, dict]:
    """label -> {"n", "p50", "p99"} of the per-op durations (ns)."""
    res = {}
    for lab in dict.fromkeys(labels.tolist()):
        d = durations[labels == lab]
        res[lab] = {"n": int(len(d)), "p50": float(np.percentile(d, 50)),
                    "p99": float(np.percentile(d, 99))}
    return res


def measure_beside(engine: str = "orderly_chaos", others=("v2@numba", "c_book"),
                   workloads=("cpp_comprehensive", "lobster_replay"), *, scale: float = 1.0,
                   rounds: int = 7, confidence: float = 0.9) -> dict:
    """ns/op and p50/p99/p99.9 of ``engine`` beside ``others`` on ``workloads`` (names at
    ``scale``, or Workload objects), interleaved
    in ``rounds`` rotating rounds, with ratios engine / other and their intervals; an A/A
    control (``engine`` measured a second time in every round: ``aa`` per metric, the band of
    :func:`lob.measure.stats.aa_band`) and each ratio's ``call`` against it
    (:func:`lob.measure.stats.change_beyond_aa`: faster / slower only beyond the band); per
    command type medians; the run's conditions. ``c_book`` is built and registered if
    needed. Returns a JSON-able dict (see :func:`report` for a table)."""
    from lob.engines.registry import get_engine
    from lob.measure.stats import aa_band, change_beyond_aa, change_of_ratios, rotations
    from lob.workloads import build as build_workload

    if "c_book" in others:
        c_book()
    twin = f"{engine} (A/A)"  # the same engine measured again in every round: the A/A control
    engines = [engine, *others]
    out = {"engine": engine, "others": list(others), "rounds": rounds, "scale": scale,
           "workloads": {}, "notes": []}
    try:
        from lob.measure.conditions import run_conditions

        out["conditions_before"] = run_conditions()
    except Exception:  # conditions are a courtesy here, never a failure
        pass
    for item in workloads:  # a name, or a Workload built by the caller
        wl = build_workload(item, scale=scale) if isinstance(item, str) else item
        name = wl.name
        wl, note = declared_workload(engine, wl)
        if note:
            out["notes"].append(note)
        cmds = wl.commands
        n = len(cmds)
        sums = {e: get_engine(e, wl.config).replay(cmds).checksum for e in engines}  # warm
        if len(set(sums.values())) != 1:
            raise AssertionError(f"{name}: the engines disagree: {sums}")
        labels = type_labels(cmds)[cmds["timed"].astype(bool)]
        m = {e: {"ns_per_op": [], "work_ns_per_op": [], **{f"p{q:g}": [] for q in QUANTILES}}
             for e in [*engines, twin]}
        gaps = {e: [] for e in engines + [twin]}
        types = {e: [] for e in engines + [twin]}
        stats = None
        for order in rotations([*engines, twin], rounds):
            for slot in order:
                e = engine if slot == twin else slot
                run = get_engine(e, wl.config).replay(cmds)
                m[slot]["ns_per_op"].append(run.elapsed_ns / n)
                eng = get_engine(e, wl.config)
                _, d = eng.replay_timed(cmds)
                for q in QUANTILES:
                    m[slot][f"p{q:g}"].append(float(np.percentile(d, q)))
                work = d <= GAP_NS
                m[slot]["work_ns_per_op"].append(float(d[work].mean()))
                gaps[slot].append(int((~work).sum()))
                types[slot].append(d)
                if slot == engine:
                    stats = shim_stats(eng)
        res = {"commands": n, "timed": int(cmds["timed"].sum()), "stp": wl.config.stp.name,
               "checksum": next(iter(sums.values())), "engines": {}, "ratios": {},
               "per_type": {}, "shim_stats": stats}
        for e in engines:
            res["engines"][e] = {k: {"median": float(np.median(v)), "min": float(min(v)),
                                     "all": [round(x, 1) for x in v]} for k, v in m[e].items()}
            res["engines"][e]["gaps_over_50us"] = gaps[e]
            res["per_type"][e] = per_type(np.median(np.stack(types[e]), axis=0), labels) \
                if len({len(t) for t in types[e]}) == 1 else {}
        res["aa"] = {k: aa_band([a / b for a, b in zip(m[engine][k], m[twin][k], strict=True)])
                     for k in m[engine]}
        for o in others:
            res["ratios"][o] = {}
            for k in m[engine]:
                x = change_of_ratios([a / b for a, b in zip(m[engine][k], m[o][k], strict=True)],
                                     confidence=confidence, of="interleaved rounds")
                lo, hi = x["ci"] or (None, None)
                x["call"] = change_beyond_aa(lo, hi, res["aa"][k])  # beyond the A/A band only
                res["ratios"][o][k] = x
        out["workloads"][name] = res
    try:
        import os

        out["load_after"] = os.getloadavg()
    except OSError:
        pass
    return out


def shim_cost(engine: str = "orderly_chaos", workload: str = "lobster_replay", *,
              scale: float = 1.0, rounds: int = 9, confidence: float = 0.9) -> dict:
    """The shim's own cost on the commands orderly-chaos runs natively (LIMIT, MARKET, CANCEL):
    per-op durations through lob's ABI (``replay_timed``: validation, id tables, the fill
    callback, the shim's checks) against the same commands sent straight to orderly-chaos's C
    API (``oc_raw_replay`` in the shim's library: a native caller's loop), interleaved in
    ``rounds`` rounds, same clock. Per type and over all native commands: p50, p99 and work
    ns/op (durations up to ``GAP_NS``), the per-round ratio shim / native with its interval.
    ``same_book`` says whether both runs traded alike (only when every command is native)."""
    from lob.engines.foreign.adapters import native_replay
    from lob.engines.registry import get_engine
    from lob.measure.stats import change_of_ratios, rotations
    from lob.workloads import build as build_workload

    wl, note = declared_workload(engine, build_workload(workload, scale=scale))
    cmds = np.ascontiguousarray(wl.commands)
    n = len(cmds)
    raw = native_replay(engine)
    timed = cmds["timed"].astype(bool)
    labels = type_labels(cmds)
    natives = ("LIMIT", "MARKET", "CANCEL")
    groups = {lab: (labels == lab) & timed for lab in natives if ((labels == lab) & timed).any()}
    groups["all native"] = np.logical_or.reduce(list(groups.values())) if groups else timed
    vals = {s: {g: {"p50": [], "p99": [], "work": []} for g in groups} for s in ("shim", "native")}
    trades = {}
    for order in rotations(["shim", "native"], rounds):
        for side in order:
            d = np.full(n, -1, np.int64)
            if side == "shim":
                eng = get_engine(engine, wl.config)
                run, dt = eng.replay_timed(cmds)
                d[timed] = dt
                trades["shim"] = len(run.fills)
            else:
                trades["native"] = raw(cmds, d)
            for g, mask in groups.items():
                x = d[mask]
                x = x[x >= 0]
                vals[side][g]["p50"].append(float(np.percentile(x, 50)))
                vals[side][g]["p99"].append(float(np.percentile(x, 99)))
                vals[side][g]["work"].append(float(x[x <= GAP_NS].mean()))
    out = {"engine": engine, "workload": workload, "commands": n, "rounds": rounds,
           "note": note, "trades": trades, "same_book": trades["shim"] == trades["native"],
           "types": {}}
    for g, mask in groups.items():
        row = {"n": int(mask.sum())}
        for k in ("p50", "p99", "work"):
            row[k] = {s: float(np.median(vals[s][g][k])) for s in ("shim", "native")}
            row[k]["ratio"] = change_of_ratios(
                [a / b for a, b in zip(vals["shim"][g][k], vals["native"][g][k], strict=True)],
                confidence=confidence, of="interleaved rounds")
        out["types"][g] = row
    return out


def shim_cost_report(res: dict) -> str:
    """Markdown table of a :func:`shim_cost` result."""
    lines = [f"### shim / native, {res['workload']}: {res['commands']:,} commands, "
             f"{res['rounds']} interleaved rounds (trades {res['trades']})", "",
             "| commands | n | p50 shim / native | p99 shim / native | work ns/op shim / native "
             "| work ratio |", "|---|---:|---|---|---|---|"]
    if not res["same_book"]:
        lines.insert(1, "(the stream has commands orderly-chaos has no call for: the native run "
                        "skips them, so its book differs; compare on a stream of LIMIT, MARKET "
                        "and CANCEL only, e.g. lobster_replay)")
    for g, r in res["types"].items():
        x = r["work"]["ratio"]
        ci = f" ({x['ci'][0]:.2f}-{x['ci'][1]:.2f})" if x["ci"] else ""
        lines.append(f"| {g} | {r['n']:,} | {r['p50']['shim']:.0f} / {r['p50']['native']:.0f} "
                     f"| {r['p99']['shim']:.0f} / {r['p99']['native']:.0f} | "
                     f"{r['work']['shim']:.0f} / {r['work']['native']:.0f} | "
                     f"{x['median']:.2f}{ci} |")
    return "\n".join(lines)


def report(res: dict) -> str:
    """Markdown tables of a :func:`measure_beside` result."""
    e = res["engine"]
    lines = []
    for name, w in res["workloads"].items():
        lines += [f"### {name}: {w['commands']:,} commands ({w['timed']:,} timed), STP "
                  f"{w['stp']}, {res['rounds']} interleaved rounds", "",
                  "| engine | ns/op median (min) | work ns/op | ops > 50 us per run | p50 | p99 "
                  "| p99.9 |", "|---|---:|---:|---|---:|---:|---:|"]
        for eng, v in w["engines"].items():
            lines.append(f"| {eng} | {v['ns_per_op']['median']:.0f} "
                         f"({v['ns_per_op']['min']:.0f}) | {v['work_ns_per_op']['median']:.0f} | "
                         f"{min(v['gaps_over_50us'])}-{max(v['gaps_over_50us'])} | " +
                         " | ".join(f"{v[k]['median']:.0f}" for k in ("p50", "p99", "p99.9")) +
                         " |")
        keys = ("ns_per_op", "work_ns_per_op", "p50", "p99", "p99.9")
        lines += ["", f"| {e} / other | ns/op | work ns/op | p50 | p99 | p99.9 |",
                  "|---|---|---|---|---|---|"]
        for o, r in w["ratios"].items():
            cells = []
            for k in keys:
                x = r[k]
                ci = f" ({x['ci'][0]:.2f}-{x['ci'][1]:.2f})" if x["ci"] else " (no interval)"
                cells.append(f"{x['median']:.2f}{ci}")
            lines.append(f"| {o} | " + " | ".join(cells) + " |")
        pt = w["per_type"]
        if pt.get(e):
            cols = [o for o in res["others"] if pt.get(o)]
            lines += ["", "| type | n | " + " | ".join(f"{c} p50" for c in [e, *cols]) +
                      " | " + " | ".join(f"{c} p99" for c in [e, *cols]) + " |",
                      "|---|---:|" + "---:|" * (2 * len(cols) + 2)]
            for lab, v in pt[e].items():
                lines.append(f"| {lab} | {v['n']:,} | " +
                             " | ".join(f"{pt[c][lab]['p50']:.0f}" for c in [e, *cols]) +
                             " | " + " | ".join(f"{pt[c][lab]['p99']:.0f}" for c in [e, *cols])
                             + " |")
        if w.get("shim_stats"):
            lines += ["", "shim counters (last replay_timed): " +
                      ", ".join(f"{k} {v:,}" for k, v in w["shim_stats"].items())]
        lines.append("")
    lines += [f"note: {n}" for n in res["notes"]]
    return "\n".join(lines)


__all__ = ["SHIM_STATS", "c_book", "declared_workload", "measure_beside", "per_type", "report",
           "shim_cost", "shim_cost_report", "shim_stats", "type_labels"]

"""Version evolution and stress workloads (seed 003): the study behind
``notebooks/evolution_stress.ipynb``.

lobster's page reports replay throughput rising over its versions and a bitmap over price
levels that costs a little on its narrow book but wins on sparse ones. Its code is not
public, so lob measures analogs: its own lineage on lob's lobster-style streams
(:func:`measure_throughput`), and the bitmap against lob's two other best-price rules
(:func:`measure_bitmap`): the rescanning ``best=scan`` of the lineage, and ``v2+sorted``
(:func:`register_sorted`), a sorted list of non-empty levels with no rescans, the closest lob
has to lobster's baseline. Table builders (``..._table``) quote their own cells; the claims'
regime (which baseline) is named in each measurement (:func:`claims`).

Procedures return plain data (lists of records, dicts), so the builders are unit-tested on
synthetic data (``tests/studies/test_study_evolution_stress.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from itertools import pairwise
from pathlib import Path

from lob.studies import conclude as K
from lob.studies.study import interleaved_throughput

__all__ = ["SORTED_NAME", "SORTED", "BASELINE", "BITMAP_WORKLOADS", "COSTLY_STEP",
           "register_sorted", "check_parameters", "best_rule", "measure_throughput",
           "throughput_table", "shape_table", "measure_latency", "latency_table",
           "plot_throughput", "seed_versions_table", "bitmap_pairs", "measure_bitmap",
           "bitmap_table", "claims", "SHIM_HOW", "BESIDE", "BESIDE_WORKLOADS",
           "BESIDE_MAX_SCALE", "measure_beside", "beside_table", "shim_table", "shim_name"]

# lobster's v4 -> v5 added a bitmap to a ladder that tracks its best price without rescanning;
# lob's lineage has only a rescanning baseline (best=scan), so the bitmap pair's baseline is v2
# with a sorted list of non-empty levels (best=sorted): O(log n) updates, no rescans
SORTED_NAME = "v2+sorted"
SORTED = {"levels": "pool", "best": "sorted", "fok": "early_exit"}

# what each best-price rule costs besides the bitmap's own bit flips (the claims' regime)
BASELINE = {"scan": "rescans the ladder at every match step",
            "sorted": "sorted-list update per level change (O(log n) upkeep)",
            "bitmap": "bitmap", "own": "the engine's own best-price rule"}

BITMAP_WORKLOADS = ("lobster_replay", "lobster_sparse")  # narrow replay, sparse stream
REPLAY = "lobster_replay"  # the stream of the version-steps claim
COSTLY_STEP = 0.5  # a step keeping less than this share of its parent's throughput is named
LATENCY_QS = (50, 90, 99, 99.9)
SHAPE_KEYS = ("commands", "resting_mean", "resting_max", "cancel_hit_pct")


# --- parameters and engines --------------------------------------------------------------------

def register_sorted() -> str:
    """Register ``v2+sorted`` (v2 with a sorted list of non-empty levels instead of the
    bitmap) in this process, once; returns its name. Idempotent."""
    from lob.engines.base import EngineSpec
    from lob.engines.ladder import LadderEngine
    from lob.engines.registry import engine_names, register_engine

    if SORTED_NAME not in engine_names():
        register_engine(EngineSpec(
            SORTED_NAME, partial(LadderEngine, **SORTED),
            "v2 with a sorted list of non-empty levels instead of the bitmap (no rescans)",
            toggles=SORTED, parent="v2"))
    return SORTED_NAME


def check_parameters(workloads: Sequence[str], scale_overrides: Mapping[str, float],
                     bitmap_pair: Sequence[str]) -> None:
    """One clear ValueError for a scale override of a workload not run, or a bitmap pair
    that is not a pair (engine names are checked by ``Study.start``)."""
    unknown = sorted(set(scale_overrides) - set(workloads))
    if unknown:
        raise ValueError(f"scale_overrides names workloads not in `workloads`: {unknown}")
    if len(bitmap_pair) != 2:
        raise ValueError(f"bitmap_pair needs two engines (without, with the bitmap), got "
                         f"{list(bitmap_pair)!r}")


def best_rule(engine: str) -> str:
    """An engine's best-price rule (its ``best`` toggle: scan, bitmap, sorted), or ``"own"``
    for an engine outside lob's lineage."""
    from lob.engines.registry import engine_spec

    return engine_spec(engine).toggles.get("best", "own")


def _scale(w: str, scale: float, scale_overrides: Mapping[str, float]) -> float:
    return scale_overrides.get(w, scale)


def _mops(ns_per_op: Sequence[float]) -> float:
    """M ops/s of the best round."""
    return 1e3 / min(ns_per_op)


# --- throughput per version and workload -------------------------------------------------------

def measure_throughput(engines: Sequence[str], workloads: Sequence[str], scale: float,
                       scale_overrides: Mapping[str, float], repeat: int, *,
                       replay=None) -> dict:
    """Per workload, the engines interleaved round by round
    (:func:`~lob.studies.study.interleaved_throughput`); M ops/s from the best round. Returns
    ``{"rows": [{"workload", "engine", "commands", "mops"}], "shape": {workload: regime
    diagnostics of the last replay}, "skipped": [{"workload", "engine", "reason"}]}``: an
    engine whose declared capabilities exclude a workload (config or commands) is not run on
    it, and the reason is kept."""
    from lob.studies.declared import refusal
    from lob.workloads import build
    from lob.workloads.diagnostics import stream_diagnostics

    rows, shape, skipped = [], {}, []
    for w in workloads:
        wl = build(w, scale=_scale(w, scale, scale_overrides))
        run = []
        for e in engines:
            why = refusal(e, wl)
            if why:  # outside the engine's declared capabilities: named, never run
                skipped.append({"workload": w, "engine": e, "reason": why})
            else:
                run.append(e)
        if not run:
            continue
        t = interleaved_throughput(run, wl, repeat, replay=replay)
        sums = {t[e]["last"].checksum for e in run}
        if len(sums) != 1:
            raise RuntimeError(f"engines disagree on {w}: checksums "
                               + ", ".join(f"{e}={t[e]['last'].checksum}" for e in run))
        for e in run:
            rows.append({"workload": w, "engine": e, "commands": len(wl.commands),
                         "mops": _mops(t[e]["ns_per_op"])})
        rr = t[run[-1]]["last"]
        shape[w] = stream_diagnostics(wl.commands, rr.outcomes, rr.fills)
    return {"rows": rows, "shape": shape, "skipped": skipped}


def _with_ratios(rows: list[dict], lineage: Sequence[str] | None = None) -> list[dict]:
    """Each row with ``vs_first`` (over the workload's first engine of ``lineage``) and
    ``vs_previous`` (over the lineage engine before it: that step's effect; None for an
    engine outside the lineage, which is no step). ``lineage`` None: every engine."""
    on = [r for r in rows if lineage is None or r["engine"] in lineage]
    first, prev, step = {}, {}, {}
    for r in on:
        w = r["workload"]
        first.setdefault(w, r["mops"])
        step[id(r)] = r["mops"] / prev[w] if w in prev else None
        prev[w] = r["mops"]
    return [{**r, "vs_first": r["mops"] / first[r["workload"]] if r["workload"] in first
             else None, "vs_previous": step.get(id(r))} for r in rows]


def throughput_table(perf: dict, engines: Sequence[str]) -> K.Conclusion:
    """M ops/s per workload and engine, over the first engine and over the previous one; per
    workload the fastest, and every step of lob's lineage that keeps less than
    :data:`COSTLY_STEP` of its parent's throughput. Engines outside the lineage (a
    third-party engine) get ``vs_first`` over the lineage's first and a sentence of their
    own; the (workload, engine) cells not run are named with the engine's reason."""
    from lob.studies.declared import lineage

    lin = lineage(engines)
    first = lin[0] if lin else engines[0]
    rows = _with_ratios(perf["rows"], lin or None)
    t = K.Conclusion("throughput", rows, key=["workload", "engine"],
                     kinds={"commands": "count", "vs_first": "ratio", "vs_previous": "ratio"})
    for w in dict.fromkeys(r["workload"] for r in rows):
        mine = [r for r in rows if r["workload"] == w]
        have = {r["engine"] for r in mine}
        top = max(mine, key=lambda r: r["mops"])["engine"]
        t.say(f"On {w} the fastest is {top} ({t.cell((w, top), 'mops')} M ops/s, "
              f"{t.cell((w, top), 'vs_first')}x {first}).")
        for prev, e in pairwise([e for e in lin if e in have]):
            if t.value((w, e), "vs_previous") < COSTLY_STEP:
                t.say(f"On {w}, {e} keeps only {t.cell((w, e), 'vs_previous')}x the throughput "
                      f"of {prev}: that step costs more than it gains on this stream.")
        for e in engines:
            if e not in lin and e in have and e != top and first in have:
                t.say(f"On {w}, {e} (not of lob's lineage) runs {t.cell((w, e), 'mops')} M "
                      f"ops/s, {t.cell((w, e), 'vs_first')}x {first}.")
    for sk in perf.get("skipped", []):
        t.say(f"Not run: {sk['engine']} on {sk['workload']} ({sk['reason']}).")
    return t


def shape_table(perf: dict):
    """The workloads' regime diagnostics (a DataFrame, for display)."""
    import pandas as pd

    return pd.DataFrame(perf["shape"]).T[list(SHAPE_KEYS)]


def plot_throughput(perf: dict, engines: Sequence[str]):
    """One bar panel per workload: M ops/s of each engine (best round)."""
    import pandas as pd

    from lob.studies import plots as lp

    workloads = list(dict.fromkeys(r["workload"] for r in perf["rows"]))
    fig, axes = lp.subplots(1, len(workloads), panel=(3.6, 3.6), squeeze=False)
    for ax, w in zip(axes.flat, workloads, strict=True):
        d = pd.Series({r["engine"]: r["mops"] for r in perf["rows"] if r["workload"] == w})
        lp.bars(ax, d.loc[[e for e in engines if e in d.index]], ylabel="M ops/s (best repeat)",
                title=f"{w}\n({perf['shape'][w]['commands']:,} cmds)")
    if lp.overlaps(fig):
        raise RuntimeError(f"throughput_per_workload: texts overlap: {lp.overlaps(fig)}")
    return fig


# --- latency of the last version ---------------------------------------------------------------

def measure_latency(engine: str, workloads: Sequence[str], scale: float,
                    scale_overrides: Mapping[str, float], out: str | Path, *,
                    capture=None) -> dict:
    """Closed-loop per-op latency of ``engine`` on each workload (``.hgrm`` saved into ``out``
    as ``<engine>__<workload>.hgrm``). Returns ``{"engine", "rows", "clock"}``."""
    from lob.workloads import build

    capture = capture or K.capture
    rows, clock = [], None
    for w in workloads:
        wl = build(w, scale=_scale(w, scale, scale_overrides))
        cp = capture(engine, wl)
        clock = cp["clock"]
        K.save_hgrm(cp["durations"], Path(out) / f"{engine}__{w}.hgrm")
        r = K.percentile_row(cp["durations"], qs=LATENCY_QS)
        rows.append({"workload": w, **r,
                     "p99/p50": r["p99"] / r["p50"] if isinstance(r["p99"], float) else None})
    return {"engine": engine, "rows": rows, "clock": clock}


def latency_table(lat: dict) -> K.Conclusion:
    """Percentiles per workload; the narrowest and widest tail; hidden percentiles named."""
    t = K.Conclusion(f"latency ({lat['engine']})", lat["rows"], key="workload",
                     kinds={"warmup_dropped": "count", "p99/p50": "ratio"},
                     note=K.clock_line(lat["clock"]))
    K.conclude_extremes(t, "p99/p50", what="tail (p99 / p50)", lower_is="narrowest",
                        higher_is="widest")
    return K.conclude_suppressed(t)


# --- the seed's own versions -------------------------------------------------------------------

def seed_versions_table(mops: Mapping[str, float] | None = None,
                        machine: str | None = None) -> K.Conclusion:
    """lobster's published M ops/s per version (its machine only), over its first version."""
    if mops is None:
        from lob.studies.published import SEED003_MOPS as mops
    if machine is None:
        from lob.studies.claims import get

        machine = get("s003_version_steps").machine
    first = next(iter(mops.values()))
    return K.Conclusion(f"seed 003 versions ({machine})",
                        [{"version": v, "mops": x, "vs_first": x / first}
                         for v, x in mops.items()], key="version",
                        kinds={"vs_first": "ratio"}, machine=f"{machine} (seed 003)")


# --- the bitmap against two baselines ----------------------------------------------------------

def bitmap_pairs(engines: Sequence[str], bitmap_pair: Sequence[str]) -> list[tuple[str, str]]:
    """The bitmap pair, then every step of ``engines`` from a rescanning version to a bitmap
    one (lob's own rescanning baseline)."""
    from lob.studies.declared import lineage

    return [tuple(bitmap_pair)] + [(a, b) for a, b in pairwise(lineage(engines))
                                   if best_rule(a) == "scan" and best_rule(b) == "bitmap"]


def measure_bitmap(bitmap_pair: Sequence[str], engines: Sequence[str], perf: dict,
                   bitmap_scale: float, repeat: int, *, replay=None) -> list[dict]:
    """M ops/s without and with the bitmap on the narrow and the sparse stream: the bitmap
    pair measured here (interleaved, ``bitmap_scale``); the lineage's scan -> bitmap steps
    read from ``perf`` (workloads it ran only)."""
    from lob.workloads import build
    from lob.workloads.diagnostics import stream_diagnostics

    perf_mops = {(r["workload"], r["engine"]): r["mops"] for r in perf["rows"]}
    rows = []
    for w in BITMAP_WORKLOADS:
        for a, b in bitmap_pairs(engines, bitmap_pair):
            if (a, b) == tuple(bitmap_pair):
                wl = build(w, scale=bitmap_scale)
                t = interleaved_throughput([a, b], wl, repeat, replay=replay)
                ma, mb = _mops(t[a]["ns_per_op"]), _mops(t[b]["ns_per_op"])
                ra = t[a]["last"]
                dg = stream_diagnostics(wl.commands, ra.outcomes, ra.fills)
            elif w in perf["shape"]:
                ma, mb, dg = perf_mops[(w, a)], perf_mops[(w, b)], perf["shape"][w]
            else:
                continue
            rows.append({"workload": w, "pair": f"{a} -> {b}", "baseline_best": best_rule(a),
                         "commands": dg["commands"], "resting_mean": dg["resting_mean"],
                         "mops_without": ma, "mops_with": mb, "with_over_without": mb / ma})
    return rows


def _pair_label(bitmap_pair: Sequence[str]) -> str:
    return f"{bitmap_pair[0]} -> {bitmap_pair[1]}"


def bitmap_table(rows: list[dict], bitmap_pair: Sequence[str]) -> K.Conclusion:
    """The pairs' M ops/s without and with the bitmap; per stream the bitmap pair's ratio in
    words, and the rescanning baseline's ratios when the lineage has such a step."""
    t = K.Conclusion("bitmap", rows, key=["workload", "pair"],
                     kinds={"commands": "count", "resting_mean": "count",
                            "with_over_without": "ratio"})
    pair = _pair_label(bitmap_pair)
    for w in BITMAP_WORKLOADS:
        t.say(f"On {w}, adding the bitmap to the {t.cell((w, pair), 'baseline_best')} baseline "
              f"gives {t.cell((w, pair), 'with_over_without')}x the throughput.")
    resc = [r for r in rows if r["baseline_best"] == "scan"]
    if resc:
        t.say("Against lob's rescanning baseline the bitmap gives " + ", ".join(
            f"{t.cell((r['workload'], r['pair']), 'with_over_without')}x ({r['pair']}, "
            f"{r['workload']})" for r in resc)
            + ": there it removes a scan problem, which lobster's narrow book never had.")
    return t


# --- the claims ---------------------------------------------------------------------------------

def claims(bitmap_rows: list[dict], bitmap_pair: Sequence[str], perf: dict,
           engines: Sequence[str]) -> dict[str, dict]:
    """claim id -> :func:`lob.studies.claims.measurement`: the bitmap on the narrow and the
    sparse stream (its baseline named in the diagnostics), and the lineage's first-to-last
    step on the replay stream (when that stream ran)."""
    from lob.studies.claims import measurement
    from lob.studies.declared import lineage

    engines = lineage(engines) or list(engines)  # the version steps: lob's lineage only
    pair = _pair_label(bitmap_pair)
    resc = [r for r in bitmap_rows if r["baseline_best"] == "scan"]
    out = {}
    for cid, w in (("s003_bitmap_narrow", BITMAP_WORKLOADS[0]),
                   ("s003_bitmap_sparse", BITMAP_WORKLOADS[1])):
        r = next(x for x in bitmap_rows if x["workload"] == w and x["pair"] == pair)
        out[cid] = measurement(
            r["with_over_without"],
            diagnostics={"baseline": BASELINE[best_rule(bitmap_pair[0])],
                         "resting_mean": r["resting_mean"], "commands": int(r["commands"])},
            explain={"against lob's rescanning baseline": ", ".join(
                f"{K.fmt(x['with_over_without'])}x" for x in resc if x["workload"] == w)},
            detail=f"{pair} M ops/s")
    m = {r["engine"]: r["mops"] for r in perf["rows"] if r["workload"] == REPLAY}
    if REPLAY in perf["shape"] and engines[0] in m and engines[-1] in m:
        out["s003_version_steps"] = measurement(
            m[engines[-1]] / m[engines[0]],
            diagnostics={"resting_mean": perf["shape"][REPLAY]["resting_mean"]},
            explain={"lob's steps": " -> ".join(engines)},
            detail=f"{engines[-1]} / {engines[0]} M ops/s")
    return out


# --- a third-party engine beside lob's, and which of its costs are its shim's -------------------

# how the orderly_chaos shim runs each command type over orderly-chaos's C API (the header of
# lob/engines/foreign/adapters/orderly_chaos.cpp): "native" is one call of that API, so the
# cost is orderly-chaos's own; the rest is the shim's emulation of what the API lacks
SHIM_HOW = {
    "LIMIT": "native: oc_book_limit", "MARKET": "native: oc_book_market",
    "CANCEL": "native: oc_book_cancel (unknown ids answered by the shim's live bit)",
    "POST_ONLY": "emulated: best-price check, then oc_book_limit",
    "IOC": "emulated: depth walk (oc_book_depth pages), then oc_book_market",
    "FOK": "emulated: depth walk (oc_book_depth pages), then oc_book_market",
    "NOTIONAL": "emulated: depth walk, then oc_book_market",
    "MODIFY": "emulated: oc_book_reduce, or cancel + re-add",
    "MASS_CANCEL:ALL": "native: oc_book_clear (+ the shim's arrays)",
    "MASS_CANCEL:SIDE": "emulated: the shim's id list, oc_book_cancel per hit",
    "MASS_CANCEL:OWNER": "emulated: the shim's id list, oc_book_cancel per hit",
    "MASS_CANCEL:PRICE_RANGE": "emulated: the shim's id list, oc_book_cancel per hit"}
BESIDE = ("v2@numba", "c_book")  # lob's allocation-free kernel, lob's example C engine
BESIDE_WORKLOADS = ("lobster_replay", "cpp_comprehensive")
BESIDE_ROUNDS = 5  # rotating rounds at least (5: the first with an interval of the median)
BESIDE_MAX_SCALE = 0.25  # at most this share of the published sizes (250k and 500k commands:
                         # p99.9 supported, ~15 s of the batch instead of ~55 s at 1.0)
SHIM_CALL = {"within noise": "no cost of the shim's shown",
             "slower": "the shim adds cost",
             "faster": "the shim is faster: it answers some commands from its own arrays",
             "inconclusive": "no call: the interval straddles 1, or too few rounds"}


def measure_beside(engines: Sequence[str], scale: float, repeat: int, *, say=print,
                   measure=None) -> dict:
    """Each engine of ``engines`` outside lob's lineage (a third-party engine behind the C
    ABI) beside :data:`BESIDE` on :data:`BESIDE_WORKLOADS` at ``scale`` (at most
    :data:`BESIDE_MAX_SCALE`), interleaved in
    ``max(repeat, BESIDE_ROUNDS)`` rotating rounds (the adapters' ``measure_beside``: ns/op,
    work ns/op, p50/p99/p99.9, per command type), and the shim against the engine driven
    natively on ``lobster_replay`` (``shim_cost``) when its library has a native driver. A
    stream whose config the engine does not declare runs as a copy with a declared STP mode
    for every engine alike, and is labelled so. Engines that cannot be built here (no C
    compiler for ``c_book``) are left out with one line to ``say``. Returns ``{engine:
    {"beside": ..., "shim": ... or None}}``."""
    from lob.studies import declared

    outsiders = [e for e in engines if e not in declared.lineage(engines)]
    if not outsiders:  # nothing to set beside lob's engines (e.g. the adapter is not built)
        return {}
    m = measure or declared._measure_module()
    others = list(BESIDE)
    if "c_book" in others:
        try:
            m.c_book()
        except Exception as e:  # no C compiler: one line, then without it
            say(f"c_book is not available here ({e}); measured without it")
            others.remove("c_book")
    rounds = max(repeat, BESIDE_ROUNDS)
    scale = min(scale, BESIDE_MAX_SCALE)
    out = {}
    for e in outsiders:
        res = m.measure_beside(e, tuple(others), BESIDE_WORKLOADS, scale=scale, rounds=rounds)
        try:
            shim = m.shim_cost(e, BESIDE_WORKLOADS[0], scale=scale, rounds=rounds)
        except AttributeError:  # the library has no native driver: no shim / native split
            shim = None
        out[e] = {"beside": res, "shim": shim}
    return out


def _stream(name: str, w: dict, notes: Sequence[str]) -> str:
    """A stream's label: its name, and ``(STP NONE copy)`` when it ran with a changed STP."""
    return f"{name} (STP {w['stp']} copy)" if any(n.startswith(f"{name}:") for n in notes) \
        else name


def beside_table(engine: str, b: dict) -> K.Conclusion:
    """ns/op (median of the rounds), work ns/op (per-op durations up to 50 us: preemption left
    out), p50/p99/p99.9 per stream and engine, and ``engine`` over each other engine (work
    ns/op: the median of the per-round ratios, its interval's call); a stream run as an STP
    copy is labelled so in its rows and named in a sentence."""
    res = b["beside"]
    rows = []
    for name, w in res["workloads"].items():
        label = _stream(name, w, res["notes"])
        for e, v in w["engines"].items():
            r = w["ratios"].get(e, {}).get("work_ns_per_op")
            rows.append({"stream": label, "engine": e, "count": w["timed"],
                         "ns_op": v["ns_per_op"]["median"],
                         "work_ns_op": v["work_ns_per_op"]["median"],
                         **{k: v[k]["median"] for k in ("p50", "p99", "p99.9")},
                         f"{engine}_over": None if r is None else r["median"],
                         "call": None if r is None else r["change"]})
    t = K.Conclusion(f"beside ({engine})", rows, key=["stream", "engine"],
                     kinds={f"{engine}_over": "ratio", "call": "label"},
                     note=f"{res['rounds']} rotating rounds; {engine}_over: {engine}'s work "
                          f"ns/op over the row engine's (median of the per-round ratios)")
    for name, w in res["workloads"].items():
        label = _stream(name, w, res["notes"])
        for o in w["ratios"]:
            t.say(f"On {label}, {engine}'s work ns/op is {t.cell((label, o), f'{engine}_over')}"
                  f"x {o}'s ({t.cell((label, o), 'call')}).")
    for n in res["notes"]:
        t.say(f"Run as a copy, for every engine alike: {n}.")
    return K.conclude_suppressed(t)


def shim_table(engine: str, b: dict, *, how: dict | None = None) -> K.Conclusion:
    """Per stream and command type: ``engine``'s p50 / p99 beside the others', how its shim
    runs the type (:data:`SHIM_HOW`: one native call, or emulated), and on the native types of
    ``lobster_replay`` the shim's work ns/op over the engine driven natively, with its call.
    Sentences: which types are emulated (their cost beyond a native engine's is the shim's),
    and per native type what the shim / native ratio says."""
    how = SHIM_HOW if how is None else how
    res, shim = b["beside"], b["shim"]
    native = (shim or {}).get("types", {})
    rows = []
    for name, w in res["workloads"].items():
        label = _stream(name, w, res["notes"])
        pt = w["per_type"]
        for typ, v in pt.get(engine, {}).items():
            x = native.get(typ, {}).get("work", {}).get("ratio") if name == shim_name(b) \
                else None
            rows.append({"stream": label, "type": typ, "n": v["n"],
                         **{f"{e} p50": pt[e][typ]["p50"] for e in pt if typ in pt[e]},
                         **{f"{e} p99": pt[e][typ]["p99"] for e in pt if typ in pt[e]},
                         "shim": how.get(typ, "?"),
                         "shim_over_native": None if x is None else x["median"],
                         "call": None if x is None else SHIM_CALL[x["change"]]})
    t = K.Conclusion(f"shim cost ({engine})", rows, key=["stream", "type"],
                     kinds={"shim": "label", "shim_over_native": "ratio", "call": "label"},
                     note="p50 / p99: ns per command of that type, medians over the rounds; "
                          "shim_over_native: work ns/op through lob's ABI over the same "
                          "commands sent straight to the engine's C API")
    emulated = list(dict.fromkeys(r["type"] for r in rows
                                  if str(r["shim"]).startswith("emulated")))
    if emulated:
        t.say(f"Emulated by the shim (the engine's C API has no call for them): "
              f"{', '.join(emulated)}; what they cost beyond a native engine's figure is the "
              f"shim's emulation.")
    for r in rows:
        if r["shim_over_native"] is not None:
            t.say(f"{r['type']} on {r['stream']}: shim / native work ns/op "
                  f"{t.cell((r['stream'], r['type']), 'shim_over_native')} ({r['call']}).")
    if shim is None:
        t.say("No native driver in this engine's library: the shim's own cost is not split.")
    return K.conclude_suppressed(t)


def shim_name(b: dict) -> str | None:
    """The stream the shim / native split ran on (None without one)."""
    return (b.get("shim") or {}).get("workload")

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
synthetic data (``tests/test_study_evolution_stress.py``).
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
           "bitmap_table", "claims"]

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
    diagnostics of the last replay}}``."""
    from lob.workloads import build
    from lob.workloads.diagnostics import stream_diagnostics

    rows, shape = [], {}
    for w in workloads:
        wl = build(w, scale=_scale(w, scale, scale_overrides))
        t = interleaved_throughput(list(engines), wl, repeat, replay=replay)
        sums = {t[e]["last"].checksum for e in engines}
        if len(sums) != 1:
            raise RuntimeError(f"engines disagree on {w}: checksums "
                               + ", ".join(f"{e}={t[e]['last'].checksum}" for e in engines))
        for e in engines:
            rows.append({"workload": w, "engine": e, "commands": len(wl.commands),
                         "mops": _mops(t[e]["ns_per_op"])})
        rr = t[engines[-1]]["last"]
        shape[w] = stream_diagnostics(wl.commands, rr.outcomes, rr.fills)
    return {"rows": rows, "shape": shape}


def _with_ratios(rows: list[dict]) -> list[dict]:
    """Each row with ``vs_first`` (over the workload's first engine) and ``vs_previous``
    (over the engine before it: that step's effect)."""
    out, first, prev = [], {}, {}
    for r in rows:
        w = r["workload"]
        r = dict(r)
        first.setdefault(w, r["mops"])
        r["vs_first"] = r["mops"] / first[w]
        r["vs_previous"] = r["mops"] / prev[w] if w in prev else None
        prev[w] = r["mops"]
        out.append(r)
    return out


def throughput_table(perf: dict, engines: Sequence[str]) -> K.Conclusion:
    """M ops/s per workload and engine, over the first engine and over the previous one; per
    workload the fastest, and every step that keeps less than :data:`COSTLY_STEP` of its
    parent's throughput."""
    rows = _with_ratios(perf["rows"])
    t = K.Conclusion("throughput", rows, key=["workload", "engine"],
                     kinds={"commands": "count", "vs_first": "ratio", "vs_previous": "ratio"})
    for w in dict.fromkeys(r["workload"] for r in rows):
        mine = [r for r in rows if r["workload"] == w]
        top = max(mine, key=lambda r: r["mops"])["engine"]
        t.say(f"On {w} the fastest is {top} ({t.cell((w, top), 'mops')} M ops/s, "
              f"{t.cell((w, top), 'vs_first')}x {engines[0]}).")
        for prev, e in pairwise(engines):
            if t.value((w, e), "vs_previous") < COSTLY_STEP:
                t.say(f"On {w}, {e} keeps only {t.cell((w, e), 'vs_previous')}x the throughput "
                      f"of {prev}: that step costs more than it gains on this stream.")
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
        lp.bars(ax, d.loc[list(engines)], ylabel="M ops/s (best repeat)",
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
    return [tuple(bitmap_pair)] + [(a, b) for a, b in pairwise(engines)
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
    if REPLAY in perf["shape"]:
        m = {r["engine"]: r["mops"] for r in perf["rows"] if r["workload"] == REPLAY}
        out["s003_version_steps"] = measurement(
            m[engines[-1]] / m[engines[0]],
            diagnostics={"resting_mean": perf["shape"][REPLAY]["resting_mean"]},
            explain={"lob's steps": " -> ".join(engines)},
            detail=f"{engines[-1]} / {engines[0]} M ops/s")
    return out

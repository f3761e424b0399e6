"""Version evolution and stress workloads (seed 003): the study behind
``notebooks/evolution_stress.ipynb``.

lobster's page reports replay throughput rising over its versions and a bitmap over price
levels that costs a little on its narrow book but wins on sparse ones. Its code is not
public, so lob measures analogs: its own lineage on lob's lobster-style streams
(:func:`measure_throughput`), and the bitmap against other best-price rules
(:func:`measure_bitmap`): the rescanning ``best=scan`` of the lineage, and the notebook's
pair: ``v2+tracked@numba`` (a tracked best price rescanned only when its level empties, no
level index: lob's reading of lobster's array-indexed ladder) by default, or ``v2+sorted``
(:func:`register_sorted`, pure Python), a sorted list of non-empty levels with no rescans.
Table builders (``..._table``) quote their own cells; the claims' regime (which baseline) is
named in each measurement (:func:`claims`).

Every comparison comes from at least :data:`MIN_ROUNDS` interleaved rounds, with an A/A control
in the same rounds (one engine measured twice as if it were two, :func:`aa_band`); a ratio is
called faster or slower, and an engine the fastest, only when its whole interval lies beyond
that band (:func:`call`), else "within noise" or "inconclusive".

The compiled lineage step by step, every engine side by side and the profilers' views are
their own study, :mod:`lob.studies.compiled_lineage`; a throughput step slower than its parent
is explained there (:func:`throughput_slower` gives it this study's steps).

Procedures return plain data (lists of records, dicts), so the builders are unit-tested on
synthetic data (``tests/studies/test_study_evolution_stress.py``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import pairwise
from pathlib import Path

from lob.diagnose.profile import AA
from lob.studies import conclude as K
from lob.studies.shape import Parameters as _Parameters
from lob.studies.shape import Shape
from lob.studies.study import interleaved_throughput

__all__ = ["Parameters", "SHAPE",
           "SORTED_NAME", "SORTED", "BASELINE", "BITMAP_WORKLOADS", "COSTLY_STEP",
           "register_sorted", "check_parameters", "best_rule", "measure_throughput",
           "throughput_table", "shape_table", "measure_latency", "latency_table",
           "plot_throughput", "seed_versions_table", "bitmap_pairs", "measure_bitmap",
           "bitmap_table", "claims", "SHIM_HOW", "BESIDE", "BESIDE_WORKLOADS",
           "BESIDE_MAX_SCALE", "measure_outsiders", "beside_table", "shim_table", "shim_name",
           "MIN_ROUNDS", "AA", "CLOCK", "speedup", "aa_band", "call", "aa_engine", "bar_label",
           "throughput_slower"]

# lobster's v4 -> v5 added a bitmap to a ladder that tracks its best price without rescanning;
# lob's lineage has only a rescanning baseline (best=scan), so the bitmap pair's baseline is v2
# with a sorted list of non-empty levels (best=sorted): O(log n) updates, no rescans
SORTED_NAME = "v2+sorted"
SORTED = {"levels": "pool", "best": "sorted", "fok": "early_exit", "stream": "plain",
          "loop": "single", "select": "branch", "ownsums": "always"}

# what each best-price rule costs besides the bitmap's own bit flips (the claims' regime)
BASELINE = {"scan": "rescans the ladder at every match step",
            "sorted": "sorted-list update per level change (O(log n) upkeep)",
            "tracked": "tracked best price, no per-level upkeep",
            "bitmap": "bitmap", "own": "the engine's own best-price rule"}

BITMAP_WORKLOADS = ("lobster_replay", "lobster_sparse")  # narrow replay, sparse stream
REPLAY = "lobster_replay"  # the stream of the version-steps claim
COSTLY_STEP = 0.5  # a step keeping less than this share of its parent's throughput is named
LATENCY_QS = (50, 90, 99, 99.9)
MIN_ROUNDS = 5  # interleaved rounds at least: a 90% interval of a median, and an A/A band
CONFIDENCE = 0.9  # of the intervals of medians (sign test: 93.8% from 5 rounds)
# replays are timed on the measuring thread's CPU clock (lob.diagnose.profile's default): time
# the thread spends preempted by other processes is not counted, which on a shared machine
# at a load above its cores is most of what a wall clock would add, and most of the noise
CLOCK = "cpu"
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


@dataclass(frozen=True)
class Parameters(_Parameters):
    """The notebook's parameters this study checks (names and defaults as in its cell)."""

    workloads: Sequence[str] = ("lobster_replay", "lobster_deep", "lobster_sparse",
                                "lobster_bursty")
    scale_overrides: Mapping[str, float] = field(default_factory=dict)
    bitmap_pair: Sequence[str] = ("v2+tracked@numba", "v2@numba")

    def check(self) -> None:
        check_parameters(self.workloads, self.scale_overrides, self.bitmap_pair)


def best_rule(engine: str) -> str:
    """An engine's best-price rule (its ``best`` toggle: scan, bitmap, sorted), or ``"own"``
    for an engine outside lob's lineage."""
    from lob.engines.registry import engine_spec

    return engine_spec(engine).toggles.get("best", "own")


def _scale(w: str, scale: float, scale_overrides: Mapping[str, float]) -> float:
    return scale_overrides.get(w, scale)


def _rounds(repeat: int) -> int:
    """The rounds a comparison runs: ``repeat``, at least :data:`MIN_ROUNDS`."""
    from lob.studies.shape import at_least_one

    at_least_one(repeat, "repeat")
    return max(repeat, MIN_ROUNDS)


def _interval(xs: Sequence[float], of: str = "rounds") -> tuple[float, float | None,
                                                                  float | None, str]:
    """(median, low, high, what) of ``xs`` (:func:`lob.measure.stats.median_interval`;
    low and high None with too few values)."""
    from lob.measure.stats import median_interval

    mi = median_interval(xs, CONFIDENCE, of=of)
    lo, hi = mi["ci"] if mi["ci"] else (None, None)
    return mi["median"], lo, hi, mi["what"]


def speedup(ns: Mapping[str, Sequence[float]], a: str, b: str) -> dict:
    """``a``'s throughput over ``b``'s from interleaved rounds (``ns``: engine -> ns/op per
    round, paired by round): the median of the per-round ratios ``ns[b] / ns[a]`` with its
    interval (``ratio``, ``lo``, ``hi``, ``what``, ``n``)."""
    r = [y / x for x, y in zip(ns[a], ns[b], strict=True)]
    m, lo, hi, what = _interval(r, of="interleaved rounds")
    return {"ratio": m, "lo": lo, "hi": hi, "what": what, "n": len(r)}


def aa_band(ns: Mapping[str, Sequence[float]], engine: str) -> dict:
    """The A/A band (:func:`lob.measure.stats.aa_band`) of ``engine`` measured twice in the
    same rounds (its second measurement under ``engine + AA``), with ``engine`` named."""
    from lob.measure.stats import aa_band as band

    r = [y / x for x, y in zip(ns[engine], ns[engine + AA], strict=True)]
    return {**band(r), "engine": engine}


def call(ratio: Mapping, band: Mapping) -> str:
    """The change call (:func:`lob.measure.stats.change_beyond_aa`) of a throughput ratio
    (higher is faster; ``lo``/``hi`` its interval) against an A/A band: ``faster`` /
    ``slower`` only when the whole interval lies beyond the band."""
    from lob.measure.stats import change_beyond_aa

    lo, hi = ratio.get("lo"), ratio.get("hi")
    if not lo or not hi:
        return "inconclusive"
    return change_beyond_aa(1 / hi, 1 / lo, band)  # as a cost ratio (lower is faster)


# --- throughput per version and workload -------------------------------------------------------

def _twin_replay(replay):
    """``replay`` taking ``engine + AA`` as ``engine`` (the A/A control's second copy)."""
    if replay is None:
        from lob.engines.registry import replay

    def run(engine, wl):
        return replay(engine.removesuffix(AA), wl)
    return run


def aa_engine(engines: Sequence[str]) -> str:
    """The engine measured twice (the A/A control): the last of lob's lineage among
    ``engines`` (the latency view's engine), else the last engine."""
    from lob.studies.declared import lineage

    return (lineage(engines) or list(engines))[-1]


def measure_throughput(engines: Sequence[str], workloads: Sequence[str], scale: float,
                       scale_overrides: Mapping[str, float], repeat: int, *,
                       replay=None) -> dict:
    """Per workload, the engines interleaved round by round
    (:func:`~lob.studies.study.interleaved_throughput`, ``max(repeat, MIN_ROUNDS)`` rounds,
    timed on :data:`CLOCK`), with :func:`aa_engine` measured twice in the same rounds (the
    A/A control). Returns
    ``{"rows": [{"workload", "engine", "commands", "mops", "mops_lo", "mops_hi"}] (median M
    ops/s over the rounds and its interval), "ns": {workload: {engine: [ns/op per round]}}
    (the twin under ``engine + AA``), "aa": {workload: A/A band}, "rounds": n, "kept":
    {workload: [rounds kept, rounds run]} (up to ``2 n`` rounds run while fewer than ``n`` had
    every replay on a quiet core; only those kept when there were ``n``), "shape":
    {workload: regime diagnostics of the last replay}, "skipped": [{"workload", "engine",
    "reason"}]}``: an engine whose declared capabilities exclude a workload (config or
    commands) is not run on it, and the reason is kept."""
    from lob.studies.declared import refusal
    from lob.workloads import build
    from lob.workloads.diagnostics import stream_diagnostics

    rounds = _rounds(repeat)
    rows, shape, skipped, ns, aa, kept = [], {}, [], {}, {}, {}
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
        twin = aa_engine(run)
        t = interleaved_throughput([*run, twin + AA], wl, rounds,
                                   replay=_twin_replay(replay), top_up=rounds, clock=CLOCK)
        kept[w] = [t[run[0]].get("rounds_kept", rounds), t[run[0]].get("rounds_run", rounds)]
        sums = {t[e]["last"].checksum for e in t}
        if len(sums) != 1:
            raise RuntimeError(f"engines disagree on {w}: checksums "
                               + ", ".join(f"{e}={t[e]['last'].checksum}" for e in t))
        ns[w] = {e: list(t[e]["ns_per_op"]) for e in t}
        aa[w] = aa_band(ns[w], twin)
        for e in run:
            m, lo, hi, _ = _interval([1e3 / x for x in ns[w][e]])
            rows.append({"workload": w, "engine": e, "commands": len(wl.commands),
                         "mops": m, "mops_lo": lo, "mops_hi": hi})
        rr = t[run[-1]]["last"]
        shape[w] = stream_diagnostics(wl.commands, rr.outcomes, rr.fills)
    return {"rows": rows, "ns": ns, "aa": aa, "rounds": rounds, "kept": kept, "shape": shape,
            "skipped": skipped}


def _with_ratios(perf: dict, lineage: Sequence[str] | None = None) -> list[dict]:
    """Each row with ``vs_first`` (its throughput over the workload's first engine of
    ``lineage``) and ``vs_previous`` (over the lineage engine before it: that step's effect;
    None for an engine outside the lineage, which is no step), each the median of the
    per-round ratios with its interval, ``step_call`` (``vs_previous`` against the A/A band)
    and the band (``aa_low``, ``aa_high``). ``lineage`` None: every engine."""
    out, prev, first = [], {}, {}
    short = too_short(perf)
    for r in perf["rows"]:
        if lineage is None or r["engine"] in lineage:
            first.setdefault(r["workload"], r["engine"])
    for r in perf["rows"]:
        w, e = r["workload"], r["engine"]
        if w in short:  # no ratio from replays too short to tell engines apart
            out.append({**r, "replay_us": _replay_us(r), "vs_first": None,
                        "vs_first_lo": None, "vs_first_hi": None, "vs_previous": None,
                        "vs_previous_lo": None, "vs_previous_hi": None,
                        "step_call": "too short", "aa_low": None, "aa_high": None})
            continue
        ns, band = perf["ns"][w], perf["aa"][w]
        on = lineage is None or e in lineage
        f = speedup(ns, e, first[w]) if w in first else {}
        p = speedup(ns, e, prev[w]) if on and w in prev else {}
        out.append({**r, "replay_us": _replay_us(r), "vs_first": f.get("ratio"),
                    "vs_first_lo": f.get("lo"),
                    "vs_first_hi": f.get("hi"), "vs_previous": p.get("ratio"),
                    "vs_previous_lo": p.get("lo"), "vs_previous_hi": p.get("hi"),
                    "step_call": call(p, band) if p else None,
                    "aa_low": band["low"], "aa_high": band["high"]})
        if on:
            prev[w] = e
    return out


# A replay shorter than this (the fastest engine's median, in us) is too short to tell
# engines apart: the clock's reads, the call and the cache's warm-up are a large share of it
# (lobster_sparse at 1,000 commands: ~55 us a replay read "10,669x").
MIN_REPLAY_US = 1000.0


def _replay_us(r: Mapping) -> float | None:
    """A row's median replay time in us (its commands at its median M ops/s)."""
    m = r.get("mops")
    return r["commands"] / m if m and r.get("commands") else None


def too_short(perf: dict) -> dict[str, float]:
    """Workload -> its fastest engine's median replay (us), for the streams whose fastest
    replay is under :data:`MIN_REPLAY_US`: no ratio and no call is given on them."""
    out: dict[str, float] = {}
    for w in dict.fromkeys(r["workload"] for r in perf["rows"]):
        us = [x for r in perf["rows"] if r["workload"] == w and (x := _replay_us(r))]
        if us and min(us) < MIN_REPLAY_US:
            out[w] = min(us)
    return out


def _fastest(t: K.Conclusion, perf: dict, w: str, engines_here: Sequence[str]) -> None:
    """The fastest on ``w``, said only when it is faster than every other engine beyond the
    A/A band; else which engines it is not told apart from."""
    rows = [r for r in t.rows if r["workload"] == w]
    top = max(rows, key=lambda r: r["mops"])["engine"]
    band = perf["aa"][w]
    ties = [e for e in engines_here if e != top
            and call(speedup(perf["ns"][w], top, e), band) != "faster"]
    mops = f"{t.cell((w, top), 'mops')} M ops/s"
    if band["low"] is None:
        t.say(f"On {w} no engine is called the fastest: too few rounds for an A/A band "
              f"({top} has the highest median, {mops}).")
    elif not ties:
        t.say(f"On {w} the fastest is {top} ({mops}, {t.cell((w, top), 'mops_lo')}-"
              f"{t.cell((w, top), 'mops_hi')}): faster than every other engine beyond the A/A "
              f"band ({t.cell((w, top), 'aa_low')}-{t.cell((w, top), 'aa_high')}).")
    else:
        t.say(f"On {w} no engine is the fastest beyond the A/A band ("
              f"{t.cell((w, top), 'aa_low')}-{t.cell((w, top), 'aa_high')}): {top} has the "
              f"highest median ({mops}) but is not told apart from {', '.join(ties)}.")


def _kept_note(perf: dict) -> str:
    """Which rounds the medians took: the rounds asked for, or, with a top-up, those kept (the
    quiet ones, no replay on a core shared with another hardware thread, when enough were
    found; else every round run), per workload."""
    kept = perf.get("kept") or {}
    n = perf["rounds"]
    if not kept:
        return f"the {n} interleaved rounds"
    return (f"the interleaved rounds kept ({n} asked; up to {2 * n} run while fewer than {n} "
            f"had every replay on a quiet core, only those kept when there were {n}; kept / "
            "run: " + ", ".join(f"{w} {k} / {r}" for w, (k, r) in kept.items()) + ")")


def throughput_table(perf: dict, engines: Sequence[str]) -> K.Conclusion:
    """Median M ops/s per workload and engine with its interval; throughput over the first
    engine and over the previous one (medians of per-round ratios, intervals), each step's
    call against the A/A band beside it. Per workload: the fastest only when it is faster than
    every other engine beyond the band (else the engines it is not told apart from), each
    step's call, and every step of lob's lineage that is slower beyond the band and keeps less
    than :data:`COSTLY_STEP` of its parent's throughput. Engines outside the lineage (a
    third-party engine) get ``vs_first`` over the lineage's first and a sentence of their
    own; the (workload, engine) cells not run are named with the engine's reason."""
    from lob.studies.declared import lineage

    lin = lineage(engines)
    first = lin[0] if lin else engines[0]
    rows = _with_ratios(perf, lin or None)
    twins = ", ".join(sorted({b["engine"] for b in perf["aa"].values()}))
    t = K.Conclusion(
        "throughput", rows, key=["workload", "engine"],
        kinds={"commands": "count", "replay_us": "absolute", "vs_first": "ratio",
               "vs_first_lo": "ratio",
               "vs_first_hi": "ratio", "vs_previous": "ratio", "vs_previous_lo": "ratio",
               "vs_previous_hi": "ratio", "step_call": "label", "aa_low": "ratio",
               "aa_high": "ratio"},
        note=f"mops: replays timed on the thread's CPU clock, median of {_kept_note(perf)} "
             f"(mops_lo-mops_hi: its "
             f"interval); vs_*: throughput over that engine, the median of the per-round "
             f"ratios and its interval; A/A control: {twins} measured twice in the same "
             f"rounds, aa_low-aa_high the band of its ratios; step_call: vs_previous's "
             f"interval against that band (faster / slower only when wholly beyond it); "
             f"replay_us: one replay's median time (a stream whose fastest is under "
             f"{K.fmt(MIN_REPLAY_US)} us gets no ratio)")
    short = too_short(perf)
    for w in dict.fromkeys(r["workload"] for r in rows):
        mine = [r for r in rows if r["workload"] == w]
        have = [r["engine"] for r in mine]
        if w in short:
            fast = min(mine, key=lambda r: r["replay_us"])["engine"]
            t.say(f"On {w} the fastest replay ({fast}) takes {t.cell((w, fast), 'replay_us')} "
                  f"us, under {K.fmt(MIN_REPLAY_US)} us: too short to tell engines apart, so "
                  "no ratio and no call is given on it.")
            continue
        _fastest(t, perf, w, have)
        steps = [(p, e) for p, e in pairwise([e for e in lin if e in have])]
        if steps:
            t.say(f"On {w}, each step's throughput over its parent: " + "; ".join(
                f"{e} {t.cell((w, e), 'vs_previous')}x {p} ({t.cell((w, e), 'vs_previous_lo')}"
                f"-{t.cell((w, e), 'vs_previous_hi')}), {t.value((w, e), 'step_call')}"
                for p, e in steps) + ".")
        for p, e in steps:
            if t.value((w, e), "step_call") == "slower" \
                    and t.value((w, e), "vs_previous") < COSTLY_STEP:
                t.say(f"On {w}, {e} keeps only {t.cell((w, e), 'vs_previous')}x the throughput "
                      f"of {p}: that step costs more than it gains on this stream.")
        for e in engines:
            if e not in lin and e in have and first in have:
                c = call({"lo": t.value((w, e), "vs_first_lo"),
                          "hi": t.value((w, e), "vs_first_hi")}, perf["aa"][w])
                t.say(f"On {w}, {e} (not of lob's lineage) runs {t.cell((w, e), 'mops')} M "
                      f"ops/s, {t.cell((w, e), 'vs_first')}x {first} ({c} against the A/A "
                      f"band).")
    for sk in perf.get("skipped", []):
        t.say(f"Not run: {sk['engine']} on {sk['workload']} ({sk['reason']}).")
    return t


def shape_table(perf: dict):
    """The workloads' regime diagnostics (a DataFrame, for display)."""
    import pandas as pd

    return pd.DataFrame(perf["shape"]).T[list(SHAPE_KEYS)]


def bar_label(engine: str) -> str:
    """An engine's name over two lines at its joints (``v0+pool`` over ``@numba``,
    ``orderly_`` over ``chaos``): five names fit a narrow panel unrotated, and the figure is
    laid out once instead of once per attempt."""
    return engine.replace("@", "\n@").replace("_", "_\n", 1)


def plot_throughput(perf: dict, engines: Sequence[str]):
    """One dot panel per workload: median M ops/s of each engine over the rounds as a dot,
    its interval as a bar through it (a dot plot: no bar rises from an arbitrary floor, so
    a log axis draws no length that means nothing). Engines are labelled by
    :func:`bar_label`; a panel widens with its engines (~0.8 inch each, five in the
    narrowest) and more than six a panel put the panels two to a row."""
    from lob.studies import plots as lp

    workloads = list(dict.fromkeys(r["workload"] for r in perf["rows"]))
    most = max([sum(r["workload"] == w for r in perf["rows"]) for w in workloads] or [1])
    cols = len(workloads) if most <= 6 else min(2, len(workloads))
    rows = math.ceil(len(workloads) / cols)
    fig, axes = lp.subplots(rows, cols, panel=(max(4.4, 0.8 * most + 0.4), 3.6),
                            squeeze=False)
    for ax in axes.flat[len(workloads):]:
        ax.set_visible(False)
    labels = {}
    for ax, w in zip(axes.flat, workloads, strict=False):
        by = {r["engine"]: r for r in perf["rows"] if r["workload"] == w}
        order = [e for e in engines if e in by]
        labels[ax] = [bar_label(e) for e in order]
        ys = [by[e]["mops"] for e in order]
        lo = [by[e]["mops_lo"] for e in order]
        hi = [by[e]["mops_hi"] for e in order]
        xs = list(range(len(order)))
        have = [i for i in xs if lo[i] is not None and hi[i] is not None]
        if have:
            ax.errorbar(have, [ys[i] for i in have],
                        yerr=[[ys[i] - lo[i] for i in have], [hi[i] - ys[i] for i in have]],
                        fmt="none", ecolor="k", capsize=3, lw=1)
        ax.plot(xs, ys, "o", color="C0", zorder=3)
        ax.set_xticks(xs)
        ax.set_xlim(-0.6, len(xs) - 0.4)
        lp.value_axis(ax, [v for v in (*ys, *lo, *hi) if v is not None])
        lp.category_axis(ax, [bar_label(e) for e in order])
        ax.set(ylabel="M ops/s (median of rounds)", xlabel="",
               title=f"{w}\n({perf['shape'][w]['commands']:,} cmds)")
    bad = lp.overlaps(fig)
    if bad:  # each panel's labels were fitted before the later panels moved the layout:
        for ax, texts in labels.items():  # fit them again on the figure as laid out
            lp.category_axis(ax, texts)
        bad = lp.overlaps(fig)
    if bad:
        raise RuntimeError(f"throughput_per_workload: texts overlap: {bad}")
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
                   bitmap_scale: float, repeat: int, *, replay=None,
                   scale_overrides: Mapping[str, float] | None = None) -> list[dict]:
    """Throughput without and with the bitmap on the narrow and the sparse stream: the bitmap
    pair measured here (interleaved, ``n = max(repeat, MIN_ROUNDS)`` rounds on :data:`CLOCK`,
    ``bitmap_scale``, or a stream's entry in ``scale_overrides`` (a longer narrow stream: the
    bitmap's cost there is a few % and a replay of a few ms lets one stray round set an A/A
    band near the 2x of :data:`lob.measure.stats.MAX_AA_SPREAD`),
    the pair's first engine measured twice: the A/A control; up to ``2 n`` rounds run while
    fewer than ``n`` had every replay on a quiet core, and only those kept when there were
    ``n``: a shared core widened this pair's A/A band to 0.66-1.52 in pure Python); the
    lineage's scan -> bitmap steps read from ``perf``'s rounds (workloads it ran only), with
    its A/A band. Per row: median M ops/s of each, ``with_over_without`` (the median of the
    per-round ratios) with its interval (``lo``, ``hi``; ``ci_what`` in words), the band
    (``aa_low``, ``aa_high``; ``aa_what``: how it was made), the ``call`` against it,
    ``runs`` (the rounds used) and ``ran`` (the rounds run)."""
    from lob.workloads import build
    from lob.workloads.diagnostics import stream_diagnostics

    unknown = set(scale_overrides or {}) - set(BITMAP_WORKLOADS)
    if unknown:  # refused before anything runs
        raise ValueError(f"the bitmap pair's scale_overrides name streams it does not run: "
                         f"{sorted(unknown)} (it runs {list(BITMAP_WORKLOADS)})")
    rows = []
    for w in BITMAP_WORKLOADS:
        for a, b in bitmap_pairs(engines, bitmap_pair):
            if (a, b) == tuple(bitmap_pair):
                wl = build(w, scale=_scale(w, bitmap_scale, scale_overrides or {}))
                n = _rounds(repeat)
                t = interleaved_throughput([a, b, a + AA], wl, n,
                                           replay=_twin_replay(replay), top_up=n, clock=CLOCK)
                ns = {e: t[e]["ns_per_op"] for e in t}
                ran = t[a].get("rounds_run", n)
                ra = t[a]["last"]
                dg = stream_diagnostics(wl.commands, ra.outcomes, ra.fills)
                band = aa_band(ns, a)
            elif w in perf["shape"] and a in perf["ns"][w] and b in perf["ns"][w]:
                ns, dg, band = perf["ns"][w], perf["shape"][w], perf["aa"][w]
                ran = perf.get("kept", {}).get(w, [None, len(ns[a])])[1]
            else:
                continue
            r = speedup(ns, b, a)
            rows.append({"workload": w, "pair": f"{a} -> {b}", "baseline_best": best_rule(a),
                         "commands": dg["commands"], "resting_mean": dg["resting_mean"],
                         "mops_without": _interval([1e3 / x for x in ns[a]])[0],
                         "mops_with": _interval([1e3 / x for x in ns[b]])[0],
                         "with_over_without": r["ratio"], "lo": r["lo"], "hi": r["hi"],
                         "aa_low": band["low"], "aa_high": band["high"], "call": call(r, band),
                         "runs": r["n"], "ran": ran,
                         "ci_what": r["what"] + _quiet_of(r["n"], ran),
                         "aa_what": band.get("what")})
    return rows


def _quiet_of(used: int, ran: int | None) -> str:
    """Words for a claim's interval when its rounds were the quiet ones of more run."""
    return "" if not ran or ran <= used else \
        f" (the {used} of {ran} rounds run with every replay on a quiet core)"


def _pair_label(bitmap_pair: Sequence[str]) -> str:
    return f"{bitmap_pair[0]} -> {bitmap_pair[1]}"


BITMAP_CALL = {"faster": "a gain beyond the A/A band", "slower": "a loss beyond the A/A band",
               "within noise": "within noise (inside the A/A band)",
               "inconclusive": "inconclusive (its interval reaches into the A/A band, or too "
                               "few rounds for one)"}


def bitmap_table(rows: list[dict], bitmap_pair: Sequence[str]) -> K.Conclusion:
    """The pairs' median M ops/s without and with the bitmap, the ratio with its interval and
    the A/A band beside it; per stream the bitmap pair's ratio and its call in words, and the
    rescanning baseline's ratios when the lineage has such a step."""
    t = K.Conclusion("bitmap", [{k: v for k, v in r.items() if k not in ("ci_what", "aa_what")}
                                for r in rows],
                     key=["workload", "pair"],
                     kinds={"commands": "count", "resting_mean": "count",
                            "with_over_without": "ratio", "lo": "ratio", "hi": "ratio",
                            "aa_low": "ratio", "aa_high": "ratio", "call": "label",
                            "runs": "count", "ran": "count"},
                     note="with_over_without: median of the per-round throughput ratios, lo-hi "
                          "its interval; aa_low-aa_high: the A/A band (the pair's first engine "
                          "measured twice in the same rounds); call: the interval against it; "
                          "runs: the rounds used, ran: the rounds run (the core is probed "
                          "around every replay and rounds are added while too few had every "
                          "replay on a quiet core; when enough did, only those are used)")
    pair = _pair_label(bitmap_pair)
    for w in BITMAP_WORKLOADS:
        t.say(f"On {w}, adding the bitmap to the {t.cell((w, pair), 'baseline_best')} baseline "
              f"gives {t.cell((w, pair), 'with_over_without')}x the throughput ("
              f"{t.cell((w, pair), 'lo')}-{t.cell((w, pair), 'hi')}): "
              f"{BITMAP_CALL[t.value((w, pair), 'call')]}.")
    resc = [r for r in rows if r["baseline_best"] == "scan"]
    if resc:
        t.say("Against lob's rescanning baseline the bitmap gives " + ", ".join(
            f"{t.cell((r['workload'], r['pair']), 'with_over_without')}x ({r['pair']}, "
            f"{r['workload']}, {r['call']})" for r in resc)
            + ": there it removes a scan problem, which lobster's narrow book never had.")
    return t


# --- the claims ---------------------------------------------------------------------------------

def claims(bitmap_rows: list[dict], bitmap_pair: Sequence[str], perf: dict,
           engines: Sequence[str]) -> dict[str, dict]:
    """claim id -> :func:`lob.studies.claims.measurement`: the bitmap on the narrow and the
    sparse stream (its baseline named in the diagnostics), and the lineage's first-to-last
    step on the replay stream (when that stream ran); each the median of per-round ratios of
    interleaved rounds with its interval, the A/A band of the same rounds and the count of
    rounds (``runs``)."""
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
            detail=f"{pair} M ops/s", ci=(r["lo"], r["hi"]) if r["lo"] else None,
            ci_what=r["ci_what"], aa={"low": r["aa_low"], "high": r["aa_high"],
                                      "n": r["runs"], "what": r.get("aa_what")},
            runs=r["runs"])
    first, last = engines[0], engines[-1]
    ns = perf.get("ns", {}).get(REPLAY, {})
    if REPLAY in perf["shape"] and first in ns and last in ns:
        r = speedup(ns, last, first)
        ran = perf.get("kept", {}).get(REPLAY, [None, None])[1]
        out["s003_version_steps"] = measurement(
            r["ratio"], diagnostics={"resting_mean": perf["shape"][REPLAY]["resting_mean"]},
            explain={"lob's steps": " -> ".join(engines)},
            detail=f"{last} / {first} M ops/s", ci=(r["lo"], r["hi"]) if r["lo"] else None,
            ci_what=r["what"] + _quiet_of(r["n"], ran), aa=perf["aa"][REPLAY], runs=r["n"])
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


def measure_outsiders(engines: Sequence[str], scale: float, repeat: int, *, say=print,
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
        aa = (w.get("aa") or {}).get("work_ns_per_op") or {}
        for e, v in w["engines"].items():
            r = w["ratios"].get(e, {}).get("work_ns_per_op")
            rows.append({"stream": label, "engine": e, "count": w["timed"],
                         "ns_op": v["ns_per_op"]["median"],
                         "work_ns_op": v["work_ns_per_op"]["median"],
                         **{k: v[k]["median"] for k in ("p50", "p99", "p99.9")},
                         f"{engine}_over": None if r is None else r["median"],
                         "aa_low": None if r is None else aa.get("low"),
                         "aa_high": None if r is None else aa.get("high"),
                         "call": None if r is None else r.get("call", r["change"])})
    t = K.Conclusion(f"beside ({engine})", rows, key=["stream", "engine"],
                     kinds={f"{engine}_over": "ratio", "aa_low": "ratio", "aa_high": "ratio",
                            "call": "label"},
                     note=f"{res['rounds']} rotating rounds; {engine}_over: {engine}'s work "
                          f"ns/op over the row engine's (median of the per-round ratios); "
                          f"aa_low-aa_high: the A/A control ({engine} measured twice in every "
                          "round); a call is faster / slower only beyond that band")
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


def throughput_slower(perf: dict, engines: Sequence[str], scale: float,
                      scale_overrides: Mapping[str, float]) -> dict:
    """The throughput section's steps of lob's lineage (:func:`measure_throughput`) in the
    form :func:`explain_slower` reads: per workload and step its parent (the lineage engine
    before it on that stream), the step's call against the A/A band and the scale the stream
    ran at."""
    from lob.studies.declared import lineage

    lin = lineage(engines)
    rows = []
    for r in _with_ratios(perf, lin or None):
        if r["engine"] not in lin or r["step_call"] in (None, "too short"):
            continue
        w = r["workload"]
        here = [x["engine"] for x in perf["rows"] if x["workload"] == w and x["engine"] in lin]
        rows.append({"workload": w, "step": r["engine"],
                     "parent": here[here.index(r["engine"]) - 1], "call": r["step_call"],
                     "scale": _scale(w, scale, scale_overrides)})
    return {"lineage": rows, "scale": scale}


SHAPE = Shape(parameters=Parameters,
              measure=(measure_throughput, throughput_slower, measure_latency, measure_bitmap,
                       measure_outsiders),
              tables=(throughput_table, shape_table, latency_table, seed_versions_table,
                      bitmap_table, beside_table, shim_table),
              claims=claims, plots=(plot_throughput,))

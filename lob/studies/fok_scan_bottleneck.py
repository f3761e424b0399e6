"""The FOK scan bottleneck (seed 001): the study behind ``notebooks/fok_scan_bottleneck.ipynb``.

The C++ binary-market engine's notes found that its pool + bitmask refactor (v1) ran much
faster than v0 on a limit-only stream but hardly at all on the comprehensive stream, because
a quarter of its submits are FOK and the FOK availability check scanned every crossing order;
a one-line early exit (v2) then bought an order of magnitude. This module measures each of
those claims (procedures ``measure_...``), turns the figures into tables whose sentences
quote their own cells (``..._table``), draws the plots (``plot_...``) and builds the claim
measurements (:func:`claims`). The notebook is a view over these functions.

Every procedure takes the notebook's parameters and returns plain data (dicts and lists of
records), so the table builders and the claims are unit-tested on synthetic data
(``tests/studies/test_study_fok_scan_bottleneck.py``).
"""

from __future__ import annotations

import gc
import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property, partial
from pathlib import Path

import numpy as np

from lob.measure.stats import (
    aa_band,
    change_beyond_aa,
    median_interval,
    ratio_interval,
    ratio_interval_what,
    rotations,
    sequential_level,
)
from lob.semantics import checksum, counters
from lob.studies import conclude as K
from lob.studies.shape import Parameters as _Parameters
from lob.studies.shape import Shape
from lob.studies.study import WARMUP_COMMANDS, interleaved_throughput

__all__ = ["Parameters", "SHAPE",
           "SEED_COMMANDS", "COMPREHENSIVE", "LIMIT_ONLY", "TAIL_PIVOT", "SWEEP_MIN_REPEAT",
           "check_parameters", "toggles_of", "fok_of", "step", "aa_name",
           "measure_comprehensive", "comprehensive_table", "v1_v2_interval", "v1_v2_pairs_table",
           "regime", "claim_edges", "measure_limit_pairs", "limit_interval", "limit_aa",
           "limit_table", "machine_effect", "machine_effect_table", "counters_table",
           "limit_split", "limit_split_table", "measure_cpp_v1_v2", "CPP_V1_V2", "built",
           "measure_v01_pairs", "v01_table", "measure_p99_rounds", "p99_rounds_table",
           "with_grid", "measure_latency", "latency_table", "copy_latency_table",
           "measure_depth_sweep", "seed_sweep_row", "depth_sweep_table",
           "plot_v1_v2_vs_depth", "measure_fok_depth", "fok_depth_table", "plot_fok_vs_depth",
           "claims"]

SEED_COMMANDS = 2_000_000  # the seed's stream length (scale 1.0 of both streams)
COMPREHENSIVE = "cpp_comprehensive"  # all four order types, a quarter of the submits FOK
LIMIT_ONLY = "cpp_limit_only"
FOK_DEPTH = "fok_depth"  # worst-case FOK probes over a book of `depth` resting asks
FOK_DEPTH_UNIT = 100_000  # fok_depth's resting orders at scale 1.0
TAIL_PIVOT = 10  # a p99 more than this many times the p50 is "a wide tail"
SWEEP_MIN_REPEAT = 3  # the depth sweep's shorter streams take at least this many rounds
REGIME_KEYS = ("commands", "resting_mean", "resting_max", "fok_pct", "cancel_hit_pct")
DEPTH_QS = (50, 90)  # percentiles of the worst-case FOK probes
CLAIM_QS = ("p50", "p99")  # the latency percentiles the tail claims use


# --- parameters and the lineage's vocabulary ---------------------------------------------------

def check_parameters(lineage: Sequence[str], limit_pair: Sequence[str], *, pairs: int = 1,
                     limit_max_repeat: int = 1) -> None:
    """One clear ValueError when the lineage lacks the seed's three versions, the limit-only
    pair is not a pair, or ``pairs`` / ``limit_max_repeat`` is not a count >= 1 (engine
    names are checked by ``Study.start``)."""
    from lob.studies.shape import at_least_one

    at_least_one(pairs, "pairs")
    at_least_one(limit_max_repeat, "limit_max_repeat")
    if len(lineage) < 3:
        raise ValueError(f"lineage needs the seed's v0, v1, v2 (and optionally more), got "
                         f"{list(lineage)!r}")
    if len(limit_pair) != 2:
        raise ValueError(f"limit_pair needs two engines (v0, v1), got {list(limit_pair)!r}")


@dataclass(frozen=True)
class Parameters(_Parameters):
    """The notebook's parameters this study checks (names and defaults as in its cell)."""

    lineage: Sequence[str] = ("v0", "v1", "v2", "v3")
    limit_pair: Sequence[str] = ("v0", "v1")
    pairs: int = 5
    limit_max_repeat: int = 9

    def check(self) -> None:
        check_parameters(self.lineage, self.limit_pair, pairs=self.pairs,
                         limit_max_repeat=self.limit_max_repeat)


def toggles_of(engine: str) -> dict:
    """An engine's toggles; empty for an engine outside lob's lineage (a plugin, a C one)."""
    from lob.engines.registry import engine_spec

    return dict(engine_spec(engine).toggles)


def fok_of(engine: str) -> str:
    """How an engine checks a FOK order: its ``fok`` toggle, or ``"own"`` for other engines."""
    return toggles_of(engine).get("fok", "own")


def step(a: str, b: str) -> str:
    """The toggles that differ between two versions (``"levels, best"``), ``"another engine"``
    when either is outside lob's lineages, ``"another backend (numba)"`` across backends."""
    from lob.engines.registry import engine_spec
    from lob.engines.toggles import NAMES

    ta, tb = toggles_of(a), toggles_of(b)
    if not ta or not tb:
        return "another engine"
    if engine_spec(a).backend != engine_spec(b).backend:  # e.g. the numba twin beside C++
        return f"another backend ({engine_spec(b).backend})"
    return ", ".join(k for k in NAMES if ta.get(k) != tb.get(k))


def _check_agree(runs: dict, what: str) -> None:
    sums = {r.checksum for r in runs.values()}
    if len(sums) != 1:
        raise RuntimeError(f"engines disagree on {what}: checksums "
                           + ", ".join(f"{e}={r.checksum}" for e, r in runs.items()))


# --- the comprehensive stream ------------------------------------------------------------------

def aa_name(engine: str) -> str:
    """The label of an engine's second copy in an interleaving (its A/A control)."""
    return f"{engine} (A/A)"


def _engine_of(name: str) -> str:
    return name.removesuffix(" (A/A)")


def _rotated(names: Sequence[str], by: int) -> list[str]:
    """``names`` started at the position round ``by`` of :func:`rotations` would give, so a
    second interleaving continues the first one's order."""
    return rotations(list(names), by + 1)[by]


def measure_comprehensive(lineage: Sequence[str], wl, repeat: int, counters_engine: str, *,
                          pairs: int = 0, replay=None) -> dict:
    """Throughput of ``lineage`` on ``wl`` (:func:`~lob.studies.study.interleaved_throughput`,
    the minimum ns/op over ``repeat`` rounds), the regime diagnostics of the last replay and
    the outcome counters of ``counters_engine`` (replayed once more if not in the lineage).

    ``pairs``: the interleaved rounds of v1 and v2 (``lineage[1]``, ``lineage[2]``) the
    v1/v2 claim is judged on, each with v2 run a second time as its A/A control
    (:func:`aa_name`): the lineage's ``repeat`` rounds carry the copy too, and
    ``pairs - repeat`` more rounds run v1, v2 and the copy only, their order continuing the
    rotation (:func:`lob.measure.stats.rotations`).

    Returns ``{"commands", "rounds", "ns_op": {engine: ns}, "diag", "counters", "counters_engine",
    "pairs": {"orders": [[name, ...] per round], "ns_op": {name: [ns per round]}}}``
    (``pairs`` None when ``pairs`` is 0).
    """
    from lob.engines.registry import replay as lob_replay
    from lob.studies.declared import refusal
    from lob.workloads.diagnostics import stream_diagnostics

    replay = replay or lob_replay
    for e in lineage:
        why = refusal(e, wl) if isinstance(e, str) and hasattr(wl, "config") else None
        if why:  # the lineage's ratios need the seed's stream itself: one line, no copy
            raise ValueError(f"lineage: {why}; an engine that declares less belongs in "
                             f"`latency`, which measures it beside the others on a copy")
    v1, v2 = lineage[1], lineage[2]
    twin = aa_name(v2)
    first = [*lineage, twin] if pairs else list(lineage)

    def by_name(name, w):
        return replay(_engine_of(name), w)

    t = interleaved_throughput(first, wl, repeat, replay=by_name)
    last = {e: t[e]["last"] for e in first}
    _check_agree(last, "the comprehensive stream")
    rr = last[lineage[-1]]
    counters = (last[counters_engine] if counters_engine in last
                else replay(counters_engine, wl)).counters
    out = {"commands": len(wl.commands), "rounds": repeat,
           "ns_op": {e: min(t[e]["ns_per_op"]) for e in lineage},
           "diag": stream_diagnostics(wl.commands, rr.outcomes, rr.fills),
           "counters": dict(counters), "counters_engine": counters_engine, "pairs": None}
    if pairs:
        trio = [v1, v2, twin]
        orders = [[e for e in o if e in trio] for o in rotations(first, repeat)]
        ns = {e: list(t[e]["ns_per_op"]) for e in trio}
        more = pairs - repeat
        if more > 0:
            names = _rotated(trio, repeat)
            m = interleaved_throughput(names, wl, more, replay=by_name, warmup=0)  # warm
            _check_agree({e: m[e]["last"] for e in trio}, "the comprehensive stream")
            orders += rotations(names, more)
            for e in trio:
                ns[e] += m[e]["ns_per_op"]
        out["pairs"] = {"orders": orders, "ns_op": ns}
    return out


def comprehensive_table(comp: dict, lineage: Sequence[str]) -> K.Conclusion:
    """ns/op per version, each over the previous one, and the toggles of each step."""
    rows, prev = [], None
    for e in lineage:
        ns = comp["ns_op"][e]
        rows.append({"engine": e, "commands": comp["commands"], "ns_op": ns,
                     "vs_previous": None if prev is None else comp["ns_op"][prev] / ns,
                     "step": "" if prev is None else step(prev, e)})
        prev = e
    n = comp.get("rounds")
    best, what = (("one round", "one measurement") if n == 1 else
                  (f"the fastest of {n or 'the'} interleaved rounds", "a floor"))
    t = K.Conclusion("comprehensive", rows, key="engine",
                     kinds={"commands": "count", "vs_previous": "ratio", "step": "label"},
                     note=f"ns_op: for each engine, {best} ({what}, with no interval: the "
                          f"v1/v2 figure with its interval and A/A band is the pairs' table "
                          f"below); vs_previous: the previous engine's ns_op over this one's")
    v0, s01, s12 = lineage[0], lineage[1], lineage[2]
    return t.say(f"On {t.cell(s01, 'commands')} commands, in {best}, {s01} over {v0} is "
                 f"{t.cell(s01, 'vs_previous')}x (step: {t.cell(s01, 'step')}), and "
                 f"{s12} over {s01} is {t.cell(s12, 'vs_previous')}x (step: "
                 f"{t.cell(s12, 'step')}).")


def v1_v2_interval(comp: dict, lineage: Sequence[str]) -> dict:
    """v1/v2 over the interleaved pairs: the ratio of the medians with its 95% bootstrap
    interval (:func:`lob.measure.stats.ratio_interval`, none from fewer than 5 pairs), the
    A/A control's band (:func:`lob.measure.stats.aa_band` of v2's second copy over v2, one
    ratio per round) and the change call against it (v2 over v1 as a cost,
    :func:`lob.measure.stats.change_beyond_aa`).

    Returns ``{"n", "ratio", "ci", "what", "aa_ratios", "aa", "call"}``."""
    v1, v2 = lineage[1], lineage[2]
    ns = comp["pairs"]["ns_op"]
    n = len(ns[v1])
    ratio, lo, hi = ratio_interval(ns[v2], ns[v1])
    aa_ratios = [b / a for a, b in zip(ns[v2], ns[aa_name(v2)], strict=True)]
    aa = aa_band(aa_ratios)
    ci = (lo, hi) if lo is not None else None
    call = change_beyond_aa(1 / hi, 1 / lo, aa) if ci else "inconclusive"
    what = ratio_interval_what(len(ns[v2]), n, of="interleaved rounds")
    return {"n": n, "ratio": ratio, "ci": ci, "what": what, "aa_ratios": aa_ratios, "aa": aa,
            "call": call}


def v1_v2_pairs_table(comp: dict, lineage: Sequence[str]) -> K.Conclusion:
    """One row per interleaved round of v1, v2 and v2's A/A copy, and the median row with
    the interval of v1/v2 and the A/A band; sentences: the ratio and its interval, and the
    change call against the A/A band (faster / slower / within noise / inconclusive)."""
    v1, v2 = lineage[1], lineage[2]
    twin = aa_name(v2)
    p = comp["pairs"]
    vi = v1_v2_interval(comp, lineage)
    ns = p["ns_op"]
    rows = [{"pair": str(i + 1), "order": ", ".join(o), "commands": comp["commands"],
             f"{v1} ns_op": a, f"{v2} ns_op": b, f"{twin} ns_op": c, "v1/v2": a / b, "A/A": r}
            for i, (o, a, b, c, r) in enumerate(zip(p["orders"], ns[v1], ns[v2], ns[twin],
                                                     vi["aa_ratios"], strict=True))]
    ci, aa = vi["ci"], vi["aa"]
    rows.append({"pair": "median", "order": "", "commands": comp["commands"], "v1/v2": vi["ratio"],
                 "interval_low": ci[0] if ci else None, "interval_high": ci[1] if ci else None,
                 "aa_low": aa["low"], "aa_high": aa["high"]})
    t = K.Conclusion("v1_v2_pairs", rows, key="pair",
                     kinds={"pair": "label", "order": "label", "commands": "count",
                            "v1/v2": "ratio", "A/A": "ratio",
                            "interval_low": "ratio", "interval_high": "ratio",
                            "aa_low": "ratio", "aa_high": "ratio"},
                     note=f"v1/v2: {v1} ns/op / {v2} ns/op (median row: the ratio of the "
                          f"medians, {vi['what']}); A/A: {twin} ns/op / {v2} ns/op, the same "
                          f"engine run twice in the same rounds ({aa['what']}).")
    head = (f"On {t.cell('median', 'commands')} commands, {v2} is {t.cell('median', 'v1/v2')}x "
            f"as fast as {v1} over {vi['n']} interleaved rounds")
    if not ci:
        return t.say(f"{head}; too few rounds for an interval, so no call.")
    t.say(f"{head} (interval {t.cell('median', 'interval_low')}-"
          f"{t.cell('median', 'interval_high')}).")
    band = (f"{v2} run twice in the same rounds differs by "
            f"{t.cell('median', 'aa_low')}-{t.cell('median', 'aa_high')}x (the A/A band)")
    words = {"faster": f"{v2} is faster than {v1} beyond it",
             "slower": f"{v2} is slower than {v1} beyond it",
             "within noise": "the difference lies inside it: within noise",
             "inconclusive": "the interval reaches into it: inconclusive"}
    return t.say(f"{band}; {words[vi['call']]}.")


def regime(diag: dict):
    """The stream's regime (reference-equal diagnostics) as a pandas Series, for display."""
    import pandas as pd

    return pd.Series({k: diag.get(k) for k in REGIME_KEYS},
                     name="regime (reference-equal diagnostics)")


# --- the limit-only stream: interleaved pairs --------------------------------------------------

def _trim() -> None:
    """Give the C heap's free pages back (glibc ``malloc_trim``; elsewhere nothing): without
    it a pure-Python replay runs slower after v0's (a big heap of freed deque blocks) than
    after v1's, an order effect of ~30% measured on the 2M limit-only stream."""
    import ctypes
    import ctypes.util

    try:
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


class _Kept:
    """What the pairs keep of a replay: its time and its outcome and fill arrays (numpy: no
    objects for the next replay's GC to walk), whose checksum and counters are computed only
    when asked - for the last round's replays; ~0.8 s a 2M-command replay, 12 replays a run."""

    def __init__(self, rr):
        self.elapsed_ns = rr.elapsed_ns
        self._outcomes, self._fills = rr.outcomes, rr.fills

    @cached_property
    def checksum(self) -> int:
        return checksum(self._outcomes, self._fills)

    @cached_property
    def counters(self) -> dict[str, int]:
        return counters(self._outcomes)


def _collected_replay(engine: str, wl) -> _Kept:
    """A replay from a collected heap, keeping only what the pairs need: a live 2M-order
    pure-Python book (or its garbage) would slow the next replay's GC."""
    from lob.engines.registry import replay

    gc.collect()
    _trim()
    return _Kept(replay(engine, wl))


def claim_edges(claim_id: str = "s001_v0_v1_limit_only") -> tuple[float, ...]:
    """The values a claim's verdict turns on: its pivot and the edges of its tolerance band
    (the limit-only pairs stop adding rounds once their interval contains none of them)."""
    from lob.studies.claims import get

    c = get(claim_id)
    edges = (c.value * (1 - c.tolerance), c.value * (1 + c.tolerance))
    return tuple(sorted({*edges, *([c.pivot] if c.pivot is not None else [])}))


def _limit_figure(ns: dict, limit_pair: Sequence[str], level: float) -> dict:
    l0, l1 = limit_pair
    ratios = [a / b for a, b in zip(ns[l0], ns[l1], strict=True)]
    return median_interval(ratios, level, of="interleaved pairs")


def _clears(ci, edges) -> bool:
    return ci is not None and not any(ci[0] <= e <= ci[1] for e in edges)


_STREAM_WORDS = {LIMIT_ONLY: "limit-only stream", COMPREHENSIVE: "comprehensive stream"}


def measure_limit_pairs(limit_pair: Sequence[str], limit_scale: float, limit_repeat: int, *,
                        limit_max_repeat: int | None = None, edges: Sequence[float] | None = None,
                        confidence: float = 0.9, replay=None,
                        split: Sequence[str] = (), split_repeat: int | None = None,
                        stream: str = LIMIT_ONLY) -> dict:
    """Interleaved rounds of the pair on the limit-only stream (each replay from a collected
    heap), the order alternating (AB, BA: ABBA over two rounds), with a sequential rule:
    ``limit_repeat`` rounds, then two more (one ABBA block) while the interval of the ratio
    (:func:`limit_interval`) contains one of ``edges`` (default: the limit-only claim's
    pivot and tolerance edges, :func:`claim_edges`), up to ``limit_max_repeat`` rounds. Each
    look's interval is at :func:`lob.measure.stats.sequential_level` of ``confidence`` over
    the looks the cap allows, so that looking again does not inflate false calls.

    ``split``: single-step engines between the pair (``v0+pool``, ``v0+bitmap``), run in
    the same rounds, so that the pair's ratio splits into its steps (:func:`limit_split`);
    ``split_repeat``: in the first that many rounds only (None: every round), so that more
    rounds of the pair alone narrow the claim's interval at the cost of its two engines.
    ``stream``: the workload (the limit-only stream by default; the comprehensive one gives
    the v0/v1 comprehensive claim its interval).

    Returns ``{"commands", "orders": [[engine, ...] per round], "ns_op": {engine: [ns per
    round]}, "counters": {engine: counters}, "load", "level", "looks", "cap", "cleared"}``
    (``load``: the higher 1-minute load average of before and after: other work shifts v0
    more than v1; ``looks``: the intervals computed; ``cleared``: whether the last one
    contains none of ``edges``)."""
    from lob.workloads import build

    cap = max(limit_repeat, limit_max_repeat or limit_repeat)
    edges = claim_edges() if edges is None else tuple(edges)
    level = sequential_level(confidence, 1 + (cap - limit_repeat + 1) // 2)
    lim = build(stream, scale=limit_scale)
    load = os.getloadavg()[0]
    names = list(dict.fromkeys([*limit_pair, *split]))
    ns: dict = {e: [] for e in names}
    orders: list = []
    last: dict = {}
    with_split = cap if split_repeat is None else split_repeat  # rounds with the split
    looks, k = 0, limit_repeat
    while True:
        upto = len(orders) + k
        for now, kk in ((names, min(upto, with_split) - len(orders)),
                        (list(limit_pair), upto - max(len(orders), with_split))):
            if kk <= 0:
                continue
            first = _rotated(now, len(orders))
            t = interleaved_throughput(first, lim, kk, replay=replay or _collected_replay,
                                       warmup=0 if orders else WARMUP_COMMANDS)  # once
            orders += rotations(first, kk)
            for e in now:
                ns[e] += t[e]["ns_per_op"]
                last[e] = t[e]["last"]
        looks += 1
        cleared = _clears(_limit_figure(ns, limit_pair, level)["ci"], edges)
        if cleared or len(orders) >= cap:
            break
        k = min(2, cap - len(orders))
    load = max(load, os.getloadavg()[0])
    _check_agree(last, f"the {_STREAM_WORDS.get(stream, stream)}")
    return {"commands": len(lim.commands), "stream": stream, "orders": orders, "ns_op": ns,
            "counters": {e: dict(r.counters) for e, r in last.items()}, "load": load,
            "level": level, "looks": looks, "cap": cap, "cleared": cleared}


def limit_interval(lim: dict, limit_pair: Sequence[str]) -> tuple[list[float], dict]:
    """The per-pair ratios (first / second engine's ns/op within a round: the pairing cancels
    the machine's drift between rounds) and the figure the claim is judged on, their median
    with its order-statistics interval (:func:`lob.measure.stats.median_interval` at the
    pairs' per-look level). Returns ``(ratios, {"median", "ci", "coverage", "n", "what"})``."""
    mi = _limit_figure(lim["ns_op"], limit_pair, lim.get("level", 0.9))
    l0, l1 = limit_pair
    return [a / b for a, b in zip(lim["ns_op"][l0], lim["ns_op"][l1], strict=True)], mi


def limit_split(lim: dict, limit_pair: Sequence[str], split: Sequence[str]) -> list[dict]:
    """The pair's ratio split into single steps, one route per engine of ``split`` (v0 ->
    middle -> v1): per step the median of its per-round ratios (first engine's ns/op over the
    second's within a round) with its order-statistics interval at the pairs' level, and
    its share of the pair's gain in log terms (log of the step's median over log of the
    pair's median), all over the rounds the split engines ran (the first ones: later rounds
    may run the pair alone). Returns one record per step, routes in ``split`` order."""
    l0, l1 = limit_pair
    level = lim.get("level", 0.9)
    both = min((len(lim["ns_op"][e]) for e in (l0, l1, *split)), default=0)
    ns = {e: xs[:both] for e, xs in lim["ns_op"].items()}
    whole = _limit_figure(ns, limit_pair, level)["median"]
    rows = []
    for mid in split:
        for a, b in ((l0, mid), (mid, l1)):
            mi = median_interval([x / y for x, y in zip(ns[a], ns[b], strict=True)], level,
                                 of="interleaved rounds")
            ci = mi["ci"]
            rows.append({"route": f"via {mid}", "step": f"{a} -> {b}", "what": step(a, b),
                         "ratio": mi["median"], "interval_low": ci[0] if ci else None,
                         "interval_high": ci[1] if ci else None,
                         "share_of_gain": (float(np.log(mi["median"]) / np.log(whole))
                                           if whole > 0 and whole != 1 else None),
                         "n": mi["n"]})
    return rows


def limit_split_table(lim: dict, limit_pair: Sequence[str], split: Sequence[str]
                      ) -> K.Conclusion:
    """:func:`limit_split` as a table; sentences: per route, each step's ratio with its
    interval and its share of the pair's gain."""
    rows = limit_split(lim, limit_pair, split)
    l0, l1 = limit_pair
    t = K.Conclusion("limit_split", rows, key="step",
                     kinds={"route": "label", "step": "label", "what": "label",
                            "ratio": "ratio", "interval_low": "ratio", "interval_high": "ratio",
                            "share_of_gain": "ratio", "n": "count"},
                     note=f"ratio: the first engine's ns/op over the second's within a round "
                          f"of the limit-only stream; share of gain: log of the step's ratio "
                          f"over log of {l0} / {l1} (the two steps of a route add to about "
                          f"1); intervals: order statistics of the rounds' ratios.")
    if not rows:
        return t.say("No single-step engines were measured: the pair's ratio is not split.")
    for r in rows:
        k = r["step"]
        ci = (f" (interval {t.cell(k, 'interval_low')}-{t.cell(k, 'interval_high')})"
              if r["interval_low"] is not None else " (too few rounds for an interval)")
        share = (f", {t.cell(k, 'share_of_gain')} of the gain" if r["share_of_gain"]
                 is not None else "")
        t.say(f"{k} ({t.cell(k, 'what')}): {t.cell(k, 'ratio')}x{ci}{share}.")
    return t


def limit_aa(lim: dict, limit_pair: Sequence[str]) -> tuple[list[float], dict]:
    """The limit-only pairs' A/A control, from their own repeats: each engine's ns/op in the
    second round of an ABBA block over the first (the same engine measured twice in the same
    interleaving, once before and once after the other; one ratio per engine and block), and
    their band (:func:`lob.measure.stats.aa_band`; none from fewer than 5 ratios)."""
    ratios = [xs[i + 1] / xs[i] for e in limit_pair
              for xs in [lim["ns_op"][e]] for i in range(0, len(xs) - 1, 2)]
    return ratios, aa_band(ratios)


def limit_table(lim: dict, limit_pair: Sequence[str], name: str = "limit_only"
                ) -> K.Conclusion:
    """One row per interleaved pair and the median row (the median pair ratio, its interval
    when the pairs are enough for one, the A/A band); sentences: the ratio, its
    interval, how many rounds the sequential rule took, and the change call against the A/A
    band (faster / slower / within noise / inconclusive)."""
    l0, l1 = limit_pair
    ratios, mi = limit_interval(lim, limit_pair)
    _, aa = limit_aa(lim, limit_pair)
    rows = [{"pair": str(i + 1), "order": ", ".join(order), "commands": lim["commands"],
             f"{l0} ns_op": a, f"{l1} ns_op": b, "ratio": x}
            for i, (order, a, b, x) in enumerate(zip(lim["orders"], lim["ns_op"][l0],
                                                     lim["ns_op"][l1], ratios, strict=True))]
    ci = mi["ci"]
    rows.append({"pair": "median", "order": "", "commands": lim["commands"],
                 "ratio": mi["median"], "interval_low": ci[0] if ci else None,
                 "interval_high": ci[1] if ci else None, "aa_low": aa["low"],
                 "aa_high": aa["high"], "step": step(l0, l1)})
    t = K.Conclusion(name, rows, key="pair",
                     kinds={"pair": "label", "order": "label", "commands": "count",
                            "ratio": "ratio", "interval_low": "ratio", "interval_high": "ratio",
                            "aa_low": "ratio", "aa_high": "ratio", "step": "label"},
                     note=f"ratio: {l0} ns/op / {l1} ns/op within a pair; interval: "
                          f"{mi['what']} (order statistics, no assumption on the noise's "
                          f"shape); A/A: each engine's second round of an ABBA block over its "
                          f"first ({aa['what']}).")
    words = _STREAM_WORDS.get(lim.get("stream", LIMIT_ONLY), lim.get("stream"))
    head = (f"On the {words} ({t.cell('median', 'commands')} commands), {l1} is "
            f"{t.cell('median', 'ratio')}x as fast as {l0}, the median of {len(ratios)} "
            f"interleaved pairs (step: {t.cell('median', 'step')})")
    if not ci:
        return t.say(f"{head}; too few pairs for an interval.")
    # said of the interval shown, the one the verdict judges (the sequential rule's looks are
    # at a stricter level: it may have stopped on a narrower interval)
    cut = [e for e in claim_edges() if ci[0] <= e <= ci[1]]
    where = ("it lies clear of the claim's pivot and tolerance edges" if not cut else
             f"it still holds {len(cut)} of the claim's pivot and tolerance edges (claims.yaml)"
             ": no verdict on this interval")
    rule = ("the rounds stopped when the sequential look's interval cleared them"
            if lim.get("cleared") else "the rounds reached their cap")
    t.say(f"{head}; its interval is {t.cell('median', 'interval_low')}-"
          f"{t.cell('median', 'interval_high')}: {where} ({rule}).")
    if aa["low"] is None:
        return t.say("Too few A/A ratios for a band: inconclusive.")
    call = change_beyond_aa(1 / ci[1], 1 / ci[0], aa)
    words = {"faster": f"{l1} is faster than {l0} beyond it",
             "slower": f"{l1} is slower than {l0} beyond it",
             "within noise": "the difference lies inside it: within noise",
             "inconclusive": "the interval reaches into it: inconclusive"}
    return t.say(f"The same engine measured twice differs by {t.cell('median', 'aa_low')}-"
                 f"{t.cell('median', 'aa_high')}x (the A/A band); {words[call]}.")


# --- the machine effect: the seed's design built by lob, on this machine ---------------------

CPP_V1_V2 = ("v1@cpp", "v2@cpp")  # lob's C++ build of the seed's v1 and v2 (lob.engines.native)


def built(engines: Sequence[str], *, say=print) -> list[str]:
    """``engines`` when lob's C++ engines among them can be built here, else ``[]`` after
    one line saying why (no C++ compiler): the run goes on without them."""
    from lob.engines.native import NATIVE, not_built_hint

    for e in engines:
        hint = not_built_hint(e) if e in NATIVE else None
        if hint:
            say(f"{hint}; this run goes on without {', '.join(engines)}")
            return []
    return list(engines)


def measure_cpp_v1_v2(comp: dict, lineage: Sequence[str], wl, pairs: int, *,
                      engines: Sequence[str] = CPP_V1_V2, replay=None) -> dict:
    """v1/v2 of lob's C++ build of the seed's design (``engines``) on ``wl``, measured in this
    run: :func:`v1_v2_interval` of the comprehensive pairs when ``lineage``'s v1 and v2 are
    those engines (nothing run again), else ``max(pairs, 5)`` interleaved rounds of the two
    and v2's A/A copy. Returns :func:`v1_v2_interval`'s dict plus ``"engines"`` and
    ``"commands"``."""
    v1, v2 = engines
    if tuple(lineage[1:3]) == (v1, v2) and comp.get("pairs"):
        return {**v1_v2_interval(comp, lineage), "engines": [v1, v2],
                "commands": comp["commands"]}
    names = [v1, v2, aa_name(v2)]
    k = max(pairs, 5)
    t = interleaved_throughput(names, wl, k, replay=_aa_replay(replay))
    mine = {"commands": len(wl.commands),
            "pairs": {"orders": rotations(names, k),
                      "ns_op": {e: t[e]["ns_per_op"] for e in names}}}
    return {**v1_v2_interval(mine, ["", v1, v2]), "engines": [v1, v2],
            "commands": len(wl.commands)}


def _aa_replay(replay=None):
    """A replay that runs ``aa_name(e)`` as ``e`` (the A/A copy is the same engine)."""
    from lob.engines.registry import replay as lob_replay

    base = replay or lob_replay

    def run(name, wl):
        return base(_engine_of(name), wl)

    return run


def machine_effect(cpp: dict | None, *, claim=None) -> dict:
    """How far machines alone move the seed's v1/v2: its published ratio (its machine, its
    code under clang) against lob's C++ build of the same design measured in this run on
    this machine (``cpp``: :func:`measure_cpp_v1_v2`, its interval ``ci`` and ratio).
    Returns ``{"seed", "seed_machine", "low", "high", "machine", "factor_low",
    "factor_high", "tolerance"}`` (``low``/``high`` None without an interval)."""
    if claim is None:
        from lob.studies.claims import get

        claim = get("s001_v1_v2_comprehensive")
    ci = (cpp or {}).get("ci")
    lo, hi = (float(ci[0]), float(ci[1])) if ci else (None, None)
    machine = (f"this machine: {' / '.join(cpp['engines'])}, g++ -O3, "
               f"{cpp['commands']:,} commands") if cpp else "this machine"
    return {"seed": float(claim.value), "seed_machine": claim.machine, "low": lo, "high": hi,
            "machine": machine, "factor_low": lo / claim.value if ci else None,
            "factor_high": hi / claim.value if ci else None,
            "tolerance": float(claim.tolerance)}


def _beyond_machines(ci: tuple[float, float] | None, me: dict) -> str:
    """lob's interval against the seed's own ratio on the other machine, widened by the
    claim's tolerance: ``above`` / ``below`` (beyond what machines alone explain),
    ``within`` (machines alone could explain it) or ``no interval``."""
    if not ci or me["low"] is None:
        return "no interval"
    if ci[0] > me["high"] * (1 + me["tolerance"]):
        return "above"
    if ci[1] < me["low"] * (1 - me["tolerance"]):
        return "below"
    return "within"


def machine_effect_table(vi: dict, me: dict, lineage: Sequence[str] = ("v0", "v1", "v2")
                         ) -> K.Conclusion:
    """The seed's v1/v2 on its machine, lob's C++ build of the same design measured in this
    run on this machine (:func:`machine_effect`), and the interval of the lineage the run
    measured (``vi``, :func:`v1_v2_interval`), each over the published figure; sentences:
    how far the machine (and compiler) alone moved the seed's ratio, against the claim's
    tolerance, and whether the lineage's figure lies beyond the C++ build's."""
    ci = vi["ci"]
    cpp = "lob's C++ build of the seed's design"
    rows = [{"figure": f"seed 001 as published ({me['seed_machine']})", "v1/v2": me["seed"],
             "over published": 1.0}]
    if me["low"] is not None:
        rows += [{"figure": f"{cpp}, interval {end}", "v1/v2": x, "over published": f}
                 for end, x, f in (("low", me["low"], me["factor_low"]),
                                   ("high", me["high"], me["factor_high"]))]
    s01, s12 = lineage[1], lineage[2]
    lob = f"{s01} / {s12}"
    if ci and me["low"] is not None:
        rows += [{"figure": f"{lob}, interval {end}", "v1/v2": x,
                  "over published": x / me["seed"], "over C++ build": x / ref}
                 for end, x, ref in (("low", ci[0], me["high"]), ("high", ci[1], me["low"]))]
    t = K.Conclusion("machine_effect", rows, key="figure",
                     kinds={"figure": "label", "v1/v2": "ratio", "over published": "ratio",
                            "over C++ build": "ratio"},
                     note=f"The claim's tolerance: +-{me['tolerance']:.0%} of the published "
                          f"figure. {cpp}: {me['machine']} (lob/engines/native, written from "
                          "the seed's description of its design). Over C++ build: the "
                          "lineage's low end over the build's high, its high end over the "
                          "build's low.")
    if me["low"] is None:
        return t.say(f"{cpp} has no interval in this run (too few rounds), so no call on "
                     "how far the machine moves the seed's ratio.")
    pub, lo_r, hi_r = rows[0]["figure"], rows[1]["figure"], rows[2]["figure"]
    moved = (f"On this machine the seed's design gives v1/v2 {t.cell(lo_r, 'v1/v2')}-"
             f"{t.cell(hi_r, 'v1/v2')}x against {t.cell(pub, 'v1/v2')}x published, "
             f"{t.cell(lo_r, 'over published')}-{t.cell(hi_r, 'over published')}x the "
             "published figure")
    tol = me["tolerance"]
    if me["factor_high"] > 1 + tol or me["factor_low"] < 1 - tol:
        t.say(f"{moved}: more than the claim's tolerance of +-{tol:.0%}, so a ratio measured "
              "on another machine (and compiler) can miss the seed's by more than the "
              "tolerance with no difference in the design.")
    else:
        t.say(f"{moved}: within the claim's tolerance of +-{tol:.0%}.")
    where = _beyond_machines(ci, me)
    if where == "no interval":
        return t.say(f"{lob} has no interval here, so no call on it.")
    said = (f"{lob}'s {t.cell(f'{lob}, interval low', 'v1/v2')}-"
            f"{t.cell(f'{lob}, interval high', 'v1/v2')}x is "
            f"{t.cell(f'{lob}, interval low', 'over C++ build')}-"
            f"{t.cell(f'{lob}, interval high', 'over C++ build')}x the C++ build's")
    return t.say({"above": f"{said}: beyond what the machine alone explains (above).",
                  "below": f"{said}: beyond what the machine alone explains (below).",
                  "within": f"{said}: within what the machine alone (and the tolerance) "
                            "explains."}[where])


# --- the published counters --------------------------------------------------------------------

def _lob_counters(comp: dict, lim: dict, limit_pair: Sequence[str]) -> dict:
    return {**comp["counters"],
            "limit_only_remaining_sum": lim["counters"][limit_pair[-1]]["remaining_sum"]}


def counters_table(comp: dict, lim: dict, limit_pair: Sequence[str], *,
                   published: dict | None = None) -> K.Conclusion:
    """lob's outcome counters beside the seed's published ones (claim ``s001_counters``);
    they can match only on the seed-sized streams."""
    if published is None:
        from lob.studies.claims import get

        published = get("s001_counters").value
    ours = _lob_counters(comp, lim, limit_pair)
    col = "published (seed 001, any machine)"
    rows = [{"counter": k, "lob": ours.get(k), col: v, "equal": ours.get(k) == v}
            for k, v in published.items()]
    t = K.Conclusion("counters", rows, key="counter",
                     kinds={"lob": "count", col: "count", "equal": "label"})
    if not (comp["commands"] == SEED_COMMANDS and lim["commands"] == SEED_COMMANDS):
        return t.say("These streams are shorter than the seed's, so the counters cannot match; "
                     "the full-size run compares them exactly.")
    differ = [r["counter"] for r in rows if not r["equal"]]
    if not differ:
        return t.say("Every published counter is reproduced exactly.")
    return t.say("Counters that differ: " + ", ".join(differ) + ".")


# --- latency on the comprehensive stream -------------------------------------------------------

GRID_BELOW_NS = 2048  # the grid is read from durations under this (an HDR histogram's exact range)
GRID_MIN_SAMPLES = 100  # fewer durations under it: the grid is not measured


def _short(durations) -> np.ndarray:
    d = np.asarray(durations).ravel()
    return d[(d > 0) & (d < GRID_BELOW_NS)]


def with_grid(clock: dict | None, durations, *, timed_by: dict | None = None) -> dict | None:
    """``clock`` with the tick its durations are known to: the clock's own resolution where
    lob knows the clock (the cycle counter), else the grid they fall on, measured from the
    samples (:func:`lob.measure.stats.clock_tick`: ``grid_ns``, ``grid_share``, ``grid_n``,
    ``grid_what``), unless the capture measured it already;
    :func:`lob.studies.conclude.clock_line` shows it under a latency table. Only durations
    under :data:`GRID_BELOW_NS` are read (a tick of ~10 ns
    shows there; the grid search's cost grows with the largest value), and none is measured
    from fewer than :data:`GRID_MIN_SAMPLES` of them (the line then says so). ``timed_by``:
    the record of the clock that timed the durations, when not ``clock`` (``{}``: several
    clocks, so the tick is measured from the samples)."""
    from lob.measure.clock import known_tick
    from lob.measure.stats import clock_tick

    d = _short(durations)
    timed_by = clock if timed_by is None else timed_by
    if clock is None or "grid_ns" in clock or (len(d) < GRID_MIN_SAMPLES
                                               and known_tick(timed_by) is None):
        return clock
    g = clock_tick(d, clock=timed_by)
    return {**clock, "grid_ns": g["tick_ns"], "grid_share": g["share_on_grid"],
            "grid_n": int(g["n"]), "grid_what": g["what"]}


def _latency_rows(engines: Sequence[str], wl, out: str | Path, capture, suffix: str = ""):
    from lob.studies.claims import clock_record

    rows, clock, clocks = [], None, {}
    for e in engines:
        cp = capture(e, wl)
        name = getattr(wl, "name", COMPREHENSIVE)
        K.save_hgrm(cp["durations"], Path(out) / f"{e}__{name}{suffix}.hgrm")
        clock = with_grid(cp["clock"], cp["durations"])
        r = K.percentile_row(cp["durations"])
        rows.append({"engine": e, **r, "mean": float(cp["durations"].mean()),
                     "p99/p50": r["p99"] / r["p50"] if isinstance(r["p99"], float) else None})
        short = _short(cp["durations"])
        if len(short) >= GRID_MIN_SAMPLES:
            clocks[e] = clock_record(short, {q: r[q] for q in CLAIM_QS
                                             if isinstance(r[q], float)}, clock=cp["clock"])
    return rows, clock, clocks


def measure_latency(engines: Sequence[str], wl, out: str | Path, *, capture=None,
                    copy=None) -> dict:
    """Closed-loop per-op latency of each engine on ``wl`` (``.hgrm`` saved into ``out`` as
    ``<engine>__<workload name>.hgrm``, ``cpp_comprehensive`` by default).

    An engine whose declared capabilities exclude ``wl`` (orderly_chaos declares STP NONE
    only; the C++ seed's streams run with CANCEL_MAKER) is left out of ``rows``; instead every
    engine is measured on the STP copy the engine declares (``copy``: ``(engines, wl) ->
    (copy, note)``, default :func:`lob.studies.declared.stp_none_copy`; ``.hgrm`` named
    ``<engine>__<workload>_stp_<mode>.hgrm``), so it stands beside the others on one stream,
    apart from the seed's. Returns ``{"rows": [percentile row per engine run on wl], "clock" (with
    its grid measured from the samples, :func:`with_grid`), "clocks": {engine:
    :func:`lob.studies.claims.clock_record` of its p50 and p99}, "copy": None or {"note",
    "stp", "rows"}}``."""
    from lob.studies import declared

    capture = capture or K.capture
    copy = copy or declared.stp_none_copy
    other, note = copy(engines, wl) if hasattr(wl, "config") else (wl, None)
    ok = engines if note is None else [e for e in engines if declared.refusal(e, wl) is None]
    rows, clock, clocks = _latency_rows(ok, wl, out, capture)
    res = {"rows": rows, "clock": clock, "clocks": clocks, "copy": None}
    if note is not None:
        stp = other.config.stp.name
        crow, cclock, _ = _latency_rows(engines, other, out, capture, f"_stp_{stp.lower()}")
        res["copy"] = {"note": note, "stp": stp, "rows": crow}
        res["clock"] = clock or cclock
    return res


def measure_p99_rounds(lineage: Sequence[str], wl, rounds: int, *, capture=None
                       ) -> dict | None:
    """v1's p99 over v2's in ``rounds`` more captures of the two (the lineage's v1 and v2)
    on ``wl``, the order alternating (v1, v2 then v2, v1): one ratio per round, whose median
    and order-statistics interval (:func:`lob.measure.stats.median_interval`) the v1/v2 p99
    claim is judged on. None when ``rounds`` is 0 (the claim then has the latency table's
    one capture). Returns ``{"engines", "p99": {engine: [ns per round]}, "ratios",
    "median", "ci", "what", "n"}``."""
    if not rounds:
        return None
    # only the p99s are read: no capture measures its clock's grid (the latency table's has)
    capture = capture or partial(K.capture, grid=False)
    v1, v2 = lineage[1], lineage[2]
    p99: dict = {v1: [], v2: []}
    for i in range(rounds):
        for e in ((v1, v2) if i % 2 == 0 else (v2, v1)):
            r = K.percentile_row(capture(e, wl)["durations"], qs=(99,))
            p99[e].append(r["p99"])
    ratios = [a / b for a, b in zip(p99[v1], p99[v2], strict=True)
              if isinstance(a, float) and isinstance(b, float)]
    mi = median_interval(ratios, of="interleaved captures") if ratios else \
        {"median": None, "ci": None, "what": "no p99 (too few samples)", "n": 0}
    return {"engines": [v1, v2], "p99": p99, "ratios": ratios, "median": mi["median"],
            "ci": mi["ci"], "what": mi["what"], "n": mi["n"]}


def p99_rounds_table(pr: dict) -> K.Conclusion:
    """One row per capture round (each engine's p99 and their ratio) and the median row with
    its interval; a sentence: the median ratio and its interval."""
    v1, v2 = pr["engines"]
    rows = [{"round": str(i + 1), f"{v1} p99": a, f"{v2} p99": b,
             "v1/v2 p99": a / b if isinstance(a, float) and isinstance(b, float) else None}
            for i, (a, b) in enumerate(zip(pr["p99"][v1], pr["p99"][v2], strict=True))]
    ci = pr["ci"]
    rows.append({"round": "median", "v1/v2 p99": pr["median"],
                 "interval_low": ci[0] if ci else None, "interval_high": ci[1] if ci else None})
    t = K.Conclusion("p99_rounds", rows, key="round",
                     kinds={"round": "label", "v1/v2 p99": "ratio", "interval_low": "ratio",
                            "interval_high": "ratio"},
                     note=f"p99 in ns per capture; interval: {pr['what']}.")
    head = (f"Over {len(rows) - 1} interleaved captures, {v1}'s p99 is "
            f"{t.cell('median', 'v1/v2 p99')}x {v2}'s (median of the rounds' ratios)")
    if not ci:
        return t.say(f"{head}; too few rounds for an interval.")
    return t.say(f"{head}, interval {t.cell('median', 'interval_low')}-"
                 f"{t.cell('median', 'interval_high')}.")


def latency_table(lat: dict) -> K.Conclusion:
    """Percentiles per engine; each engine's p99 over its p50 in words (a wide tail above
    :data:`TAIL_PIVOT`); the percentiles hidden for want of samples named."""
    t = K.Conclusion("latency", lat["rows"], key="engine",
                     kinds={"warmup_dropped": "count", "p99/p50": "ratio"},
                     note=K.clock_line(lat["clock"]))
    for r in lat["rows"]:
        e = r["engine"]
        K.conclude_ratio(t, e, "p99/p50", what=f"{e}'s p99 over its p50", pivot=TAIL_PIVOT,
                         above="a wide tail", below="a narrow tail")
    return K.conclude_suppressed(t)


def copy_latency_table(lat: dict) -> K.Conclusion | None:
    """The latency of every latency engine on the STP copy (None when none ran): its own
    table, apart from the seed's stream, with the change named in a sentence and each
    engine's p99 / p50 in words."""
    c = lat.get("copy")
    if not c:
        return None
    t = K.Conclusion(f"latency ({COMPREHENSIVE}, STP {c['stp']} copy)", c["rows"], key="engine",
                     kinds={"warmup_dropped": "count", "p99/p50": "ratio"},
                     note=K.clock_line(lat["clock"]))
    t.say(f"The same commands with another STP mode, so an engine that declares only it runs "
          f"beside the others: {c['note']}. These rows are not the seed's stream.")
    for r in c["rows"]:
        e = r["engine"]
        K.conclude_ratio(t, e, "p99/p50", what=f"{e}'s p99 over its p50", pivot=TAIL_PIVOT,
                         above="a wide tail", below="a narrow tail")
    return K.conclude_suppressed(t)


# --- why the early exit pays: v1/v2 against book depth -----------------------------------------

def measure_depth_sweep(lineage: Sequence[str], comp: dict, wl_scale: float,
                        sweep_scales: Sequence[float], repeat: int, *, replay=None) -> list[dict]:
    """v1/v2 ns/op on the comprehensive stream cut to each of ``sweep_scales`` (and the main
    stream, ``wl_scale``, whose figures come from ``comp``: the medians of its interleaved
    pairs when it has them, the v1/v2 claim's figure): shorter streams, shallower
    books. One record per stream, shortest first."""
    from lob.workloads import build
    from lob.workloads.diagnostics import stream_diagnostics

    s01, s12 = lineage[1], lineage[2]
    rows = []
    for sc in sorted({*sweep_scales, wl_scale}):
        if sc == wl_scale:  # the pairs' medians when measured (the v1/v2 claim's figure)
            ns = ({e: float(np.median(comp["pairs"]["ns_op"][e])) for e in (s01, s12)}
                  if comp.get("pairs") else comp["ns_op"])
            a, b, n, d = ns[s01], ns[s12], comp["commands"], comp["diag"]
        else:
            w = build(COMPREHENSIVE, scale=sc)
            t = interleaved_throughput([s01, s12], w, max(repeat, SWEEP_MIN_REPEAT),
                                       replay=replay)
            a, b, n = min(t[s01]["ns_per_op"]), min(t[s12]["ns_per_op"]), len(w.commands)
            ra = t[s01]["last"]
            d = stream_diagnostics(w.commands, ra.outcomes, ra.fills)
        rows.append({"stream": f"lob, {n:,} commands", "commands": n,
                     "resting_mean": d["resting_mean"], "resting_max": d["resting_max"],
                     "v1/v2": a / b, "scan_over_rest": (a - b) / b})
    return rows


def seed_sweep_row(sweep: list[dict] | None = None) -> dict:
    """The seed's own v1/v2 (its machine), as ratios only: the sweep table's last row. The
    seed ran this very stream, so its depth is the seed-sized stream's, read from ``sweep``
    when a row of it has the seed's length (else None: not measured at this scale)."""
    from lob.studies.claims import get
    from lob.studies.published import SEED001_NS_PER_OP

    sv = get("s001_v1_v2_comprehensive")
    ns = SEED001_NS_PER_OP[COMPREHENSIVE]
    full = [r for r in sweep or [] if r.get("commands") == SEED_COMMANDS]
    return {"stream": f"seed 001 ({sv.machine}), {SEED_COMMANDS:,} commands",
            "commands": SEED_COMMANDS,
            "resting_mean": full[0]["resting_mean"] if full else None,
            "resting_max": full[0]["resting_max"] if full else None,
            "v1/v2": sv.value, "scan_over_rest": (ns["v1"] - ns["v2"]) / ns["v2"],
            "machine": sv.machine}


def depth_sweep_table(sweep: list[dict], lineage: Sequence[str], seed: dict) -> K.Conclusion:
    """The sweep's rows and the seed's (at its own stream's depth when measured); sentences on
    how v1/v2 moves with the book's depth and where the seed's stream sits."""
    s01, s12 = lineage[1], lineage[2]
    rows = [dict(r) for r in sweep] + [{k: v for k, v in seed.items() if k != "machine"}]
    t = K.Conclusion("depth_sweep", rows, key="stream",
                     kinds={"commands": "count", "resting_mean": "count",
                            "resting_max": "count", "v1/v2": "ratio",
                            "scan_over_rest": "ratio"},
                     note="scan_over_rest: (v1 - v2) / v2 ns/op, v1's extra per-op cost in "
                          "units of v2's; the seed's row is its published ns/op on its machine, "
                          "at the depth of lob's seed-sized stream (the same commands) when "
                          "this run measured it")
    shallow, deep, sr = t.rows[0], t.rows[len(sweep) - 1], t.rows[-1]
    sh, dp = shallow["stream"], deep["stream"]
    if len(sweep) == 1:
        t.say(f"One stream only: {s01}/{s12} is {t.cell(dp, 'v1/v2')}x at a mean depth of "
              f"{t.cell(dp, 'resting_mean')} resting orders.")
    elif deep["v1/v2"] > shallow["v1/v2"]:
        t.say(f"{s01}/{s12} grows with the book: {t.cell(sh, 'v1/v2')}x at a mean depth of "
              f"{t.cell(sh, 'resting_mean')} resting orders, {t.cell(dp, 'v1/v2')}x at "
              f"{t.cell(dp, 'resting_mean')}.")
    else:
        t.say(f"{s01}/{s12} does not grow with the book here: {t.cell(sh, 'v1/v2')}x at a "
              f"mean depth of {t.cell(sh, 'resting_mean')} resting orders, "
              f"{t.cell(dp, 'v1/v2')}x at {t.cell(dp, 'resting_mean')}.")
    if sr["resting_mean"] is None:
        return t.say(f"The seed's {t.cell(sr['stream'], 'v1/v2')}x was measured on the "
                     f"{SEED_COMMANDS:,}-command stream, whose depth this run did not reach "
                     "(a smaller scale): lob's ratio at the seed's depth is not measured here.")
    return t.say(f"The seed's {t.cell(sr['stream'], 'v1/v2')}x (its machine) is at its "
                 f"stream's mean depth of {t.cell(sr['stream'], 'resting_mean')} resting "
                 f"orders, where lob's is {t.cell(dp, 'v1/v2')}x.")


def plot_v1_v2_vs_depth(sweep: list[dict], lineage: Sequence[str], seed: dict):
    """v1/v2 against the mean resting orders of each stream; the seed's ratio as one point at
    its own stream's depth (when measured; else said in the title)."""
    from lob.studies import plots as lp

    s01, s12 = lineage[1], lineage[2]
    xs = [float(r["resting_mean"]) for r in sweep]
    ys = [float(r["v1/v2"]) for r in sweep]
    fig, ax = lp.subplots(panel=(7.5, 3.8))
    ax.plot(xs, ys, "o-", label=f"lob {s01} / {s12}")
    title = "FOK early exit: payoff against book depth"
    if seed.get("resting_mean") is not None:
        sx = float(seed["resting_mean"])
        ax.plot([sx], [seed["v1/v2"]], "D", color="black",
                label=f"seed 001 v1/v2, its {SEED_COMMANDS // 1_000_000}M-command stream "
                      f"({seed['machine']})")
        xs, ys = [*xs, sx], [*ys, seed["v1/v2"]]
    else:
        title += "\n(the seed's stream is deeper than any here: its point is not drawn)"
    lp.value_axis(ax, xs, axis="x")
    lp.value_axis(ax, ys)
    ax.set(xlabel="mean resting orders over the stream", ylabel="v1 ns/op / v2 ns/op",
           title=title)
    lp.legend_outside(ax)
    return fig


# --- the worst-case FOK check against depth ----------------------------------------------------

def measure_fok_depth(engines: Sequence[str], depths: Sequence[int], probes: int, *,
                      capture=None) -> dict:
    """Per-op latency of ``probes`` worst-case FOK checks over books of each depth (every
    check walks the whole crossing side). Returns ``{"rows": [{"engine", "depth", "count",
    "p50", "p90"}], "clock"}`` (the clock with the grid of every probe short enough to show
    it, :func:`with_grid`)."""
    from lob.measure.clock import known_tick
    from lob.workloads import build

    capture = capture or K.capture
    rows, clock, short, ticks = [], None, [], set()
    for dep in depths:
        w = build(FOK_DEPTH, scale=dep / FOK_DEPTH_UNIT, n=probes)
        for e in engines:
            cp = capture(e, w)
            clock = cp["clock"]
            ticks.add(known_tick(clock))
            short.append(_short(cp["durations"]))
            r = K.percentile_row(cp["durations"], qs=DEPTH_QS)
            rows.append({"engine": e, "depth": dep, "count": r["count"],
                         **{f"p{q}": r[f"p{q}"] for q in DEPTH_QS}})
    # the grid of every short probe (all engines and depths), not of the last capture alone
    bare = None if clock is None else {k: v for k, v in clock.items()
                                       if not k.startswith("grid_")}
    # one known tick only when every capture's clock has it; else measured from the samples
    return {"rows": rows, "clock": with_grid(bare, np.concatenate(short or [[]]),
                                             timed_by=bare if len(ticks) == 1 else {})}


def _sorted_depth_rows(rows: list[dict]) -> list[dict]:
    """Rows by engine (first appearance), then depth; with p50 over the engine's shallowest."""
    engines = list(dict.fromkeys(r["engine"] for r in rows))
    out = []
    for e in engines:
        mine = sorted((dict(r) for r in rows if r["engine"] == e), key=lambda r: r["depth"])
        base = mine[0]["p50"]
        for r in mine:
            num = isinstance(r["p50"], float | int) and isinstance(base, float | int)
            r["p50_vs_shallowest"] = r["p50"] / base if num and base else None
            # every check walks the whole crossing side (depth orders) unless it reads the
            # level sums (it walks levels, not orders)
            walks = fok_of(e) != "level_sums" and isinstance(r["p50"], float | int)
            r["ns_per_order_walked"] = r["p50"] / r["depth"] if walks and r["depth"] else None
            out.append(r)
    return out


def fok_depth_table(fd: dict) -> K.Conclusion:
    """p50 / p90 of the worst-case FOK check per engine and depth; per engine, its p50 at the
    shallowest and the deepest book."""
    rows = _sorted_depth_rows(fd["rows"])
    t = K.Conclusion("fok_depth", rows, key=["engine", "depth"],
                     kinds={"depth": "count", "p50_vs_shallowest": "ratio",
                            "ns_per_order_walked": "absolute"},
                     note="ns_per_order_walked: p50 / depth, for the checks that walk every "
                          "resting order of the crossing side (not the level sums, which walk "
                          "levels); " + K.clock_line(fd["clock"]))
    lo_d, hi_d = min(r["depth"] for r in rows), max(r["depth"] for r in rows)
    for e in dict.fromkeys(r["engine"] for r in rows):
        lo, hi = (e, lo_d), (e, hi_d)
        if not isinstance(t.value(lo, "p50"), float | int) or \
                not isinstance(t.value(hi, "p50"), float | int):
            t.say(f"{e} ({fok_of(e)}): too few probes for a p50 at depth "
                  f"{t.cell(lo, 'depth')} or {t.cell(hi, 'depth')}.")
            continue
        per = (f", {t.cell(hi, 'ns_per_order_walked')} ns per order walked"
               if t.value(hi, "ns_per_order_walked") is not None else "")
        t.say(f"{e} ({fok_of(e)}): p50 {t.cell(lo, 'p50')} ns at depth {t.cell(lo, 'depth')}, "
              f"{t.cell(hi, 'p50')} ns at {t.cell(hi, 'depth')} "
              f"({t.cell(hi, 'p50_vs_shallowest')}x{per}).")
    return t


def plot_fok_vs_depth(fd: dict):
    """p50 per FOK check against the book's depth, one line per engine (its FOK rule)."""
    from lob.studies import plots as lp

    rows = _sorted_depth_rows(fd["rows"])
    fig, ax = lp.subplots(panel=(7.0, 3.8))
    for e in dict.fromkeys(r["engine"] for r in rows):
        mine = [r for r in rows if r["engine"] == e and isinstance(r["p50"], float | int)]
        ax.plot([r["depth"] for r in mine], [r["p50"] for r in mine], "o-",
                label=f"{e} ({fok_of(e)})")
    shown = [r for r in rows if isinstance(r["p50"], float | int)]
    lp.value_axis(ax, [r["depth"] for r in rows], axis="x")
    lp.value_axis(ax, [r["p50"] for r in shown])
    ax.set(xlabel="resting orders (all crossing)", ylabel="p50 ns per FOK check",
           title="worst-case FOK check against depth")
    lp.legend_outside(ax, title="engine (FOK check)")
    return fig


# --- the claims ---------------------------------------------------------------------------------

def measure_v01_pairs(lineage: Sequence[str], scale: float, v01_pairs: int, *,
                      replay=None) -> dict | None:
    """Interleaved rounds (AB, BA) of the lineage's v0 and v1 on the comprehensive stream at
    ``scale`` (:func:`measure_limit_pairs` on that stream, the v0/v1 comprehensive claim's
    edges), or None when ``v01_pairs`` is 0 (the claim then has the lineage's one round)."""
    if not v01_pairs:
        return None
    return measure_limit_pairs(lineage[:2], scale, v01_pairs, limit_max_repeat=v01_pairs,
                               edges=claim_edges("s001_v0_v1_comprehensive"),
                               stream=COMPREHENSIVE, replay=replay)


def v01_table(v01: dict, lineage: Sequence[str]) -> K.Conclusion:
    """:func:`limit_table` of the v0/v1 rounds on the comprehensive stream."""
    return limit_table(v01, lineage[:2], name="v0_v1_pairs")


def _v01_measurement(comp: dict, v01: dict | None, v0: str, v1: str) -> dict:
    """The v0/v1 comprehensive claim: from its interleaved rounds (``v01``,
    :func:`measure_limit_pairs` on the comprehensive stream: the median round ratio, its
    interval and A/A band) when measured, else the lineage's single round."""
    from lob.studies.claims import measurement

    cd = {"commands": comp["commands"], "step": step(v0, v1)}
    explain = {"FOK share of timed submits %": comp["diag"]["fok_pct"]}
    if not v01:
        return measurement(comp["ns_op"][v0] / comp["ns_op"][v1], diagnostics=cd,
                           explain=explain, detail=f"{v0} / {v1} ns/op")
    _, mi = limit_interval(v01, [v0, v1])
    _, aa = limit_aa(v01, [v0, v1])
    return measurement(mi["median"], diagnostics={**cd, "commands": v01["commands"]},
                       explain=explain, ci=mi["ci"], ci_what=mi["what"], aa=aa, runs=mi["n"],
                       detail=f"{v0} / {v1} ns/op, median of interleaved rounds")


def _split_explain(lim: dict, limit_pair: Sequence[str], split: Sequence[str]) -> dict | None:
    """The limit-only claim's split into single steps (beyond the seed, which could not
    split its 2.12x), for its explanation: step -> "ratio (interval), share of the gain"."""
    if not split:
        return None
    out = {}
    for r in limit_split(lim, limit_pair, split):
        ci = (f" ({r['interval_low']:.3g}-{r['interval_high']:.3g})"
              if r["interval_low"] is not None else "")
        share = (f", {r['share_of_gain']:.2f} of the gain" if r["share_of_gain"] is not None
                 else "")
        out[f"{r['step']} ({r['what']})"] = f"{r['ratio']:.3g}x{ci}{share}"
    return out


def claims(lineage: Sequence[str], limit_pair: Sequence[str], comp: dict, lim: dict,
           sweep: list[dict], seed: dict, lat: dict, me: dict | None = None,
           split: Sequence[str] = (), v01: dict | None = None,
           p99r: dict | None = None) -> dict[str, dict]:
    """claim id -> :func:`lob.studies.claims.measurement` of every claim this run measured
    (the tail claims only when the latency engines include v2, and v1 for the p99 ratio).

    The two throughput ratios carry their interval, A/A band and count of rounds (v1/v2
    from the interleaved pairs when ``comp`` has them, else a single point); v1/v2 also the
    machine effect (``me``, default :func:`machine_effect`) in its explanation; the latency
    claims the clock grid of the samples their percentiles come from."""
    from lob.studies.claims import measurement

    v0, s01, s12 = lineage[0], lineage[1], lineage[2]
    l0, l1 = limit_pair
    _, mi = limit_interval(lim, limit_pair)
    _, laa = limit_aa(lim, limit_pair)
    cd = {"commands": comp["commands"]}
    ns = comp["ns_op"]
    shallow, deep = sweep[0], sweep[-1]
    me = me or machine_effect(None)
    v12 = {"value": ns[s01] / ns[s12], "detail": f"{s01} / {s12} ns/op, one round"}
    if comp.get("pairs"):
        vi = v1_v2_interval(comp, lineage)
        ci = vi["ci"]
        v12 = {"value": vi["ratio"], "ci": ci, "ci_what": vi["what"], "aa": vi["aa"],
               "runs": vi["n"], "detail": f"{s01} / {s12} ns/op, ratio of the medians"}
        where = _beyond_machines(ci, me)
        have = ci and me["low"] is not None
        lob_x = f"{ci[0] / me['high']:.3g}-{ci[1] / me['low']:.3g}" if have else "no interval"
        v12["explain"] = {
            f"the seed's design in lob's C++ build ({me['machine']})":
                f"{me['low']:.3g}-{me['high']:.3g}" if have else "no interval",
            "the machine alone moved the seed's ratio (x)":
                f"{me['factor_low']:.3g}-{me['factor_high']:.3g}" if have else "no interval",
            "lob's interval over the C++ build's (x)": lob_x,
            "beyond what the machine alone explains": {"above": "yes (above)",
                                                       "below": "yes (below)",
                                                       "within": "no",
                                                       "no interval": "no call"}[where]}
    v12_explain = {f"v1 scan cost / v2 op cost here ({comp['commands']:,} commands)":
                   deep["scan_over_rest"],
                   "the same in the seed's figures": seed["scan_over_rest"],
                   f"v1/v2 at mean depth {shallow['resting_mean']:,.0f}": shallow["v1/v2"],
                   **v12.pop("explain", {})}
    out = {
        "s001_counters": measurement(
            _lob_counters(comp, lim, limit_pair), diagnostics=cd,
            detail=f"{comp['counters_engine']} and {limit_pair[-1]}"),
        "s001_v0_v1_limit_only": measurement(
            mi["median"], diagnostics={"commands": lim["commands"], "step": step(l0, l1),
                                       "load_avg": round(lim["load"], 2)},
            ci=mi["ci"], ci_what=mi["what"], aa=laa, runs=mi["n"],
            explain=_split_explain(lim, limit_pair, split),
            detail=f"{l0} / {l1} ns/op, median pair ratio"),
        "s001_v0_v1_comprehensive": _v01_measurement(comp, v01, v0, s01),
        "s001_v1_v2_comprehensive": measurement(
            v12.pop("value"), diagnostics=cd, explain=v12_explain, **v12),
    }
    by = {r["engine"]: r for r in lat["rows"]}
    clocks = lat.get("clocks") or {}
    if s12 in by:
        r = by[s12]
        out["s001_v2_tail"] = measurement(
            r["p99/p50"], diagnostics={**cd, "count": int(r["count"])},
            explain={"clock read, median ns": (lat["clock"] or {}).get("overhead_median_ns")},
            clock=clocks.get(s12), detail=f"{s12} p99 / p50")
    if s01 in by and s12 in by and isinstance(by[s12]["p99"], float) \
            and isinstance(by[s01]["p99"], float):
        both = [clocks[e] for e in (s01, s12) if e in clocks]
        clock = None
        if both:  # the coarser of the two grids, with the two p99s the ratio uses
            coarse = max(both, key=lambda c: c["tick_ns"] or 0)
            clock = {**coarse, "percentiles": {f"{k}/p99": by[e]["p99"]
                                               for k, e in (("v1", s01), ("v2", s12))},
                     "ratio": ["v1/p99", "v2/p99"]}
        rounds = {} if not (p99r and p99r["median"]) else {
            "ci": p99r["ci"], "ci_what": p99r["what"], "runs": p99r["n"]}
        out["s001_v1_v2_p99"] = measurement(
            p99r["median"] if rounds else by[s01]["p99"] / by[s12]["p99"], clock=clock,
            diagnostics={**cd, "count": int(by[s12]["count"])}, **rounds,
            detail=f"p99 {s01} / {s12}" + (", median of interleaved captures" if rounds
                                           else ""))
    return out


SHAPE = Shape(parameters=Parameters,
              measure=(measure_comprehensive, measure_limit_pairs, measure_cpp_v1_v2,
                       measure_latency, measure_p99_rounds, measure_depth_sweep,
                       measure_fok_depth, measure_v01_pairs),
              tables=(comprehensive_table, v1_v2_pairs_table, limit_split_table, limit_table,
                      machine_effect_table, counters_table, p99_rounds_table, latency_table,
                      copy_latency_table, depth_sweep_table, fok_depth_table, v01_table),
              claims=claims, plots=(plot_v1_v2_vs_depth, plot_fok_vs_depth))

"""Where the tail comes from (seed 000): the study behind ``notebooks/tail_analysis.ipynb``.

orderbook-rs's HDR bench suite publishes p50 / p99 / p99.9 / p99.99 for eight scenarios; six
have wide tails, ``mass_cancel_burst`` and ``stp_sweep`` narrow ones. This module measures
each scenario's tail shape in the seed's regime on one engine (:func:`measure_regime`: fresh
captures interleaved across the scenarios in rotated order, each giving its own p99 / p50,
their median with a sign-test interval), sets it beside the seed's own table
(:func:`seed_table`), measures the pure-Python versions with the cyclic GC on and off
(:func:`measure_versions`) and looks at which work the slowest 1% of ops did
(:func:`measure_sources`). Every latency table carries the clock grid measured from its
samples (:func:`grid_line`) and names its percentiles under 10 ticks of it. Tables are
:class:`~lob.studies.conclude.Conclusion` objects whose sentences quote their own cells;
:func:`claims` builds the claim measurements.

Procedures take the notebook's parameters and return plain data (records, dicts, one
DataFrame of per-op figures), so the tables, plots and claims are unit-tested on synthetic
data (``tests/studies/test_study_tail_analysis.py``). Percentile support comes only from
:mod:`lob.measure.stats`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from lob.measure.stats import (
    CLOCK_FLOOR_TICKS,
    at_clock_floor,
    clock_tick,
    median_interval,
    min_count,
    rotations,
    supported,
)
from lob.studies import conclude as K
from lob.studies import published
from lob.studies.shape import Parameters as _Parameters
from lob.studies.shape import Shape

__all__ = ["Parameters", "SHAPE",
           "QS", "TAIL_PIVOT", "MOST_PCT", "SEED000_COUNT", "WORK", "CONFIDENCE",
           "FLOOR", "GRID_MAX_NS", "check_parameters", "grid_of", "common_clock", "clock_of",
           "grid_line",
           "under_floor", "measure",
           "measure_regime", "regime_table", "seed_table", "plot_tail_shape",
           "measure_versions", "percentiles_table", "gc_table", "sources_frame",
           "measure_sources", "sources_table", "plot_tail_sources", "claims"]

QS = (50, 90, 99, 99.9, 99.99)  # the percentiles of every table (seed 000 publishes these)
TAIL_PIVOT = 10  # p99 / p50 at least this: "a wide tail" (the pivot of the s000_tail claims)
MOST_PCT = 50  # above this share of market orders meeting an empty book: "most"
# seed 000's sample count per scenario (its bench's measured ops): what its percentiles rest
# on, from claims.yaml's published section (the one home of the seeds' figures)
SEED000_COUNT: dict[str, int] = dict(published.SEED000_SAMPLES)
WORK = ("fills", "levels", "depth")  # what an op did, in the tail-sources view
FLOOR = f"under_{CLOCK_FLOOR_TICKS}_ticks"  # the column naming a row's percentiles at the floor
# The clock grid is measured from the durations under this bound (ns) only: a percentile can
# sit under 10 ticks of the coarsest grid clock_grid looks for (500 ns) only below 5,000 ns,
# and clock_grid's search grows with the largest value it is given (milliseconds of a
# pure-Python op's tail cost seconds and gigabytes)
GRID_MAX_NS = 4096
GRID_MIN = 100  # fewer durations than this under GRID_MAX_NS: no grid is measured
CONFIDENCE = 0.9  # coverage of the interval of the median of the per-capture p99 / p50
SLOWEST, REST = "slowest 1%", "rest"


def _pname(q: float) -> str:
    return f"p{q:g}"


def _tail_ratio(row: Mapping) -> float | None:
    """p99 / p50 of a percentile row, None when the count does not support a p99."""
    p99, p50 = row.get("p99"), row.get("p50")
    if isinstance(p99, float) and isinstance(p50, float) and p50 > 0:
        return p99 / p50
    return None


# --- parameters ----------------------------------------------------------------------------

def check_parameters(scenarios: Sequence[str], tail_scenario: str, repeat: int,
                     scale_overrides: Mapping[str, float], claim_captures: int = 5,
                     captures_overrides: Mapping[str, int] | None = None) -> None:
    """One clear ValueError for parameters that do not fit together (engine names are
    checked by ``Study.start``)."""
    from lob.studies.shape import at_least_one, need, one_of

    need(scenarios, "scenarios", "orderbook-rs scenario")
    one_of(tail_scenario, scenarios, "tail_scenario", "scenarios")
    at_least_one(repeat, "repeat")
    at_least_one(claim_captures, "claim_captures")
    unknown = set(scale_overrides) - set(scenarios)
    if unknown:
        raise ValueError(f"scale_overrides names scenarios not in `scenarios`: {sorted(unknown)}")
    more = dict(captures_overrides or {})
    unknown = set(more) - set(scenarios)
    if unknown:
        raise ValueError(f"captures_overrides names scenarios not in `scenarios`: "
                         f"{sorted(unknown)}")
    for k, v in more.items():
        at_least_one(v, f"captures_overrides[{k!r}]")


# --- the clock's grid, measured from the samples ---------------------------------------------

@dataclass(frozen=True)
class Parameters(_Parameters):
    """The notebook's parameters this study checks (names and defaults as in its cell)."""

    scenarios: Sequence[str] = ("add_only", "cancel_only", "aggressive_walk", "notional_walk",
                                "mixed_70_20_10", "thin_book_sweep", "mass_cancel_burst",
                                "stp_sweep")
    tail_scenario: str = "mixed_70_20_10"
    repeat: int = 1
    scale_overrides: Mapping[str, float] = field(default_factory=dict)
    claim_captures: int = 5
    captures_overrides: Mapping[str, int] = field(default_factory=dict)

    def check(self) -> None:
        check_parameters(self.scenarios, self.tail_scenario, self.repeat, self.scale_overrides,
                         self.claim_captures, self.captures_overrides)


def _low(d) -> np.ndarray:
    d = np.asarray(d)
    return d[(d > 0) & (d < GRID_MAX_NS)]


def grid_of(samples: Sequence, clock: dict | None = None) -> dict | None:
    """:func:`lob.measure.stats.clock_tick` of several arrays of durations pooled (their
    values under :data:`GRID_MAX_NS`, each array reduced to its distinct values and their
    counts first): the known resolution of ``clock`` (the record of the clock that timed
    them all) where lob knows it, else the grid measured from them; None with fewer than
    ``GRID_MIN`` such durations and no known tick."""
    from lob.measure.clock import known_tick

    vals, counts = [], []
    for d in samples:
        u, c = np.unique(_low(d), return_counts=True)
        vals.append(u)
        counts.append(c)
    if not vals or (sum(int(c.sum()) for c in counts) < GRID_MIN and known_tick(clock) is None):
        return None
    return clock_tick(np.concatenate(vals), np.concatenate(counts), clock=clock)


def common_clock(clocks: Sequence[dict | None]) -> dict | None:
    """The clock record to take the tick of captures timed by ``clocks`` from: the first
    when every one has the same known tick (:func:`lob.measure.clock.known_tick`), else None
    (several clocks, or none known: the tick is measured from the samples)."""
    from lob.measure.clock import known_tick

    ticks = {known_tick(c) for c in clocks}
    return clocks[0] if clocks and len(ticks) == 1 and None not in ticks else None


def clock_of(durations, percentiles: Mapping[str, float], clock: dict | None = None) -> dict:
    """The claim's clock record (:func:`lob.studies.claims.clock_record`) of the durations
    under :data:`GRID_MAX_NS`, timed by ``clock`` (its record: a known tick is taken from
    it); without a known tick or enough durations, a record with no tick (no floor)."""
    from lob.measure.clock import known_tick
    from lob.studies.claims import clock_record

    low = _low(durations)
    if len(low) < GRID_MIN and known_tick(clock) is None:
        return {"tick_ns": None, "share_on_grid": None,
                "what": f"{len(low)} durations under {GRID_MAX_NS} ns: too few to measure a "
                        "grid", "percentiles": {k: float(v) for k, v in percentiles.items()}}
    return clock_record(low, percentiles, clock=clock)


def read_cost(clock: dict | None) -> str:
    """What one read of the timing clock costs (its median, from the capture's own clock
    record), said under every latency table: every sample holds one read, never subtracted."""
    med = (clock or {}).get("overhead_median_ns", (clock or {}).get("median_ns"))
    if med is None:
        return "Clock read cost: not reported by this engine. "
    return (f"Clock {clock.get('source', '?')}: one read costs {K.fmt(med)} ns (median), in "
            "every sample, never subtracted. ")


def grid_line(grid: dict | None, *, marked: bool = True, clock: dict | None = None) -> str:
    """The sentence under a latency table: what one clock read costs (``clock``: the
    capture's clock record, :func:`read_cost`), the tick the durations are known to (the
    clock's known resolution, :func:`lob.measure.clock.known_tick`, else the grid measured
    from the samples, never the clock's nominal resolution), and the clock floor it sets
    (``marked``: the table has the :data:`FLOOR` column naming the percentiles under it)."""
    head = read_cost(clock) if clock is not None else ""
    return head + _grid_words(grid, marked)


def _grid_words(grid: dict | None, marked: bool) -> str:
    if not grid or grid.get("tick_ns") is None:
        why = (f" ({grid['what']})" if grid else
               f" (fewer than {GRID_MIN} of them under {K.fmt(GRID_MAX_NS)} ns)")
        return (f"Clock: the durations fall on no grid lob can measure{why}; no percentile "
                "is marked as at the clock floor.")
    tick = grid["tick_ns"]
    how = (f"each duration is known to {K.fmt(tick)} ns ({grid['what']})"
           if grid.get("saw") == "known" else
           f"durations fall on a {K.fmt(tick)} ns grid (measured from the samples: "
           f"{grid['what']})")
    return (f"Clock: {how}; percentiles under {CLOCK_FLOOR_TICKS} ticks "
            f"({K.fmt(CLOCK_FLOOR_TICKS * tick)} ns) "
            + (f"are marked in `{FLOOR}`." if marked else "are at the clock floor."))


def under_floor(row: Mapping, grid: dict | None) -> str:
    """The percentiles of ``row`` (and its max) under 10 ticks of ``grid``'s clock, named
    (``"p50, p90"``), or ``""``; a percentile its ``count`` does not support is left out."""
    tick, n = (grid or {}).get("tick_ns"), row.get("count")
    names = [k for k in (*(_pname(q) for q in QS), "max")
             if isinstance(row.get(k), int | float) and not isinstance(row.get(k), bool)
             and (n is None or k == "max" or supported(float(k[1:]), n))
             and at_clock_floor(row[k], tick)]
    return ", ".join(names)


# --- one measurement -----------------------------------------------------------------------

def measure(engine: str, wl, repeat: int, *, gc_enabled: bool = True,
            capture: Callable | None = None) -> dict:
    """``repeat`` closed-loop captures of ``engine`` on ``wl`` (fresh engines), merged.

    Returns ``{"row": percentile row (QS), "diag": regime diagnostics of the first replay,
    "clock", "untimed", "durations"}``. ``capture`` (default
    :func:`lob.studies.conclude.capture`) is injectable for tests."""
    from lob.workloads.diagnostics import stream_diagnostics

    capture = capture or K.capture
    caps = [capture(engine, wl, gc_enabled=gc_enabled) for _ in range(repeat)]
    d = np.concatenate([c["durations"] for c in caps])
    rr = caps[0]["replay"]
    return {"row": K.percentile_row(d, QS), "clock": caps[0]["clock"],
            "diag": stream_diagnostics(wl.commands, rr.outcomes, rr.fills),
            "untimed": caps[0]["untimed"], "durations": d}


def _workload(name: str, scale: float):
    from lob.workloads import build

    return build(name, scale=scale)


# --- the seed's regime, measured here ------------------------------------------------------

def measure_regime(engine: str, scenarios: Sequence[str], claim_scale: float,
                   scale_overrides: Mapping[str, float], captures: int, out: str | Path | None,
                   *, workload: Callable | None = None, capture: Callable | None = None,
                   captures_overrides: Mapping[str, int] | None = None) -> dict:
    """Every scenario on ``engine`` at ``claim_scale`` (or its override), ``captures`` fresh
    captures each, interleaved: round ``r`` captures every scenario once, in the order of
    :func:`lob.measure.stats.rotations` (so no scenario always runs first, or after the
    same neighbour). Each capture gives its own p99 / p50 (when its count supports a p99);
    the scenario's figure is the median of those, with its
    :func:`lob.measure.stats.median_interval`. ``captures_overrides`` gives a scenario more
    (or fewer) captures: repeats spent where a verdict is close (a scenario past its count
    sits out the later rounds). The merged samples give the percentile row,
    the ``.hgrm`` (``<engine>__<scenario>.hgrm`` in ``out``) and the claim's clock record.

    A scenario outside the engine's declared capabilities is not run (``skipped``, with the
    reason). Returns ``{"engine", "captures", "rows": [one regime row per scenario run],
    "diag": {scenario: diag of the first capture}, "samples": {scenario: merged durations},
    "ratios": {scenario: [per-capture p99 / p50]}, "counts": {scenario: [per-capture
    count]}, "interval": {scenario: median_interval or None}, "clock", "grid" (pooled
    clock grid), "clocks": {scenario: claims.clock_record}, "skipped"}``."""
    from lob.studies.declared import refusal
    from lob.workloads.diagnostics import stream_diagnostics

    # the regime's clock is its first capture's: no later capture measures its grid
    workload, capture = workload or _workload, capture or _grid_once()
    wls, scales, skipped = {}, {}, []
    for s in scenarios:
        scales[s] = scale_overrides.get(s, claim_scale)
        wl = workload(s, scales[s])
        why = refusal(engine, wl)
        if why:  # outside the engine's declared capabilities: named, not run
            skipped.append({"scenario": s, "engine": engine, "reason": why})
        else:
            wls[s] = wl
    caps: dict[str, list] = {s: [] for s in wls}
    want = {s: int((captures_overrides or {}).get(s, captures)) for s in wls}
    diag, untimed, clock = {}, {}, None
    for order in rotations(list(wls), max(want.values(), default=0)):
        for s in order:
            if len(caps[s]) >= want[s]:
                continue
            cp = capture(engine, wls[s])
            caps[s].append(np.asarray(cp["durations"]))
            clock = clock or cp["clock"]
            if s not in diag:  # the stream's regime: the same in every capture
                rr = cp["replay"]
                diag[s] = stream_diagnostics(wls[s].commands, rr.outcomes, rr.fills)
                untimed[s] = cp["untimed"]
    rows, samples, ratios, counts, interval, clocks = [], {}, {}, {}, {}, {}
    for s in wls:
        ratios[s] = [x for x in (_tail_ratio(K.percentile_row(d, (50, 99))) for d in caps[s])
                     if x is not None]
        counts[s] = [len(d) for d in caps[s]]
        samples[s] = d = np.concatenate(caps[s])
        r = K.percentile_row(d, QS)
        interval[s] = (median_interval(ratios[s], CONFIDENCE, of="fresh captures")
                       if ratios[s] else None)
        clocks[s] = clock_of(d, {k: r[k] for k in ("p50", "p99") if isinstance(r[k], float)},
                             clock)
        if out is not None:
            K.save_hgrm(d, Path(out) / f"{engine}__{s}.hgrm")
        ci = (interval[s] or {}).get("ci") or (None, None)
        dg = diag[s]
        rows.append({"scenario": s, "scale": scales[s], "captures": len(caps[s]),
                     "count": r["count"], "untimed": untimed[s],
                     **{_pname(q): r[_pname(q)] for q in QS}, "max": r["max"],
                     "p99/p50": interval[s]["median"] if interval[s] else None,
                     "ci_low": ci[0], "ci_high": ci[1],
                     "market_empty_pct": dg["market_empty_pct"],
                     "cancel_hit_pct": dg["cancel_hit_pct"],
                     "resting_before_mass_cancel": dg["resting_before_mass_cancel_mean"]})
    grid = grid_of(samples.values(), clock)
    for row in rows:
        row[FLOOR] = under_floor(row, grid)
    return {"engine": engine, "captures": captures, "rows": rows, "diag": diag,
            "samples": samples, "ratios": ratios, "counts": counts, "interval": interval,
            "clock": clock, "grid": grid, "clocks": clocks, "skipped": skipped,
            "mechanisms": _mechanisms(engine)}


def _grid_once() -> Callable:
    """:func:`lob.studies.conclude.capture` measuring its clock's grid on its first call only
    (:func:`measure_regime` reads the first capture's clock; each scenario's grid comes from
    its merged samples)."""
    calls = []

    def capture(engine: str, wl) -> dict:
        calls.append(engine)
        return K.capture(engine, wl, grid=len(calls) == 1)

    return capture


def _mechanisms(engine: str) -> list[str] | None:
    """The mechanisms ``engine`` has, from its registered toggles (what a claim crediting a
    mechanism is checked against); None for a name the registry does not know (a stand-in:
    claims.yaml then decides)."""
    from lob.engines import engine_spec
    from lob.studies.claims import engine_mechanisms

    try:
        spec = engine_spec(engine)
    except ValueError:
        return None
    return list(engine_mechanisms(spec.toggles))


def _interval_note(reg: dict) -> str:
    """What the p99 / p50 column and its interval are, in words (for the note)."""
    what = next((i["what"] for i in reg.get("interval", {}).values() if i), None)
    counts = {r["captures"] for r in reg.get("rows", [])}
    each = (f"{reg['captures']} fresh capture(s) per scenario" if counts <= {reg["captures"]}
            else "the captures column's fresh captures per scenario (more where a verdict "
                 "is close)")
    return (f" p99 / p50: the median of the per-capture ratios of {each}, interleaved in "
            "rotated order; ci_low-ci_high: "
            + (what or "no interval (no capture supports a p99)") + ".")


def regime_table(reg: dict) -> K.Conclusion:
    """The regime table: percentiles of the merged captures, the tail shape (the median of
    the per-capture p99 / p50, with its interval), what the ops met, and the percentiles
    under 10 ticks of the measured clock grid. Says which tails are narrowest / widest,
    which are wide (the whole interval at or above the pivot) and which straddle it, whose
    p50 is at the clock floor, where most market orders met an empty book, and which
    percentiles the counts could not support."""
    t = K.Conclusion(f"regime ({reg['engine']})", reg["rows"], key="scenario",
                     kinds={"scale": "ratio", "captures": "count", "untimed": "count",
                            "p99/p50": "ratio", "ci_low": "ratio", "ci_high": "ratio",
                            FLOOR: "label", "market_empty_pct": "ratio",
                            "cancel_hit_pct": "ratio", "resting_before_mass_cancel": "count"},
                     note=grid_line(reg.get("grid"), clock=reg.get("clock") or {})
                     + _interval_note(reg)
                     + f" A wide tail: p99 / p50 at least {K.fmt(TAIL_PIVOT)} (the claims' "
                       "pivot).")
    K.conclude_extremes(t, "p99/p50", what="tail (p99 / p50)", lower_is="narrowest",
                        higher_is="widest")
    have = [r for r in t.rows if isinstance(r["p99/p50"], float)]
    wide = [r["scenario"] for r in have
            if (r["ci_low"] if r["ci_low"] is not None else r["p99/p50"]) >= TAIL_PIVOT]
    across = [r["scenario"] for r in have
              if r["ci_low"] is not None and r["ci_low"] < TAIL_PIVOT <= r["ci_high"]]
    if wide:
        t.say(f"Wide tails (p99 at least {K.fmt(TAIL_PIVOT)} times p50): {', '.join(wide)}.")
    else:
        t.say(f"No scenario has a wide tail (p99 at least {K.fmt(TAIL_PIVOT)} times p50) here.")
    if across:
        t.say(f"The interval reaches across {K.fmt(TAIL_PIVOT)} in " + ", ".join(
            f"{s} ({t.cell(s, 'ci_low')}-{t.cell(s, 'ci_high')})" for s in across)
            + ": wide or narrow, the captures do not tell.")
    floor = [r["scenario"] for r in t.rows if "p50" in r[FLOOR].split(", ")]
    if floor:
        t.say(f"At the clock floor (p50 under {CLOCK_FLOOR_TICKS} ticks of the measured "
              f"grid): {', '.join(floor)}; their p99 / p50 divides by a p50 known only to a "
              "tick, so its claim is not compared.")
    empty = [r["scenario"] for r in t.rows if (r["market_empty_pct"] or 0) > MOST_PCT]
    if empty:
        t.say("Most market orders met an empty book in " + ", ".join(
            f"{s} ({t.cell(s, 'market_empty_pct')}%)" for s in empty)
            + ": their p50 measures an empty-book check, as the seed's does.")
    for sk in reg.get("skipped", []):
        t.say(f"Not run: {sk['scenario']} ({sk['reason']}).")
    return K.conclude_suppressed(t)


def seed_table(scenarios: Sequence[str], *, machine: str | None = None,
               percentiles: Mapping[str, Mapping[str, float]] | None = None,
               counts: Mapping[str, int] | None = None,
               tick_ns: float | None = None) -> K.Conclusion:
    """The seed's own table (its machine only), the same percentile rule applied to its
    sample counts, its p99 / p50 (the figure its claim is judged on) and the percentiles
    under 10 ticks of its published timer. A p99 / p50 whose p99 the count does not support
    is still shown, and a sentence says which claim rests on it and on how few samples.
    ``machine`` (default: from ``claims.yaml``), ``percentiles`` (default
    :data:`lob.studies.published.SEED000_PERCENTILES`), ``counts`` (default
    :data:`SEED000_COUNT`) and ``tick_ns`` (default: the published ``timer_tick_ns``) are
    injectable."""
    from lob.studies import published

    if machine is None:
        from lob.studies.claims import get

        machine = get("s000_tail_add_only").machine
    if percentiles is None:
        percentiles = published.SEED000_PERCENTILES
    if tick_ns is None:
        tick_ns = published.figures()["seed000"]["timer_tick_ns"]
    counts = SEED000_COUNT if counts is None else counts
    grid = {"tick_ns": float(tick_ns)}
    rows = []
    for s in scenarios:
        if s not in counts or s not in percentiles:  # a stream the seed did not publish
            continue
        row = {"scenario": s, "count": counts[s],
               **{k: float(v) for k, v in percentiles[s].items()}}
        rows.append({**row, "p99/p50": _tail_ratio(row), FLOOR: under_floor(row, grid)})
    t = K.Conclusion(f"seed 000 ({machine})", rows, key="scenario",
                     machine=f"{machine} (seed 000)", kinds={"p99/p50": "ratio", FLOOR: "label"},
                     note=f"Clock: the seed's timer ticks every {K.fmt(grid['tick_ns'])} ns "
                          f"(published); percentiles under {CLOCK_FLOOR_TICKS} ticks "
                          f"({K.fmt(CLOCK_FLOOR_TICKS * grid['tick_ns'])} ns) are marked in "
                          f"`{FLOOR}`.")
    thin = [r for r in t.rows if isinstance(r["p99/p50"], float) and not supported(99, r["count"])]
    for r in thin:
        s = r["scenario"]
        t.say(f"{s}'s p99 / p50 ({t.cell(s, 'p99/p50')}), the figure its claim is judged on, "
              f"rests on the seed's {t.cell(s, 'count')} samples: fewer than the "
              f"{K.fmt(min_count(99))} a p99 needs, so the seed's own p99 is hidden here "
              f"({t.cell(s, 'p99')}) and its claim says so.")
    return K.conclude_suppressed(t)


def _shape(values: Mapping[str, float], count: int) -> tuple[list[float], list[float]]:
    """(x: 1 / (1 - q), y: percentile / p50) over the QS the count supports."""
    qs = [q for q in QS if _pname(q) in values and supported(q, count)]
    return ([1 / (1 - q / 100) for q in qs], [values[_pname(q)] / values["p50"] for q in qs])


def plot_tail_shape(reg: dict, *, machine: str | None = None,
                    percentiles: Mapping[str, Mapping[str, float]] | None = None,
                    counts: Mapping[str, int] | None = None):
    """One panel per scenario: each supported percentile over the p50, lob's (this machine)
    beside the seed's (its machine). Returns the Figure."""
    from matplotlib import ticker

    from lob.studies import plots as lp

    if machine is None:
        from lob.studies.claims import get

        machine = get("s000_tail_add_only").machine
    if percentiles is None:
        from lob.studies.published import SEED000_PERCENTILES as percentiles
    counts = SEED000_COUNT if counts is None else counts
    scenarios = [r["scenario"] for r in reg["rows"]]
    ncols = min(4, len(scenarios))
    fig, axes = lp.subplots(-(-len(scenarios) // ncols), ncols, panel=(3.6, 2.9), squeeze=False)
    rows = {r["scenario"]: r for r in reg["rows"]}
    for ax, s in zip(axes.flat, scenarios, strict=False):  # the grid may have spare panels
        r = rows[s]  # the regime row's percentiles (of the merged captures)
        mine = {_pname(q): r[_pname(q)] for q in QS if isinstance(r[_pname(q)], float)}
        xs, ys = _shape(mine, r["count"]) if "p50" in mine else ([], [])
        ax.plot(xs, ys, "o-", label=f"lob {reg['engine']} (this machine)")
        sx, sy = (_shape(percentiles[s], counts[s]) if s in percentiles and s in counts
                  else ([], []))  # a stream the seed did not publish: lob's points only
        ax.plot(sx, sy, "k+", ms=9, label=f"seed 000 ({machine})")
        ax.set_xscale("log")
        ax.set_xticks([1 / (1 - q / 100) for q in QS], [f"{q:g}%" for q in QS])
        ax.xaxis.set_minor_formatter(ticker.NullFormatter())
        lp.value_axis(ax, [*ys, *sy])
        ax.set(title=s, ylabel="percentile / p50")
    for ax in list(axes.flat)[len(scenarios):]:
        ax.axis("off")
    # the panels' five percentile labels fit their width unrotated (no test draw of the whole
    # figure: on eight log panels it took as long as the save)
    lp.legend_outside(fig)
    fig.suptitle("tail shape: each percentile over the p50 (shown only where the count "
                 "supports it)")
    return fig


# --- pure-Python versions ------------------------------------------------------------------

def measure_versions(engines: Sequence[str], scenarios: Sequence[str], scale: float,
                     repeat: int, gc_compare: bool, out: str | Path | None, *,
                     workload: Callable | None = None, capture: Callable | None = None) -> dict:
    """Every engine on every scenario at ``scale``; the last engine also with the cyclic GC
    off when ``gc_compare``. ``.hgrm`` of the GC-on captures saved into ``out``.

    A (scenario, engine) cell outside the engine's declared capabilities (orderly_chaos on
    ``stp_sweep``, an STP CANCEL_MAKER stream) is not run: it is listed in ``skipped`` with
    the reason, never replaced by another stream.

    Returns ``{"rows": [{"scenario", "engine", "gc": "on"|"off", "count", p50.., "max",
    "market_empty_pct", FLOOR}], "clock", "grid" (the clock grid of the GC-on samples),
    "skipped": [{"scenario", "engine", "reason"}]}``."""
    from lob.studies.declared import refusal

    workload = workload or _workload
    rows, skipped, clock, timed, seen = [], [], None, [], []
    for s in scenarios:
        wl = workload(s, scale)
        for e in engines:
            why = refusal(e, wl)
            if why:  # outside the engine's declared capabilities: named, never run
                skipped.append({"scenario": s, "engine": e, "reason": why})
                continue
            for g in ([True, False] if (gc_compare and e == engines[-1]) else [True]):
                m = measure(e, wl, repeat, gc_enabled=g, capture=capture)
                if g:
                    timed.append(m["durations"])
                    seen.append(m["clock"])
                if g and out is not None:
                    K.save_hgrm(m["durations"], Path(out) / f"{e}__{s}.hgrm")
                r = m["row"]
                rows.append({"scenario": s, "engine": e, "gc": "on" if g else "off",
                             "count": r["count"], **{_pname(q): r[_pname(q)] for q in QS},
                             "max": r["max"], "market_empty_pct": m["diag"]["market_empty_pct"]})
                clock = m["clock"]
    grid = grid_of(timed, common_clock(seen))
    for r in rows:
        r[FLOOR] = under_floor(r, grid)
    return {"rows": rows, "clock": clock, "grid": grid, "skipped": skipped}


def percentiles_table(vers: dict) -> K.Conclusion:
    """The GC-on percentiles of every (scenario, engine); with more than one engine, which
    engine has the lowest p50 in which scenarios (scenarios without a supported p50 are left
    out of that sentence), the (scenario, engine) cells not run with the engine's reason,
    then the percentiles hidden for want of samples."""
    rows = [{k: v for k, v in r.items() if k != "gc"} for r in vers["rows"] if r["gc"] == "on"]
    t = K.Conclusion("percentiles", rows, key=["scenario", "engine"],
                     kinds={"market_empty_pct": "ratio", FLOOR: "label"},
                     note=grid_line(vers.get("grid"), clock=vers.get("clock") or {}))
    engines = list(dict.fromkeys(r["engine"] for r in t.rows))
    if len(engines) > 1:
        best: dict[str, list[str]] = {}
        for s in dict.fromkeys(r["scenario"] for r in t.rows):
            have = [r for r in t.rows if r["scenario"] == s and isinstance(r["p50"], float)]
            if have:
                best.setdefault(min(have, key=lambda r: r["p50"])["engine"], []).append(s)
        for e in engines:
            if e in best:
                t.say(f"{e} has the lowest p50 in {', '.join(best[e])}.")
    for sk in vers.get("skipped", []):
        t.say(f"Not run: {sk['engine']} on {sk['scenario']} ({sk['reason']}).")
    return K.conclude_suppressed(t)


def gc_table(vers: dict, engine: str) -> K.Conclusion:
    """``engine``'s rows with the GC on and off, and the p99 with the GC on over off per
    scenario (where both counts support a p99); says where that ratio is lowest and
    highest. The max is shown but not compared: it is one sample each, and a ratio of two
    single samples concludes nothing."""
    mine = [r for r in vers["rows"] if r["engine"] == engine]
    off = {r["scenario"]: r["p99"] for r in mine if r["gc"] == "off"}
    rows = []
    for r in mine:
        ratio = None
        if r["gc"] == "on" and isinstance(off.get(r["scenario"]), float) \
                and isinstance(r["p99"], float) and off[r["scenario"]] > 0:
            ratio = r["p99"] / off[r["scenario"]]
        rows.append({"scenario": r["scenario"], "gc": r["gc"], "count": r["count"],
                     "p50": r["p50"], "p99": r["p99"], "max": r["max"],
                     "p99_on_over_off": ratio, FLOOR: r.get(FLOOR, "")})
    t = K.Conclusion(f"GC on / off ({engine})", rows, key="scenario",
                     kinds={"p99_on_over_off": "ratio", FLOOR: "label"},
                     note="max: one sample each (shown, never compared); "
                          + grid_line(vers.get("grid"), clock=vers.get("clock") or {}))
    return K.conclude_extremes(t, "p99_on_over_off",
                               what="p99 latency with the GC on over off")


# --- where the slowest 1% comes from -------------------------------------------------------

def sources_frame(commands, rr, durations):
    """Per timed op: ``latency_ns``, ``fills``, ``levels`` (distinct prices traded at) and
    ``depth`` (orders resting before it), as a DataFrame."""
    import pandas as pd

    from lob.workloads.diagnostics import levels_walked, resting_series

    timed = np.flatnonzero(commands["timed"])
    before, _ = resting_series(commands, rr.outcomes, rr.fills)
    return pd.DataFrame({"latency_ns": np.asarray(durations),
                         "fills": rr.outcomes["fills"][timed],
                         "levels": levels_walked(commands, rr.outcomes, rr.fills)[timed],
                         "depth": before[timed]})


def measure_sources(engine: str, scenario: str, scale: float, *,
                    workload: Callable | None = None, capture: Callable | None = None):
    """One capture of ``engine`` on ``scenario``: :func:`sources_frame` of it."""
    wl = (workload or _workload)(scenario, scale)
    cp = (capture or K.capture)(engine, wl)
    po = sources_frame(wl.commands, cp["replay"], cp["durations"])
    po.attrs["clock"] = cp.get("clock")  # its read cost, said under the table
    return po


def _p99(po) -> float | None:
    if not supported(99, len(po)):
        return None
    return float(np.percentile(po["latency_ns"], 99, method="inverted_cdf"))


def sources_table(po, scenario: str, engine: str) -> K.Conclusion:
    """The slowest 1% of ops against the rest: mean latency and work, and the rank
    correlation (Spearman) of each kind of work with latency; says which correlates most.
    Too few samples for a p99: one row with the count, and a sentence saying so."""
    name = f"tail sources ({scenario}, {engine})"
    p99 = _p99(po)
    if p99 is None:
        need = min_count(99)
        t = K.Conclusion(name, [{"group": "all", "count": len(po)}], key="group",
                         note=f"A p99 needs {K.fmt(need)} samples.")
        return t.say(f"{t.cell('all', 'count')} samples: too few for a p99 (needs "
                     f"{K.fmt(need)}); no tail view.")
    groups = np.where(po["latency_ns"] >= p99, SLOWEST, REST)
    corr = po[["latency_ns", *WORK]].corr(method="spearman")["latency_ns"]
    rows = []
    for g in (REST, SLOWEST):
        sel = po[groups == g]
        rows.append({"group": g, "count": len(sel), "latency_ns": float(sel.latency_ns.mean()),
                     **{k: float(sel[k].mean()) for k in WORK},
                     **{f"rho_{k}": float(corr[k]) for k in WORK}})
    t = K.Conclusion(name, rows, key="group",
                     kinds={**{k: "ratio" for k in WORK}, **{f"rho_{k}": "ratio" for k in WORK}},
                     note=grid_line(grid_of([po["latency_ns"].to_numpy()], po.attrs.get("clock")),
                                    marked=False,
                                    clock=po.attrs.get("clock") or {}))
    c = {(g, k): t.cell(g, k) for g in (REST, SLOWEST) for k in WORK}
    t.say(f"The slowest 1% averaged {c[SLOWEST, 'fills']} fills, {c[SLOWEST, 'levels']} "
          f"levels and depth {c[SLOWEST, 'depth']}, against {c[REST, 'fills']}, "
          f"{c[REST, 'levels']} and {c[REST, 'depth']} for the rest.")
    defined = [k for k in WORK if not math.isnan(corr[k])]
    if not defined:
        return t.say("No rank correlation with latency is defined (the work did not vary).")
    driver = max(defined, key=lambda k: abs(corr[k]))
    return t.say(f"The strongest rank correlation with latency is {driver} (rho "
                 f"{t.cell(REST, f'rho_{driver}')}).")


def plot_tail_sources(po, scenario: str, engine: str):
    """Latency against each kind of work, one panel each, with the p99 line; None when the
    samples are too few for a p99 (nothing to split)."""
    from lob.studies import plots as lp

    p99 = _p99(po)
    if p99 is None:
        return None
    corr = po[["latency_ns", *WORK]].corr(method="spearman")["latency_ns"]
    fig, axes = lp.subplots(1, len(WORK), panel=(4.2, 3.4))
    for ax, col in zip(axes, WORK, strict=True):
        ax.scatter(po[col], po.latency_ns, s=3, alpha=0.3)
        lp.value_axis(ax, po.latency_ns)
        lp.reference(ax, p99, f"p99 ({len(po):,} samples)", color="r", ls="-", lw=0.8)
        ax.set(xlabel=col, ylabel="latency ns", title=f"rho={corr[col]:.2f}")
    fig.suptitle(f"{scenario} on {engine}: latency against the op's work")
    lp.legend_outside(fig)
    return fig


# --- claims --------------------------------------------------------------------------------

def claims(reg: dict) -> dict[str, dict]:
    """``s000_tail_<scenario>`` -> lob's measurement: the median of the per-capture p99 / p50
    on the regime engine with its interval and the count of captures it comes from
    (``runs``), the clock record of the merged samples (the clock-floor check), the regime
    engine's mechanisms (``reg["mechanisms"]``, from its toggles: a claim crediting a
    mechanism is judged only on an engine that has it), the regime diagnostics its claim
    checks (``count``: the smallest capture's) and, to explain a
    narrow p50, the p50 in clock reads."""
    from lob.studies.claims import measurement

    over = (reg["clock"] or {}).get("overhead_median_ns")
    out = {}
    for r in reg["rows"]:
        s, dg, mi = r["scenario"], reg["diag"][r["scenario"]], reg["interval"].get(r["scenario"])
        ci = mi["ci"] if mi else None
        out[f"s000_tail_{s}"] = measurement(
            r["p99/p50"], ci=ci,
            ci_what=mi["what"] if mi else "no interval: no capture supports a p99",
            runs=len(reg["ratios"][s]) or None, clock=reg["clocks"].get(s),
            mechanisms=reg.get("mechanisms"),
            diagnostics={"count": min(reg["counts"][s]), "commands": dg["commands"],
                         "market_empty_pct": dg["market_empty_pct"],
                         "cancel_hit_pct": dg["cancel_hit_pct"],
                         "resting_before_mass_cancel_mean":
                             dg["resting_before_mass_cancel_mean"]},
            explain={"p50 in clock reads": r["p50"] / over
                     if isinstance(r["p50"], float) and over else None},
            detail=f"{reg['engine']} p99 / p50, median of {r['captures']} fresh captures")
    return out


SHAPE = Shape(parameters=Parameters,
              measure=(measure_regime, measure_versions, measure_sources),
              tables=(regime_table, seed_table, percentiles_table, gc_table, sources_table),
              claims=claims, plots=(plot_tail_shape, plot_tail_sources))

"""Where the tail comes from (seed 000): the study behind ``notebooks/tail_analysis.ipynb``.

orderbook-rs's HDR bench suite publishes p50 / p99 / p99.9 / p99.99 for eight scenarios; six
have wide tails, ``mass_cancel_burst`` and ``stp_sweep`` narrow ones. This module measures
each scenario's tail shape in the seed's regime on one engine (:func:`measure_regime`), sets
it beside the seed's own table (:func:`seed_table`), measures the pure-Python versions with
the cyclic GC on and off (:func:`measure_versions`) and looks at which work the slowest 1% of
ops did (:func:`measure_sources`). Tables are :class:`~lob.studies.conclude.Conclusion`
objects whose sentences quote their own cells; :func:`claims` builds the claim measurements.

Procedures take the notebook's parameters and return plain data (records, dicts, one
DataFrame of per-op figures), so the tables, plots and claims are unit-tested on synthetic
data (``tests/studies/test_study_tail_analysis.py``). Percentile support comes only from
:mod:`lob.measure.stats`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from lob.measure.stats import min_count, supported
from lob.studies import conclude as K

__all__ = ["QS", "TAIL_PIVOT", "MOST_PCT", "SEED000_COUNT", "WORK", "check_parameters",
           "measure", "measure_regime", "regime_table", "seed_table", "plot_tail_shape",
           "measure_versions", "percentiles_table", "gc_table", "sources_frame",
           "measure_sources", "sources_table", "plot_tail_sources", "claims"]

QS = (50, 90, 99, 99.9, 99.99)  # the percentiles of every table (seed 000 publishes these)
TAIL_PIVOT = 10  # p99 / p50 at least this: "a wide tail" (the pivot of the s000_tail claims)
MOST_PCT = 50  # above this share of market orders meeting an empty book: "most"
# seed 000's sample count per scenario (its bench's measured ops): what its percentiles rest on
SEED000_COUNT: dict[str, int] = {
    "add_only": 1_000_000, "cancel_only": 1_000_000, "aggressive_walk": 100_000,
    "notional_walk": 100_000, "mixed_70_20_10": 1_000_000, "thin_book_sweep": 200_000,
    "mass_cancel_burst": 500, "stp_sweep": 100_000}
WORK = ("fills", "levels", "depth")  # what an op did, in the tail-sources view
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
                     scale_overrides: Mapping[str, float]) -> None:
    """One clear ValueError for parameters that do not fit together (engine names are
    checked by ``Study.start``)."""
    from lob.studies.study import at_least_one, need, one_of

    need(scenarios, "scenarios", "orderbook-rs scenario")
    one_of(tail_scenario, scenarios, "tail_scenario", "scenarios")
    at_least_one(repeat, "repeat")
    unknown = set(scale_overrides) - set(scenarios)
    if unknown:
        raise ValueError(f"scale_overrides names scenarios not in `scenarios`: {sorted(unknown)}")


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
                   scale_overrides: Mapping[str, float], repeat: int, out: str | Path | None,
                   *, workload: Callable | None = None, capture: Callable | None = None) -> dict:
    """Every scenario on ``engine`` at ``claim_scale`` (or its override), ``.hgrm`` saved
    into ``out`` as ``<engine>__<scenario>.hgrm``.

    A scenario outside the engine's declared capabilities is not run (``skipped``, with the
    reason). Returns ``{"engine", "rows": [one regime row per scenario run], "diag":
    {scenario: diag}, "samples": {scenario: durations}, "clock", "skipped"}``."""
    from lob.studies.declared import refusal

    workload = workload or _workload
    rows, diag, samples, clock, skipped = [], {}, {}, None, []
    for s in scenarios:
        sc = scale_overrides.get(s, claim_scale)
        wl = workload(s, sc)
        why = refusal(engine, wl)
        if why:  # outside the engine's declared capabilities: named, not run
            skipped.append({"scenario": s, "engine": engine, "reason": why})
            continue
        m = measure(engine, wl, repeat, capture=capture)
        clock, samples[s], diag[s], r = m["clock"], m["durations"], m["diag"], m["row"]
        if out is not None:
            K.save_hgrm(m["durations"], Path(out) / f"{engine}__{s}.hgrm")
        rows.append({"scenario": s, "scale": sc, "count": r["count"], "untimed": m["untimed"],
                     **{_pname(q): r[_pname(q)] for q in QS}, "max": r["max"],
                     "p99/p50": _tail_ratio(r),
                     "market_empty_pct": m["diag"]["market_empty_pct"],
                     "cancel_hit_pct": m["diag"]["cancel_hit_pct"],
                     "resting_before_mass_cancel": m["diag"]["resting_before_mass_cancel_mean"]})
    return {"engine": engine, "rows": rows, "diag": diag, "samples": samples, "clock": clock,
            "skipped": skipped}


def regime_table(reg: dict) -> K.Conclusion:
    """The regime table: percentiles, the tail shape (p99 / p50) and what the ops met. Says
    which tails are narrowest / widest, which are wide, where most market orders met an
    empty book, and which percentiles the counts could not support."""
    t = K.Conclusion(f"regime ({reg['engine']})", reg["rows"], key="scenario",
                     kinds={"scale": "ratio", "untimed": "count", "p99/p50": "ratio",
                            "market_empty_pct": "ratio", "cancel_hit_pct": "ratio",
                            "resting_before_mass_cancel": "count"},
                     note=K.clock_line(reg["clock"]) + f" A wide tail: p99 / p50 at least "
                          f"{K.fmt(TAIL_PIVOT)} (the claims' pivot).")
    K.conclude_extremes(t, "p99/p50", what="tail (p99 / p50)", lower_is="narrowest",
                        higher_is="widest")
    wide = [r["scenario"] for r in t.rows
            if isinstance(r["p99/p50"], float) and r["p99/p50"] >= TAIL_PIVOT]
    if wide:
        t.say(f"Wide tails (p99 at least {K.fmt(TAIL_PIVOT)} times p50): {', '.join(wide)}.")
    else:
        t.say(f"No scenario has a wide tail (p99 at least {K.fmt(TAIL_PIVOT)} times p50) here.")
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
               counts: Mapping[str, int] | None = None) -> K.Conclusion:
    """The seed's own table (its machine only), the same percentile rule applied to its
    sample counts, with its p99 / p50 where its count supports a p99. ``machine`` (default:
    from ``claims.yaml``), ``percentiles`` (default :data:`lob.studies.published
    .SEED000_PERCENTILES`) and ``counts`` (default :data:`SEED000_COUNT`) are injectable."""
    if machine is None:
        from lob.studies.claims import get

        machine = get("s000_tail_add_only").machine
    if percentiles is None:
        from lob.studies.published import SEED000_PERCENTILES as percentiles
    counts = SEED000_COUNT if counts is None else counts
    rows = []
    for s in scenarios:
        if s not in counts or s not in percentiles:  # a stream the seed did not publish
            continue
        n = counts[s]
        row = {"scenario": s, "count": n, **{k: float(v) for k, v in percentiles[s].items()}}
        rows.append({**row, "p99/p50": _tail_ratio(row) if supported(99, n) else None})
    t = K.Conclusion(f"seed 000 ({machine})", rows, key="scenario",
                     machine=f"{machine} (seed 000)", kinds={"p99/p50": "ratio"})
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
    for ax, s in zip(axes.flat, scenarios, strict=False):  # the grid may have spare panels
        d = np.asarray(reg["samples"][s])
        mine = ({_pname(q): float(np.percentile(d, q, method="inverted_cdf")) for q in QS}
                if supported(50, len(d)) else {})
        xs, ys = _shape(mine, len(d)) if mine else ([], [])
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
    # the panels share their x ticks and width: make the first readable (one draw of the
    # figure, not one per panel) and give the others the same tick texts
    first, *others = list(axes.flat)[:len(scenarios)]
    lp.category_axis(first)
    for ax in others:
        ax.set_xticks(first.get_xticks(), [t.get_text() for t in first.get_xticklabels()])
        for a, b in zip(ax.get_xticklabels(), first.get_xticklabels(), strict=True):
            a.update({"rotation": b.get_rotation(), "ha": b.get_ha(),
                      "rotation_mode": b.get_rotation_mode()})
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
    "market_empty_pct"}], "clock", "skipped": [{"scenario", "engine", "reason"}]}``."""
    from lob.studies.declared import refusal

    workload = workload or _workload
    rows, skipped, clock = [], [], None
    for s in scenarios:
        wl = workload(s, scale)
        for e in engines:
            why = refusal(e, wl)
            if why:  # outside the engine's declared capabilities: named, never run
                skipped.append({"scenario": s, "engine": e, "reason": why})
                continue
            for g in ([True, False] if (gc_compare and e == engines[-1]) else [True]):
                m = measure(e, wl, repeat, gc_enabled=g, capture=capture)
                if g and out is not None:
                    K.save_hgrm(m["durations"], Path(out) / f"{e}__{s}.hgrm")
                r = m["row"]
                rows.append({"scenario": s, "engine": e, "gc": "on" if g else "off",
                             "count": r["count"], **{_pname(q): r[_pname(q)] for q in QS},
                             "max": r["max"], "market_empty_pct": m["diag"]["market_empty_pct"]})
                clock = m["clock"]
    return {"rows": rows, "clock": clock, "skipped": skipped}


def percentiles_table(vers: dict) -> K.Conclusion:
    """The GC-on percentiles of every (scenario, engine); with more than one engine, which
    engine has the lowest p50 in which scenarios (scenarios without a supported p50 are left
    out of that sentence), the (scenario, engine) cells not run with the engine's reason,
    then the percentiles hidden for want of samples."""
    rows = [{k: v for k, v in r.items() if k != "gc"} for r in vers["rows"] if r["gc"] == "on"]
    t = K.Conclusion("percentiles", rows, key=["scenario", "engine"],
                     kinds={"market_empty_pct": "ratio"}, note=K.clock_line(vers["clock"]))
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
    """``engine``'s rows with the GC on and off, and the max with the GC on over off per
    scenario; says where that ratio is lowest and highest."""
    mine = [r for r in vers["rows"] if r["engine"] == engine]
    off = {r["scenario"]: r["max"] for r in mine if r["gc"] == "off"}
    rows = []
    for r in mine:
        ratio = None
        if r["gc"] == "on" and off.get(r["scenario"]) and r["max"] is not None:
            ratio = r["max"] / off[r["scenario"]]
        rows.append({"scenario": r["scenario"], "gc": r["gc"], "count": r["count"],
                     "p50": r["p50"], "p99": r["p99"], "max": r["max"],
                     "max_on_over_off": ratio})
    t = K.Conclusion(f"GC on / off ({engine})", rows, key="scenario",
                     kinds={"max_on_over_off": "ratio"})
    return K.conclude_extremes(t, "max_on_over_off",
                               what="max latency with the GC on over off")


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
    return sources_frame(wl.commands, cp["replay"], cp["durations"])


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
                     kinds={**{k: "ratio" for k in WORK}, **{f"rho_{k}": "ratio" for k in WORK}})
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
    """``s000_tail_<scenario>`` -> lob's measurement: p99 / p50 on the regime engine, with
    the regime diagnostics its claim checks and, to explain a narrow p50, the p50 in clock
    reads."""
    from lob.studies.claims import measurement

    over = (reg["clock"] or {}).get("overhead_median_ns")
    out = {}
    for r in reg["rows"]:
        s, dg = r["scenario"], reg["diag"][r["scenario"]]
        out[f"s000_tail_{s}"] = measurement(
            r["p99/p50"],
            diagnostics={"count": r["count"], "commands": dg["commands"],
                         "market_empty_pct": dg["market_empty_pct"],
                         "cancel_hit_pct": dg["cancel_hit_pct"],
                         "resting_before_mass_cancel_mean":
                             dg["resting_before_mass_cancel_mean"]},
            explain={"p50 in clock reads": r["p50"] / over
                     if isinstance(r["p50"], float) and over else None},
            detail=f"{reg['engine']} p99 / p50")
    return out

"""Real order flow beside the synthetic streams: the study behind ``notebooks/real_flow.ipynb``.

The real stream is ``bitstamp_btcusd`` (:mod:`lob.workloads.bitstamp`): 30 minutes of
Bitstamp BTC/USD market-by-order events from the sample data of the PyPI package
ob-analytics 0.1.0, converted to lob commands; replayed, it reproduces every real trade fill
by fill. This module sets it beside lob's synthetic streams:

* :func:`measure_candidates` diagnoses the real stream and every synthetic candidate from a
  replay's public outputs (:func:`lob.workloads.diagnostics.diagnose` plus the order life,
  cancel and taker shares of :func:`flow_figures`), and :func:`distances` says which
  synthetic stream is closest to the real one over :data:`FEATURES` (a computed distance,
  never a choice by hand); :func:`closest_table` shows the ranking and :func:`misses_table`
  the features where the real stream lies outside every synthetic stream's range;
* :func:`measure_streams` takes the real stream, the named comparisons and the closest
  stream at the latency scale: their diagnostics side by side (:func:`diagnostics_table`,
  with the validation against the venue's trades as a workload figure) and each engine's
  closed-loop per-op latency, captures interleaved round by round and merged
  (:func:`latency_table`: p50 / p99 / p99.9 only where :func:`lob.measure.stats.supported`
  allows);
* :func:`measure_open_loop` drives the pipeline's open-loop sender with the venue's own
  inter-arrival times at 1x and accelerated (:func:`lob.workloads.bitstamp.due_offsets_ns`),
  :func:`open_loop_table` shows the response times.

The venue's timestamps are **milliseconds**: every rate per second and every order life in
ms here is derived from them, at millisecond resolution (many events share one ms). The
synthetic streams carry no clock: their rates are per command, not per second.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lob.measure.stats import rotations, supported
from lob.studies import conclude as K
from lob.studies.shape import Parameters as _Parameters
from lob.studies.shape import Shape

__all__ = ["REAL", "QS", "FEATURES", "LOG_FEATURES", "OPS", "check_parameters",
           "Parameters", "SHAPE", "claims",
           "conversion_table",
           "synthetic_names", "order_life", "flow_figures", "diagnose_stream",
           "measure_candidates", "distances", "closest_table", "misses_table",
           "measure_streams", "diagnostics_table", "latency_table", "plot_features",
           "plot_latency", "measure_open_loop", "open_loop_table", "closing_markdown"]

REAL = "bitstamp_btcusd"
QS = (50, 99, 99.9)  # the percentiles of the latency tables
# the diagnostics the distance is taken over (scale-free shares, or depths on a log scale)
FEATURES = ("cancel_share_pct", "taker_share_pct", "cross_pct", "cancel_hit_pct",
            "fills_mean", "resting_mean", "levels_max", "span_mean", "life_median_ops")
LOG_FEATURES = frozenset({"resting_mean", "levels_max", "span_mean", "life_median_ops"})
OPS = ("all", "submit", "cancel")  # per-op latency: every timed command, then by kind
PRELOAD_NS = 500_000_000  # open loop: the timed stream falls due this long after the pre-load
# the columns of the side-by-side diagnostics table (diagnose keys and flow_figures keys)
DIAG_COLUMNS = ("commands", "timed", "cancel_share_pct", "taker_share_pct", "cross_pct",
                "cancel_hit_pct", "fills_mean", "resting_mean", "levels_max", "span_mean",
                "life_median_ops", "life_median_ms", "commands_per_s", "takers_per_s",
                "venue_trades", "trades_reproduced")
_COUNTS = ("commands", "timed", "levels_max", "venue_trades", "trades_reproduced")


def _name(q: float) -> str:
    return f"p{q:g}"


# --- parameters ----------------------------------------------------------------------------

def synthetic_names() -> list[str]:
    """Every registered workload outside the ``real`` family (the closest-stream candidates)."""
    from lob.workloads import spec, workload_names

    return [n for n in workload_names() if spec(n).get("family") != "real"]


def check_parameters(compare: Sequence[str], candidates: Sequence[str], real_scale: float,
                     scale: float, candidate_scale: float, repeat: int,
                     speedups: Sequence[float], open_loop_s: float | None = None) -> list[str]:
    """One clear ValueError for parameters that do not fit together; returns the candidate
    list (``candidates`` or, when empty, :func:`synthetic_names`)."""
    from lob.studies.shape import at_least_one, need
    from lob.workloads import workload_names

    known = set(workload_names())
    cands = list(candidates) or synthetic_names()
    bad = sorted({n for n in [*compare, *cands] if n not in known})
    if bad:
        raise ValueError(f"unknown workloads {bad}; workloads: {', '.join(sorted(known))}")
    if REAL in compare or REAL in cands:
        raise ValueError(f"{REAL} is the real stream: name only synthetic streams in compare "
                         "and candidates")
    need(compare, "compare", "synthetic stream")
    if not 0 < real_scale <= 1:
        raise ValueError(f"real_scale must be in (0, 1] (a prefix of the recording), got "
                         f"{real_scale!r}")
    for what, v in (("scale", scale), ("candidate_scale", candidate_scale)):
        if not (isinstance(v, int | float) and not isinstance(v, bool) and v > 0):
            raise ValueError(f"{what} must be > 0, got {v!r}")
    at_least_one(repeat, "repeat")
    if any(not (isinstance(s, int | float) and s > 0) for s in speedups):
        raise ValueError(f"speedups must be > 0 (1: the venue's pace; math.inf: unpaced), "
                         f"got {list(speedups)!r}")
    if open_loop_s is not None:
        _check_open_loop_s(open_loop_s)
    return cands


def _check_open_loop_s(v) -> None:
    if not (isinstance(v, int | float) and not isinstance(v, bool) and 0 < v < math.inf):
        raise ValueError(f"open_loop_s must be a number of seconds > 0, got {v!r}")


@dataclass(frozen=True)
class Parameters(_Parameters):
    """The notebook's parameters this study checks (names and defaults as in its cell)."""

    compare: Sequence[str] = ("lobster_replay", "mixed_70_20_10")
    candidates: Sequence[str] = ()
    real_scale: float = 0.06
    scale: float = 0.01
    candidate_scale: float = 0.005
    repeat: int = 1
    speedups: Sequence[float] = (1.0, 100.0, 1000.0)
    open_loop_s: float = 2.0

    def check(self) -> None:
        self.candidate_names()

    def candidate_names(self) -> list[str]:
        """The streams the closest is chosen from (:func:`check_parameters`)."""
        return check_parameters(self.compare, self.candidates, self.real_scale, self.scale,
                                self.candidate_scale, self.repeat, self.speedups,
                                self.open_loop_s)


# --- the conversion --------------------------------------------------------------------------

TAKER_KEYS = ("limit_takers", "market_sells", "market_buys", "notional_buys")
CONVERSION_KEYS = ("created_orders", "snapshot_orders", "post_only", "post_only_refused",
                   "post_only_refused_but_kept_by_venue", "limit_takers", "market_sells",
                   "market_buys", "notional_buys", "cancels", "stale_snapshot_cancelled",
                   "dropped_above_max_qty", "dropped_outside_band", "dropped_orders",
                   "dropped_share_pct", "trades_venue", "trades_of_dropped_orders",
                   "commands", "timed_commands", "span_ms")


def conversion_table(counts: Mapping[str, int | float] | None = None,
                     rules: Mapping[str, str] | None = None) -> K.Conclusion:
    """What each conversion rule of the real stream did (counts over the whole recording, the
    default band), with the rule in words; says what share of the created orders was
    dropped, how many post-only quotes lob refused as the venue did, and the venue span (ms
    timestamps). ``counts`` / ``rules`` default to :func:`lob.workloads.bitstamp.conversion`'s
    and :data:`lob.workloads.bitstamp.RULES`."""
    if counts is None or rules is None:
        from lob.workloads import bitstamp

        counts = bitstamp.conversion().counts if counts is None else counts
        rules = bitstamp.RULES if rules is None else rules
    rows = [{"count": k, "value": counts[k], "rule": rules.get(k, "")}
            for k in CONVERSION_KEYS if k in counts]
    takers = sum(int(counts.get(k) or 0) for k in TAKER_KEYS)
    if counts.get("created_orders"):
        rows[:0] = [{"count": "taker_orders", "value": takers,
                     "rule": "created orders that traded as takers (" + ", ".join(TAKER_KEYS)
                             + ")"},
                    {"count": "taker_share_pct", "value": 100.0 * takers
                     / counts["created_orders"], "rule": "taker_orders over created_orders"}]
    t = K.Conclusion("conversion", rows, key="count", kinds={"value": "ratio"})
    if counts.get("created_orders"):  # what the capture shows, first
        t.say(f"What the capture shows: {t.cell('taker_orders', 'value')} of "
              f"{t.cell('created_orders', 'value')} created orders "
              f"({t.cell('taker_share_pct', 'value')}%) traded as takers; every other one "
              "rested or was deleted unfilled"
              + (" - a flow of quotes, not of trades." if t.value("taker_share_pct", "value")
                 < 1 else "."))
    t.say(f"Of {t.cell('created_orders', 'value')} created orders, "
          f"{t.cell('dropped_orders', 'value')} ({t.cell('dropped_share_pct', 'value')}%) are "
          f"dropped; lob refuses {t.cell('post_only_refused', 'value')} of "
          f"{t.cell('post_only', 'value')} post-only quotes as crossing, and "
          f"{t.cell('post_only_refused_but_kept_by_venue', 'value')} that the venue kept.")
    t.say(f"The timed stream ({t.cell('timed_commands', 'value')} commands) spans "
          f"{t.cell('span_ms', 'value')} ms of the venue's clock (millisecond timestamps).")
    if counts.get("trades_of_dropped_orders"):
        t.say(f"{t.cell('trades_of_dropped_orders', 'value')} of the venue's "
              f"{t.cell('trades_venue', 'value')} trades involve a dropped order and cannot "
              "be replayed.")
    return t


# --- what a stream does, from a replay's outputs ---------------------------------------------

def order_life(commands, outcomes, fills) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) command indices of every order a timed submit rested and a later command
    took away whole: its cancel, or the command whose fill emptied it. Orders still resting
    at the end, or removed by a mass cancel, self-trade prevention or a modify, are left out
    (modifies are not followed)."""
    from lob.semantics import Kind, OrderType, Status

    k, ot, st = commands["kind"], commands["otype"], outcomes["status"]
    sub = k == int(Kind.SUBMIT)
    rests = (sub & commands["timed"].astype(bool)
             & np.isin(ot, (int(OrderType.LIMIT), int(OrderType.POST_ONLY)))
             & np.isin(st, (int(Status.ACCEPTED), int(Status.PARTIALLY_FILLED))))
    ids = outcomes["id"].astype(np.int64)
    can = (k == int(Kind.CANCEL)) & (st == int(Status.CANCELLED))
    cids = commands["id"].astype(np.int64)
    top = int(max(ids.max(initial=0), cids.max(initial=0),
                  fills["maker"].max(initial=0), fills["taker"].max(initial=0))) + 1
    start = np.full(top, -1, dtype=np.int64)
    start[ids[rests]] = np.flatnonzero(rests)
    end = np.full(top, -1, dtype=np.int64)
    end[cids[can]] = np.flatnonzero(can)
    if len(fills):
        idx_of = np.full(top, -1, dtype=np.int64)
        idx_of[ids[sub & (ids > 0)]] = np.flatnonzero(sub & (ids > 0))
        rest_qty = np.zeros(top, dtype=np.int64)
        rest_qty[ids[rests]] = outcomes["remaining"][rests]
        order = np.argsort(fills["maker"], kind="stable")  # each maker's fills in time order
        mk, q = fills["maker"][order].astype(np.int64), fills["qty"][order].astype(np.int64)
        starts = np.r_[0, np.flatnonzero(np.diff(mk)) + 1]
        cs = np.cumsum(q)
        base = np.r_[0, cs[starts[1:] - 1]]
        cum = cs - np.repeat(base, np.diff(np.r_[starts, len(mk)]))
        gone = (cum == rest_qty[mk]) & (rest_qty[mk] > 0)
        end[mk[gone]] = idx_of[fills["taker"][order][gone].astype(np.int64)]
    ok = (start >= 0) & (end > start)
    return start[ok], end[ok]


def flow_figures(commands, outcomes, fills, arrival_ms=None) -> dict:
    """Shares over the timed commands (cancels, takers: submits that traded), the median
    order life in commands (:func:`order_life`) and, given the venue's arrival times
    ``arrival_ms`` (ms, one per command), the order life in ms and the rates per second of
    the timed stream (ms resolution)."""
    from lob.semantics import Kind

    t = commands["timed"].astype(bool)
    n_t = int(t.sum())
    k = commands["kind"]
    taker = t & (k == int(Kind.SUBMIT)) & (outcomes["fills"] > 0)
    cancels = int((t & (k == int(Kind.CANCEL))).sum())
    s, e = order_life(commands, outcomes, fills)
    out = {"cancel_share_pct": round(100.0 * cancels / n_t, 3) if n_t else None,
           "taker_share_pct": round(100.0 * int(taker.sum()) / n_t, 3) if n_t else None,
           "takers": int(taker.sum()), "lives": len(s),
           "life_median_ops": float(np.median(e - s)) if len(s) else None,
           "life_median_ms": None, "span_s": None, "commands_per_s": None,
           "takers_per_s": None}
    if arrival_ms is not None and n_t:
        ms = np.asarray(arrival_ms, dtype=np.int64)
        span_s = (int(ms[t].max()) - int(ms[t].min())) / 1000.0
        out["span_s"] = span_s
        if len(s):
            out["life_median_ms"] = float(np.median(ms[e] - ms[s]))
        if span_s > 0:
            out["commands_per_s"] = n_t / span_s
            out["takers_per_s"] = int(taker.sum()) / span_s
    return out


def diagnose_stream(wl, engine: str, *, run=None) -> dict:
    """One row of diagnostics for workload ``wl`` from a replay on ``engine`` (or ``run``):
    :func:`~lob.workloads.diagnostics.diagnose`'s scalars, :func:`flow_figures`, and for the
    real stream the venue's ms clock and its validation (trades reproduced fill by fill)."""
    from lob.engines.registry import replay
    from lob.workloads.diagnostics import diagnose

    run = run if run is not None else replay(engine, wl)
    d = {k: v for k, v in diagnose(wl, run=run).items()
         if not isinstance(v, list) and not hasattr(v, "columns")}
    real = wl.name == REAL
    ms = None
    row = {"workload": wl.name, **d}
    if real:
        from lob.workloads import bitstamp

        ms = bitstamp.arrival_ms(wl)
        v = bitstamp.validate(engine, wl=wl)
        row.update(venue_trades=v["trades"], trades_reproduced=v["matched"],
                   extra_fills=v["extra"], validated=v["ok"])
    row.update(flow_figures(wl.commands, run.outcomes, run.fills, ms))
    if not real:
        row.update(venue_trades=None, trades_reproduced=None, extra_fills=None, validated=None)
    return row


def measure_candidates(engine: str, candidates: Sequence[str], real_scale: float,
                       candidate_scale: float, *, diagnose=None) -> list[dict]:
    """Diagnostics of the real stream (prefix ``real_scale``) and of every candidate at
    ``candidate_scale`` (one replay each on ``engine``). ``diagnose`` (default
    :func:`diagnose_stream`, given ``(wl, engine)``) is injectable for tests."""
    from lob.workloads import build

    diagnose = diagnose or diagnose_stream
    rows = [diagnose(build(REAL, scale=real_scale), engine)]
    rows += [{**diagnose(build(n, scale=candidate_scale), engine), "scale": candidate_scale}
             for n in candidates]
    rows[0]["scale"] = real_scale
    return rows


def _feature(row: Mapping, f: str) -> float | None:
    v = row.get(f)
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return math.log10(1.0 + float(v)) if f in LOG_FEATURES else float(v)


def distances(rows: Sequence[Mapping], features: Sequence[str] = FEATURES) -> list[dict]:
    """Distance of every synthetic row to the real one (the row named :data:`REAL`): the root
    mean square over ``features`` of the difference divided by that feature's range over all
    rows (depths on a log scale, :data:`LOG_FEATURES`); a feature one side cannot show (no
    cancels to hit, no order that lived) counts as the whole range apart, one neither shows
    is left out. Sorted nearest first: ``[{"workload", "distance", "features"}]``."""
    real = next((r for r in rows if r["workload"] == REAL), None)
    if real is None:
        raise ValueError(f"no {REAL} row to measure distances from")
    span = {}
    for f in features:
        vals = [x for r in rows if (x := _feature(r, f)) is not None]
        span[f] = (max(vals) - min(vals)) if vals else 0.0
    out = []
    for r in rows:
        if r["workload"] == REAL:
            continue
        d2, used = [], 0
        for f in features:
            a, b = _feature(real, f), _feature(r, f)
            if a is None and b is None:
                continue
            used += 1
            if a is None or b is None:  # one side cannot show it (no cancels, no rests)
                d2.append(1.0)
            else:
                d2.append(((a - b) / span[f]) ** 2 if span[f] > 0 else 0.0)
        out.append({"workload": r["workload"],
                    "distance": math.sqrt(sum(d2) / used) if used else None,
                    "features": used})
    return sorted(out, key=lambda x: (x["distance"] is None, x["distance"] or 0.0))


def closest_table(rows: Sequence[Mapping], *, features: Sequence[str] = FEATURES,
                  compare: Sequence[str] = ()) -> K.Conclusion:
    """Every candidate's distance to the real stream, nearest first, with the figures it is
    taken over; says which is closest and where the named comparisons rank."""
    by = {r["workload"]: r for r in rows}
    dist = distances(rows, features)
    table = [{"rank": i + 1, "workload": d["workload"], "distance": d["distance"],
              "scale": by[d["workload"]].get("scale"),
              **{f: by[d["workload"]].get(f) for f in features}}
             for i, d in enumerate(dist)]
    real = by[REAL]
    table.append({"rank": None, "workload": REAL, "distance": 0.0, "scale": real.get("scale"),
                  **{f: real.get(f) for f in features}})
    t = K.Conclusion("closest synthetic stream", table, key="workload",
                     kinds={"rank": "count", "distance": "ratio", "scale": "ratio",
                            **{f: "ratio" for f in features}},
                     note=f"Distance: root mean square over {len(features)} diagnostics of "
                          "the difference to the real stream over that diagnostic's range "
                          "across all rows (depths on a log scale; a "
                          "diagnostic only one side shows counts as the whole range).")
    if not dist or dist[0]["distance"] is None:
        return t.say("No synthetic stream shares a diagnostic with the real stream: no "
                     "closest stream.")
    best = dist[0]["workload"]
    t.say(f"The closest synthetic stream to {REAL} is {best} (distance "
          f"{t.cell(best, 'distance')}, rank {t.cell(best, 'rank')} of "
          f"{K.fmt(len(dist))}).")
    if len(dist) > 1:
        far = dist[-1]["workload"]
        t.say(f"The farthest is {far} ({t.cell(far, 'distance')}).")
    named = [c for c in compare if c in by and c != best]
    if named:
        t.say("The named comparisons rank " + ", ".join(
            f"{c} {t.cell(c, 'rank')} ({t.cell(c, 'distance')})" for c in named) + ".")
    return t


_WORDS = {"cancel_share_pct": "cancel share (%)", "taker_share_pct": "taker share (%)",
          "cross_pct": "crossing submits (%)", "cancel_hit_pct": "cancels hitting (%)",
          "fills_mean": "fills per submit", "resting_mean": "resting orders (mean)",
          "levels_max": "price levels (max)", "span_mean": "price span (ticks, mean)",
          "life_median_ops": "order life (median, commands)"}


# Diagnostics of the real stream set by lob's conversion rules rather than by the venue's
# flow: said as such, never as something the synthetic streams miss
ARTEFACTS = {
    "cancel_hit_pct": "every venue delete becomes a cancel of an order the conversion made, so "
                      "it always finds its order",
    "cross_pct": "a created order deleted unfilled is inferred POST_ONLY, and those priced "
                 "across the touch are counted as crossing submits refused",
}


def misses_table(rows: Sequence[Mapping], features: Sequence[str] = FEATURES) -> K.Conclusion:
    """Per diagnostic: the real stream's value beside the synthetic streams' lowest and
    highest (and which streams hold them); says where the real stream lies outside every
    synthetic stream's range (what they miss) and where it lies inside. A diagnostic the
    conversion rules set (:data:`ARTEFACTS`) is labelled so in ``artefact`` and said apart:
    it is not something the synthetic streams miss."""
    real = next(r for r in rows if r["workload"] == REAL)
    syn = [r for r in rows if r["workload"] != REAL]
    table = []
    for f in features:
        have = [(r[f], r["workload"]) for r in syn if r.get(f) is not None]
        rv = real.get(f)
        lo = min(have) if have else (None, None)
        hi = max(have) if have else (None, None)
        where = ("no value" if rv is None or not have else
                 "above every synthetic" if rv > hi[0] else
                 "below every synthetic" if rv < lo[0] else "inside")
        table.append({"diagnostic": _WORDS.get(f, f), "real": rv, "synthetic_min": lo[0],
                      "min_stream": lo[1], "synthetic_max": hi[0], "max_stream": hi[1],
                      "real_is": where,
                      "artefact": "conversion artefact" if f in ARTEFACTS else ""})
    t = K.Conclusion("what the synthetic streams miss", table, key="diagnostic",
                     kinds={"real": "ratio", "synthetic_min": "ratio",
                            "synthetic_max": "ratio", "artefact": "label"},
                     note="conversion artefact: set by lob's conversion of the venue's events "
                          "(" + "; ".join(f"{_WORDS[f]}: {why}" for f, why in ARTEFACTS.items()
                                          if f in features) + ")")
    out = [r for r in table if r["real_is"] in ("above every synthetic", "below every synthetic")
           and not r["artefact"]]
    for r in out:
        d = r["diagnostic"]
        if r["real_is"] == "above every synthetic":
            t.say(f"The real stream's {d} is {t.cell(d, 'real')}, above every synthetic "
                  f"stream (highest: {t.cell(d, 'max_stream')}, {t.cell(d, 'synthetic_max')}).")
        else:
            t.say(f"The real stream's {d} is {t.cell(d, 'real')}, below every synthetic "
                  f"stream (lowest: {t.cell(d, 'min_stream')}, {t.cell(d, 'synthetic_min')}).")
    made = [r for r in table if r["artefact"] and r["real"] is not None]
    if made:
        t.say("Set by the conversion rules, not by the venue's flow (so not counted as "
              "missed): " + ", ".join(f"{r['diagnostic']} {t.cell(r['diagnostic'], 'real')}"
                                      for r in made) + ".")
    inside = [r["diagnostic"] for r in table if r["real_is"] == "inside" and not r["artefact"]]
    if not out:
        t.say("The real stream lies inside the synthetic streams' range on every diagnostic.")
    elif inside:
        t.say("Inside the synthetic range: " + ", ".join(inside) + ".")
    return t


# --- the streams side by side, and their latency ---------------------------------------------

def _split(durations: np.ndarray, commands) -> dict[str, np.ndarray]:
    """The samples of every timed command, then by kind (when one sample per timed command)."""
    from lob.semantics import Kind

    out = {"all": durations}
    kinds = commands["kind"][commands["timed"].astype(bool)]
    if len(kinds) == len(durations):
        out["submit"] = durations[kinds == int(Kind.SUBMIT)]
        out["cancel"] = durations[kinds == int(Kind.CANCEL)]
    return out


def venue_check(engine: str, wl) -> str:
    """"" when ``engine`` reproduces the venue's trades on the real stream ``wl`` fill by
    fill with no other fill (:func:`lob.workloads.bitstamp.validate`); else why not."""
    from lob.workloads import bitstamp

    v = bitstamp.validate(engine, wl=wl)
    if v["ok"]:
        return ""
    return (f"it reproduces {v['matched']} of the venue's {v['trades']} trades "
            f"({v['extra']} other fills)")


def measure_streams(engines: Sequence[str], names: Sequence[str], real_scale: float,
                    scale: float, repeat: int, out: str | Path | None, *,
                    capture=None, diagnose=None, check=None) -> dict:
    """The real stream (prefix ``real_scale``) and the synthetic ``names`` at ``scale``:
    every engine checked against the venue's trades first (``check``, default
    :func:`venue_check`: an engine that breaks the matching rules is not timed, and named
    with the reason in ``"refused"``); diagnostics (one replay on the first engine that
    passed) and each passing engine's closed-loop per-op latency, ``repeat`` captures per
    (engine, stream), rounds rotated (:func:`rotations`), merged; ``.hgrm`` files into
    ``out`` as ``<engine>__<stream>.hgrm``. ValueError when no engine passes.

    Returns ``{"diag": [rows], "lat": [{"workload", "engine", "op", "count", p50, p99,
    p99.9}], "clock", "engines", "refused": {engine: why}}``. ``capture`` (default
    :func:`lob.studies.conclude.capture`), ``diagnose`` (default :func:`diagnose_stream`)
    and ``check`` are injectable for tests."""
    from lob.workloads import build

    capture = capture or K.capture
    diagnose = diagnose or diagnose_stream
    check = check or venue_check
    wls = {REAL: build(REAL, scale=real_scale)}
    wls.update({n: build(n, scale=scale) for n in dict.fromkeys(names) if n != REAL})
    refused = {e: why for e in dict.fromkeys(engines) if (why := check(e, wls[REAL]))}
    engines = [e for e in engines if e not in refused]
    if not engines:
        raise ValueError("no engine reproduces the venue's trades, so none is timed: "
                         + "; ".join(f"{e}: {why}" for e, why in refused.items()))
    diag = [diagnose(wl, engines[0]) for wl in wls.values()]
    pairs = [(e, n) for e in engines for n in wls]
    samples: dict[tuple, list] = {p: [] for p in pairs}
    clock = None
    for order in rotations(pairs, repeat):
        for e, n in order:
            cp = capture(e, wls[n])
            samples[(e, n)].append(np.asarray(cp["durations"], dtype=np.int64))
            clock = cp["clock"]
    lat = []
    for e, n in pairs:
        parts = [_split(d, wls[n].commands) for d in samples[(e, n)]]  # per capture, merged
        if out is not None:
            K.save_hgrm(np.concatenate([p["all"] for p in parts]), Path(out) / f"{e}__{n}.hgrm")
        for op in OPS:
            if not all(op in p for p in parts):
                continue
            r = K.percentile_row(np.concatenate([p[op] for p in parts]), QS)
            lat.append({"workload": n, "engine": e, "op": op, "count": r["count"],
                        **{_name(q): r[_name(q)] for q in QS}})
    return {"diag": diag, "lat": lat, "clock": clock, "engines": list(engines),
            "refused": refused}


def diagnostics_table(streams: dict, closest: str | None = None) -> K.Conclusion:
    """The streams' diagnostics side by side (one row per stream); says which synthetic
    stream is closest, how many of the venue's trades the real stream reproduces and where
    its rates per second come from (the venue's ms clock)."""
    rows = [{"workload": r["workload"], **{c: r.get(c) for c in DIAG_COLUMNS}}
            for r in streams["diag"]]
    t = K.Conclusion("diagnostics", rows, key="workload",
                     kinds={**{c: "count" for c in _COUNTS},
                            **{c: "ratio" for c in DIAG_COLUMNS if c not in _COUNTS}},
                     note="Rates over the timed commands; order life from a rest to its "
                          "cancel or last fill; life in ms and rates per second from the "
                          "venue's millisecond timestamps (real stream only: the synthetic "
                          "streams carry no clock).")
    real = next((r for r in rows if r["workload"] == REAL), None)
    if real is not None and real.get("venue_trades") is not None:
        ok = next(r for r in streams["diag"] if r["workload"] == REAL).get("validated")
        if ok:
            every = streams.get("engines") or []
            t.say(f"{REAL} replays its venue's trades fill by fill: "
                  f"{t.cell(REAL, 'trades_reproduced')} of {t.cell(REAL, 'venue_trades')} "
                  "reproduced, no other fill"
                  + (f", on every engine timed ({', '.join(every)})." if every else "."))
        for e, why in (streams.get("refused") or {}).items():
            t.say(f"{e} does NOT reproduce them: {why}.")
        else:
            t.say(f"{REAL} does NOT reproduce its venue's trades: "
                  f"{t.cell(REAL, 'trades_reproduced')} of {t.cell(REAL, 'venue_trades')} "
                  "matched (or other fills appeared).")
        if real.get("takers_per_s") is not None:
            t.say(f"On the venue's ms clock it runs {t.cell(REAL, 'commands_per_s')} commands "
                  f"and {t.cell(REAL, 'takers_per_s')} takers per second; an order that rests "
                  f"lives {t.cell(REAL, 'life_median_ms')} ms "
                  f"({t.cell(REAL, 'life_median_ops')} commands) at the median.")
    if closest is not None and any(r["workload"] == closest for r in rows):
        t.say(f"{closest} is the synthetic stream closest to it (see the distance table).")
    return t


def latency_table(streams: dict, closest: str | None = None) -> K.Conclusion:
    """Per stream, engine and op kind: count, p50, p99, p99.9 (shown only where the count
    supports them). Per engine, compares the real stream's p99 (else p50) over every timed
    command with each synthetic stream's; names the hidden percentiles."""
    t = K.Conclusion("latency", streams["lat"], key=["workload", "engine", "op"],
                     kinds={"op": "label"}, note=K.clock_line(streams["clock"]))
    for e, why in (streams.get("refused") or {}).items():
        t.say(f"{e} is not timed: {why}; an engine that breaks the matching rules has no "
              "latency to show.")
    for e in streams["engines"]:
        mine = {r["workload"]: r for r in t.rows if r["engine"] == e and r["op"] == "all"}
        if REAL not in mine:
            continue
        q = next((q for q in (99, 50) if all(supported(q, r["count"]) for r in mine.values())),
                 None)
        if q is None:
            t.say(f"{e}: too few samples for a p50 on every stream.")
            continue
        col = _name(q)
        others = [w for w in mine if w != REAL]
        if not others:
            continue
        rv = mine[REAL][col]
        lower = [w for w in others if rv < mine[w][col]]
        higher = [w for w in others if rv > mine[w][col]]
        same = [w for w in others if rv == mine[w][col]]
        parts = [f"{e}'s {col} on {REAL} is {t.cell((REAL, e, 'all'), col)} ns"]
        if lower:
            parts.append("lower than on " + ", ".join(
                f"{w} ({t.cell((w, e, 'all'), col)})" for w in lower))
        if higher:
            parts.append("higher than on " + ", ".join(
                f"{w} ({t.cell((w, e, 'all'), col)})" for w in higher))
        if same:
            parts.append("the same as on " + ", ".join(same))
        t.say("; ".join(parts) + ".")
        if closest in mine:
            t.say(f"Against the closest synthetic stream ({closest}) the real stream's {col} "
                  f"is {'lower' if rv < mine[closest][col] else 'higher' if rv > mine[closest][col] else 'the same'}.")  # noqa: E501
    return K.conclude_suppressed(t)


# --- plots -----------------------------------------------------------------------------------

def plot_features(rows: Sequence[Mapping], shown: Sequence[str],
                  features: Sequence[str] = FEATURES):
    """Grouped bars: each diagnostic of ``features`` scaled to its range over ``rows`` (0:
    lowest, 1: highest; depths on a log scale), for the streams ``shown``. Returns the Figure."""
    import pandas as pd

    from lob.studies import plots as lp

    lp.use()
    data = {}
    for f in features:
        vals = {r["workload"]: _feature(r, f) for r in rows}
        have = [v for v in vals.values() if v is not None]
        lo, hi = (min(have), max(have)) if have else (0.0, 0.0)
        data[_WORDS.get(f, f)] = {w: (None if vals.get(w) is None else
                                      (vals[w] - lo) / (hi - lo) if hi > lo else 0.0)
                                  for w in shown}
    frame = pd.DataFrame(data).T[list(shown)].astype(float)
    fig, ax = lp.subplots(panel=(9.0, 3.8))
    frame.plot.bar(ax=ax, rot=0, width=0.8)
    ax.set(ylabel="position in the range over all streams", xlabel="",
           title="diagnostics, scaled to their range (0 lowest, 1 highest)")
    ax.set_ylim(0, 1.05)
    lp.category_axis(ax, list(frame.index))
    lp.legend_outside(ax, title="stream")
    return fig


def plot_latency(streams: dict):
    """One panel per engine: p50 / p99 / p99.9 over every timed command (supported ones
    only), one line per stream. Returns the Figure."""
    from lob.studies import plots as lp

    lp.use()
    engines = streams["engines"]
    fig, axes = lp.subplots(1, len(engines), panel=(4.6, 3.6), squeeze=False)
    for ax, e in zip(axes.flat, engines, strict=True):
        vals = []
        for r in streams["lat"]:
            if r["engine"] != e or r["op"] != "all":
                continue
            qs = [q for q in QS if supported(q, r["count"])]
            ys = [r[_name(q)] for q in qs]
            ax.plot([_name(q) for q in qs], ys, marker="o", label=r["workload"])
            vals += ys
        ax.set(title=e, ylabel="ns per op (closed loop)", xlabel="percentile")
        lp.value_axis(ax, vals)
    lp.legend_outside(axes.flat[-1], title="stream")  # the same streams in every panel
    return fig


# --- open loop: the venue's own pace ----------------------------------------------------------

def _pipeline_row(session, wl, due_ns: np.ndarray):
    """One open-loop row of ``wl`` on a live :class:`~lob.pipeline.PipelineSession` with the
    given due times (ns after the row's start); its offered rate is recorded as the timed
    commands over the span of their due times."""
    timed = wl.commands["timed"].astype(bool)
    span = (int(due_ns[timed].max()) - int(due_ns[timed].min())) / 1e9
    rate = int(timed.sum()) / span if span > 0 else math.inf
    return session.run(wl.commands, rate=rate, due_ns=due_ns)


def _pace(speedup: float) -> str:
    """A row's label: ``"100x"`` the venue's pace, ``"all at once"`` for the capacity row."""
    return "all at once" if math.isinf(speedup) else f"{speedup:g}x"


def measure_open_loop(engine: str, real_scale: float, speedups: Sequence[float],
                      max_s: float, *, capacity: bool = True, run=None,
                      transport: str | None = None) -> dict:
    """The real stream through the pipeline's open-loop sender, each command due when the
    venue's clock (ms) says, ``speedup`` times faster; ``capacity`` adds a row with every
    command due at once (``speedup`` inf: the capacity-bound row). Each row replays the
    longest prefix of the stream (at most ``real_scale`` of it) that lasts at most ``max_s``
    seconds at its pace, so 1x replays the first ``max_s`` venue seconds and a fast pace the
    whole prefix.

    ``transport`` (None: ``"compiled"`` for an ``@numba`` engine, the loops seed 003's pipeline
    is measured with, else ``"python"``) carries the commands. The python one paces by
    sleeping (a sleep overshoots by tens of us) and moves each command through Python: on this
    2-core VM its 1x p50 read 425 us against the compiled one's 9.5 us, and its capacity
    0.11 M against 5.6 M commands/s (v2@numba, 6 s rows, load 2.3), so a python-transport row
    measures the transport, not the engine.

    Returns ``{"engine", "transport", "rows": [{"pace", "speedup", "venue_s", "commands" (timed),
    "offered_per_s", "achieved_per_s" (timed commands from the first one due to the last
    one done), "count", p50, p99, p99.9 (response = done - due, ns)}]}``. ``run``
    (default: one :class:`~lob.pipeline.PipelineSession` for every row, its rows given
    ``due_ns``; called as ``run(engine, wl, due_ns)``, it returns a
    :class:`~lob.pipeline.PipelineRun`) is injectable for tests."""
    _check_open_loop_s(max_s)
    from lob.workloads import bitstamp, build

    full = build(REAL, scale=real_scale)
    if transport is None:
        transport = "compiled" if engine.endswith("@numba") else "python"
    if run is None:
        from lob.pipeline import PipelineSession

        with PipelineSession(engine, config=full.config, transport=transport) as session:
            return measure_open_loop(engine, real_scale, speedups, max_s, capacity=capacity,
                                     run=lambda e, wl, due: _pipeline_row(session, wl, due),
                                     transport=transport)
    ms = bitstamp.arrival_ms(full)
    n_pre = int(np.argmax(full.commands["timed"]))
    rows = []
    for sp in [*speedups, *([math.inf] if capacity else [])]:
        venue_ms = math.inf if math.isinf(sp) else max_s * 1000.0 * sp
        end = int(np.searchsorted(ms[n_pre:], venue_ms, side="right")) + n_pre
        end = max(end, n_pre + 1)
        wl = dataclasses.replace(full, commands=full.commands[:end])
        due = (np.zeros(end, dtype=np.int64) if math.isinf(sp)
               else bitstamp.due_offsets_ns(wl, sp)[:end])
        due[n_pre:] += PRELOAD_NS  # the stream starts once the snapshot pre-load is in
        res = run(engine, wl, due)
        r = K.percentile_row(np.asarray(res.latency_ns, dtype=np.int64), QS)
        t = np.asarray(res.timed, dtype=bool)
        n_t = int(t.sum())
        took = int(res.done_ns[t].max()) - int(res.due_ns[t].min()) if n_t else 0
        venue_s = (int(ms[end - 1]) - int(ms[n_pre])) / 1000.0
        rows.append({"pace": _pace(sp), "speedup": float(sp), "venue_s": venue_s,
                     "commands": n_t,
                     "offered_per_s": (n_t * sp / venue_s if venue_s > 0 and math.isfinite(sp)
                                       else None),
                     "achieved_per_s": n_t / (took / 1e9) if took > 0 else None,
                     "count": r["count"], **{_name(q): r[_name(q)] for q in QS}})
    return {"engine": engine, "transport": transport, "rows": rows}


def open_loop_table(ol: dict) -> K.Conclusion:
    """Response time (due to done, queueing counted) per pace of the venue's clock; says how
    it moves from the slowest to the fastest pace."""
    how = ol["engine"] + (f", {ol['transport']} transport" if ol.get("transport") else "")
    t = K.Conclusion(f"open loop ({how})", ol["rows"], key="pace",
                     kinds={"speedup": "ratio", "commands": "count", "venue_s": "ratio",
                            "offered_per_s": "ratio", "achieved_per_s": "ratio"},
                     note="Each command due at the venue's arrival time (ms timestamps, so ms "
                          "resolution) divided by the speed-up, the timed stream starting "
                          "once the snapshot pre-load is in; all at once: every command due "
                          "together (capacity-bound). venue_s: the venue seconds replayed; "
                          "response = done - due, queueing counted.")
    rows = t.rows
    t.say("At the venue's pace the commands arrive milliseconds apart, so between them the "
          "engine loop is idle (it spins, then yields the CPU with sched_yield): a response at "
          "a slow pace is the pipeline's wake-up from that idle path plus the engine's service "
          "time, not the engine alone; the all-at-once row is the one that keeps the engine "
          "busy.")
    if len(rows) >= 2:
        a, b = rows[0]["pace"], rows[-1]["pace"]
        q = next((q for q in (99, 50) if supported(q, rows[0]["count"])
                  and supported(q, rows[-1]["count"])), None)
        if q is not None:
            col = _name(q)
            t.say(f"The {col} response goes from {t.cell(a, col)} ns at {a} to "
                  f"{t.cell(b, col)} ns at {b}.")
    elif len(rows) == 1:
        t.say(f"One pace measured ({rows[0]['pace']}).")
    else:
        t.say("No pace measured.")
    return K.conclude_suppressed(t)


# --- the closing note ---------------------------------------------------------------------

def closing_markdown(streams: dict, engine: str) -> str:
    """The diagnostics of every stream side by side (columns) with ``engine``'s p50 / p99 /
    p99.9 over every timed command on each, from one run: markdown text (the first engine
    timed when ``engine`` was refused: see :func:`measure_streams`)."""
    timed = streams.get("engines") or [engine]
    engine = engine if engine in timed else timed[0]  # a refused engine has no latency
    names = [r["workload"] for r in streams["diag"]]
    by = {r["workload"]: r for r in streams["diag"]}
    lat = {r["workload"]: r for r in streams["lat"] if r["engine"] == engine and r["op"] == "all"}
    lines = ["| | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for c in DIAG_COLUMNS:
        lines.append(f"| {c} | " + " | ".join(K.fmt(by[n].get(c)) for n in names) + " |")
    for c in ("count", *(_name(q) for q in QS)):
        lines.append(f"| {engine} {c}{'' if c == 'count' else ' ns'} | "
                     + " | ".join(K.fmt(lat.get(n, {}).get(c)) for n in names) + " |")
    return "\n".join(lines)


def claims(*_args) -> dict[str, dict]:
    """No seed claim rests on this study (no seed publishes a real venue's flow): it sets a
    real stream beside lob's synthetic ones, so it records no claim measurement."""
    return {}


SHAPE = Shape(parameters=Parameters,
              measure=(measure_candidates, measure_streams, measure_open_loop),
              tables=(conversion_table, closest_table, misses_table, diagnostics_table,
                      latency_table, open_loop_table),
              claims=claims, plots=(plot_features, plot_latency))

"""What a command stream really does to a book, measured by replaying it on the reference engine.

:func:`diagnose` returns a dict of scalars plus the time series (a pandas frame) and the
per-burst list. Rates are over the **timed** commands only (what a latency number measures);
the depth series and the first-empty indices cover every command:

* ``cross_pct``: timed submits (any type) that met a crossing opposite price on arrival;
* ``cancel_hit_pct``: timed cancels whose id was resting;
* ``market_empty_pct``: timed MARKET / NOTIONAL orders that met an empty opposite side;
* ``fills_mean`` / ``fills_max`` and ``levels_mean`` / ``levels_max``: fills and distinct
  price levels traded per timed submit;
* ``bid_empties_at`` / ``ask_empties_at``: the index of the first timed command that
  leaves that side empty (it held orders before), or None; ``..._timed`` is the same
  command counted among timed commands only (0 = the first measured op);
* ``resting_before_mass_cancel``: resting orders just before each mass cancel;
* ``series``: command index, resting orders, bid / ask levels and the price span (lowest to
  highest resting price, in ticks) every ``sample_every`` commands.
"""

from __future__ import annotations

import numpy as np

from lob.engines import get_engine
from lob.engines.base import command_tuples
from lob.semantics import Kind, OrderType, Status

_MARKETS = (int(OrderType.MARKET), int(OrderType.NOTIONAL))


def _pct(a: int, b: int) -> float | None:
    return round(100.0 * a / b, 2) if b else None


def _span(sides) -> int:
    """Ticks from the lowest to the highest resting price, both sides (0 if empty)."""
    ps = [b.peekitem(k)[0] for b in sides if b for k in (0, -1)]
    return max(ps) - min(ps) + 1 if ps else 0


def diagnose(workload, sample_every: int | None = None) -> dict:
    """Replay ``workload`` on the reference engine and measure what each op met."""
    import pandas as pd

    cmds = workload.commands
    n = len(cmds)
    if sample_every is None:
        sample_every = max(1, n // 1000)
    if sample_every < 1:
        raise ValueError(f"sample_every must be >= 1, got {sample_every}")
    eng = get_engine("reference", workload.config)
    sides, index, fills = eng._sides, eng._index, eng._fills
    ex = eng.step
    timed = cmds["timed"].tolist()
    n_sub = n_cross = n_mkt = n_mkt_empty = n_can = n_can_hit = 0
    fill_counts: list[int] = []
    level_counts: list[int] = []
    empties = [None, None]
    empties_timed = [None, None]
    mass_before: list[int] = []
    series = []
    n_timed_seen = 0
    for i, row in enumerate(command_tuples(cmds)):
        kind, otype, side = row[0], row[1], row[2]
        t = timed[i]
        was = (bool(sides[0]), bool(sides[1]))
        if kind == Kind.MASS_CANCEL:
            mass_before.append(len(index))
        if t and kind == Kind.SUBMIT and side in (0, 1):
            opp = sides[1 - side]
            n_sub += 1
            if opp:
                best = opp.peekitem(0 if side == 0 else -1)[0]
                price = row[4]
                if otype in _MARKETS or (price >= best if side == 0 else price <= best):
                    n_cross += 1
            if otype in _MARKETS:
                n_mkt += 1
                n_mkt_empty += not opp
        nf0 = len(fills)
        out = ex(*row)
        if t:
            if kind == Kind.CANCEL:
                n_can += 1
                n_can_hit += out[0] == Status.CANCELLED
            elif kind == Kind.SUBMIT and out[0] != Status.REJECTED:
                nf = len(fills) - nf0
                fill_counts.append(nf)
                level_counts.append(len({f[2] for f in fills[nf0:]}) if nf else 0)
        for s in (0, 1):
            if t and empties[s] is None and was[s] and not sides[s]:
                empties[s], empties_timed[s] = i, n_timed_seen
        n_timed_seen += t
        if i % sample_every == 0 or i == n - 1:
            series.append((i, len(index), len(sides[0]), len(sides[1]), _span(sides)))
        if len(fills) > 100_000:  # only per-op counts are needed; keep memory flat
            del fills[:]
    fc = np.array(fill_counts or [0])
    lc = np.array(level_counts or [0])
    frame = pd.DataFrame(series, columns=["op", "resting", "bid_levels", "ask_levels", "span"])
    return {
        "workload": workload.name,
        "commands": n,
        "timed": int(np.count_nonzero(cmds["timed"])),
        "resting_end": len(index),
        "resting_max": int(frame["resting"].max()) if len(frame) else 0,
        "resting_mean": float(frame["resting"].mean()) if len(frame) else 0.0,
        "levels_max": int((frame["bid_levels"] + frame["ask_levels"]).max()) if len(frame) else 0,
        "span_mean": float(frame["span"].mean()) if len(frame) else 0.0,
        "cross_pct": _pct(n_cross, n_sub),
        "cancel_hit_pct": _pct(n_can_hit, n_can),
        "market_empty_pct": _pct(n_mkt_empty, n_mkt),
        "timed_submits": n_sub,
        "timed_cancels": n_can,
        "timed_markets": n_mkt,
        "fills_mean": round(float(fc.mean()), 3),
        "fills_max": int(fc.max()),
        "levels_walked_mean": round(float(lc.mean()), 3),
        "levels_walked_max": int(lc.max()),
        "bid_empties_at": empties[0],
        "bid_empties_at_timed": empties_timed[0],
        "ask_empties_at": empties[1],
        "ask_empties_at_timed": empties_timed[1],
        "resting_before_mass_cancel": mass_before,
        "series": frame,
    }


def summary_text(d: dict) -> str:
    """A few lines a reader can put beside a latency number."""
    def f(v):
        return "n/a" if v is None else (f"{v:,}" if isinstance(v, int) else str(v))

    def rate(pct, n, what):  # "12.5% of 8,000 submits", or "no timed submits"
        return f"no timed {what}" if not n else f"{f(pct)}% of {f(n)} {what}"

    lines = [
        "  diagnostics (reference replay; rates over timed commands):",
        f"    resting orders: end {f(d['resting_end'])}, max {f(d['resting_max'])}, "
        f"mean {d['resting_mean']:,.0f}; max levels (both sides) {f(d['levels_max'])}; "
        f"mean price span {d['span_mean']:,.0f} ticks",
        f"    crossing: {rate(d['cross_pct'], d['timed_submits'], 'submits')}; "
        f"meeting an empty side: {rate(d['market_empty_pct'], d['timed_markets'], 'markets')}",
        f"    hitting a resting order: {rate(d['cancel_hit_pct'], d['timed_cancels'], 'cancels')}",
        f"    fills per timed submit: mean {d['fills_mean']}, max {f(d['fills_max'])}; "
        f"levels walked: mean {d['levels_walked_mean']}, max {f(d['levels_walked_max'])}",
        f"    bid side first empties at command {f(d['bid_empties_at'])} "
        f"(timed op {f(d['bid_empties_at_timed'])}); ask side at {f(d['ask_empties_at'])} "
        f"(timed op {f(d['ask_empties_at_timed'])})",
    ]
    mb = d["resting_before_mass_cancel"]
    if mb:
        a = np.array(mb)
        lines.append(f"    resting before each mass cancel ({len(mb)}): mean {a.mean():,.0f}, "
                     f"min {a.min():,}, max {a.max():,}")
    return "\n".join(lines)

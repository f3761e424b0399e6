"""What a command stream really does to a book, measured from the public outputs of a replay.

Every figure here is computed from a replay's commands, outcomes and fills (what
:meth:`lob.engines.base.Engine.replay` returns), never from an engine's internals: any
engine that agrees with ``reference`` gives the same diagnostics, so a compiled replay of a
seed-sized stream gives them in seconds. :class:`BookShape` follows the book from those
outputs (which orders rest where), :func:`diagnose` reads every per-op figure off it, and
:func:`stream_diagnostics` (vectorised, no per-op loop) gives the regime diagnostics the seed
claims check (a test checks the two agree).

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

from itertools import islice

import numpy as np
from sortedcontainers import SortedDict

from lob.semantics import Kind, OrderType, Reason, Scope, Status

_MARKETS = (int(OrderType.MARKET), int(OrderType.NOTIONAL))
_RESTS = (int(OrderType.LIMIT), int(OrderType.POST_ONLY))
_LIVE = (int(Status.ACCEPTED), int(Status.PARTIALLY_FILLED))
_SUBMIT, _CANCEL, _MODIFY, _MASS = (int(Kind.SUBMIT), int(Kind.CANCEL), int(Kind.MODIFY),
                                    int(Kind.MASS_CANCEL))
_REJ, _NOTFOUND = int(Status.REJECTED), int(Status.NOT_FOUND)


def _pct(a: int, b: int) -> float | None:
    return round(100.0 * a / b, 2) if b else None


class BookShape:
    """The resting orders of a book, followed from a replay's public outputs alone.

    :meth:`apply` takes one command, its outcome and its fills (in order) and updates which
    orders rest at which price in which queue position, by the rules of
    :mod:`lob.semantics`: a LIMIT / POST_ONLY remainder rests at the tail of its level
    (unless self-trade prevention stopped it); a fill takes quantity from its maker; a cancel,
    a mass cancel (by its scope) and self-trade prevention (the first ``removed`` own orders
    in priority order: the walk meets the book in that order) take orders away; a modify
    keeps, moves or re-enters its order. A mass cancel whose count differs from the
    outcome's ``removed`` raises ``RuntimeError`` (the outputs do not describe a book).
    """

    def __init__(self) -> None:
        self.orders: dict[int, list[int]] = {}  # id -> [side, price, qty, owner]
        self.sides = (SortedDict(), SortedDict())  # price -> {id: None} in time priority

    def __len__(self) -> int:
        return len(self.orders)

    def best(self, side: int) -> int | None:
        """The best price of ``side`` (highest bid, lowest ask), None when it is empty."""
        b = self.sides[side]
        return b.peekitem(-1 if side == 0 else 0)[0] if b else None

    def span(self) -> int:
        """Ticks from the lowest to the highest resting price, both sides (0 if empty)."""
        ps = [b.peekitem(k)[0] for b in self.sides if b for k in (0, -1)]
        return max(ps) - min(ps) + 1 if ps else 0

    def resting(self) -> list[tuple]:
        """(id, owner, side, price, qty) of every resting order, in priority order per side
        (the order of :meth:`lob.engines.reference.ReferenceEngine.resting`)."""
        out = []
        for side, book in enumerate(self.sides):
            for p in (reversed(book) if side == 0 else book):
                out.extend((i, self.orders[i][3], side, p, self.orders[i][2]) for i in book[p])
        return out

    def _add(self, oid, side, price, qty, owner):
        self.orders[oid] = [side, price, qty, owner]
        self.sides[side].setdefault(price, {})[oid] = None

    def _remove(self, oid):
        side, price, _, _ = self.orders.pop(oid)
        level = self.sides[side][price]
        del level[oid]
        if not level:
            del self.sides[side][price]

    def _take(self, side, owner, otype, price, oid, out, fills):
        """An order of ``side`` meeting the book: its fills, its STP removals, its rest."""
        for _, maker, _, q in fills:
            o = self.orders[maker]
            o[2] -= q
            if o[2] == 0:
                self._remove(maker)
        k = out[6]
        if k:  # self-trade prevention: the first k own orders the walk met
            opp = self.sides[1 - side]
            met = (i for p in (reversed(opp) if side == 1 else opp) for i in opp[p]
                   if self.orders[i][3] == owner)
            for i in list(islice(met, k)):
                self._remove(i)
        if otype in _RESTS and out[0] in _LIVE and out[1] == 0 and out[3] > 0:
            self._add(oid, side, price, out[3], owner)

    def apply(self, cmd, out, fills=()) -> None:
        """One command (kind, otype, side, owner, price, qty, id, price_hi), its outcome
        tuple (status, reason, id, remaining, filled, fills, removed) and its fills
        ((taker, maker, price, qty) each)."""
        kind, otype, side, owner, price, qty, oid, hi = cmd
        if out[0] in (_REJ, _NOTFOUND):
            return
        if kind == _SUBMIT:
            self._take(side, owner, otype, price, out[2], out, fills)
        elif kind == _CANCEL:
            self._remove(oid)
        elif kind == _MODIFY:
            o_side, o_price, o_qty, o_owner = self.orders[oid]
            if price in (0, o_price):  # same price: a decrease keeps its place
                if qty > o_qty:
                    self._remove(oid)
                    self._add(oid, o_side, o_price, qty, o_owner)
                else:
                    self.orders[oid][2] = qty
            else:  # a new price: out, then in again as a LIMIT order
                self._remove(oid)
                self._take(o_side, o_owner, int(OrderType.LIMIT), price, oid, out, fills)
        elif kind == _MASS:
            gone = [i for i, (s, p, _, w) in self.orders.items()
                    if otype == Scope.ALL or (otype == Scope.SIDE and s == side)
                    or (otype == Scope.OWNER and w == owner)
                    or (otype == Scope.PRICE_RANGE and price <= p <= hi)]
            if len(gone) != out[6]:
                raise RuntimeError(f"mass cancel removed {out[6]} orders, the book followed "
                                   f"from the outputs held {len(gone)}")
            for i in gone:
                self._remove(i)


def follow(commands, outcomes, fills):
    """Walk a replay's outputs: yields (index, command tuple, outcome tuple, its fills, book)
    with the book as it stands BEFORE the command; the command is applied after the yield."""
    from lob.engines.base import command_tuples

    if int(outcomes["fills"].sum()) != len(fills):
        raise ValueError(f"the outcomes count {int(outcomes['fills'].sum())} fills, the fill "
                         f"record holds {len(fills)}: not one replay's outputs")
    book = BookShape()
    outs = outcomes.tolist()
    fl = fills.tolist()
    at = 0
    for i, cmd in enumerate(command_tuples(commands)):
        out = outs[i]
        mine = fl[at:at + out[5]]
        at += out[5]
        yield i, cmd, out, mine, book
        book.apply(cmd, out, mine)


def diagnose(workload, sample_every: int | None = None, *, engine: str = "reference",
             run=None) -> dict:
    """Replay ``workload`` on ``engine`` (or take ``run``, a replay of it) and measure what
    each op met, from the replay's outputs alone."""
    import pandas as pd

    cmds = workload.commands
    n = len(cmds)
    if sample_every is None:
        sample_every = max(1, n // 1000)
    if sample_every < 1:
        raise ValueError(f"sample_every must be >= 1, got {sample_every}")
    if run is None:
        from lob.engines import get_engine

        run = get_engine(engine, workload.config).replay(cmds)
    timed = cmds["timed"].tolist()
    n_sub = n_cross = n_mkt = n_mkt_empty = n_can = n_can_hit = 0
    fill_counts: list[int] = []
    level_counts: list[int] = []
    empties = [None, None]
    empties_timed = [None, None]
    mass_before: list[int] = []
    series = []
    n_timed_seen = 0
    was = (False, False)
    for i, row, out, fl, book in follow(cmds, run.outcomes, run.fills):
        kind, otype, side, price = row[0], row[1], row[2], row[4]
        t = timed[i]
        now = (bool(book.sides[0]), bool(book.sides[1]))
        if i:  # the state after command i - 1 is the state before command i
            for s in (0, 1):
                if timed[i - 1] and empties[s] is None and was[s] and not now[s]:
                    empties[s], empties_timed[s] = i - 1, n_timed_seen - 1
            if (i - 1) % sample_every == 0:
                series.append((i - 1, len(book), len(book.sides[0]), len(book.sides[1]),
                               book.span()))
        was = now
        if kind == _MASS:
            mass_before.append(len(book))
        if t and kind == _SUBMIT and side in (0, 1):
            best = book.best(1 - side)
            n_sub += 1
            if best is not None and (otype in _MARKETS
                                     or (price >= best if side == 0 else price <= best)):
                n_cross += 1
            if otype in _MARKETS:
                n_mkt += 1
                n_mkt_empty += best is None
        if t:
            if kind == _CANCEL:
                n_can += 1
                n_can_hit += out[0] == Status.CANCELLED
            elif kind == _SUBMIT and out[0] != _REJ:
                fill_counts.append(out[5])
                level_counts.append(len({f[2] for f in fl}))
        n_timed_seen += t
    if n:  # the state after the last command
        for s in (0, 1):
            if timed[-1] and empties[s] is None and was[s] and not book.sides[s]:
                empties[s], empties_timed[s] = n - 1, n_timed_seen - 1
        series.append((n - 1, len(book), len(book.sides[0]), len(book.sides[1]), book.span()))
    fc = np.array(fill_counts or [0])
    lc = np.array(level_counts or [0])
    frame = pd.DataFrame(series, columns=["op", "resting", "bid_levels", "ask_levels", "span"])
    return {
        "workload": workload.name,
        "commands": n,
        "timed": int(np.count_nonzero(cmds["timed"])),
        "resting_end": len(book) if n else 0,
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


def resting_series(commands, outcomes, fills):
    """Orders resting just before and just after each command (numpy int64 arrays).

    A limit or post-only that rested adds one; a maker filled to zero, a self-trade cancel, a
    cancel or a mass cancel takes its orders away; modifies are not followed.
    """
    k, ot, st = commands["kind"], commands["otype"], outcomes["status"]
    sub = k == int(Kind.SUBMIT)
    rests = (sub & np.isin(ot, (int(OrderType.LIMIT), int(OrderType.POST_ONLY)))
             & np.isin(st, (int(Status.ACCEPTED), int(Status.PARTIALLY_FILLED))))
    delta = rests.astype(np.int64) - outcomes["removed"].astype(np.int64)
    n = len(commands)
    if len(fills):
        ids = outcomes["id"]
        top = int(max(ids.max(), fills["maker"].max(), fills["taker"].max())) + 1
        idx_of = np.full(top, -1, dtype=np.int64)
        idx_of[ids[sub & (ids > 0)]] = np.flatnonzero(sub & (ids > 0))
        rest_qty = np.zeros(top, dtype=np.int64)
        rest_qty[ids[rests]] = outcomes["remaining"][rests]
        order = np.argsort(fills["maker"], kind="stable")  # each maker's fills in time order
        mk, q = fills["maker"][order], fills["qty"][order].astype(np.int64)
        starts = np.r_[0, np.flatnonzero(np.diff(mk)) + 1]
        cs = np.cumsum(q)
        base = np.r_[0, cs[starts[1:] - 1]]
        cum = cs - np.repeat(base, np.diff(np.r_[starts, len(mk)]))
        gone = cum == rest_qty[mk]
        delta -= np.bincount(idx_of[fills["taker"][order][gone]], minlength=n)
    after = np.cumsum(delta)
    return after - delta, after


def levels_walked(commands, outcomes, fills):
    """Distinct price levels each command traded at (numpy int64, one per command)."""
    n = len(commands)
    out = np.zeros(n, dtype=np.int64)
    if not len(fills):
        return out
    sub = commands["kind"] == int(Kind.SUBMIT)
    ids = outcomes["id"]
    top = int(max(ids.max(), fills["taker"].max())) + 1
    idx_of = np.full(top, -1, dtype=np.int64)
    idx_of[ids[sub & (ids > 0)]] = np.flatnonzero(sub & (ids > 0))
    pairs = np.unique(np.stack([fills["taker"], fills["price"]], axis=1), axis=0)
    np.add.at(out, idx_of[pairs[:, 0]], 1)
    return out


def stream_diagnostics(commands, outcomes, fills) -> dict:
    """Regime diagnostics of a replay, from its commands, outcomes and fills (any engine, so
    a compiled replay of a seed-sized stream gives them in seconds).

    * ``commands`` / ``count``: stream length and timed ops;
    * ``resting_mean`` / ``resting_max`` / ``resting_end``: orders resting after each
      command (a limit or post-only that rested adds one; a maker filled to zero, a
      self-trade cancel, a cancel or a mass cancel takes its orders away; modifies are not
      followed);
    * ``market_empty_pct``: timed market / notional orders that traded nothing, removed
      nothing and were cancelled for want of liquidity, i.e. met an empty side (a notional
      amount below the best price counts too);
    * ``cancel_hit_pct``: timed cancels that found their order;
    * ``resting_before_mass_cancel_mean``; ``fok_pct``: FOK share of timed submits.

    Same definitions as :func:`diagnose`, which follows the book op by op (a test checks
    they agree).
    """
    k, t, ot = commands["kind"], commands["timed"].astype(bool), commands["otype"]
    st, nf = outcomes["status"], outcomes["fills"]
    rm = outcomes["removed"]
    sub = k == int(Kind.SUBMIT)
    before, after = resting_series(commands, outcomes, fills)
    n = len(commands)
    mkt = sub & t & np.isin(ot, (int(OrderType.MARKET), int(OrderType.NOTIONAL)))
    empty = mkt & (nf == 0) & (rm == 0) & (outcomes["reason"] == int(Reason.NO_LIQUIDITY))
    can = t & (k == int(Kind.CANCEL))
    hit = can & (st == int(Status.CANCELLED))
    mass = k == int(Kind.MASS_CANCEL)
    tsub = sub & t

    def pct(a, b):
        return round(100.0 * int(a.sum()) / int(b.sum()), 2) if b.any() else None

    return {"commands": int(n), "count": int(t.sum()),
            "resting_mean": float(after.mean()) if n else 0.0,
            "resting_max": int(after.max()) if n else 0,
            "resting_end": int(after[-1]) if n else 0,
            "market_empty_pct": pct(empty, mkt), "cancel_hit_pct": pct(hit, can),
            "resting_before_mass_cancel_mean": (float(before[mass].mean()) if mass.any()
                                                else None),
            "fok_pct": pct(tsub & (ot == int(OrderType.FOK)), tsub)}


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

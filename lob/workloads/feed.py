"""One conversion model for real market-by-order feeds: venue events -> lob commands.

Every importer (:mod:`lob.workloads.formats`: LOBSTER, ITCH 5.0, DBN MBO) reads its bytes
into the same normalised events (:data:`EVENT_DTYPE`, one symbol, venue order ids made dense
``0..n-1``, prices in the venue's units) and :func:`convert` turns them into commands by
one set of rules, the rules the Bitstamp converter (:mod:`lob.workloads.bitstamp`) follows
for its real capture:

* a resting order becomes a LIMIT submit (owner 1, STP mode NONE); its venue id is kept per
  command (``venue_id``) and mapped to the lob id the submit takes;
* an execution against a resting order becomes a synthesised taker (an IOC of owner 2 on
  the other side at the maker's price, for the executed quantity) that fills exactly the
  reported maker for exactly that quantity: the converter follows the book it builds and
  submits the taker only when the maker is first in price-time priority, so the fill it
  expects (:attr:`Conversion.expected_fills`) is the one every engine must give;
* a partial cancel becomes a MODIFY that reduces the order (its queue place kept), a full
  one a CANCEL; a replace (ITCH ``U``) a CANCEL and a new LIMIT (priority lost); a modify
  (DBN) a MODIFY, which keeps the place on a reduction and loses it otherwise, as the venue
  does;
* the venue's own book, where the format carries one (LOBSTER's orderbook file), is
  compared level by level with the book the commands build, after every event.

Every rule the converter invents is named in :data:`RULES` and counted in
:attr:`Conversion.counts` (the workload's description prints both). Prices become lob ticks
``venue price / tick`` with ``tick`` the greatest common divisor of the symbol's prices (a
rule, counted), and the band is the lowest to the highest tick seen.

The conversion runs in one compiled pass (numba) over arrays sized by the symbol's events:
memory is bounded by the symbol's stream and book, not by the file it came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

import numba
import numpy as np

from lob.semantics import COMMAND_DTYPE, FILL_DTYPE, MAX_QTY, BookConfig, Kind, OrderType
from lob.workloads.orderbook_rs import _put

__all__ = ["EVENT_DTYPE", "RULES", "Conversion", "FeedError", "compare_fills", "convert",
           "EV"]


class FeedError(ValueError):
    """A venue file lob cannot read or convert (one line: the file, the byte offset or row,
    the field)."""


class EV(IntEnum):
    """Normalised event kinds (:data:`EVENT_DTYPE` ``kind``)."""

    ADD = 0  # oid, side, price, qty
    EXEC = 1  # visible execution of a resting order: oid, qty (aux: printed price or -1)
    REDUCE = 2  # partial cancel: oid, qty cancelled
    DELETE = 3  # oid
    REPLACE = 4  # oid -> oid2 at price, qty (priority lost)
    MODIFY = 5  # oid to price, qty (DBN: priority kept on a size reduction only)
    HIDDEN = 6  # execution against an order in no book (non-displayed): side, price, qty
    CROSS = 7  # cross trade (opening / closing auction print): price, qty
    HALT = 8  # trading halted (aux 1) or resumed (aux 0)
    CLEAR = 9  # the venue cleared the book
    PRINT = 10  # a trade print that changes no order (DBN T)
    OTHER = 11  # a message of no consequence for the book (system events, ...)


EVENT_DTYPE = np.dtype([("kind", "u1"), ("side", "u1"), ("timed", "u1"), ("flags", "u1"),
                        ("oid", "<i8"), ("oid2", "<i8"), ("price", "<i8"), ("qty", "<i8"),
                        ("aux", "<i8"), ("ts", "<i8")])

RULES = {  # count -> the rule it counts (printed by `lob workloads describe`)
    "events": "venue events of the symbol in the window",
    "adds": "resting orders: LIMIT submits (owner 1) with their venue ids",
    "preload_orders": "the venue's book before the first event (LOBSTER orderbook file): "
                      "one untimed LIMIT per level, holding the level's quantity",
    "executions": "executions of a resting order first in priority: a synthesised IOC "
                  "taker (owner 2) filling exactly that maker and quantity",
    "executions_of_preload_orders": "of which against a pre-load order (an order resting "
                                    "before the file began, its id unknown)",
    "executions_printed_at_other_price": "of which the venue printed at another price than "
                                         "the resting one (lob fills at the resting price)",
    "executions_out_of_priority": "executions of a maker not first in price-time priority in "
                                  "lob's book: a MODIFY / CANCEL removes the quantity, no fill",
    "executions_above_open_qty": "executions larger than the maker's open quantity: clipped",
    "partial_cancels": "partial cancels: MODIFY reducing the order (queue place kept)",
    "deletes": "deletes and cancels of the whole open quantity: CANCEL",
    "replaces": "replaces (priority lost): CANCEL of the old id, LIMIT under the new one",
    "modifies": "modifies: MODIFY (place kept on a reduction, lost on an increase or a "
                "new price)",
    "cancels_after_fill_absorbed": "cancels that remove what a fill already removed (DBN: "
                                   "the book update that follows a fill): not replayed",
    "adds_crossing_dropped": "adds or modifies priced through lob's opposite best (the "
                             "venue's book held something lob's does not): dropped",
    "adds_duplicate_id_dropped": "adds of an id already resting: dropped",
    "adds_outside_qty_bound_dropped": "adds above lob's MAX_QTY: dropped",
    "events_on_unknown_orders": "events on ids lob does not hold (before the file began, "
                                "dropped or already gone): dropped",
    "hidden_executions": "executions against non-displayed orders: in no book, not replayed",
    "cross_trades": "cross trades (auction prints): not replayed",
    "trade_prints": "trade prints that name no resting order: not replayed",
    "halts": "trading halts and resumptions: recorded, nothing replayed",
    "clears": "book clears: a MASS_CANCEL of every order",
    "other_messages": "messages of no consequence for the book (system, directory, ...)",
    "snapshot_records": "records flagged as part of a venue snapshot: untimed pre-load",
    "bad_book_flags": "records the venue flagged as possibly from a bad book (kept)",
    "timestamps_decreasing": "events timed before the event ahead of them (file order kept)",
    "book_checks": "events after which the venue's book was compared level by level",
    "book_mismatches": "of which lob's book differed from the venue's",
    "commands": "lob commands",
    "timed_commands": "of which timed",
    "trades_reproduced": "fills every engine must give (maker, price, quantity)",
}
_K = {k: i for i, k in enumerate(RULES)}
_N_RULES = len(RULES)

SUBMIT, CANCEL, MODIFY, MASS = (int(Kind.SUBMIT), int(Kind.CANCEL), int(Kind.MODIFY),
                                int(Kind.MASS_CANCEL))
LIMIT, IOC = int(OrderType.LIMIT), int(OrderType.IOC)
MAKER, TAKER = 1, 2  # owners
F_SNAPSHOT, F_BAD_BOOK = 1, 2  # EVENT_DTYPE flags (the importers map the venue's own)


@dataclass
class Conversion:
    """A converted stream: commands, config, what the venue says the fills are, the counts."""

    commands: np.ndarray
    config: BookConfig
    tick: int  # venue price units per lob tick
    venue_id: np.ndarray  # per command: the venue order id it submits / targets (-1: none)
    expected_fills: np.ndarray  # FILL_DTYPE, in order: every fill any engine must give
    counts: dict = field(default_factory=dict)
    first_mismatch: int = -1  # first event whose book differed from the venue's (-1: none)


def compare_fills(got: np.ndarray, want: np.ndarray) -> dict:
    """Fill by fill comparison (taker, maker, price, quantity, in order) of an engine's fills
    with a venue's trades: ``{"fills", "trades", "matched", "extra", "missing", "ok"}``."""
    g = [tuple(int(x) for x in r) for r in np.asarray(got).tolist()]
    w = [tuple(int(x) for x in r) for r in np.asarray(want).tolist()]
    gs, ws = set(g), set(w)
    return {"fills": len(g), "trades": len(w), "matched": len(gs & ws),
            "extra": len(gs - ws), "missing": len(ws - gs), "ok": g == w}


# count indices (numba reads module ints as constants)
(C_EVENTS, C_ADDS, C_PRELOAD, C_EXEC, C_EXEC_PRE, C_EXEC_PRINTED, C_EXEC_OOP, C_EXEC_CLIP,
 C_PARTIAL, C_DELETES, C_REPLACES, C_MODIFIES, C_ABSORBED, C_CROSSING, C_DUP, C_QTY,
 C_UNKNOWN, C_HIDDEN, C_CROSS, C_PRINTS, C_HALTS, C_CLEARS, C_OTHER, C_SNAPSHOT, C_BADBOOK,
 C_TS_DEC, C_CHECKS, C_MISMATCH) = range(28)
assert list(RULES)[C_MISMATCH] == "book_mismatches" and list(RULES)[C_EXEC_OOP] == \
    "executions_out_of_priority"
MAX_QTY_ = MAX_QTY
_NO_BOOK = np.full(256, -1, np.int64)  # event kinds that change no book -> their count
for _k, _c in ((EV.HIDDEN, C_HIDDEN), (EV.CROSS, C_CROSS), (EV.PRINT, C_PRINTS),
               (EV.HALT, C_HALTS), (EV.OTHER, C_OTHER)):
    _NO_BOOK[_k] = _c
F_FILL_RESTATED = 4  # internal flag: a cancel restating this fill follows (DBN F records)


@numba.njit(cache=True)
def _best(lvl_n, side, start, width):
    """The best non-empty level of ``side`` at or behind ``start`` (-1 / width: none)."""
    p = start
    if side == 0:
        while p >= 0 and lvl_n[0, p] == 0:
            p -= 1
        return p
    while p < width and lvl_n[1, p] == 0:
        p += 1
    return p


@numba.njit(cache=True)
def _unlink(o, o_side, o_px, o_prev, o_next, lvl_head, lvl_tail, lvl_n):
    s, p = o_side[o], o_px[o]
    a, b = o_prev[o], o_next[o]
    if a >= 0:
        o_next[a] = b
    else:
        lvl_head[s, p] = b
    if b >= 0:
        o_prev[b] = a
    else:
        lvl_tail[s, p] = a
    lvl_n[s, p] -= 1
    o_prev[o] = -1
    o_next[o] = -1


@numba.njit(cache=True)
def _link(o, o_side, o_px, o_prev, o_next, lvl_head, lvl_tail, lvl_n):
    s, p = o_side[o], o_px[o]
    t = lvl_tail[s, p]
    o_prev[o] = t
    o_next[o] = -1
    if t >= 0:
        o_next[t] = o
    else:
        lvl_head[s, p] = o
    lvl_tail[s, p] = o
    lvl_n[s, p] += 1


@numba.njit(cache=True)
def _check(i, ob, depth, chk, lvl_n, lvl_q, best_b, best_a, width, cnt):
    """Compare lob's top ``depth`` levels after event ``i`` with the venue's row ``i`` of
    ``ob`` (ask tick, ask qty, bid tick, bid qty per level; tick -1: no level). True when
    they agree (or there is nothing to compare)."""
    if depth == 0 or i >= ob.shape[0] or not chk[i]:
        return True
    cnt[C_CHECKS] += 1
    pa, pb = best_a, best_b
    ok = True
    for lv in range(depth):
        while pa < width and lvl_n[1, pa] == 0:
            pa += 1
        while pb >= 0 and lvl_n[0, pb] == 0:
            pb -= 1
        wa, wq = ob[i, 4 * lv], ob[i, 4 * lv + 1]
        wb, wbq = ob[i, 4 * lv + 2], ob[i, 4 * lv + 3]
        if pa < width:
            ok = ok and wa == pa and wq == lvl_q[1, pa]
        else:
            ok = ok and wa == -1
        if pb >= 0:
            ok = ok and wb == pb and wbq == lvl_q[0, pb]
        else:
            ok = ok and wb == -1
        pa += 1
        pb -= 1
    if not ok:
        cnt[C_MISMATCH] += 1
    return ok


@numba.njit(cache=True)
def _emit(out, out_vid, nc, kind, otype, side, owner, price, qty, oid, timed, vid):
    _put(out, nc, kind, otype, side, timed, owner, price, qty, oid)
    out[nc]["price_hi"] = 0
    out_vid[nc] = vid
    return nc + 1


@numba.njit(cache=True)
def _kernel(ev, n_ids, lo, width, tick, pre_side, pre_px, pre_qty, ob, ob_depth, chk,
            out, out_vid, fills, cnt):
    """Convert ``ev`` (prices in venue units) into ``out``; returns (n_cmds, n_fills,
    first event whose book differed). Orders are dense ids 0..n_ids-1, pre-loads after."""
    n_pre = pre_side.shape[0]
    n_all = n_ids + n_pre
    lob = np.zeros(n_all, np.int64)  # lob id while resting, else 0
    o_side = np.zeros(n_all, np.int8)
    o_px = np.zeros(n_all, np.int32)  # band index (tick - lo; a band is < 2**31 ticks)
    o_qty = np.zeros(n_all, np.int64)
    o_prev = np.full(n_all, -1, np.int32)  # links in the level's queue (ids < 2**31)
    o_next = np.full(n_all, -1, np.int32)
    absorb = np.zeros(n_all, np.int64)  # filled quantity a later cancel restates (DBN)
    lvl_head = np.full((2, width), -1, np.int32)
    lvl_tail = np.full((2, width), -1, np.int32)
    lvl_n = np.zeros((2, width), np.int64)
    lvl_q = np.zeros((2, width), np.int64)
    pre_at = np.full((2, width), -1, np.int32)  # the pre-load order of a level
    best_b, best_a = -1, width
    next_lob = 1
    nc = 0
    nf = 0
    first_bad = -1
    last_ts = -(1 << 62)
    for k in range(n_pre):  # the venue's book before the first event
        o = n_ids + k
        s, p = pre_side[k], pre_px[k]
        nc = _emit(out, out_vid, nc, SUBMIT, LIMIT, s, MAKER, p + lo, pre_qty[k], 0, False, -1)
        lob[o] = next_lob
        next_lob += 1
        o_side[o], o_px[o], o_qty[o] = s, p, pre_qty[k]
        _link(o, o_side, o_px, o_prev, o_next, lvl_head, lvl_tail, lvl_n)
        lvl_q[s, p] += pre_qty[k]
        pre_at[s, p] = o
        if s == 0:
            best_b = max(best_b, p)
        else:
            best_a = min(best_a, p)
        cnt[C_PRELOAD] += 1
    for i in range(ev.shape[0]):
        e = ev[i]
        kind = e["kind"]
        timed = e["timed"] != 0
        cnt[C_EVENTS] += 1
        if e["ts"] < last_ts:
            cnt[C_TS_DEC] += 1
        last_ts = max(last_ts, e["ts"])
        if e["flags"] & F_SNAPSHOT:
            cnt[C_SNAPSHOT] += 1
        if e["flags"] & F_BAD_BOOK:
            cnt[C_BADBOOK] += 1
        o = e["oid"]
        # (1) what the event does to lob's book, as commands
        if _NO_BOOK[kind] >= 0:  # hidden / cross / print / halt / other: counted only
            cnt[_NO_BOOK[kind]] += 1
        elif kind == EV.CLEAR:
            cnt[C_CLEARS] += 1
            nc = _emit(out, out_vid, nc, MASS, 0, 0, 0, 0, 0, 0, timed, -1)
            for s in range(2):
                for p in range(width):
                    h = lvl_head[s, p]
                    while h >= 0:
                        nx = o_next[h]
                        lob[h] = 0
                        o_prev[h] = -1
                        o_next[h] = -1
                        h = nx
                    lvl_head[s, p] = -1
                    lvl_tail[s, p] = -1
                    lvl_n[s, p] = 0
                    lvl_q[s, p] = 0
                    pre_at[s, p] = -1
            best_b, best_a = -1, width
        else:
            new_id, new_side, new_px, new_q = -1, 0, 0, 0  # an order to enter at the end
            if kind == EV.ADD:
                new_id, new_side = o, e["side"]
                new_px, new_q = e["price"] // tick - lo, e["qty"]
            else:  # EXEC, REDUCE, DELETE, REPLACE, MODIFY: on a resting order
                restates = 0
                if kind == EV.REDUCE and o >= 0 and absorb[o] > 0:
                    restates = min(absorb[o], e["qty"])  # DBN: the cancel restating a fill
                    absorb[o] -= restates
                    cnt[C_ABSORBED] += 1
                if restates > 0 and restates == e["qty"]:
                    o = -2  # nothing left to do
                elif o < 0 or lob[o] == 0:
                    # an order from before the file began, at a pre-loaded level (LOBSTER)
                    o = -1
                    s = e["side"]
                    p = e["price"] // tick - lo
                    if kind <= EV.DELETE and e["price"] > 0 and 0 <= p < width and s <= 1:
                        o = pre_at[s, p]
                if o == -1:
                    cnt[C_UNKNOWN] += 1
                elif o >= 0:
                    s, p = o_side[o], o_px[o]
                    q = e["qty"] - restates  # how much of the order goes (EXEC, REDUCE)
                    fill = False
                    if kind == EV.EXEC:
                        if q > o_qty[o]:
                            cnt[C_EXEC_CLIP] += 1
                            q = o_qty[o]
                        if e["flags"] & F_FILL_RESTATED:
                            absorb[o] += q
                        fill = lvl_head[s, p] == o and (p == best_b if s == 0 else p == best_a)
                        if not fill:
                            cnt[C_EXEC_OOP] += 1
                    elif kind == EV.DELETE and o >= n_ids and 0 < q < o_qty[o]:
                        pass  # a pre-load order stands for several: the delete's own size
                    elif kind == EV.DELETE or kind == EV.REPLACE:
                        q = o_qty[o]
                    if kind == EV.MODIFY:
                        p2, q2 = e["price"] // tick - lo, e["qty"]
                        restated = absorb[o] > 0 and p2 == p and q2 == o_qty[o]
                        absorb[o] = 0
                        if restated:  # DBN: the book update that restates a fill
                            cnt[C_ABSORBED] += 1
                            p2 = -1
                        crosses = p2 >= best_a if s == 0 else p2 <= best_b
                        if p2 == p:
                            crosses = False
                        if p2 == -1:
                            q = 0
                        elif crosses or q2 <= 0 or q2 > MAX_QTY_ or not 0 <= p2 < width:
                            cnt[C_CROSSING] += 1
                            q = o_qty[o]  # the order goes, nothing re-enters
                        else:
                            cnt[C_MODIFIES] += 1
                            nc = _emit(out, out_vid, nc, MODIFY, 0, 0, 0,
                                       p2 + lo if p2 != p else 0, q2, lob[o], timed, o)
                            lvl_q[s, p] -= o_qty[o]
                            if p2 != p or q2 > o_qty[o]:  # to the tail of the (new) level
                                _unlink(o, o_side, o_px, o_prev, o_next, lvl_head, lvl_tail,
                                        lvl_n)
                                if pre_at[s, p] == o:
                                    pre_at[s, p] = -1
                                if s == 0 and p == best_b:
                                    best_b = _best(lvl_n, 0, p, width)
                                elif s == 1 and p == best_a:
                                    best_a = _best(lvl_n, 1, p, width)
                                o_px[o] = p2
                                _link(o, o_side, o_px, o_prev, o_next, lvl_head, lvl_tail,
                                      lvl_n)
                                if s == 0:
                                    best_b = max(best_b, p2)
                                else:
                                    best_a = min(best_a, p2)
                            o_qty[o] = q2
                            lvl_q[s, p2] += q2
                            q = 0
                    if fill and q > 0:
                        nc = _emit(out, out_vid, nc, SUBMIT, IOC, 1 - s, TAKER, p + lo, q, 0,
                                   timed, -1)
                        f = fills[nf]
                        f["taker"] = next_lob
                        f["maker"] = lob[o]
                        f["price"] = p + lo
                        f["qty"] = q
                        nf += 1
                        next_lob += 1
                        cnt[C_EXEC] += 1
                        if o >= n_ids:
                            cnt[C_EXEC_PRE] += 1
                        if e["aux"] >= 0 and e["aux"] != e["price"]:
                            cnt[C_EXEC_PRINTED] += 1
                    elif q >= o_qty[o]:
                        nc = _emit(out, out_vid, nc, CANCEL, 0, 0, 0, 0, 0, lob[o], timed, o)
                        if kind == EV.REDUCE or kind == EV.DELETE:
                            cnt[C_DELETES] += 1
                    elif q > 0:
                        nc = _emit(out, out_vid, nc, MODIFY, 0, 0, 0, 0, o_qty[o] - q, lob[o],
                                   timed, o)
                        if kind == EV.REDUCE:
                            cnt[C_PARTIAL] += 1
                    if q > 0:  # the book follows
                        lvl_q[s, p] -= q
                        o_qty[o] -= q
                        if o_qty[o] == 0:
                            _unlink(o, o_side, o_px, o_prev, o_next, lvl_head, lvl_tail, lvl_n)
                            if pre_at[s, p] == o:
                                pre_at[s, p] = -1
                            lob[o] = 0
                            if s == 0 and p == best_b:
                                best_b = _best(lvl_n, 0, p, width)
                            elif s == 1 and p == best_a:
                                best_a = _best(lvl_n, 1, p, width)
                    if kind == EV.REPLACE:
                        new_id, new_side = e["oid2"], s
                        new_px, new_q = e["price"] // tick - lo, e["qty"]
                        cnt[C_REPLACES] += 1
            if new_id >= 0 or kind == EV.ADD:
                s, p = new_side, new_px
                if new_id < 0 or lob[new_id] != 0:
                    cnt[C_DUP] += 1
                elif new_q <= 0 or new_q > MAX_QTY_ or not 0 <= p < width:
                    cnt[C_QTY] += 1
                elif (s == 0 and p >= best_a) or (s == 1 and p <= best_b):
                    cnt[C_CROSSING] += 1
                else:
                    nc = _emit(out, out_vid, nc, SUBMIT, LIMIT, s, MAKER, p + lo, new_q, 0,
                               timed, new_id)
                    o = new_id
                    lob[o] = next_lob
                    next_lob += 1
                    o_side[o], o_px[o], o_qty[o] = s, p, new_q
                    absorb[o] = 0
                    _link(o, o_side, o_px, o_prev, o_next, lvl_head, lvl_tail, lvl_n)
                    lvl_q[s, p] += new_q
                    if s == 0:
                        best_b = max(best_b, p)
                    else:
                        best_a = min(best_a, p)
                    if kind == EV.ADD:
                        cnt[C_ADDS] += 1
        # (2) the venue's book, where the file states it
        if not _check(i, ob, ob_depth, chk, lvl_n, lvl_q, best_b, best_a, width, cnt) \
                and first_bad < 0:
            first_bad = i
    return nc, nf, first_bad


def price_tick(prices: np.ndarray) -> int:
    """The greatest common divisor of the (positive) prices: venue units per lob tick."""
    p = prices[prices > 0]
    if len(p) == 0:
        return 1
    return int(np.gcd.reduce(p)) or 1


def convert(ev: np.ndarray, *, n_ids: int, tick: int | None = None,
            preload: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
            book: np.ndarray | None = None, book_depth: int = 0,
            check_rows: np.ndarray | None = None) -> Conversion:
    """Convert the normalised events ``ev`` (:data:`EVENT_DTYPE`, dense ids ``0..n_ids-1``,
    prices in venue units) into a :class:`Conversion`.

    ``preload``: (side, price, qty) of the venue's levels before the first event (untimed
    LIMIT orders standing for the orders the file does not show). ``book``: the venue's top
    ``book_depth`` levels after each event, ``(len(ev), 4 * depth)`` of (ask price, ask qty,
    bid price, bid qty), price <= 0 for an empty level, compared level by level after
    every event (``check_rows``: only after the events it marks True).
    """
    ev = np.ascontiguousarray(ev, dtype=EVENT_DTYPE)
    if n_ids + (0 if preload is None else len(preload[0])) >= 2**31 - 1:
        raise FeedError(f"{n_ids:,} orders: more than lob's converter links (2**31)")
    pre_s, pre_p, pre_q = preload if preload is not None else (np.zeros(0, np.int64),) * 3
    priced = ev["price"][(ev["kind"] == EV.ADD) | (ev["kind"] == EV.REPLACE)
                         | (ev["kind"] == EV.MODIFY)]
    allp = np.concatenate([priced, np.asarray(pre_p, np.int64)])
    if tick is None:
        tick = price_tick(allp)
    allp = allp[allp > 0]
    if len(allp) == 0:
        raise FeedError("no priced order in the events: nothing to replay")
    if np.any(allp % tick):
        raise FeedError(f"a price is not a multiple of the tick {tick}")
    lo, hi = int(allp.min() // tick), int(allp.max() // tick)
    width = hi - lo + 1
    if width > 50_000_000:
        raise FeedError(f"the symbol's prices span {width:,} ticks of {tick} (more than "
                        "lob's engines hold): narrow the window or filter the outliers")
    # prices outside the band (execution prints, cancels that carry a price) index nothing
    depth = int(book_depth) if book is not None else 0
    if depth:
        b = np.asarray(book, np.int64).reshape(len(book), 4 * depth).copy()
        for j in (0, 2):
            px = b[:, j::4]
            ok = (px > 0) & (px % tick == 0)
            t = np.where(ok, px // tick - lo, -1)
            t[(t < 0) | (t >= width)] = -1
            b[:, j::4] = np.where(ok, t, -1)
            # an empty level: qty 0; a level outside lob's band: a tick no level can have
            b[:, j::4][ok & (t == -1)] = -2
        chk = np.ones(len(ev), np.bool_) if check_rows is None else \
            np.asarray(check_rows, np.bool_)
    else:
        b = np.zeros((0, 4), np.int64)
        chk = np.zeros(len(ev), np.bool_)
    pre_s = np.asarray(pre_s, np.int64)
    pre_px = np.asarray(pre_p, np.int64) // tick - lo
    # one command per event at most, two for a replace
    n_out = len(ev) + int(np.count_nonzero(ev["kind"] == EV.REPLACE)) + len(pre_s) + 1
    out = np.empty(n_out, COMMAND_DTYPE)  # the kernel writes every field of what it emits
    vid = np.empty(n_out, np.int64)
    fills = np.empty(int(np.count_nonzero(ev["kind"] == EV.EXEC)) + 1, FILL_DTYPE)
    cnt = np.zeros(_N_RULES, np.int64)
    nc, nf, first_bad = _kernel(ev, int(n_ids), lo, width, int(tick), pre_s, pre_px,
                                np.asarray(pre_q, np.int64), b, depth, chk, out, vid, fills, cnt)
    # trimmed in place when little is spare (a copy of a large stream costs a second pass)
    out, vid, fills = (a[:k] if k > 0.9 * len(a) else a[:k].copy()
                       for a, k in ((out, nc), (vid, nc), (fills, nf)))
    counts = {k: int(cnt[i]) for k, i in _K.items()}
    counts["commands"] = nc
    counts["timed_commands"] = int(np.count_nonzero(out["timed"]))
    counts["trades_reproduced"] = nf
    return Conversion(out, BookConfig(lo, hi), int(tick), vid, fills, counts, int(first_bad))


def describe_counts(counts: dict, rules: dict = RULES) -> list[str]:
    """One line per count with the rule it counts (the workloads' descriptions)."""
    return [f"    {k}: {v:,}  ({rules.get(k, '')})" for k, v in counts.items()]


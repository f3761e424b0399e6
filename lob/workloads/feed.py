"""One conversion model for real market-by-order feeds: venue events -> lob commands.

Every importer (:mod:`lob.workloads.formats`: LOBSTER, ITCH 5.0, DBN MBO) reads its bytes
into the same normalised events (:data:`EVENT_DTYPE`, one symbol, venue order ids and
prices in the venue's units) and a :class:`Converter` turns them into commands, chunk by
chunk, by one set of rules, the rules the Bitstamp converter (:mod:`lob.workloads.bitstamp`) follows
for its real capture:

* a resting order becomes a LIMIT submit (owner 1, STP mode NONE); its venue id is kept per
  command (``venue_id``) and mapped to the lob id the submit takes;
* an execution against a resting order becomes a synthesised taker (an IOC of owner 2 on
  the other side at the maker's price, for the executed quantity) that fills exactly the
  reported maker for exactly that quantity: the converter follows the book it builds and
  submits the taker only when the maker is first in price-time priority, so the fill it
  expects (the fills :meth:`Converter.feed` returns) is the one every engine must give;
* a partial cancel becomes a MODIFY that reduces the order (its queue place kept), a full
  one a CANCEL; a replace (ITCH ``U``) a CANCEL and a new LIMIT (priority lost); a modify
  (DBN) a MODIFY, which keeps the place on a reduction and loses it otherwise, as the venue
  does;
* the venue's own book, where the format carries one, is compared level by level with the
  book the commands build: LOBSTER's orderbook file after every event; a DBN snapshot that
  restates a cleared book, against lob's book before the clear;
* a trade print followed, in the same venue event, by its makers' cancels and no fill
  records (DBN ``T`` then ``C``) gives those cancels as executions; a trade with no
  aggressor side (DBN side ``N``: an auction's uncross, a match of two resting orders, an
  off-book print) gives none: lob cannot tell which order took, so it invents no fill, and
  the cancels that follow it stay cancels (both counted).

Every rule the converter invents is named in :data:`RULES` and counted in
:attr:`Result.counts` (the workload's description prints both). Prices become lob ticks
``venue price / tick`` with ``tick`` the greatest common divisor of the symbol's prices (a
rule, counted), and the band is the lowest to the highest tick seen.

The conversion is compiled (numba) and streams: each chunk of events is converted as it is
read, and what persists from chunk to chunk is the live orders (in recycled slots, found
from their venue ids by a hash table) and the levels of the band seen so far. Memory is
bounded by the symbol's book and the chunk, not by the stream or the file it came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

import numba
import numpy as np

from lob.semantics import COMMAND_DTYPE, FILL_DTYPE, MAX_QTY, BookConfig, Kind, OrderType
from lob.workloads.orderbook_rs import _put

__all__ = ["EVENT_DTYPE", "EV", "RULES", "Converter", "FeedError", "Result", "compare_fills",
           "to_ticks"]


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
    "book_checks": "events after which the venue's book was compared level by level "
                   "(LOBSTER's orderbook file; DBN: a snapshot after a clear, against "
                   "lob's book before the clear)",
    "book_mismatches": "of which lob's book differed from the venue's",
    "executions_from_trade_prints": "cancels of a resting order that follow a trade print in "
                                    "the same venue event, with no fill records, on the "
                                    "other side at the trade's price, up to its size (DBN "
                                    "T then C): executions",
    "trade_prints_without_side": "of the trade prints, those with no aggressor side (DBN "
                                 "side N: an auction's uncross, a match between two resting "
                                 "orders, an off-book print): no taker is synthesised from "
                                 "them; fill records (F) that follow still name their makers",
    "cancels_after_trades_without_side": "cancels at the price of a trade with no aggressor "
                                         "side, in its venue event, within twice its size "
                                         "(both sides lose it), with no fill records: kept "
                                         "as cancels (which order took is unknown: no fill "
                                         "is invented)",
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
F_SNAPSHOT, F_BAD_BOOK, F_LAST = 1, 2, 8  # EVENT_DTYPE flags (the importers map the venue's
# own; F_LAST: the last record of a venue event)


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
 C_TS_DEC, C_CHECKS, C_MISMATCH, C_FROM_PRINT, C_NOSIDE, C_AFTER_NOSIDE) = range(31)
assert list(RULES)[C_MISMATCH] == "book_mismatches" and list(RULES)[C_EXEC_OOP] == \
    "executions_out_of_priority" and list(RULES)[C_AFTER_NOSIDE] == \
    "cancels_after_trades_without_side"
MAX_QTY_ = MAX_QTY
_NO_BOOK = np.full(256, -1, np.int64)  # event kinds that change no book -> their count
for _k, _c in ((EV.HIDDEN, C_HIDDEN), (EV.CROSS, C_CROSS), (EV.PRINT, C_PRINTS),
               (EV.HALT, C_HALTS), (EV.OTHER, C_OTHER)):
    _NO_BOOK[_k] = _c
F_FILL_RESTATED = 4  # internal flag: a cancel restating this fill follows (DBN F records)


# --- the compiled conversion -------------------------------------------------------------
# Compiled without numba's runtime (_nrt=False): the kernel allocates nothing, and without
# the runtime numba counts no references to the state arrays the helpers pass around (the
# counting took most of the kernel's time).
# State (arrays that persist from chunk to chunk, grown between chunks by Converter):
# orders live in recycled slots (a slot is freed when its order is gone), found from their
# venue id by an open-addressing hash table; levels are indexed by price // g - base (g: the
# gcd of the prices seen so far, base and width: the band so far with slack).
O_LOB, O_QTY, O_ABS, O_KEY = range(4)  # oi rows: lob id (0: not resting), open qty, absorb, key
S_SIDE, S_PX, S_PREV, S_NEXT = range(4)  # o32 rows: side, level index, queue links
L_N, L_Q, L_SNAP = 0, 1, 2  # lv[which, side, level]: orders, quantity, before a clear
L_HEAD, L_TAIL, L_PRE = 0, 1, 2  # l32[which, side, level]: queue ends, the pre-load order
(R_BB, R_BA, R_NEXT, R_FREE, R_HLIVE, R_BAD, R_TS, R_G, R_BASE, R_W, R_NC, R_NF,
 R_SNAP, R_TQ, R_TSIDE, R_TPX) = range(16)
N_REGS = 16
SNAP_CLEARED, SNAP_LOADING = 1, 2  # R_SNAP: a clear of a book, then the snapshot's records
EMPTY_KEY = -(2**63)
PRE_KEY = EMPTY_KEY + 1  # a pre-load order: no venue id, in no hash slot
SUB = 1 << 16  # events converted per kernel call: room for them is made before


@numba.njit(cache=True, _nrt=False)
def _hash(key, mask):
    return np.int64((np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(24)) & mask


@numba.njit(cache=True, inline="always", _nrt=False)
def _find(hk, hv, key):
    """The slot of venue id ``key`` (-1: none)."""
    mask = hk.shape[0] - 1
    h = _hash(key, mask)
    while True:
        k = hk[h]
        if k == key:
            return np.int64(hv[h])
        if k == EMPTY_KEY:
            return np.int64(-1)
        h = (h + 1) & mask


@numba.njit(cache=True, _nrt=False)
def _insert(hk, hv, regs, key, slot):
    mask = hk.shape[0] - 1
    h = _hash(key, mask)
    while hk[h] != EMPTY_KEY:
        h = (h + 1) & mask
    hk[h] = key
    hv[h] = slot
    regs[R_HLIVE] += 1


@numba.njit(cache=True, _nrt=False)
def _delete(hk, hv, regs, key):
    """Remove ``key`` (present) by backward shift: no tombstones, probes stay short."""
    mask = hk.shape[0] - 1
    i = _hash(key, mask)
    while hk[i] != key:
        i = (i + 1) & mask
    j = i
    while True:
        j = (j + 1) & mask
        if hk[j] == EMPTY_KEY:
            break
        k = _hash(hk[j], mask)
        if (i <= j and i < k <= j) or (i > j and (k > i or k <= j)):
            continue  # its home is between the hole and it: it stays
        hk[i] = hk[j]
        hv[i] = hv[j]
        i = j
    hk[i] = EMPTY_KEY
    regs[R_HLIVE] -= 1


@numba.njit(cache=True, _nrt=False)
def rehash(hk, hv, new_k, new_v, regs):
    """Move every key of (hk, hv) into the empty table (new_k, new_v)."""
    regs[R_HLIVE] = 0
    for h in range(hk.shape[0]):
        if hk[h] != EMPTY_KEY:
            _insert(new_k, new_v, regs, hk[h], hv[h])


@numba.njit(cache=True, _nrt=False)
def _release(st, o):
    """Order slot ``o`` is gone for good: its venue id forgotten, the slot reused."""
    oi, free, hk, hv, regs = st[0], st[2], st[5], st[6], st[7]
    if oi[O_KEY, o] != PRE_KEY:
        _delete(hk, hv, regs, oi[O_KEY, o])
    oi[O_KEY, o] = EMPTY_KEY
    free[regs[R_FREE]] = o
    regs[R_FREE] += 1


@numba.njit(cache=True, inline="always", _nrt=False)
def _gone(st, o):
    """Order ``o`` leaves the book (unlinked already): no lob id; freed unless a cancel that
    restates its fill is still to come (DBN)."""
    oi = st[0]
    oi[O_LOB, o] = 0
    if oi[O_ABS, o] == 0:
        _release(st, o)


@numba.njit(cache=True, inline="always", _nrt=False)
def _best(lv, side, start, width):
    """The best non-empty level of ``side`` at or behind ``start`` (-1 / width: none)."""
    p = start
    if side == 0:
        while p >= 0 and lv[L_N, 0, p] == 0:
            p -= 1
        return p
    while p < width and lv[L_N, 1, p] == 0:
        p += 1
    return p


@numba.njit(cache=True, inline="always", _nrt=False)
def _unlink(st, o):
    """Take ``o`` out of its level's queue (the level's quantity is the caller's); the best
    price follows and the level forgets ``o`` as its pre-load order."""
    o32, lv, l32, regs = st[1], st[3], st[4], st[7]
    s, p = o32[S_SIDE, o], o32[S_PX, o]
    a, b = o32[S_PREV, o], o32[S_NEXT, o]
    if a >= 0:
        o32[S_NEXT, a] = b
    else:
        l32[L_HEAD, s, p] = b
    if b >= 0:
        o32[S_PREV, b] = a
    else:
        l32[L_TAIL, s, p] = a
    lv[L_N, s, p] -= 1
    o32[S_PREV, o] = -1
    o32[S_NEXT, o] = -1
    if l32[L_PRE, s, p] == o:
        l32[L_PRE, s, p] = -1
    if s == 0 and p == regs[R_BB]:
        regs[R_BB] = _best(lv, 0, p, regs[R_W])
    elif s == 1 and p == regs[R_BA]:
        regs[R_BA] = _best(lv, 1, p, regs[R_W])


@numba.njit(cache=True, inline="always", _nrt=False)
def _link(st, o, s, p, q):
    """``o`` joins the tail of level ``p`` of side ``s`` with quantity ``q``."""
    oi, o32, lv, l32, regs = st[0], st[1], st[3], st[4], st[7]
    o32[S_SIDE, o] = s
    o32[S_PX, o] = p
    oi[O_QTY, o] = q
    t = l32[L_TAIL, s, p]
    o32[S_PREV, o] = t
    o32[S_NEXT, o] = -1
    if t >= 0:
        o32[S_NEXT, t] = o
    else:
        l32[L_HEAD, s, p] = o
    l32[L_TAIL, s, p] = o
    lv[L_N, s, p] += 1
    lv[L_Q, s, p] += q
    if s == 0:
        regs[R_BB] = max(regs[R_BB], p)
    else:
        regs[R_BA] = min(regs[R_BA], p)


@numba.njit(cache=True, inline="always", _nrt=False)
def _emit(outs, regs, kind, otype, side, owner, p, qty, oid, timed, vid):
    """Append a command; ``p`` a level index (-1: no price), written in venue units."""
    out, out_vid = outs[0], outs[1]
    nc = regs[R_NC]
    price = 0 if p < 0 else (p + regs[R_BASE]) * regs[R_G]
    _put(out, nc, kind, otype, side, timed, owner, price, qty, oid)
    out[nc]["price_hi"] = 0
    out_vid[nc] = vid
    regs[R_NC] = nc + 1


@numba.njit(cache=True, _nrt=False)
def _check(i, ob, depth, st, cnt):
    """Compare lob's top ``depth`` levels with the venue's row ``i`` of ``ob`` (ask level,
    ask qty, bid level, bid qty per level, as level indices; -1: no level). True when they
    agree (or there is nothing to compare)."""
    if depth == 0:
        return True
    lv, regs = st[3], st[7]
    width = regs[R_W]
    cnt[C_CHECKS] += 1
    pa, pb = regs[R_BA], regs[R_BB]
    ok = True
    for k in range(depth):
        while pa < width and lv[L_N, 1, pa] == 0:
            pa += 1
        while pb >= 0 and lv[L_N, 0, pb] == 0:
            pb -= 1
        wa, wq = ob[i, 4 * k], ob[i, 4 * k + 1]
        wb, wbq = ob[i, 4 * k + 2], ob[i, 4 * k + 3]
        if pa < width:
            ok = ok and wa == pa and wq == lv[L_Q, 1, pa]
        else:
            ok = ok and wa == -1
        if pb >= 0:
            ok = ok and wb == pb and wbq == lv[L_Q, 0, pb]
        else:
            ok = ok and wb == -1
        pa += 1
        pb -= 1
    if not ok:
        cnt[C_MISMATCH] += 1
    return ok


@numba.njit(cache=True, _nrt=False)
def _preload(st, outs, pre_side, pre_px, pre_qty, cnt):
    """The venue's book before the first event: one untimed LIMIT per level."""
    oi, free, l32, regs = st[0], st[2], st[4], st[7]
    for k in range(pre_side.shape[0]):
        regs[R_FREE] -= 1
        o = free[regs[R_FREE]]
        s, p = pre_side[k], pre_px[k]
        _emit(outs, regs, SUBMIT, LIMIT, s, MAKER, p, pre_qty[k], 0, False, -1)
        oi[O_LOB, o] = regs[R_NEXT]
        regs[R_NEXT] += 1
        oi[O_ABS, o] = 0
        oi[O_KEY, o] = PRE_KEY
        _link(st, o, s, p, pre_qty[k])
        l32[L_PRE, s, p] = o
        cnt[C_PRELOAD] += 1


@numba.njit(cache=True, _nrt=False)
def _clear(st, outs, timed, cnt):
    """The venue cleared its book: a MASS_CANCEL; every order goes."""
    o32, lv, l32, regs = st[1], st[3], st[4], st[7]
    cnt[C_CLEARS] += 1
    _emit(outs, regs, MASS, 0, 0, 0, -1, 0, 0, timed, -1)
    regs[R_SNAP] = 0
    if regs[R_BB] >= 0 or regs[R_BA] < regs[R_W]:  # kept, for the snapshot that may follow
        for s in range(2):
            for p in range(regs[R_W]):
                lv[L_SNAP, s, p] = lv[L_Q, s, p]
        regs[R_SNAP] = SNAP_CLEARED
    for s in range(2):
        for p in range(regs[R_W]):
            h = l32[L_HEAD, s, p]
            while h >= 0:
                nx = o32[S_NEXT, h]
                o32[S_PREV, h] = -1
                o32[S_NEXT, h] = -1
                _gone(st, h)
                h = nx
            l32[L_HEAD, s, p] = -1
            l32[L_TAIL, s, p] = -1
            l32[L_PRE, s, p] = -1
            lv[L_N, s, p] = 0
            lv[L_Q, s, p] = 0
    regs[R_BB], regs[R_BA] = -1, regs[R_W]


@numba.njit(cache=True, inline="always", _nrt=False)
def _level(price, regs):
    """The level index of a venue price (-1: not a price of lob's grid)."""
    g = regs[R_G]
    if g == 0 or price <= 0 or price % g != 0:
        return -1
    p = price // g - regs[R_BASE]
    return p if 0 <= p < regs[R_W] else -1


@numba.njit(cache=True, _nrt=False)
def _modify(st, outs, e, o, cnt):
    """DBN modify of resting ``o``: how much of the order goes (0: it stays, modified)."""
    oi, o32, lv, regs = st[0], st[1], st[3], st[7]
    s, p = o32[S_SIDE, o], o32[S_PX, o]
    p2, q2 = _level(e["price"], regs), e["qty"]
    restated = oi[O_ABS, o] > 0 and p2 == p and q2 == oi[O_QTY, o]
    oi[O_ABS, o] = 0
    if restated:  # DBN: the book update that restates a fill
        cnt[C_ABSORBED] += 1
        return 0
    crosses = p2 >= regs[R_BA] if s == 0 else p2 <= regs[R_BB]
    if p2 == p:
        crosses = False
    if crosses or q2 <= 0 or q2 > MAX_QTY_ or p2 < 0:
        cnt[C_CROSSING] += 1
        return oi[O_QTY, o]  # the order goes, nothing re-enters
    cnt[C_MODIFIES] += 1
    _emit(outs, regs, MODIFY, 0, 0, 0, p2 if p2 != p else -1, q2, oi[O_LOB, o],
          e["timed"] != 0, oi[O_KEY, o])
    lv[L_Q, s, p] -= oi[O_QTY, o]
    if p2 != p or q2 > oi[O_QTY, o]:  # to the tail of the (new) level
        _unlink(st, o)
        _link(st, o, s, p2, q2)
    else:
        oi[O_QTY, o] = q2
        lv[L_Q, s, p2] += q2
    return 0


@numba.njit(cache=True, _nrt=False)
def _take(st, outs, e, kind, o, q, fill, cnt):
    """``q`` of resting ``o`` goes: a synthesised taker's fill (``fill``), else a CANCEL of
    the whole order or a MODIFY reducing it; the book follows."""
    oi, o32, lv, regs = st[0], st[1], st[3], st[7]
    s, p = o32[S_SIDE, o], o32[S_PX, o]
    timed = e["timed"] != 0
    vid = oi[O_KEY, o] if oi[O_KEY, o] != PRE_KEY else -1
    if fill:
        _emit(outs, regs, SUBMIT, IOC, 1 - s, TAKER, p, q, 0, timed, -1)
        f = outs[2][regs[R_NF]]
        f["taker"] = regs[R_NEXT]
        f["maker"] = oi[O_LOB, o]
        f["price"] = (p + regs[R_BASE]) * regs[R_G]
        f["qty"] = q
        regs[R_NF] += 1
        regs[R_NEXT] += 1
        cnt[C_EXEC] += 1
        if oi[O_KEY, o] == PRE_KEY:
            cnt[C_EXEC_PRE] += 1
        if e["aux"] >= 0 and e["aux"] != e["price"]:
            cnt[C_EXEC_PRINTED] += 1
    elif q >= oi[O_QTY, o]:
        _emit(outs, regs, CANCEL, 0, 0, 0, -1, 0, oi[O_LOB, o], timed, vid)
        if kind == EV.REDUCE or kind == EV.DELETE:
            cnt[C_DELETES] += 1
    else:
        _emit(outs, regs, MODIFY, 0, 0, 0, -1, oi[O_QTY, o] - q, oi[O_LOB, o], timed, vid)
        if kind == EV.REDUCE:
            cnt[C_PARTIAL] += 1
    lv[L_Q, s, p] -= q
    oi[O_QTY, o] -= q
    if oi[O_QTY, o] == 0:
        _unlink(st, o)
        _gone(st, o)


@numba.njit(cache=True, _nrt=False)
def _resting(st, outs, e, kind, cnt):
    """An event on a resting order (EXEC, REDUCE, DELETE, REPLACE, MODIFY). Returns the
    side and level of the order a REPLACE enters (-1: none)."""
    oi, o32, l32, hk, hv, regs = st[0], st[1], st[4], st[5], st[6], st[7]
    o = _find(hk, hv, e["oid"]) if e["oid"] >= 0 else -1
    restates = 0
    if kind == EV.REDUCE and o >= 0 and oi[O_ABS, o] > 0:
        restates = min(oi[O_ABS, o], e["qty"])  # DBN: the cancel restating a fill
        oi[O_ABS, o] -= restates
        cnt[C_ABSORBED] += 1
        if oi[O_ABS, o] == 0 and oi[O_LOB, o] == 0:
            _release(st, o)
            o = -1
        if restates > 0 and restates == e["qty"]:
            return -1, -1  # nothing left to do
    if o < 0 or oi[O_LOB, o] == 0:
        # an order from before the file began, at a pre-loaded level (LOBSTER)
        o = -1
        s, p = e["side"], _level(e["price"], regs)
        if kind <= EV.DELETE and p >= 0 and s <= 1:
            o = l32[L_PRE, s, p]
    if o < 0:
        cnt[C_UNKNOWN] += 1
        return -1, -1
    s, p = o32[S_SIDE, o], o32[S_PX, o]
    q = e["qty"] - restates  # how much of the order goes (EXEC, REDUCE)
    fill = False
    if kind == EV.EXEC:
        if q > oi[O_QTY, o]:
            cnt[C_EXEC_CLIP] += 1
            q = oi[O_QTY, o]
        if e["flags"] & F_FILL_RESTATED:
            oi[O_ABS, o] += q
        fill = l32[L_HEAD, s, p] == o and (p == regs[R_BB] if s == 0 else p == regs[R_BA])
        if not fill:
            cnt[C_EXEC_OOP] += 1
    elif kind == EV.DELETE and oi[O_KEY, o] == PRE_KEY and 0 < q < oi[O_QTY, o]:
        pass  # a pre-load order stands for several: the delete's own size
    elif kind == EV.DELETE or kind == EV.REPLACE:
        q = oi[O_QTY, o]
    elif kind == EV.MODIFY:
        q = _modify(st, outs, e, o, cnt)
    if q > 0:
        _take(st, outs, e, kind, o, q, fill, cnt)
    if kind == EV.REPLACE:
        cnt[C_REPLACES] += 1
        return s, _level(e["price"], regs)
    return -1, -1


@numba.njit(cache=True, _nrt=False)
def _enter(st, outs, e, key, s, p, cnt):
    """A new resting order (ADD, or a REPLACE's new id) at level ``p`` of side ``s``."""
    oi, free, hk, hv, regs = st[0], st[2], st[5], st[6], st[7]
    q = e["qty"]
    o = _find(hk, hv, key) if key >= 0 else -1
    if key < 0 or (o >= 0 and oi[O_LOB, o] != 0):
        cnt[C_DUP] += 1
    elif q <= 0 or q > MAX_QTY_ or p < 0:
        cnt[C_QTY] += 1
    elif (s == 0 and p >= regs[R_BA]) or (s == 1 and p <= regs[R_BB]):
        cnt[C_CROSSING] += 1
    else:
        _emit(outs, regs, SUBMIT, LIMIT, s, MAKER, p, q, 0, e["timed"] != 0, key)
        if o < 0:
            regs[R_FREE] -= 1
            o = free[regs[R_FREE]]
            oi[O_KEY, o] = key
            _insert(hk, hv, regs, key, o)
        oi[O_LOB, o] = regs[R_NEXT]
        regs[R_NEXT] += 1
        oi[O_ABS, o] = 0
        _link(st, o, s, p, q)
        if e["kind"] == EV.ADD:
            cnt[C_ADDS] += 1


@numba.njit(cache=True, _nrt=False)
def _chunk(ev, i0, ob, depth, st, outs, cnt):
    """Convert the events ``ev`` (event ``i0`` of the stream onwards) into ``outs``
    (commands, their venue ids, fills); ``ob``: the venue's book after each event, as
    level indices (``depth`` levels, 0: none)."""
    regs = st[7]
    for i in range(ev.shape[0]):
        e = ev[i]
        kind = np.int64(e["kind"])
        cnt[C_EVENTS] += 1
        if e["ts"] < regs[R_TS]:
            cnt[C_TS_DEC] += 1
        regs[R_TS] = max(regs[R_TS], e["ts"])
        if e["flags"] & F_SNAPSHOT:
            cnt[C_SNAPSHOT] += 1
        if e["flags"] & F_BAD_BOOK:
            cnt[C_BADBOOK] += 1
        if regs[R_SNAP] and kind != EV.CLEAR:
            _snapshot(e, i0 + i, st, cnt)
        if regs[R_TQ] or kind == EV.PRINT:
            kind = _after_print(e, regs, cnt)
        if _NO_BOOK[kind] >= 0:  # hidden / cross / print / halt / other: counted only
            cnt[_NO_BOOK[kind]] += 1
        elif kind == EV.CLEAR:
            _clear(st, outs, e["timed"] != 0, cnt)
        elif kind == EV.ADD:
            _enter(st, outs, e, e["oid"], e["side"], _level(e["price"], regs), cnt)
        else:
            s, p = _resting(st, outs, e, kind, cnt)
            if s >= 0 and e["oid2"] >= 0:
                _enter(st, outs, e, e["oid2"], s, p, cnt)
        if depth and not _check(i, ob, depth, st, cnt) and regs[R_BAD] < 0:
            regs[R_BAD] = i0 + i
        if e["flags"] & F_LAST:
            regs[R_TQ] = 0


@numba.njit(cache=True, _nrt=False)
def _after_print(e, regs, cnt):
    """A trade print (DBN T, the aggressor's side) opens the size its makers must lose in
    the same venue event: fill records (F) state them; without them, a cancel on the other
    side at the trade's price, within that size, is the execution: returns the kind the
    event is converted as. A print with no aggressor side (side 2) opens its size on both
    sides, and the cancels within it stay cancels (counted)."""
    kind = e["kind"]
    if kind == EV.PRINT:
        side = e["side"]
        if side > 1:
            cnt[C_NOSIDE] += 1
        regs[R_TQ] = e["qty"] * (1 if side <= 1 else 2) if e["price"] > 0 else 0
        regs[R_TSIDE], regs[R_TPX] = 1 - side if side <= 1 else -1, e["price"]
    elif kind == EV.EXEC:
        regs[R_TQ] = max(0, regs[R_TQ] - e["qty"])
    elif kind == EV.REDUCE and 0 < e["qty"] <= regs[R_TQ] and e["price"] == regs[R_TPX] \
            and (e["side"] == regs[R_TSIDE] or regs[R_TSIDE] < 0):
        regs[R_TQ] -= e["qty"]
        if regs[R_TSIDE] < 0:
            cnt[C_AFTER_NOSIDE] += 1
            return np.int64(kind)
        cnt[C_FROM_PRINT] += 1
        return np.int64(EV.EXEC)
    return np.int64(kind)


@numba.njit(cache=True, _nrt=False)
def _snapshot(e, i, st, cnt):
    """A book the venue cleared is restated by the snapshot records that follow (DBN
    F_SNAPSHOT): at the first record after them, the book they built is compared level by
    level with lob's book before the clear."""
    lv, regs = st[3], st[7]
    if e["flags"] & F_SNAPSHOT:
        regs[R_SNAP] = SNAP_LOADING
        return
    if regs[R_SNAP] == SNAP_LOADING:
        cnt[C_CHECKS] += 1
        same = True
        for s in range(2):
            for p in range(regs[R_W]):
                same = same and lv[L_Q, s, p] == lv[L_SNAP, s, p]
        if not same:
            cnt[C_MISMATCH] += 1
            if regs[R_BAD] < 0:
                regs[R_BAD] = i
    regs[R_SNAP] = 0


MAX_WIDTH = 50_000_000  # ticks: the widest band lob's converter lays out


@dataclass
class Result:
    """What a whole conversion comes to, once its last chunk is in."""

    config: BookConfig
    tick: int  # venue price units per lob tick
    counts: dict = field(default_factory=dict)
    first_mismatch: int = -1  # first event whose book differed from the venue's (-1: none)


class Converter:
    """Venue events -> lob commands by the rules above, one chunk at a time (:meth:`feed`).

    Its memory is the live orders (recycled slots, a hash of their venue ids) and the
    levels of the band seen so far, not the stream. Commands and fills come out with
    prices in venue units (the tick, the gcd of every price, is known only at the end):
    :func:`to_ticks` converts them once :meth:`finish` has said the tick.
    ``preload``: (side, price, qty) of the venue's levels before the first event (untimed
    LIMIT orders standing for the orders the file does not show); ``book_depth``: the
    venue's levels given to :meth:`feed` after each event, compared level by level.
    """

    def __init__(self, preload=None, book_depth: int = 0):
        self.pre = None if preload is None or not len(preload[0]) else \
            tuple(np.asarray(a, np.int64) for a in preload)
        self.depth = int(book_depth)
        self.g = self.pmin = self.pmax = 0  # the grid so far (g 0: no price yet)
        self.cnt = np.zeros(_N_RULES, np.int64)
        self.regs = np.zeros(N_REGS, np.int64)
        self.regs[[R_BB, R_BAD, R_TS, R_NEXT]] = -1, -1, -(1 << 62), 1  # lob ids from 1
        self.oi = np.zeros((4, 0), np.int64)
        self.o32 = np.zeros((4, 0), np.int32)
        self.free = np.zeros(0, np.int32)
        self.lv = np.zeros((3, 2, 0), np.int64)
        self.l32 = np.zeros((3, 2, 0), np.int32)
        self.hk = np.full(1024, EMPTY_KEY, np.int64)
        self.hv = np.zeros(1024, np.int32)
        self.events = self.commands = self.timed = self.fills = 0

    def _grid(self, prices: np.ndarray) -> None:
        """Lay the levels out again when a price falls off the grid or out of the band."""
        p = prices[prices > 0]
        if not len(p):
            return
        g = int(np.gcd.reduce(p))
        lo, hi = int(p.min()), int(p.max())
        if self.g:
            g, lo, hi = int(np.gcd(g, self.g)), min(lo, self.pmin), max(hi, self.pmax)
        self.pmin, self.pmax = lo, hi
        base, width = int(self.regs[R_BASE]), int(self.regs[R_W])
        if g == self.g and base <= lo // g and hi // g < base + width:
            return
        span = (hi - lo) // g + 1
        if span > MAX_WIDTH:
            raise FeedError(f"the symbol's prices span {span:,} ticks of {g} (more than "
                            "lob's engines hold): narrow the window or filter the outliers")
        slack = max(64, min(span // 2, (MAX_WIDTH - span) // 2))
        nb = max(0, lo // g - slack)
        self._relayout(g, nb, hi // g + slack + 1 - nb)

    def _relayout(self, g: int, nb: int, nw: int) -> None:
        r = self.g // g if self.g else 1
        ob, ow = int(self.regs[R_BASE]), int(self.regs[R_W])
        idx = (ob + np.arange(ow, dtype=np.int64)) * r - nb
        on = (idx >= 0) & (idx < nw)  # the levels off the new layout are empty (no price)
        lv = np.zeros((3, 2, nw), np.int64)
        lv[:, :, idx[on]] = self.lv[:, :, on]
        l32 = np.full((3, 2, nw), -1, np.int32)
        l32[:, :, idx[on]] = self.l32[:, :, on]
        self.lv, self.l32 = lv, l32
        live = self.oi[O_LOB] != 0
        self.o32[S_PX] = np.where(live, (ob + self.o32[S_PX].astype(np.int64)) * r - nb, 0)
        bb, ba = int(self.regs[R_BB]), int(self.regs[R_BA])
        self.regs[R_BB] = (ob + bb) * r - nb if bb >= 0 else -1
        self.regs[R_BA] = (ob + ba) * r - nb if ba < ow else nw
        self.regs[R_G], self.regs[R_BASE], self.regs[R_W] = g, nb, nw
        self.g = g

    def _room(self, n_new: int) -> None:
        """Free slots and hash room for ``n_new`` more orders."""
        free, cap = int(self.regs[R_FREE]), self.oi.shape[1]
        if free < n_new:
            new = max(2 * cap, cap + n_new - free + 1024)
            if new >= 2**31:
                raise FeedError(f"{new:,} live orders: more than lob's converter links (2**31)")
            oi = np.zeros((4, new), np.int64)
            oi[:, :cap] = self.oi
            oi[O_KEY, cap:] = EMPTY_KEY
            o32 = np.full((4, new), -1, np.int32)
            o32[:, :cap] = self.o32
            stack = np.empty(new, np.int32)
            stack[:free] = self.free[:free]
            stack[free:free + new - cap] = np.arange(cap, new, dtype=np.int32)
            self.oi, self.o32, self.free = oi, o32, stack
            self.regs[R_FREE] = free + new - cap
        if 2 * (int(self.regs[R_HLIVE]) + n_new) > len(self.hk):
            size = 1 << (4 * (int(self.regs[R_HLIVE]) + n_new) + 1024).bit_length()
            hk, hv = np.full(size, EMPTY_KEY, np.int64), np.zeros(size, np.int32)
            rehash(self.hk, self.hv, hk, hv, self.regs)
            self.hk, self.hv = hk, hv

    def _state(self):
        return self.oi, self.o32, self.free, self.lv, self.l32, self.hk, self.hv, self.regs

    def _book(self, book, n: int) -> np.ndarray:
        """The venue's rows (ask price, ask qty, bid price, bid qty per level; price <= 0:
        no level) as level indices: -1 no level, -2 a level lob's grid cannot hold."""
        if book is None or not self.depth:
            return np.zeros((0, 4), np.int64)
        b = np.array(book, np.int64).reshape(n, 4 * self.depth)
        g, base, w = self.g or 1, int(self.regs[R_BASE]), int(self.regs[R_W])
        for j in (0, 2):
            px = b[:, j::4]
            t = px // g - base
            t[(px % g != 0) | (t < 0) | (t >= w)] = -2
            t[px <= 0] = -1
            b[:, j::4] = t
        return b

    def feed(self, ev: np.ndarray, book: np.ndarray | None = None):
        """Convert the next events (:data:`EVENT_DTYPE`, venue ids and prices; ``book``:
        the venue's top levels after each, or None): (commands, their venue ids, fills),
        prices in venue units."""
        ev = np.ascontiguousarray(ev, dtype=EVENT_DTYPE)
        pre, self.pre = self.pre, None
        k = ev["kind"]
        priced = ev["price"][(k == EV.ADD) | (k == EV.REPLACE) | (k == EV.MODIFY)]
        n_rep = int(np.count_nonzero(k == EV.REPLACE))
        n_pre = len(pre[0]) if pre is not None else 0
        self._grid(priced if pre is None else np.concatenate([priced, pre[1]]))
        n_out = len(ev) + n_rep + n_pre + 1  # one command an event at most, two a replace
        outs = (np.empty(n_out, COMMAND_DTYPE), np.empty(n_out, np.int64),
                np.empty(int(np.count_nonzero((k == EV.EXEC) | (k == EV.REDUCE))) + 1,
                         FILL_DTYPE))  # a cancel after a trade print is an execution
        self.regs[R_NC] = self.regs[R_NF] = 0
        if pre is not None:
            self._room(n_pre)
            _preload(self._state(), outs, pre[0], pre[1] // self.g - self.regs[R_BASE], pre[2],
                     self.cnt)
        ob = self._book(book, len(ev))
        depth = self.depth if len(ob) else 0
        new = np.cumsum((k == EV.ADD) | (k == EV.REPLACE))
        for a in range(0, len(ev), SUB):  # a small table and few slots: they stay in cache
            b = min(a + SUB, len(ev))
            self._room(int(new[b - 1] - (new[a - 1] if a else 0)))
            _chunk(ev[a:b], self.events + a, ob[a:b] if depth else ob, depth, self._state(),
                   outs, self.cnt)
        nc, nf = int(self.regs[R_NC]), int(self.regs[R_NF])
        self.events += len(ev)
        self.commands += nc
        self.fills += nf
        self.timed += int(np.count_nonzero(outs[0]["timed"][:nc]))
        return outs[0][:nc], outs[1][:nc], outs[2][:nf]

    def finish(self) -> Result:
        """The band, the tick and the counts of everything fed."""
        if not self.g:
            raise FeedError("no priced order in the events: nothing to replay")
        if self.regs[R_SNAP] == SNAP_LOADING:  # the stream ended with a snapshot
            self.cnt[C_CHECKS] += 1
            if not np.array_equal(self.lv[L_Q], self.lv[L_SNAP]):
                self.cnt[C_MISMATCH] += 1
                if self.regs[R_BAD] < 0:
                    self.regs[R_BAD] = self.events - 1
            self.regs[R_SNAP] = 0
        counts = {k: int(self.cnt[i]) for k, i in _K.items()}
        counts.update(commands=self.commands, timed_commands=self.timed,
                      trades_reproduced=self.fills)
        return Result(BookConfig(self.pmin // self.g, self.pmax // self.g), self.g, counts,
                      int(self.regs[R_BAD]))


def to_ticks(a: np.ndarray, tick: int) -> None:
    """Venue prices -> lob ticks, in place, in commands or fills (0, no price, stays 0)."""
    if tick != 1:
        a["price"] //= tick


def describe_counts(counts: dict, rules: dict = RULES) -> list[str]:
    """One line per count with the rule it counts (the workloads' descriptions)."""
    return [f"    {k}: {v:,}  ({rules.get(k, '')})" for k, v in counts.items()]


"""The compiled matching kernel: every command kind of :mod:`lob.semantics`, and the replay loop.

This is a line-for-line port of ``lob.engines.reference`` (same outcome rows, same fills in
the same order) over the array layout of :mod:`lob.engines.compiled.book`. Toggles are
runtime constants in ``G``; the branches on them are loop-invariant and perfectly
predicted, so one compiled kernel serves every version (see the package docstring).

:func:`run` replays ``cmds[start:]`` and stops *before* a command whenever the pool, the
fill buffer or the id index might not have room for it, returning the command index and
what to grow; Python grows the arrays (doubling) and calls again. No per-op path ever
allocates or writes out of bounds.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from lob.engines.compiled.bitmap import ONE
from lob.engines.compiled.book import (
    HEAD,
    LEVEL_COLS,
    LOFF,
    NXT,
    OID,
    OWN,
    QTY,
    ROW,
    SUM,
    add_sums,
    after,
    best,
    first_from,
    remove,
    rest,
)
from lob.engines.compiled.clock import stamp
from lob.engines.compiled.codes import (
    ACCEPTED,
    CANCEL,
    CANCELLED,
    DONE,
    FOK,
    GROW_FILLS,
    GROW_INDEX,
    GROW_POOL,
    LIMIT,
    MARKET,
    MASS_CANCEL,
    MODIFY,
    NOT_FOUND,
    NOTIONAL,
    POST_ONLY,
    R_BAD_KIND,
    R_FOK_UNFILLABLE,
    R_UNKNOWN_ID,
    R_WOULD_CROSS,
    REJECTED,
    SCOPE_OWNER,
    SCOPE_SIDE,
    STP_MAKER,
    STP_NONE,
    STP_TAKER,
    SUBMIT,
)
from lob.engines.compiled.ops import (
    crosses,
    fill,  # noqa: F401 - put: the probes' outcome writer
    mass_cancel_span,
    own_in_table,
    put,
    refuse_modify,
    refuse_submit,
    settle,
)
from lob.engines.compiled.state import (
    FIXED,
    FOK_LEVEL_SUMS,
    FOK_MODE,
    FREE,
    HI,
    IDS,
    IDS_BITSET,
    LO,
    NDUR,
    NEXT_ID,
    NFILL,
    NLIVE,
    OS_OFF,
    OSLOT_OFF,
    QREMOVED,
    QTRADED,
    STP,
    WIDTH,
)


@njit(cache=True, _nrt=False)
def own_at(N, G, row, owner):
    """Open quantity of ``owner`` at level ``row`` (level_sums table, or a walk as fallback)."""
    total = own_in_table(G, G[OSLOT_OFF], G[OS_OFF], G, row, owner)
    if total >= 0:
        return total
    total = 0
    node = G[LOFF + row * LEVEL_COLS + HEAD]
    while node >= 0:
        if N[node, OWN] == owner:
            total += N[node, QTY]
        node = N[node, NXT]
    return total


@njit(cache=True, _nrt=False, inline="always")
def available(N, B, G, side, market, limit, owner, want):
    """Quantity a FOK could trade, honouring the STP mode (``full`` counts it all)."""
    opp = 1 - side
    w = G[WIDTH]
    lo = G[LO]
    stp = G[STP]
    mode = G[FOK_MODE]
    total = 0
    x = best(G, opp)
    while x >= 0:
        if not crosses(side, market, limit, lo + x):
            break
        row = opp * w + x
        own = -1
        if mode == FOK_LEVEL_SUMS:
            own = 0 if stp == STP_NONE else own_at(N, G, row, owner)
        if own == 0:
            total += G[LOFF + row * LEVEL_COLS + SUM]
        elif own > 0 and stp == STP_MAKER:
            total += G[LOFF + row * LEVEL_COLS + SUM] - own
        else:  # walk the level in priority order
            node = G[LOFF + row * LEVEL_COLS + HEAD]
            while node >= 0:
                if stp != STP_NONE and N[node, OWN] == owner:
                    if stp != STP_MAKER:
                        return total
                else:
                    total += N[node, QTY]
                    if mode != 0 and total >= want:
                        return total
                node = N[node, NXT]
        if mode != 0 and total >= want:
            return total
        x = after(B, G, opp, x)
    return total


@njit(cache=True, _nrt=False, inline="always")
def match(out, i, F, N, IDX, LV, B, G,
          oid, owner, side, otype, market, limit, price, qty):
    opp = 1 - side
    w = G[WIDTH]
    lo = G[LO]
    stp = G[STP]
    notional = otype == NOTIONAL
    left = qty  # lots, or quote amount for NOTIONAL
    filled = 0
    nfills = 0
    removed = 0
    stopped = False
    too_dear = False
    nf = G[NFILL]
    while left > 0:
        x = best(G, opp)
        if x < 0:
            break
        p = lo + x
        if not crosses(side, market, limit, p):
            break
        if notional and p > left:
            too_dear = True
            break
        m = G[LOFF + (opp * w + x) * LEVEL_COLS + HEAD]
        if stp != STP_NONE and N[m, OWN] == owner:
            if stp != STP_TAKER:
                remove(N, IDX, LV, B, G, m)
                removed += 1
            if stp != STP_MAKER:
                stopped = True
                break
            continue
        mq = N[m, QTY]
        take = left // p if notional else left
        if mq < take:
            take = mq
        left -= take * p if notional else take
        filled += take
        nfills += 1
        fill(F, nf, oid, N[m, OID], p, take)
        nf += 1
        if take == mq:
            remove(N, IDX, LV, B, G, m)
            G[QREMOVED] -= mq  # traded, not removed
        else:
            N[m, QTY] = mq - take
            if G[FOK_MODE] == FOK_LEVEL_SUMS:
                add_sums(N, G, m, -take)
    G[NFILL] = nf
    G[QTRADED] += filled
    if settle(out, i, otype, stopped, too_dear, oid, left, filled, nfills, removed):
        rest(N, IDX, LV, B, G, oid, owner, side, price, left)


@njit(cache=True, _nrt=False, inline="always")
def submit(out, i, N, B, G, owner, side, otype, price, qty):
    """Validate a submit and run its pre-trade checks (POST_ONLY cross, FOK fill); returns its
    new id when it goes on to :func:`match`, else 0 (its outcome row is written)."""
    if refuse_submit(out, i, otype, side, owner, price, qty, G[LO], G[HI], G[FREE]):
        return 0
    G[NEXT_ID] += 1
    oid = G[NEXT_ID]
    market = otype >= MARKET
    if otype == POST_ONLY:
        x = best(G, 1 - side)
        if x >= 0 and crosses(side, False, price, G[LO] + x):
            put(out, i, CANCELLED, R_WOULD_CROSS, oid, qty, 0, 0, 0)
            return 0
    if otype == FOK and available(N, B, G, side, market, price, owner, qty) < qty:
        put(out, i, CANCELLED, R_FOK_UNFILLABLE, oid, qty, 0, 0, 0)
        return 0
    return oid


@njit(cache=True, _nrt=False, inline="always")
def lookup(IDX, LV, G, oid):
    """The node of resting order ``oid``, or -1. With the live-id bitset (``ids="bitset"``)
    a dead id is answered from the bitset (in cache) without touching the index."""
    if oid <= 0 or oid >= IDX.size:
        return -1
    if G[IDS] == IDS_BITSET and LV[oid >> 6] & (ONE << np.uint64(oid & 63)) == 0:
        return -1
    return IDX[oid]


@njit(cache=True, _nrt=False, inline="always")
def cancel(out, i, N, IDX, LV, B, G, oid):
    node = lookup(IDX, LV, G, oid)
    if node < 0:
        put(out, i, NOT_FOUND, R_UNKNOWN_ID, oid, 0, 0, 0, 0)
        return
    remove(N, IDX, LV, B, G, node)
    put(out, i, CANCELLED, 0, oid, 0, 0, 0, 1)  # remaining=0: the C++ convention


@njit(cache=True, _nrt=False)
def modify(out, i, N, IDX, LV, B, G, oid, qty, price):
    """Everything of a modify but the trade: a re-priced order leaves its level and returns
    ``(owner, side)`` for :func:`execute` to match it (as a LIMIT at ``price``); ``(0, 0)``
    when its outcome row is written here. A real call (a rare path): the one inlined copy of
    ``match`` serves both: each inlined copy lengthens a cold compile (a second one nearly
    doubled it: docs/decisions/pool-kernel-inlining.md)."""
    if refuse_modify(out, i, qty, price, G[LO], G[HI]):
        return 0, 0
    node = lookup(IDX, LV, G, oid)
    if node < 0:
        put(out, i, NOT_FOUND, R_UNKNOWN_ID, oid, 0, 0, 0, 0)
        return 0, 0
    w = G[WIDTH]
    row = N[node, ROW]
    side = row // w
    old_price = G[LO] + row - side * w
    owner = N[node, OWN]
    oq = N[node, QTY]
    if price == 0 or price == old_price:
        if qty <= oq:  # keeps its place in the queue
            G[QREMOVED] += oq - qty
            N[node, QTY] = qty
            if G[FOK_MODE] == FOK_LEVEL_SUMS:
                add_sums(N, G, node, qty - oq)
        else:  # loses priority: to the tail of its level
            remove(N, IDX, LV, B, G, node)
            rest(N, IDX, LV, B, G, oid, owner, side, old_price, qty)
        put(out, i, ACCEPTED, 0, oid, qty, 0, 0, 0)
        return 0, 0
    remove(N, IDX, LV, B, G, node)
    return owner, side


@njit(cache=True, _nrt=False)
def mass_cancel(out, i, N, IDX, LV, B, G, scope, side, owner, plo, phi):
    w = G[WIDTH]
    ok, xa, xb = mass_cancel_span(out, i, scope, side, owner, plo, phi, G[LO], G[HI], w)
    if not ok:
        return
    n = 0
    for s in range(2):
        if scope == SCOPE_SIDE and s != side:
            continue
        x = first_from(B, G, s, xa)
        while 0 <= x <= xb:
            node = G[LOFF + (s * w + x) * LEVEL_COLS + HEAD]
            while node >= 0:
                nxt = N[node, NXT]
                if scope != SCOPE_OWNER or N[node, OWN] == owner:
                    remove(N, IDX, LV, B, G, node)
                    n += 1
                node = nxt
            x = first_from(B, G, s, x + 1)
    put(out, i, CANCELLED, 0, 0, 0, 0, 0, n)


@njit(cache=True, _nrt=False, inline="always")
def execute(out, i, c, F, N, IDX, LV, B, G):
    kind = c.kind
    oid = 0  # a submit that trades, or a re-priced modify: one call site of match below
    if kind == SUBMIT:
        owner = c.owner
        side = c.side
        otype = c.otype
        price = c.price
        qty = c.qty
        oid = submit(out, i, N, B, G, owner, side, otype, price, qty)
        market = otype >= MARKET
    elif kind == CANCEL:
        cancel(out, i, N, IDX, LV, B, G, c.id)
    elif kind == MODIFY:
        owner, side = modify(out, i, N, IDX, LV, B, G, c.id, c.qty, c.price)
        if owner > 0:
            oid = c.id
            otype = LIMIT
            price = c.price
            qty = c.qty
            market = False
    elif kind == MASS_CANCEL:
        mass_cancel(out, i, N, IDX, LV, B, G, c.otype, c.side, c.owner,
                    c.price, c.price_hi)
    else:
        put(out, i, REJECTED, R_BAD_KIND, 0, 0, 0, 0, 0)
    if oid > 0:
        match(out, i, F, N, IDX, LV, B, G,
              oid, owner, side, otype, market, price, price, qty)


@njit(cache=True, _nrt=False)
def run(cmds, start, out, F, N, IDX, LV, B, G, timed, durs):
    """Replay ``cmds[start:]`` into ``out``; returns (next command, DONE or what to grow).

    With ``timed`` (:data:`lob.engines.compiled.clock.MONOTONIC` or ``TSC``; 0: untimed),
    commands whose ``timed`` flag is set are bracketed by in-kernel clock reads and their
    durations (ns, or cycle ticks) written to ``durs[G[NDUR]]`` onwards.
    """
    grow = G[FIXED] == 0
    for i in range(start, cmds.size):
        if grow and G[FREE] < 0:
            return i, GROW_POOL
        if F.shape[0] - G[NFILL] <= G[NLIVE]:  # one command fills at most every resting order
            return i, GROW_FILLS
        if G[NEXT_ID] + 1 >= IDX.size:
            return i, GROW_INDEX
        c = cmds[i]
        clock = timed != 0 and c.timed
        t0 = stamp(timed) if clock else 0
        execute(out, i, c, F, N, IDX, LV, B, G)  # one call site: one inlined copy
        if clock:
            durs[G[NDUR]] = stamp(timed) - t0
            G[NDUR] += 1
    return cmds.size, DONE

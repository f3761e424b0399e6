"""The v4 kernel: the compiled book with packed 32-byte order records and the book's scalars
in registers (``levels="packed"``; the kernel of ``v4@numba``, and of ``v5@numba``, which adds
the stream prefetch of the last point below as a compile-time switch).

v3 -> v4 is four registered single steps (:mod:`lob.engines.toggles`), each a switch of this
kernel: ``v3+packed`` (``levels="packed"``: this kernel with every command through its full
body), ``v3+packed+hot`` (``loop="hot"``: the inner loop below), ``v3+packed+hot+select``
(``select="select"``: its selects) and ``v4`` (``ownsums="stp"``: per-owner sums only when
the STP mode reads them; a runtime flag, the others are pruned at compile time). The first
step still bundles what cannot be switched in this code without a second kernel: the record
and level layout (every helper's field access), the scalars held in locals and threaded
through every helper's return values (a memory-resident variant is other code for every
helper, not a switch; store-to-load forwarding would also undo a save/reload emulation),
unsigned indexing (:func:`~lob.engines.compiled.bitmap.u` in every helper, the bitmap shared
with the pool kernel included) and the untimed specialisation with no clock code. What each
step bought, and the alternatives measured and dropped, are in the decision records
``docs/decisions/v4-packed-layout.md``, ``v4-hot-loop.md``, ``v4-selects.md`` and
``v5-stream-prefetch.md``.

Same semantics, outcome rows and fills as :mod:`lob.engines.compiled.kernel` (a line-for-line
port of ``reference``); what differs is the layout and the shape of the code:

* an order is one 32-byte record of :data:`NODE_DTYPE` (links, quantity, owner, level and
  owner slot as int32, the id as int64; two records per cache line, none straddling one)
  instead of a 64-byte row of int64s: a cancel or a match step touches half the bytes. No
  ``SEQ``: FIFO order is the list order, checked against ``reference`` by the differential
  fuzz. A pool holds at most 2**31 - 1 orders;
* levels are 16-byte records ``L[row] = (head, tail, sum)`` (int32 links, int64 sum) with
  no order count (an empty level is ``head < 0``), at ``row = 2 * (price - min_price) +
  side``: a price's bid and ask sit side by side, two prices to a cache line, and a row is a
  shift and an add where a 32-byte ``L[side * width + x, col]`` row of int64s took two
  multiplies by values held in memory (the row stride and the width). ``sum`` is kept only
  by ``fok="level_sums"``, and the per-owner sums only when the STP mode can ask for them
  (with ``StpMode.NONE`` a FOK check never subtracts own quantity);
* the scalar state (next id, free-list head, fill count, best prices, live count,
  conservation totals) is loaded into local variables once per :func:`run` call and
  written back to ``S`` when it returns: numba cannot prove two arrays do not alias, so in
  the v0..v3 kernel every ``G[...]`` read after any array store is a reload, on every
  command;
* the whole hot path (submit, the FOK check, match, cancel) is one loop body; the rare
  paths (modify, mass cancel) are real calls that see the state through ``S``, and the
  match loop has one copy of :func:`drop` for a maker traded or removed by STP (and
  :func:`modify` one for both of its cases): every inlined copy of a helper is typed and
  SSA-rebuilt again at compile time, so each copy lengthens a cold compile. The FOK check
  stays inlined (as a real call it was slower);
* every array index goes through :func:`u` (as unsigned): numba emits a negative-index
  wraparound (a shift, an and, an add) for every signed index, none for unsigned ones;
* a valid LIMIT that crosses nothing goes straight to the book, past the validation chain
  and the match loop's set-up;
* that fast path and every CANCEL run in an inner loop of their own, which any other
  command leaves for the full body: LLVM weighs an inner loop's values first when it
  assigns registers, so the hot path keeps more of its state out of stack slots. The inner
  loop also settles every valid priced order that crosses nothing (a LIMIT or POST_ONLY
  rests, an IOC or FOK is cancelled) and a POST_ONLY that would cross; and so does an IOC,
  FOK, MARKET or crossing LIMIT filled whole by the first order of the best level when that
  order keeps a remainder (one fill, no order leaves the book);
* in that inner loop, the opposite best price and the cross test of a submit are selects,
  not branches on its side (the side is random in both seed streams, so a branch on it is
  mispredicted on about every other submit);
* v5 (``stream="prefetch"``, the ``ahead`` argument of :func:`run`): every pass of the
  inner loop prefetches the command :data:`STREAM_AHEAD` (64) records
  ahead (``prefetcht0``) and the outcome record as far ahead for writing (``prefetchw``,
  :mod:`lob.engines.compiled.prefetch`): the two streams are 74 bytes a command.

:func:`run` stops before a command whenever the pool, the fill buffer or the id index might
not have room for it and returns what to grow, as the v0..v3 kernel does.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from lob.engines.compiled import codes as cd
from lob.engines.compiled.bitmap import (
    ONE,
    bm_after,
    bm_clear,
    bm_next,
    bm_prev,
    bm_set,
    u,
)
from lob.engines.compiled.clock import stamp
from lob.engines.compiled.ops import (
    fill,
    mass_cancel_span,
    own_in_table,
    owner_slot,
    put,
    refuse_modify,
    refuse_submit,
    settle,
)
from lob.engines.compiled.prefetch import prefetch, prefetch_write
from lob.engines.compiled.state import (
    BEST0,
    BEST1,
    FIXED,
    FOK_FULL,
    FOK_LEVEL_SUMS,
    FOK_MODE,
    FREE,
    HI,
    LO,
    NDUR,
    NEXT_ID,
    NFILL,
    NLIVE,
    NW0,
    NW1,
    OSLOT_SIZE,
    OWNSUMS,
    QIN,
    QREMOVED,
    QTRADED,
    STP,
    WIDTH,
    K,
)
from lob.semantics import MAX_PRICE, MAX_QTY

# one resting order: ND[node].nxt etc. (32 bytes)
NODE_DTYPE = np.dtype([("nxt", "i4"), ("prv", "i4"), ("qty", "i4"), ("own", "i4"),
                       ("row", "i4"), ("slot", "i4"), ("oid", "i8")], align=True)
MAX_NODES = 2**31 - 1  # node indices are int32
# a record's level row (2 * level + side) is int32 too: bands end at MAX_PRICE
assert 2 * MAX_PRICE <= MAX_NODES
# one price level of one side: L[row].head etc. (16 bytes); row = 2 * (price - min_price) + side,
# so a price's bid and ask levels share a cache line and a row is a shift, not a multiply
LEVEL_DTYPE = np.dtype([("head", "i4"), ("tail", "i4"), ("sum", "i8")], align=True)
STREAM_AHEAD = 64  # commands (and outcome records) prefetched ahead of the one in hand


# --- orders on and off the book -------------------------------------------------------------

@njit(cache=True, _nrt=False, inline="always")
def rest(ND, L, IDX, LV, B, OS, S, C, free, best0, best1, oid, owner, side, price, qty):
    """Put an order at the tail of its level; returns (free, best0, best1). The caller
    guarantees a free node and counts it (live count, quantity in)."""
    node = free
    free = ND[u(node)].nxt
    x = price - C[1]
    row = 2 * x + side
    ND[u(node)].qty = qty
    ND[u(node)].own = owner
    ND[u(node)].oid = oid
    ND[u(node)].row = row
    t = L[u(row)].tail
    ND[u(node)].nxt = -1
    ND[u(node)].prv = t
    if t >= 0:
        ND[u(t)].nxt = node
    else:
        L[u(row)].head = node
        bm_set(B, C[2], C[3], side, x)
        if side == 0:
            if x > best0:
                best0 = x
        elif best1 < 0 or x < best1:
            best1 = x
    L[u(row)].tail = node
    if C[4]:
        L[u(row)].sum += qty
        if C[5]:
            slot = owner_slot(OS, 0, S, owner)
            ND[u(node)].slot = slot
            if slot >= 0:
                OS[u(C[6] + row * C[7] + slot)] += qty
    IDX[u(oid)] = node
    LV[u(oid >> 6)] |= ONE << np.uint64(oid & 63)
    return free, best0, best1


@njit(cache=True, _nrt=False, inline="always")
def add_sums(ND, L, OS, C, node, row, q):
    """Add q to the open quantity of the node's level (and its owner slot there)."""
    L[u(row)].sum += q
    if C[5]:
        slot = ND[u(node)].slot
        if slot >= 0:
            OS[u(C[6] + row * C[7] + slot)] += q


@njit(cache=True, _nrt=False, inline="always")
def drop(ND, L, LV, B, OS, C, free, best0, best1, node):
    """Take a resting order off the book and free its node; returns (free, best0, best1).
    The caller counts it (live count, quantity removed or traded)."""
    row = ND[u(node)].row
    p = ND[u(node)].prv
    n = ND[u(node)].nxt
    if p >= 0:
        ND[u(p)].nxt = n
    else:
        L[u(row)].head = n
    if n >= 0:
        ND[u(n)].prv = p
    else:
        L[u(row)].tail = p
    if C[4]:
        add_sums(ND, L, OS, C, node, row, -ND[u(node)].qty)
    if n < 0 and p < 0:  # the level is now empty
        x = row >> 1
        if row & 1 == 0:
            bm_clear(B, C[2], C[3], 0, x)
            if best0 == x:
                best0 = bm_prev(B, C[2], C[3], 0, x - 1)
        else:
            bm_clear(B, C[2], C[3], 1, x)
            if best1 == x:
                best1 = bm_next(B, C[2], C[3], 1, x + 1)
    oid = ND[u(node)].oid
    LV[u(oid >> 6)] &= ~(ONE << np.uint64(oid & 63))
    ND[u(node)].nxt = free
    return node, best0, best1


@njit(cache=True, _nrt=False, inline="always")
def consts(S):
    """The book's constants the helpers read, as one tuple held in registers: (width,
    min price, bitmap words, summary words, level sums kept, owner sums kept, owner-map
    size, owner slots per level)."""
    return (S[WIDTH], S[LO], S[NW0], S[NW1], S[FOK_MODE] == FOK_LEVEL_SUMS, S[OWNSUMS] != 0,
            S[OSLOT_SIZE], S[K])


# --- rare paths: real calls, state through S ---------------------------------------------

@njit(cache=True, _nrt=False, inline="always")
def own_at(ND, L, OS, S, row, owner):
    """Open quantity of ``owner`` at level ``row`` (owner sums, or a walk as fallback)."""
    total = own_in_table(OS, 0, S[OSLOT_SIZE], S, row, owner)
    if total >= 0:
        return total
    total = 0
    node = L[u(row)].head
    while node >= 0:
        if ND[u(node)].own == owner:
            total += ND[u(node)].qty
        node = ND[u(node)].nxt
    return total


@njit(cache=True, _nrt=False, inline="always")
def available(ND, L, B, OS, S, x, side, limit, owner, want):
    """Quantity a FOK (a priced order) could trade from the opposite side's best level
    ``x`` on, honouring the STP mode."""
    opp = 1 - side
    lo = S[LO]
    stp = S[STP]
    mode = S[FOK_MODE]
    total = 0
    while x >= 0:
        p = lo + x
        if (p > limit) if side == 0 else (p < limit):
            break
        row = 2 * x + opp
        own = -1
        if mode == FOK_LEVEL_SUMS:
            own = 0 if stp == cd.STP_NONE else own_at(ND, L, OS, S, row, owner)
        if own == 0:
            total += L[u(row)].sum
        elif own > 0 and stp == cd.STP_MAKER:
            total += L[u(row)].sum - own
        else:  # walk the level in priority order
            node = L[u(row)].head
            while node >= 0:
                if stp != cd.STP_NONE and ND[u(node)].own == owner:
                    if stp != cd.STP_MAKER:
                        return total
                else:
                    total += ND[u(node)].qty
                    if mode != FOK_FULL and total >= want:
                        return total
                node = ND[u(node)].nxt
        if mode != FOK_FULL and total >= want:
            return total
        x = bm_after(B, S[NW0], S[NW1], opp, x)
    return total


@njit(cache=True, _nrt=False)
def mass_cancel(out, i, ND, L, LV, B, OS, S, scope, side, owner, plo, phi):
    ok, xa, xb = mass_cancel_span(out, u(i), scope, side, owner, plo, phi, S[LO], S[HI],
                                  S[WIDTH])
    if not ok:
        return
    free = S[FREE]
    best0 = S[BEST0]
    best1 = S[BEST1]
    C = consts(S)
    n = 0
    qrem = 0
    for s in range(2):
        if scope == cd.SCOPE_SIDE and s != side:
            continue
        x = bm_next(B, S[NW0], S[NW1], s, xa)
        while 0 <= x <= xb:
            node = L[u(2 * x + s)].head
            while node >= 0:
                nxt = ND[u(node)].nxt
                if scope != cd.SCOPE_OWNER or ND[u(node)].own == owner:
                    qrem += ND[u(node)].qty
                    free, best0, best1 = drop(ND, L, LV, B, OS, C, free, best0, best1, node)
                    n += 1
                node = nxt
            x = bm_next(B, S[NW0], S[NW1], s, x + 1)
    S[FREE] = free
    S[BEST0] = best0
    S[BEST1] = best1
    S[NLIVE] -= n
    S[QREMOVED] += qrem
    put(out, u(i), cd.CANCELLED, 0, 0, 0, 0, 0, n)


@njit(cache=True, _nrt=False)
def modify(out, i, ND, L, IDX, LV, B, OS, S, oid, qty, price):
    """A MODIFY: settled here, or taken off the book for the match at its new price; returns
    (whether it goes to the match as a LIMIT, its side, its owner)."""
    lo = S[LO]
    if refuse_modify(out, u(i), qty, price, lo, S[HI]):
        return False, 0, 0
    if oid <= 0 or oid >= IDX.size or LV[u(oid >> 6)] & (ONE << np.uint64(oid & 63)) == 0:
        put(out, u(i), cd.NOT_FOUND, cd.R_UNKNOWN_ID, oid, 0, 0, 0, 0)
        return False, 0, 0
    C = consts(S)
    free = S[FREE]
    best0 = S[BEST0]
    best1 = S[BEST1]
    node = IDX[u(oid)]
    row = ND[u(node)].row
    side = row & 1
    old_price = lo + (row >> 1)
    owner = ND[u(node)].own
    oq = ND[u(node)].qty
    same = price == 0 or price == old_price
    if same and qty <= oq:  # keeps its place in the queue
        S[QREMOVED] += oq - qty
        ND[u(node)].qty = qty
        if C[4]:
            add_sums(ND, L, OS, C, node, row, qty - oq)
        put(out, u(i), cd.ACCEPTED, 0, oid, qty, 0, 0, 0)
        return False, side, owner
    S[QREMOVED] += oq  # off the book (one copy of drop for both cases)
    free, best0, best1 = drop(ND, L, LV, B, OS, C, free, best0, best1, node)
    if same:  # a larger quantity loses priority: to the tail of its level
        free, best0, best1 = rest(ND, L, IDX, LV, B, OS, S, C, free, best0, best1, oid,
                                  owner, side, old_price, qty)
        S[QIN] += qty
        put(out, u(i), cd.ACCEPTED, 0, oid, qty, 0, 0, 0)
    else:  # a new price: matched as a LIMIT
        S[NLIVE] -= 1
    S[FREE] = free
    S[BEST0] = best0
    S[BEST1] = best1
    return not same, side, owner


# --- the replay loop -------------------------------------------------------------------------

@njit(cache=True, _nrt=False, inline="always")
def save(S, next_id, free, nfill, best0, best1, nlive, qin, qtraded, qremoved):
    S[NEXT_ID] = next_id
    S[FREE] = free
    S[NFILL] = nfill
    S[BEST0] = best0
    S[BEST1] = best1
    S[NLIVE] = nlive
    S[QIN] = qin
    S[QTRADED] = qtraded
    S[QREMOVED] = qremoved


@njit(cache=True, _nrt=False, inline="always")
def match(out, i, F, ND, L, IDX, LV, B, OS, S, C, lo, stp, sums, free, nf, best0, best1,
          nlive, qin, qtraded, qrem, oid, owner, side, otype, price, qty):
    """Match an order (a submit, or a modify to a new price, as a LIMIT) against the book,
    then write its outcome and rest any remainder; returns the scalar state it changed
    ``(free, nf, best0, best1, nlive, qin, qtraded, qrem)``. Inlined into :func:`run`."""
    market = otype >= cd.MARKET
    notional = otype == cd.NOTIONAL
    left = qty  # lots, or quote amount for NOTIONAL
    filled = 0
    nfills = 0
    removed = 0
    stopped = False
    too_dear = False
    while left > 0:
        x = best1 if side == 0 else best0
        if x < 0:
            break
        p = lo + x
        if not market and ((p > price) if side == 0 else (p < price)):
            break
        if notional and p > left:
            too_dear = True
            break
        row = 2 * x + 1 - side
        m = L[u(row)].head
        mq = ND[u(m)].qty
        if stp != cd.STP_NONE and ND[u(m)].own == owner:  # self-trade
            stopped = stp != cd.STP_MAKER
            if stp == cd.STP_TAKER:
                break
            qrem += mq  # the maker is removed, not traded
            removed += 1
        else:
            take = left // p if notional else left
            if mq < take:
                take = mq
            left -= take * p if notional else take
            filled += take
            nfills += 1
            fill(F, nf, oid, ND[u(m)].oid, p, take)
            nf += 1
            if take < mq:  # the maker keeps the rest (and the taker is done)
                ND[u(m)].qty = mq - take
                if sums:
                    add_sums(ND, L, OS, C, m, row, -take)
                continue
        # the maker leaves the book, traded or removed: one copy of drop for both
        nlive -= 1
        free, best0, best1 = drop(ND, L, LV, B, OS, C, free, best0, best1, m)
        if stopped:
            break
    qtraded += filled
    if settle(out, u(i), otype, stopped, too_dear, oid, left, filled, nfills, removed):
        free, best0, best1 = rest(ND, L, IDX, LV, B, OS, S, C, free, best0, best1, oid,
                                  owner, side, price, left)
        nlive += 1
        qin += left
    return free, nf, best0, best1, nlive, qin, qtraded, qrem


@njit(cache=True, _nrt=False, inline="always")
def cancel(out, i, ND, L, IDX, LV, B, OS, C, icap, free, best0, best1, nlive, qrem, oid):
    """A CANCEL: its outcome row written; returns ``(free, best0, best1, nlive, qrem)``."""
    if u(oid - 1) >= u(icap - 1) or LV[u(oid >> 6)] & (ONE << np.uint64(oid & 63)) == 0:
        put(out, u(i), cd.NOT_FOUND, cd.R_UNKNOWN_ID, oid, 0, 0, 0, 0)
        return free, best0, best1, nlive, qrem
    node = IDX[u(oid)]
    qrem += ND[u(node)].qty
    free, best0, best1 = drop(ND, L, LV, B, OS, C, free, best0, best1, node)
    put(out, u(i), cd.CANCELLED, 0, oid, 0, 0, 0, 1)  # remaining=0: as the C++ seed
    return free, best0, best1, nlive - 1, qrem


@njit(cache=True, _nrt=False, inline="always")
def load(S):
    """The scalar state :func:`save` writes, as a tuple of locals (registers)."""
    return (S[NEXT_ID], S[FREE], S[NFILL], S[BEST0], S[BEST1], S[NLIVE], S[QIN], S[QTRADED],
            S[QREMOVED])


@njit(cache=True, _nrt=False)
def run(cmds, start, out, F, ND, L, IDX, LV, B, OS, S, timed, durs, ahead, hot, sel):
    """Replay ``cmds[start:]`` into ``out``; returns (next command, DONE or what to grow).

    With ``timed`` (:data:`lob.engines.compiled.clock.MONOTONIC` or ``TSC``; 0: untimed),
    commands whose ``timed`` flag is set are bracketed by in-kernel clock reads and their
    durations (ns, or cycle ticks) written to ``durs[S[NDUR]]`` onwards. ``durs=None`` compiles
    a specialisation with no clock code at all: numba prunes the ``durs is not None``
    branches before typing, so the untimed loop carries no clock flag, start time or
    duration count.
    ``ahead``: None (v4) or :data:`STREAM_AHEAD` (v5, ``stream="prefetch"``), pruned the same
    way: v5's loop prefetches the command and the outcome record :data:`STREAM_AHEAD` ahead,
    v4's has no prefetch instruction (a distance read at run time would put a branch on it
    in the loop). ``hot`` (``loop="hot"``) and ``sel`` (``select="select"``): None or
    True, pruned the same way: without ``hot`` every command runs the full body (no inner
    loop); without ``sel`` the inner loop's cross test branches on the side.
    """
    w = S[WIDTH]
    lo = S[LO]
    hi = S[HI]
    stp = S[STP]
    sums = S[FOK_MODE] == FOK_LEVEL_SUMS
    C = consts(S)
    grow = S[FIXED] == 0
    fcap = F.shape[0]
    icap = IDX.size
    next_id, free, nf, best0, best1, nlive, qin, qtraded, qrem = load(S)
    ndur = S[NDUR]
    n = cmds.size
    i = start
    while i < n:
        # the hot loop: cancels, valid orders that cross nothing or are refused for crossing,
        # and those one maker fills whole (about 90% of lobster_replay, 60% of
        # cpp_comprehensive). Its own
        # loop, so that LLVM weighs its values as the innermost ones and keeps them in
        # registers; anything else leaves it for the full body below.
        if hot is not None:  # loop="hot": pruned at compile time otherwise
            while i < n:
                if ahead is not None:  # v5; pruned at compile time in v4's specialisation
                    prefetch(cmds, u(i + STREAM_AHEAD))  # a constant distance: no register
                    prefetch_write(out, u(i + STREAM_AHEAD))
                c = cmds[u(i)]
                if durs is not None:  # pruned at compile time in the untimed specialisation
                    clock = timed != 0 and c.timed
                    t0 = stamp(timed) if clock else 0
                kind = c.kind
                if kind == cd.CANCEL:
                    free, best0, best1, nlive, qrem = cancel(
                        out, i, ND, L, IDX, LV, B, OS, C, icap, free, best0, best1, nlive, qrem,
                        c.id)
                elif kind == cd.SUBMIT and 0 <= c.otype <= cd.MARKET:
                    side = c.side
                    price = c.price
                    qty = c.qty
                    otype = c.otype
                    # valid, with room for it (a price in the band: one unsigned compare)
                    if not (c.owner > 0 and 0 < qty <= MAX_QTY and
                            (otype == cd.MARKET or u(price - lo) < u(w)) and free >= 0 and
                            next_id + 1 < icap):
                        break
                    if u(side) > u(1):
                        break
                    if sel is not None:  # select="select": pruned at compile time otherwise
                        # the opposite best and whether it crosses, as selects: a branch on the
                        # side (random in both streams) is mispredicted on about every other submit
                        x = best0 if side else best1
                        d = lo + x - price
                        cross = (x >= 0) & ((otype == cd.MARKET) | ((d >= 0) if side else (d <= 0)))
                    elif side == 0:  # select="branch": the same test as a branch on the side
                        x = best1
                        cross = x >= 0 and (otype == cd.MARKET or lo + x <= price)
                    else:
                        x = best0
                        cross = x >= 0 and (otype == cd.MARKET or lo + x >= price)
                    if not cross:
                        next_id += 1
                        if otype == cd.LIMIT or otype == cd.POST_ONLY:
                            free, best0, best1 = rest(ND, L, IDX, LV, B, OS, S, C, free, best0,
                                                      best1, next_id, c.owner, side, price, qty)
                            nlive += 1
                            qin += qty
                            put(out, u(i), cd.ACCEPTED, 0, next_id, qty, 0, 0, 0)
                        else:  # an IOC, FOK or MARKET with nothing to take
                            put(out, u(i), cd.CANCELLED, cd.R_FOK_UNFILLABLE if otype == cd.FOK else
                                cd.R_NO_LIQUIDITY, next_id, qty, 0, 0, 0)
                    elif otype == cd.POST_ONLY:  # would take
                        next_id += 1
                        put(out, u(i), cd.CANCELLED, cd.R_WOULD_CROSS, next_id, qty, 0, 0, 0)
                    else:  # filled by the best level's first order, which keeps a remainder
                        row = 2 * x + 1 - side
                        m = L[u(row)].head
                        mq = ND[u(m)].qty
                        if mq <= qty or nf >= fcap or (stp != cd.STP_NONE and
                                                       ND[u(m)].own == c.owner):
                            break  # to the match
                        next_id += 1
                        p = lo + x
                        fill(F, nf, next_id, ND[u(m)].oid, p, qty)
                        nf += 1
                        ND[u(m)].qty = mq - qty
                        if sums:
                            add_sums(ND, L, OS, C, m, row, -qty)
                        qtraded += qty
                        put(out, u(i), cd.FILLED, 0, next_id, 0, qty, 1, 0)
                else:
                    break
                if durs is not None:
                    if clock:
                        durs[u(ndur)] = stamp(timed) - t0
                        ndur += 1
                i += 1
        if i >= n:
            break
        code = cd.DONE
        if free < 0 and grow:
            code = cd.GROW_POOL
        elif fcap - nf <= nlive:  # one command fills at most every resting order
            code = cd.GROW_FILLS
        elif next_id + 1 >= icap:
            code = cd.GROW_INDEX
        if code != cd.DONE:
            save(S, next_id, free, nf, best0, best1, nlive, qin, qtraded, qrem)
            S[NDUR] = ndur
            return i, code
        c = cmds[u(i)]
        if durs is not None:  # pruned at compile time in the untimed specialisation
            clock = timed != 0 and c.timed
            t0 = stamp(timed) if clock else 0
        kind = c.kind
        go = False  # run the match below
        oid = 0
        owner = 0
        side = 0
        otype = cd.LIMIT
        price = 0
        qty = 0
        if kind == cd.SUBMIT:
            otype = c.otype
            side = c.side
            owner = c.owner
            price = c.price
            qty = c.qty
            if not refuse_submit(out, u(i), otype, side, owner, price, qty, lo, hi, free):
                next_id += 1
                oid = next_id
                go = True
                if otype == cd.POST_ONLY:
                    x = best1 if side == 0 else best0
                    if x >= 0 and ((lo + x <= price) if side == 0 else (lo + x >= price)):
                        put(out, u(i), cd.CANCELLED, cd.R_WOULD_CROSS, oid, qty, 0, 0, 0)
                        go = False
                elif otype == cd.FOK:
                    x = best1 if side == 0 else best0
                    if available(ND, L, B, OS, S, x, side, price, owner, qty) < qty:
                        put(out, u(i), cd.CANCELLED, cd.R_FOK_UNFILLABLE, oid, qty, 0, 0, 0)
                        go = False
        elif kind == cd.MODIFY or kind == cd.MASS_CANCEL:  # rare: real calls, state through S
            save(S, next_id, free, nf, best0, best1, nlive, qin, qtraded, qrem)
            if kind == cd.MODIFY:
                oid = c.id
                qty = c.qty
                price = c.price
                go, side, owner = modify(out, i, ND, L, IDX, LV, B, OS, S, oid, qty, price)
                otype = cd.LIMIT
            else:
                mass_cancel(out, i, ND, L, LV, B, OS, S, c.otype, c.side, c.owner, c.price,
                            c.price_hi)
            next_id, free, nf, best0, best1, nlive, qin, qtraded, qrem = load(S)
        elif kind == cd.CANCEL:
            if hot is None:  # with the hot loop, a cancel never reaches the full body
                free, best0, best1, nlive, qrem = cancel(
                    out, i, ND, L, IDX, LV, B, OS, C, icap, free, best0, best1, nlive, qrem, c.id)
        else:
            put(out, u(i), cd.REJECTED, cd.R_BAD_KIND, 0, 0, 0, 0, 0)

        if go:  # match (submit, or modify to a new price), then the outcome and any rest
            free, nf, best0, best1, nlive, qin, qtraded, qrem = match(
                out, i, F, ND, L, IDX, LV, B, OS, S, C, lo, stp, sums, free, nf, best0, best1,
                nlive, qin, qtraded, qrem, oid, owner, side, otype, price, qty)
        if durs is not None:
            if clock:
                durs[u(ndur)] = stamp(timed) - t0
                ndur += 1
        i += 1
    save(S, next_id, free, nf, best0, best1, nlive, qin, qtraded, qrem)
    S[NDUR] = ndur
    return cmds.size, cd.DONE

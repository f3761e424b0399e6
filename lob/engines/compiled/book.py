"""Memory layout of the compiled book and its primitive operations (numba, allocation-free).

All state lives in preallocated numpy arrays that Python owns (and grows, between kernel
calls); the kernels only index them. Few arrays, because numba passes every array to a
non-inlined call as ~7 scalars, which dominated the per-op cost with one array per table:

* ``N`` int64 ``(capacity, 8)``: the node pool, one 64-byte row per order (``NXT``, ``PRV``,
  ``QTY``, ``OWN``, ``OID``, ``SEQ``, ``ROW`` = side * width + level, ``SLOT`` = owner slot
  for the per-owner level sums or -1). Free nodes are chained through ``NXT``. Grows.
* ``IDX`` int64: order id -> node; ids are sequential. Grows. With ``ids="array"`` an entry
  is -1 when the order does not rest; with ``ids="bitset"`` (default) the bit ``oid`` of
  ``LV`` says whether it rests and a dead id's entry is stale and never read.
* ``LV`` uint64: the live-id bitset (one bit per id: 2M ids take 250 KB, which stays in
  cache, where the 16 MB index does not: a cancel of a dead id - most cancels in the C++
  seed's stream - is answered without a cache miss). Grows with ``IDX``.
* ``G`` int64, fixed size, holding in turn:
  the scalar state ``S`` (``G[0:16]``: next id, sequence, free head, fill count, cached
  best levels, conservation totals); the constants ``C`` (``G[16:32]``: band, STP mode,
  toggles, offsets); the levels ``L`` from ``LOFF`` (4 cells per level: ``HEAD``, ``TAIL``,
  ``CNT`` orders, ``SUM`` open qty - kept by the ``level_sums`` FOK toggle only; level
  ``x`` is price ``min_price + x``; bids are rows ``0..width-1``, asks
  ``width..2*width-1``); the per-level per-owner-slot open quantity ``OS`` (``level_sums``
  only) from ``G[OS_OFF]``; and ``OSLOT`` (owner id -> slot; -1 never seen, -2 no slot left,
  owners without a slot fall back to walking the level) from ``G[OSLOT_OFF]``.
* ``B`` uint64: the non-empty-level bitmap (``B0``, 2 x ``NW0`` words) then its summary
  (``B1``, 2 x ``NW1`` words; bit w set iff word w of ``B0`` is non-zero), so finding the
  next level costs two word scans even for a band of 1,000,000 ticks (``best="bitmap"``).
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import leading_zeros, trailing_zeros

# node columns
NXT, PRV, QTY, OWN, OID, SEQ, ROW, SLOT = range(8)
NODE_COLS = 8
# level cells (L[row, col] is G[LOFF + row * LEVEL_COLS + col])
HEAD, TAIL, CNT, SUM = range(4)
LEVEL_COLS = 4
# scalar state S = G[0:16]
NEXT_ID, SEQN, FREE, NFILL, BEST0, BEST1, NLIVE, QIN, QTRADED, QREMOVED, NSLOTS, NDUR = range(12)
# constants C = G[16:32]
(LO, HI, WIDTH, STP, BEST_MODE, FOK_MODE, K, FIXED, NW0, NW1, OS_OFF, OSLOT_OFF, OSLOT_SIZE,
 IDS) = range(16, 30)
LOFF = 32

BEST_SCAN, BEST_BITMAP = 0, 1
FOK_FULL, FOK_EARLY_EXIT, FOK_LEVEL_SUMS = 0, 1, 2
IDS_ARRAY, IDS_BITSET = 0, 1

_ONE = np.uint64(1)
_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)


def layout(width: int, k: int, oslot_size: int) -> tuple[int, int, int]:
    """(OS offset, OSLOT offset, total size) of G for a band width and owner-slot count."""
    os_off = LOFF + 2 * width * LEVEL_COLS
    oslot_off = os_off + 2 * width * k
    return os_off, oslot_off, oslot_off + oslot_size


# --- bitmap ------------------------------------------------------------------------------

@njit(cache=True, _nrt=False, inline="always")
def bm_set(B, G, s, x):
    w = x >> 6
    i0 = s * G[NW0] + w
    if B[i0] == 0:
        B[2 * G[NW0] + s * G[NW1] + (w >> 6)] |= _ONE << np.uint64(w & 63)
    B[i0] |= _ONE << np.uint64(x & 63)


@njit(cache=True, _nrt=False, inline="always")
def bm_clear(B, G, s, x):
    w = x >> 6
    i0 = s * G[NW0] + w
    B[i0] &= ~(_ONE << np.uint64(x & 63))
    if B[i0] == 0:
        B[2 * G[NW0] + s * G[NW1] + (w >> 6)] &= ~(_ONE << np.uint64(w & 63))


@njit(cache=True, _nrt=False, inline="always")
def bm_next(B, G, s, x):
    """Lowest set level >= x on side s, or -1."""
    nw0 = G[NW0]
    nw1 = G[NW1]
    b0 = s * nw0
    b1 = 2 * nw0 + s * nw1
    w = x >> 6
    if x < 0 or w >= nw0:
        return -1
    m = B[b0 + w] & (_ALL << np.uint64(x & 63))
    if m != 0:
        return (w << 6) + np.int64(trailing_zeros(m))
    j = w + 1
    if j >= nw0:
        return -1
    jw = j >> 6
    m = B[b1 + jw] & (_ALL << np.uint64(j & 63))
    while m == 0:
        jw += 1
        if jw >= nw1:
            return -1
        m = B[b1 + jw]
    w = (jw << 6) + np.int64(trailing_zeros(m))
    return (w << 6) + np.int64(trailing_zeros(B[b0 + w]))


@njit(cache=True, _nrt=False, inline="always")
def bm_prev(B, G, s, x):
    """Highest set level <= x on side s, or -1."""
    if x < 0:
        return -1
    b0 = s * G[NW0]
    b1 = 2 * G[NW0] + s * G[NW1]
    w = x >> 6
    m = B[b0 + w] & (_ALL >> np.uint64(63 - (x & 63)))
    if m != 0:
        return (w << 6) + 63 - np.int64(leading_zeros(m))
    j = w - 1
    if j < 0:
        return -1
    jw = j >> 6
    m = B[b1 + jw] & (_ALL >> np.uint64(63 - (j & 63)))
    while m == 0:
        jw -= 1
        if jw < 0:
            return -1
        m = B[b1 + jw]
    w = (jw << 6) + 63 - np.int64(leading_zeros(m))
    return (w << 6) + 63 - np.int64(leading_zeros(B[b0 + w]))


# --- best price and level order ---------------------------------------------------------

@njit(cache=True, _nrt=False, inline="always")
def best(G, s):
    """Level of the best price on side s (highest bid, lowest ask), or -1 when empty.

    ``scan`` re-scans the ladder from the band edge on every call (the C++ seed's v0);
    ``bitmap`` reads the cached best that push/unlink keep with the bitmap.
    """
    if G[BEST_MODE] == BEST_BITMAP:
        return G[BEST0 + s]
    w = G[WIDTH]
    if s == 0:
        for x in range(w - 1, -1, -1):
            if G[LOFF + x * LEVEL_COLS + HEAD] >= 0:
                return x
    else:
        for x in range(w):
            if G[LOFF + (w + x) * LEVEL_COLS + HEAD] >= 0:
                return x
    return -1


@njit(cache=True, _nrt=False, inline="always")
def after(B, G, s, x):
    """The next non-empty level after x in side s's priority order, or -1."""
    w = G[WIDTH]
    if G[BEST_MODE] == BEST_BITMAP:
        return bm_prev(B, G, s, x - 1) if s == 0 else bm_next(B, G, s, x + 1)
    if s == 0:
        for y in range(x - 1, -1, -1):
            if G[LOFF + y * LEVEL_COLS + HEAD] >= 0:
                return y
    else:
        for y in range(x + 1, w):
            if G[LOFF + (w + y) * LEVEL_COLS + HEAD] >= 0:
                return y
    return -1


@njit(cache=True, _nrt=False)
def first_from(B, G, s, x):
    """The lowest non-empty level >= x on side s, or -1 (ascending walks for mass cancel)."""
    w = G[WIDTH]
    if G[BEST_MODE] == BEST_BITMAP:
        return bm_next(B, G, s, x)
    for y in range(x, w):
        if G[LOFF + (s * w + y) * LEVEL_COLS + HEAD] >= 0:
            return y
    return -1


# --- levels and nodes ----------------------------------------------------------------------

@njit(cache=True, _nrt=False, inline="always")
def push(N, B, G, node, row):
    """Append a filled-in node at the tail of level ``row``."""
    lv = LOFF + row * LEVEL_COLS
    t = G[lv + TAIL]
    N[node, NXT] = -1
    N[node, PRV] = t
    if t >= 0:
        N[t, NXT] = node
    else:
        G[lv + HEAD] = node
        if G[BEST_MODE] == BEST_BITMAP:
            w = G[WIDTH]
            s = row // w
            x = row - s * w
            bm_set(B, G, s, x)
            b = G[BEST0 + s]
            if b < 0 or (x > b if s == 0 else x < b):
                G[BEST0 + s] = x
    G[lv + TAIL] = node
    G[lv + CNT] += 1
    if G[FOK_MODE] == FOK_LEVEL_SUMS:
        add_sums(N, G, node, N[node, QTY])


@njit(cache=True, _nrt=False, inline="always")
def add_sums(N, G, node, q):
    """Add q to the open quantity of the node's level and of its owner slot there."""
    row = N[node, ROW]
    G[LOFF + row * LEVEL_COLS + SUM] += q
    slot = N[node, SLOT]
    if slot >= 0:
        G[G[OS_OFF] + row * G[K] + slot] += q


@njit(cache=True, _nrt=False, inline="always")
def unlink(N, B, G, node):
    """Take a node out of its level (the node itself is not freed)."""
    row = N[node, ROW]
    lv = LOFF + row * LEVEL_COLS
    p = N[node, PRV]
    n = N[node, NXT]
    if p >= 0:
        N[p, NXT] = n
    else:
        G[lv + HEAD] = n
    if n >= 0:
        N[n, PRV] = p
    else:
        G[lv + TAIL] = p
    G[lv + CNT] -= 1
    if G[FOK_MODE] == FOK_LEVEL_SUMS:
        add_sums(N, G, node, -N[node, QTY])
    if n < 0 and p < 0 and G[BEST_MODE] == BEST_BITMAP:
        w = G[WIDTH]
        s = row // w
        x = row - s * w
        bm_clear(B, G, s, x)
        if G[BEST0 + s] == x:
            G[BEST0 + s] = bm_prev(B, G, s, x - 1) if s == 0 else bm_next(B, G, s, x + 1)


@njit(cache=True, _nrt=False, inline="always")
def owner_slot(G, owner):
    """The owner's slot in the per-level owner sums, assigning one on first sight, or -1."""
    if G[FOK_MODE] != FOK_LEVEL_SUMS or owner >= G[OSLOT_SIZE]:
        return -1
    at = G[OSLOT_OFF] + owner
    s = G[at]
    if s == -1:
        if G[NSLOTS] < G[K]:
            s = G[NSLOTS]
            G[NSLOTS] += 1
        else:
            s = -2  # sticky: an owner never gains a slot while it may have resting orders
        G[at] = s
    return s if s >= 0 else -1


@njit(cache=True, _nrt=False, inline="always")
def rest(N, IDX, LV, B, G, oid, owner, side, price, qty):
    """Put an order on the book (the caller guarantees a free node)."""
    node = G[FREE]
    G[FREE] = N[node, NXT]
    G[SEQN] += 1
    N[node, QTY] = qty
    N[node, OWN] = owner
    N[node, OID] = oid
    N[node, SEQ] = G[SEQN]
    row = side * G[WIDTH] + price - G[LO]
    N[node, ROW] = row
    N[node, SLOT] = owner_slot(G, owner)
    push(N, B, G, node, row)
    IDX[oid] = node
    if G[IDS] == IDS_BITSET:
        LV[oid >> 6] |= _ONE << np.uint64(oid & 63)
    G[NLIVE] += 1
    G[QIN] += qty


@njit(cache=True, _nrt=False, inline="always")
def remove(N, IDX, LV, B, G, node):
    """Take a resting order off the book and free its node; its open qty counts as removed."""
    unlink(N, B, G, node)
    G[QREMOVED] += N[node, QTY]
    oid = N[node, OID]
    if G[IDS] == IDS_BITSET:  # the bit alone marks the id dead: no write to the index
        LV[oid >> 6] &= ~(_ONE << np.uint64(oid & 63))
    else:
        IDX[oid] = -1
    N[node, NXT] = G[FREE]
    G[FREE] = node
    G[NLIVE] -= 1

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
* ``G`` int64, fixed size, holding in turn: the scalar state and constants of
  :mod:`lob.engines.compiled.state` (``G[0:32]``, the cells every compiled layout shares);
  the levels ``L`` from ``LOFF`` (4 cells per level: ``HEAD``, ``TAIL``,
  ``CNT`` orders, ``SUM`` open qty - kept by the ``level_sums`` FOK toggle only; level
  ``x`` is price ``min_price + x``; bids are rows ``0..width-1``, asks
  ``width..2*width-1``); the per-level per-owner-slot open quantity ``OS`` (``level_sums``
  only) from ``G[OS_OFF]``; and ``OSLOT`` (owner id -> slot; -1 never seen, -2 no slot left,
  owners without a slot fall back to walking the level) from ``G[OSLOT_OFF]``.
* ``B`` uint64: the non-empty-level bitmap of :mod:`lob.engines.compiled.bitmap`
  (``best="bitmap"``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from lob.engines.compiled.bitmap import ONE, bm_after, bm_clear, bm_next, bm_set
from lob.engines.compiled.ops import owner_slot
from lob.engines.compiled.state import (
    BEST0,
    BEST_BITMAP,
    BEST_MODE,
    BEST_SCAN,
    FOK_LEVEL_SUMS,
    FOK_MODE,
    FREE,
    IDS,
    IDS_BITSET,
    LO,
    NLIVE,
    NW0,
    NW1,
    OS_OFF,
    OSLOT_OFF,
    QIN,
    QREMOVED,
    SEQN,
    WIDTH,
    K,
)

# node columns
NXT, PRV, QTY, OWN, OID, SEQ, ROW, SLOT = range(8)
NODE_COLS = 8
# level cells (L[row, col] is G[LOFF + row * LEVEL_COLS + col])
HEAD, TAIL, CNT, SUM = range(4)
LEVEL_COLS = 4
LOFF = 32  # G[0:32] is the scalar state and constants of lob.engines.compiled.state


def layout(width: int, k: int, oslot_size: int) -> tuple[int, int, int]:
    """(OS offset, OSLOT offset, total size) of G for a band width and owner-slot count."""
    os_off = LOFF + 2 * width * LEVEL_COLS
    oslot_off = os_off + 2 * width * k
    return os_off, oslot_off, oslot_off + oslot_size


# --- best price and level order ---------------------------------------------------------

@njit(cache=True, _nrt=False, inline="always")
def best(G, s):
    """Level of the best price on side s (highest bid, lowest ask), or -1 when empty.

    ``scan`` re-scans the ladder from the band edge on every call (the C++ seed's v0);
    ``bitmap`` and ``tracked`` read the cached best that push/unlink keep.
    """
    if G[BEST_MODE] != BEST_SCAN:
        return G[BEST0 + s]
    return scan_after(G, s, G[WIDTH] if s == 0 else -1)


@njit(cache=True, _nrt=False, inline="always")
def scan_after(G, s, x):
    """The next non-empty level after ``x`` in side ``s``'s priority order, walking the
    ladder level by level (no index), or -1."""
    w = G[WIDTH]
    if s == 0:
        for y in range(x - 1, -1, -1):
            if G[LOFF + y * LEVEL_COLS + HEAD] >= 0:
                return y
    else:
        for y in range(x + 1, w):
            if G[LOFF + (w + y) * LEVEL_COLS + HEAD] >= 0:
                return y
    return -1


@njit(cache=True, _nrt=False, inline="always")
def after(B, G, s, x):
    """The next non-empty level after x in side s's priority order, or -1."""
    if G[BEST_MODE] == BEST_BITMAP:
        return bm_after(B, G[NW0], G[NW1], s, x)
    return scan_after(G, s, x)


@njit(cache=True, _nrt=False)
def first_from(B, G, s, x):
    """The lowest non-empty level >= x on side s, or -1 (ascending walks for mass cancel)."""
    w = G[WIDTH]
    if G[BEST_MODE] == BEST_BITMAP:
        return bm_next(B, G[NW0], G[NW1], s, x)
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
        if G[BEST_MODE] != BEST_SCAN:  # bitmap or tracked: keep the cached best
            w = G[WIDTH]
            s = row // w
            x = row - s * w
            if G[BEST_MODE] == BEST_BITMAP:
                bm_set(B, G[NW0], G[NW1], s, x)
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
    if n < 0 and p < 0 and G[BEST_MODE] != BEST_SCAN:  # the level is now empty
        w = G[WIDTH]
        s = row // w
        x = row - s * w
        if G[BEST_MODE] == BEST_BITMAP:
            bm_clear(B, G[NW0], G[NW1], s, x)
            if G[BEST0 + s] == x:
                G[BEST0 + s] = bm_after(B, G[NW0], G[NW1], s, x)
        elif G[BEST0 + s] == x:  # tracked: rescanned only when the best level empties
            G[BEST0 + s] = scan_after(G, s, x)


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
    N[node, SLOT] = owner_slot(G, G[OSLOT_OFF], G, owner)
    push(N, B, G, node, row)
    IDX[oid] = node
    if G[IDS] == IDS_BITSET:
        LV[oid >> 6] |= ONE << np.uint64(oid & 63)
    G[NLIVE] += 1
    G[QIN] += qty


@njit(cache=True, _nrt=False, inline="always")
def remove(N, IDX, LV, B, G, node):
    """Take a resting order off the book and free its node; its open qty counts as removed."""
    unlink(N, B, G, node)
    G[QREMOVED] += N[node, QTY]
    oid = N[node, OID]
    if G[IDS] == IDS_BITSET:  # the bit alone marks the id dead: no write to the index
        LV[oid >> 6] &= ~(ONE << np.uint64(oid & 63))
    else:
        IDX[oid] = -1
    N[node, NXT] = G[FREE]
    G[FREE] = node
    G[NLIVE] -= 1

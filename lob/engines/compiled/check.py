"""Invariant checks of the compiled books: one checker per layout (:func:`check_pool` for the
index-linked node pool of :mod:`.book`, :func:`check_packed` for the packed records of
:mod:`.kernel_v4`), one message table, and the checks both run alike (bitmap summary, cached
best prices, crossing, live orders, free list, conservation) in :func:`check_totals`.

The checkers are compiled, so the fuzz suite can call them after every command; each returns
an error code (0 = fine, else a key of :data:`MESSAGES`) and where it failed.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from lob.engines.compiled import book as bk
from lob.engines.compiled import state as st
from lob.engines.compiled.bitmap import has, popcount, summary_error

MESSAGES = {
    1: "broken prev link in a level",
    2: "level tail does not match its last node",
    3: "level count does not match its orders",
    4: "resting order with qty <= 0",
    5: "node in the wrong level",
    6: "order missing from the id index (or live-id bitset)",
    7: "FIFO (sequence) broken within a level",
    8: "level quantity sum is wrong",
    9: "bitmap bit does not match level occupancy",
    10: "bitmap summary word is wrong",
    11: "cached best price is wrong",
    12: "book is crossed",
    13: "resting-order count does not match the book",
    14: "id index (or live-id bitset) holds orders that are not on the book",
    15: "free list + resting orders != pool size",
    16: "quantity not conserved",
    17: "per-owner level sum is wrong",
}


@njit(cache=True)
def check_totals(B, bitmap, S, best, cached, seen, live, free, cap, resting):
    """The checks both layouts share, once their levels were walked: ``best`` the best
    level found per side, ``bitmap`` whether ``B`` is kept, ``cached`` whether the layout
    caches the best levels in ``S[BEST0:BEST0+2]``, ``seen`` resting orders found, ``live``
    live ids, ``free`` nodes on the free list of a pool of ``cap``, ``resting`` open quantity
    found."""
    if bitmap:
        wd = summary_error(B, S[st.NW0], S[st.NW1])
        if wd >= 0:
            return 10, wd
    if cached:
        for s in range(2):
            if S[st.BEST0 + s] != best[s]:
                return 11, s
    if best[0] >= 0 and best[1] >= 0 and best[0] >= best[1]:
        return 12, best[0]
    if seen != S[st.NLIVE]:
        return 13, seen
    if live != seen:
        return 14, live
    if free + seen != cap:
        return 15, free
    if S[st.QIN] != S[st.QTRADED] + S[st.QREMOVED] + resting:
        return 16, resting
    return 0, 0


@njit(cache=True, inline="always")
def better(best, s, x):
    """Whether level ``x`` beats side ``s``'s best so far (-1: none)."""
    return best[s] < 0 or (x > best[s] if s == 0 else x < best[s])


@njit(cache=True)
def check_pool(N, IDX, LV, B, G):
    """The pool layout's invariants (:mod:`lob.engines.compiled.book`)."""
    w = G[st.WIDTH]
    bitmap = G[st.BEST_MODE] == st.BEST_BITMAP
    bitset = G[st.IDS] == st.IDS_BITSET
    sums = G[st.FOK_MODE] == st.FOK_LEVEL_SUMS
    k = G[st.K]
    nw0 = G[st.NW0]
    seen = 0
    resting = 0
    own = np.zeros(2 * w * k if sums else 1, dtype=np.int64)
    best = np.full(2, -1, dtype=np.int64)
    for row in range(2 * w):
        s = row // w
        x = row - s * w
        lv = bk.LOFF + row * bk.LEVEL_COLS
        node = G[lv + bk.HEAD]
        prev = -1
        cnt = 0
        qsum = 0
        last_seq = 0
        while node >= 0:
            if N[node, bk.PRV] != prev:
                return 1, row
            if N[node, bk.QTY] <= 0:
                return 4, row
            if N[node, bk.ROW] != row:
                return 5, row
            oid = N[node, bk.OID]
            if oid <= 0 or oid >= IDX.size or IDX[oid] != node:
                return 6, oid
            if bitset and not has(LV, 0, 0, oid):
                return 6, oid
            if N[node, bk.SEQ] <= last_seq:
                return 7, row
            last_seq = N[node, bk.SEQ]
            slot = N[node, bk.SLOT]
            if sums and slot >= 0:
                own[row * k + slot] += N[node, bk.QTY]
                if G[G[st.OSLOT_OFF] + N[node, bk.OWN]] != slot:
                    return 17, row
            cnt += 1
            qsum += N[node, bk.QTY]
            prev = node
            node = N[node, bk.NXT]
        if G[lv + bk.TAIL] != prev:
            return 2, row
        if G[lv + bk.CNT] != cnt:
            return 3, row
        if sums and G[lv + bk.SUM] != qsum:
            return 8, row
        if cnt > 0 and better(best, s, x):
            best[s] = x
        if bitmap and has(B, nw0, s, x) != (cnt > 0):
            return 9, row
        seen += cnt
        resting += qsum
    if sums:
        os_off = G[st.OS_OFF]
        for j in range(own.size):
            if G[os_off + j] != own[j]:
                return 17, j // k
    free = 0
    node = G[st.FREE]
    while node >= 0 and free <= N.shape[0]:
        free += 1
        node = N[node, bk.NXT]
    live = popcount(LV) if bitset else np.count_nonzero(IDX >= 0)
    return check_totals(B, bitmap, G, best, G[st.BEST_MODE] != st.BEST_SCAN, seen, live, free,
                        N.shape[0], resting)


@njit(cache=True)
def check_packed(ND, L, IDX, LV, B, OS, S):
    """The packed layout's invariants (:mod:`lob.engines.compiled.kernel_v4`)."""
    w = S[st.WIDTH]
    sums = S[st.FOK_MODE] == st.FOK_LEVEL_SUMS
    ownsums = S[st.OWNSUMS] != 0
    k = S[st.K]
    osz = S[st.OSLOT_SIZE]
    cap = ND.shape[0]
    seen = 0
    resting = 0
    own = np.zeros(2 * w * k if ownsums else 1, dtype=np.int64)
    best = np.full(2, -1, dtype=np.int64)
    for row in range(2 * w):
        s = row & 1
        x = row >> 1
        node = L[row].head
        prev = -1
        cnt = 0
        qsum = 0
        while node >= 0 and cnt <= cap:
            if ND[node].prv != prev:
                return 1, row
            if ND[node].qty <= 0:
                return 4, row
            if ND[node].row != row:
                return 5, row
            oid = ND[node].oid
            if oid <= 0 or oid >= IDX.size or IDX[oid] != node or not has(LV, 0, 0, oid):
                return 6, oid
            if ownsums:
                slot = ND[node].slot
                owner = ND[node].own
                want = OS[owner] if owner < osz else -1
                if (slot if slot >= 0 else -1) != (want if want >= 0 else -1):
                    return 17, row
                if slot >= 0:
                    own[row * k + slot] += ND[node].qty
            cnt += 1
            qsum += ND[node].qty
            prev = node
            node = ND[node].nxt
        if L[row].tail != prev:
            return 2, row
        if sums and L[row].sum != qsum:
            return 8, row
        if cnt > 0 and better(best, s, x):
            best[s] = x
        if has(B, S[st.NW0], s, x) != (cnt > 0):
            return 9, row
        seen += cnt
        resting += qsum
    if ownsums:
        for j in range(own.size):
            if OS[osz + j] != own[j]:
                return 17, j // k
    free = 0
    node = S[st.FREE]
    while node >= 0 and free <= cap:
        free += 1
        node = ND[node].nxt
    return check_totals(B, True, S, best, True, seen, popcount(LV), free, cap, resting)


def walk_level(N: np.ndarray, G: np.ndarray, row: int) -> list[int]:
    """Node indices of one level of the pool layout, head to tail (views and tests)."""
    out = []
    node = int(G[bk.LOFF + row * bk.LEVEL_COLS + bk.HEAD])
    while node >= 0:
        out.append(node)
        node = int(N[node, bk.NXT])
    return out

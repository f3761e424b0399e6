"""Invariant checks of the compiled book (the ``check()`` of ``CompiledEngine``).

:func:`check_book` is compiled, so the fuzz suite can call it after every command; it
returns an error code (0 = fine, else a key of :data:`MESSAGES`) and where it failed.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from lob.engines.compiled.book import (
    BEST0,
    BEST_BITMAP,
    BEST_MODE,
    CNT,
    FOK_LEVEL_SUMS,
    FOK_MODE,
    FREE,
    HEAD,
    IDS,
    IDS_BITSET,
    LEVEL_COLS,
    LOFF,
    NLIVE,
    NW0,
    NW1,
    NXT,
    OID,
    OS_OFF,
    OSLOT_OFF,
    OWN,
    PRV,
    QIN,
    QREMOVED,
    QTRADED,
    QTY,
    ROW,
    SEQ,
    SLOT,
    SUM,
    TAIL,
    WIDTH,
    K,
)

MESSAGES = {
    1: "broken prev link in a level",
    2: "level tail does not match its last node",
    3: "level count does not match its orders",
    4: "resting order with qty <= 0",
    5: "node in the wrong level",
    6: "order missing from the id index",
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
def check_book(N, IDX, LV, B, G):
    w = G[WIDTH]
    bitmap = G[BEST_MODE] == BEST_BITMAP
    bitset = G[IDS] == IDS_BITSET
    sums = G[FOK_MODE] == FOK_LEVEL_SUMS
    k = G[K]
    os_off = G[OS_OFF]
    nw0 = G[NW0]
    nw1 = G[NW1]
    seen = 0
    resting = 0
    own = np.zeros(2 * w * k if sums else 1, dtype=np.int64)
    best = np.full(2, -1, dtype=np.int64)
    for row in range(2 * w):
        s = row // w
        x = row - s * w
        lv = LOFF + row * LEVEL_COLS
        node = G[lv + HEAD]
        prev = -1
        cnt = 0
        qsum = 0
        last_seq = 0
        while node >= 0:
            if N[node, PRV] != prev:
                return 1, row
            if N[node, QTY] <= 0:
                return 4, row
            if N[node, ROW] != row:
                return 5, row
            oid = N[node, OID]
            if oid <= 0 or oid >= IDX.size or IDX[oid] != node:
                return 6, oid
            if bitset and (LV[oid >> 6] >> np.uint64(oid & 63)) & np.uint64(1) == 0:
                return 6, oid
            if N[node, SEQ] <= last_seq:
                return 7, row
            last_seq = N[node, SEQ]
            slot = N[node, SLOT]
            if sums and slot >= 0:
                own[row * k + slot] += N[node, QTY]
                if G[G[OSLOT_OFF] + N[node, OWN]] != slot:
                    return 17, row
            cnt += 1
            qsum += N[node, QTY]
            prev = node
            node = N[node, NXT]
        if G[lv + TAIL] != prev:
            return 2, row
        if G[lv + CNT] != cnt:
            return 3, row
        if sums and G[lv + SUM] != qsum:
            return 8, row
        if cnt > 0 and (best[s] < 0 or (x > best[s] if s == 0 else x < best[s])):
            best[s] = x
        if bitmap:
            bit = (B[s * nw0 + (x >> 6)] >> np.uint64(x & 63)) & np.uint64(1)
            if (bit == 1) != (cnt > 0):
                return 9, row
        seen += cnt
        resting += qsum
    if bitmap:
        for s in range(2):
            for wd in range(nw0):
                bit = (B[2 * nw0 + s * nw1 + (wd >> 6)] >> np.uint64(wd & 63)) & np.uint64(1)
                if (bit == 1) != (B[s * nw0 + wd] != 0):
                    return 10, wd
            if G[BEST0 + s] != best[s]:
                return 11, s
    if best[0] >= 0 and best[1] >= 0 and best[0] >= best[1]:
        return 12, best[0]
    if sums:
        for j in range(own.size):
            if G[os_off + j] != own[j]:
                return 17, j // k
    if seen != G[NLIVE]:
        return 13, seen
    if bitset:  # as many live bits as resting orders (each of which has its bit, above)
        live = 0
        for wd in range(LV.size):
            v = LV[wd]
            while v != 0:
                v &= v - np.uint64(1)
                live += 1
        if live != seen:
            return 14, live
    elif np.count_nonzero(IDX >= 0) != seen:
        return 14, seen
    free = 0
    node = G[FREE]
    while node >= 0 and free <= N.shape[0]:
        free += 1
        node = N[node, NXT]
    if free + seen != N.shape[0]:
        return 15, free
    if G[QIN] != G[QTRADED] + G[QREMOVED] + resting:
        return 16, resting
    return 0, 0


def walk_level(N: np.ndarray, G: np.ndarray, row: int) -> list[int]:
    """Node indices of one level, head to tail (views and tests; not a hot path)."""
    out = []
    node = int(G[LOFF + row * LEVEL_COLS + HEAD])
    while node >= 0:
        out.append(node)
        node = int(N[node, NXT])
    return out

"""The two-level non-empty-level bitmap both compiled layouts keep (numba, inlined).

``B`` (uint64) holds ``B0``, two sides of ``nw0`` words (bit ``x`` of side ``s`` set iff level
``x`` of that side holds an order), then ``B1``, two sides of ``nw1`` summary words (bit ``w``
set iff word ``w`` of ``B0`` is non-zero), so finding the next non-empty level costs two word
scans even for a band of 1,000,000 ticks. Every function is inlined at numba IR level, so the
kernels pay no call; indices go through :func:`u` (as unsigned): numba then emits no
negative-index wraparound for them (a bounds-checked build still catches a negative one).
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import leading_zeros, trailing_zeros

ONE = np.uint64(1)
ALL = np.uint64(0xFFFFFFFFFFFFFFFF)


@njit(cache=True, _nrt=False, inline="always")
def u(i):
    """An index as unsigned: numba then emits no negative-index wraparound for it (every
    index here is >= 0; a bounds-checked build still catches one that is not)."""
    return np.uint64(i)


def words(width: int) -> tuple[int, int]:
    """(``nw0``, ``nw1``): bitmap words and summary words per side for a band of ``width``."""
    nw0 = (width + 63) // 64
    return nw0, (nw0 + 63) // 64


@njit(cache=True, _nrt=False, inline="always")
def bm_set(B, nw0, nw1, s, x):
    w = x >> 6
    i0 = s * nw0 + w
    if B[u(i0)] == 0:
        B[u(2 * nw0 + s * nw1 + (w >> 6))] |= ONE << np.uint64(w & 63)
    B[u(i0)] |= ONE << np.uint64(x & 63)


@njit(cache=True, _nrt=False, inline="always")
def bm_clear(B, nw0, nw1, s, x):
    w = x >> 6
    i0 = s * nw0 + w
    B[u(i0)] &= ~(ONE << np.uint64(x & 63))
    if B[u(i0)] == 0:
        B[u(2 * nw0 + s * nw1 + (w >> 6))] &= ~(ONE << np.uint64(w & 63))


@njit(cache=True, _nrt=False, inline="always")
def bm_next(B, nw0, nw1, s, x):
    """Lowest non-empty level >= x on side s, or -1."""
    b0 = s * nw0
    b1 = 2 * nw0 + s * nw1
    w = x >> 6
    if x < 0 or w >= nw0:
        return -1
    m = B[u(b0 + w)] & (ALL << np.uint64(x & 63))
    if m != 0:
        return (w << 6) + np.int64(trailing_zeros(m))
    j = w + 1
    if j >= nw0:
        return -1
    jw = j >> 6
    m = B[u(b1 + jw)] & (ALL << np.uint64(j & 63))
    while m == 0:
        jw += 1
        if jw >= nw1:
            return -1
        m = B[u(b1 + jw)]
    w = (jw << 6) + np.int64(trailing_zeros(m))
    return (w << 6) + np.int64(trailing_zeros(B[u(b0 + w)]))


@njit(cache=True, _nrt=False, inline="always")
def bm_prev(B, nw0, nw1, s, x):
    """Highest non-empty level <= x on side s, or -1."""
    if x < 0:
        return -1
    b0 = s * nw0
    b1 = 2 * nw0 + s * nw1
    w = x >> 6
    m = B[u(b0 + w)] & (ALL >> np.uint64(63 - (x & 63)))
    if m != 0:
        return (w << 6) + 63 - np.int64(leading_zeros(m))
    j = w - 1
    if j < 0:
        return -1
    jw = j >> 6
    m = B[u(b1 + jw)] & (ALL >> np.uint64(63 - (j & 63)))
    while m == 0:
        jw -= 1
        if jw < 0:
            return -1
        m = B[u(b1 + jw)]
    w = (jw << 6) + 63 - np.int64(leading_zeros(m))
    return (w << 6) + 63 - np.int64(leading_zeros(B[u(b0 + w)]))


@njit(cache=True, _nrt=False, inline="always")
def bm_after(B, nw0, nw1, s, x):
    """The next non-empty level after ``x`` in side ``s``'s priority order (bids downwards,
    asks upwards), or -1."""
    return bm_prev(B, nw0, nw1, 0, x - 1) if s == 0 else bm_next(B, nw0, nw1, 1, x + 1)


@njit(cache=True, _nrt=False)
def summary_error(B, nw0, nw1):
    """The first summary word whose bit disagrees with its bitmap word, or -1 (invariants)."""
    for s in range(2):
        for wd in range(nw0):
            bit = (B[2 * nw0 + s * nw1 + (wd >> 6)] >> np.uint64(wd & 63)) & ONE
            if (bit == 1) != (B[s * nw0 + wd] != 0):
                return wd
    return -1


@njit(cache=True, _nrt=False)
def has(B, nw0, s, x):
    """Whether the bit of level ``x`` on side ``s`` is set (invariants)."""
    return (B[s * nw0 + (x >> 6)] >> np.uint64(x & 63)) & ONE == 1


@njit(cache=True, _nrt=False)
def popcount(A):
    """Set bits of the uint64 array ``A`` (the live-id bitset's size, for invariants)."""
    n = 0
    for wd in range(A.size):
        v = A[wd]
        while v != 0:
            v &= v - ONE
            n += 1
    return n

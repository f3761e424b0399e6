"""The two seeds' random generators, exactly: orderbook-rs xorshift64 and C++ MT19937 + libc++.

* **xorshift64** (orderbook-rs benches): ``x ^= x << 13; x ^= x >> 7;
  x ^= x << 17`` on a 64-bit word; each ``next()`` returns the new state.
  ``range(lo, hi) = lo + next() % (hi - lo + 1)``. :func:`xs_next` is the numba kernel the
  scenario generators call inline; :class:`XorShift64` is the same thing for Python use.
* **MT19937** seeded the standard C++ way (``std::mt19937 gen(seed)``, i.e. ``init_genrand``),
  which is also how numpy's legacy ``RandomState(seed)`` seeds it. :func:`mt19937_raw` copies
  that state into numpy's public ``MT19937`` bit generator and returns raw 32-bit outputs.
* **libc++ ``uniform_int_distribution``** over a 32-bit engine (the C++ seed's bench.cpp): for
  ``[a, b]`` with ``r = b - a + 1`` it takes ``w`` = bits to hold ``r - 1``, and repeats
  ``u = next32() & (2**w - 1)`` until ``u < r``; a range of one value (``r == 1``) returns
  ``a`` without drawing, as libc++ does (a literal reading of the seed's recipe would draw
  once; the seed's
  stream never hits that case at seed 99, the tests pin it). :func:`libcxx_int` is that
  sampler over a pre-drawn buffer (numba), :func:`libcxx_ints` a Python reference used by the tests.
"""

from __future__ import annotations

import numba
import numpy as np

SEED_A5 = 0xA5A5_A5A5_A5A5_A5A5
SEED_C1 = 0xC1C1_C1C1_C1C1_C1C1
_M64 = (1 << 64) - 1

_S13 = np.uint64(13)
_S7 = np.uint64(7)
_S17 = np.uint64(17)


@numba.njit(cache=True, inline="always")
def xs_next(x: np.uint64) -> np.uint64:
    """One xorshift64 step (13, 7, 17); the returned state is also the output."""
    x = np.uint64(x)  # a Python int below 2**63 would otherwise be typed int64
    x ^= x << _S13
    x ^= x >> _S7
    x ^= x << _S17
    return x


@numba.njit(cache=True, inline="always")
def xs_range(x: np.uint64, lo: int, hi: int):
    """``(new_state, lo + next % (hi - lo + 1))``."""
    x = xs_next(x)
    return x, lo + np.int64(x % np.uint64(hi - lo + 1))


class XorShift64:
    """Python form of the orderbook-rs generator (slow; for tests and interactive use)."""

    def __init__(self, seed: int = SEED_A5):
        if not isinstance(seed, int) or not 0 < seed <= _M64:
            raise ValueError(f"xorshift64 seed must be a non-zero 64-bit int, got {seed!r}")
        self.state = seed

    def next(self) -> int:
        x = self.state
        x ^= (x << 13) & _M64
        x ^= x >> 7
        x ^= (x << 17) & _M64
        self.state = x
        return x

    def range(self, lo: int, hi: int) -> int:
        return lo + self.next() % (hi - lo + 1)


def mt19937_raw(seed: int, n: int, *, skip: int = 0) -> np.ndarray:
    """Raw 32-bit outputs ``skip .. skip+n-1`` of ``std::mt19937(seed)`` (as uint32)."""
    if not isinstance(seed, (int, np.integer)) or not 0 <= int(seed) < 2**32:
        raise ValueError(f"MT19937 seed must be an int in [0, 2**32), got {seed!r}")
    key, pos = np.random.RandomState(int(seed)).get_state()[1:3]  # init_genrand(seed)
    bg = np.random.MT19937()
    bg.state = {"bit_generator": "MT19937", "state": {"key": key, "pos": pos}}
    if skip:
        bg.random_raw(skip)
    return bg.random_raw(n).astype(np.uint32)


@numba.njit(cache=True, inline="always")
def libcxx_int(buf: np.ndarray, pos: int, a: int, b: int):
    """libc++ integer in ``[a, b]`` from raw outputs ``buf[pos:]``; returns ``(value, pos)``.

    ``pos == -1`` when the buffer ran out (the caller grows the buffer and retries).
    """
    if pos < 0:  # an earlier draw already ran out: stay out
        return 0, -1
    r = b - a + 1
    if r == 1:
        return a, pos  # libc++: `if (__rp == 1) return __p.a();` consumes nothing
    w = 0
    while (r - 1) >> w:
        w += 1
    mask = (1 << w) - 1
    n = buf.shape[0]
    while pos < n:
        u = np.int64(buf[pos]) & mask
        pos += 1
        if u < r:
            return a + u, pos
    return 0, -1


def libcxx_ints(raw, bounds: list[tuple[int, int]]) -> list[int]:
    """Plain-Python libc++ sampler: one integer per ``(a, b)`` in ``bounds`` (tests, docs)."""
    it = iter(int(v) for v in raw)
    out = []
    for a, b in bounds:
        r = b - a + 1
        if r == 1:
            out.append(a)
            continue
        mask = (1 << (r - 1).bit_length()) - 1
        while (u := next(it) & mask) >= r:
            pass
        out.append(a + u)
    return out

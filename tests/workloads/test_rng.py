"""The seeds' generators: MT19937 seeded the C++ way, the libc++ sampler, xorshift64."""

import numpy as np
import pytest

from lob.workloads.rng import (
    SEED_A5,
    XorShift64,
    libcxx_int,
    libcxx_ints,
    mt19937_raw,
    xs_next,
    xs_range,
)

MT99 = [2887414401, 3103284259, 2096280761]  # std::mt19937(99)(), the C++ seed's generator


def test_mt19937_seeded_the_cpp_way():
    assert mt19937_raw(99, 3).tolist() == MT99


def test_mt19937_matches_numpy_legacy_seeding_and_skip():
    legacy = np.random.RandomState(99).randint(0, 2**32, size=10, dtype=np.uint64)
    assert mt19937_raw(99, 10).tolist() == legacy.tolist()
    assert mt19937_raw(99, 4, skip=6).tolist() == legacy[6:].tolist()


@pytest.mark.parametrize("seed", [-1, 2**32, 1.5])
def test_mt19937_bad_seed(seed):
    with pytest.raises(ValueError, match="seed"):
        mt19937_raw(seed, 1)


def test_libcxx_sampler_by_hand():
    raw = np.array([0b1111, 0b0101, 7, 0xFFFF_FFF0, 12], dtype=np.uint32)
    # [0, 9]: w = 4, 15 rejected, then 5; [0, 3]: w = 2, 7 & 3 = 3 (a power of two never
    # rejects); [1, 1] draws nothing; [1, 99]: w = 7, 0x70 = 112 rejected, 12 -> 13
    assert libcxx_ints(raw, [(0, 9), (0, 3), (1, 1), (1, 99)]) == [5, 3, 1, 13]
    v, pos = libcxx_int(raw, 0, 0, 9)
    assert (v, pos) == (5, 2)
    assert libcxx_int(raw, 2, 0, 3) == (3, 3)
    assert libcxx_int(raw, 3, 1, 1) == (1, 3)
    assert libcxx_int(raw, 3, 1, 99) == (13, 5)
    assert libcxx_int(raw, 5, 1, 99)[1] == -1  # ran out
    assert libcxx_int(raw, -1, 0, 9) == (0, -1)  # and stays out (no wrap to buf[-1])


def test_libcxx_numba_equals_python_sampler():
    rng = np.random.default_rng(7)
    bounds = [(int(a), int(a + s)) for a, s in zip(rng.integers(0, 50, 500),
                                                    rng.integers(0, 3000, 500), strict=True)]
    raw = mt19937_raw(5, 20_000)
    expect = libcxx_ints(raw, bounds)
    pos, got = 0, []
    for a, b in bounds:
        v, pos = libcxx_int(raw, pos, a, b)
        got.append(v)
    assert got == expect


def _xs(x):
    m = (1 << 64) - 1
    x ^= (x << 13) & m
    x ^= x >> 7
    x ^= (x << 17) & m
    return x


def test_xorshift64_python_and_numba_agree():
    r = XorShift64()
    x = SEED_A5
    xn = np.uint64(SEED_A5)
    for _ in range(1000):
        x = _xs(x)
        xn = xs_next(np.uint64(xn))  # kernels keep the state uint64; the dispatcher returns int
        assert r.next() == x == int(xn)
    xn, v = xs_range(np.uint64(SEED_A5), 99, 101)
    assert v == 99 + _xs(SEED_A5) % 3


def test_xorshift64_rejects_zero_seed():
    with pytest.raises(ValueError, match="seed"):
        XorShift64(0)

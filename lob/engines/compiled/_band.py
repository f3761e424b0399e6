"""The compiled book's memory per band, without importing numba (so that a band too wide is
refused at once, before numba and the kernels load; see :mod:`lob.engines.bands`)."""

from __future__ import annotations

from functools import lru_cache

from lob.engines.bands import band_memory_limit, check_band

OWNER_MAP_SIZE = 4096  # owners 1..4095 can get a level_sums slot; larger ids use a walk
OWNER_TABLE_ENTRIES = 1 << 21  # cap on levels x owner slots (16 MB) for level_sums
# mirrors of lob.engines.compiled.book (checked equal by tests/semantics/test_bounds.py)
LOFF, LEVEL_COLS = 32, 4


def owner_slots(width: int, fok: str) -> int:
    """Owner slots per level of the level_sums table (0 without level_sums)."""
    return max(1, min(16, OWNER_TABLE_ENTRIES // (2 * width))) if fok == "level_sums" else 0


def band_bytes(width: int, fok: str) -> int:
    """Bytes the compiled book allocates for a band of ``width`` ticks: the state array G
    (4 cells per level and side, plus the level_sums tables) and the level bitmap."""
    k = owner_slots(width, fok)
    g = LOFF + 2 * width * LEVEL_COLS + 2 * width * k + (OWNER_MAP_SIZE if k else 0)
    nw0 = (width + 63) // 64
    return 8 * (g + 2 * nw0 + 2 * ((nw0 + 63) // 64))


def max_band_width(fok: str) -> int:
    """The widest band whose arrays fit the band memory limit (a bisection on the width)."""
    return _max_band_width(fok, band_memory_limit())


@lru_cache(maxsize=64)
def _max_band_width(fok: str, limit: int) -> int:
    lo, hi = 1, limit // 64 + 1  # at least 64 bytes per price
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if band_bytes(mid, fok) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return lo


def check(best: str, fok: str, config) -> int:
    """Refuse ``config``'s band if too wide for the compiled book; returns the widest band."""
    limit = max_band_width(fok)
    check_band(f"compiled[{best},{fok}]", config, band_bytes(config.width, fok), limit)
    return limit

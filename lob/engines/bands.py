"""Band checks: an engine whose memory grows with the price band refuses a band too wide
for it at creation, before it allocates anything, with an error naming the band, the engine
and the memory it would need.

The ladder engines (Python and numba) keep arrays with one entry per price of the band
(level heads, occupancy, per-level sums), so their memory is ``width * bytes per price``
whatever the book holds: a band of 10**8 ticks costs the Python ``v2`` ~3 GB and 9 s to
build, ``v2@numba`` 6.4 GB. Such an engine sets ``max_band_width`` (the widest band it
accepts) and calls :func:`check_band` first thing. The limit is a memory budget for those
arrays, :func:`band_memory_limit`: 1 GiB (a band of ~16-60 million ticks, by engine), or
the environment variable ``LOB_MAX_BAND_BYTES``.
``reference`` keeps only non-empty levels, so its memory does not depend on the band and
it accepts any band (``max_band_width = None``); the ``sorted`` best-price finder of the
Python ladder does not allocate per price either, but the ladder's level store does, so
every ladder combination is bounded.
"""

from __future__ import annotations

import os

from lob.semantics import BookConfig

DEFAULT_BAND_BYTES = 1 << 30  # 1 GiB of per-price arrays
ENV = "LOB_MAX_BAND_BYTES"


class BandTooWide(ValueError):
    """A price band wider than an engine can hold within the band memory limit."""


def band_memory_limit() -> int:
    """Bytes of per-price arrays an engine may allocate (``LOB_MAX_BAND_BYTES`` overrides)."""
    v = os.environ.get(ENV)
    if not v:
        return DEFAULT_BAND_BYTES
    try:
        n = int(float(v))
    except ValueError:
        raise ValueError(f"{ENV}={v!r} is not a number of bytes") from None
    if n <= 0:
        raise ValueError(f"{ENV}={v!r} must be a positive number of bytes")
    return n


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if n < 1024 or unit == "EiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f}"


def max_width(bytes_per_price: float, fixed: int = 0) -> int:
    """The widest band whose per-price arrays fit the band memory limit."""
    return max(1, int((band_memory_limit() - fixed) // bytes_per_price))


def check_band(engine: str, config: BookConfig, need_bytes: int, limit_width: int) -> None:
    """Raise :class:`BandTooWide` if ``config``'s band is wider than ``limit_width``.

    ``need_bytes`` is what the engine would allocate for that band (for the message).
    """
    w = config.width
    if w <= limit_width:
        return
    raise BandTooWide(
        f"engine {engine} cannot hold the band {config.min_price:,}..{config.max_price:,} "
        f"(width {w:,} ticks): its per-price arrays would need {_size(need_bytes)}, over the "
        f"band memory limit of {_size(band_memory_limit())} (width <= {limit_width:,} for "
        f"this engine). Use a narrower band, or `reference` (memory independent of the "
        f"band), or raise the limit with {ENV}=<bytes>.")

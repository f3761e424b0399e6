"""The C++ binary-market engine's bench streams (seed 001), rebuilt exactly
from the engine's bench.cpp.

``std::mt19937`` seeded with 99, integers drawn with libc++'s ``uniform_int_distribution``.
For each of N commands: kind in [0, 9]; if kind < 9 or nothing was submitted yet it is a
submit: type in [0, 3] (LIMIT, IOC, FOK, POST_ONLY; the limit-only stream skips this
draw), side in [0, 1] (1 = YES), price in [1, 99], qty in [1, 20], owner in [1, 4];
otherwise a cancel of an id in [1, submits so far]. A YES bid at p is a BUY at p; a NO bid
at q is a SELL at 100 - q. Every submit is valid, so submits so far = ids issued so far.
"""

from __future__ import annotations

import numba
import numpy as np

from lob.semantics import COMMAND_DTYPE, BookConfig, Kind, OrderType, Side, StpMode
from lob.workloads.rng import libcxx_int, mt19937_raw

CONFIG = BookConfig(1, 99, StpMode.CANCEL_MAKER)
N_DEFAULT = 2_000_000


@numba.njit(cache=True)
def _fill(out, raw, limit_only):
    """Fill ``out`` from raw MT outputs; returns the raw outputs used, or -1 if too few."""
    pos = 0
    subs = 0
    for i in range(out.shape[0]):
        kind, pos = libcxx_int(raw, pos, 0, 9)
        if pos < 0:
            return -1
        row = out[i]
        row["timed"] = True
        if kind < 9 or subs == 0:
            otype = 0
            if not limit_only:
                otype, pos = libcxx_int(raw, pos, 0, 3)
            side, pos = libcxx_int(raw, pos, 0, 1)
            price, pos = libcxx_int(raw, pos, 1, 99)
            qty, pos = libcxx_int(raw, pos, 1, 20)
            owner, pos = libcxx_int(raw, pos, 1, 4)
            if pos < 0:
                return -1
            subs += 1
            row["kind"] = 0
            row["otype"] = otype
            row["side"] = 0 if side == 1 else 1  # YES bid = BUY at p; NO bid = SELL at 100 - p
            row["price"] = price if side == 1 else 100 - price
            row["qty"] = qty
            row["owner"] = owner
        else:
            oid, pos = libcxx_int(raw, pos, 1, subs)
            if pos < 0:
                return -1
            row["kind"] = 1
            row["id"] = oid
    return pos


def generate(n: int, seed: int, limit_only: bool) -> np.ndarray:
    """The first ``n`` commands of the stream (the prefix of the full stream, for any n)."""
    per_cmd = 7 if limit_only else 8  # mean raw draws per command is ~6.1 / ~7.05
    budget = n * per_cmd + 1024
    while True:
        out = np.zeros(n, dtype=COMMAND_DTYPE)
        raw = mt19937_raw(seed, budget)
        if _fill(out, raw, limit_only) >= 0:
            return out
        budget *= 2


def _build(limit_only: bool):
    def build(*, scale: float, seed: int, n: int):
        return generate(max(1, round(n * scale)), seed, limit_only), CONFIG
    return build


def _build_fok_depth(*, scale: float, seed: int, depth: int, n: int):
    """``depth`` resting asks (untimed), then ``n`` timed FOK buys that can never fill."""
    rng = np.random.Generator(np.random.MT19937(seed))
    d = max(1, round(depth * scale))
    out = np.zeros(d + n, dtype=COMMAND_DTYPE)
    asks = out[:d]
    asks["kind"], asks["otype"], asks["side"] = Kind.SUBMIT, OrderType.LIMIT, Side.SELL
    asks["price"] = rng.integers(50, 100, size=d)
    asks["qty"] = rng.integers(1, 21, size=d)
    asks["owner"] = rng.integers(1, 5, size=d)
    probes = out[d:]
    probes["kind"], probes["otype"], probes["side"] = Kind.SUBMIT, OrderType.FOK, Side.BUY
    probes["price"] = 99
    probes["qty"] = int(asks["qty"].sum()) + 1  # more than the whole book: never fillable
    probes["owner"] = rng.integers(1, 5, size=n)
    probes["timed"] = True
    return out, CONFIG


_PROV = "seed 001 (the C++ binary-market engine's repository, bench.cpp)"

WORKLOADS = {
    "cpp_comprehensive": dict(
        build=_build(False),
        defaults={"seed": 99, "n": N_DEFAULT},
        description=(
            "The C++ seed's comprehensive bench: 2M commands, ~90% submits of all four types "
            "(LIMIT, IOC, FOK, POST_ONLY in equal shares) and ~10% cancels of a uniform id over "
            "every id issued so far, prices 1..99, qty 1..20, four owners, STP cancel-maker. "
            "What it really exercises: a deep book (tens of thousands of resting orders over "
            "99 ticks) where a quarter of submits are FOKs whose availability check scans the "
            "crossing side; most cancels miss (ids already filled or cancelled)."),
        provenance=_PROV + "; published counters filled=356233 partial=71154 "
                           "accepted=576805 cancelled=801548 notfound=194260",
    ),
    "cpp_limit_only": dict(
        build=_build(True),
        defaults={"seed": 99, "n": N_DEFAULT},
        description=(
            "The C++ seed's first (limit-only) bench: the same stream without the type draw, "
            "every submit a GTC limit. What it really exercises: resting and crossing on a "
            "99-tick book that grows deep; cancels mostly miss."),
        provenance=_PROV + "; published sink 37,115,352 over three passes "
                           "(12,371,784 per pass)",
    ),
    "fok_depth": dict(
        build=_build_fok_depth,
        defaults={"seed": 7, "depth": 100_000, "n": 2_000},
        description=(
            "lob's probe of the FOK check against book depth (the C++ seed's next target): "
            "``depth`` resting asks at 50..99 from four owners (untimed), then ``n`` timed FOK "
            "buys at 99 for one lot more than the whole book. Every probe is cancelled and "
            "the book never changes, so each timed op is exactly one worst-case availability "
            "check: ``full`` and ``early_exit`` walk every resting order, ``level_sums`` walks "
            "the 50 levels. ``scale`` scales the depth."),
        provenance="lob design after seed 001's 'per-level quantity sums' next target",
    ),
}

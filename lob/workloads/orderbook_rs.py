"""The orderbook-rs HDR bench scenarios (seed 000) and its allocation-budget stream.

Every draw order, seed, pre-load, warmup and count follows the orderbook-rs HDR benches
(benches/order_book/*_hdr.rs). A standard
GTC submit draws price U{99..101}, qty U{1..100}, side (``next % 2 == 0`` is BUY) and
owner (``next % 4 + 1``) and is a LIMIT order (crossing limits do match). Pre-loads,
refills and warmups carry ``timed = False``. Owners that the spec does not draw are fixed:
makers of pre-loaded books are owner 1, takers owner 2 (stp_sweep: the self-trading owner is
1 and the eight other makers of a level are owners 2..9). Market orders carry price 0.

``scale`` multiplies every published count (warmup, measured ops, bursts) but not the
shape of a pre-loaded book or the size of one burst, which define what one op does.
"""

from __future__ import annotations

import numba
import numpy as np

from lob.semantics import COMMAND_DTYPE, BookConfig, Kind, OrderType, Scope, Side, StpMode
from lob.workloads.rng import SEED_A5, SEED_C1, xs_next, xs_range

BAND = BookConfig(1, 1024, StpMode.NONE)
BAND_STP = BookConfig(1, 1024, StpMode.CANCEL_MAKER)

SUBMIT, CANCEL, MASS = int(Kind.SUBMIT), int(Kind.CANCEL), int(Kind.MASS_CANCEL)
LIMIT, MARKET, NOTIONAL = int(OrderType.LIMIT), int(OrderType.MARKET), int(OrderType.NOTIONAL)
BUY, SELL = int(Side.BUY), int(Side.SELL)
ALL = int(Scope.ALL)
_TWO = np.uint64(2)
_FOUR = np.uint64(4)
_HUNDRED = np.uint64(100)


@numba.njit(cache=True, inline="always")
def _put(out, i, kind, otype, side, timed, owner, price, qty, oid):
    r = out[i]
    r["kind"] = kind
    r["otype"] = otype
    r["side"] = side
    r["timed"] = timed
    r["owner"] = owner
    r["price"] = price
    r["qty"] = qty
    r["id"] = oid


@numba.njit(cache=True, inline="always")
def _std_submit(out, i, x, timed):
    """A standard GTC submit: price, qty, side, owner, in that draw order."""
    x, price = xs_range(x, 99, 101)
    x, qty = xs_range(x, 1, 100)
    x = xs_next(x)
    side = BUY if x % _TWO == 0 else SELL
    x = xs_next(x)
    owner = np.int64(x % _FOUR) + 1
    _put(out, i, SUBMIT, LIMIT, side, timed, owner, price, qty, 0)
    return x


@numba.njit(cache=True)
def _add_only(out, x, warmup):
    for i in range(out.shape[0]):
        x = _std_submit(out, i, x, i >= warmup)


@numba.njit(cache=True)
def _cancel_only(out, x, n):
    for i in range(n):
        x = _std_submit(out, i, x, False)
    for i in range(n):
        _put(out, n + i, CANCEL, 0, 0, True, 0, 0, 0, i + 1)


@numba.njit(cache=True)
def _walk(out, x, notional):
    """50 ask levels 100..149 x 100 orders qty U{1..10}, then market (or notional) buys."""
    i = 0
    for level in range(50):
        for _ in range(100):
            x, qty = xs_range(x, 1, 10)
            _put(out, i, SUBMIT, LIMIT, SELL, False, 1, 100 + level, qty, 0)
            i += 1
    while i < out.shape[0]:
        if notional:
            x, amount = xs_range(x, 500, 2000)
            _put(out, i, SUBMIT, NOTIONAL, BUY, True, 2, 0, amount, 0)
        else:
            x, qty = xs_range(x, 5, 20)
            _put(out, i, SUBMIT, MARKET, BUY, True, 2, 0, qty, 0)
        i += 1


@numba.njit(cache=True)
def _mixed(out, x, warmup):
    next_id = 1  # the id the next submit or market order will take
    for i in range(out.shape[0]):
        timed = i >= warmup
        x = xs_next(x)
        v = x % _HUNDRED
        if v < 70:
            x = _std_submit(out, i, x, timed)
            next_id += 1
        elif v < 90:
            oid = 0  # no id issued yet: the op does nothing (a cancel that cannot hit)
            if next_id > 1:
                x, oid = xs_range(x, 1, next_id - 1)
            _put(out, i, CANCEL, 0, 0, timed, 0, 0, 0, oid)
        else:
            next_id += 1
            x, qty = xs_range(x, 1, 10)
            x = xs_next(x)
            side = BUY if x % _TWO == 0 else SELL
            x = xs_next(x)
            owner = np.int64(x % _FOUR) + 1
            _put(out, i, SUBMIT, MARKET, side, timed, owner, 0, qty, 0)


@numba.njit(cache=True)
def _thin(out, x, probes):
    i = 0
    for p in range(probes):
        if p % 5 == 0:
            for _ in range(3):
                x, price = xs_range(x, 99, 101)
                x, qty = xs_range(x, 1, 5)
                _put(out, i, SUBMIT, LIMIT, SELL, False, 1, price, qty, 0)
                i += 1
        x, qty = xs_range(x, 1, 20)
        _put(out, i, SUBMIT, MARKET, BUY, True, 2, 0, qty, 0)
        i += 1


@numba.njit(cache=True)
def _mass(out, x, bursts, burst_size):
    i = 0
    for _ in range(bursts):
        for _ in range(burst_size):
            x = _std_submit(out, i, x, False)
            i += 1
        _put(out, i, MASS, ALL, 0, True, 0, 0, 0, 0)
        i += 1


@numba.njit(cache=True)
def _stp(out, x, measured):
    i = 0
    for level in range(50):
        x, qty = xs_range(x, 1, 5)
        _put(out, i, SUBMIT, LIMIT, SELL, False, 1, 100 + level, qty, 0)
        i += 1
        for k in range(8):
            x, qty = xs_range(x, 1, 10)
            _put(out, i, SUBMIT, LIMIT, SELL, False, 2 + k, 100 + level, qty, 0)
            i += 1
    for _ in range(measured):
        _put(out, i, SUBMIT, LIMIT, SELL, False, 1, 100, 1, 0)  # fresh own maker, no draw
        x, qty = xs_range(x, 5, 20)
        _put(out, i + 1, SUBMIT, MARKET, BUY, True, 1, 0, qty, 0)
        i += 2


def _n(v: int, scale: float) -> int:
    """A published count scaled; a non-zero count never scales down to zero."""
    return 0 if v == 0 else max(1, round(v * scale))


def _new(n: int) -> np.ndarray:
    return np.zeros(n, dtype=COMMAND_DTYPE)


def build_add_only(*, scale, seed, warmup, measured):
    w, m = _n(warmup, scale), _n(measured, scale)
    out = _new(w + m)
    _add_only(out, np.uint64(seed), w)
    return out, BAND


def build_cancel_only(*, scale, seed, measured):
    n = _n(measured, scale)
    out = _new(2 * n)
    _cancel_only(out, np.uint64(seed), n)
    return out, BAND


def _build_walk(notional: bool):
    def build(*, scale, seed, measured):
        out = _new(5000 + _n(measured, scale))
        _walk(out, np.uint64(seed), notional)
        return out, BAND
    return build


def build_mixed(*, scale, seed, warmup, measured):
    w, m = _n(warmup, scale), _n(measured, scale)
    out = _new(w + m)
    _mixed(out, np.uint64(seed), w)
    return out, BAND


def build_thin(*, scale, seed, measured):
    p = _n(measured, scale)
    out = _new(p + 3 * ((p + 4) // 5))
    _thin(out, np.uint64(seed), p)
    return out, BAND


def build_mass(*, scale, seed, bursts, burst_size):
    if burst_size < 0:
        raise ValueError(f"burst_size must be >= 0, got {burst_size}")
    b = _n(bursts, scale)
    out = _new(b * (burst_size + 1))
    _mass(out, np.uint64(seed), b, burst_size)
    return out, BAND


def build_stp(*, scale, seed, measured):
    m = _n(measured, scale)
    out = _new(450 + 2 * m)
    _stp(out, np.uint64(seed), m)
    return out, BAND_STP


def build_alloc_budget(*, scale, seed, warmup, measured):
    """No random draws: 50 asks at 100 qty 10, then ops cycling ``j % 5`` (j counts warmup too).

    0-2: buy GTC at 100 + bucket, qty 1 + j % 10; 3: cancel the previous id; 4: market sell 1.
    """
    w, m = _n(warmup, scale), _n(measured, scale)
    out = _new(50 + w + m)
    out["timed"][: 50 + w] = False
    out["timed"][50 + w:] = True
    out["side"][:50], out["owner"][:50], out["price"][:50], out["qty"][:50] = SELL, 1, 100, 10
    j = np.arange(w + m)
    b = j % 5
    ops = out[50:]
    ops["owner"] = 2
    buy = b <= 2
    ops["price"][buy] = 100 + b[buy]
    ops["qty"][buy] = 1 + j[buy] % 10
    sub = b != 3  # every op but the cancel takes an id
    ids = 50 + np.cumsum(sub)  # id issued by op j (or the last one issued before it)
    ops["kind"][~sub] = CANCEL
    ops["id"][~sub] = ids[~sub]
    ops["owner"][~sub] = 0
    mk = b == 4
    ops["otype"][mk], ops["side"][mk], ops["qty"][mk] = MARKET, SELL, 1
    return out, BAND


_PROV = "seed 000 (orderbook-rs 0.12.0, benches/order_book/*_hdr.rs)"
_STD = ("standard GTC submits (price U{99..101}, qty U{1..100}, random side, owners 1..4)")

WORKLOADS = {
    "add_only": dict(
        build=build_add_only, defaults={"seed": SEED_A5, "warmup": 200_000, "measured": 1_000_000},
        description=(
            f"200k warmup + 1M timed {_STD}. Models a book that only grows; what it really "
            "exercises: on a 3-tick band half the submits cross, so it is a steady mix of "
            "resting inserts and small matches against ~3 hot levels."),
        provenance=_PROV + " (add_only_hdr)"),
    "cancel_only": dict(
        build=build_cancel_only, defaults={"seed": SEED_A5, "measured": 1_000_000},
        description=(
            f"1M untimed {_STD} (ids 1..1M), then 1M timed cancels of ids 1..1M in order. "
            "Models cancelling a deep book; what it really exercises: most pre-loaded orders "
            "already matched, so most cancels miss (estimate ~89%)."),
        provenance=_PROV + " (cancel_only_hdr)"),
    "aggressive_walk": dict(
        build=_build_walk(False), defaults={"seed": SEED_A5, "measured": 100_000},
        description=(
            "Untimed pre-load of 50 ask levels (100..149) x 100 orders qty U{1..10} by one maker, "
            "then 100k timed market buys qty U{5..20} by another owner. Models level-walking "
            "sweeps; what it really exercises: ~27.5k lots are gone after ~2.2k buys, so most "
            "measured ops meet an empty ask side."),
        provenance=_PROV + " (aggressive_walk_hdr)"),
    "notional_walk": dict(
        build=_build_walk(True), defaults={"seed": SEED_C1, "measured": 100_000},
        description=(
            "Same book shape as aggressive_walk (seed 0xC1C1..), then 100k timed market buys by "
            "quote amount U{500..2000}. What it really exercises: the ask side empties after "
            "~2.9k buys; after that every op meets an empty book."),
        provenance=_PROV + " (notional_walk_hdr)"),
    "mixed_70_20_10": dict(
        build=build_mixed, defaults={"seed": SEED_A5, "warmup": 200_000, "measured": 1_000_000},
        description=(
            f"200k warmup + 1M timed ops: 70% {_STD}, 20% cancels of a uniform earlier id, 10% "
            "market orders qty U{1..10} with random side and owner. The 'realistic' headline; "
            "what it really exercises: a shallow 3-tick book where most cancels miss."),
        provenance=_PROV + " (mixed_70_20_10_hdr; also the alloc_count stream)"),
    "thin_book_sweep": dict(
        build=build_thin, defaults={"seed": SEED_A5, "measured": 200_000},
        description=(
            "Every 5th op an untimed refill of 3 asks (price U{99..101}, qty U{1..5}); 200k "
            "timed market buys qty U{1..20}. Models sweeping a thin book; what it really "
            "exercises: a probe eats the ~9 lots refilled, so most probes meet an empty side."),
        provenance=_PROV + " (thin_book_sweep_hdr)"),
    "mass_cancel_burst": dict(
        build=build_mass, defaults={"seed": SEED_A5, "bursts": 500, "burst_size": 10_000},
        description=(
            f"500 times: 10,000 untimed {_STD}, then one timed cancel-all (one sample per "
            "burst). Models draining a 10k-order book; what it really exercises: the submits "
            "cross each other, so only ~1.1k orders rest before each cancel-all."),
        provenance=_PROV + " (mass_cancel_burst_hdr)"),
    "stp_sweep": dict(
        build=build_stp, defaults={"seed": SEED_A5, "measured": 100_000},
        description=(
            "STP cancel-maker. Pre-load 50 ask levels 100..149, each 1 own ask qty U{1..5} + 8 "
            "other makers' asks qty U{1..10}; before each timed op an untimed own 1-lot ask at "
            "100; timed: market buy by the own owner qty U{5..20}. Models self-trade "
            "prevention on a sweep; every op removes at least the fresh own maker."),
        provenance=_PROV + " (stp_sweep_hdr)"),
    "alloc_budget": dict(
        build=build_alloc_budget, defaults={"seed": 0, "warmup": 1_000, "measured": 10_000},
        description=(
            "The allocation-budget test stream: 50 asks at 100 qty 10, then 1k warmup + 10k "
            "timed ops cycling j % 5: buy GTC at 100 + (j % 5) qty 1 + j % 10 (buckets 0-2), "
            "cancel the previous id (3), market sell qty 1 (4). No random draws (seed unused); "
            "j counts warmup ops too, an assumption where the test's code is not public."),
        provenance=_PROV + " (tests/alloc_budget.rs)"),
}

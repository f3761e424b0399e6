"""lob's own lobster-style streams (seed 003's code is not public: these are lob designs).

One generator, four settings. Every op: a market order (share ``market``; random side) or a
cancel or a limit submit. Cancels pick a uniform id from the generator's own set of ids it
believes live (ids of limits it placed and has not cancelled; some have filled since, so
a cancel can miss). The cancel probability ``min(0.95, 0.5 * live / target)`` pulls the
live count back to ``target``, so the book depth is stationary instead of drifting. A limit
sits ``d`` ticks behind a mid price (geometric, mean ``offset``), except a share
``aggressive`` that is placed 0..4 ticks through the mid and usually crosses. The mid does
a slow random walk, reflected inside the middle half of the band. Optional bursts switch
the op mix for a while (cancel bursts cancel every op, sweep bursts send large market
orders). Random numbers come from ``numpy.random.Generator(PCG64(seed))``, drawn in fixed
per-op arrays, so the stream is a pure function of (parameters, seed).
"""

from __future__ import annotations

import numba
import numpy as np

from lob.semantics import COMMAND_DTYPE, BookConfig, Kind, OrderType, StpMode

SUBMIT, CANCEL = int(Kind.SUBMIT), int(Kind.CANCEL)
LIMIT, MARKET = int(OrderType.LIMIT), int(OrderType.MARKET)


@numba.njit(cache=True)
def _gen(out, lo, hi, preload, target, market, aggressive, u, side, off, qty, mqty, step,
         regime):
    live = np.empty(out.shape[0], dtype=np.int64)  # ids believed resting (swap-remove set)
    nlive = 0
    next_id = 1
    mid = (lo + hi) // 2
    mlo, mhi = lo + (hi - lo) // 4, hi - (hi - lo) // 4
    for i in range(out.shape[0]):
        r = out[i]
        r["timed"] = i >= preload
        r["owner"] = 1 + (i * 7 + qty[i]) % 8
        mid = min(mhi, max(mlo, mid + step[i]))
        reg = regime[i] if i >= preload else 0
        pc = min(0.95, 0.5 * nlive / target)
        if i >= preload and (reg == 2 or u[i, 0] < market):
            r["kind"] = SUBMIT
            r["otype"] = MARKET
            r["side"] = side[i]
            r["qty"] = mqty[i] * (10 if reg == 2 else 1)
            next_id += 1
        elif i >= preload and nlive > 0 and (reg == 1 or u[i, 1] < pc):
            k = int(u[i, 2] * nlive)
            r["kind"] = CANCEL
            r["id"] = live[k]
            nlive -= 1
            live[k] = live[nlive]
        else:
            d = off[i]
            if i >= preload and u[i, 3] < aggressive:
                d = -int(u[i, 4] * 5)
            price = mid - d if side[i] == 0 else mid + d
            r["kind"] = SUBMIT
            r["otype"] = LIMIT
            r["side"] = side[i]
            r["price"] = min(hi, max(lo, price))
            r["qty"] = qty[i]
            live[nlive] = next_id
            nlive += 1
            next_id += 1


def generate(*, n: int, seed: int, lo: int, hi: int, preload: int, target: int, market: float,
             aggressive: float, offset: float, burst_every: int = 0) -> np.ndarray:
    """The stream of ``preload`` untimed passive limits followed by ``n`` timed ops."""
    total = preload + n
    g = np.random.Generator(np.random.PCG64(seed))
    u = g.random((total, 5))
    side = g.integers(0, 2, total, dtype=np.int64)
    off = g.geometric(1.0 / offset, total).astype(np.int64)  # >= 1: passive by default
    qty = g.integers(1, 101, total, dtype=np.int64)
    mqty = g.integers(1, 101, total, dtype=np.int64)
    step = np.where(g.random(total) < 0.02, g.choice(np.array([-1, 1]), total), 0)
    regime = np.zeros(total, dtype=np.int64)
    if burst_every:
        # a burst of 200..2000 ops starts on average every burst_every ops; half cancel, half sweep
        starts = np.flatnonzero(g.random(total) < 1.0 / burst_every)
        lens = g.integers(200, 2001, len(starts))
        kinds = g.integers(1, 3, len(starts))
        for s, ln, k in zip(starts.tolist(), lens.tolist(), kinds.tolist(), strict=True):
            regime[s:s + (ln if k == 1 else ln // 20)] = k  # sweeps: fewer, larger orders
    out = np.zeros(total, dtype=COMMAND_DTYPE)
    _gen(out, lo, hi, preload, target, market, aggressive, u, side, off, qty, mqty, step.astype(
        np.int64), regime)
    return out


def _builder(lo: int, hi: int, **fixed):
    config = BookConfig(lo, hi, StpMode.NONE)

    def build(*, scale, seed, n, preload, target):
        if target < 1:
            raise ValueError(f"target must be >= 1, got {target}")
        pre = round(preload * scale)
        cmds = generate(n=max(1, round(n * scale)), seed=seed, lo=lo, hi=hi, preload=pre,
                        target=max(1, round(target * scale)) if pre else target, **fixed)
        return cmds, config
    return build


_PROV = ("lob design after seed 003 (lobster: 1M-command replay, seed 42, narrow book ~5-9k "
         "resting orders over ~1.2k ticks; stress workloads for footprint, scan length and "
         "stream shape). lobster's own generator is not public; this is not its stream.")

WORKLOADS = {
    "lobster_replay": dict(
        build=_builder(1, 4096, market=0.06, aggressive=0.04, offset=70.0),
        defaults={"seed": 42, "n": 1_000_000, "preload": 0, "target": 7_000},
        description=(
            "The narrow replay: 1M commands from an empty book, ~55% limits resting around a "
            "slowly walking mid (geometric offset, mean 70 ticks), ~39% cancels of orders the "
            "sender believes live, 6% market orders; the live count is pulled towards 7k. "
            "Models the best case of an array ladder: a dense book of a few thousand orders "
            "over ~1.2k ticks, where the best price is almost always near the last one."),
        provenance=_PROV),
    "lobster_deep": dict(
        build=_builder(1, 16384, market=0.06, aggressive=0.04, offset=1000.0),
        defaults={"seed": 43, "n": 1_000_000, "preload": 300_000, "target": 300_000},
        description=(
            "Footprint: 300k untimed passive limits, then 1M ops holding ~300k resting orders "
            "over ~8k ticks (offset mean 1000). Models a very deep book: the order pool, "
            "the id index and the levels no longer fit in cache, so memory layout and "
            "allocation dominate, not matching logic."),
        provenance=_PROV),
    "lobster_sparse": dict(
        build=_builder(1, 1_000_000, market=0.10, aggressive=0.02, offset=20_000.0),
        defaults={"seed": 44, "n": 1_000_000, "preload": 0, "target": 1_500},
        description=(
            "Scan length: ~1.5k resting orders scattered over a 1..1,000,000 band (offset mean "
            "20k ticks), 10% market orders. Almost every order is alone at its level and the "
            "gap to the next level is thousands of ticks, so a linear best-price scan after a "
            "level empties walks a long way while a bitmap jumps; a dense ladder also costs "
            "memory for a million mostly empty levels."),
        provenance=_PROV),
    "lobster_bursty": dict(
        build=_builder(1, 4096, market=0.06, aggressive=0.04, offset=70.0, burst_every=5_000),
        defaults={"seed": 45, "n": 1_000_000, "preload": 0, "target": 7_000},
        description=(
            "Stream shape: the narrow replay's flow, interrupted on average every 5k ops by a "
            "burst: a run of 200..2000 consecutive cancels (a market maker pulling quotes) or "
            "a run of 10..100 market orders ten times the usual size (sweeps that clear "
            "levels). Models regime changes: the book drains and refills, the best price "
            "jumps, and latency tails cluster instead of being spread evenly."),
        provenance=_PROV),
}

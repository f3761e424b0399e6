"""The ladder engine: every toggle combination agrees with the reference, op by op.

Seeded random streams cover every command kind, order type, STP mode and invalid input,
on a narrow band (1..99, the C++ seed's) and a wide one; ``check()`` runs after every
op. Separate tests grow the node pool and drive the bitmap over a 1..1,000,000 band.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from conftest import fills

import lob
from lob.engines import engine_spec
from lob.engines._best import FINDERS, BitmapBest
from lob.engines.base import EXEC_FIELDS
from lob.engines.ladder import LadderEngine
from lob.engines.reference import ReferenceEngine
from lob.engines.toggles import NAMES, VERSIONS, all_combinations, backend_versions
from lob.semantics import COMMAND_DTYPE, BookConfig, OrderType, Scope, StpMode

COMBOS = all_combinations("python")
COMBO_IDS = ["-".join(c.values()) for c in COMBOS]
TYPES = list(OrderType)
TYPE_WEIGHTS = [58, 8, 14, 10, 4, 6]


def random_stream(seed: int, n: int, lo: int, hi: int, mid: int, spread: int,
                  far: float = 0.0) -> np.ndarray:
    """``n`` commands: submits of every type near ``mid`` (a fraction ``far`` anywhere in
    the band), cancels, modifies, mass cancels of every scope, and invalid commands."""
    rng = random.Random(seed)
    rows = []
    submits = 0

    def price(side=None):
        if rng.random() < far:  # deep on its own side (market orders do the sweeping)
            return rng.randint(lo, mid) if side == 0 else rng.randint(mid, hi) \
                if side == 1 else rng.randint(lo, hi)
        # bids mostly below mid and asks above, overlapping: the book builds depth and trades
        a, b = (-spread, spread // 3) if side == 0 else \
            (-(spread // 3), spread) if side == 1 else (-spread, spread)
        return min(hi, max(lo, mid + rng.randint(a, b)))

    def some_id():
        r = rng.random()
        if r < 0.6:  # a recent order: likely still resting
            return rng.randint(max(1, submits - 40), submits + 1)
        return rng.randint(1, submits + 3) if r < 0.97 else rng.choice([0, -1])

    for _ in range(n):
        r = rng.random()
        row = dict.fromkeys(EXEC_FIELDS, 0)
        if r < 0.56:
            t = rng.choices(TYPES, TYPE_WEIGHTS)[0]
            side = rng.randint(0, 1)
            taker = t == OrderType.IOC or t == OrderType.FOK
            p = price(1 - side if taker else side)  # takers aim into the other side
            qty = rng.randint(1, 20 if rng.random() < 0.5 else 6)
            if t == OrderType.NOTIONAL:
                qty *= p
            row.update(kind=0, otype=int(t), side=side, owner=rng.randint(1, 4),
                       price=p if t < OrderType.MARKET else rng.choice([0, p, -3]), qty=qty)
            submits += 1
        elif r < 0.72:
            row.update(kind=1, id=some_id())
        elif r < 0.86:
            row.update(kind=2, id=some_id(), qty=rng.randint(1, 25),
                       price=rng.choice([0, 0, price(), price()]))
        elif r < 0.872:
            scope = rng.choices(list(Scope), [1, 6, 6, 6])[0]
            a, b = sorted((price(), price()))
            row.update(kind=3, otype=int(scope), side=rng.randint(0, 1),
                       owner=rng.randint(1, 4), price=a, price_hi=b)
        else:  # invalid: each must be rejected and change nothing
            bad = rng.randrange(10)
            base = dict(kind=0, otype=0, side=0, owner=1, price=mid, qty=5)
            row.update(base)
            if bad == 0:
                row.update(kind=rng.choice([4, -1]))
            elif bad == 1:
                row.update(otype=rng.choice([6, -1]))
            elif bad == 2:
                row.update(side=rng.choice([2, -1]))
            elif bad == 3:
                row.update(owner=rng.choice([0, -2]))
            elif bad == 4:
                row.update(qty=rng.choice([0, -5]))
            elif bad == 5:
                row.update(otype=rng.randint(0, 3), price=rng.choice([lo - 1, hi + 1]))
            elif bad == 6:
                row.update(kind=2, id=some_id(), qty=rng.choice([0, -1]))
            elif bad == 7:
                row.update(kind=2, id=some_id(), price=rng.choice([lo - 1, hi + 1, -7]))
            elif bad == 8:
                row.update(kind=3, otype=rng.choice([4, -1]))
            else:
                row.update(kind=3, otype=rng.choice([1, 2, 3]), side=2, owner=0,
                           price=mid + 1, price_hi=mid)
        rows.append(tuple(row[f] for f in EXEC_FIELDS))
    cmds = np.zeros(len(rows), dtype=COMMAND_DTYPE)
    for j, f in enumerate(EXEC_FIELDS):
        cmds[f] = [r[j] for r in rows]
    return cmds


def assert_agrees(eng, ref, cmds: np.ndarray, state_every: int = 25) -> None:
    """Outcome by outcome, fill by fill, ``check()`` after each op, state every few ops."""
    rows = list(zip(*(cmds[f].tolist() for f in EXEC_FIELDS), strict=True))
    for n, row in enumerate(rows):
        want = ref.step(*row)
        got = eng.step(*row)
        assert got == want, f"op {n} {row}: {eng.name} gave {got}, reference {want}"
        eng.check()
        if n % state_every == 0 or n == len(rows) - 1:
            assert fills(eng) == fills(ref), f"fills differ after op {n}"
            assert eng.resting() == ref.resting(), f"book differs after op {n}"
            assert eng.snapshot(5) == ref.snapshot(5), f"snapshot differs after op {n}"


def replay_agrees(name_or_eng, ref_cfg: BookConfig, cmds: np.ndarray) -> None:
    ref = ReferenceEngine(ref_cfg).replay(cmds)
    got = name_or_eng.replay(cmds)
    assert np.array_equal(got.outcomes, ref.outcomes)
    assert np.array_equal(got.fills, ref.fills)
    assert got.checksum == ref.checksum and got.counters == ref.counters


@pytest.mark.parametrize("stp", list(StpMode), ids=[m.name for m in StpMode])
@pytest.mark.parametrize("toggles", COMBOS, ids=COMBO_IDS)
def test_narrow_band_matches_reference(toggles, stp):
    cfg = BookConfig(1, 99, stp)
    cmds = random_stream(seed=1000 + int(stp), n=500, lo=1, hi=99, mid=50, spread=6, far=0.05)
    assert_agrees(LadderEngine(cfg, **toggles), ReferenceEngine(cfg), cmds)
    replay_agrees(LadderEngine(cfg, **toggles), cfg, cmds)


@pytest.mark.parametrize("stp", [StpMode.NONE, StpMode.CANCEL_BOTH], ids=["NONE", "CANCEL_BOTH"])
@pytest.mark.parametrize("toggles", COMBOS, ids=COMBO_IDS)
def test_wide_band_matches_reference(toggles, stp):
    cfg = BookConfig(10, 100_009, stp)
    cmds = random_stream(seed=2000 + int(stp), n=200, lo=10, hi=100_009, mid=50_000,
                         spread=40, far=0.15)
    assert_agrees(LadderEngine(cfg, **toggles), ReferenceEngine(cfg), cmds)


@pytest.mark.parametrize("name", list(backend_versions("python")))  # v4 is numba only
def test_lineage_versions_registered_with_their_toggles(name):
    info = engine_spec(name)
    want = {k: VERSIONS[name][k] for k in NAMES}
    assert info.toggles == want and info.description == VERSIONS[name]["step"]
    eng = lob.get_engine(name, BookConfig(1, 99, StpMode.CANCEL_MAKER))
    assert eng.toggles == want and eng.name == name
    cmds = random_stream(seed=7, n=3000, lo=1, hi=99, mid=50, spread=10, far=0.1)
    replay_agrees(eng, eng.config, cmds)


def test_all_toggle_combinations_are_distinct_and_complete():
    assert len(COMBOS) == 2 * 3 * 3
    assert len({tuple(c.values()) for c in COMBOS}) == len(COMBOS)


def test_pool_grows_by_doubling_and_stays_consistent():
    cfg = BookConfig(1, 99, StpMode.CANCEL_TAKER)
    eng = LadderEngine(cfg, levels="pool", best="bitmap", fok="level_sums", capacity=2)
    ref = ReferenceEngine(cfg)
    assert eng._lv.capacity == 2
    rows = [(0, 0, i % 2, 1 + i % 3, 40 + (i % 7) if i % 2 == 0 else 60 + (i % 7), 1 + i % 9,
             0, 0) for i in range(100)]
    cmds = np.zeros(len(rows), dtype=COMMAND_DTYPE)
    for j, f in enumerate(EXEC_FIELDS):
        cmds[f] = [r[j] for r in rows]
    assert_agrees(eng, ref, cmds, state_every=10)
    assert len(eng._lv.index) == 100
    assert eng._lv.capacity == 128  # 2 -> 4 -> ... -> 128
    # free nodes are reused before the pool grows again
    more = random_stream(seed=11, n=600, lo=1, hi=99, mid=50, spread=15, far=0.1)
    assert_agrees(eng, ref, more)
    assert eng._lv.capacity <= 256


def test_bitmap_on_a_million_wide_band():
    cfg = BookConfig(1, 1_000_000, StpMode.CANCEL_MAKER)
    edges = [1, 2, 63, 64, 65, 4095, 4096, 4097, 262_144, 500_000, 999_999, 1_000_000]
    eng = LadderEngine(cfg, levels="pool", best="bitmap", fok="early_exit")
    ref = ReferenceEngine(cfg)
    rows = []
    for n, p in enumerate(edges):  # asks at the edges, bids just under each ask
        rows.append((0, 0, 1, 1 + n % 3, p, 5, 0, 0))
        if p > 1:
            rows.append((0, 0, 0, 2 + n % 3, p - 1, 3, 0, 0))
    rows += [(0, int(OrderType.MARKET), 0, 4, 0, 17, 0, 0),  # sweeps several far levels
             (0, int(OrderType.FOK), 1, 1, 1, 40, 0, 0),
             (0, int(OrderType.NOTIONAL), 0, 3, 0, 3_000_000, 0, 0)]
    cmds = np.zeros(len(rows), dtype=COMMAND_DTYPE)
    for j, f in enumerate(EXEC_FIELDS):
        cmds[f] = [r[j] for r in rows]
    cmds = np.concatenate([cmds, random_stream(seed=5, n=120, lo=1, hi=1_000_000,
                                               mid=500_000, spread=50, far=0.3)])
    assert_agrees(eng, ref, cmds, state_every=20)


@pytest.mark.parametrize("kind", list(FINDERS))
@pytest.mark.parametrize("width", [1, 64, 65, 99, 4097, 1_000_000])
def test_best_finders_agree_with_a_sorted_set(kind, width):
    rng = random.Random(width)
    for highest in (True, False):
        f, have = FINDERS[kind](width, highest), set()
        for _ in range(400):
            i = rng.randrange(width) if rng.random() < 0.8 else rng.choice([0, width - 1])
            if i in have:
                f.remove(i)
                have.discard(i)
            else:
                f.add(i)
                have.add(i)
            order = sorted(have, reverse=highest)
            assert f.best() == (order[0] if order else -1)
            probe = rng.randrange(width)
            nxt = [j for j in order if (j < probe if highest else j > probe)]
            assert f.after(probe) == (nxt[0] if nxt else -1)
        assert f.indices() == sorted(have)
        if width <= 4097:
            f.check()


def test_bitmap_depth_stays_small():
    assert len(BitmapBest(99, True)._levels) == 2
    assert len(BitmapBest(1_000_000, True)._levels) == 4


def test_check_catches_a_broken_book():
    cfg = BookConfig(1, 99)
    for toggles in COMBOS:
        eng = LadderEngine(cfg, **toggles)
        eng.submit(1, 0, 0, 40, 5)
        eng.submit(2, 1, 0, 60, 5)
        eng.check()
        eng._bests[0].remove(39)  # the finder forgets a non-empty level
        with pytest.raises(AssertionError):
            eng.check()


def test_bad_toggle_names_the_field():
    with pytest.raises(ValueError, match="best"):
        LadderEngine(BookConfig(), best="heap")
    with pytest.raises(ValueError, match="capacity"):
        LadderEngine(BookConfig(), levels="pool", capacity=0)

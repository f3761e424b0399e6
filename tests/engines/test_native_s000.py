"""orderbook-rs's mechanisms in C++ (lob.engines.native, s000_book.cpp): the chain registered
one toggle per step, what each declares, what each mechanism allocates (read by the library's
own counter), and a small book driven through each. Their agreement with ``reference`` is the
differential fuzz's (tests/differential/test_fuzz.py runs every registered engine)."""

from __future__ import annotations

import pytest

import lob
from lob.engines import native, registry
from lob.measure.alloc import NATIVE_METHOD, count_allocations
from lob.semantics import BookConfig, Kind, OrderType, Scope, Status, StpMode, commands

pytestmark = pytest.mark.skipif(native.unavailable() is not None and not all(
    n.library.is_file() for n in native.NATIVE.values()), reason="no C++ compiler here")

CHAIN = ["ladder@cpp", "ladder+heap@cpp", "skiplist+heap@cpp", "skiplist+heap+levelobj@cpp",
         "orderbook_rs@cpp"]


def test_the_chain_is_registered_one_toggle_per_step():
    assert registry.engine_spec(CHAIN[0]).parent is None
    assert registry.engine_spec(CHAIN[0]).toggles == {
        "orders": "pool", "levels": "ladder", "level_objects": "inline", "index": "flat"}
    for parent, child in zip(CHAIN, CHAIN[1:], strict=False):
        spec = registry.engine_spec(child)
        assert spec.parent == parent and spec.backend == "cpp"
        p = registry.engine_spec(parent).toggles
        assert sum(spec.toggles[k] != p[k] for k in p) == 1, child
        n, m = native.native(child), native.native(parent)
        assert sum(a != b for a, b in zip(n.defines, m.defines, strict=True)) == 1
    assert registry.engine_spec("orderbook_rs@cpp").toggles == {
        "orders": "heap", "levels": "skiplist", "level_objects": "refcounted",
        "index": "sharded"}


def test_each_declares_the_whole_semantics():
    for name in CHAIN:
        caps = registry.engine_capabilities(name)
        assert caps.stp_modes == set(StpMode) and caps.order_types == set(OrderType)
        assert caps.kinds == set(Kind) and caps.scopes == set(Scope)
    assert registry.engine_capabilities("ladder@cpp").max_band_width == 2 ** 26
    assert registry.engine_capabilities("skiplist+heap@cpp").max_band_width is None  # any


def book():  # untimed: an ask at 105, a bid at 90; timed: two bids at 100, one cancelled,
    # one sold (the window's allocations are the mechanisms', not a first chunk of a pool)
    return commands([
        {"kind": 0, "otype": 0, "side": 1, "owner": 1, "price": 105, "qty": 5, "timed": 0},
        {"kind": 0, "otype": 0, "side": 0, "owner": 4, "price": 90, "qty": 1, "timed": 0},
        {"kind": 0, "otype": 0, "side": 0, "owner": 2, "price": 100, "qty": 3},
        {"kind": 0, "otype": 0, "side": 0, "owner": 2, "price": 100, "qty": 4},
        {"kind": 1, "id": 2},
        {"kind": 0, "otype": 4, "side": 1, "owner": 3, "qty": 4}])


@pytest.mark.parametrize("name,allocs,frees", [
    ("ladder@cpp", 0, 0),                # node pool and level array made before the window
    ("ladder+heap@cpp", 2, 2),           # new per rested bid, delete on cancel and on fill
    ("skiplist+heap@cpp", 2, 2),         # skip nodes recycled through a free list
    ("skiplist+heap+levelobj@cpp", 3, 3),  # + the level at 100: made, then freed when empty
])
def test_each_mechanism_allocates_what_it_says(name, allocs, frees):
    cmds = book()
    eng = lob.get_engine(name, BookConfig(1, 1000))
    c = count_allocations(eng, cmds)
    assert c.method == NATIVE_METHOD and c.ops == 4
    assert (c.allocs, c.reallocs, c.frees) == (allocs, 0, frees)
    assert (c.bytes_alloc > 0) == (allocs > 0)
    r = lob.get_engine(name, BookConfig(1, 1000)).replay(cmds)
    assert [int(s) for s in r.outcomes["status"]] == [
        Status.ACCEPTED, Status.ACCEPTED, Status.ACCEPTED, Status.ACCEPTED, Status.CANCELLED,
        Status.FILLED]


def test_the_sharded_index_allocates_its_shard_tables():
    c = count_allocations(lob.get_engine("orderbook_rs@cpp", BookConfig(1, 1000)), book())
    base = count_allocations(lob.get_engine("skiplist+heap+levelobj@cpp", BookConfig(1, 1000)),
                             book())
    assert c.allocs >= base.allocs and c.frees >= base.frees


@pytest.mark.parametrize("name", CHAIN)
def test_a_wide_band_book_and_every_mass_cancel_scope(name):
    eng = lob.get_engine(name, BookConfig(1, 1_000_000, StpMode.CANCEL_BOTH))
    for i, (side, price) in enumerate([(0, 10), (0, 500_000), (1, 900_000), (1, 999_999)]):
        assert eng.submit(1 + i % 2, side, OrderType.LIMIT, price, 2).status == Status.ACCEPTED
    snap = eng.snapshot(5)
    assert [lv[0] for lv in snap["bids"]] == [500_000, 10]
    assert [lv[0] for lv in snap["asks"]] == [900_000, 999_999]
    out = eng.execute({"kind": Kind.MASS_CANCEL, "otype": Scope.PRICE_RANGE,
                       "price": 400_000, "price_hi": 950_000})
    assert out.removed == 2
    eng.check()


def test_lob_engines_names_the_chains_toggles():
    from lob.cli.engines import engines_table

    row = next(r for r in engines_table() if r.startswith("orderbook_rs@cpp "))
    assert "orders=heap,levels=skiplist,level_objects=refcounted,index=sharded" in row
    v2 = next(r for r in engines_table() if r.startswith("v2@cpp "))
    assert "pool,bitmap,early_exit" in v2  # the lineage's toggles keep their columns

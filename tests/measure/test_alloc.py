"""Total allocation counting (native hook), tracemalloc attribution, the allocation budget.

The counting allocator lives in the native helper (``lob/measure/_native.c``, built with the
machine's C compiler on first use). A helper that does not build or load, or a workload the
budget test needs that does not build, is a defect: these tests fail naming the cause, they
never skip.
"""

import tracemalloc

import numba  # noqa: F401 - a dependency of lob: its absence is a broken install, not a skip
import numpy as np
import pytest

import lob
from lob.engines import get_engine
from lob.measure import alloc
from lob.measure._native import native, native_error
from lob.semantics import commands


def require_helper():
    """The native helper, built and loaded; else an AssertionError naming why not."""
    m = native()
    assert m is not None, f"the native helper (counting allocator) is unavailable: " \
                          f"{native_error()}"
    return m


@pytest.fixture(autouse=True)
def helper():
    return require_helper()


def test_the_native_helper_builds_and_loads(helper):
    assert native_error() is None
    for name in ("alloc_install", "alloc_uninstall", "alloc_read", "alloc_installed"):
        assert callable(getattr(helper, name)), f"the native helper lacks {name}"


def test_a_broken_helper_fails_the_tests_naming_the_compiler_error(monkeypatch, tmp_path):
    from lob.measure import _native

    bad = tmp_path / "_native.c"
    bad.write_text("this is not C;\n")
    monkeypatch.setattr(_native, "_SRC", bad)
    monkeypatch.setattr(_native, "_module", None)
    monkeypatch.setattr(_native, "_error", None)
    monkeypatch.setenv("LOB_CACHE", str(tmp_path / "cache"))
    with pytest.raises(AssertionError, match=r"unavailable: building _native.c failed: .*error"):
        require_helper()


def test_counter_sees_allocations_and_frees():
    with alloc.counting(ops=1000) as c:
        keep = [[i] for i in range(1000)]  # 1000 list objects + their item arrays
        del keep
    n = c.counts
    assert n.allocs >= 1000
    assert n.frees >= 1000  # the lists were freed inside the block
    assert n.bytes_alloc >= 1000 * 40
    assert n.allocs_per_op == pytest.approx((n.allocs + n.reallocs) / 1000)


def test_counter_is_uninstalled_after_the_block():
    with alloc.counting() as c:
        pass
    before = native().alloc_read()
    _ = [object() for _ in range(100)]
    assert native().alloc_read() == before  # no counting outside the block
    assert c.counts.allocs < 50
    assert not native().alloc_installed()


def test_counting_refuses_to_nest_with_tracemalloc():
    tracemalloc.start()
    try:
        with pytest.raises(RuntimeError, match="tracemalloc"):
            with alloc.counting():
                pass
    finally:
        tracemalloc.stop()
    assert not native().alloc_installed()


def test_count_allocations_uses_the_timed_window():
    rows = [dict(kind=0, otype=0, side=0, owner=1, price=100 + i % 7, qty=5) for i in range(300)]
    c = commands(rows)
    c["timed"][:200] = False
    n = alloc.count_allocations(get_engine("reference"), c)
    assert n.ops == 100
    assert n.allocs > 100  # resting orders allocate


def test_harness_allocations_are_small():
    h = alloc.harness_allocations(5000)
    assert h.ops == 5000 and h.allocs_per_op < 3


def test_trace_allocations_names_sites():
    rows = [dict(kind=0, otype=0, side=i % 2, owner=1, price=100 + (i % 2) * 10, qty=5)
            for i in range(500)]
    t = alloc.trace_allocations(get_engine("reference"), commands(rows), top=5)
    assert t["ops"] == 500 and t["net_bytes"] > 0 and t["peak_bytes"] >= t["net_bytes"]
    assert t["top_sites"] and ":" in t["top_sites"][0]["site"]
    assert any("lob" in s["site"] for s in t["top_sites"])


# measured 2026-11 on v1 / v0+pool: ~9.7 allocs/op including ~1.0 of the harness itself; the
# ceiling is ~3x that, so an order-of-magnitude regression (per-op objects per fill, per-level
# containers) fails while interpreter noise does not.
ALLOC_BUDGET_CEILING = 30.0


POOL_ENGINE = "v0+pool"  # the lineage's node-pool step (an unknown name fails, never skips)


def test_alloc_budget_pool_engine():
    wl = lob.workload("alloc_budget")
    n = alloc.count_allocations(get_engine(POOL_ENGINE, wl.config), wl.commands)
    assert n.ops == int(np.count_nonzero(wl.commands["timed"]))
    assert n.allocs_per_op < ALLOC_BUDGET_CEILING, n.to_dict()


@pytest.mark.bench
def test_counter_overhead_bench():
    wl = lob.workload("mixed_70_20_10", scale=0.02)
    o = alloc.counter_overhead(lambda: get_engine("v0", wl.config), wl.commands, repeat=5)
    print(o)
    assert o["counting_slowdown"] <= 1.2


def test_compiled_replay_makes_almost_no_allocations():
    from lob.measure.alloc import count_allocations

    wl = lob.workload("mixed_70_20_10", scale=0.005)
    lob.get_engine("v2@numba", wl.config).replay(wl.commands[:10])  # compile / load first
    compiled = count_allocations(lob.get_engine("v2@numba", wl.config), wl.commands)
    python = count_allocations(lob.get_engine("v2", wl.config), wl.commands)
    assert compiled.ops == python.ops > 1000
    assert compiled.allocs_per_op < 0.05  # a handful per replay call, none per op
    assert python.allocs_per_op > 1

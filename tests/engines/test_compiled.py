"""The numba backend agrees with the reference bit for bit, grows cleanly, and times in-kernel."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import lob.engines.compiled  # noqa: F401  (registers the @numba engines)
from lob.engines.registry import engine_names, engine_spec, get_engine
from lob.engines.toggles import backend_versions, version_toggles
from lob.semantics import (
    COMMAND_DTYPE,
    BookConfig,
    Kind,
    OrderType,
    Reason,
    Scope,
    Side,
    Status,
    StpMode,
    checksum,
)

REPO = Path(__file__).resolve().parents[2]
NUMBA_VERSIONS = list(backend_versions("numba"))


def random_stream(seed: int, n: int, cfg: BookConfig, spread: int = 12) -> np.ndarray:
    """Every command kind, order type, scope and validation failure, prices near a mid."""
    rng = np.random.default_rng(seed)
    mid = (cfg.min_price + cfg.max_price) // 2
    cmds = np.zeros(n, dtype=COMMAND_DTYPE)
    cmds["timed"] = rng.random(n) < 0.7
    submitted = 0
    for i in range(n):
        c = cmds[i]
        r = rng.random()
        price = int(np.clip(mid + rng.integers(-spread, spread + 1), cfg.min_price,
                            cfg.max_price))
        if rng.random() < 0.02:  # the band edges, far from the action (two-level bitmap)
            price = int(rng.choice([cfg.min_price, cfg.max_price]))
        if r < 0.6:
            c["kind"] = Kind.SUBMIT
            c["otype"] = rng.choice(6, p=[0.45, 0.12, 0.12, 0.11, 0.1, 0.1])
            c["side"] = rng.integers(0, 2)
            c["owner"] = rng.integers(1, 5) if rng.random() < 0.97 else rng.integers(5000, 9000)
            c["price"] = price
            c["qty"] = rng.integers(1, 30) if c["otype"] != OrderType.NOTIONAL else \
                rng.integers(1, 40 * price + 2)
            submitted += 1
        elif r < 0.8:
            c["kind"] = Kind.CANCEL
            c["id"] = rng.integers(-1, submitted + 3)
        elif r < 0.93:
            c["kind"] = Kind.MODIFY
            c["id"] = rng.integers(0, submitted + 2)
            c["qty"] = rng.integers(1, 40)
            c["price"] = 0 if rng.random() < 0.5 else price
        elif r < 0.96:
            c["kind"] = Kind.MASS_CANCEL
            c["otype"] = rng.integers(0, 4)
            c["side"] = rng.integers(0, 2)
            c["owner"] = rng.integers(1, 5)
            c["price"] = price
            c["price_hi"] = price + rng.integers(0, spread)
        else:  # invalid input of every kind
            c["kind"] = rng.choice([0, 0, 0, 0, 2, 2, 3, 3, 3, 3, 7])
            bad = rng.integers(0, 5)
            c["otype"] = 9 if bad == 0 else rng.integers(0, 4)
            c["side"] = 5 if bad == 1 else rng.integers(0, 2)
            c["owner"] = -3 if bad == 2 else rng.integers(1, 5)
            c["qty"] = 0 if bad == 3 else rng.integers(1, 10)
            c["price"] = cfg.max_price + 1 if bad == 4 else price
            c["price_hi"] = c["price"] - 1
            c["id"] = rng.integers(0, submitted + 1)
    return cmds


def assert_same(name: str, cfg: BookConfig, cmds: np.ndarray, **engine_kw) -> object:
    ref = get_engine("reference", cfg)
    expected = ref.replay(cmds)
    eng = get_engine(name, cfg) if not engine_kw else _engine(name, cfg, **engine_kw)
    got = eng.replay(cmds)
    bad = np.flatnonzero(got.outcomes != expected.outcomes)
    assert bad.size == 0, (f"{name}: first mismatch at command {bad[0]}: {cmds[bad[0]]} "
                           f"got {got.outcomes[bad[0]]} want {expected.outcomes[bad[0]]}")
    np.testing.assert_array_equal(got.fills, expected.fills)
    assert got.checksum == expected.checksum
    assert got.counters == expected.counters
    assert eng.resting() == ref.resting()
    assert eng.snapshot(5) == ref.snapshot(5)
    eng.check()
    return eng


def _engine(name, cfg, **kw):
    from lob.engines.compiled.engine import CompiledEngine
    from lob.engines.compiled.engine_v4 import PackedEngine

    t = {**version_toggles(name), **kw}
    eng = (PackedEngine if t["levels"] == "packed" else CompiledEngine)(cfg, **t)
    eng.name = name
    return eng


def test_numba_registers_only_the_versions_it_implements():
    assert NUMBA_VERSIONS == ["v0+pool@numba", "v1@numba", "v2@numba", "v3@numba",
                             "v2+tracked@numba", "v3+packed@numba", "v3+packed+hot@numba",
                             "v3+packed+hot+select@numba", "v4@numba", "v5@numba"]
    for name in NUMBA_VERSIONS:
        info = engine_spec(name)
        assert info.backend == "numba"
        assert info.toggles == version_toggles(name)
    assert set(NUMBA_VERSIONS) <= set(engine_names())
    assert {"v0@numba", "v0+bitmap@numba"}.isdisjoint(engine_names())
    with pytest.raises(ValueError, match=r"levels = pool \| packed, not 'deque'"):
        _engine("v0@numba", BookConfig(1, 10))
    # the stream prefetch is a switch of the packed kernel only
    with pytest.raises(ValueError, match="stream='prefetch' is .*PackedEngine"):
        _engine("v3@numba", BookConfig(1, 10), stream="prefetch")
    with pytest.raises(ValueError, match=r"stream = plain \| prefetch, not 'ahead'"):
        _engine("v5@numba", BookConfig(1, 10), stream="ahead")
    assert engine_spec("v5@numba").parent == "v4@numba"
    # v3 -> v4 in four single steps; the packed kernel's switches refused by the pool kernel
    assert [engine_spec(n).parent for n in NUMBA_VERSIONS[5:9]] == [
        "v3@numba", "v3+packed@numba", "v3+packed+hot@numba", "v3+packed+hot+select@numba"]
    with pytest.raises(ValueError, match="loop='hot' is .*PackedEngine"):
        _engine("v3@numba", BookConfig(1, 10), loop="hot")


@pytest.mark.parametrize("stp", list(StpMode), ids=lambda m: m.name)
@pytest.mark.parametrize("name", NUMBA_VERSIONS)
def test_agrees_with_reference_narrow_band(name, stp):
    cfg = BookConfig(1, 40, stp)
    assert_same(name, cfg, random_stream(1000 + int(stp), 2500, cfg))


@pytest.mark.parametrize("name", NUMBA_VERSIONS)
def test_agrees_with_reference_wide_band(name):
    cfg = BookConfig(1, 200_000, StpMode.CANCEL_BOTH)
    assert_same(name, cfg, random_stream(7, 1500, cfg, spread=300))


@pytest.mark.parametrize("name", ["v1@numba", "v3@numba"])
def test_million_tick_band_uses_the_two_level_bitmap(name):
    cfg = BookConfig(1, 1_000_000, StpMode.CANCEL_MAKER)
    eng = assert_same(name, cfg, random_stream(11, 1500, cfg, spread=5000))
    assert eng._B.size == 2 * 15_625 + 2 * 245  # words + summary words per side


def _resident_pages(a: np.ndarray) -> tuple[int, int]:
    """(resident, total) pages of the memory under ``a``, from mincore(2)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    page = os.sysconf("SC_PAGE_SIZE")
    start = a.ctypes.data - a.ctypes.data % page
    length = a.ctypes.data + a.nbytes - start
    vec = (ctypes.c_ubyte * ((length + page - 1) // page))()
    if libc.mincore(start, length, vec) != 0:
        pytest.skip(f"mincore failed: {os.strerror(ctypes.get_errno())}")
    return sum(v & 1 for v in vec), len(vec)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mincore(2) residency: Linux")
@pytest.mark.parametrize("name", NUMBA_VERSIONS)
def test_book_arrays_are_materialised_at_creation_not_in_the_timed_kernel(name):
    """Every page of the book's arrays is mapped when the engine is built: np.zeros maps
    pages lazily, so an array left as allocated (v3's 15 MB per-owner level_sums table on a
    1M-tick band) was faulted in by the first write to each page inside the timed kernel -
    a cost of creating the engine, ~5 us per command on a 2,000-command sparse stream
    (evolution_stress: v3@numba 0.02x v2@numba). The G array of a 1M-tick band is
    larger than glibc's mmap threshold, so it always comes from a fresh mapping."""
    eng = _engine(name, BookConfig(1, 1_000_000, StpMode.NONE))
    arrays = ("G", "B", "N", "IDX", "LV", "F") if hasattr(eng, "_G") else \
        ("L", "OS", "B", "ND", "IDX", "LV", "F", "S")
    for what in arrays:
        a = getattr(eng, f"_{what}")
        resident, total = _resident_pages(a)
        assert resident == total, f"{name}: {what} has {total - resident} of {total} pages unmapped"


def test_interactive_api_matches_reference_and_keeps_invariants():
    cfg = BookConfig(1, 30, StpMode.CANCEL_TAKER)
    cmds = random_stream(3, 600, cfg, spread=6)
    ref, eng = get_engine("reference", cfg), get_engine("v3@numba", cfg)
    for row in cmds:
        assert eng.execute(row) == ref.execute(row)
        eng.check()
    np.testing.assert_array_equal(eng.fills, ref.fills)
    assert eng.submit(1, Side.BUY, OrderType.LIMIT, 10, 5) == \
        ref.submit(1, Side.BUY, OrderType.LIMIT, 10, 5)
    assert eng.modify(1, 3, 12) == ref.modify(1, 3, 12)
    assert eng.mass_cancel(Scope.OWNER, owner=2) == ref.mass_cancel(Scope.OWNER, owner=2)
    assert eng.cancel(10**12) == ref.cancel(10**12)


def test_out_of_range_field_is_a_clear_error():
    eng = get_engine("v2@numba", BookConfig(1, 10))
    with pytest.raises(ValueError, match="owner"):
        eng.submit(2**40, 0, 0, 5, 1)
    with pytest.raises(TypeError, match="qty"):
        eng.submit(1, 0, 0, 5, 1.5)
    with pytest.raises(ValueError, match="best"):
        _engine("v2", BookConfig(1, 10), best="tree")


@pytest.mark.parametrize("name", ["v2@numba", "v4@numba"])  # the two layouts
def test_pool_fills_and_index_grow_between_kernel_calls(name, monkeypatch):
    from lob.engines.compiled import engine

    monkeypatch.setattr(engine, "_PRESIZE", 0)  # no reservation from the stream: grow
    cfg = BookConfig(1, 40, StpMode.NONE)
    eng = assert_same(name, cfg, random_stream(5, 3000, cfg), capacity=1, fill_capacity=1)
    assert eng.grows["pool"] >= 5 and eng.grows["fills"] >= 1
    assert eng._pool_size() >= len(eng.resting())


@pytest.mark.parametrize("stp", [StpMode.NONE, StpMode.CANCEL_MAKER], ids=lambda m: m.name)
def test_tracked_best_keeps_no_level_index_and_agrees_with_reference(stp):
    """best="tracked" (v2+tracked@numba): the best price cached, rescanned only when its
    level empties; the bitmap is never written, and the cached best is checked by check()."""
    cfg = BookConfig(1, 300, stp)
    eng = assert_same("v2+tracked@numba", cfg, random_stream(61 + int(stp), 4000, cfg,
                                                            spread=60))
    from lob.engines.compiled.state import BEST0, BEST1

    assert not eng._B.any()  # no per-level index
    eng.submit(1, Side.BUY, OrderType.LIMIT, 100, 5)  # whatever the stream left: a book
    eng.submit(2, Side.SELL, OrderType.LIMIT, 200, 5)
    top = eng.snapshot(1)
    assert top["bids"] and top["asks"]
    for key, cell in (("bids", BEST0), ("asks", BEST1)):
        assert eng._G[cell] == (top[key][0][0] - cfg.min_price if top[key] else -1)
    eng._G[BEST0] = cfg.width - 1 - eng._G[BEST0]  # the cached best made wrong: check sees it
    with pytest.raises(AssertionError, match="cached best price"):
        eng.check()


def test_fixed_capacity_pool_rejects_resting_submits_cleanly():
    eng = _engine("v3", BookConfig(1, 10), capacity=2, grow=False)
    assert eng.submit(1, Side.SELL, OrderType.LIMIT, 5, 1).status == Status.ACCEPTED
    assert eng.submit(1, Side.SELL, OrderType.LIMIT, 6, 1).status == Status.ACCEPTED
    full = eng.submit(1, Side.SELL, OrderType.LIMIT, 7, 1)
    assert (full.status, full.reason, full.id) == (Status.REJECTED, Reason.POOL_FULL, 0)
    eng.check()
    ioc = eng.submit(2, Side.BUY, OrderType.IOC, 5, 1)  # needs no node: still trades
    assert (ioc.status, ioc.id, ioc.filled) == (Status.FILLED, 3, 1)
    again = eng.submit(1, Side.SELL, OrderType.LIMIT, 7, 1)  # a node was freed by the fill
    assert (again.status, again.id) == (Status.ACCEPTED, 4)
    assert eng.resting() == [(2, 1, 1, 6, 1), (4, 1, 1, 7, 1)]
    eng.check()


@pytest.mark.parametrize("ids", ["array", "bitset"])
@pytest.mark.parametrize("stp", [StpMode.NONE, StpMode.CANCEL_BOTH], ids=lambda m: m.name)
def test_both_id_index_layouts_agree_with_reference(ids, stp):
    cfg = BookConfig(1, 40, stp)
    eng = assert_same("v2@numba", cfg, random_stream(31 + int(stp), 3000, cfg), ids=ids)
    live = int(sum(bin(int(w)).count("1") for w in eng._LV))
    assert live == (len(eng.resting()) if ids == "bitset" else 0)


def test_invariant_check_catches_a_stray_live_bit():
    cfg = BookConfig(1, 40)
    eng = assert_same("v2@numba", cfg, random_stream(41, 500, cfg))
    dead = next(i for i in range(1, eng._IDX.size) if not eng._LV[i >> 6] >> (i & 63) & 1)
    eng._LV[dead >> 6] |= np.uint64(1) << np.uint64(dead & 63)
    with pytest.raises(AssertionError, match="live-id bitset"):
        eng.check()


def test_unknown_id_layout_is_a_clear_error():
    with pytest.raises(ValueError, match="ids must be one of"):
        _engine("v2", BookConfig(1, 10), ids="hash")


def test_stale_kernel_cache_is_dropped_when_a_source_changes(tmp_path):
    from lob.engines.compiled.engine import _drop_stale_cache

    (tmp_path / "kernel.run-1.py311.nbi").write_text("stale")
    (tmp_path / "book.rest-2.py311.1.nbc").write_text("stale")
    (tmp_path / "lob-sources.sha1").write_text("digest of older sources")
    assert _drop_stale_cache(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lob-sources.sha1"]
    (tmp_path / "kernel.run-1.py311.nbi").write_text("fresh")
    assert not _drop_stale_cache(tmp_path)  # same sources: the cache is kept
    assert (tmp_path / "kernel.run-1.py311.nbi").exists()


def test_replay_timed_gives_one_duration_per_timed_command():
    cfg = BookConfig(1, 40, StpMode.CANCEL_MAKER)
    cmds = random_stream(9, 2000, cfg)
    plain = get_engine("v2@numba", cfg).replay(cmds)
    timed, durs = get_engine("v2@numba", cfg).replay_timed(cmds)
    assert durs.shape == (int(cmds["timed"].sum()),)
    assert durs.min() >= 0 and durs.max() < 10**9
    assert timed.checksum == plain.checksum


def test_kernel_clock_overhead_is_measured():
    from lob.engines.compiled import kernel_clock_overhead

    o = kernel_clock_overhead(20_000)
    assert 0 <= o["min"] <= o["median"] < 10_000


def test_prefetch_hints_change_nothing_and_accept_any_index():
    """v4's stream prefetch: a hint only (no fault past the array's end, nothing written),
    compiled to the read and the write prefetch on x86, and a 2-D array refused."""
    import platform

    from numba import njit
    from numba.core.errors import TypingError

    from lob.engines.compiled.prefetch import prefetch, prefetch_write
    from lob.semantics import OUTCOME_DTYPE

    @njit(_nrt=False)
    def hint(a, b, i):
        prefetch(a, np.uint64(i))
        prefetch_write(b, i)

    cmds = random_stream(3, 100, BookConfig(1, 40))
    out = np.zeros(100, dtype=OUTCOME_DTYPE)
    before = cmds.copy()
    for i in (0, 99, 100, 64 + 99, 2**40):  # the kernel prefetches up to 64 past the end
        hint(cmds, out, i)
    assert (cmds == before).all() and not out.view(np.uint8).any()
    if platform.machine() in ("x86_64", "AMD64"):
        asm = hint.inspect_asm(hint.signatures[0])
        assert "prefetcht0" in asm and "prefetchw" in asm

    @njit(_nrt=False)
    def flat(a):
        prefetch(a, 0)

    with pytest.raises(TypingError):
        flat(np.zeros((2, 2)))


# both kernels; v3+packed, v3+packed+hot, v4 and v5 are four builds of one
CHECKED = ("v0+pool@numba", "v3@numba", "v3+packed@numba", "v3+packed+hot@numba", "v4@numba",
           "v5@numba")
_SUBPROCESS = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {repo!r})
    import lob.engines.compiled
    from lob.engines.registry import get_engine
    from lob.engines.compiled import kernel, kernel_v4
    from lob.semantics import BookConfig, StpMode
    CHECKED = {checked!r}
    from tests.engines.test_compiled import random_stream
    cfg = BookConfig(1, 40, StpMode.CANCEL_BOTH)
    cmds = random_stream(21, 2000, cfg)
    sums = {{n: get_engine(n, cfg).replay(cmds).checksum for n in CHECKED}}
    for n in {timed!r}:
        get_engine(n, cfg).replay_timed(cmds)
    misses = sum(kernel.run.stats.cache_misses.values())
    misses += sum(kernel_v4.run.stats.cache_misses.values())
    print(json.dumps({{"sums": sums, "misses": misses}}))
""")


def _run_fresh(env_extra: dict, timed: tuple = ()) -> dict:
    """CHECKED replayed in a fresh process (and the engines of ``timed`` timed): the sums and
    the kernels' cache misses."""
    env = dict(os.environ, **env_extra)
    code = _SUBPROCESS.format(repo=str(REPO), checked=CHECKED, timed=tuple(timed))
    out = subprocess.run([sys.executable, "-c", code],
                         env=env, capture_output=True, text=True, timeout=900, cwd=REPO)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _expected_sums() -> dict:
    cfg = BookConfig(1, 40, StpMode.CANCEL_BOTH)
    cmds = random_stream(21, 2000, cfg)
    ref = get_engine("reference", cfg).replay(cmds)
    return {n: checksum(ref.outcomes, ref.fills) for n in CHECKED}


@pytest.mark.ci  # make test-ci: NUMBA_BOUNDSCHECK builds, minutes of compile when cold
def test_boundschecked_build_agrees(tmp_path):
    """The kernels built with NUMBA_BOUNDSCHECK=1 (in a cache of their own, per version of the
    sources): any out-of-bounds index raises IndexError instead of silently writing memory."""
    from conftest import boundscheck_cache

    res = _run_fresh({"NUMBA_BOUNDSCHECK": "1", "NUMBA_CACHE_DIR": boundscheck_cache()})
    assert res["sums"] == _expected_sums()


def test_warm_start_loads_from_cache_without_recompiling():
    """After warm, a fresh process replays every checked version and times the engines warm
    names in WARM_TIMED with no compile (the timed replays a batch captures latency with)."""
    from lob.engines.compiled import WARM_TIMED, warm

    warm()  # both kernels in the cache (a load when conftest or `make test` warmed them)
    res = _run_fresh({}, timed=WARM_TIMED)
    assert res["misses"] == 0
    assert res["sums"] == _expected_sums()


# --- v4 (levels="packed"): growth, fixed capacity, buffers lent to results ---------------------

def test_v4_fixed_capacity_pool_rejects_resting_submits_cleanly():
    eng = _engine("v4", BookConfig(1, 10), capacity=2, grow=False)
    for price in (5, 6):
        assert eng.submit(1, Side.SELL, OrderType.LIMIT, price, 1).status == Status.ACCEPTED
    full = eng.submit(1, Side.SELL, OrderType.LIMIT, 7, 1)
    assert (full.status, full.reason, full.id) == (Status.REJECTED, Reason.POOL_FULL, 0)
    ioc = eng.submit(2, Side.BUY, OrderType.IOC, 5, 1)  # needs no node: still trades
    assert (ioc.status, ioc.id, ioc.filled) == (Status.FILLED, 3, 1)
    assert eng.submit(1, Side.SELL, OrderType.LIMIT, 7, 1).id == 4  # the freed node
    assert eng.resting() == [(2, 1, 1, 6, 1), (4, 1, 1, 7, 1)]
    eng.check()


def test_v4_results_keep_their_buffers_while_later_replays_run():
    """replay hands out views of pooled, reused memory (outcomes, fills): a result must
    never change under a later replay, on the same engine or another one."""
    cfg = BookConfig(1, 40, StpMode.CANCEL_MAKER)
    a, b = random_stream(51, 40_000, cfg), random_stream(52, 40_000, cfg)
    ref_a = get_engine("reference", cfg).replay(a)
    eng = get_engine("v4@numba", cfg)
    first = eng.replay(a)
    eng.replay(b)
    get_engine("v4@numba", cfg).replay(b)
    np.testing.assert_array_equal(first.outcomes, ref_a.outcomes)
    np.testing.assert_array_equal(first.fills, ref_a.fills)
    assert len(first.fills) > 1000  # the fill buffer was lent, not copied


def test_v4_buffer_pool_reuses_released_memory():
    from lob.engines.compiled import _buffers
    from lob.semantics import OUTCOME_DTYPE

    cfg = BookConfig(1, 40)
    cmds = random_stream(53, 40_000, cfg)
    nbytes = len(cmds) * OUTCOME_DTYPE.itemsize
    assert nbytes >= _buffers.MIN_BYTES  # the outcome array comes from the pool
    first = get_engine("v4@numba", cfg).replay(cmds)
    total, used = _buffers.pooled_bytes()
    assert used >= nbytes
    del first  # its buffers are free again
    assert _buffers.pooled_bytes()[1] <= used - nbytes
    second = get_engine("v4@numba", cfg).replay(cmds)
    assert _buffers.pooled_bytes() == (total, used)  # reused: nothing new mapped
    third = get_engine("v4@numba", cfg).replay(cmds)  # second holds its buffers: new ones
    assert _buffers.pooled_bytes()[1] >= used + nbytes
    assert not np.shares_memory(second.outcomes, third.outcomes)
    assert second.checksum == third.checksum


def test_v4_replay_into_matches_replay():
    cfg = BookConfig(1, 40, StpMode.CANCEL_BOTH)
    cmds = random_stream(54, 3000, cfg)
    res = get_engine("v4@numba", cfg).replay(cmds)
    out = np.zeros(len(cmds) + 5, dtype=res.outcomes.dtype)
    fills = np.zeros(len(res.fills), dtype=res.fills.dtype)
    k = get_engine("v4@numba", cfg).replay_into(cmds, out, fills)
    assert k == len(res.fills)
    np.testing.assert_array_equal(out[:len(cmds)], res.outcomes)
    np.testing.assert_array_equal(fills, res.fills)

"""Allocation pressure of a replay: total counts per op, and where the bytes come from.

Two instruments, never run together:

* **Totals** (:func:`count_allocations`): a counting allocator (``_native.c``) wraps
  CPython's three allocator domains (RAW, MEM, OBJ) through ``PyMem_SetAllocator`` and counts
  every call that returns memory (malloc / calloc / realloc) with the bytes requested, and
  every free. This is the analogue of the seeds' counting ``GlobalAlloc``: allocs/op counts
  every allocation, not the net. Objects served from CPython's free lists (small ints, tuples
  and floats recycled by the interpreter) never reach the allocator and are not counted.
  Freed byte counts are not available (``free`` does not receive a size); net bytes come
  from tracemalloc. Slowdown: :func:`counter_overhead` measures it.
* **Attribution** (:func:`trace_allocations`): :mod:`tracemalloc` for net and peak bytes and
  the top allocation sites (``file:line``) over the window; it costs several times the
  replay, so it is only for attribution.

A native engine library linked with lob's counter (:mod:`lob.engines.foreign.counting`)
counts its own calls instead (:func:`count_allocations` asks ``engine.allocation_counter()``):
every malloc / calloc / realloc / free and ``operator new`` / ``delete`` its code makes, with
the bytes requested, which is orderbook-rs's counting ``GlobalAlloc`` definition. CPython's
hook never sees those calls, and the native counter never sees the harness's.

The window is the commands from the first to the last timed command (inclusive); the ops
before it run uncounted. Untimed commands inside the window (refills) are counted, and the
per-op figures divide by the number of commands in the window. The harness's own cost
(calling ``step(*row)`` on a no-op engine) is measured and reported beside, never subtracted.
"""

from __future__ import annotations

import gc
import time
import tracemalloc
from dataclasses import asdict, dataclass

import numpy as np

from lob.engines.base import command_tuples
from lob.semantics import OUTCOME_DTYPE, as_commands

PYTHON_METHOD = "PyMem_SetAllocator counting hook (RAW+MEM+OBJ)"
NATIVE_METHOD = ("the engine library's own malloc / calloc / realloc / free and operator new / "
                 "delete calls (its lob_alloc_read counter)")


@dataclass(frozen=True)
class AllocCounts:
    """Allocator calls over a window of ``ops`` commands."""

    ops: int
    allocs: int  # malloc + calloc + realloc(NULL) (+ operator new, native counter)
    reallocs: int  # realloc of an existing block
    frees: int
    bytes_alloc: int  # bytes requested by allocs and reallocs
    method: str = PYTHON_METHOD  # the counter that counted

    @property
    def allocs_per_op(self) -> float:
        return (self.allocs + self.reallocs) / max(1, self.ops)

    @property
    def bytes_per_op(self) -> float:
        return self.bytes_alloc / max(1, self.ops)

    @property
    def frees_per_op(self) -> float:
        return self.frees / max(1, self.ops)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(allocs_per_op=self.allocs_per_op, bytes_per_op=self.bytes_per_op,
                 frees_per_op=self.frees_per_op)
        return d


def _native_or_raise():
    from lob.measure._native import native, native_error

    m = native()
    if m is None:
        raise RuntimeError(f"allocation counting needs the native helper: {native_error()}")
    return m


class counting:
    """Context manager: count allocator calls inside the block (``.counts`` after exit)."""

    def __init__(self, ops: int = 0):
        self.ops = ops
        self.counts: AllocCounts | None = None

    def __enter__(self) -> counting:
        if tracemalloc.is_tracing():
            raise RuntimeError("stop tracemalloc before counting allocations (hooks would nest)")
        self._m = _native_or_raise()
        self._m.alloc_install()
        self._start = self._m.alloc_read()
        return self

    def __exit__(self, *exc) -> None:
        end = self._m.alloc_read()
        self._m.alloc_uninstall()
        a, r, f, b = (e - s for e, s in zip(end, self._start, strict=True))
        self.counts = AllocCounts(self.ops, a, r, f, b)


def _window(cmds: np.ndarray) -> tuple[int, int]:
    t = np.flatnonzero(cmds["timed"])
    if t.size == 0:
        return 0, len(cmds)
    return int(t[0]), int(t[-1]) + 1


def _run(ex, rows) -> None:
    for r in rows:
        ex(*r)


def _prepared(engine, cmds: np.ndarray):
    """Run the untimed prefix; return a thunk that runs the timed window.

    A harness-clock engine runs op by op through ``step``; an engine that times itself (the
    compiled backend) replays the window in one ``replay_into`` call over preallocated
    outcome and fill arrays (allocated here, outside the counted window).
    """
    a, b = _window(cmds)
    engine.clear_fills()
    if engine.clock == "harness":
        rows = command_tuples(cmds)
        _run(engine.step, rows[:a])
        win = rows[a:b]
        return b - a, lambda: _run(engine.step, win)
    pre = np.zeros(a, dtype=OUTCOME_DTYPE)
    engine.replay_into(cmds[:a], pre)
    win = cmds[a:b]
    outs = np.zeros(b - a, dtype=OUTCOME_DTYPE)
    return b - a, lambda: engine.replay_into(win, outs)


def native_counter(engine):
    """The engine library's own allocation counter, or None (a Python or numba engine, or a
    foreign library built without it)."""
    get = getattr(engine, "allocation_counter", None)
    return get() if callable(get) else None


def count_allocations(engine, commands: np.ndarray) -> AllocCounts:
    """Total allocator calls per op of a fresh engine over the timed window: by the engine
    library's own counter when it has one (:func:`native_counter`), else by CPython's hook."""
    ops, run_window = _prepared(engine, as_commands(commands))
    native = native_counter(engine)
    if native is not None:
        native.start()
        try:
            run_window()
        finally:
            counts = native.stop()
        return AllocCounts(ops, *counts, method=NATIVE_METHOD)
    with counting(ops=ops) as c:
        run_window()
    return c.counts


def harness_allocations(n: int = 10_000) -> AllocCounts:
    """Allocator calls of the counting loop itself (``step(*row)`` on a no-op engine)."""

    class _Noop:
        def step(self, kind, otype, side, owner, price, qty, oid, price_hi):
            return (0, 0, 0, 0, 0, 0, 0)

    rows = [(0, 0, 0, 1, 100, 1, 0, 0)] * n
    ex = _Noop().step
    with counting(ops=n) as c:
        _run(ex, rows)
    return c.counts


def trace_allocations(engine, commands: np.ndarray, top: int = 10) -> dict:
    """tracemalloc over the timed window: net and peak bytes, top sites by size (file:line)."""
    ops, run_window = _prepared(engine, as_commands(commands))
    was = tracemalloc.is_tracing()
    if not was:
        tracemalloc.start(1)
    try:
        before = tracemalloc.take_snapshot()
        tracemalloc.reset_peak()
        base, _ = tracemalloc.get_traced_memory()
        run_window()
        cur, peak = tracemalloc.get_traced_memory()
        after = tracemalloc.take_snapshot()
    finally:
        if not was:
            tracemalloc.stop()
    filt = [tracemalloc.Filter(False, tracemalloc.__file__)]
    stats = after.filter_traces(filt).compare_to(before.filter_traces(filt), "lineno")
    sites = [{"site": f"{s.traceback[0].filename}:{s.traceback[0].lineno}",
              "size_diff": int(s.size_diff), "count_diff": int(s.count_diff)}
             for s in stats[:top]]
    return {"ops": ops, "net_bytes": int(cur - base), "peak_bytes": int(peak - base),
            "top_sites": sites}


def counter_overhead(engine_factory, commands: np.ndarray, repeat: int = 3) -> dict:
    """Slowdown of a replay under the counting allocator and under tracemalloc (min of runs).

    ``engine_factory()`` returns a fresh engine. Ratios are taken within one call, so they
    hold on a shared machine better than absolute times do.
    """
    cmds = as_commands(commands)
    rows = command_tuples(cmds)

    def once(mode: str) -> int:
        ex = engine_factory().step
        if mode == "count":
            with counting():
                t0 = time.perf_counter_ns()
                _run(ex, rows)
                t1 = time.perf_counter_ns()
        elif mode == "trace":
            tracemalloc.start(1)
            t0 = time.perf_counter_ns()
            _run(ex, rows)
            t1 = time.perf_counter_ns()
            tracemalloc.stop()
        else:
            t0 = time.perf_counter_ns()
            _run(ex, rows)
            t1 = time.perf_counter_ns()
        return t1 - t0

    # modes interleaved within each repeat (min of runs), after one untimed warm-up run
    once("none")
    best = {"none": float("inf"), "count": float("inf"), "trace": float("inf")}
    was = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeat):
            for mode in best:
                best[mode] = min(best[mode], once(mode))
    finally:
        if was:
            gc.enable()
    base, cnt, trc = best["none"], best["count"], best["trace"]
    return {"plain_ns_per_op": base / len(rows), "counting_slowdown": cnt / base,
            "tracemalloc_slowdown": trc / base}

"""``CompiledEngine``: the numba book behind the same interface as ``PyEngine``.

Python owns the arrays (see :mod:`lob.engines.compiled.book`) and grows them between
kernel calls; the interactive API runs one command through the same kernel as ``replay``.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import numpy as np

from lob.engines import toggles as tg
from lob.engines.base import (
    Interactive,
    ReplayResult,
    as_int,
    set_command_row,
    store_fills,
)
from lob.engines.compiled import _band
from lob.engines.compiled import book as bk
from lob.engines.compiled import kernel as kn
from lob.engines.compiled._band import OWNER_MAP_SIZE, OWNER_TABLE_ENTRIES  # noqa: F401
from lob.engines.compiled.check import MESSAGES, check_book, walk_level
from lob.semantics import (
    COMMAND_DTYPE,
    FILL_DTYPE,
    MAX_ORDERS,
    OUTCOME_DTYPE,
    BookConfig,
    as_commands,
)

# toggle value -> the kernel constant (the values are lob.engines.toggles.VALUES["numba"])
_BEST = {"scan": bk.BEST_SCAN, "bitmap": bk.BEST_BITMAP}
_FOK = {"full": bk.FOK_FULL, "early_exit": bk.FOK_EARLY_EXIT, "level_sums": bk.FOK_LEVEL_SUMS}
_IDS = {"array": bk.IDS_ARRAY, "bitset": bk.IDS_BITSET}


_COMPILED_SOURCES = ("book.py", "check.py", "clock.py", "codes.py", "kernel.py",
                     "prefetch.py")  # the @njit code and the intrinsics it inlines


def _drop_stale_cache(cache_dir: Path | None = None) -> bool:
    """Drop this package's numba cache when any of its sources changed since it was written.

    numba invalidates a cached function when its *own* file changes, not when a function
    it inlines from another module does (``kernel.run`` inlines most of ``book``), so an
    edit to ``book.py`` alone would leave a stale ``run`` in the cache. The cache dir holds
    only this package's entries; they are rebuilt on first use. Returns True if it dropped.
    """
    here = Path(__file__).parent
    digest = hashlib.sha1(b"".join((here / f).read_bytes() for f in _COMPILED_SOURCES))
    if cache_dir is None:
        found = getattr(getattr(kn.run, "_cache", None), "_cache_path", None)
        if not found:  # a numba without this (private) attribute: leave the cache alone
            return False
        cache_dir = Path(found)
    stamp = cache_dir / "lob-sources.sha1"
    try:
        if stamp.read_text() == digest.hexdigest():
            return False
    except OSError:
        pass
    try:
        for f in list(cache_dir.glob("*.nbi")) + list(cache_dir.glob("*.nbc")):
            f.unlink(missing_ok=True)
        cache_dir.mkdir(parents=True, exist_ok=True)
        stamp.write_text(digest.hexdigest())
    except OSError:  # a read-only install: numba then caches elsewhere or not at all
        pass
    return True


_drop_stale_cache()


def _touched(n: int) -> np.ndarray:
    """A zeroed outcome array whose pages are already mapped (np.zeros maps them lazily,
    which would put ~one page fault per 120 commands inside the timed kernel)."""
    return _zeros(n, OUTCOME_DTYPE)


_PAGE = 4096  # bytes; the smallest page size (on larger pages the extra writes are no-ops)


def _zeros(shape, dtype) -> np.ndarray:
    """``np.zeros`` with every page mapped now. np.zeros of a large array is a fresh lazy
    mapping, so its pages would be faulted in (and zeroed) by the kernel's first write to
    each: inside the timed replay, and scaling with the array, not with the work. The
    per-owner level_sums table of ``fok="level_sums"`` (up to 16 MB, written nowhere at
    creation) cost v3@numba ~5 us per command that way on a 2,000-command stream over a
    1M-tick band (10 ms of page faults per fresh engine on a VM), 0.02x its parent v2."""
    return _map(np.zeros(shape, dtype=dtype))


def _map(a: np.ndarray) -> np.ndarray:
    """Map every page of the zeroed, contiguous ``a`` now: one write per page (the OS zeroes
    the rest), so no page fault is left for the kernel."""
    a.reshape(-1).view(np.uint8)[::_PAGE] = 0
    return a


class CompiledEngine(Interactive):
    """A numba ladder book. ``levels`` is always ``"pool"`` (the only level layout the kernel
    has; ``"deque"`` raises ValueError); ``best`` and ``fok`` select the kernel's code paths.
    The engine reads its own clock (``clock = "engine"``): ``replay_timed`` times each timed
    command inside the kernel.

    ``capacity`` is the initial node-pool size; with ``grow=True`` (default) the pool
    doubles between kernel calls whenever it is full, with ``grow=False`` a LIMIT or
    POST_ONLY submit that finds no free node is REJECTED with reason POOL_FULL (no id
    consumed, book unchanged). ``fill_capacity`` is the initial fill buffer (always grows).

    ``ids`` is how a cancel or modify finds its order: ``"bitset"`` (default) checks a
    live-id bitset (one bit per id, cache-resident) before the id -> node index, so an id
    that no longer rests costs no cache miss, and a removal writes one bit instead of the
    index; ``"array"`` reads and writes the id-indexed array alone. Both give identical
    outcomes; the bitset is a backend layout choice like the pool, not a lineage step, and
    ``ids="array"`` is kept so its effect can be measured (see the issue notes).
    """

    name = "compiled"
    clock = "engine"

    def __init__(self, config: BookConfig | None = None, *, levels: str = "pool",
                 best: str = "bitmap", fok: str = "early_exit", stream: str = "plain",
                 capacity: int = 1024, grow: bool = True, fill_capacity: int = 1024,
                 ids: str = "bitset"):
        if config is None:
            config = BookConfig()
        if not isinstance(config, BookConfig):
            raise TypeError(f"config must be a lob.BookConfig, got {type(config).__name__}")
        self.toggles = tg.check("numba", levels=levels, best=best, fok=fok, stream=stream)
        if stream != "plain":
            raise ValueError(f"CompiledEngine runs stream='plain'; stream={stream!r} is "
                             "lob.engines.compiled.engine_v4.PackedEngine")
        if levels != "pool":
            raise ValueError(f"CompiledEngine runs levels='pool'; levels={levels!r} is "
                             "lob.engines.compiled.engine_v4.PackedEngine")
        if ids not in _IDS:
            raise ValueError(f"ids must be one of {sorted(_IDS)}, got {ids!r}")
        capacity = as_int("capacity", capacity)
        fill_capacity = as_int("fill_capacity", fill_capacity)
        if capacity < 1 or fill_capacity < 1:
            raise ValueError(f"capacity and fill_capacity must be >= 1, got {capacity}, "
                             f"{fill_capacity}")
        self.config = config
        self.ids = ids
        self.max_band_width = _band.check(best, fok, config)  # before allocating per price
        w = config.width
        nw0 = (w + 63) // 64
        nw1 = (nw0 + 63) // 64
        sums = fok == "level_sums"
        k = _band.owner_slots(w, fok)
        oslot_size = OWNER_MAP_SIZE if sums else 0
        os_off, oslot_off, size = bk.layout(w, k, oslot_size)
        G = np.zeros(size, dtype=np.int64)
        G[bk.LO:bk.IDS + 1] = [config.min_price, config.max_price, w, int(config.stp),
                               _BEST[best], _FOK[fok], k, 0 if grow else 1, nw0, nw1,
                               os_off, oslot_off, oslot_size, _IDS[ids]]
        G[bk.BEST0] = G[bk.BEST1] = G[bk.FREE] = -1
        levels_view = G[bk.LOFF:os_off].reshape(2 * w, bk.LEVEL_COLS)
        levels_view[:, bk.HEAD] = levels_view[:, bk.TAIL] = -1
        G[oslot_off:] = -1
        _map(G[os_off:oslot_off])  # the level_sums table, the one part not written above
        self._G = G
        self._B = _zeros(2 * nw0 + 2 * nw1, np.uint64)
        self._N = np.zeros((0, bk.NODE_COLS), dtype=np.int64)
        self._grow_pool(capacity)
        self._IDX = np.full(1024, -1, dtype=np.int64)
        self._LV = _zeros(self._IDX.size // 64 + 1, np.uint64)
        self._F = _zeros((fill_capacity, 4), np.int64)
        self._one = np.zeros(1, dtype=COMMAND_DTYPE)
        self._one_out = np.zeros(1, dtype=OUTCOME_DTYPE)
        self.grows = {"pool": 0, "fills": 0, "index": 0}

    # --- growth (outside the kernel) -----------------------------------------------------
    def _grow_pool(self, extra: int) -> None:
        old = self._N.shape[0]
        extra = min(extra, MAX_ORDERS - old)
        if extra <= 0:  # sums of resting quantity fit int64 only up to MAX_ORDERS orders
            raise MemoryError(f"{self.name}: the book holds lob.semantics.MAX_ORDERS = "
                              f"{MAX_ORDERS:,} orders, the most a book may hold")
        new = np.zeros((old + extra, bk.NODE_COLS), dtype=np.int64)  # all rows written below
        new[:old] = self._N
        new[old:, bk.NXT] = np.arange(old + 1, old + extra + 1)
        new[-1, bk.NXT] = self._G[bk.FREE]
        self._G[bk.FREE] = old
        self._N = new

    def _grow(self, what: int) -> None:
        if what == kn.GROW_POOL:
            self._grow_pool(self._N.shape[0])
            self.grows["pool"] += 1
        elif what == kn.GROW_FILLS:
            need = int(self._G[bk.NFILL] + self._G[bk.NLIVE]) + 1
            f = _zeros((max(2 * self._F.shape[0], need), 4), np.int64)
            f[: self._F.shape[0]] = self._F
            self._F = f
            self.grows["fills"] += 1
        elif what == kn.GROW_INDEX:
            self._grow_index(2 * self._IDX.size)
            self.grows["index"] += 1
        else:
            raise RuntimeError(f"kernel returned unknown code {what}")

    def _grow_index(self, size: int) -> None:
        idx = np.full(size, -1, dtype=np.int64)
        idx[: self._IDX.size] = self._IDX
        lv = _zeros(size // 64 + 1, np.uint64)
        lv[: self._LV.size] = self._LV
        self._IDX, self._LV = idx, lv

    def _run(self, cmds: np.ndarray, out: np.ndarray, durs: np.ndarray | None,
             timed: int = 0) -> int:
        """Run the kernel over every command, growing arrays as asked; returns ns spent.
        ``timed``: the clock of ``durs`` (:func:`lob.engines.compiled.clock.capture_clock`)."""
        timed = int(timed) if durs is not None else 0
        if durs is None:
            durs = np.zeros(0, dtype=np.int64)
        elapsed = 0
        i = 0
        while True:
            t0 = time.perf_counter_ns()
            i, code = kn.run(cmds, i, out, self._F, self._N, self._IDX, self._LV, self._B,
                             self._G,
                             timed, durs)
            elapsed += time.perf_counter_ns() - t0
            if code == kn.DONE:
                return elapsed
            self._grow(code)

    # --- batch -----------------------------------------------------------------------
    def _prepare(self, commands: np.ndarray) -> np.ndarray:
        cmds = np.ascontiguousarray(as_commands(commands))
        need = int(self._G[bk.NEXT_ID]) + int(np.count_nonzero(cmds["kind"] == 0)) + 2
        if need > self._IDX.size:  # ids are sequential: size the index once, up front
            self._grow_index(need)
        self._G[bk.NFILL] = 0  # like PyEngine.replay, fills restart with each replay
        return cmds

    def replay(self, commands: np.ndarray) -> ReplayResult:
        """Run every command in one compiled call (re-entered only to grow arrays)."""
        cmds = self._prepare(commands)
        out = _touched(len(cmds))
        elapsed = self._run(cmds, out, None)
        return ReplayResult(self.name, out, self.fills, elapsed, self)

    def replay_into(self, commands: np.ndarray, outcomes: np.ndarray,
                    fills: np.ndarray | None = None) -> int:
        """Run the kernel over ``commands`` on the current book, straight into the caller's
        ``outcomes[:n]``; returns the number of fills (copied to ``fills[:k]`` if given; the
        fill record is left empty)."""
        cmds = self._prepare(commands)
        n = len(cmds)
        if outcomes.dtype != OUTCOME_DTYPE or len(outcomes) < n:
            raise ValueError(f"outcomes must be an OUTCOME_DTYPE array of at least {n} rows")
        self._run(cmds, outcomes[:n], None)
        k = int(self._G[bk.NFILL])
        if fills is not None:
            store_fills(fills, self.fills)
        self._G[bk.NFILL] = 0
        return k

    def replay_timed(self, commands: np.ndarray) -> tuple[ReplayResult, np.ndarray]:
        """``replay`` plus one in-kernel duration (ns) per command whose ``timed`` flag is set.

        Each duration is two reads of the in-kernel clock around the command: the CPU's
        cycle counter where the TSC is invariant (its rate measured against CLOCK_MONOTONIC
        at the start of the capture, durations rounded to ns), else
        ``clock_gettime(CLOCK_MONOTONIC)`` (:meth:`clock_overhead` says which, and what a
        read of each costs).
        """
        from lob.engines.compiled.clock import capture_clock, to_ns

        cmds = self._prepare(commands)
        out = _touched(len(cmds))
        durs = np.ones(int(np.count_nonzero(cmds["timed"])), dtype=np.int64)
        self._G[bk.NDUR] = 0
        timed, rate, why = capture_clock()
        elapsed = self._run(cmds, out, durs, timed)
        self._clock_used = (rate, why)
        return ReplayResult(self.name, out, self.fills, elapsed, self), to_ns(durs, rate)

    def clock_overhead(self, samples: int = 100_000) -> dict:
        """The in-kernel clock of the last ``replay_timed`` (else the one it would use) and
        the cost of one read (back-to-back reads in compiled code), with ``clocks``: the read
        cost and resolution of both in-kernel clocks."""
        from lob.engines.compiled.clock import kernel_clock

        k = kernel_clock(min(samples, 20_000))
        rate, why = getattr(self, "_clock_used", (k["ns_per_tick"], k["why"]))
        if rate is not None:
            src = (f"rdtsc in-kernel ({rate:.3g} ns a tick, rate measured against "
                   "CLOCK_MONOTONIC at the capture's start)")
            used = k["clocks"].get("rdtsc", {"read_ns": k["read_ns"]})
            res = rate
        else:
            src = f"clock_gettime(CLOCK_MONOTONIC) in-kernel (rdtsc not used: {why})"
            used = k["clocks"]["clock_gettime(CLOCK_MONOTONIC)"]
            res = used["resolution_ns"]
        return {"source": src, "min_ns": used["read_ns"], "median_ns": used["read_ns"],
                "p99_ns": used["read_ns"], "resolution_ns": res, "samples": min(samples, 20_000),
                "clocks": k["clocks"]}

    def kernel_state(self, grow: int = kn.DONE) -> tuple:
        """The live book arrays ``(F, N, IDX, LV, B, G)``, for compiled code that runs
        :func:`lob.engines.compiled.kernel.run` itself (the pipeline's compiled engine loop).

        Contract: ``kernel.run(cmds, start, out, F, N, IDX, LV, B, G, timed, durs)`` with
        these arrays, in order, runs commands on this book exactly as :meth:`replay` does.
        When it returns a code other than ``kernel.DONE`` (an array might be too small for
        the next command), call ``kernel_state(code)``: it grows what the code names and
        returns the new arrays (the old ones must not be used again), then resume at the
        returned command index. The arrays are the engine's own (no copies) and stay valid
        until the next call of any method of this engine. The caller may set ``G[NFILL]``
        (:mod:`lob.engines.compiled.book`) to 0 to discard the fill record, as ``replay``
        does at its start; it must not write anything else.
        """
        if grow != kn.DONE:
            self._grow(grow)
        return self._F, self._N, self._IDX, self._LV, self._B, self._G

    @property
    def fills(self) -> np.ndarray:
        return self._F[: self._G[bk.NFILL]].copy().view(FILL_DTYPE).reshape(-1)

    def clear_fills(self) -> None:
        self._G[bk.NFILL] = 0

    # --- one command -------------------------------------------------------------------
    def step(self, kind, otype, side, owner, price, qty, oid, price_hi) -> tuple:
        """Run one command (plain ints, ``EXEC_FIELDS`` order) through the kernel; returns
        the outcome tuple. A value outside its command field's range raises ValueError."""
        row = self._one
        set_command_row(row, (kind, otype, side, owner, price, qty, oid, price_hi))
        if self._G[bk.NEXT_ID] + 2 > self._IDX.size:
            self._grow(kn.GROW_INDEX)
        self._run(row, self._one_out, None)
        return self._one_out[0].item()

    # --- views and invariants ----------------------------------------------------------
    def _levels(self, side: int) -> np.ndarray:
        """Non-empty level indices of one side in priority order."""
        w = self.config.width
        heads = self._G[bk.LOFF + bk.HEAD:bk.LOFF + 2 * w * bk.LEVEL_COLS:bk.LEVEL_COLS]
        xs = np.flatnonzero(heads[side * w:(side + 1) * w] >= 0)
        return xs[::-1] if side == 0 else xs

    def snapshot(self, depth: int = 10) -> dict:
        out = {}
        w, lo = self.config.width, self.config.min_price
        for side, key in ((0, "bids"), (1, "asks")):
            rows = []
            for x in self._levels(side)[:depth]:
                nodes = walk_level(self._N, self._G, side * w + x)
                rows.append((int(lo + x), int(self._N[nodes, bk.QTY].sum()), len(nodes)))
            out[key] = rows
        return out

    def resting(self) -> list[tuple]:
        """(id, owner, side, price, qty) of every resting order, in priority order per side."""
        out = []
        w, lo = self.config.width, self.config.min_price
        for side in (0, 1):
            for x in self._levels(side):
                for node in walk_level(self._N, self._G, side * w + x):
                    n = self._N[node]
                    out.append((int(n[bk.OID]), int(n[bk.OWN]), side, int(lo + x),
                                int(n[bk.QTY])))
        return out

    def check(self) -> None:
        code, where = check_book(self._N, self._IDX, self._LV, self._B, self._G)
        if code:
            raise AssertionError(f"{self.name}: {MESSAGES[code]} (at {where})")

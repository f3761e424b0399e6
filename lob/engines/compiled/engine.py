"""The compiled engines' Python side: :class:`KernelEngine`, the base both layouts share
(growth between kernel calls, replay, replay_into, replay_timed, step, snapshot, resting,
check, kernel_state), and :class:`CompiledEngine`, the index-linked node pool of
:mod:`lob.engines.compiled.book` run by :mod:`lob.engines.compiled.kernel` (v0+pool..v3).
The packed layout (v4, v5) is :class:`lob.engines.compiled.engine_v4.PackedEngine`.

A layout supplies its arrays and kernel call (``_allocate``, ``_arrays``, ``_call``), its
node pool and id index (``_grow_pool``, ``_new_index``), its level walk (``_levels``,
``_orders``) and its invariant checker (``_check``); everything else is here, once.

Python owns the arrays and grows them between kernel calls; ``replay`` costs little beyond
the kernel: the id index is sized once from the stream's length (no pass over the stream to
count its submits); the outcome array, the fill buffer and the id index come from a pool of
pre-mapped memory that earlier replays released (:mod:`lob.engines.compiled._buffers`: a
fresh array of tens of megabytes costs a page fault per 4 KB page, as much time as the kernel
on a VM); and the fills of the result are a view of the engine's own buffer, not a copy (a
later replay on the same engine writes a fresh buffer, so an earlier result is never
overwritten).
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
from lob.engines.compiled import _buffers as bf
from lob.engines.compiled import book as bk
from lob.engines.compiled import kernel as kn
from lob.engines.compiled import state as st
from lob.engines.compiled.bitmap import words
from lob.engines.compiled.check import MESSAGES, check_pool, walk_level
from lob.engines.compiled.codes import DONE, GROW_FILLS, GROW_INDEX, GROW_POOL
from lob.semantics import (
    COMMAND_DTYPE,
    FILL_DTYPE,
    MAX_ORDERS,
    OUTCOME_DTYPE,
    BookConfig,
    as_commands,
)

_IDS = {"array": st.IDS_ARRAY, "bitset": st.IDS_BITSET}
_PRESIZE = 1 << 16  # nodes and fill rows reserved from a stream's length (at most)


_COMPILED_SOURCES = ("bitmap.py", "book.py", "check.py", "clock.py", "codes.py", "entry.py",
                     "kernel.py", "kernel_v4.py", "ops.py", "prefetch.py", "state.py")  # the
# @njit code and the intrinsics it inlines


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


class KernelEngine(Interactive):
    """What both compiled layouts share: a numba book behind the same interface as
    ``PyEngine``. The engine reads its own clock (``clock = "engine"``): ``replay_timed``
    times each timed command inside the kernel.

    ``capacity`` is the initial node-pool size; with ``grow=True`` (default) the pool
    doubles between kernel calls whenever it is full, with ``grow=False`` a LIMIT or
    POST_ONLY submit that finds no free node is REJECTED with reason POOL_FULL (no id
    consumed, book unchanged). ``fill_capacity`` is the initial fill buffer (always grows).
    """

    clock = "engine"
    layout = ""  # the one ``levels`` value a layout runs

    def __init__(self, config: BookConfig | None, toggles: dict, capacity: int, grow: bool,
                 fill_capacity: int, **options):
        if config is None:
            config = BookConfig()
        if not isinstance(config, BookConfig):
            raise TypeError(f"config must be a lob.BookConfig, got {type(config).__name__}")
        self.toggles = tg.check("numba", **toggles)
        self._refuse(**toggles)
        capacity = as_int("capacity", capacity)
        fill_capacity = as_int("fill_capacity", fill_capacity)
        if capacity < 1 or fill_capacity < 1:
            raise ValueError(f"capacity and fill_capacity must be >= 1, got {capacity}, "
                             f"{fill_capacity}")
        self.config = config
        # a band too wide is refused before allocating per price
        self.max_band_width = _band.check(toggles["best"], toggles["fok"], config)
        S = np.zeros(st.S_SIZE, dtype=np.int64)
        w = config.width
        nw0, nw1 = words(w)
        S[st.LO:st.NW1 + 1] = [config.min_price, config.max_price, w, int(config.stp),
                               st.FOK[toggles["fok"]], _band.owner_slots(w, toggles["fok"]),
                               0 if grow else 1, nw0, nw1]
        S[st.BEST_MODE] = st.BEST[toggles["best"]]
        S[st.BEST0] = S[st.BEST1] = S[st.FREE] = -1
        self._allocate(S, **options)  # sets self._S: S itself, or an array that begins with it
        self._B = bf.zeros(2 * nw0 + 2 * nw1, np.uint64)
        self._grow_pool(capacity)
        self._IDX = self._new_index(1024)
        self._LV = bf.zeros(self._IDX.size // 64 + 1, np.uint64)
        self._F = bf.zeros((fill_capacity, 4), np.int64)
        self._lent = False  # a result holds a view of _F
        self._one = np.zeros(1, dtype=COMMAND_DTYPE)
        self._one_out = np.zeros(1, dtype=OUTCOME_DTYPE)
        self.grows = {"pool": 0, "fills": 0, "index": 0}

    def _refuse(self, levels: str, best: str, fok: str, **switches: str) -> None:
        if levels != self.layout:
            raise ValueError(f"{type(self).__name__} runs levels={self.layout!r}; levels="
                             f"{levels!r} is {_ENGINE_OF.get(levels, 'not a compiled layout')}")

    # --- growth (outside the kernel) -----------------------------------------------------
    def _grow(self, what: int) -> None:
        if what == GROW_POOL:
            self._grow_pool(self._pool_size())
            self.grows["pool"] += 1
        elif what == GROW_FILLS:
            need = int(self._S[st.NFILL] + self._S[st.NLIVE]) + 1
            self._new_fills(max(2 * self._F.shape[0], need))
            self.grows["fills"] += 1
        elif what == GROW_INDEX:
            self._grow_index(2 * self._IDX.size)
            self.grows["index"] += 1
        else:
            raise RuntimeError(f"kernel returned unknown code {what}")

    def _new_fills(self, rows: int) -> None:
        """A fresh fill buffer of ``rows`` holding this replay's fills so far."""
        nf = int(self._S[st.NFILL])
        f = bf.take_array((rows, 4), np.int64)
        f[:nf] = self._F[:nf]
        self._F, self._lent = f, False

    def _grow_index(self, size: int) -> None:
        idx = self._new_index(size)
        idx[: self._IDX.size] = self._IDX
        lv = bf.zeros(size // 64 + 1, np.uint64)
        lv[: self._LV.size] = self._LV
        self._IDX, self._LV = idx, lv

    def _run(self, cmds: np.ndarray, out: np.ndarray, durs: np.ndarray | None,
             timed: int = 0) -> int:
        """Run the kernel over every command, growing arrays as asked; returns ns spent.
        ``timed``: the clock of ``durs`` (:func:`lob.engines.compiled.clock.capture_clock`)."""
        if self._lent:  # a result holds a view of the fill buffer: write a fresh one
            self._new_fills(self._F.shape[0])
        timed = int(timed) if durs is not None else 0
        elapsed = 0
        i = 0
        while True:
            t0 = time.perf_counter_ns()
            i, code = self._call(cmds, i, out, durs, timed)
            elapsed += time.perf_counter_ns() - t0
            if code == DONE:
                return elapsed
            self._grow(code)

    # --- batch -----------------------------------------------------------------------
    def _prepare(self, commands: np.ndarray) -> np.ndarray:
        cmds = np.ascontiguousarray(as_commands(commands))
        n = len(cmds)
        # ids are sequential and a command issues at most one: size the index once, up front,
        # from the command count (counting the submits would be a pass over the whole stream)
        need = int(self._S[st.NEXT_ID]) + n + 2
        if need > self._IDX.size:
            self._grow_index(need)
        # room the stream will likely need, reserved once instead of by several doublings
        # (each one a kernel re-entry): nodes and fills up to _PRESIZE, never more
        want = min(n, _PRESIZE)
        if self._S[st.FIXED] == 0 and self._pool_size() < want:
            self._grow_pool(want - self._pool_size())
        if self._F.shape[0] < want:
            self._new_fills(want)
        self._S[st.NFILL] = 0  # like PyEngine.replay, fills restart with each replay
        return cmds

    def replay(self, commands: np.ndarray) -> ReplayResult:
        """Run every command in one compiled call (re-entered only to grow arrays)."""
        cmds = self._prepare(commands)
        out = bf.take_array(len(cmds), OUTCOME_DTYPE)  # every record is written
        elapsed = self._run(cmds, out, None)
        return ReplayResult(self.name, out, self._lend_fills(), elapsed, self)

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
        k = int(self._S[st.NFILL])
        if fills is not None:
            store_fills(fills, self._fill_view())
        self._S[st.NFILL] = 0
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
        out = bf.take_array(len(cmds), OUTCOME_DTYPE)  # every record is written
        durs = np.ones(int(np.count_nonzero(cmds["timed"])), dtype=np.int64)
        self._S[st.NDUR] = 0
        timed, rate, why = capture_clock()
        elapsed = self._run(cmds, out, durs, timed)
        self._clock_used = (rate, why)
        return (ReplayResult(self.name, out, self._lend_fills(), elapsed, self),
                to_ns(durs, rate))

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

    def kernel_state(self, grow: int = DONE) -> tuple:
        """The live book, for compiled code that runs the kernel itself (the pipeline's
        compiled engine loop): the layout's arrays (and switches) as one tuple, for
        :func:`lob.engines.compiled.entry.run_state`, which runs commands on it exactly as
        :meth:`replay` does, whichever layout it is.

        Contract: when the kernel returns a code other than ``DONE`` (an array might be too
        small for the next command), call ``kernel_state(code)``: it grows what the code
        names and returns the new state (the old one must not be used again), then resume
        at the returned command index. The arrays are the engine's own (no copies) and stay
        valid until the next call of any method of this engine; the caller writes nothing in
        them but what the kernel writes (and the fill count, which ``run_state`` resets).
        """
        if grow != DONE:
            self._grow(grow)
        return self._arrays()

    def reserve(self, ids: int, orders: int) -> None:
        """Room for ``ids`` more order ids and ``orders`` resting orders (node pool and fill
        buffer) now, so that no kernel call has to stop and grow for them (the pipeline
        sizes the book before it says it is ready, as a live engine would)."""
        if int(self._S[st.NEXT_ID]) + ids + 2 > self._IDX.size:
            self._grow_index(int(self._S[st.NEXT_ID]) + ids + 2)
        if self._S[st.FIXED] == 0 and self._pool_size() < orders + 2:
            self._grow_pool(orders + 2 - self._pool_size())
        if self._F.shape[0] < orders + 2:
            self._new_fills(orders + 2)

    def _lend_fills(self) -> np.ndarray:
        """The fills of this replay as a view for a result; the next replay takes a fresh
        buffer instead of overwriting it."""
        self._lent = True
        return self._fill_view()

    def _fill_view(self) -> np.ndarray:
        return self._F[: self._S[st.NFILL]].view(FILL_DTYPE).reshape(-1)

    @property
    def fills(self) -> np.ndarray:
        return self._fill_view().copy()

    def clear_fills(self) -> None:
        self._S[st.NFILL] = 0

    # --- one command -------------------------------------------------------------------
    def step(self, kind, otype, side, owner, price, qty, oid, price_hi) -> tuple:
        """Run one command (plain ints, ``EXEC_FIELDS`` order) through the kernel; returns
        the outcome tuple. A value outside its command field's range raises ValueError."""
        row = self._one
        set_command_row(row, (kind, otype, side, owner, price, qty, oid, price_hi))
        if self._S[st.NEXT_ID] + 2 > self._IDX.size:
            self._grow(GROW_INDEX)
        self._run(row, self._one_out, None)
        return self._one_out[0].item()

    # --- views and invariants ----------------------------------------------------------
    def snapshot(self, depth: int = 10) -> dict:
        out = {}
        lo = self.config.min_price
        for side, key in ((0, "bids"), (1, "asks")):
            rows = []
            for x in self._levels(side)[:depth]:
                orders = self._orders(side, int(x))
                rows.append((int(lo + x), sum(q for _, _, q in orders), len(orders)))
            out[key] = rows
        return out

    def resting(self) -> list[tuple]:
        """(id, owner, side, price, qty) of every resting order, in priority order per side."""
        lo = self.config.min_price
        return [(oid, owner, side, int(lo + x), qty) for side in (0, 1)
                for x in self._levels(side) for oid, owner, qty in self._orders(side, int(x))]

    def check(self) -> None:
        code, where = self._check()
        if code:
            raise AssertionError(f"{self.name}: {MESSAGES[code]} (at {where})")


class CompiledEngine(KernelEngine):
    """The index-linked node pool (``levels="pool"``: 64-byte int64 rows, :mod:`.book`), run
    by :mod:`.kernel`; ``best`` and ``fok`` select the kernel's code paths (runtime
    constants; ``levels="deque"`` raises ValueError).

    ``ids`` is how a cancel or modify finds its order: ``"bitset"`` (default) checks a
    live-id bitset (one bit per id, cache-resident) before the id -> node index, so an id
    that no longer rests costs no cache miss, and a removal writes one bit instead of the
    index; ``"array"`` reads and writes the id-indexed array alone. Both give identical
    outcomes; the bitset is a backend layout choice like the pool, not a lineage step, and
    ``ids="array"`` is kept so its effect can be measured.
    """

    name = "compiled"
    layout = "pool"

    def __init__(self, config: BookConfig | None = None, *, levels: str = "pool",
                 best: str = "bitmap", fok: str = "early_exit", stream: str = "plain",
                 loop: str = "single", select: str = "branch", ownsums: str = "always",
                 capacity: int = 1024, grow: bool = True, fill_capacity: int = 1024,
                 ids: str = "bitset"):
        if ids not in _IDS:
            raise ValueError(f"ids must be one of {sorted(_IDS)}, got {ids!r}")
        self.ids = ids
        super().__init__(config, dict(levels=levels, best=best, fok=fok, stream=stream,
                                      loop=loop, select=select, ownsums=ownsums),
                         capacity, grow, fill_capacity, ids=ids)

    def _refuse(self, levels: str, best: str, fok: str, **switches: str) -> None:
        for name, value in switches.items():  # the packed kernel's switches
            if value != tg.DEFAULTS[name]:
                raise ValueError(f"CompiledEngine runs {name}={tg.DEFAULTS[name]!r}; "
                                 f"{name}={value!r} is "
                                 "lob.engines.compiled.engine_v4.PackedEngine")
        super()._refuse(levels, best, fok, **switches)

    def _allocate(self, S: np.ndarray, ids: str) -> None:
        w = int(S[st.WIDTH])
        k = int(S[st.K])
        oslot_size = _band.OWNER_MAP_SIZE if S[st.FOK_MODE] == st.FOK_LEVEL_SUMS else 0
        os_off, oslot_off, size = bk.layout(w, k, oslot_size)
        G = np.zeros(size, dtype=np.int64)
        G[:st.S_SIZE] = S
        G[st.OSLOT_SIZE] = oslot_size
        G[st.OS_OFF], G[st.OSLOT_OFF], G[st.IDS] = os_off, oslot_off, _IDS[ids]
        levels_view = G[bk.LOFF:os_off].reshape(2 * w, bk.LEVEL_COLS)
        levels_view[:, bk.HEAD] = levels_view[:, bk.TAIL] = -1
        G[oslot_off:] = -1
        bf.mapped(G[os_off:oslot_off])  # the level_sums table, the one part not written above
        self._G = self._S = G
        self._N = np.zeros((0, bk.NODE_COLS), dtype=np.int64)

    def _arrays(self) -> tuple:
        return self._F, self._N, self._IDX, self._LV, self._B, self._G

    def _call(self, cmds, i, out, durs, timed):
        return kn.run(cmds, i, out, self._F, self._N, self._IDX, self._LV, self._B, self._G,
                      timed, _NO_DURS if durs is None else durs)

    def _pool_size(self) -> int:
        return self._N.shape[0]

    def _grow_pool(self, extra: int) -> None:
        old = self._N.shape[0]
        extra = min(extra, MAX_ORDERS - old)
        if extra <= 0:  # sums of resting quantity fit int64 only up to MAX_ORDERS orders
            raise MemoryError(f"{self.name}: the book holds lob.semantics.MAX_ORDERS = "
                              f"{MAX_ORDERS:,} orders, the most a book may hold")
        new = np.zeros((old + extra, bk.NODE_COLS), dtype=np.int64)  # all rows written below
        new[:old] = self._N
        new[old:, bk.NXT] = np.arange(old + 1, old + extra + 1)
        new[-1, bk.NXT] = self._G[st.FREE]
        self._G[st.FREE] = old
        self._N = new

    def _new_index(self, size: int) -> np.ndarray:
        return np.full(size, -1, dtype=np.int64)  # -1: not resting (read with ids="array")

    def _levels(self, side: int) -> np.ndarray:
        """Non-empty level indices of one side in priority order."""
        w = self.config.width
        heads = self._G[bk.LOFF + bk.HEAD:bk.LOFF + 2 * w * bk.LEVEL_COLS:bk.LEVEL_COLS]
        xs = np.flatnonzero(heads[side * w:(side + 1) * w] >= 0)
        return xs[::-1] if side == 0 else xs

    def _orders(self, side: int, x: int) -> list[tuple[int, int, int]]:
        """(id, owner, qty) of level ``x`` of ``side``, head to tail."""
        rows = self._N[walk_level(self._N, self._G, side * self.config.width + x)]
        return [(int(r[bk.OID]), int(r[bk.OWN]), int(r[bk.QTY])) for r in rows]

    def _check(self) -> tuple[int, int]:
        return check_pool(self._N, self._IDX, self._LV, self._B, self._G)


_NO_DURS = np.zeros(0, dtype=np.int64)
_ENGINE_OF = {"pool": "lob.engines.compiled.engine.CompiledEngine",
              "packed": "lob.engines.compiled.engine_v4.PackedEngine"}

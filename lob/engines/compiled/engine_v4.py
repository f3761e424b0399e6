"""``PackedEngine``: the v4 compiled book (:mod:`lob.engines.compiled.kernel_v4`) behind the same
interface as :class:`~lob.engines.compiled.engine.CompiledEngine`.

Python owns the arrays and grows them between kernel calls, as for the v0..v3 kernel. Its
``replay`` is built to cost little beyond the kernel: the id index is sized once from the
stream's length (no pass over the stream to count its submits); the outcome array, the fill
buffer and the id index come from a pool of pre-mapped memory that earlier replays released
(:mod:`lob.engines.compiled._buffers`: a fresh array of tens of megabytes costs a page fault
per 4 KB page, as much time as the kernel on this VM class); and the fills of the result are a
view of the engine's own buffer, not a copy (a later replay on the same engine writes a fresh
buffer, so an earlier result is never overwritten).
"""

from __future__ import annotations

import time

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
from lob.engines.compiled import kernel_v4 as k4
from lob.engines.compiled.engine import CompiledEngine, _zeros
from lob.semantics import (
    COMMAND_DTYPE,
    FILL_DTYPE,
    MAX_ORDERS,
    OUTCOME_DTYPE,
    BookConfig,
    StpMode,
    as_commands,
)

_FOK = {"full": k4.FOK_FULL, "early_exit": k4.FOK_EARLY_EXIT, "level_sums": k4.FOK_LEVEL_SUMS}
_PRESIZE = 1 << 16  # nodes and fill rows reserved from a stream's length (2 MB each)


class PackedEngine(Interactive):
    """The compiled book with packed 32-byte order records (``levels="packed"``). ``best`` is
    ``"bitmap"`` (the two-level non-empty-level bitmap with a cached best, as v1..v3);
    ``fok`` is ``full`` | ``early_exit`` | ``level_sums``; ``stream`` is ``plain`` (v4) or
    ``prefetch`` (v5: the commands and outcome records prefetched ahead of the one in
    hand). ``capacity``, ``grow`` and
    ``fill_capacity`` mean what they mean for ``CompiledEngine``; the id index is always
    the live-id bitset in front of the id -> node array."""

    name = "compiled-packed"
    clock = "engine"

    def __init__(self, config: BookConfig | None = None, *, levels: str = "packed",
                 best: str = "bitmap", fok: str = "level_sums", stream: str = "plain",
                 capacity: int = 1024, grow: bool = True, fill_capacity: int = 1024):
        if config is None:
            config = BookConfig()
        if not isinstance(config, BookConfig):
            raise TypeError(f"config must be a lob.BookConfig, got {type(config).__name__}")
        self.toggles = tg.check("numba", levels=levels, best=best, fok=fok, stream=stream)
        if levels != "packed" or best != "bitmap":
            raise ValueError(f"PackedEngine runs levels='packed' with best='bitmap', got "
                             f"levels={levels!r}, best={best!r}")
        capacity = as_int("capacity", capacity)
        fill_capacity = as_int("fill_capacity", fill_capacity)
        if capacity < 1 or fill_capacity < 1:
            raise ValueError(f"capacity and fill_capacity must be >= 1, got {capacity}, "
                             f"{fill_capacity}")
        # stream="prefetch" (v5): the kernel's specialisation that prefetches the command and
        # outcome streams; None compiles one with no prefetch at all (v4), as durs=None does
        # for the clock
        self._ahead = k4.STREAM_AHEAD if stream == "prefetch" else None
        self.config = config
        self.max_band_width = _band.check(best, fok, config)  # before allocating per price
        w = config.width
        nw0 = (w + 63) // 64
        nw1 = (nw0 + 63) // 64
        sums = fok == "level_sums"
        k = _band.owner_slots(w, fok)
        ownsums = sums and config.stp != StpMode.NONE
        osz = _band.OWNER_MAP_SIZE if ownsums else 0
        S = np.zeros(k4.S_SIZE, dtype=np.int64)
        S[k4.LO:k4.OWNSUMS + 1] = [config.min_price, config.max_price, w, int(config.stp),
                                   _FOK[fok], k, 0 if grow else 1, nw0, nw1, osz,
                                   1 if ownsums else 0]
        S[k4.BEST0] = S[k4.BEST1] = S[k4.FREE] = -1
        self._S = S
        L = np.zeros(2 * w, dtype=k4.LEVEL_DTYPE)  # row 2 * (price - min_price) + side
        L["head"] = L["tail"] = -1
        self._L = L
        OS = _zeros(osz + (2 * w * k if ownsums else 0) + 1, np.int64)
        OS[:osz] = -1
        self._OS = OS
        self._B = _zeros(2 * nw0 + 2 * nw1, np.uint64)
        self._ND = np.zeros(0, dtype=k4.NODE_DTYPE)
        self._grow_pool(capacity)
        self._IDX = np.zeros(1024, dtype=np.int32)  # id -> node (int32, like the links)
        self._LV = _zeros(self._IDX.size // 64 + 1, np.uint64)
        self._F = _zeros((fill_capacity, 4), np.int64)
        self._lent = False  # a result holds a view of _F
        self._one = np.zeros(1, dtype=COMMAND_DTYPE)
        self._one_out = np.zeros(1, dtype=OUTCOME_DTYPE)
        self.grows = {"pool": 0, "fills": 0, "index": 0}

    # --- growth (outside the kernel) -----------------------------------------------------
    def _grow_pool(self, extra: int) -> None:
        old = self._ND.shape[0]
        extra = min(extra, k4.MAX_NODES - old)
        if extra <= 0:
            raise MemoryError(f"{self.name}: the pool holds at most {k4.MAX_NODES:,} orders "
                              f"(int32 node links; lob.semantics.MAX_ORDERS is {MAX_ORDERS:,})")
        new = np.zeros(old + extra, dtype=k4.NODE_DTYPE)  # every page written below
        new[:old] = self._ND
        new["nxt"][old:] = np.arange(old + 1, old + extra + 1)
        new["nxt"][-1] = self._S[k4.FREE]
        self._S[k4.FREE] = old
        self._ND = new

    def _grow(self, what: int) -> None:
        if what == k4.GROW_POOL:
            self._grow_pool(self._ND.shape[0])
            self.grows["pool"] += 1
        elif what == k4.GROW_FILLS:
            need = int(self._S[k4.NFILL] + self._S[k4.NLIVE]) + 1
            nf = int(self._S[k4.NFILL])
            f = bf.take_array((max(2 * self._F.shape[0], need), 4), np.int64)
            f[:nf] = self._F[:nf]
            self._F = f
            self.grows["fills"] += 1
        elif what == k4.GROW_INDEX:
            self._grow_index(2 * self._IDX.size)
            self.grows["index"] += 1
        else:
            raise RuntimeError(f"kernel returned unknown code {what}")

    def _grow_index(self, size: int) -> None:
        idx = bf.take_array(size, np.int32)  # an entry is read only while its bit is set
        idx[: self._IDX.size] = self._IDX
        lv = _zeros(size // 64 + 1, np.uint64)
        lv[: self._LV.size] = self._LV
        self._IDX, self._LV = idx, lv

    def _run(self, cmds: np.ndarray, out: np.ndarray, durs: np.ndarray | None,
             timed: int = 0) -> int:
        """Run the kernel over every command, growing arrays as asked; returns ns spent.
        ``timed``: the clock of ``durs`` (:func:`lob.engines.compiled.clock.capture_clock`)."""
        if self._lent:  # a result holds a view of the fill buffer: write a fresh one
            nf = int(self._S[k4.NFILL])
            f = bf.take_array(self._F.shape, np.int64)
            f[:nf] = self._F[:nf]
            self._F, self._lent = f, False
        timed = int(timed) if durs is not None else 0
        elapsed = 0
        i = 0
        while True:
            t0 = time.perf_counter_ns()
            i, code = k4.run(cmds, i, out, self._F, self._ND, self._L, self._IDX, self._LV,
                             self._B, self._OS, self._S, timed, durs, self._ahead)
            elapsed += time.perf_counter_ns() - t0
            if code == k4.DONE:
                return elapsed
            self._grow(code)

    # --- batch -----------------------------------------------------------------------
    def _prepare(self, commands: np.ndarray) -> np.ndarray:
        cmds = np.ascontiguousarray(as_commands(commands))
        n = len(cmds)
        # ids are sequential and a command issues at most one: size the index once, up front,
        # from the command count. Counting the submits instead is a pass over the whole
        # stream (40 bytes a command, beyond the cache on a 1M-command stream): ~4 ns a
        # command, more than the rest of replay's cost outside the kernel
        need = int(self._S[k4.NEXT_ID]) + n + 2
        if need > self._IDX.size:
            self._grow_index(need)
        # room the stream will likely need, reserved once instead of by several doublings
        # (each one a kernel re-entry): nodes and fills up to _PRESIZE, never more
        want = min(n, _PRESIZE)
        if self._S[k4.FIXED] == 0 and self._ND.shape[0] < want:
            self._grow_pool(want - self._ND.shape[0])
        if self._F.shape[0] < want:
            f = bf.take_array((want, 4), np.int64)
            nf = int(self._S[k4.NFILL])
            f[:nf] = self._F[:nf]
            self._F, self._lent = f, False
        self._S[k4.NFILL] = 0  # like PyEngine.replay, fills restart with each replay
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
        k = int(self._S[k4.NFILL])
        if fills is not None:
            store_fills(fills, self._fill_view())
        self._S[k4.NFILL] = 0
        return k

    def replay_timed(self, commands: np.ndarray) -> tuple[ReplayResult, np.ndarray]:
        """``replay`` plus one in-kernel duration (ns) per command whose ``timed`` flag is
        set (two reads of the in-kernel clock around the command: see
        :meth:`CompiledEngine.replay_timed`)."""
        from lob.engines.compiled.clock import capture_clock, to_ns

        cmds = self._prepare(commands)
        out = bf.take_array(len(cmds), OUTCOME_DTYPE)  # every record is written
        durs = np.ones(int(np.count_nonzero(cmds["timed"])), dtype=np.int64)
        self._S[k4.NDUR] = 0
        timed, rate, why = capture_clock()
        elapsed = self._run(cmds, out, durs, timed)
        self._clock_used = (rate, why)
        return ReplayResult(self.name, out, self._lend_fills(), elapsed, self), to_ns(durs, rate)

    clock_overhead = CompiledEngine.clock_overhead  # the same in-kernel clock

    def _lend_fills(self) -> np.ndarray:
        """The fills of this replay as a view for a result; the next replay takes a fresh
        buffer instead of overwriting it."""
        self._lent = True
        return self._fill_view()

    def _fill_view(self) -> np.ndarray:
        return self._F[: self._S[k4.NFILL]].view(FILL_DTYPE).reshape(-1)

    @property
    def fills(self) -> np.ndarray:
        return self._fill_view().copy()

    def clear_fills(self) -> None:
        self._S[k4.NFILL] = 0

    # --- one command -------------------------------------------------------------------
    def step(self, kind, otype, side, owner, price, qty, oid, price_hi) -> tuple:
        """Run one command (plain ints, ``EXEC_FIELDS`` order) through the kernel; returns
        the outcome tuple. A value outside its command field's range raises ValueError."""
        row = self._one
        set_command_row(row, (kind, otype, side, owner, price, qty, oid, price_hi))
        if self._S[k4.NEXT_ID] + 2 > self._IDX.size:
            self._grow(k4.GROW_INDEX)
        self._run(row, self._one_out, None)
        return self._one_out[0].item()

    # --- views and invariants ----------------------------------------------------------
    def _walk(self, row: int) -> list[int]:
        out = []
        node = int(self._L[row]["head"])
        while node >= 0:
            out.append(node)
            node = int(self._ND["nxt"][node])
        return out

    def _levels(self, side: int) -> np.ndarray:
        """Non-empty level indices of one side in priority order."""
        xs = np.flatnonzero(self._L["head"][side::2] >= 0)
        return xs[::-1] if side == 0 else xs

    def snapshot(self, depth: int = 10) -> dict:
        out = {}
        lo = self.config.min_price
        for side, key in ((0, "bids"), (1, "asks")):
            rows = []
            for x in self._levels(side)[:depth]:
                nodes = self._walk(2 * x + side)
                rows.append((int(lo + x), int(self._ND["qty"][nodes].sum()), len(nodes)))
            out[key] = rows
        return out

    def resting(self) -> list[tuple]:
        """(id, owner, side, price, qty) of every resting order, in priority order per side."""
        out = []
        lo = self.config.min_price
        nd = self._ND
        for side in (0, 1):
            for x in self._levels(side):
                for node in self._walk(2 * x + side):
                    r = nd[node]
                    out.append((int(r["oid"]), int(r["own"]), side, int(lo + x),
                                int(r["qty"])))
        return out

    def check(self) -> None:
        code, where = k4.check_book(self._ND, self._L, self._IDX, self._LV, self._B,
                                    self._OS, self._S)
        if code:
            raise AssertionError(f"{self.name}: {k4.MESSAGES[code]} (at {where})")

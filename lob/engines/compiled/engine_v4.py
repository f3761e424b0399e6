"""``PackedEngine``: the v4 compiled book (:mod:`lob.engines.compiled.kernel_v4`: packed
32-byte order records, 16-byte level records at ``row = 2 * level + side``, the per-owner sums
in their own array) on the shared base :class:`~lob.engines.compiled.engine.KernelEngine`.
"""

from __future__ import annotations

import numpy as np

from lob.engines.compiled import _band
from lob.engines.compiled import _buffers as bf
from lob.engines.compiled import kernel_v4 as k4
from lob.engines.compiled import state as st
from lob.engines.compiled.check import check_packed
from lob.engines.compiled.engine import KernelEngine
from lob.semantics import MAX_ORDERS, BookConfig, StpMode


class PackedEngine(KernelEngine):
    """The compiled book with packed 32-byte order records (``levels="packed"``). ``best`` is
    ``"bitmap"`` (the two-level non-empty-level bitmap with a cached best, as v1..v3);
    ``fok`` is ``full`` | ``early_exit`` | ``level_sums``; ``stream`` is ``plain`` (v4) or
    ``prefetch`` (v5: the commands and outcome records prefetched ahead of the one in
    hand); ``loop`` ``single`` | ``hot`` (the inner loop) and ``select`` ``branch`` |
    ``select`` are compile-time switches of the kernel; ``ownsums`` ``always`` | ``stp``
    (per-owner level sums kept only when the STP mode reads them). ``capacity``, ``grow``
    and ``fill_capacity`` are the base's; the id index is always the live-id bitset in front
    of the id -> node array."""

    name = "compiled-packed"
    layout = "packed"

    def __init__(self, config: BookConfig | None = None, *, levels: str = "packed",
                 best: str = "bitmap", fok: str = "level_sums", stream: str = "plain",
                 loop: str = "hot", select: str = "select", ownsums: str = "stp",
                 capacity: int = 1024, grow: bool = True, fill_capacity: int = 1024):
        # stream="prefetch" (v5): the kernel's specialisation that prefetches the command and
        # outcome streams; None compiles one with no prefetch at all (v4), as durs=None does
        # for the clock; loop and select likewise (None: the switch off, pruned)
        self._ahead = k4.STREAM_AHEAD if stream == "prefetch" else None
        self._hot = True if loop == "hot" else None
        self._sel = True if select == "select" else None
        self._all_ownsums = ownsums == "always"
        super().__init__(config, dict(levels=levels, best=best, fok=fok, stream=stream,
                                      loop=loop, select=select, ownsums=ownsums),
                         capacity, grow, fill_capacity)

    def _refuse(self, levels: str, best: str, fok: str, **switches: str) -> None:
        super()._refuse(levels, best, fok, **switches)
        if best != "bitmap":
            raise ValueError(f"PackedEngine runs levels='packed' with best='bitmap', got "
                             f"levels={levels!r}, best={best!r}")

    def _allocate(self, S: np.ndarray) -> None:
        w, k = int(S[st.WIDTH]), int(S[st.K])
        ownsums = S[st.FOK_MODE] == st.FOK_LEVEL_SUMS and (
            self._all_ownsums or self.config.stp != StpMode.NONE)
        osz = _band.OWNER_MAP_SIZE if ownsums else 0
        S[st.OSLOT_SIZE], S[st.OWNSUMS] = osz, int(ownsums)
        self._S = S
        L = np.zeros(2 * w, dtype=k4.LEVEL_DTYPE)  # row 2 * (price - min_price) + side
        L["head"] = L["tail"] = -1
        self._L = L
        OS = bf.zeros(osz + (2 * w * k if ownsums else 0) + 1, np.int64)
        OS[:osz] = -1
        self._OS = OS
        self._ND = np.zeros(0, dtype=k4.NODE_DTYPE)

    def _arrays(self) -> tuple:
        return (self._F, self._ND, self._L, self._IDX, self._LV, self._B, self._OS, self._S,
                self._ahead, self._hot, self._sel)

    def _call(self, cmds, i, out, durs, timed):
        return k4.run(cmds, i, out, self._F, self._ND, self._L, self._IDX, self._LV, self._B,
                      self._OS, self._S, timed, durs, self._ahead, self._hot, self._sel)

    def _pool_size(self) -> int:
        return self._ND.shape[0]

    def _grow_pool(self, extra: int) -> None:
        old = self._ND.shape[0]
        extra = min(extra, k4.MAX_NODES - old)
        if extra <= 0:
            raise MemoryError(f"{self.name}: the pool holds at most {k4.MAX_NODES:,} orders "
                              f"(int32 node links; lob.semantics.MAX_ORDERS is {MAX_ORDERS:,})")
        new = np.zeros(old + extra, dtype=k4.NODE_DTYPE)  # every page written below
        new[:old] = self._ND
        new["nxt"][old:] = np.arange(old + 1, old + extra + 1)
        new["nxt"][-1] = self._S[st.FREE]
        self._S[st.FREE] = old
        self._ND = new

    def _new_index(self, size: int) -> np.ndarray:
        # id -> node as int32, like the links; an entry is read only while its bit is set
        return bf.take_array(size, np.int32)

    def _levels(self, side: int) -> np.ndarray:
        """Non-empty level indices of one side in priority order."""
        xs = np.flatnonzero(self._L["head"][side::2] >= 0)
        return xs[::-1] if side == 0 else xs

    def _orders(self, side: int, x: int) -> list[tuple[int, int, int]]:
        """(id, owner, qty) of level ``x`` of ``side``, head to tail."""
        out = []
        node = int(self._L[2 * x + side]["head"])
        while node >= 0:
            r = self._ND[node]
            out.append((int(r["oid"]), int(r["own"]), int(r["qty"])))
            node = int(r["nxt"])
        return out

    def _check(self) -> tuple[int, int]:
        return check_packed(self._ND, self._L, self._IDX, self._LV, self._B, self._OS, self._S)

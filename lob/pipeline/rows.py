"""The row's memory: the shared block a row's commands go out in and its results come back
in, and the ring's slot layouts.

A row block holds, for ``n`` commands, four arrays one after another: publish times (int64,
written by the engine), due times (int64, engine), outcomes (``OUTCOME_DTYPE``, engine) and
the commands (``COMMAND_DTYPE``, written by the parent, read by the sender). The parent owns
the block (:class:`RowBlock`, grown when a longer row comes, never shrunk); each child maps it
by name (:class:`MappedRows`).

The ring's slots come in two layouts (:data:`~lob.pipeline.variants.LAYOUTS`): ``"fields"``,
one array per field (the command, its due time) published by the ``head`` word, and
``"line"``, one 64-byte cache line per slot (:data:`~lob.pipeline.ring.LINE_DTYPE`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from lob.pipeline.ring import LINE_DTYPE, attach_shm, create_shm
from lob.semantics import COMMAND_DTYPE, OUTCOME_DTYPE

__all__ = ["RowViews", "block_size", "row_views", "RowBlock", "MappedRows", "slot_fields",
           "compiled_slots"]


class RowViews(NamedTuple):
    """The arrays of one row block (views into shared memory: copy what must outlive it)."""

    done: np.ndarray  # publish time of each command (engine)
    due: np.ndarray  # due time of each command (engine, from the ring)
    out: np.ndarray  # outcomes (engine)
    cmds: np.ndarray  # the commands (parent -> sender)


def block_size(n: int) -> int:
    """Bytes of a row block for ``n`` commands."""
    return n * (16 + OUTCOME_DTYPE.itemsize + COMMAND_DTYPE.itemsize)


def row_views(buf, n: int) -> RowViews:
    """The four arrays of an ``n``-command row laid over ``buf``."""
    return RowViews(np.ndarray((n,), np.int64, buf, 0),
                    np.ndarray((n,), np.int64, buf, 8 * n),
                    np.ndarray((n,), OUTCOME_DTYPE, buf, 16 * n),
                    np.ndarray((n,), COMMAND_DTYPE, buf, n * (16 + OUTCOME_DTYPE.itemsize)))


class RowBlock:
    """The parent's row block: large enough for the longest row so far."""

    def __init__(self):
        self.shm = None
        self.n = 0

    def fit(self, n: int):
        """The block, replaced by a larger one (the old one unlinked) when ``n`` outgrows it."""
        if n > self.n:
            self.close()
            self.shm = create_shm(block_size(n), "rows")
            self.n = n
        return self.shm

    def close(self) -> None:
        if self.shm is not None:
            self.shm.close()
            self.shm.unlink()
            self.shm = None
            self.n = 0


class MappedRows:
    """A child's mapping of the parent's current row block (remapped when its name changes)."""

    def __init__(self):
        self.shm = None
        self.name = None

    def views(self, name: str, n: int) -> RowViews:
        if name != self.name:
            self.close()
            self.shm, self.name = attach_shm(name), name
        return row_views(self.shm.buf, n)

    def close(self) -> None:
        if self.shm is not None:
            try:
                self.shm.close()
            except BufferError:  # a view still alive: the mapping goes with the process
                pass
            self.shm = self.name = None


def slot_fields(layout: str) -> dict:
    """The ring's field dtypes for ``layout``: a line per slot, or a command and a due time."""
    return {"line": LINE_DTYPE} if layout == "line" else {"cmd": COMMAND_DTYPE, "due": np.int64}


def compiled_slots(ring_slots: dict, layout: str) -> tuple:
    """``(slot_cmd, slot_due, Lw)`` for the compiled loops: one layout's arrays, the other's
    empty (the loops tell the layouts apart by ``Lw``'s size)."""
    if layout == "line":
        return (np.zeros(0, COMMAND_DTYPE), np.zeros(0, np.int64),
                ring_slots["line"].view(np.int64))
    return ring_slots["cmd"], ring_slots["due"], np.zeros(0, np.int64)

"""The shared driver of the pure-Python engines: validation, id assignment, the one
dispatcher ``step``, the fill record and the replay loops, written once so every Python
engine rejects bad input the same way.

Subclasses implement ``_submit``, ``_cancel``, ``_modify``, ``_mass_cancel``, ``_rest``,
``snapshot`` and ``check``; :func:`match_outcome` is the one rule that turns a finished match
into an outcome (also used by out-of-tree Python engines, see examples/py_engine).
"""

from __future__ import annotations

import time

import numpy as np

from lob.engines.base import Interactive, ReplayResult, command_tuples, store_fills
from lob.semantics import (
    FILL_DTYPE,
    MAX_NOTIONAL,
    MAX_QTY,
    OUTCOME_DTYPE,
    BookConfig,
    OrderType,
    Reason,
    Status,
)

REJ = int(Status.REJECTED)
_NTYPES = 6  # OrderType values 0..5
_NSCOPES = 4
_FILLED, _PARTIAL, _ACCEPTED, _CANCELLED = (int(Status.FILLED), int(Status.PARTIALLY_FILLED),
                                            int(Status.ACCEPTED), int(Status.CANCELLED))
_LIMIT, _POST_ONLY, _NOTIONAL = int(OrderType.LIMIT), int(OrderType.POST_ONLY), \
    int(OrderType.NOTIONAL)
_SELF_TRADE, _NO_LIQUIDITY = int(Reason.SELF_TRADE), int(Reason.NO_LIQUIDITY)


def rejected(reason: Reason) -> tuple:
    return (REJ, int(reason), 0, 0, 0, 0, 0)


def match_outcome(otype, oid, left, filled, nfills, removed, stopped, too_dear
                  ) -> tuple[tuple, bool]:
    """The one rule that turns a finished match into an outcome, for the Python engines.

    ``left``: quantity (quote amount for NOTIONAL) not traded; ``stopped``: self-trade
    prevention stopped the taker; ``too_dear``: a NOTIONAL order met a level dearer than
    what it has left. Returns (outcome tuple, whether the remainder rests on the book).
    """
    reason = _SELF_TRADE if stopped else 0
    if otype == _NOTIONAL:
        if filled == 0:
            return (_CANCELLED, reason or _NO_LIQUIDITY, oid, left, 0, 0, removed), False
        done = (too_dear or left == 0) and not stopped
        return (_FILLED if done else _PARTIAL, reason, oid, left, filled, nfills, removed), False
    if left == 0:
        return (_FILLED, 0, oid, 0, filled, nfills, removed), False
    if (otype == _LIMIT or otype == _POST_ONLY) and not stopped:
        return (_PARTIAL if filled else _ACCEPTED, 0, oid, left, filled, nfills, removed), True
    if filled:
        return (_PARTIAL, reason, oid, left, filled, nfills, removed), False
    return (_CANCELLED, reason or _NO_LIQUIDITY, oid, left, 0, 0, removed), False



class PyEngine(Interactive):
    """Validation, ids, the interactive API and the replay loops for pure-Python engines."""

    name = "abstract"
    clock = "harness"

    def __init__(self, config: BookConfig | None = None):
        if config is None:
            config = BookConfig()
        if not isinstance(config, BookConfig):
            raise TypeError(f"config must be a lob.BookConfig, got {type(config).__name__}")
        self.config = config
        self._lo = config.min_price
        self._hi = config.max_price
        self._stp = int(config.stp)
        self._next_id = 0
        self._fills: list[tuple] = []

    # --- to implement -------------------------------------------------------------
    def _submit(self, oid, owner, side, otype, price, qty) -> tuple: raise NotImplementedError
    def _cancel(self, oid) -> tuple: raise NotImplementedError
    def _modify(self, oid, qty, price) -> tuple: raise NotImplementedError
    def _mass_cancel(self, scope, side, owner, lo, hi) -> tuple: raise NotImplementedError

    def snapshot(self, depth: int = 10) -> dict:
        raise NotImplementedError

    def check(self) -> None:
        """Raise AssertionError when an invariant of the book is broken."""
        raise NotImplementedError

    def _rest(self, oid, owner, side, at, qty) -> None:
        raise NotImplementedError

    def _finish(self, oid, owner, side, otype, at, left, filled, nfills, removed, stopped,
                too_dear) -> tuple:
        """The outcome of a finished match (:func:`match_outcome`), resting the remainder
        at ``at`` (the engine's own price key) when the rule says so."""
        out, rests = match_outcome(otype, oid, left, filled, nfills, removed, stopped, too_dear)
        if rests:
            self._rest(oid, owner, side, at, left)
        return out

    # --- the one dispatcher -------------------------------------------------------
    def step(self, kind, otype, side, owner, price, qty, oid, price_hi) -> tuple:
        """Run one command (plain ints, ``EXEC_FIELDS`` order); returns an outcome tuple in
        OUTCOME_DTYPE field order. Fills go to the engine's fill record."""
        if kind == 0:  # SUBMIT
            if otype < 0 or otype >= _NTYPES:
                return rejected(Reason.BAD_TYPE)
            if side != 0 and side != 1:
                return rejected(Reason.BAD_SIDE)
            if owner <= 0:
                return rejected(Reason.BAD_OWNER)
            if qty <= 0 or (qty > MAX_QTY and (otype != 5 or qty > MAX_NOTIONAL)):
                return rejected(Reason.BAD_QTY)
            if otype < 4 and (price < self._lo or price > self._hi):
                return rejected(Reason.BAD_PRICE)
            self._next_id += 1
            return self._submit(self._next_id, owner, side, otype, price, qty)
        if kind == 1:  # CANCEL
            return self._cancel(oid)
        if kind == 2:  # MODIFY
            if qty <= 0 or qty > MAX_QTY:
                return rejected(Reason.BAD_QTY)
            if price != 0 and (price < self._lo or price > self._hi):
                return rejected(Reason.BAD_PRICE)
            return self._modify(oid, qty, price)
        if kind == 3:  # MASS_CANCEL
            if otype < 0 or otype >= _NSCOPES:
                return rejected(Reason.BAD_SCOPE)
            if otype == 1 and side != 0 and side != 1:
                return rejected(Reason.BAD_SIDE)
            if otype == 2 and owner <= 0:
                return rejected(Reason.BAD_OWNER)
            if otype == 3 and price > price_hi:
                return rejected(Reason.BAD_PRICE)
            return self._mass_cancel(otype, side, owner, price, price_hi)
        return rejected(Reason.BAD_KIND)

    # --- fill record --------------------------------------------------------------
    def record_fill(self, taker: int, maker: int, price: int, qty: int) -> None:
        """Append one fill to the record (for subclasses' ``_submit``/``_modify``)."""
        self._fills.append((taker, maker, price, qty))

    @property
    def fills(self) -> np.ndarray:
        return np.array(self._fills, dtype=FILL_DTYPE).reshape(-1)

    def clear_fills(self) -> None:
        self._fills = []

    # --- batch --------------------------------------------------------------------
    def replay(self, commands: np.ndarray) -> ReplayResult:
        """Run every command in order; the fills recorded so far are reset first."""
        rows = command_tuples(commands)
        self._fills = []
        ex = self.step
        t0 = time.perf_counter_ns()
        out = [ex(*r) for r in rows]
        t1 = time.perf_counter_ns()
        return ReplayResult(self.name, np.array(out, dtype=OUTCOME_DTYPE).reshape(len(rows)),
                            self.fills, t1 - t0, self)

    def replay_into(self, commands: np.ndarray, outcomes: np.ndarray,
                    fills: np.ndarray | None = None) -> int:
        """Run ``commands`` on the current book into ``outcomes[:n]``; returns the number
        of fills they made (copied to ``fills[:k]`` when given; the fill record is left
        empty)."""
        rows = command_tuples(commands)
        self._fills = []
        ex = self.step
        for j, r in enumerate(rows):
            outcomes[j] = ex(*r)
        k = len(self._fills) if fills is None else store_fills(fills, self.fills)
        self._fills = []
        return k

    def replay_timed(self, commands: np.ndarray) -> tuple[ReplayResult, np.ndarray]:
        raise NotImplementedError(f"{type(self).__name__} has clock='harness': the caller "
                                  "times step() (lob.measure.capture_latency)")

    def clock_overhead(self) -> dict | None:
        return None


__all__ = ["PyEngine", "match_outcome", "rejected"]

"""The engine protocol, the result of a replay, and the shared driver for pure-Python engines.

An engine is a book plus the one semantics of :mod:`lob.semantics`. :class:`Engine` is the
whole interface that measurement, allocation counting, the pipeline and the experiments use:
the interactive API (``submit``, ``cancel``, ``modify``, ``mass_cancel``, ``execute``), the
per-op path ``step`` (plain ints in, an outcome tuple out), batch replays (``replay``,
``replay_into`` over preallocated arrays, ``replay_timed`` for engines that read their own
clock), the fill record, ``snapshot`` and ``check``.

Pure-Python engines subclass :class:`PyEngine` and implement ``_submit``, ``_cancel``,
``_modify``, ``_mass_cancel``, ``snapshot`` and ``check``; validation, id assignment, the
interactive API and the replay loops live here once, so every engine rejects bad input the
same way. Engines are registered by :mod:`lob.engines.registry`, which this module never
imports.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from lob.semantics import (
    COMMAND_DTYPE,
    FILL_DTYPE,
    MAX_NOTIONAL,
    MAX_QTY,
    OUTCOME_DTYPE,
    BookConfig,
    OrderType,
    Outcome,
    Reason,
    Scope,
    Status,
    as_commands,
    checksum,
    command_field,
    counters,
)

REJ = int(Status.REJECTED)
EXEC_FIELDS = ("kind", "otype", "side", "owner", "price", "qty", "id", "price_hi")

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


def command_tuples(cmds: np.ndarray) -> list[tuple]:
    """The command array as a list of plain-int tuples in ``EXEC_FIELDS`` order (untimed prep)."""
    cmds = as_commands(cmds)
    cols = [cmds[f].tolist() for f in EXEC_FIELDS]
    return list(zip(*cols, strict=True))


@dataclass
class ReplayResult:
    """Outcomes of replaying a command array through one engine."""

    engine: str
    outcomes: np.ndarray
    fills: np.ndarray
    elapsed_ns: int = 0
    book: object = field(default=None, repr=False)

    @property
    def counters(self) -> dict[str, int]:
        return counters(self.outcomes)

    @property
    def checksum(self) -> int:
        return checksum(self.outcomes, self.fills)

    @property
    def ns_per_op(self) -> float:
        return self.elapsed_ns / max(1, len(self.outcomes))


@runtime_checkable
class Engine(Protocol):
    """Everything lob asks of an engine (see the module docstring and PyEngine)."""

    name: str
    config: BookConfig
    clock: str  # "harness": the caller times each op around step(); "engine": the engine
    #             times itself inside replay_timed() with its own clock

    # one command
    def submit(self, owner: int, side: int, otype: int, price: int, qty: int) -> Outcome: ...
    def cancel(self, oid: int) -> Outcome: ...
    def modify(self, oid: int, qty: int, price: int = 0) -> Outcome: ...
    def mass_cancel(self, scope: int = Scope.ALL, *, side: int = 0, owner: int = 0,
                    price_lo: int = 0, price_hi: int = 0) -> Outcome: ...
    def execute(self, row) -> Outcome: ...
    def step(self, kind: int, otype: int, side: int, owner: int, price: int, qty: int,
             oid: int, price_hi: int) -> tuple: ...
    # batch
    def replay(self, commands: np.ndarray) -> ReplayResult: ...
    def replay_into(self, commands: np.ndarray, outcomes: np.ndarray,
                    fills: np.ndarray | None = None) -> int: ...
    def replay_timed(self, commands: np.ndarray) -> tuple[ReplayResult, np.ndarray]: ...
    def clock_overhead(self) -> dict | None: ...
    @property
    def fills(self) -> np.ndarray: ...
    def clear_fills(self) -> None: ...
    # views
    def snapshot(self, depth: int = 10) -> dict: ...
    def check(self) -> None: ...


@dataclass(frozen=True)
class EngineSpec:
    """A registered engine: ``factory(config) -> Engine`` plus what ``lob engines`` says of it.

    Member modules export a list of them as ``ENGINES``; :mod:`lob.engines.registry`
    collects them. ``backend``: ``"python"``, ``"numba"``, ... ; ``toggles``: the
    implementation choices the factory makes (``levels``/``best``/``fok`` for lineage versions, see
    :mod:`lob.engines.toggles`); ``parent``: the registered version this one is one step
    from (lineage bisection walks these); ``source``: where it came from (``lob``, an entry
    point's distribution, or ``interactive``), filled in by the registry.
    """

    name: str
    factory: Callable[[BookConfig], object]
    description: str
    backend: str = "python"
    toggles: dict = field(default_factory=dict)
    parent: str | None = None
    source: str = "lob"

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"EngineSpec.name must be a non-empty str, got {self.name!r}")
        if not callable(self.factory):
            raise TypeError(f"EngineSpec {self.name!r}: factory must be callable")


_FIELD_OF = {"scope": "otype", "price_lo": "price", "oid": "id"}  # API names of fields


def as_int(name: str, v) -> int:
    """``v`` as a Python int; TypeError naming ``name`` for a bool, float or anything else.

    A command field (or its API name: ``scope``, ``price_lo``) is also checked against its
    COMMAND_DTYPE type: ValueError naming it when the type cannot hold ``v`` (the one check
    of every engine's interactive API, :func:`lob.semantics.command_field`)."""
    field = _FIELD_OF.get(name, name)
    if field in COMMAND_DTYPE.names and field != "timed":
        return command_field(field, v, name)
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(v).__name__} ({v!r})")
    return int(v)


def execute_values(row) -> list[int]:
    """A COMMAND_DTYPE record or a dict of command fields as ints in ``EXEC_FIELDS`` order."""
    if isinstance(row, np.void) and row.dtype == COMMAND_DTYPE:
        return [int(row[f]) for f in EXEC_FIELDS]
    if isinstance(row, dict):
        unknown = set(row) - set(COMMAND_DTYPE.names)
        if unknown:
            raise ValueError(f"unknown command field(s) {sorted(unknown)}")
        return [as_int(f, row.get(f, 0)) for f in EXEC_FIELDS]
    raise TypeError("execute takes a COMMAND_DTYPE record or a dict of command fields")


class Interactive:
    """The interactive API over ``step`` (shared by every lob engine): typed arguments in,
    :class:`~lob.semantics.Outcome` out."""

    def step(self, kind, otype, side, owner, price, qty, oid, price_hi) -> tuple:
        raise NotImplementedError

    def execute(self, row) -> Outcome:
        """Run one command given as a COMMAND_DTYPE record or a dict of fields."""
        return Outcome.from_tuple(self.step(*execute_values(row)))

    def submit(self, owner: int, side: int, otype: int, price: int, qty: int) -> Outcome:
        v = [as_int(n, x) for n, x in
             (("owner", owner), ("side", side), ("otype", otype), ("price", price), ("qty", qty))]
        return Outcome.from_tuple(self.step(0, v[2], v[1], v[0], v[3], v[4], 0, 0))

    def cancel(self, oid: int) -> Outcome:
        return Outcome.from_tuple(self.step(1, 0, 0, 0, 0, 0, as_int("id", oid), 0))

    def modify(self, oid: int, qty: int, price: int = 0) -> Outcome:
        return Outcome.from_tuple(
            self.step(2, 0, 0, 0, as_int("price", price), as_int("qty", qty),
                      as_int("id", oid), 0))

    def mass_cancel(self, scope: int = Scope.ALL, *, side: int = 0, owner: int = 0,
                    price_lo: int = 0, price_hi: int = 0) -> Outcome:
        return Outcome.from_tuple(
            self.step(3, as_int("scope", scope), as_int("side", side),
                      as_int("owner", owner), as_int("price_lo", price_lo), 0, 0,
                      as_int("price_hi", price_hi)))


def store_fills(fills: np.ndarray | None, got: np.ndarray) -> int:
    """Copy ``got`` (FILL_DTYPE) into the caller's ``fills``; ValueError if it is too short."""
    k = len(got)
    if fills is not None:
        if k > len(fills):
            raise ValueError(f"{k} fills do not fit the fill array of {len(fills)}")
        fills[:k] = got
    return k


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


__all__ = ["EXEC_FIELDS", "Engine", "EngineSpec", "Interactive", "PyEngine", "ReplayResult",
           "as_int", "command_tuples", "execute_values", "match_outcome", "rejected", "store_fills"]

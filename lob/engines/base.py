"""The engine protocol, the result of a replay, and the interactive API every engine shares.

An engine is a book plus the one semantics of :mod:`lob.semantics`. :class:`Engine` is the
whole interface that measurement, allocation counting, the pipeline and the experiments use:
the interactive API (``submit``, ``cancel``, ``modify``, ``mass_cancel``, ``execute``), the
per-op path ``step`` (plain ints in, an outcome tuple out), batch replays (``replay``,
``replay_into`` over preallocated arrays, ``replay_timed`` for engines that read their own
clock), the fill record, ``snapshot`` and ``check``.

Pure-Python engines subclass :class:`lob.engines.driver.PyEngine` (validation, ids and the
replay loops, once). Engines are registered by :mod:`lob.engines.registry`, which this module
never imports.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from lob.semantics import (
    COMMAND_DTYPE,
    BookConfig,
    Outcome,
    Scope,
    as_commands,
    checksum,
    command_field,
    counters,
)

EXEC_FIELDS = ("kind", "otype", "side", "owner", "price", "qty", "id", "price_hi")

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


def set_command_row(row, values) -> None:
    """Write one command's plain ints (``EXEC_FIELDS`` order) into a COMMAND_DTYPE record,
    each checked by :func:`lob.semantics.command_field` (the compiled engines' ``step``)."""
    for f, v in zip(EXEC_FIELDS, values, strict=True):
        row[f] = command_field(f, v)


def store_fills(fills: np.ndarray | None, got: np.ndarray) -> int:
    """Copy ``got`` (FILL_DTYPE) into the caller's ``fills``; ValueError if it is too short."""
    k = len(got)
    if fills is not None:
        if k > len(fills):
            raise ValueError(f"{k} fills do not fit the fill array of {len(fills)}")
        fills[:k] = got
    return k


__all__ = ["EXEC_FIELDS", "Engine", "EngineSpec", "Interactive", "ReplayResult", "as_int",
           "command_tuples", "execute_values", "set_command_row", "store_fills"]

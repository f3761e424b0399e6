"""The engine protocol, the shared driver for pure-Python engines, and the engine registry.

An engine is a book plus the one semantics of :mod:`lob.semantics`. Every engine offers:

* an interactive API: ``submit``, ``cancel``, ``modify``, ``mass_cancel`` and ``execute``
  (one command row) returning :class:`~lob.semantics.Outcome`;
* ``replay(commands)`` -> :class:`ReplayResult` (outcome and fill arrays, counters,
  checksum) for a whole command array;
* ``snapshot(depth)`` (L2: price, quantity, order count per level) and ``_check()``
  (raises ``AssertionError`` when an invariant is broken).

Pure-Python engines subclass :class:`PyEngine` and implement ``_submit``, ``_cancel``,
``_modify``, ``_mass_cancel``, ``snapshot``, ``_check``; validation, id assignment and
the replay loop live here once, so every engine rejects bad input the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from lob.semantics import (
    COMMAND_DTYPE,
    FILL_DTYPE,
    OUTCOME_DTYPE,
    BookConfig,
    Kind,
    Outcome,
    Reason,
    Scope,
    Side,
    Status,
    as_commands,
    checksum,
    counters,
)

REJ = int(Status.REJECTED)
EXEC_FIELDS = ("kind", "otype", "side", "owner", "price", "qty", "id", "price_hi")

_NTYPES = 6  # OrderType values 0..5
_NSCOPES = 4


def rejected(reason: Reason) -> tuple:
    return (REJ, int(reason), 0, 0, 0, 0, 0)


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

    def fills_frame(self):
        import pandas as pd

        return pd.DataFrame(self.fills)

    def outcomes_frame(self):
        import pandas as pd

        from lob.semantics import Status as S

        df = pd.DataFrame(self.outcomes)
        df["status"] = [S(s).name for s in df["status"]]
        df["reason"] = [Reason(r).name for r in df["reason"]]
        return df


@runtime_checkable
class Engine(Protocol):
    name: str
    config: BookConfig

    def submit(self, owner: int, side: int, otype: int, price: int, qty: int) -> Outcome: ...
    def cancel(self, oid: int) -> Outcome: ...
    def modify(self, oid: int, qty: int, price: int = 0) -> Outcome: ...
    def mass_cancel(self, scope: int = Scope.ALL, *, side: int = 0, owner: int = 0,
                    price_lo: int = 0, price_hi: int = 0) -> Outcome: ...
    def execute(self, row) -> Outcome: ...
    def replay(self, commands: np.ndarray) -> ReplayResult: ...
    def snapshot(self, depth: int = 10) -> dict: ...
    def _check(self) -> None: ...


def _as_int(name: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(v).__name__} ({v!r})")
    return int(v)


class PyEngine:
    """Validation, ids, the interactive API and the replay loop for pure-Python engines."""

    name = "abstract"

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

    # --- the one dispatcher -------------------------------------------------------
    def _exec(self, kind, otype, side, owner, price, qty, oid, price_hi) -> tuple:
        """Run one command; returns an outcome tuple in OUTCOME_DTYPE field order."""
        if kind == 0:  # SUBMIT
            if otype < 0 or otype >= _NTYPES:
                return rejected(Reason.BAD_TYPE)
            if side != 0 and side != 1:
                return rejected(Reason.BAD_SIDE)
            if owner <= 0:
                return rejected(Reason.BAD_OWNER)
            if qty <= 0:
                return rejected(Reason.BAD_QTY)
            if otype < 4 and (price < self._lo or price > self._hi):
                return rejected(Reason.BAD_PRICE)
            self._next_id += 1
            return self._submit(self._next_id, owner, side, otype, price, qty)
        if kind == 1:  # CANCEL
            return self._cancel(oid)
        if kind == 2:  # MODIFY
            if qty <= 0:
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

    # --- interactive API ----------------------------------------------------------
    def execute(self, row) -> Outcome:
        """Run one command given as a COMMAND_DTYPE record or a dict of fields."""
        if isinstance(row, np.void) and row.dtype == COMMAND_DTYPE:
            vals = [int(row[f]) for f in EXEC_FIELDS]
        elif isinstance(row, dict):
            unknown = set(row) - set(COMMAND_DTYPE.names)
            if unknown:
                raise ValueError(f"unknown command field(s) {sorted(unknown)}")
            vals = [_as_int(f, row.get(f, 0)) for f in EXEC_FIELDS]
        else:
            raise TypeError("execute takes a COMMAND_DTYPE record or a dict of command fields")
        return Outcome.from_tuple(self._exec(*vals))

    def submit(self, owner: int, side: int, otype: int, price: int, qty: int) -> Outcome:
        v = [_as_int(n, x) for n, x in
             (("owner", owner), ("side", side), ("otype", otype), ("price", price), ("qty", qty))]
        return Outcome.from_tuple(self._exec(0, v[2], v[1], v[0], v[3], v[4], 0, 0))

    def cancel(self, oid: int) -> Outcome:
        return Outcome.from_tuple(self._exec(1, 0, 0, 0, 0, 0, _as_int("id", oid), 0))

    def modify(self, oid: int, qty: int, price: int = 0) -> Outcome:
        return Outcome.from_tuple(
            self._exec(2, 0, 0, 0, _as_int("price", price), _as_int("qty", qty),
                       _as_int("id", oid), 0))

    def mass_cancel(self, scope: int = Scope.ALL, *, side: int = 0, owner: int = 0,
                    price_lo: int = 0, price_hi: int = 0) -> Outcome:
        return Outcome.from_tuple(
            self._exec(3, _as_int("scope", scope), _as_int("side", side),
                       _as_int("owner", owner), _as_int("price_lo", price_lo), 0, 0,
                       _as_int("price_hi", price_hi)))

    @property
    def fills(self) -> np.ndarray:
        return np.array(self._fills, dtype=FILL_DTYPE)

    # --- batch --------------------------------------------------------------------
    def replay(self, commands: np.ndarray) -> ReplayResult:
        """Run every command in order; the fills recorded so far are reset first."""
        import time

        rows = command_tuples(commands)
        self._fills = []
        ex = self._exec
        t0 = time.perf_counter_ns()
        out = [ex(*r) for r in rows]
        t1 = time.perf_counter_ns()
        return ReplayResult(self.name, np.array(out, dtype=OUTCOME_DTYPE).reshape(len(rows)),
                            self.fills, t1 - t0, self)

    def snapshot(self, depth: int = 10) -> dict:
        raise NotImplementedError


# --- registry ---------------------------------------------------------------------------

@dataclass(frozen=True)
class EngineInfo:
    name: str
    factory: Callable[[BookConfig], object]
    description: str
    backend: str = "python"
    toggles: dict = field(default_factory=dict)


_REGISTRY: dict[str, EngineInfo] = {}


def register(name: str, factory: Callable[[BookConfig], object], description: str, *,
             backend: str = "python", toggles: dict | None = None) -> None:
    if name in _REGISTRY:
        raise ValueError(f"engine {name!r} is already registered")
    _REGISTRY[name] = EngineInfo(name, factory, description, backend, dict(toggles or {}))


def _load_all() -> None:
    # importing these modules registers their engines
    from lob.engines import lineage, reference  # noqa: F401

    try:
        import lob.engines.compiled  # noqa: F401  (registers the v*@numba twins)
    except ModuleNotFoundError as e:
        if e.name not in ("lob.engines.compiled", "numba"):
            raise


def engine_names() -> list[str]:
    _load_all()
    return list(_REGISTRY)


def engine_info(name: str) -> EngineInfo:
    _load_all()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(
            f"unknown engine {name!r}; registered engines: {', '.join(_REGISTRY)}"
        ) from None


def get_engine(name: str, config: BookConfig | None = None):
    """A fresh engine by registered name; an unknown name raises ValueError listing them."""
    if not isinstance(name, str):
        raise TypeError(f"engine name must be a str, got {type(name).__name__}")
    info = engine_info(name)
    eng = info.factory(config if config is not None else BookConfig())
    eng.name = name
    return eng


__all__ = ["Engine", "PyEngine", "ReplayResult", "EngineInfo", "register", "engine_names",
           "engine_info", "get_engine", "command_tuples", "EXEC_FIELDS", "Side", "Kind"]

"""The one written spec of lob's matching behaviour, and the data types every engine shares.

Book
----
Integer prices and quantities. A book has a price band ``[min_price, max_price]`` and a
self-trade-prevention mode (:class:`BookConfig`). Two sides: BUY (bids) and SELL (asks).

Commands (one row of :data:`COMMAND_DTYPE`)
-------------------------------------------
``kind`` selects the operation; unused fields are 0.

* ``SUBMIT(owner, side, otype, price, qty)``; ``otype`` is one of
  LIMIT (good-till-cancel), IOC, FOK, POST_ONLY, MARKET (``price`` ignored) or
  NOTIONAL (a market order by quote amount: ``qty`` holds the amount).
* ``CANCEL(id)``
* ``MODIFY(id, qty, price)``: ``qty`` is the new open quantity (> 0); ``price`` is the new
  price, or 0 to keep the current one.
* ``MASS_CANCEL(scope, ...)``: ``otype`` holds the :class:`Scope`: ALL, SIDE (``side``),
  OWNER (``owner``) or PRICE_RANGE (``price`` .. ``price_hi`` inclusive, both sides).

Bounds (so that no engine's arithmetic can overflow int64)
-----------------------------------------------------------
* a quantity (submit, modify) is at most :data:`MAX_QTY` = 10**9;
* a NOTIONAL order's amount is at most :data:`MAX_NOTIONAL` = 10**18;
* a band ends at most at :data:`MAX_PRICE` = 10**9 (:class:`BookConfig` refuses more), so
  every resting, traded or priced-order price is in ``[1, MAX_PRICE]``;
* a book holds at most :data:`MAX_ORDERS` = 2**33 resting orders (the compiled pool refuses
  to grow past it; a Python engine would need > 1 TB before it got there).

Every other field may take any value its :data:`COMMAND_DTYPE` type holds (ids and the
price range of a mass cancel: all of int64; MARKET and NOTIONAL prices are ignored).

Why these bounds: every sum an engine keeps is a sum of resting quantities - a level's
total, an owner's share of a level, the FOK availability count (the crossing quantity of
one side), a command's traded quantity (at most what rests, or its own qty) - so each is
at most ``MAX_ORDERS * MAX_QTY = 2**33 * 10**9 < 8.6e18 < 2**63 - 1``. A product
price * quantity is at most ``MAX_PRICE * MAX_QTY = 10**18 < 2**63``, and a notional
order's spend per level ``take * p <= left <= MAX_NOTIONAL``. The conservation totals of
the compiled book (quantity in / traded / removed over a whole life) are checked modulo
2**64, which wrapping keeps exact. :func:`counters` sums in Python ints when int64 could
overflow, so it is exact for any stream.

Validation (first failing check gives the reason; nothing changes, no id is consumed)
--------------------------------------------------------------------------------------
* unknown ``kind`` -> REJECTED / BAD_KIND
* submit: unknown ``otype`` -> BAD_TYPE; ``side`` not BUY/SELL -> BAD_SIDE;
  ``owner`` <= 0 -> BAD_OWNER; ``qty`` <= 0, or ``qty`` > MAX_QTY (NOTIONAL: amount >
  MAX_NOTIONAL) -> BAD_QTY; for LIMIT, IOC, FOK and POST_ONLY a ``price`` outside the
  band -> BAD_PRICE (MARKET and NOTIONAL ignore price).
* modify: ``qty`` <= 0 or > MAX_QTY -> BAD_QTY; ``price`` not 0 and outside the band ->
  BAD_PRICE; then an id that is not resting -> NOT_FOUND / UNKNOWN_ID.
* cancel: an id that is not resting -> NOT_FOUND / UNKNOWN_ID.
* mass cancel: unknown scope -> BAD_SCOPE; SIDE with a bad side -> BAD_SIDE; OWNER with
  owner <= 0 -> BAD_OWNER; PRICE_RANGE with price > price_hi -> BAD_PRICE (any other
  int64 range is valid and removes the orders priced in it, e.g. -2**63 .. 2**63 - 1: all).

Values a command field's type cannot hold (owner >= 2**31, a kind of 300, qty >= 2**63)
are not commands at all: the interactive API of every engine and :func:`commands` raise a
ValueError naming the field (one check, :func:`command_field`); a non-integer raises
TypeError.

Ids
---
Every valid submit takes the next sequential id (1, 2, ...) whatever its type and
whatever then happens to it (a FOK that is cancelled, a market order, all take an id).

Matching
--------
An incoming order meets the opposite side best price first (highest bid, lowest ask),
FIFO within a level; each fill is at the maker's (resting order's) price. A BUY limit at
p crosses asks <= p; a SELL limit at p crosses bids >= p; market and notional orders
cross every price. When the taker meets a resting order of its own owner:

* NONE: they trade (self-trades allowed).
* CANCEL_MAKER: the resting order is removed (no fill) and matching goes on.
* CANCEL_TAKER: the taker's remainder is cancelled (reason SELF_TRADE); the maker stays.
* CANCEL_BOTH: the resting order is removed and the taker's remainder is cancelled.

A notional order with amount A walks levels best first; at a level of price p it takes at
most ``left // p`` lots (``left`` = amount not yet spent) and stops when ``p > left``.

Order types
-----------
* FOK: before matching, the quantity it could trade is counted: crossing resting
  quantity, excluding what the STP mode would not trade (CANCEL_MAKER: own orders are
  skipped; CANCEL_TAKER / CANCEL_BOTH: counting stops at the first own order in
  priority order). If that is < qty the FOK is CANCELLED (reason FOK_UNFILLABLE,
  remaining = qty, book unchanged); otherwise it matches and fills completely.
* POST_ONLY: if it would cross the best opposite price it is CANCELLED (reason
  WOULD_CROSS, remaining = qty); otherwise it rests.
* LIMIT and POST_ONLY leftovers rest at the tail of their level. IOC, FOK, MARKET and
  NOTIONAL leftovers are dropped.

Outcome of a submit (one row of :data:`OUTCOME_DTYPE`)
------------------------------------------------------
``remaining`` is the leftover quantity (0 when filled; for NOTIONAL, the unspent amount).
Status: FILLED if nothing is left (NOTIONAL: if it traded and stopped because the next
level was too dear for what was left); else PARTIALLY_FILLED if anything traded; else
CANCELLED for IOC / FOK / MARKET / NOTIONAL (reason NO_LIQUIDITY) and for STP taker
cancels (SELF_TRADE); else ACCEPTED (resting, reason NONE).

Other commands
--------------
* cancel of a resting id: CANCELLED, id = that id, remaining = 0, removed = 1. Of any other
  id: NOT_FOUND, remaining = 0. (remaining = 0 is the C++ seed's convention: with it, the sum
  of ``remaining`` over its comprehensive stream is the published 15,028,137; reporting the
  cancelled open quantity instead would add 63,350.)
* modify: a qty decrease at the same price keeps queue priority; a qty increase at the
  same price moves the order to the tail of its level; a price change removes it and
  enters it again as a LIMIT order with the same id and owner, which may trade (the
  outcome is then that of the re-entry). Status ACCEPTED unless it traded.
* mass cancel: CANCELLED, id = 0, remaining = 0, removed = number of orders removed.
* NOT_FOUND outcomes echo the target id.

Fine points (each pinned by a test):

* modify to the same quantity and price keeps the queue place (it is not an increase);
  the modify's own removal of the order is not counted in ``removed``.
* a price-change modify whose re-entry is stopped by CANCEL_TAKER / CANCEL_BOTH ends as
  the re-entry does (CANCELLED / SELF_TRADE, or PARTIALLY_FILLED): the order is gone.
* a partial fill stopped by STP carries reason SELF_TRADE; other partials reason NONE.
* POST_ONLY checks only the best opposite price, whoever owns it: against an own order it
  is cancelled WOULD_CROSS under every STP mode.
* a NOTIONAL order that empties the opposite side with budget left is PARTIALLY_FILLED.

``removed`` counts resting orders this command took off the book without a fill
(cancels, mass cancels and STP maker cancels). ``filled`` is the quantity traded and
``fills`` the number of fills.

Counters and checksum
---------------------
:func:`counters` counts statuses (filled, partial, accepted, cancelled, rejected,
notfound), fills (``trades``), traded quantity (``matched_volume``) and the sum of
``remaining``. :func:`checksum` is a rolling 64-bit polynomial hash over every outcome
row and every fill, in order, so "two engines agree" is one integer comparison.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np

__all__ = [
    "Kind",
    "Side",
    "OrderType",
    "Scope",
    "Status",
    "Reason",
    "StpMode",
    "BookConfig",
    "COMMAND_DTYPE",
    "OUTCOME_DTYPE",
    "FILL_DTYPE",
    "COUNTER_NAMES",
    "Outcome",
    "MAX_QTY",
    "MAX_NOTIONAL",
    "MAX_PRICE",
    "MAX_ORDERS",
    "command_field",
    "commands",
    "as_commands",
    "counters",
    "checksum",
]


class Kind(IntEnum):
    SUBMIT = 0
    CANCEL = 1
    MODIFY = 2
    MASS_CANCEL = 3


class Side(IntEnum):
    BUY = 0
    SELL = 1


class OrderType(IntEnum):
    LIMIT = 0
    IOC = 1
    FOK = 2
    POST_ONLY = 3
    MARKET = 4
    NOTIONAL = 5


class Scope(IntEnum):
    ALL = 0
    SIDE = 1
    OWNER = 2
    PRICE_RANGE = 3


class Status(IntEnum):
    FILLED = 0
    PARTIALLY_FILLED = 1
    ACCEPTED = 2
    CANCELLED = 3
    REJECTED = 4
    NOT_FOUND = 5


class Reason(IntEnum):
    NONE = 0
    BAD_KIND = 1
    BAD_TYPE = 2
    BAD_SIDE = 3
    BAD_OWNER = 4
    BAD_QTY = 5
    BAD_PRICE = 6
    BAD_SCOPE = 7
    UNKNOWN_ID = 8
    NO_LIQUIDITY = 9
    FOK_UNFILLABLE = 10
    WOULD_CROSS = 11
    SELF_TRADE = 12
    POOL_FULL = 13


class StpMode(IntEnum):
    NONE = 0
    CANCEL_MAKER = 1
    CANCEL_TAKER = 2
    CANCEL_BOTH = 3


MAX_QTY = 10**9  # largest quantity of a submit or modify
MAX_NOTIONAL = 10**18  # largest amount of a NOTIONAL order (MAX_PRICE * MAX_QTY)
MAX_PRICE = 10**9  # largest band end, hence largest price of a resting or priced order
MAX_ORDERS = 2**33  # largest number of resting orders a book holds
assert MAX_ORDERS * MAX_QTY < 2**63 and MAX_PRICE * MAX_QTY <= MAX_NOTIONAL < 2**63


@dataclass(frozen=True)
class BookConfig:
    """Price band (inclusive) and self-trade-prevention mode of a book."""

    min_price: int = 1
    max_price: int = 10_000
    stp: StpMode = StpMode.NONE

    def __post_init__(self) -> None:
        for field in ("min_price", "max_price"):
            v = getattr(self, field)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise TypeError(f"BookConfig.{field} must be an int, got {type(v).__name__}")
        if self.min_price < 1:
            raise ValueError(f"BookConfig.min_price must be >= 1, got {self.min_price}")
        if self.max_price > MAX_PRICE:
            raise ValueError(
                f"BookConfig.max_price ({self.max_price}) is above lob.semantics.MAX_PRICE "
                f"({MAX_PRICE:_}), the largest price lob's engines can hold without overflow")
        if self.max_price < self.min_price:
            raise ValueError(
                f"BookConfig.max_price ({self.max_price}) must be >= min_price ({self.min_price})"
            )
        try:
            object.__setattr__(self, "stp", StpMode(self.stp))
        except ValueError:
            raise ValueError(
                f"BookConfig.stp must be one of {[m.name for m in StpMode]}, got {self.stp!r}"
            ) from None

    @property
    def width(self) -> int:
        return self.max_price - self.min_price + 1

    def to_dict(self) -> dict:
        return {"min_price": int(self.min_price), "max_price": int(self.max_price),
                "stp": self.stp.name}

    @classmethod
    def from_dict(cls, d: dict) -> BookConfig:
        stp = d.get("stp", "NONE")
        return cls(int(d["min_price"]), int(d["max_price"]),
                   StpMode[stp] if isinstance(stp, str) else StpMode(stp))


COMMAND_DTYPE = np.dtype(
    [
        ("kind", "i1"),
        ("otype", "i1"),  # OrderType for SUBMIT, Scope for MASS_CANCEL
        ("side", "i1"),
        ("timed", "?"),  # measured by latency capture; pre-loads and warmups are not
        ("owner", "i4"),
        ("price", "i8"),
        ("qty", "i8"),  # quantity; quote amount for NOTIONAL
        ("id", "i8"),  # target of CANCEL / MODIFY
        ("price_hi", "i8"),  # upper bound of a PRICE_RANGE mass cancel
    ]
)
COMMAND_FIELDS = COMMAND_DTYPE.names

OUTCOME_DTYPE = np.dtype(
    [
        ("status", "i1"),
        ("reason", "i1"),
        ("id", "i8"),
        ("remaining", "i8"),
        ("filled", "i8"),
        ("fills", "i4"),
        ("removed", "i4"),
    ]
)
OUTCOME_FIELDS = OUTCOME_DTYPE.names

FILL_DTYPE = np.dtype([("taker", "i8"), ("maker", "i8"), ("price", "i8"), ("qty", "i8")])

COUNTER_NAMES = (
    "filled",
    "partial",
    "accepted",
    "cancelled",
    "rejected",
    "notfound",
    "trades",
    "matched_volume",
    "remaining_sum",
)


@dataclass(frozen=True)
class Outcome:
    """What one command did (the interactive form of an :data:`OUTCOME_DTYPE` row)."""

    status: Status
    reason: Reason
    id: int
    remaining: int
    filled: int = 0
    fills: int = 0
    removed: int = 0

    @classmethod
    def from_tuple(cls, t: tuple) -> Outcome:
        return cls(Status(t[0]), Reason(t[1]), *(int(x) for x in t[2:]))

    def __repr__(self) -> str:
        extra = f", reason={self.reason.name}" if self.reason else ""
        return (f"Outcome({self.status.name}{extra}, id={self.id}, remaining={self.remaining},"
                f" filled={self.filled}, fills={self.fills}, removed={self.removed})")


_RANGE = {f: (int(np.iinfo(COMMAND_DTYPE[f]).min), int(np.iinfo(COMMAND_DTYPE[f]).max))
          for f in COMMAND_FIELDS if f != "timed"}


def command_field(field: str, v, name: str | None = None) -> int:
    """``v`` as a plain int for the command field ``field``, checked against its dtype.

    The one check behind every engine's interactive API: a non-integer (a float, a str,
    a bool) raises TypeError and a value the field's type cannot hold raises ValueError,
    both naming ``name`` (default ``field``, e.g. ``"price_lo"`` for ``price``).
    """
    name = name or field
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(v).__name__} ({v!r})")
    v = int(v)
    lo, hi = _RANGE[field]
    if not lo <= v <= hi:
        raise ValueError(f"{name} = {v} does not fit the command field {field!r} "
                         f"({COMMAND_DTYPE[field]}: {lo} .. {hi})")
    return v


def _row_value(i: int, field: str, v):
    """A value of a dict row for :func:`commands`: integral floats are taken, nothing else."""
    if field == "timed":
        if isinstance(v, (bool, np.bool_)) or (isinstance(v, (int, np.integer)) and v in (0, 1)):
            return bool(v)
        raise TypeError(f"command {i}: 'timed' must be a bool, got {v!r}")
    if isinstance(v, (float, np.floating)) and not isinstance(v, bool):
        if not np.isfinite(v) or v != int(v):
            raise ValueError(f"command {i}: field {field!r} = {v!r} is not a whole number")
        v = int(v)
    try:
        return command_field(field, v)
    except (TypeError, ValueError) as e:
        raise type(e)(f"command {i}: {e}") from None


def commands(rows) -> np.ndarray:
    """Build a command array from dicts (missing fields are 0; ``timed`` defaults True).

    Values must be integers (a float is taken only when it is a whole number) that the
    field's type holds; anything else raises TypeError / ValueError naming the command
    and the field - never a silent truncation or wrap.
    """
    rows = list(rows)
    out = np.zeros(len(rows), dtype=COMMAND_DTYPE)
    out["timed"] = True
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            raise TypeError(f"command {i}: expected a dict of fields, got {type(r).__name__}")
        for k, v in r.items():
            if k not in COMMAND_FIELDS:
                raise ValueError(f"unknown command field {k!r}; fields are {COMMAND_FIELDS}")
            out[i][k] = _row_value(i, k, v)
    return out


def as_commands(arr) -> np.ndarray:
    """Check that ``arr`` is a 1-d command array, with a clear error otherwise."""
    if not isinstance(arr, np.ndarray):
        raise TypeError(
            f"commands must be a numpy array of COMMAND_DTYPE, got {type(arr).__name__}")
    if arr.dtype != COMMAND_DTYPE:
        missing = [f for f in COMMAND_FIELDS if arr.dtype.names is None or f not in arr.dtype.names]
        detail = f"missing fields {missing}" if missing else f"dtype {arr.dtype}"
        raise TypeError(f"commands must have lob.semantics.COMMAND_DTYPE ({detail})")
    if arr.ndim != 1:
        raise ValueError(f"commands must be 1-dimensional, got shape {arr.shape}")
    return arr


def _exact_sum(x: np.ndarray) -> int:
    """The sum of an int array as a Python int, exact even where int64 would wrap."""
    if x.size == 0:
        return 0
    bound = max(abs(int(x.max())), abs(int(x.min())))
    if bound * x.size < 2**63:
        return int(x.sum(dtype=np.int64))
    return sum(x.tolist())


def counters(outcomes: np.ndarray) -> dict[str, int]:
    """Outcome counters of a replay (see the module docstring); sums are exact."""
    st = outcomes["status"]
    bc = np.bincount(st.astype(np.int64), minlength=len(Status))
    return {
        "filled": int(bc[Status.FILLED]),
        "partial": int(bc[Status.PARTIALLY_FILLED]),
        "accepted": int(bc[Status.ACCEPTED]),
        "cancelled": int(bc[Status.CANCELLED]),
        "rejected": int(bc[Status.REJECTED]),
        "notfound": int(bc[Status.NOT_FOUND]),
        "trades": _exact_sum(outcomes["fills"]),
        "matched_volume": _exact_sum(outcomes["filled"]),
        "remaining_sum": _exact_sum(outcomes["remaining"]),
    }


_P = np.uint64(0x100000001B3)  # FNV-1 64-bit prime, used as the polynomial base


def _poly_hash(words: np.ndarray) -> int:
    """sum(w[i] * P**(n-1-i)) mod 2**64, i.e. Horner's h = h*P + w over the words."""
    n = words.size
    if n == 0:
        return 0
    powers = np.full(n, _P, dtype=np.uint64)
    powers[-1] = 1
    powers = np.cumprod(powers[::-1], dtype=np.uint64)[::-1]  # wraps mod 2**64
    return int(np.sum(words.astype(np.uint64) * powers, dtype=np.uint64))


def checksum(outcomes: np.ndarray, fills: np.ndarray) -> int:
    """Rolling 64-bit checksum over every outcome row and every fill, in order."""
    with np.errstate(over="ignore"):
        ow = np.stack([outcomes[f].astype(np.int64) for f in OUTCOME_FIELDS], axis=1).ravel()
        fw = np.stack([fills[f].astype(np.int64) for f in FILL_DTYPE.names], axis=1).ravel()
        h1 = _poly_hash(ow.view(np.uint64))
        h2 = _poly_hash(fw.view(np.uint64))
    return (h1 * 0x9E3779B97F4A7C15 + h2 + len(outcomes)) % (1 << 64)

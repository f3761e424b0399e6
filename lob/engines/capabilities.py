"""What an engine can do: STP modes, order types, command kinds, mass-cancel scopes, band.

lob's own engines implement all of :mod:`lob.semantics` (:data:`ALL`). A foreign engine
declares its subset in ``lob_capabilities`` (``lob_engine.h``); its factory exposes it as
``factory.capabilities()``, which :func:`lob.engines.registry.engine_capabilities` reads
without building a book. Callers ask before they run, so what an engine cannot do is
refused or skipped with the reason stated, never a failure deep inside a replay:

* :meth:`Capabilities.config_refusal` -- a :class:`~lob.semantics.BookConfig` it cannot
  honour (STP mode, band width, a band outside the prices it can hold);
* :meth:`Capabilities.commands_refusal` -- a command array using a kind, order type or scope
  it does not declare (only rows that would pass validation count: an invalid row is
  REJECTED by every engine alike, so it never needs a capability).

Both return ``None`` or one line naming the engine, what is missing and where.

The command check runs on every foreign replay, so it is one pass over the array: a
histogram of the (kind, type/scope) byte pair of every row (:func:`kind_type_counts`). Only
when that histogram holds a pair the engine does not declare are the rows looked at one by
one (an invalid row of that pair, e.g. a MODIFY of quantity 0, needs no capability).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lob.semantics import (
    COMMAND_DTYPE,
    MAX_NOTIONAL,
    MAX_PRICE,
    MAX_QTY,
    BookConfig,
    Kind,
    OrderType,
    Scope,
    StpMode,
)


class Unsupported(ValueError):
    """An engine was asked for something its declared capabilities exclude."""


@dataclass(frozen=True)
class Capabilities:
    """A declared subset of lob's semantics (all of it by default)."""

    stp_modes: frozenset = frozenset(StpMode)
    order_types: frozenset = frozenset(OrderType)
    kinds: frozenset = frozenset(Kind)
    scopes: frozenset = frozenset(Scope)
    max_band_width: int | None = None  # None: any band BookConfig allows
    min_price: int | None = None  # lowest price a band may start at (None: 1)
    max_price: int | None = None  # highest price a band may end at (None: MAX_PRICE)

    @classmethod
    def from_bits(cls, stp: int, types: int, kinds: int, scopes: int,
                  max_band_width: int, min_price: int = 0,
                  max_price: int = 0) -> Capabilities:
        """From the fields of a ``lob_caps`` record (bit i set: member i supported; a band
        end of 0: none stated, as in a record of an engine that predates them)."""
        def members(enum, bits):
            return frozenset(m for m in enum if bits >> int(m) & 1)

        return cls(members(StpMode, stp), members(OrderType, types), members(Kind, kinds),
                   members(Scope, scopes), int(max_band_width) or None,
                   int(min_price) or None, int(max_price) or None)

    @property
    def price_range(self) -> tuple[int, int]:
        """(lowest, highest) price a band of this engine may hold."""
        return (self.min_price or 1, self.max_price or MAX_PRICE)

    def widest_band(self) -> int:
        """The widest band this engine accepts (its price range and its max width)."""
        lo, hi = self.price_range
        return min(hi - lo + 1, self.max_band_width or hi - lo + 1)

    @property
    def complete(self) -> bool:
        """True when nothing of lob's semantics is missing."""
        return self == Capabilities(max_band_width=self.max_band_width,
                                    min_price=self.min_price, max_price=self.max_price)

    def missing(self) -> list[str]:
        """What is not supported, as short names (``stp CANCEL_MAKER``, ``MODIFY``, ...)."""
        out = [f"stp {m.name}" for m in StpMode if m not in self.stp_modes]
        out += [k.name for k in Kind if k not in self.kinds]
        out += [t.name for t in OrderType if t not in self.order_types]
        out += [f"scope {s.name}" for s in Scope if s not in self.scopes]
        return out

    def summary(self) -> str:
        """One short phrase: ``all of lob.semantics`` or ``no stp CANCEL_MAKER, ...``."""
        miss = self.missing()
        band = "" if self.min_price is None and self.max_price is None else \
            f"; prices {self.price_range[0]:,}..{self.price_range[1]:,}"
        return ("all of lob.semantics" if not miss else "no " + ", ".join(miss)) + band

    def config_refusal(self, engine: str, config: BookConfig) -> str | None:
        """Why ``engine`` cannot build a book for ``config`` (None when it can)."""
        if config.stp not in self.stp_modes:
            have = ", ".join(m.name for m in StpMode if m in self.stp_modes) or "none"
            return (f"engine {engine!r} does not support STP mode {config.stp.name} (it "
                    f"declares: {have}); use a config with stp={have.split(',')[0]} or "
                    f"another engine")
        if self.max_band_width is not None and config.width > self.max_band_width:
            return (f"engine {engine!r} accepts bands up to {self.max_band_width:,} prices "
                    f"wide; {config.min_price:,}..{config.max_price:,} is {config.width:,}")
        lo, hi = self.price_range
        if config.min_price < lo or config.max_price > hi:
            return (f"engine {engine!r} holds prices {lo:,}..{hi:,} only (declared by the "
                    f"engine); the band {config.min_price:,}..{config.max_price:,} reaches "
                    f"outside them")
        return None

    def commands_refusal(self, engine: str, cmds: np.ndarray, config: BookConfig) -> str | None:
        """Why ``engine`` cannot run ``cmds`` (None when it can): the first valid-looking
        command of a kind, order type or scope it does not declare, and how many there are."""
        if self.complete or len(cmds) == 0:
            return None
        counts = kind_type_counts(cmds)
        if not counts[self._undeclared_pairs()].any():
            return None  # the one pass says no row uses anything undeclared
        kind, otype, qty = cmds["kind"], cmds["otype"], cmds["qty"]
        checks = []
        for k in Kind:
            if k not in self.kinds:
                mask = kind == k
                if k == Kind.MODIFY:  # a modify that validation rejects needs nothing
                    mask &= (qty > 0) & (qty <= MAX_QTY)
                checks.append((k.name, mask))
        sub = kind == Kind.SUBMIT
        for t in OrderType:
            if t not in self.order_types:
                cap = MAX_NOTIONAL if t == OrderType.NOTIONAL else MAX_QTY
                ok = sub & (otype == t) & np.isin(cmds["side"], (0, 1)) & \
                    (cmds["owner"] > 0) & (qty > 0) & (qty <= cap)
                if t < OrderType.MARKET:
                    ok &= (cmds["price"] >= config.min_price) & \
                        (cmds["price"] <= config.max_price)
                checks.append((t.name + " orders", ok))
        for s in Scope:
            if s not in self.scopes:
                checks.append((f"mass cancels of scope {s.name}",
                               (kind == Kind.MASS_CANCEL) & (otype == s)))
        for what, mask in checks:
            n = int(np.count_nonzero(mask))
            if n:
                first = int(np.argmax(mask))
                return (f"engine {engine!r} does not support {what} (declared by the "
                        f"engine); these commands use them {n:,} times, first at command "
                        f"{first:,}")
        return None


    def _undeclared_pairs(self) -> np.ndarray:
        """Mask over the 65,536 (kind, type byte) pairs that may need an undeclared
        capability (a superset: validity is checked row by row only when one occurs)."""
        got = _PAIRS.get(self)
        if got is not None:
            return got
        m = np.zeros((256, 256), dtype=bool)  # [kind byte, type byte]
        for k in Kind:
            if k not in self.kinds:
                m[int(k)] = True
        for t in OrderType:
            if t not in self.order_types:
                m[int(Kind.SUBMIT), int(t)] = True
        for s in Scope:
            if s not in self.scopes:
                m[int(Kind.MASS_CANCEL), int(s)] = True
        # index = kind byte + 256 * type byte (the two leading bytes of a row, little-endian)
        got = _PAIRS[self] = np.ascontiguousarray(m.T).reshape(-1)
        return got


_PAIRS: dict[Capabilities, np.ndarray] = {}


def kind_type_counts(cmds: np.ndarray) -> np.ndarray:
    """How many rows of a command array carry each (kind, otype) byte pair: 65,536 counts,
    index ``kind byte + 256 * otype byte`` (one strided pass over the two leading bytes)."""
    if cmds.dtype != COMMAND_DTYPE or not cmds.flags.c_contiguous:
        cmds = np.ascontiguousarray(cmds, dtype=COMMAND_DTYPE)
    pair = np.ndarray((len(cmds),), dtype="<u2", buffer=cmds, offset=0,
                      strides=(COMMAND_DTYPE.itemsize,))
    return np.bincount(pair, minlength=1 << 16)


ALL = Capabilities()

__all__ = ["ALL", "Capabilities", "Unsupported", "kind_type_counts"]

"""``listbook``: a small price-time book on plain dicts and lists, registered with lob from
outside through the ``lob.engines`` entry point (see ``pyproject.toml``).

Only lob's public API is used: :class:`lob.engines.PyEngine` (validation, ids, the
interactive API, replay loops; a subclass implements the book hooks), the rule that turns a
finished match into an outcome (:func:`lob.engines.driver.match_outcome`) and the enums of
:mod:`lob.semantics`.
"""

from __future__ import annotations

from lob.engines import EngineSpec, PyEngine
from lob.engines.driver import match_outcome
from lob.semantics import BookConfig, OrderType, Reason, Status, StpMode

ACCEPTED, CANCELLED, NOT_FOUND = int(Status.ACCEPTED), int(Status.CANCELLED), \
    int(Status.NOT_FOUND)
LIMIT, FOK, POST_ONLY, MARKET, NOTIONAL = (int(OrderType.LIMIT), int(OrderType.FOK),
                                            int(OrderType.POST_ONLY), int(OrderType.MARKET),
                                            int(OrderType.NOTIONAL))


class ListBook(PyEngine):
    """Per side a dict price -> list of ``[id, owner, qty]`` in time order."""

    name = "listbook"

    def __init__(self, config: BookConfig | None = None):
        super().__init__(config)
        self.stp = int(self.config.stp)
        self.levels: tuple[dict, dict] = ({}, {})  # bids, asks
        self.where: dict[int, tuple[int, int]] = {}  # id -> (side, price)

    # --- the book -----------------------------------------------------------------------
    def prices(self, side: int) -> list[int]:
        """Prices of one side, best first."""
        return sorted(self.levels[side], reverse=side == 0)

    def best(self, side: int) -> int | None:
        lv = self.levels[side]
        if not lv:
            return None
        return max(lv) if side == 0 else min(lv)

    @staticmethod
    def crosses(side: int, limit: int | None, price: int) -> bool:
        return limit is None or (price <= limit if side == 0 else price >= limit)

    def rest(self, oid: int, owner: int, side: int, price: int, qty: int) -> None:
        self.levels[side].setdefault(price, []).append([oid, owner, qty])
        self.where[oid] = (side, price)

    def take_off(self, oid: int) -> list:
        side, price = self.where.pop(oid)
        level = self.levels[side][price]
        order = next(o for o in level if o[0] == oid)
        level.remove(order)
        if not level:
            del self.levels[side][price]
        return [order[0], order[1], order[2], side, price]

    # --- PyEngine hooks -----------------------------------------------------------------
    def _submit(self, oid, owner, side, otype, price, qty):
        limit = None if otype >= MARKET else price
        if otype == POST_ONLY:
            b = self.best(1 - side)
            if b is not None and self.crosses(side, limit, b):
                return (CANCELLED, int(Reason.WOULD_CROSS), oid, qty, 0, 0, 0)
        if otype == FOK and self.available(side, limit, owner) < qty:
            return (CANCELLED, int(Reason.FOK_UNFILLABLE), oid, qty, 0, 0, 0)
        return self.match(oid, owner, side, otype, limit, price, qty)

    def available(self, side, limit, owner) -> int:
        total = 0
        opp = self.levels[1 - side]
        for p in self.prices(1 - side):
            if not self.crosses(side, limit, p):
                break
            for o in opp[p]:
                if o[1] == owner and self.stp != StpMode.NONE:
                    if self.stp == StpMode.CANCEL_MAKER:
                        continue
                    return total
                total += o[2]
        return total

    def match(self, oid, owner, side, otype, limit, price, qty):
        opp = self.levels[1 - side]
        left, filled, nfills, removed = qty, 0, 0, 0
        stopped = too_dear = False
        while left > 0 and opp:
            p = self.best(1 - side)
            if not self.crosses(side, limit, p):
                break
            if otype == NOTIONAL and p > left:
                too_dear = True
                break
            maker = opp[p][0]
            if maker[1] == owner and self.stp != StpMode.NONE:
                if self.stp != StpMode.CANCEL_TAKER:
                    self.take_off(maker[0])
                    removed += 1
                if self.stp != StpMode.CANCEL_MAKER:
                    stopped = True
                    break
                continue
            take = min(maker[2], left // p if otype == NOTIONAL else left)
            maker[2] -= take
            left -= take * p if otype == NOTIONAL else take
            filled += take
            nfills += 1
            self.record_fill(oid, maker[0], p, take)
            if maker[2] == 0:
                self.take_off(maker[0])
        out, rests = match_outcome(otype, oid, left, filled, nfills, removed, stopped, too_dear)
        if rests:
            self.rest(oid, owner, side, price, left)
        return out

    def _cancel(self, oid):
        if oid not in self.where:
            return (NOT_FOUND, int(Reason.UNKNOWN_ID), oid, 0, 0, 0, 0)
        self.take_off(oid)
        return (CANCELLED, 0, oid, 0, 0, 0, 1)

    def _modify(self, oid, qty, price):
        if oid not in self.where:
            return (NOT_FOUND, int(Reason.UNKNOWN_ID), oid, 0, 0, 0, 0)
        side, at = self.where[oid]
        if price == 0 or price == at:
            order = next(o for o in self.levels[side][at] if o[0] == oid)
            if qty <= order[2]:  # keeps its place
                order[2] = qty
            else:  # to the tail of its level
                self.take_off(oid)
                self.rest(oid, order[1], side, at, qty)
            return (ACCEPTED, 0, oid, qty, 0, 0, 0)
        _, owner, _, side, _ = self.take_off(oid)
        return self.match(oid, owner, side, LIMIT, price, price, qty)

    def _mass_cancel(self, scope, side, owner, lo, hi):
        victims = []
        for s in (0, 1):
            for p, level in self.levels[s].items():
                for o in level:
                    if (scope == 0 or (scope == 1 and s == side) or (scope == 2 and o[1] == owner)
                            or (scope == 3 and lo <= p <= hi)):
                        victims.append(o[0])
        for oid in victims:
            self.take_off(oid)
        return (CANCELLED, 0, 0, 0, 0, 0, len(victims))

    # --- views ---------------------------------------------------------------------------
    def snapshot(self, depth: int = 10) -> dict:
        return {key: [(p, sum(o[2] for o in self.levels[s][p]), len(self.levels[s][p]))
                      for p in self.prices(s)[:depth]]
                for s, key in ((0, "bids"), (1, "asks"))}

    def check(self) -> None:
        b, a = self.best(0), self.best(1)
        assert b is None or a is None or b < a, "book is crossed"
        n = 0
        for s in (0, 1):
            for p, level in self.levels[s].items():
                assert level, f"empty level {p} kept"
                for o in level:
                    assert o[2] > 0 and self.where.get(o[0]) == (s, p), f"order {o[0]} is broken"
                    n += 1
        assert n == len(self.where), "index holds orders that are not on the book"


ENGINES = [EngineSpec("listbook", ListBook,
                      "example plugin (examples/py_engine): dict of plain-list price levels")]

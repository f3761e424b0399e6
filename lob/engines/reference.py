"""The oracle: the simplest obviously-correct book.

Each side is a ``SortedDict`` price -> ``deque`` of orders (FIFO), plus one dict from id
to order. Correctness over speed: every other engine is checked against this one.
"""

from __future__ import annotations

from collections import deque

from sortedcontainers import SortedDict

from lob.engines.base import EngineSpec
from lob.engines.driver import PyEngine
from lob.semantics import BookConfig, OrderType, Reason, Status, StpMode

ACCEPTED, CANCELLED = int(Status.ACCEPTED), int(Status.CANCELLED)
NOT_FOUND = int(Status.NOT_FOUND)
LIMIT, IOC, FOK, POST_ONLY, MARKET, NOTIONAL = (int(t) for t in OrderType)


class Order:
    __slots__ = ("id", "owner", "side", "price", "qty", "seq")

    def __init__(self, oid, owner, side, price, qty, seq):
        self.id, self.owner, self.side, self.price, self.qty, self.seq = (
            oid, owner, side, price, qty, seq)


class ReferenceEngine(PyEngine):
    name = "reference"
    max_band_width = None  # only non-empty levels are kept: any band (lob.engines.bands)

    def __init__(self, config: BookConfig | None = None):
        super().__init__(config)
        self._sides = (SortedDict(), SortedDict())  # BUY (bids), SELL (asks)
        self._index: dict[int, Order] = {}
        self._seq = 0
        # conservation: qty put on the book == qty traded from it + removed + resting
        self._qty_in = self._qty_traded = self._qty_removed = 0

    # --- helpers ------------------------------------------------------------------
    def _best(self, side):
        book = self._sides[side]
        if not book:
            return None
        return book.peekitem(-1 if side == 0 else 0)

    @staticmethod
    def _crosses(taker_side, limit, price):
        return limit is None or (price <= limit if taker_side == 0 else price >= limit)

    def _rest(self, oid, owner, side, price, qty):
        self._seq += 1
        o = Order(oid, owner, side, price, qty, self._seq)
        self._sides[side].setdefault(price, deque()).append(o)
        self._index[oid] = o
        self._qty_in += qty

    def _remove(self, o):
        book = self._sides[o.side]
        q = book[o.price]
        q.remove(o)
        if not q:
            del book[o.price]
        del self._index[o.id]
        self._qty_removed += o.qty

    def _available(self, side, limit, owner, want):
        """Quantity an incoming order could trade, honouring the STP mode."""
        opp = self._sides[1 - side]
        prices = reversed(opp) if side == 1 else iter(opp)
        total = 0
        for p in prices:
            if not self._crosses(side, limit, p):
                break
            for o in opp[p]:
                if o.owner == owner and self._stp != StpMode.NONE:
                    if self._stp == StpMode.CANCEL_MAKER:
                        continue
                    return total
                total += o.qty
        return total

    # --- operations ---------------------------------------------------------------
    def _submit(self, oid, owner, side, otype, price, qty):
        limit = None if otype >= MARKET else price
        opp_side = 1 - side
        if otype == POST_ONLY:
            best = self._best(opp_side)
            if best is not None and self._crosses(side, limit, best[0]):
                return (CANCELLED, int(Reason.WOULD_CROSS), oid, qty, 0, 0, 0)
        if otype == FOK and self._available(side, limit, owner, qty) < qty:
            return (CANCELLED, int(Reason.FOK_UNFILLABLE), oid, qty, 0, 0, 0)
        return self._match(oid, owner, side, otype, limit, price, qty)

    def _match(self, oid, owner, side, otype, limit, price, qty):
        opp = self._sides[1 - side]
        stp = self._stp
        left = qty  # lots, or quote amount for NOTIONAL
        filled = nfills = removed = 0
        taker_stopped = too_dear = False
        while left > 0 and opp:
            p, q = opp.peekitem(-1 if side == 1 else 0)
            if not self._crosses(side, limit, p):
                break
            if otype == NOTIONAL and p > left:
                too_dear = True
                break
            o = q[0]
            if o.owner == owner and stp != StpMode.NONE:
                if stp != StpMode.CANCEL_TAKER:
                    self._remove(o)
                    removed += 1
                if stp != StpMode.CANCEL_MAKER:
                    taker_stopped = True
                    break
                continue
            take = min(o.qty, left // p if otype == NOTIONAL else left)
            o.qty -= take
            left -= take * p if otype == NOTIONAL else take
            filled += take
            nfills += 1
            self._qty_traded += take
            self._fills.append((oid, o.id, p, take))
            if o.qty == 0:
                q.popleft()
                del self._index[o.id]
                if not q:
                    del opp[p]
        return self._finish(oid, owner, side, otype, price, left, filled, nfills, removed,
                            taker_stopped, too_dear)

    def _cancel(self, oid):
        o = self._index.get(oid)
        if o is None:
            return (NOT_FOUND, int(Reason.UNKNOWN_ID), oid, 0, 0, 0, 0)
        self._remove(o)
        return (CANCELLED, 0, oid, 0, 0, 0, 1)  # remaining=0: the C++ convention (semantics.py)

    def _modify(self, oid, qty, price):
        o = self._index.get(oid)
        if o is None:
            return (NOT_FOUND, int(Reason.UNKNOWN_ID), oid, 0, 0, 0, 0)
        if price == 0 or price == o.price:
            if qty <= o.qty:  # keeps its place in the queue
                self._qty_removed += o.qty - qty
                o.qty = qty
            else:  # loses priority: to the tail of its level
                self._remove(o)
                self._rest(oid, o.owner, o.side, o.price, qty)
            return (ACCEPTED, 0, oid, qty, 0, 0, 0)
        self._remove(o)
        return self._match(oid, o.owner, o.side, LIMIT, price, price, qty)

    def _mass_cancel(self, scope, side, owner, lo, hi):
        if scope == 0:
            victims = list(self._index.values())
        elif scope == 1:
            victims = [o for o in self._index.values() if o.side == side]
        elif scope == 2:
            victims = [o for o in self._index.values() if o.owner == owner]
        else:
            victims = [o for o in self._index.values() if lo <= o.price <= hi]
        for o in victims:
            self._remove(o)
        return (CANCELLED, 0, 0, 0, 0, 0, len(victims))

    # --- views and invariants -----------------------------------------------------
    def snapshot(self, depth: int = 10) -> dict:
        out = {}
        for side, key in ((0, "bids"), (1, "asks")):
            book = self._sides[side]
            prices = list(reversed(book) if side == 0 else book)[:depth]
            out[key] = [(p, sum(o.qty for o in book[p]), len(book[p])) for p in prices]
        return out

    def resting(self) -> list[tuple]:
        """(id, owner, side, price, qty) of every resting order, in priority order per side."""
        out = []
        for side in (0, 1):
            book = self._sides[side]
            for p in (reversed(book) if side == 0 else book):
                out.extend((o.id, o.owner, side, p, o.qty) for o in book[p])
        return out

    def check(self) -> None:
        bids, asks = self._sides
        if bids and asks:
            assert bids.peekitem(-1)[0] < asks.peekitem(0)[0], "book is crossed"
        seen = 0
        resting = 0
        for side, book in enumerate(self._sides):
            for p, q in book.items():
                assert q, f"empty level {p} kept on side {side}"
                assert self._lo <= p <= self._hi, f"level {p} outside the band"
                last = 0
                for o in q:
                    assert o.qty > 0, f"order {o.id} rests with qty {o.qty}"
                    assert o.side == side and o.price == p, f"order {o.id} in the wrong level"
                    assert self._index.get(o.id) is o, f"order {o.id} missing from the index"
                    assert o.seq > last, f"FIFO broken at level {p}"
                    last = o.seq
                    seen += 1
                    resting += o.qty
        assert seen == len(self._index), "index holds orders that are not on the book"
        assert self._qty_in == self._qty_traded + self._qty_removed + resting, \
            "quantity not conserved"


ENGINES = [EngineSpec("reference", ReferenceEngine,
                      "oracle: SortedDict of price levels + FIFO deques")]

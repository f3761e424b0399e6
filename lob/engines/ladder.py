"""The pure-Python ladder engine, assembled from three toggles.

Prices live on a ladder indexed by ``price - min_price``. Each toggle swaps one part and
leaves the rest (above all the one matching loop, :meth:`LadderEngine._match`) untouched:

* ``levels``: ``deque`` (a deque of order objects per level) | ``pool`` (index-linked
  nodes in preallocated lists with a free list), see :mod:`lob.engines._levels`;
* ``best``: ``scan`` (linear scan, re-run at every match step) | ``bitmap`` (hierarchical
  64-bit word masks) | ``sorted`` (a SortedList of non-empty levels), see
  :mod:`lob.engines._best`;
* ``fok``: how a FOK order's fillable quantity is counted: ``full`` (every crossing order)
  | ``early_exit`` (stop once enough is found) | ``level_sums`` (per-level totals and
  per-level per-owner totals, kept up to date on every change: O(levels)).

Semantics are exactly those of :mod:`lob.semantics` as :mod:`lob.engines.reference`
implements them; the differential tests hold every combination to that, bit for bit.
"""

from __future__ import annotations

from functools import partial

from lob.engines import toggles as tg
from lob.engines._best import FINDERS
from lob.engines._levels import STORES
from lob.engines.bands import check_band, max_width
from lob.engines.base import EngineSpec
from lob.engines.driver import PyEngine
from lob.semantics import BookConfig, OrderType, Reason, Status, StpMode

ACCEPTED, CANCELLED = int(Status.ACCEPTED), int(Status.CANCELLED)
NOT_FOUND = int(Status.NOT_FOUND)
LIMIT, IOC, FOK, POST_ONLY, MARKET, NOTIONAL = (int(t) for t in OrderType)
CANCEL_MAKER, CANCEL_TAKER = int(StpMode.CANCEL_MAKER), int(StpMode.CANCEL_TAKER)
FOK_UNFILLABLE, WOULD_CROSS = int(Reason.FOK_UNFILLABLE), int(Reason.WOULD_CROSS)
UNKNOWN_ID = int(Reason.UNKNOWN_ID)
# "count everything": above any book's total (< 2**63 by the bounds of lob.semantics), and
# an int, so the per-order comparison stays int/int
NO_LIMIT = 1 << 63

# bytes each toggle allocates per price of the band, whatever the book holds: a list slot
# (8 B) per level key and side for the level store (deque: the queue slot; pool: head and
# tail) and the level_sums totals; scan: one occupancy byte per side; bitmap: one 8 B slot
# per 64 prices per side (plus summary levels); sorted: nothing per price
BAND_BYTES = {"levels": {"deque": 16, "pool": 32}, "best": {"scan": 2, "bitmap": 0.26,
                                                          "sorted": 0},
              "fok": {"full": 0, "early_exit": 0, "level_sums": 16}}


def band_bytes_per_price(levels: str, best: str, fok: str) -> float:
    """Bytes per price of the band a ladder with these toggles allocates at creation."""
    b = BAND_BYTES
    return b["levels"][levels] + b["best"][best] + b["fok"][fok]


class LevelSums:
    """Per-level total quantity and per-level per-owner quantity (the ``level_sums`` FOK).

    ``tot[k]`` is level k's open quantity; ``own[owner * nlevels + k]`` an owner's share of
    it, deleted when it drops to 0 (so a missing key means "no own order at k").
    """

    def __init__(self, nlevels: int):
        self.n = nlevels
        self.tot = [0] * nlevels
        self.own: dict[int, int] = {}

    def add(self, k, owner, q) -> None:
        self.tot[k] += q
        key = owner * self.n + k
        own = self.own
        own[key] = own.get(key, 0) + q

    def sub(self, k, owner, q) -> None:
        self.tot[k] -= q
        key = owner * self.n + k
        own = self.own
        left = own[key] - q
        if left:
            own[key] = left
        else:
            del own[key]


class LadderEngine(PyEngine):
    """A price-ladder book; ``levels``, ``best`` and ``fok`` pick one implementation each.

    ``capacity`` is the initial node count of the ``pool`` store (it doubles when full).
    """

    name = "ladder"

    def __init__(self, config: BookConfig | None = None, *, levels: str = "deque",
                 best: str = "scan", fok: str = "full", stream: str = "plain",
                 loop: str = "single", select: str = "branch", ownsums: str = "always",
                 capacity: int = 64):
        super().__init__(config)
        # stream, loop, select, ownsums: the compiled kernels' switches (one value here)
        self.toggles = tg.check("python", levels=levels, best=best, fok=fok, stream=stream,
                                loop=loop, select=select, ownsums=ownsums)
        self.name = f"ladder[{levels},{best},{fok}]"
        per_price = band_bytes_per_price(levels, best, fok)
        self.max_band_width = max_width(per_price)
        check_band(self.name, self.config, int(per_price * self.config.width),
                   self.max_band_width)  # before anything is allocated per price
        w = self._w = self.config.width
        self._lv = STORES[levels](2 * w, capacity)
        self._bests = (FINDERS[best](w, True), FINDERS[best](w, False))  # bids: highest first
        self._sums = LevelSums(2 * w) if fok == "level_sums" else None
        self._unfillable = {"full": self._short_full, "early_exit": self._short_early,
                            "level_sums": self._short_sums}[fok]
        self._seq = 0
        lv = self._lv
        # what _match needs per taker side, bound once (the opposite side's finder and keys)
        self._ctx = tuple((self._bests[1 - side].best, self._bests[1 - side].remove,
                           (1 - side) * w, lv.front, lv.fill_front, lv.pop_front, self._sums,
                           self._stp, self._lo) for side in (0, 1))
        self._rest_ctx = tuple((lv.push, self._bests[side].add, side * w, self._sums)
                               for side in (0, 1))
        # conservation: qty put on the book == qty traded from it + removed + resting
        self._qty_in = self._qty_traded = self._qty_removed = 0

    # --- book changes outside matching ---------------------------------------------
    def _rest(self, oid, owner, side, i, qty):
        push, mark, off, sums = self._rest_ctx[side]
        k = off + i
        self._seq = seq = self._seq + 1
        if push(k, oid, owner, qty, seq):
            mark(i)
        if sums is not None:
            sums.add(k, owner, qty)
        self._qty_in += qty

    def _take_off(self, oid):
        """Remove a resting order by id: (side, i, owner, qty), or None if not resting."""
        r = self._lv.remove_id(oid)
        if r is None:
            return None
        k, owner, qty, empty = r
        side = 1 if k >= self._w else 0
        i = k - side * self._w
        if empty:
            self._bests[side].remove(i)
        if self._sums is not None:
            self._sums.sub(k, owner, qty)
        self._qty_removed += qty
        return side, i, owner, qty

    # --- FOK: is the crossing quantity short of qty? (the fok toggle) ---------------
    def _avail_walk(self, side, lim, owner, need):
        """Crossing quantity counted order by order, level by level, up to ``need``."""
        opp = 1 - side
        bst = self._bests[opp]
        after = bst.after
        off = opp * self._w
        avail = self._lv.avail
        mode = self._stp
        total = 0
        i = bst.best()
        while i >= 0 and (i <= lim if side == 0 else i >= lim):
            t, hit_own = avail(off + i, owner, mode, need - total)
            total += t
            if hit_own or total >= need:
                break
            i = after(i)
        return total

    def _short_full(self, side, lim, owner, qty):
        return self._avail_walk(side, lim, owner, NO_LIMIT) < qty

    def _short_early(self, side, lim, owner, qty):
        return self._avail_walk(side, lim, owner, qty) < qty

    def _short_sums(self, side, lim, owner, qty):
        opp = 1 - side
        bst = self._bests[opp]
        after = bst.after
        off = opp * self._w
        sums = self._sums
        tot, own, key0 = sums.tot, sums.own, owner * sums.n
        mode = self._stp
        total = 0
        i = bst.best()
        while i >= 0 and (i <= lim if side == 0 else i >= lim):
            k = off + i
            if mode == 0:
                total += tot[k]
            else:
                mine = own.get(key0 + k, 0)
                if mode == CANCEL_MAKER:
                    total += tot[k] - mine
                elif mine:
                    # taker-side STP stops at the first own order: only this level is walked
                    total += self._lv.avail(k, owner, mode, qty - total)[0]
                    break
                else:
                    total += tot[k]
            if total >= qty:
                break
            i = after(i)
        return total < qty

    # --- operations -----------------------------------------------------------------
    def _submit(self, oid, owner, side, otype, price, qty):
        if otype >= MARKET:
            lim = self._w if side == 0 else -1  # crosses every level
        else:
            lim = price - self._lo
        if otype == POST_ONLY:
            b = self._bests[1 - side].best()
            if b >= 0 and (b <= lim if side == 0 else b >= lim):
                return (CANCELLED, WOULD_CROSS, oid, qty, 0, 0, 0)
        elif otype == FOK and self._unfillable(side, lim, owner, qty):
            return (CANCELLED, FOK_UNFILLABLE, oid, qty, 0, 0, 0)
        return self._match(oid, owner, side, otype, lim, qty)

    def _match(self, oid, owner, side, otype, lim, qty):
        """The one matching loop: best level first, FIFO within it, at the maker's price."""
        best, unset, off, front, fill_front, pop_front, sums, stp, lo = self._ctx[side]
        fills = self._fills
        buy = side == 0
        notional = otype == NOTIONAL
        left = qty  # lots, or quote amount for NOTIONAL
        filled = nfills = removed = 0
        taker_stopped = too_dear = False
        while left > 0:
            i = best()  # re-run at every step, whatever the finder
            if i < 0 or (i > lim if buy else i < lim):
                break
            p = i + lo
            if notional and p > left:
                too_dear = True
                break
            k = off + i
            h, mid, mo, mq = front(k)
            if mo == owner and stp:
                if stp != CANCEL_TAKER:
                    if pop_front(k, h):
                        unset(i)
                    if sums is not None:
                        sums.sub(k, mo, mq)
                    self._qty_removed += mq
                    removed += 1
                if stp != CANCEL_MAKER:
                    taker_stopped = True
                    break
                continue
            if notional:
                take = left // p
                if take > mq:
                    take = mq
                left -= take * p
            else:
                take = mq if mq < left else left
                left -= take
            filled += take
            nfills += 1
            fills.append((oid, mid, p, take))
            if fill_front(k, h, take):
                unset(i)
            if sums is not None:
                sums.sub(k, mo, take)
        self._qty_traded += filled
        return self._finish(oid, owner, side, otype, lim, left, filled, nfills, removed,
                            taker_stopped, too_dear)

    def _cancel(self, oid):
        r = self._take_off(oid)
        if r is None:
            return (NOT_FOUND, UNKNOWN_ID, oid, 0, 0, 0, 0)
        return (CANCELLED, 0, oid, 0, 0, 0, 1)  # remaining=0: the C++ convention

    def _modify(self, oid, qty, price):
        lv = self._lv
        h = lv.index.get(oid)
        if h is None:
            return (NOT_FOUND, UNKNOWN_ID, oid, 0, 0, 0, 0)
        k, owner, old = lv.info(h)
        side = 1 if k >= self._w else 0
        i = k - side * self._w
        if price == 0 or price - self._lo == i:
            if qty <= old:  # keeps its place in the queue
                lv.set_qty(h, qty)
                if self._sums is not None and qty < old:
                    self._sums.sub(k, owner, old - qty)
                self._qty_removed += old - qty
            else:  # loses priority: to the tail of its level
                self._take_off(oid)
                self._rest(oid, owner, side, i, qty)
            return (ACCEPTED, 0, oid, qty, 0, 0, 0)
        self._take_off(oid)
        return self._match(oid, owner, side, LIMIT, price - self._lo, qty)

    def _mass_cancel(self, scope, side, owner, lo, hi):
        w = self._w
        rows = self._lv.orders()
        if scope == 0:
            victims = [r[0] for r in rows]
        elif scope == 1:
            victims = [r[0] for r in rows if (r[1] >= w) == (side == 1)]
        elif scope == 2:
            victims = [r[0] for r in rows if r[2] == owner]
        else:
            a, b = lo - self._lo, hi - self._lo
            victims = [r[0] for r in rows if a <= r[1] % w <= b]
        for oid in victims:
            self._take_off(oid)
        return (CANCELLED, 0, 0, 0, 0, 0, len(victims))

    # --- views and invariants -------------------------------------------------------
    def _levels_in_priority(self, side, depth):
        bst = self._bests[side]
        i = bst.best()
        while i >= 0 and depth > 0:
            yield i
            depth -= 1
            i = bst.after(i)

    def snapshot(self, depth: int = 10) -> dict:
        """L2 view: per side, (price, total qty, order count) of the best ``depth`` levels."""
        out = {}
        for side, key in ((0, "bids"), (1, "asks")):
            rows = []
            for i in self._levels_in_priority(side, depth):
                lvl = self._lv.level(side * self._w + i)
                rows.append((i + self._lo, sum(r[2] for r in lvl), len(lvl)))
            out[key] = rows
        return out

    def resting(self) -> list[tuple]:
        """(id, owner, side, price, qty) of every resting order, in priority order per side."""
        out = []
        for side in (0, 1):
            for i in self._levels_in_priority(side, len(self._lv.index) + 1):
                out.extend((oid, owner, side, i + self._lo, q)
                           for oid, owner, q, _ in self._lv.level(side * self._w + i))
        return out

    def check(self) -> None:
        w, lv = self._w, self._lv
        lv.check()
        keys = lv.nonempty()
        for side in (0, 1):
            bst = self._bests[side]
            bst.check()
            want = [k - side * w for k in keys if (k >= w) == (side == 1)]
            assert bst.indices() == want, f"best-price finder of side {side} is stale"
            walk = list(self._levels_in_priority(side, len(want) + 1))
            assert walk == (want[::-1] if side == 0 else want), f"side {side} walk is wrong"
        bid, ask = self._bests[0].best(), self._bests[1].best()
        if bid >= 0 and ask >= 0:
            assert bid < ask, "book is crossed"
        seen = resting = 0
        sums = self._sums
        own: dict[int, int] = {}
        for k in keys:
            last = 0
            level_qty = 0
            for oid, owner, qty, seq in lv.level(k):
                assert qty > 0, f"order {oid} rests with qty {qty}"
                assert seq > last, f"FIFO broken at level key {k}"
                assert lv.handle_key(lv.index[oid]) == k, f"order {oid} indexed at another level"
                last = seq
                seen += 1
                level_qty += qty
                if sums is not None:
                    key = owner * sums.n + k
                    own[key] = own.get(key, 0) + qty
            if sums is not None:
                assert sums.tot[k] == level_qty, f"level total of key {k} is stale"
            resting += level_qty
        if sums is not None:
            assert own == sums.own, "per-owner level sums are stale"
            # every non-empty level's total was checked above; all others must be 0
            assert sums.tot.count(0) == len(sums.tot) - len(keys), \
                "a level total is left on an empty level"
        assert seen == len(lv.index), "index holds orders that are not on the book"
        assert self._qty_in == self._qty_traded + self._qty_removed + resting, \
            "quantity not conserved"


# the lineage versions on this backend (every version: the ladder implements every toggle)
ENGINES = [EngineSpec(name, partial(LadderEngine, **tg.version_toggles(name)),
                      tg.VERSIONS[name]["step"], "python", tg.version_toggles(name), parent)
           for name, parent in tg.backend_versions("python").items()]

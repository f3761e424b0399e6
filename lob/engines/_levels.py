"""Price-level stores for the ladder engine: the ``levels`` toggle (``deque`` | ``pool``).

A store holds both sides' FIFO queues, addressed by a level key ``k = side * width + i``
(``i`` = price - min_price), and the index ``id -> handle`` of every resting order. A
handle is whatever the store finds cheapest (an order object, a node number); the engine
only passes handles back. Every operation that may empty a level says so, so the engine
can tell its best-price finder; level totals are the engine's business (the ``fok`` toggle).
"""

from __future__ import annotations

from collections import deque


class Order:
    __slots__ = ("id", "owner", "qty", "seq", "k")

    def __init__(self, oid, owner, qty, seq, k):
        self.id, self.owner, self.qty, self.seq, self.k = oid, owner, qty, seq, k


class DequeLevels:
    """A ``collections.deque`` of small order objects per level (created on first use)."""

    def __init__(self, nlevels: int, capacity: int = 0):
        self._q: list[deque | None] = [None] * nlevels
        self._made: set[int] = set()  # keys whose deque exists, so _check need not scan all
        self.index: dict[int, Order] = {}

    def push(self, k, oid, owner, qty, seq) -> bool:
        """Append at the tail of level k; True if the level was empty."""
        q = self._q[k]
        if q is None:
            q = self._q[k] = deque()
            self._made.add(k)
        o = Order(oid, owner, qty, seq, k)
        q.append(o)
        self.index[oid] = o
        return len(q) == 1

    def front(self, k) -> tuple:
        """(handle, id, owner, qty) of the head of non-empty level k."""
        o = self._q[k][0]
        return o, o.id, o.owner, o.qty

    def fill_front(self, k, o, take) -> bool:
        """Trade ``take`` from the head ``o`` of level k; True if the level became empty."""
        left = o.qty - take
        if left:
            o.qty = left
            return False
        q = self._q[k]
        q.popleft()
        del self.index[o.id]
        return not q

    def pop_front(self, k, o) -> bool:
        """Remove the head ``o`` of level k; True if the level became empty."""
        q = self._q[k]
        q.popleft()
        del self.index[o.id]
        return not q

    def remove_id(self, oid):
        """Remove a resting order by id: (k, owner, qty, level_empty), or None if unknown."""
        o = self.index.pop(oid, None)
        if o is None:
            return None
        q = self._q[o.k]
        q.remove(o)  # identity match; O(queue length), in C
        return o.k, o.owner, o.qty, not q

    def info(self, o) -> tuple:
        return o.k, o.owner, o.qty

    def set_qty(self, o, qty) -> None:
        o.qty = qty

    def avail(self, k, owner, mode, need) -> tuple:
        """Quantity of level k in FIFO order that a taker of ``owner`` could trade.

        mode 0 counts everything, 1 skips own orders, 2/3 stop at the first own order
        (then the second item is True). Counting stops once the total reaches ``need``.
        """
        total = 0
        if mode == 0:
            for o in self._q[k]:
                total += o.qty
                if total >= need:
                    break
        elif mode == 1:
            for o in self._q[k]:
                if o.owner != owner:
                    total += o.qty
                    if total >= need:
                        break
        else:
            for o in self._q[k]:
                if o.owner == owner:
                    return total, True
                total += o.qty
                if total >= need:
                    break
        return total, False

    def orders(self) -> list[tuple]:
        """(id, k, owner) of every resting order."""
        return [(o.id, o.k, o.owner) for o in self.index.values()]

    def level(self, k) -> list[tuple]:
        """(id, owner, qty, seq) of level k in FIFO order."""
        q = self._q[k]
        return [(o.id, o.owner, o.qty, o.seq) for o in q] if q else []

    def handle_key(self, h) -> int:
        return h.k

    def nonempty(self) -> list[int]:
        """Keys of the non-empty levels, ascending."""
        return sorted(k for k in self._made if self._q[k])

    def check(self) -> None:
        made = {k for k, q in enumerate(self._q) if q is not None} if len(self._q) < 4096 \
            else self._made
        assert made == self._made, "deque bookkeeping lost a level"
        for oid, o in self.index.items():
            assert o.id == oid, f"index key {oid} holds order {o.id}"


class PoolLevels:
    """Index-linked nodes in preallocated parallel lists with a free list.

    Node n has ``nxt[n]``, ``prv[n]``, ``qty[n]``, ``own[n]``, ``oid[n]``, ``seq[n]`` and
    ``lvl[n]`` (its level key, -1 when free); ``head[k]`` / ``tail[k]`` delimit level k.
    Free nodes are chained through ``nxt`` from ``free``. When no node is free the pool
    doubles (``_grow``, off the normal path).
    """

    def __init__(self, nlevels: int, capacity: int = 1024):
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self._head = [-1] * nlevels
        self._tail = [-1] * nlevels
        self._nxt: list[int] = []
        self._prv: list[int] = []
        self._qty: list[int] = []
        self._own: list[int] = []
        self._oid: list[int] = []
        self._seq: list[int] = []
        self._lvl: list[int] = []
        self._free = -1
        self.index: dict[int, int] = {}
        self._grow(capacity)

    @property
    def capacity(self) -> int:
        return len(self._nxt)

    def _grow(self, extra: int | None = None) -> int:
        """Add ``extra`` free nodes (default: double the pool); returns the free head."""
        n0 = len(self._nxt)
        extra = extra or n0
        self._nxt.extend(range(n0 + 1, n0 + extra + 1))
        self._nxt[-1] = self._free
        for lst, v in ((self._prv, -1), (self._qty, 0), (self._own, 0), (self._oid, 0),
                       (self._seq, 0), (self._lvl, -1)):
            lst.extend([v] * extra)
        self._free = n0
        return n0

    def push(self, k, oid, owner, qty, seq) -> bool:
        n = self._free
        if n < 0:
            n = self._grow()
        nxt = self._nxt
        self._free = nxt[n]
        nxt[n] = -1
        self._qty[n] = qty
        self._own[n] = owner
        self._oid[n] = oid
        self._seq[n] = seq
        self._lvl[n] = k
        self.index[oid] = n
        t = self._tail[k]
        self._prv[n] = t
        self._tail[k] = n
        if t < 0:
            self._head[k] = n
            return True
        nxt[t] = n
        return False

    def front(self, k) -> tuple:
        n = self._head[k]
        return n, self._oid[n], self._own[n], self._qty[n]

    def fill_front(self, k, n, take) -> bool:
        qty = self._qty
        left = qty[n] - take
        if left:
            qty[n] = left
            return False
        return self.pop_front(k, n)

    def pop_front(self, k, n) -> bool:
        nxt = self._nxt
        h = nxt[n]
        self._head[k] = h
        del self.index[self._oid[n]]
        self._lvl[n] = -1
        self._qty[n] = 0
        nxt[n] = self._free
        self._free = n
        if h < 0:
            self._tail[k] = -1
            return True
        self._prv[h] = -1
        return False

    def remove_id(self, oid):
        n = self.index.pop(oid, None)
        if n is None:
            return None
        nxt, prv = self._nxt, self._prv
        k = self._lvl[n]
        a, b = prv[n], nxt[n]
        if a < 0:
            self._head[k] = b
        else:
            nxt[a] = b
        if b < 0:
            self._tail[k] = a
        else:
            prv[b] = a
        q = self._qty[n]
        self._lvl[n] = -1
        self._qty[n] = 0
        nxt[n] = self._free
        self._free = n
        return k, self._own[n], q, a < 0 and b < 0

    def info(self, n) -> tuple:
        return self._lvl[n], self._own[n], self._qty[n]

    def set_qty(self, n, qty) -> None:
        self._qty[n] = qty

    def avail(self, k, owner, mode, need) -> tuple:
        """See :meth:`DequeLevels.avail`."""
        nxt, qty, own = self._nxt, self._qty, self._own
        total = 0
        n = self._head[k]
        if mode == 0:
            while n >= 0:
                total += qty[n]
                if total >= need:
                    break
                n = nxt[n]
        elif mode == 1:
            while n >= 0:
                if own[n] != owner:
                    total += qty[n]
                    if total >= need:
                        break
                n = nxt[n]
        else:
            while n >= 0:
                if own[n] == owner:
                    return total, True
                total += qty[n]
                if total >= need:
                    break
                n = nxt[n]
        return total, False

    def orders(self) -> list[tuple]:
        lvl, own = self._lvl, self._own
        return [(oid, lvl[n], own[n]) for oid, n in self.index.items()]

    def level(self, k) -> list[tuple]:
        out = []
        n = self._head[k]
        while n >= 0:
            out.append((self._oid[n], self._own[n], self._qty[n], self._seq[n]))
            n = self._nxt[n]
        return out

    def handle_key(self, n) -> int:
        return self._lvl[n]

    def nonempty(self) -> list[int]:
        keys = sorted({self._lvl[n] for n in self.index.values()})
        # every other level must be empty: counted at C speed, not walked
        assert len(self._head) - self._head.count(-1) == len(keys), "a level head is stale"
        assert len(self._tail) - self._tail.count(-1) == len(keys), "a level tail is stale"
        return keys

    def check(self) -> None:
        cap = len(self._nxt)
        for lst in (self._prv, self._qty, self._own, self._oid, self._seq, self._lvl):
            assert len(lst) == cap, "pool arrays differ in length"
        used = set(self.index.values())
        assert len(used) == len(self.index), "two ids share a node"
        for oid, n in self.index.items():
            assert self._oid[n] == oid and self._lvl[n] >= 0, f"index entry {oid} is stale"
        seen = set()
        n = self._free
        while n >= 0:
            assert n not in seen, "free list has a cycle"
            assert n not in used, f"node {n} is both free and in use"
            assert self._lvl[n] == -1, f"free node {n} still claims a level"
            seen.add(n)
            n = self._nxt[n]
        assert len(seen) + len(used) == cap, "nodes leaked from the pool"
        for k in {self._lvl[n] for n in used}:
            prev, n = -1, self._head[k]
            while n >= 0:
                assert self._prv[n] == prev and self._lvl[n] == k, f"level {k} links broken"
                prev, n = n, self._nxt[n]
            assert self._tail[k] == prev, f"level {k} tail is stale"


STORES = {"deque": DequeLevels, "pool": PoolLevels}

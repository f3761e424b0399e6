"""Best-price finders for the ladder engine: the ``best`` toggle (scan | bitmap | sorted).

One finder per side tracks which ladder indices (price - min_price) hold orders. The engine
tells it when a level becomes non-empty (``add``) or empty (``remove``) and asks for
``best()`` (the best non-empty index, or -1) and ``after(i)`` (the next non-empty index
strictly worse than ``i``, or -1). A bid finder's best is the highest index, an ask
finder's the lowest. ``indices()`` (ascending) and ``check()`` serve ``check()`` only.
"""

from __future__ import annotations

from sortedcontainers import SortedList


class _Finder:
    """Binds ``best`` and ``after`` to the side's direction (bids: highest first)."""

    def _bind(self, highest: bool) -> None:
        self.highest = highest
        if highest:
            self.best, self.after = self._max, self._below
        else:
            self.best, self.after = self._min, self._above


class ScanBest(_Finder):
    """Linear scan of one occupancy byte per level, re-run at every call.

    ``best`` is O(width): ``bytearray.find`` / ``rfind`` walk the ladder from the band edge
    (a C-speed memchr, the Python form of the C++ seed's v0 loop over its level array).
    """

    def __init__(self, width: int, highest: bool):
        self._occ = bytearray(width)
        self._width = width
        self._bind(highest)

    def add(self, i: int) -> None:
        self._occ[i] = 1

    def remove(self, i: int) -> None:
        self._occ[i] = 0

    def _max(self) -> int:
        return self._occ.rfind(1)

    def _min(self) -> int:
        return self._occ.find(1)

    def _below(self, i: int) -> int:
        return self._occ.rfind(1, 0, i)

    def _above(self, i: int) -> int:
        return self._occ.find(1, i + 1)

    def indices(self) -> list[int]:
        occ = self._occ
        out, i = [], occ.find(1)
        while i >= 0:
            out.append(i)
            i = occ.find(1, i + 1)
        return out

    def check(self) -> None:
        assert self._occ.count(0) + self._occ.count(1) == self._width, "occupancy byte not 0/1"


class BitmapBest(_Finder):
    """Hierarchical bitmap of 64-bit words: bit i of level d is set iff word i of level d-1
    is non-zero; the top level is one word. ``best``/``after``/``add``/``remove`` cost
    O(depth) word operations (depth 2 for 1..99, 4 for a width of 1,000,000), never a
    rebuild of a width-sized integer.
    """

    def __init__(self, width: int, highest: bool):
        levels = []
        n = width
        while True:
            words = (n + 63) >> 6
            levels.append([0] * words)
            if words == 1:
                break
            n = words
        self._levels = levels  # leaf first, root last
        self._root = levels[-1]
        self._down = levels[-2::-1]  # from just under the root to the leaf
        self._bind(highest)
        if len(levels) == 2:  # widths 65..4096 (the 1..99 band): no loop over levels
            self._leaf = levels[0]
            self.best = self._max2 if highest else self._min2

    def add(self, i: int) -> None:
        for words in self._levels:
            j = i >> 6
            w = words[j]
            words[j] = w | (1 << (i & 63))
            if w:  # the word was already non-empty, so every level above knows
                return
            i = j

    def remove(self, i: int) -> None:
        for words in self._levels:
            j = i >> 6
            w = words[j] & ~(1 << (i & 63))
            words[j] = w
            if w:
                return
            i = j

    def _max(self) -> int:
        r = self._root[0]
        if not r:
            return -1
        j = r.bit_length() - 1
        for words in self._down:
            j = (j << 6) | (words[j].bit_length() - 1)
        return j

    def _min(self) -> int:
        r = self._root[0]
        if not r:
            return -1
        j = (r & -r).bit_length() - 1
        for words in self._down:
            w = words[j]
            j = (j << 6) | ((w & -w).bit_length() - 1)
        return j

    def _max2(self) -> int:
        r = self._root[0]
        if not r:
            return -1
        j = r.bit_length() - 1
        return (j << 6) | (self._leaf[j].bit_length() - 1)

    def _min2(self) -> int:
        r = self._root[0]
        if not r:
            return -1
        j = (r & -r).bit_length() - 1
        w = self._leaf[j]
        return (j << 6) | ((w & -w).bit_length() - 1)

    def _below(self, i: int) -> int:
        levels = self._levels
        for d, words in enumerate(levels):
            j = i >> 6
            w = words[j] & ((1 << (i & 63)) - 1)
            if w:
                i = (j << 6) | (w.bit_length() - 1)
                for d2 in range(d - 1, -1, -1):
                    i = (i << 6) | (levels[d2][i].bit_length() - 1)
                return i
            i = j
        return -1

    def _above(self, i: int) -> int:
        levels = self._levels
        for d, words in enumerate(levels):
            j = i >> 6
            s = (i & 63) + 1
            w = words[j] >> s
            if w:
                i = (j << 6) | (s + (w & -w).bit_length() - 1)
                for d2 in range(d - 1, -1, -1):
                    x = levels[d2][i]
                    i = (i << 6) | ((x & -x).bit_length() - 1)
                return i
            i = j
        return -1

    @staticmethod
    def _bits(words) -> list[int]:
        out = []
        for j in [j for j, w in enumerate(words) if w]:
            w = words[j]
            while w:
                low = w & -w
                out.append((j << 6) | (low.bit_length() - 1))
                w ^= low
        return out

    def indices(self) -> list[int]:
        return self._bits(self._levels[0])

    def check(self) -> None:
        levels = self._levels
        for d in range(1, len(levels)):
            nonzero = [j for j, w in enumerate(levels[d - 1]) if w]
            assert self._bits(levels[d]) == nonzero, f"bitmap summary level {d} is stale"
        for words in levels:
            assert max(words) < (1 << 64) and min(words) >= 0, "bitmap word outside 64 bits"


class SortedBest(_Finder):
    """A ``SortedList`` of the non-empty indices: O(log n) updates, O(1) best."""

    def __init__(self, width: int, highest: bool):
        self._sl = SortedList()
        self._bind(highest)

    def add(self, i: int) -> None:
        self._sl.add(i)

    def remove(self, i: int) -> None:
        self._sl.remove(i)

    def _max(self) -> int:
        sl = self._sl
        return sl[-1] if sl else -1

    def _min(self) -> int:
        sl = self._sl
        return sl[0] if sl else -1

    def _below(self, i: int) -> int:
        sl = self._sl
        k = sl.bisect_left(i) - 1
        return sl[k] if k >= 0 else -1

    def _above(self, i: int) -> int:
        sl = self._sl
        k = sl.bisect_right(i)
        return sl[k] if k < len(sl) else -1

    def indices(self) -> list[int]:
        return list(self._sl)

    def check(self) -> None:
        self._sl._check()
        assert len(set(self._sl)) == len(self._sl), "a level is listed twice"


FINDERS = {"scan": ScanBest, "bitmap": BitmapBest, "sorted": SortedBest}

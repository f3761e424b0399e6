"""Readers of the market-by-order files researchers hold, into :mod:`lob.workloads.feed` events.

Each reader streams its file in blocks (:data:`BLOCK_BYTES`), keeps only the chosen symbol's
messages (before it builds anything from them) and returns :class:`Parsed`: the symbol's
normalised events in file order, chunk by chunk, plus the venue's book where the format
states one. The chunks are lazy: each block is read, filtered and converted before the next
is read (one path for every format: the reader's blocks, :func:`_windowed`, the converter),
so memory is the block and the symbol's book, not the file. A file lob cannot read raises
:class:`~lob.workloads.feed.FeedError` with one line naming the byte offset (binary formats)
or the row (CSV) and the field.

* **LOBSTER** (lobsterdata.com's message file, optionally with its orderbook file): CSV rows
  ``time, type, order id, size, price, direction``; types 1 submit, 2 partial cancel,
  3 delete, 4 visible execution, 5 hidden execution, 6 cross trade, 7 halt (price -1 halt,
  0 quoting, 1 trading); prices in 1/10,000 USD; direction 1 buy, -1 sell (for an execution
  the side of the resting order). One ticker per file (``--symbol`` checks the file name).
  The orderbook file's rows (ask price, ask size, bid price, bid size per level) state the
  book after each message: its first row, less the first message, is the pre-load, and
  every row is compared with lob's book.
* **ITCH 5.0** (NASDAQ TotalView-ITCH binary: each message behind a 2-byte big-endian
  length): add ``A``, add with MPID ``F``, executed ``E``, executed with price ``C``,
  cancel ``X``, delete ``D``, replace ``U``, trade ``P`` (non-displayed), cross trade ``Q``,
  system event ``S``, stock directory ``R``, trading action ``H``; every other 5.0 message
  is skipped by its length. No maintained Python ITCH 5.0 reader fits (the packages on
  PyPI parse one message at a time into Python objects, ~100x slower than a day needs), so
  lob has its own: a compiled walk over the length prefixes finds the messages and their
  stock locate, and numpy structured big-endian dtypes (one per message type) decode the
  symbol's messages in bulk.
* **DBN MBO** (Databento's binary encoding, schema ``mbo``): the header is decoded by
  Databento's own ``databento-dbn`` package (``Metadata.decode``: version, schema, symbol
  mappings), the fixed 56-byte MBO records by a numpy dtype of their documented layout in
  chunks. Actions add ``A``, cancel ``C``, modify ``M``, trade ``T``, fill ``F``, clear
  ``R`` (``N`` none is skipped); side ``N`` (none) on a trade: a print with no aggressor
  (no taker synthesised, :mod:`lob.workloads.feed`), on an add: refused; flags honoured:
  ``F_SNAPSHOT`` records are untimed (a snapshot after a clear of a book is compared with
  lob's book before the clear), ``F_LAST`` ends a venue event (a trade ``T`` with no fill
  records: its makers' cancels in the event are its executions), ``F_MAYBE_BAD_BOOK`` is
  counted, ``F_TOB`` / ``F_MBP`` records (levels, not orders) are skipped. One instrument
  (``--symbol``: a symbol the header maps, or an instrument id; not needed when the file
  holds one instrument). A
  zstd-compressed file (``.dbn.zst``, as Databento delivers them) is decompressed and
  decoded as it streams by ``databento-dbn``'s own ``DBNDecoder`` (record by record: slower
  than an uncompressed file; a compressed file cut at a record boundary cannot be told from
  a whole one).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numba
import numpy as np

from lob.workloads.feed import (
    EV,
    EVENT_DTYPE,
    F_BAD_BOOK,
    F_FILL_RESTATED,
    F_LAST,
    F_SNAPSHOT,
    FeedError,
)

__all__ = ["FORMATS", "Parsed", "parse_time", "read"]

BLOCK_BYTES = 4 << 20  # read at a time: a block's arrays stay under malloc's mmap threshold
# (reused, not faulted in afresh for every block)
CONVERT_ROWS = 1 << 17  # events converted at a time (its outputs stay small)
DECODE_ROWS = 1 << 14  # ITCH messages gathered at a time (the gather's index stays small)
DAY_NS = 86_400 * 10**9


@dataclass
class Parsed:
    """A symbol's events (venue ids, venue prices) in file order, chunk by chunk, with the
    venue's book where the file states one."""

    chunks: Iterator  # (events, the venue's book after each event or None) per chunk
    symbol: str
    messages: int = 0  # messages (rows, records) in the file, every symbol: once read
    preload: tuple | None = None  # (side, price, qty): the book before the events
    book_depth: int = 0  # levels of each book row (stated once the first chunk is read)
    notes: dict = field(default_factory=dict)


def parse_time(text: str | None) -> float | None:
    """``HH:MM[:SS[.fff]]`` (time of day) or seconds after midnight -> seconds."""
    if text is None:
        return None
    m = re.fullmatch(r"(\d{1,2}):(\d{2})(?::(\d{2}(?:\.\d*)?))?", text.strip())
    if m:
        if int(m[1]) > 23 or int(m[2]) > 59 or float(m[3] or 0) >= 60:
            raise FeedError(f"time {text!r}: not a time of day (00:00 to 23:59:59)")
        return int(m[1]) * 3600 + int(m[2]) * 60 + float(m[3] or 0)
    try:
        v = float(text)
    except ValueError:
        raise FeedError(f"time {text!r}: expected HH:MM[:SS[.fff]] or seconds after midnight")\
            from None
    if not 0 <= v < 86_400 * 366:
        raise FeedError(f"time {text!r}: out of range")
    return v


def _window(ev: np.ndarray, ts_day_ns: np.ndarray, t_from, t_to) -> int:
    """Events before ``t_from`` become untimed (they build the book); the stream ends at the
    first event at or after ``t_to``. Returns how many events to keep."""
    n = len(ev)
    if t_to is not None:
        past = np.flatnonzero(ts_day_ns >= int(t_to * 1e9))
        n = int(past[0]) if len(past) else n
    if t_from is not None:
        ev["timed"][:n] &= (ts_day_ns[:n] >= int(t_from * 1e9)).astype(np.uint8)
    return n


def _windowed(chunks, t_from, t_to, day: bool = False):
    """The events of ``chunks`` ((events, the venue's book after each or None) per block, in
    file order) that fall in the window (:func:`_window`; ``day``: timestamps are taken
    modulo a day), in slices of at most :data:`CONVERT_ROWS`. The blocks after the window's
    end are still read: their errors are found and their messages counted."""
    ended = False
    for ev, book in chunks:
        if ended or not len(ev):
            continue
        keep = _window(ev, ev["ts"] % DAY_NS if day else ev["ts"], t_from, t_to)
        ended = keep < len(ev)
        for k in range(0, keep, CONVERT_ROWS):
            j = min(keep, k + CONVERT_ROWS)
            yield ev[k:j], None if book is None else book[k:j]


# --- LOBSTER -------------------------------------------------------------------------------

_LOBSTER_COLS = ["time", "type", "oid", "size", "price", "direction"]
_LOBSTER_EV = np.array([-1, EV.ADD, EV.REDUCE, EV.DELETE, EV.EXEC, EV.HIDDEN, EV.CROSS,
                        EV.HALT], np.int64)
_EMPTY_ASK, _EMPTY_BID = 9_999_999_999, -9_999_999_999


@numba.njit(cache=True)
def _parse_csv(buf, final, out, ncol, fixed_first):
    """Parse the complete rows of ``buf`` (a headerless CSV of integers; with
    ``fixed_first`` the first column is a decimal number of seconds, kept as ns) into
    ``out``. Returns (rows, bytes used, bad row or -1, its field, why): why 1 not a number,
    2 a field missing, 3 a field too many. A row cut by the chunk's end waits for the next
    (``final``: it is the file's last)."""
    n = buf.shape[0]
    pos = 0
    r = 0
    while pos < n and r < out.shape[0]:
        end = pos
        while end < n and buf[end] != 10:
            end += 1
        if end == n and not final:
            break
        stop = end
        if stop > pos and buf[stop - 1] == 13:
            stop -= 1
        if stop == pos:  # an empty line
            pos = end + 1
            continue
        f = 0
        i = pos
        while True:
            if f >= ncol:
                return r, pos, r, f, 3
            neg = False
            if i < stop and buf[i] == 45:
                neg = True
                i += 1
            v = np.int64(0)
            nd = 0
            while i < stop and 48 <= buf[i] <= 57:
                v = v * 10 + (buf[i] - 48)
                i += 1
                nd += 1
            if fixed_first and f == 0:
                v *= 1_000_000_000
                if i < stop and buf[i] == 46:
                    i += 1
                    scale = 100_000_000
                    while i < stop and 48 <= buf[i] <= 57:
                        v += (buf[i] - 48) * scale
                        scale //= 10
                        i += 1
                        nd += 1
            elif i < stop and buf[i] == 46:  # a whole number written as 123.0
                i += 1
                while i < stop and buf[i] == 48:
                    i += 1
            if nd == 0 or (i < stop and buf[i] != 44):
                return r, pos, r, f, 1
            out[r, f] = -v if neg else v
            f += 1
            if i >= stop:
                break
            i += 1  # the comma
            if i >= stop:  # a trailing comma: an empty field
                return r, pos, r, f, 1
        if f < ncol:
            return r, pos, r, f, 2
        r += 1
        pos = end + 1
    return r, pos, -1, 0, 0


def _csv_chunks(path: Path, ncol: int | None = None, names: list[str] | None = None,
                fixed_first: bool = False):
    """(first row number, int64 array) per chunk of a headerless numeric CSV, parsed by
    :func:`_parse_csv`; ``ncol`` None: as many columns as the first row has. A bad field
    raises :class:`FeedError` naming its row (1-based) and field."""
    size = path.stat().st_size
    if size == 0:
        raise FeedError(f"{path.name}: empty file")
    row = 1
    carry = b""
    with open(path, "rb") as f:
        while True:
            block = f.read(BLOCK_BYTES)
            final = not block
            data = carry + block
            if not data:
                break
            if ncol is None:  # as many columns as the first whole row has
                if b"\n" not in data and not final:
                    carry = data
                    continue
                ncol = data.split(b"\n", 1)[0].count(b",") + 1
            buf = np.frombuffer(data, np.uint8)
            names = names or [f"column {j + 1}" for j in range(ncol)]
            out = np.empty((len(data) // (2 * ncol) + 1, ncol), np.int64)  # rows at most
            k, used, bad, fld, why = _parse_csv(buf, final, out, ncol, fixed_first)
            if bad >= 0:
                text = data[used:].split(b"\n", 1)[0].decode(errors="replace").strip()
                what = names[fld] if fld < len(names) else f"column {fld + 1}"
                msg = {1: f"field {what}: not a number",
                       2: f"field {what}: missing ({text.count(',') + 1} fields, expected "
                          f"{ncol}: truncated file?)",
                       3: f"{text.count(',') + 1} fields, expected {ncol}"}[why]
                raise FeedError(f"{path.name}: row {row + bad}, {msg} ({text[:60]!r})")
            if k:
                yield row, out[:k]
                row += k
            carry = data[used:]
            if final:
                break


def read_lobster(path: str | os.PathLike, *, book: str | os.PathLike | None = None,
                 symbol: str | None = None, t_from=None, t_to=None, progress=None) -> Parsed:
    path = Path(path)
    ticker = path.name.split("_")[0]
    if symbol is not None and "_" in path.name and ticker != symbol:
        raise FeedError(f"{path.name}: a LOBSTER file of {ticker}, not {symbol} (one ticker "
                        "per file)")
    out = Parsed(iter(()), symbol or ticker)
    out.chunks = _windowed(_lobster_stream(path, Path(book) if book is not None else None,
                                           out, progress), t_from, t_to)
    return out


def _lobster_stream(path: Path, book: Path | None, out: Parsed, progress):
    """(events, book rows) per block of the message file (and its orderbook file, read in
    step), every row read and checked."""
    rows = _BookRows(book) if book is not None else None
    for row, a in _csv_chunks(path, 6, _LOBSTER_COLS, fixed_first=True):
        ev = np.empty(len(a), EVENT_DTYPE)
        bad, why, value = _lobster_events(a, _LOBSTER_EV, ev)
        if bad >= 0:
            raise FeedError(f"{path.name}: row {row + bad}, "
                            + _LOBSTER_BAD[why].format(value))
        b = rows.take(len(a)) if rows is not None else None
        if not out.messages and rows is not None:
            out.book_depth = rows.depth
            out.preload = _lobster_preload(rows.first, ev[0], rows.depth)
        out.messages += len(a)
        if progress:
            progress(out.messages)
        yield ev, b
    if rows is not None:
        rows.end(out.messages)


_LOBSTER_BAD = {1: "field type: {} is not a LOBSTER event type 1..7",
                2: "field direction: {} (expected 1 or -1)",
                3: "field size: {} (expected a positive whole number)"}


@numba.njit(cache=True)
def _lobster_events(a, kinds, e):
    """Parsed rows ``a`` -> events ``e``; returns (first bad row or -1, why: a key of
    :data:`_LOBSTER_BAD`, the bad value)."""
    for i in range(a.shape[0]):
        typ, size, d = a[i, 1], a[i, 3], a[i, 5]
        if typ < 1 or typ > 7:
            return i, 1, typ
        if d != 1 and d != -1:
            return i, 2, d
        if size <= 0 and typ < 7:
            return i, 3, size
        r = e[i]
        r["kind"] = kinds[typ]
        r["side"] = d < 0
        r["timed"] = 1
        r["flags"] = 0
        r["oid"] = a[i, 2]
        r["oid2"] = -1
        r["price"] = a[i, 4]
        r["qty"] = size
        r["aux"] = a[i, 4] if typ == 7 else -1
        r["ts"] = a[i, 0]
    return -1, 0, 0


class _BookRows:
    """LOBSTER's orderbook file, taken in step with the message file: ``take(n)`` gives its
    next ``n`` rows (empty levels: price 0)."""

    def __init__(self, path: Path):
        self.path, self.seen, self.ncol = path, 0, 0
        self.it = _csv_chunks(path)
        self.buf: list[np.ndarray] = []
        self.have = 0
        first = self._next()
        if first is None:
            raise FeedError(f"{path.name}: empty orderbook file")
        self.ncol = first.shape[1]
        if self.ncol % 4:
            raise FeedError(f"{path.name}: {self.ncol} columns, expected 4 per level")
        self.depth = self.ncol // 4
        self.first = first[0].copy()

    def _next(self):
        got = next(self.it, None)
        if got is None:
            return None
        row, a = got
        if self.ncol and a.shape[1] != self.ncol:
            raise FeedError(f"{self.path.name}: row {row}: {a.shape[1]} fields, expected "
                            f"{self.ncol}")
        for j in (0, 2):  # LOBSTER's empty levels: price 9999999999 / -9999999999, size 0
            px = a[:, j::4]
            px[(px == _EMPTY_ASK) | (px == _EMPTY_BID) | (px < 0)] = 0
        self.buf.append(a)
        self.have += len(a)
        return a

    def take(self, n: int) -> np.ndarray:
        while self.have < n:
            if self._next() is None:
                raise FeedError(f"{self.path.name}: {self.seen + self.have:,} rows, fewer "
                                f"than the message file's (row {self.seen + self.have + 1} "
                                "is missing: truncated file?)")
        a = np.concatenate(self.buf) if len(self.buf) > 1 else self.buf[0]
        self.buf = [a[n:]] if len(a) > n else []
        self.have -= n
        self.seen += n
        return a[:n]

    def end(self, n_msgs: int) -> None:
        """The message file had ``n_msgs`` rows: so must this one."""
        while self._next() is not None:
            self.buf = self.buf[-1:]
        if self.have:
            raise FeedError(f"{self.path.name}: {self.seen + self.have:,} rows, the message "
                            f"file has {n_msgs:,}")


def _lobster_preload(first: np.ndarray, e0, depth: int):
    """The book before the first message: the orderbook file's first row, less the first
    message's own change."""
    lv = {}
    for d in range(depth):
        for side, j in ((1, 4 * d), (0, 4 * d + 2)):
            p, q = int(first[j]), int(first[j + 1])
            if p > 0 and q > 0:
                lv[(side, p)] = q
    key = (int(e0["side"]), int(e0["price"]))
    dq = {EV.ADD: -1, EV.REDUCE: 1, EV.DELETE: 1, EV.EXEC: 1}.get(int(e0["kind"]), 0)
    if dq:
        lv[key] = lv.get(key, 0) + dq * int(e0["qty"])
        if lv[key] <= 0:
            del lv[key]
    pre = sorted(lv.items())
    return (np.array([s for (s, _), _ in pre], np.int64),
            np.array([p for (_, p), _ in pre], np.int64),
            np.array([q for _, q in pre], np.int64))


# --- ITCH 5.0 ------------------------------------------------------------------------------

ITCH_LENGTHS = {b"S": 12, b"R": 39, b"H": 25, b"Y": 20, b"L": 26, b"V": 35, b"W": 12,
                b"K": 28, b"J": 35, b"h": 21, b"A": 36, b"F": 40, b"E": 31, b"C": 36,
                b"X": 23, b"D": 19, b"U": 35, b"P": 44, b"Q": 40, b"B": 19, b"I": 50,
                b"N": 20, b"O": 48}
_LEN = np.zeros(256, np.int64)
for _t, _n in ITCH_LENGTHS.items():
    _LEN[_t[0]] = _n
_HEAD = [("type", "S1"), ("locate", ">u2"), ("tracking", ">u2"), ("ts_hi", ">u2"),
         ("ts_lo", ">u4")]
ITCH_DTYPES = {
    b"R": np.dtype(_HEAD + [("stock", "S8"), ("rest", "V20")]),
    b"H": np.dtype(_HEAD + [("stock", "S8"), ("state", "S1"), ("rest", "V5")]),
    b"A": np.dtype(_HEAD + [("ref", ">u8"), ("side", "S1"), ("shares", ">u4"), ("stock", "S8"),
                            ("price", ">u4")]),
    b"F": np.dtype(_HEAD + [("ref", ">u8"), ("side", "S1"), ("shares", ">u4"), ("stock", "S8"),
                            ("price", ">u4"), ("mpid", "S4")]),
    b"E": np.dtype(_HEAD + [("ref", ">u8"), ("shares", ">u4"), ("match", ">u8")]),
    b"C": np.dtype(_HEAD + [("ref", ">u8"), ("shares", ">u4"), ("match", ">u8"),
                            ("printable", "S1"), ("price", ">u4")]),
    b"X": np.dtype(_HEAD + [("ref", ">u8"), ("shares", ">u4")]),
    b"D": np.dtype(_HEAD + [("ref", ">u8")]),
    b"U": np.dtype(_HEAD + [("ref", ">u8"), ("new_ref", ">u8"), ("shares", ">u4"),
                            ("price", ">u4")]),
    b"P": np.dtype(_HEAD + [("ref", ">u8"), ("side", "S1"), ("shares", ">u4"), ("stock", "S8"),
                            ("price", ">u4"), ("match", ">u8")]),
    b"Q": np.dtype(_HEAD + [("shares", ">u8"), ("stock", "S8"), ("price", ">u4"),
                            ("match", ">u8"), ("cross", "S1")]),
}
for _t, _d in ITCH_DTYPES.items():
    assert _d.itemsize == ITCH_LENGTHS[_t], _t


@numba.njit(cache=True)
def _itch_walk(buf, lens, offs, types, locs):
    """Walk the length-prefixed messages of ``buf``: (messages, bytes used, first bad
    message's offset or -1). A message cut by the chunk's end is left for the next."""
    n = buf.shape[0]
    pos = 0
    k = 0
    while pos + 2 <= n:
        ln = (np.int64(buf[pos]) << 8) | np.int64(buf[pos + 1])
        if pos + 2 + ln > n:
            break
        if ln < 3:
            return k, pos, pos
        t = buf[pos + 2]
        if lens[t] != ln:
            return k, pos, pos
        offs[k] = pos + 2
        types[k] = t
        locs[k] = (np.uint16(buf[pos + 3]) << 8) | np.uint16(buf[pos + 4])
        k += 1
        pos += 2 + ln
    return k, pos, -1


def _decode(buf: np.ndarray, offs: np.ndarray, d: np.dtype) -> np.ndarray:
    """The messages of ``buf`` at ``offs`` as records of ``d`` (gathered a few thousand at a
    time: the index of the gather stays small)."""
    out = np.empty(len(offs), d)
    raw = out.view(np.uint8).reshape(len(offs), d.itemsize)
    cols = np.arange(d.itemsize)
    for k in range(0, len(offs), DECODE_ROWS):
        np.take(buf, offs[k:k + DECODE_ROWS, None] + cols, out=raw[k:k + DECODE_ROWS])
    return out


def _ts(m: np.ndarray) -> np.ndarray:
    return (m["ts_hi"].astype(np.int64) << 32) | m["ts_lo"].astype(np.int64)


def read_itch(path: str | os.PathLike, *, symbol: str | None = None, t_from=None, t_to=None,
              progress=None, **_) -> Parsed:
    path = Path(path)
    if not symbol:
        raise FeedError("ITCH files hold every stock: --symbol is required")
    out = Parsed(iter(()), symbol)
    out.chunks = _windowed(_itch_stream(path, symbol, out, progress), t_from, t_to)
    return out


def _itch_stream(path: Path, symbol: str, out: Parsed, progress):
    """(the symbol's events, None) per block of the file: the stock directory (R) names its
    locate code, and the messages of that code and the system events are decoded."""
    want = symbol.encode().ljust(8)[:8]
    locate = -1
    size = path.stat().st_size
    for base, buf, offs, types, locs in _itch_blocks(path):
        out.messages += len(offs)
        if locate < 0:
            r = offs[types == ord("R")]
            d = _decode(buf, r, ITCH_DTYPES[b"R"])
            hit = np.flatnonzero(d["stock"] == want)
            locate = int(d["locate"][hit[0]]) if len(hit) else -1
        sel = types == ord("S")  # system events: before the directory names it, too
        if locate >= 0:
            sel |= locs == locate
        yield _itch_events(buf, offs[sel], types[sel]), None
        if progress:
            progress(out.messages, base + len(buf), size)
    if locate < 0:
        raise FeedError(f"{path.name}: no stock directory message (R) for {symbol!r}")


def _itch_blocks(path: Path):
    """(file offset of ``buf[0]``, ``buf``, the offsets, types and locate codes of its
    whole messages) per block of :data:`BLOCK_BYTES`; a message cut by a block's end is
    carried to the next. The arrays are reused from block to block."""
    cap = BLOCK_BYTES
    buf = np.empty(cap + 2 + 0xFFFF, np.uint8)  # a block behind a carried part at most
    n_max = len(buf) // 14 + 1  # the shortest ITCH 5.0 message is 12 bytes + 2
    offs, types, locs = np.empty(n_max, np.int64), np.empty(n_max, np.uint8), \
        np.empty(n_max, np.uint16)
    base = have = 0
    with open(path, "rb") as f:
        while True:
            got = f.readinto(memoryview(buf)[have:have + cap])
            n = have + got
            if not n:
                return
            k, used, bad = _itch_walk(buf[:n], _LEN, offs, types, locs)
            if bad >= 0:
                raise FeedError(_itch_bad(path, buf[bad:n], base + bad))
            if not got and used != n:
                left = n - used
                need = (int(buf[used]) << 8 | int(buf[used + 1])) + 2 if left >= 2 else "?"
                raise FeedError(f"{path.name}: byte offset {base + used}, field length: the "
                                f"file ends inside a message ({left} of {need} bytes: "
                                "truncated file)")
            yield base, buf[:n], offs[:k], types[:k], locs[:k]
            if not got:
                return
            buf[:n - used] = buf[used:n].copy()
            have, base = n - used, base + used


def _itch_bad(path: Path, b: np.ndarray, at: int) -> str:
    """The error line of a message whose length or type is wrong (``b``: from its prefix)."""
    ln = int(b[0]) << 8 | int(b[1])
    t = bytes(b[2:3])
    if len(b) >= 3 and t in ITCH_LENGTHS:
        why = f"length {ln}, a '{t.decode()}' message is {ITCH_LENGTHS[t]} bytes"
    else:
        why = f"message type {t!r} is not ITCH 5.0"
    return f"{path.name}: byte offset {at}, field length/type: {why}"


_ITCH_KIND = {b"A": EV.ADD, b"F": EV.ADD, b"E": EV.EXEC, b"C": EV.EXEC, b"X": EV.REDUCE,
              b"D": EV.DELETE, b"U": EV.REPLACE, b"P": EV.HIDDEN, b"Q": EV.CROSS,
              b"H": EV.HALT}


def _itch_events(buf: np.ndarray, offs: np.ndarray, types: np.ndarray) -> np.ndarray:
    e = np.zeros(len(offs), EVENT_DTYPE)
    e["kind"] = EV.OTHER
    e["timed"] = 1
    e["oid"] = -1
    e["oid2"] = -1
    e["aux"] = -1
    for t, kind in _ITCH_KIND.items():
        at = np.flatnonzero(types == t[0])
        if not len(at):
            continue
        m = _decode(buf, offs[at], ITCH_DTYPES[t])
        e["kind"][at] = kind
        e["ts"][at] = _ts(m)
        names = m.dtype.names
        if "ref" in names:
            e["oid"][at] = m["ref"].astype(np.int64)
        if "new_ref" in names:
            e["oid2"][at] = m["new_ref"].astype(np.int64)
        if "shares" in names:
            e["qty"][at] = m["shares"].astype(np.int64)
        if "price" in names:
            e["price"][at] = m["price"].astype(np.int64)
        if "side" in names:
            e["side"][at] = (m["side"] == b"S").astype(np.uint8)
        if t == b"C":
            e["aux"][at] = m["price"].astype(np.int64)
            e["price"][at] = 0
        if t == b"H":
            e["aux"][at] = (m["state"] != b"T").astype(np.int64)
    rest = np.flatnonzero(e["kind"] == EV.OTHER)
    if len(rest):
        e["ts"][rest] = _ts(_decode(buf, offs[rest], np.dtype(_HEAD)))
    return e


# --- DBN MBO -------------------------------------------------------------------------------

MBO_DTYPE = np.dtype([("length", "u1"), ("rtype", "u1"), ("publisher_id", "<u2"),
                      ("instrument_id", "<u4"), ("ts_event", "<u8"), ("order_id", "<u8"),
                      ("price", "<i8"), ("size", "<u4"), ("flags", "u1"),
                      ("channel_id", "u1"), ("action", "S1"), ("side", "S1"),
                      ("ts_recv", "<u8"), ("ts_in_delta", "<i4"), ("sequence", "<u4")])
assert MBO_DTYPE.itemsize == 56
RTYPE_MBO = 0xA0
DBN_F_SNAPSHOT, DBN_F_MBP, DBN_F_TOB, DBN_F_BAD_BOOK = 1 << 5, 1 << 4, 1 << 6, 1 << 2
DBN_F_LAST = 1 << 7
UNDEF_PRICE = 2**63 - 1
_DBN_KIND = {b"A": EV.ADD, b"C": EV.REDUCE, b"M": EV.MODIFY, b"T": EV.PRINT, b"F": EV.EXEC,
             b"R": EV.CLEAR, b"N": EV.OTHER}
_FIELDS = {k: i for i, k in enumerate(MBO_DTYPE.names)}


ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def _dbn_plain(path: Path, f):
    """(metadata, header bytes, blocks of record bytes) of an uncompressed DBN file."""
    import databento_dbn as dbn

    head = f.read(8)
    if len(head) < 8 or head[:3] != b"DBN":
        raise FeedError(f"{path.name}: byte offset 0, field magic: not a DBN file")
    mlen = int.from_bytes(head[4:8], "little")
    meta_b = head + f.read(mlen)
    if len(meta_b) < 8 + mlen:
        raise FeedError(f"{path.name}: byte offset {len(meta_b)}, field metadata: the file "
                        f"ends inside its {8 + mlen}-byte header (truncated file)")
    try:
        meta = dbn.Metadata.decode(meta_b)
    except Exception as e:
        raise FeedError(f"{path.name}: byte offset 0, field metadata: {e}".splitlines()[0])\
            from None

    def blocks():
        while block := f.read(MBO_DTYPE.itemsize * max(1, BLOCK_BYTES // MBO_DTYPE.itemsize)):
            yield block
    return meta, 8 + mlen, blocks()


def _dbn_zstd(path: Path, f):
    """The same for a zstd-compressed file (``.dbn.zst``), decompressed and decoded by
    databento-dbn's own decoder as it streams (offsets: in the decompressed stream)."""
    import databento_dbn as dbn

    dec = dbn.DBNDecoder(compression=dbn.Compression.ZSTD)
    meta, pending = None, []
    while meta is None:
        chunk = f.read(1 << 20)
        try:
            if chunk:
                dec.write(chunk)
            out = dec.decode()
        except Exception as e:
            raise FeedError(f"{path.name}: zstd-compressed DBN, field metadata: {e}"
                            .splitlines()[0]) from None
        if out:
            meta, pending = out[0], out[1:]
        elif not chunk:
            raise FeedError(f"{path.name}: zstd-compressed DBN, field metadata: the file ends "
                            "before its header could be decoded (truncated file)")
    if not isinstance(meta, dbn.Metadata):
        raise FeedError(f"{path.name}: zstd-compressed, field metadata: not a DBN stream")
    base = 8 + int.from_bytes(meta.encode()[4:8], "little")

    def blocks():
        nonlocal pending
        done = 0
        while True:
            if pending:
                yield b"".join(bytes(r) for r in pending)
                done += len(pending)
                pending = []
            chunk = f.read(1 << 20)  # decompressed: a few MB of records
            if not chunk:
                break
            try:
                dec.write(chunk)
                pending = dec.decode()
            except Exception as e:
                raise FeedError(f"{path.name}: zstd-compressed DBN, after record {done:,}: "
                                f"{e}".splitlines()[0]) from None
        left = len(dec.buffer()) if hasattr(dec, "buffer") else 0
        if left:
            raise FeedError(f"{path.name}: byte offset {base + done * MBO_DTYPE.itemsize} of "
                            f"the decompressed stream, field length: it ends inside a record "
                            f"({left} bytes: truncated file)")
    return meta, base, blocks()


def read_dbn(path: str | os.PathLike, *, symbol: str | None = None, t_from=None, t_to=None,
             progress=None, **_) -> Parsed:
    path = Path(path)
    f = open(path, "rb")
    try:
        zstd = f.read(4) == ZSTD_MAGIC
        f.seek(0)
        meta, base, blocks = (_dbn_zstd if zstd else _dbn_plain)(path, f)
        if str(meta.schema).lower().split(".")[-1] != "mbo" and meta.schema is not None:
            raise FeedError(f"{path.name}: byte offset 8, field schema: {meta.schema}, lob "
                            "reads the mbo schema")
        iid = _instrument(meta, symbol, path)
    except BaseException:
        f.close()
        raise
    out = Parsed(iter(()), symbol or "?")
    size = None if zstd else path.stat().st_size  # offsets of a .zst: not the file's
    out.chunks = _windowed(_dbn_stream(path, f, base, blocks, iid, out, progress, size),
                           t_from, t_to, day=True)
    return out


def _dbn_stream(path: Path, f, base: int, blocks, iid: int | None, out: Parsed, progress,
                size):
    """(the instrument's events, None) per block of records (file offset ``base`` on); the
    file ``f`` is closed at the end. ``iid`` None: the file must hold one instrument (its
    id becomes ``out.symbol``)."""
    rec = MBO_DTYPE.itemsize
    with f:
        for block in blocks:
            whole = len(block) // rec * rec
            r = np.frombuffer(block[:whole], MBO_DTYPE)
            bad = np.flatnonzero((r["length"] != rec // 4) | (r["rtype"] != RTYPE_MBO))
            if len(bad):
                j = int(bad[0])
                fld = "length" if r["length"][j] != rec // 4 else "rtype"
                raise FeedError(f"{path.name}: byte offset {base + j * rec}, field {fld}: "
                                f"{int(r[fld][j])} (an MBO record has length 14, rtype 0xa0)")
            if whole != len(block):
                raise FeedError(f"{path.name}: byte offset {base + whole}, field length: the "
                                f"file ends inside a record ({len(block) - whole} of {rec} "
                                "bytes: truncated file)")
            if iid is None:
                ids = np.unique(r["instrument_id"])
                out.symbol = str(ids[0]) if out.symbol == "?" else out.symbol
                if len(ids) > 1 or str(ids[0]) != out.symbol:
                    raise FeedError(f"{path.name}: several instruments: --symbol is required")
            want = iid if iid is not None else int(out.symbol)
            yield _dbn_events(r, np.flatnonzero(r["instrument_id"] == want), path, base), None
            out.messages += len(r)
            base += whole
            if progress:
                progress(out.messages, None if size is None else base, size)


def _instrument(meta, symbol, path) -> int | None:
    if symbol is None:
        return None
    for m in getattr(meta, "mappings", None) or []:
        raw = getattr(m, "raw_symbol", None) if not isinstance(m, dict) else m.get("raw_symbol")
        if raw == symbol:
            ivs = m.intervals if not isinstance(m, dict) else m.get("intervals", [])
            for iv in ivs:
                s = iv.symbol if not isinstance(iv, dict) else iv.get("symbol")
                if str(s).isdigit():
                    return int(s)
    if symbol.isdigit():
        return int(symbol)
    raise FeedError(f"{path.name}: symbol {symbol!r} is not in the header's mappings (give "
                    "its instrument id)")


def _dbn_events(block: np.ndarray, at: np.ndarray, path: Path, base: int) -> np.ndarray:
    """The events of the records ``at`` of ``block`` (its first at file offset ``base``).
    Side: 0 bid, 1 ask, 2 none (DBN ``N``: a trade with no aggressor side, a clear)."""
    r = block[at]
    e = np.zeros(len(r), EVENT_DTYPE)
    kind = np.full(len(r), 255, np.int64)
    for a, k in _DBN_KIND.items():
        kind[r["action"] == a] = k
    side = np.where(r["side"] == b"B", 0, np.where(r["side"] == b"A", 1, 2))
    for bad, col, why in ((kind == 255, "action", "is not one of A C M T F R N"),
                          ((kind == EV.ADD) & (side == 2), "side", "on an add (A): an order "
                                                                   "rests on a side, B or A")):
        j = np.flatnonzero(bad)
        if len(j):
            k = int(j[0])
            raise FeedError(f"{path.name}: byte offset {base + int(at[k]) * block.itemsize}, "
                            f"field {col}: {bytes(r[col][k]).decode(errors='replace')!r} "
                            + why)
    fl = r["flags"]
    level = (fl & (DBN_F_TOB | DBN_F_MBP)) != 0
    kind[level] = EV.OTHER
    e["kind"] = kind
    e["side"] = side
    e["timed"] = ((fl & DBN_F_SNAPSHOT) == 0).astype(np.uint8)
    e["flags"] = (np.where(fl & DBN_F_SNAPSHOT, F_SNAPSHOT, 0)
                  | np.where(fl & DBN_F_BAD_BOOK, F_BAD_BOOK, 0)
                  | np.where(fl & DBN_F_LAST, F_LAST, 0)
                  | np.where(r["action"] == b"F", F_FILL_RESTATED, 0)).astype(np.uint8)
    e["oid"] = r["order_id"].astype(np.int64)
    e["oid2"] = -1
    px = r["price"]
    e["price"] = np.where(px == UNDEF_PRICE, 0, px)
    e["qty"] = r["size"].astype(np.int64)
    e["aux"] = -1
    e["ts"] = r["ts_event"].astype(np.int64)
    return e


FORMATS = {"lobster": read_lobster, "itch": read_itch, "dbn": read_dbn}


def read(fmt: str, path, **kw) -> Parsed:
    """Read ``path`` in format ``fmt`` (one of :data:`FORMATS`)."""
    if fmt not in FORMATS:
        raise FeedError(f"unknown format {fmt!r}; formats: {', '.join(FORMATS)}")
    p = Path(path)
    if not p.is_file():
        raise FeedError(f"{p}: no such file")
    return FORMATS[fmt](p, **kw)

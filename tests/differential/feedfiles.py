"""Small, valid venue files the tests write themselves (no venue's data is shipped).

One story, told in each format: two resting bids at 100.00, asks at 100.05 / 100.06, a
visible execution, a partial cancel, a hidden execution, a replace that moves the order
(priority lost), executions of both sides, a halt and its end, a delete, a last execution.
Each writer returns the number of executions lob must reproduce fill by fill.
Prices are in 1/10,000 USD (LOBSTER, ITCH) or 1e-9 USD (DBN).
"""

from __future__ import annotations

import struct
from pathlib import Path

P = 10_000  # 1 USD in 1/10,000 USD

# (what, side 0 buy / 1 sell, id, price USD*1e4, qty, new id)
STORY = [
    ("add", 0, 11, 100 * P, 100, 0),
    ("add", 0, 12, 100 * P, 50, 0),
    ("add", 1, 13, 100 * P + 500, 70, 0),
    ("add", 1, 14, 100 * P + 600, 30, 0),
    ("exec", 0, 11, 100 * P, 40, 0),  # fill 1
    ("cancel", 0, 11, 100 * P, 10, 0),  # partial: 50 left
    ("hidden", 0, 0, 100 * P + 200, 25, 0),
    ("replace", 0, 12, 100 * P + 100, 60, 15),  # 12 -> 15 at 100.01 (a new best bid)
    ("exec", 0, 15, 100 * P + 100, 60, 0),  # fill 2
    ("exec", 1, 13, 100 * P + 500, 70, 0),  # fill 3
    ("halt", 0, 0, 0, 0, 0),
    ("resume", 0, 0, 0, 0, 0),
    ("delete", 1, 14, 100 * P + 600, 30, 0),
    ("exec", 0, 11, 100 * P, 50, 0),  # fill 4
]
STORY_FILLS = 4


# --- LOBSTER -------------------------------------------------------------------------------

def lobster_rows(story=STORY, t0: float = 34_200.0):
    """(message rows, book rows at depth 2) of ``story`` in LOBSTER's layout."""
    book = {0: {}, 1: {}}
    msgs, books = [], []
    for k, (what, s, oid, px, q, new) in enumerate(story):
        t = t0 + k * 0.5
        d = 1 if s == 0 else -1
        if what == "add":
            msgs.append((t, 1, oid, q, px, d))
            book[s][px] = book[s].get(px, 0) + q
        elif what in ("exec", "cancel", "delete"):
            msgs.append((t, {"exec": 4, "cancel": 2, "delete": 3}[what], oid, q, px, d))
            book[s][px] -= q
            if not book[s][px]:
                del book[s][px]
        elif what == "hidden":
            msgs.append((t, 5, 0, q, px, d))
        elif what == "replace":  # LOBSTER has no replace: a delete and a submit
            old_q = 50
            msgs.append((t, 3, oid, old_q, 100 * P, d))
            book[s][100 * P] -= old_q
            books.append(_lob_book(book))
            msgs.append((t, 1, new, q, px, d))
            book[s][px] = book[s].get(px, 0) + q
        elif what in ("halt", "resume"):
            msgs.append((t, 7, 0, 0, -1 if what == "halt" else 1, -1))
        books.append(_lob_book(book))
    return msgs, books


def _lob_book(book, depth: int = 2):
    asks = sorted(book[1].items())[:depth]
    bids = sorted(book[0].items(), reverse=True)[:depth]
    row = []
    for lv in range(depth):
        a = asks[lv] if lv < len(asks) else (9_999_999_999, 0)
        b = bids[lv] if lv < len(bids) else (-9_999_999_999, 0)
        row += [a[0], a[1], b[0], b[1]]
    return row


def write_lobster(folder: Path, ticker: str = "LOBT", *, book: bool = True, rows=None):
    """Write ``TICKER_..._message_2.csv`` (and the orderbook file); returns the paths."""
    msgs, books = rows if rows is not None else lobster_rows()
    m = folder / f"{ticker}_2026-01-05_34200000_57600000_message_2.csv"
    m.write_text("".join(f"{t:.9f},{ty},{o},{q},{p},{d}\n" for t, ty, o, q, p, d in msgs))
    if not book:
        return m, None
    b = folder / f"{ticker}_2026-01-05_34200000_57600000_orderbook_2.csv"
    b.write_text("".join(",".join(str(v) for v in r) + "\n" for r in books))
    return m, b


# --- ITCH 5.0 ------------------------------------------------------------------------------

def _ts(t_ns: int) -> bytes:
    return t_ns.to_bytes(6, "big")


def _msg(body: bytes) -> bytes:
    return struct.pack(">H", len(body)) + body


def itch_messages(story=STORY, stock: str = "LOBT", locate: int = 7, *, other: bool = True,
                  t0: int = 34_200 * 10**9) -> list[bytes]:
    """``story`` as ITCH 5.0 messages (length-prefixed), with a second stock's orders
    interleaved when ``other`` (the symbol filter must drop them)."""
    st = stock.encode().ljust(8)
    out = [_msg(b"S" + struct.pack(">HH", 0, 0) + _ts(t0 - 10) + b"O"),
           _msg(b"R" + struct.pack(">HH", locate, 0) + _ts(t0 - 5) + st + bytes(20)),
           _msg(b"R" + struct.pack(">HH", 9, 0) + _ts(t0 - 5) + b"OTHR    " + bytes(20))]
    for k, (what, s, oid, px, q, new) in enumerate(story):
        ts = _ts(t0 + k * 1000)
        h = struct.pack(">HH", locate, 0) + ts
        side = b"B" if s == 0 else b"S"
        if what == "add":
            body = (b"A" + h + struct.pack(">Q", oid) + side + struct.pack(">I", q) + st
                    + struct.pack(">I", px))
        elif what == "exec":
            body = b"E" + h + struct.pack(">QIQ", oid, q, 1000 + k)
        elif what == "cancel":
            body = b"X" + h + struct.pack(">QI", oid, q)
        elif what == "delete":
            body = b"D" + h + struct.pack(">Q", oid)
        elif what == "replace":
            body = b"U" + h + struct.pack(">QQII", oid, new, q, px)
        elif what == "hidden":
            body = (b"P" + h + struct.pack(">Q", 0) + side + struct.pack(">I", q) + st
                    + struct.pack(">IQ", px, 1000 + k))
        elif what in ("halt", "resume"):
            body = b"H" + h + st + (b"H" if what == "halt" else b"T") + b" " + b"    "
        else:
            raise ValueError(what)
        out.append(_msg(body))
        if other:  # another stock's add (same id space, other locate)
            out.append(_msg(b"A" + struct.pack(">HH", 9, 0) + ts + struct.pack(">Q", 900 + k)
                            + b"B" + struct.pack(">I", 5) + b"OTHR    "
                            + struct.pack(">I", 50 * P)))
    out.append(_msg(b"Q" + struct.pack(">HH", locate, 0) + _ts(t0 + 10**9)
                    + struct.pack(">Q", 500) + st + struct.pack(">IQ", 100 * P, 7) + b"C"))
    return out


def write_itch(path: Path, **kw) -> Path:
    path.write_bytes(b"".join(itch_messages(**kw)))
    return path


# --- DBN MBO -------------------------------------------------------------------------------

def dbn_record(action, side: int, oid: int, px: int, q: int, ts: int, flags: int,
               iid: int = 42):
    """One DBN MBO record (databento-dbn's own MBOMsg); ``px`` in 1/10,000 USD; ``side``
    0 bid, 1 ask, 2 none."""
    import databento_dbn as dbn

    return dbn.MBOMsg(publisher_id=1, instrument_id=iid, ts_event=ts, order_id=oid,
                      price=px * 100_000, size=q, action=action,
                      side=(dbn.Side.BID, dbn.Side.ASK, dbn.Side.NONE)[side], ts_recv=ts + 5,
                      flags=flags)


def dbn_records(story=STORY, iid: int = 42, t0: int = 1_767_605_400 * 10**9,
                fills: bool = True):
    """``story`` as DBN MBO records (databento-dbn's own MBOMsg), Databento's conventions:
    an execution is a trade T, a fill F and a cancel C restating it (``fills`` False: no F);
    a replace a modify M; the first
    two adds are flagged as a snapshot; one record's ts_event runs backwards."""
    import databento_dbn as dbn

    A = dbn.Action
    recs = []

    def rec(action, side, oid, px, q, ts, flags=dbn.F_LAST):
        recs.append(dbn_record(action, side, oid, px, q, ts, flags, iid))
    same: dict[int, int] = {}  # a modify keeps the order's id
    for k, (what, s, oid, px, q, new) in enumerate(story):
        oid = same.get(oid, oid)
        ts = t0 + k * 1000 - (2000 if k == 6 else 0)  # an out-of-order ts_event
        if what == "add":
            rec(A.ADD, s, oid, px, q, ts, dbn.F_SNAPSHOT if k < 2 else dbn.F_LAST)
        elif what == "exec":
            rec(A.TRADE, 1 - s, 0, px, q, ts, 0)
            if fills:  # some venues' feeds state no fill: the trade, then the maker's cancel
                rec(A.FILL, s, oid, px, q, ts, 0)
            rec(A.CANCEL, s, oid, px, q, ts)
        elif what in ("cancel", "delete"):
            rec(A.CANCEL, s, oid, px, q, ts)
        elif what == "replace":
            rec(A.MODIFY, s, oid, px, q, ts)
            same[new] = oid
        elif what == "hidden":
            rec(A.TRADE, s, 0, px, q, ts)
    return recs


def write_dbn(path: Path, *, iid: int = 42, symbol: str = "LOBT", other: bool = True,
              recs=None) -> Path:
    import databento_dbn as dbn

    meta = dbn.Metadata(dataset="XNAS.ITCH", start=0, stype_in=dbn.SType.RAW_SYMBOL,
                        stype_out=dbn.SType.INSTRUMENT_ID, schema=dbn.Schema.MBO,
                        symbols=[symbol], end=2**63)
    rs = recs if recs is not None else dbn_records(iid=iid)
    body = b"".join(bytes(r) for r in rs)
    if other:  # another instrument's add
        body += bytes(dbn.MBOMsg(publisher_id=1, instrument_id=iid + 1, ts_event=1, order_id=5,
                                 price=10**9, size=1, action=dbn.Action.ADD,
                                 side=dbn.Side.BID, ts_recv=2, flags=dbn.F_LAST))
    path.write_bytes(meta.encode() + body)
    return path

"""Import speed of ``lob data import`` (issue 43): a benchmark, not a test - ``make bench``.

Generates, in a temporary folder, a valid ITCH 5.0 file and a DBN MBO file of
``LOB_BENCH_IMPORT_MSGS`` messages (default 10M) over 100 stocks (instruments), half of the
orders of one of them (the one imported: the symbol filter keeps half the file), and a LOBSTER
message file of as many rows (one ticker); each block of 2,200 messages adds 1,000 orders (bids
99.00..99.99, asks 100.01..101.00), cancels one share of 200 of them and deletes the 1,000.
Imports each in a child process and prints messages per second, over the import's wall time
and over its CPU time (user + sys, which a shared machine disturbs less), and the child's
peak RSS (VmHWM). Each format is run at the full size and at a quarter: its peak memory
should not grow with the file (the symbol's book is the same at both). ``LOB_BENCH_IMPORT_FORMATS``
(default ``itch,dbn,lobster``) picks the formats. Figures vary with the machine's load: read
them as of one run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytestmark = pytest.mark.bench
N = int(os.environ.get("LOB_BENCH_IMPORT_MSGS", 10_000_000))
ADDS, PARTIAL = 1000, 200
BLOCK = 2 * ADDS + PARTIAL
_H = [("len", ">u2"), ("type", "S1"), ("locate", ">u2"), ("tracking", ">u2"),
      ("ts_hi", ">u2"), ("ts_lo", ">u4")]
A = np.dtype(_H + [("ref", ">u8"), ("side", "S1"), ("shares", ">u4"), ("stock", "S8"),
                   ("price", ">u4")])
X = np.dtype(_H + [("ref", ">u8"), ("shares", ">u4")])
D = np.dtype(_H + [("ref", ">u8")])
R = np.dtype(_H + [("stock", "S8"), ("rest", "V20")])
STOCKS = 100
SYMBOL = 42  # the stock (ITCH S042, DBN instrument 42) imported: half of the orders
FORMATS = os.environ.get("LOB_BENCH_IMPORT_FORMATS", "itch,dbn,lobster").split(",")


def _stream(n: int, seed: int = 1):
    """(refs, sides, prices, stock index) of every add, and the blocks' count."""
    nb = max(1, n // BLOCK)
    rng = np.random.default_rng(seed)
    refs = np.arange(1, nb * ADDS + 1, dtype=np.int64)
    side = rng.integers(0, 2, nb * ADDS)
    off = rng.integers(1, 101, nb * ADDS)
    price = np.where(side == 0, 1_000_000 - off * 100, 1_000_000 + off * 100)
    stock = np.where(refs % 2 == 0, SYMBOL, (refs * 7919) % STOCKS)  # half: the symbol's
    return nb, refs, side, price, stock


def write_itch(path, n: int) -> int:
    nb, refs, side, price, stock = _stream(n)
    head = np.zeros(STOCKS, R)
    head["len"], head["type"], head["locate"] = R.itemsize - 2, b"R", np.arange(1, STOCKS + 1)
    head["stock"] = [f"S{k:03d}".ljust(8).encode() for k in range(STOCKS)]
    t = np.arange(nb * BLOCK, dtype=np.int64) * 1000 + 34_200 * 10**9
    a = np.zeros(nb * ADDS, A)
    a["len"], a["type"], a["locate"] = A.itemsize - 2, b"A", stock + 1
    a["ref"], a["side"] = refs, np.where(side == 0, b"B", b"S")
    a["shares"], a["price"] = 100, price
    a["stock"] = np.array([f"S{k:03d}".ljust(8).encode() for k in range(STOCKS)])[stock]
    x = np.zeros((nb, PARTIAL), X)
    x["len"], x["type"], x["shares"] = X.itemsize - 2, b"X", 1
    x["ref"] = refs.reshape(nb, ADDS)[:, :PARTIAL]
    x["locate"] = a["locate"].reshape(nb, ADDS)[:, :PARTIAL]
    d = np.zeros((nb, ADDS), D)
    d["len"], d["type"], d["ref"] = D.itemsize - 2, b"D", refs.reshape(nb, ADDS)
    d["locate"] = a["locate"].reshape(nb, ADDS)
    tb = t.reshape(nb, BLOCK)
    for arr, cols in ((a.reshape(nb, ADDS), tb[:, :ADDS]), (x, tb[:, ADDS:ADDS + PARTIAL]),
                      (d, tb[:, ADDS + PARTIAL:])):
        arr["ts_hi"], arr["ts_lo"] = cols >> 32, cols & 0xFFFFFFFF
    body = np.concatenate([a.reshape(nb, ADDS).view(np.uint8).reshape(nb, -1),
                           x.view(np.uint8).reshape(nb, -1),
                           d.view(np.uint8).reshape(nb, -1)], axis=1)
    with open(path, "wb") as f:
        f.write(head.tobytes())
        f.write(body.tobytes())
    return STOCKS + nb * BLOCK


def write_dbn(path, n: int) -> int:
    """The same stream as DBN MBO records: adds, cancels of one share and of the rest (C);
    the header encoded by databento-dbn, the records laid out as its MBOMsg (checked)."""
    import databento_dbn as dbn

    from lob.workloads.formats import MBO_DTYPE

    nb, refs, side, price, stock = _stream(n)
    tmpl = dbn.MBOMsg(publisher_id=1, instrument_id=SYMBOL, ts_event=1, order_id=1,
                      price=10**9, size=100, action=dbn.Action.ADD, side=dbn.Side.BID,
                      ts_recv=2, flags=dbn.F_LAST)
    r = np.zeros((nb, BLOCK), MBO_DTYPE)
    r[...] = np.frombuffer(bytes(tmpl), MBO_DTYPE)[0]
    t = np.arange(nb * BLOCK, dtype=np.int64).reshape(nb, BLOCK) * 1000 + 1_767_605_400 * 10**9
    r["ts_event"], r["ts_recv"] = t, t + 5
    ids, sd = refs.reshape(nb, ADDS), np.where(side == 0, b"B", b"A").reshape(nb, ADDS)
    px, iid = (price * 100_000).reshape(nb, ADDS), (stock + 1).reshape(nb, ADDS)
    for cols, k in ((slice(0, ADDS), ADDS), (slice(ADDS, ADDS + PARTIAL), PARTIAL),
                    (slice(ADDS + PARTIAL, BLOCK), ADDS)):
        r["order_id"][:, cols], r["side"][:, cols] = ids[:, :k], sd[:, :k]
        r["price"][:, cols], r["instrument_id"][:, cols] = px[:, :k], iid[:, :k]
    r["action"][:, ADDS:] = b"C"
    r["size"][:, ADDS:ADDS + PARTIAL] = 1
    r["size"][:, ADDS + PARTIAL:ADDS + 2 * PARTIAL] = 99
    meta = dbn.Metadata(dataset="XNAS.ITCH", start=0, stype_in=dbn.SType.RAW_SYMBOL,
                        stype_out=dbn.SType.INSTRUMENT_ID, schema=dbn.Schema.MBO,
                        symbols=["S042"], end=2**63)
    with open(path, "wb") as f:
        f.write(meta.encode())
        f.write(r.tobytes())
    return nb * BLOCK


def write_lobster(path, n: int) -> int:
    nb, refs, side, price, _ = _stream(n)
    r = refs.reshape(nb, ADDS)
    rows = np.zeros((nb, BLOCK, 6), np.int64)
    rows[:, :ADDS, 1], rows[:, :ADDS, 2], rows[:, :ADDS, 3] = 1, r, 100
    rows[:, :ADDS, 4] = price.reshape(nb, ADDS)
    rows[:, :ADDS, 5] = np.where(side.reshape(nb, ADDS) == 0, 1, -1)
    rows[:, ADDS:ADDS + PARTIAL] = rows[:, :PARTIAL]
    rows[:, ADDS:ADDS + PARTIAL, 1], rows[:, ADDS:ADDS + PARTIAL, 3] = 2, 1
    rows[:, ADDS + PARTIAL:] = rows[:, :ADDS]
    rows[:, ADDS + PARTIAL:, 1], rows[:, ADDS + PARTIAL:, 3] = 3, 100
    rows[:, ADDS + PARTIAL:ADDS + 2 * PARTIAL, 3] = 99
    rows = rows.reshape(-1, 6)
    t = 34_200 + np.arange(len(rows)) * 1e-6
    with open(path, "w") as f:
        for k in range(0, len(rows), 1_000_000):
            blk = rows[k:k + 1_000_000]
            tt = t[k:k + 1_000_000]
            f.write("\n".join(f"{a:.6f},{b},{c},{d},{e},{g}" for a, (_, b, c, d, e, g)
                              in zip(tt.tolist(), blk.tolist(), strict=True)) + "\n")
    return len(rows)


_CHILD = textwrap.dedent("""
    import json, os, sys, time
    from lob.workloads.imported import import_file
    fmt, path, name, sym = sys.argv[1:5]
    t, c = time.perf_counter(), os.times()
    wl = import_file(fmt, path, name=name, symbol=sym or None)
    took = time.perf_counter() - t
    c2 = os.times()
    cpu = c2.user + c2.system - c.user - c.system
    # VmHWM: this process's own peak (ru_maxrss keeps the parent's peak across fork + exec)
    hwm = [ln for ln in open("/proc/self/status") if ln.startswith("VmHWM")][0]
    print(json.dumps({"s": took, "cpu": cpu, "commands": len(wl),
                      "rss_mb": int(hwm.split()[1]) / 1024}))
""")


def _run(fmt, path, sym, tmp) -> dict:
    env = dict(os.environ, LOB_CACHE=str(tmp / "cache"))
    out = subprocess.run([sys.executable, "-c", _CHILD, fmt, str(path), "b_" + fmt, sym],
                         env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_speed(tmp_path):
    rows = []
    runs = {"itch": (write_itch, "day.itch", f"S{SYMBOL:03d}"),
            "dbn": (write_dbn, "day.dbn", str(SYMBOL + 1)),
            "lobster": (write_lobster, "LOBB_2026-01-05_34200000_57600000_message_1.csv", "")}
    for fmt in FORMATS:
        write, fname, sym = runs[fmt]
        for n in (N // 4, N):
            p = tmp_path / fname
            msgs = write(p, n)
            rows.append((fmt, msgs, _run(fmt, p, sym, tmp_path)))
            p.unlink()
    print(f"\nimport speed (one child process each; {os.cpu_count()} CPUs, shared machine)")
    print(f"{'format':<8} {'messages':>12} {'wall s':>7} {'msg/s':>11} {'CPU s':>7} "
          f"{'msg/CPU s':>11} {'commands':>10} {'peak RSS MB':>12}")
    for fmt, msgs, r in rows:
        print(f"{fmt:<8} {msgs:>12,} {r['s']:>7.2f} {msgs / r['s']:>11,.0f} {r['cpu']:>7.2f} "
              f"{msgs / r['cpu']:>11,.0f} {r['commands']:>10,} {r['rss_mb']:>12,.0f}")
        assert r["commands"] > 0

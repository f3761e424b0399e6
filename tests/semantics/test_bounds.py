"""Extreme values: the bounds of lob.semantics hold identically on every engine, values the
command dtype cannot hold are a clear error everywhere, and engines refuse a band they
cannot hold quickly, before allocating, with an error naming the band, engine and memory."""

from __future__ import annotations

import resource
import time
import tracemalloc

import numpy as np
import pytest
from conftest import BUY, FOK, LIMIT, MARKET, NOTIONAL, SELL, l2, out

import lob
from lob.engines.bands import BandTooWide
from lob.semantics import (
    MAX_NOTIONAL,
    MAX_PRICE,
    MAX_QTY,
    BookConfig,
    Kind,
    Reason,
    Scope,
    Status,
    commands,
    counters,
)

I64_MIN, I64_MAX = -(2**63), 2**63 - 1
BAD_QTY = out(Status.REJECTED, 0, 0, reason=Reason.BAD_QTY)



def max_band_width(name: str) -> int | None:
    """The widest band a registered engine accepts (None: memory independent of the band);
    building a one-tick book allocates nothing of note; an engine that declares its
    capabilities (a foreign or native library) says it there."""
    declared = getattr(lob.engines.engine_spec(name).factory, "capabilities", None)
    if declared is not None:
        return declared().max_band_width
    return getattr(lob.get_engine(name, BookConfig(1, 1)), "max_band_width", None)

def _two_sided(name, band=(90, 110)):
    eng = lob.get_engine(name, BookConfig(*band))
    assert eng.submit(1, BUY, LIMIT, 99, 5).status == Status.ACCEPTED
    assert eng.submit(2, SELL, LIMIT, 101, 5).status == Status.ACCEPTED
    return eng


def _orders(eng) -> int:
    book = l2(eng)
    return sum(n for side in ("bids", "asks") for _, _, n in book[side])


# --- the cases: every engine gives what reference gives ---------------------------

RANGES = [(I64_MIN, I64_MAX, 2), (I64_MIN, I64_MIN, 0), (I64_MIN, 99, 1), (I64_MIN, 98, 0),
          (101, I64_MAX, 1), (102, I64_MAX, 0), (I64_MAX, I64_MAX, 0), (I64_MIN + 1, 100, 1),
          (-5, 0, 0), (0, 10**18, 2)]


@pytest.mark.parametrize("lo, hi, removed", RANGES)
def test_mass_cancel_price_range_at_the_ends_of_int64(engine_name, lo, hi, removed):
    eng = _two_sided(engine_name)
    got = eng.mass_cancel(Scope.PRICE_RANGE, price_lo=lo, price_hi=hi)
    assert got == out(Status.CANCELLED, 0, 0, removed=removed)
    assert _orders(eng) == 2 - removed
    eng.check()


def test_quantity_bounds_are_rejected_identically(engine_name):
    eng = lob.get_engine(engine_name, BookConfig(90, 110))
    # the FOK case: two resting asks of 2**62, then a FOK of 2**63 - 1
    assert eng.submit(1, SELL, LIMIT, 101, 2**62) == BAD_QTY
    assert eng.submit(1, SELL, LIMIT, 102, 2**62) == BAD_QTY
    assert eng.submit(2, BUY, FOK, 105, I64_MAX) == BAD_QTY
    assert eng.submit(2, BUY, FOK, 105, 2**62 + 1) == BAD_QTY
    assert eng.submit(2, BUY, LIMIT, 95, MAX_QTY + 1) == BAD_QTY
    assert eng.submit(2, BUY, MARKET, 0, MAX_QTY + 1) == BAD_QTY
    assert eng.submit(2, BUY, NOTIONAL, 0, MAX_NOTIONAL + 1) == BAD_QTY
    assert eng.snapshot(5) == {"bids": [], "asks": []}
    # at the bounds: accepted, and the sums that follow are exact
    for i in range(4):
        assert eng.submit(1, SELL, LIMIT, 101 + i % 2, MAX_QTY).status == Status.ACCEPTED
    assert l2(eng)["asks"] == [(101, 2 * MAX_QTY, 2), (102, 2 * MAX_QTY, 2)]
    assert eng.modify(1, MAX_QTY + 1) == BAD_QTY
    assert eng.modify(1, I64_MAX) == BAD_QTY
    assert eng.submit(2, BUY, FOK, 110, 4 * MAX_QTY).reason == Reason.BAD_QTY
    fok = eng.submit(2, BUY, FOK, 110, MAX_QTY)
    assert (fok.status, fok.filled, fok.fills) == (Status.FILLED, MAX_QTY, 1)
    nt = eng.submit(3, BUY, NOTIONAL, 0, MAX_NOTIONAL)
    assert (nt.status, nt.filled, nt.remaining) == (
        Status.PARTIALLY_FILLED, 3 * MAX_QTY, MAX_NOTIONAL - MAX_QTY * (101 + 2 * 102))
    assert eng.snapshot(5)["asks"] == []
    eng.check()


def test_the_full_scan_fok_counts_past_any_book_total():
    """v0/v1's full count stopped at 2**62, short of a legal book's total; no longer."""
    from lob.engines.ladder import NO_LIMIT
    from lob.semantics import MAX_ORDERS

    assert NO_LIMIT > MAX_ORDERS * MAX_QTY


@pytest.mark.parametrize("oid", [I64_MIN, I64_MIN + 1, -1, 0, 2**31, 2**32, 2**62, I64_MAX - 1,
                                 I64_MAX])
def test_ids_at_the_ends_of_int64(engine_name, oid):
    eng = _two_sided(engine_name)
    assert eng.cancel(oid) == out(Status.NOT_FOUND, oid, 0, reason=Reason.UNKNOWN_ID)
    assert eng.modify(oid, 3) == out(Status.NOT_FOUND, oid, 0, reason=Reason.UNKNOWN_ID)
    assert eng.modify(oid, 3, 100) == out(Status.NOT_FOUND, oid, 0, reason=Reason.UNKNOWN_ID)
    assert _orders(eng) == 2


@pytest.mark.parametrize("price", [I64_MIN, I64_MAX, MAX_PRICE + 1])
def test_prices_at_the_ends_of_int64(engine_name, price):
    eng = _two_sided(engine_name)
    bad = out(Status.REJECTED, 0, 0, reason=Reason.BAD_PRICE)
    assert eng.submit(3, BUY, LIMIT, price, 1) == bad
    assert eng.modify(1, 1, price) == bad
    m = eng.submit(3, BUY, MARKET, price, 1)  # a market order's price is ignored
    assert (m.status, m.filled) == (Status.FILLED, 1)


# --- values the command dtype cannot hold: one ValueError naming the field, everywhere ---

TOO_BIG = [
    ("qty", lambda e: e.submit(1, BUY, LIMIT, 100, 2**63)),
    ("owner", lambda e: e.submit(2**31, BUY, LIMIT, 100, 1)),
    ("side", lambda e: e.submit(1, 128, LIMIT, 100, 1)),
    ("otype", lambda e: e.submit(1, BUY, 128, 100, 1)),
    ("price", lambda e: e.submit(1, BUY, MARKET, 2**70, 1)),
    ("kind", lambda e: e.execute({"kind": 128})),
    ("kind", lambda e: e.execute({"kind": -129})),
    ("id", lambda e: e.cancel(2**63)),
    ("qty", lambda e: e.modify(1, -(2**63) - 1)),
    ("scope", lambda e: e.mass_cancel(300)),
    ("price_lo", lambda e: e.mass_cancel(Scope.PRICE_RANGE, price_lo=-(2**64), price_hi=1)),
    ("price_hi", lambda e: e.mass_cancel(Scope.PRICE_RANGE, price_lo=1, price_hi=2**63)),
]


@pytest.mark.parametrize("field, call", TOO_BIG, ids=[f"{f}-{i}" for i, (f, _) in
                                                      enumerate(TOO_BIG)])
def test_values_the_dtype_cannot_hold(engine_name, field, call):
    eng = _two_sided(engine_name)
    before = l2(eng)
    with pytest.raises(ValueError, match=field):
        call(eng)
    assert l2(eng) == before
    assert len(eng.fills) == 0  # the fill record still converts (no OverflowError)
    assert eng.submit(1, BUY, LIMIT, 95, 1).id == 3  # no id was taken


# --- commands(): no silent truncation --------------------------------------------------

@pytest.mark.parametrize("row, exc, field", [
    ({"price": 100.7}, ValueError, "price"),
    ({"qty": -1.5}, ValueError, "qty"),
    ({"price": "100"}, TypeError, "price"),
    ({"kind": 300}, ValueError, "kind"),
    ({"owner": 2**31}, ValueError, "owner"),
    ({"qty": 2**63}, ValueError, "qty"),
    ({"id": float("nan")}, ValueError, "id"),
    ({"side": None}, TypeError, "side"),
    ({"timed": 2}, TypeError, "timed"),
])
def test_commands_refuses_what_it_would_truncate(row, exc, field):
    with pytest.raises(exc, match=field):
        commands([{"kind": 0, **row}])


def test_commands_takes_whole_floats_and_numpy_ints():
    c = commands([{"price": 100.0, "qty": np.int64(3), "owner": np.int32(2), "timed": False,
                   "id": -(2**63)}])
    assert (int(c["price"][0]), int(c["qty"][0]), int(c["owner"][0]), bool(c["timed"][0]),
            int(c["id"][0])) == (100, 3, 2, False, -(2**63))


def test_counters_are_exact_beyond_int64():
    o = np.zeros(20, dtype=lob.semantics.OUTCOME_DTYPE)
    o["remaining"] = MAX_NOTIONAL
    o["filled"] = MAX_QTY
    c = counters(o)
    assert c["remaining_sum"] == 20 * MAX_NOTIONAL and c["matched_volume"] == 20 * MAX_QTY


def test_book_config_refuses_prices_beyond_max_price():
    BookConfig(1, MAX_PRICE)
    for hi in (MAX_PRICE + 1, 2**62, 2**63):
        with pytest.raises(ValueError, match="MAX_PRICE"):
            BookConfig(1, hi)


# --- bands ----------------------------------------------------------------------------------

def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.mark.parametrize("width", [2 * 10**8, MAX_PRICE])
def test_a_band_too_wide_is_refused_at_once_without_allocating(engine_name, width):
    config = BookConfig(1, width)
    limit = max_band_width(engine_name)
    rss0 = _peak_rss_mb()
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        if limit is None:  # memory independent of the band (reference): accepted
            eng = lob.get_engine(engine_name, config)
            assert eng.submit(1, BUY, LIMIT, width, 3).status == Status.ACCEPTED
            assert eng.submit(1, SELL, LIMIT, 1, 2).filled == 2
            eng.check()
        else:
            assert width > limit
            with pytest.raises(BandTooWide) as info:
                lob.get_engine(engine_name, config)
            msg = str(info.value)
            assert f"1..{width:,}" in msg and "GiB" in msg and "width <=" in msg
            assert ("ladder[" in msg or "compiled[" in msg) and "reference" in msg
        elapsed = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert elapsed < 1.0, f"{engine_name}: {elapsed:.2f} s for a band of {width:,}"
    assert peak < 5 * 2**20, f"{engine_name}: {peak / 2**20:.1f} MiB allocated"
    assert _peak_rss_mb() - rss0 < 100


def test_band_limits_per_engine():
    from lob.engines.registry import engine_spec

    limits = {name: max_band_width(name) for name in lob.engine_names()}
    assert limits["reference"] is None
    ladders = [n for n in limits if "levels" in engine_spec(n).toggles  # lob's ladder versions
               and engine_spec(n).backend in ("python", "numba")]
    assert len(ladders) >= 10
    for name in ladders:
        assert 10**7 < limits[name] < 10**8, (name, limits[name])  # 1 GiB of per-price arrays


def test_compiled_band_bytes_match_the_book_layout():
    pytest.importorskip("numba")
    from lob.engines.compiled import _band
    from lob.engines.compiled import book as bk
    from lob.engines.compiled.engine import CompiledEngine

    assert (_band.LOFF, _band.LEVEL_COLS) == (bk.LOFF, bk.LEVEL_COLS)
    for w in (1, 99, 65_536, 1_000_003):
        for fok in ("full", "level_sums"):
            eng = CompiledEngine(BookConfig(1, w), fok=fok)
            assert _band.band_bytes(w, fok) == eng._G.nbytes + eng._B.nbytes


def test_the_band_limit_follows_the_memory_budget(monkeypatch):
    monkeypatch.setenv("LOB_MAX_BAND_BYTES", str(2**20))
    w = max_band_width("v2")
    assert 2**20 // 33 <= w <= 2**20 // 32
    lob.get_engine("v2", BookConfig(1, w))
    with pytest.raises(BandTooWide, match="1.0 MiB"):
        lob.get_engine("v2", BookConfig(1, w + 1))


def test_a_bad_command_in_a_replay_at_the_bounds(engine_name):
    cmds = commands([
        dict(kind=Kind.SUBMIT, owner=1, side=SELL, price=101, qty=MAX_QTY),
        dict(kind=Kind.SUBMIT, owner=1, side=SELL, price=101, qty=MAX_QTY + 1),
        dict(kind=Kind.SUBMIT, owner=2, side=BUY, otype=NOTIONAL, qty=MAX_NOTIONAL),
        dict(kind=Kind.MASS_CANCEL, otype=Scope.PRICE_RANGE, price=I64_MIN, price_hi=I64_MIN),
        dict(kind=Kind.CANCEL, id=I64_MIN),
    ])
    res = lob.get_engine(engine_name, BookConfig(90, 110)).replay(cmds)
    ref = lob.get_engine("reference", BookConfig(90, 110)).replay(cmds)
    assert res.checksum == ref.checksum
    assert res.outcomes["reason"].tolist() == [0, Reason.BAD_QTY, 0, 0, Reason.UNKNOWN_ID]

"""FOK orders: all or nothing, availability counted under the book's STP mode."""

from __future__ import annotations

import pytest
from conftest import BUY, FOK, LIMIT, SELL, book_with, fills, l2, out, state

import lob
from lob.semantics import Reason, Status, StpMode


def unfillable(oid: int, qty: int):
    return out(Status.CANCELLED, oid, qty, reason=Reason.FOK_UNFILLABLE)


def test_exactly_enough_fills(engine_name):
    eng = book_with(engine_name, asks=[(100, 2, 1), (101, 3, 2)])
    assert eng.submit(3, BUY, FOK, 101, 5) == out(Status.FILLED, 3, 0, 5, 2)
    assert fills(eng) == [(3, 1, 100, 2), (3, 2, 101, 3)]
    assert l2(eng) == {"bids": [], "asks": []}


def test_one_short_does_nothing_but_takes_an_id(engine_name):
    eng = book_with(engine_name, asks=[(100, 2, 1), (101, 3, 2)])
    before = state(eng)
    assert eng.submit(3, BUY, FOK, 101, 6) == unfillable(3, 6)
    assert state(eng) == before
    assert fills(eng) == []
    assert eng.submit(3, BUY, LIMIT, 50, 1) == out(Status.ACCEPTED, 4, 1)


def test_only_crossing_levels_count(engine_name):
    eng = book_with(engine_name, asks=[(100, 2, 1), (102, 10, 2)])
    assert eng.submit(3, BUY, FOK, 101, 3) == unfillable(3, 3)
    assert eng.submit(3, BUY, FOK, 101, 2) == out(Status.FILLED, 4, 0, 2, 1)
    assert l2(eng) == {"bids": [], "asks": [(102, 10, 1)]}


def test_empty_book_is_unfillable(engine_name):
    eng = lob.get_engine(engine_name)
    assert eng.submit(1, SELL, FOK, 100, 1) == unfillable(1, 1)
    assert l2(eng) == {"bids": [], "asks": []}


def test_sell_exactly_enough(engine_name):
    eng = book_with(engine_name, bids=[(100, 1, 1), (99, 1, 1), (98, 9, 1)])
    assert eng.submit(2, SELL, FOK, 99, 3) == unfillable(4, 3)
    assert eng.submit(2, SELL, FOK, 99, 2) == out(Status.FILLED, 5, 0, 2, 2)
    assert fills(eng) == [(5, 1, 100, 1), (5, 2, 99, 1)]
    assert l2(eng) == {"bids": [(98, 9, 1)], "asks": []}


# asks: id 1 (100, 2, owner 2), id 2 (100, 3, owner 1 = the taker), id 3 (101, 4, owner 2).
# Available to owner 1 buying up to 101: NONE 9; CANCEL_MAKER 6 (own skipped);
# CANCEL_TAKER / CANCEL_BOTH 2 (counting stops at the own order).
STP_BOOK = [(100, 2, 2), (100, 3, 1), (101, 4, 2)]
STP_CASES = [
    # stp, enough qty, fills when filled, removed, asks left after the fill
    (StpMode.NONE, 9, [(4, 1, 100, 2), (4, 2, 100, 3), (4, 3, 101, 4)], 0, []),
    (StpMode.CANCEL_MAKER, 6, [(4, 1, 100, 2), (4, 3, 101, 4)], 1, []),
    (StpMode.CANCEL_TAKER, 2, [(4, 1, 100, 2)], 0, [(100, 3, 1), (101, 4, 1)]),
    (StpMode.CANCEL_BOTH, 2, [(4, 1, 100, 2)], 0, [(100, 3, 1), (101, 4, 1)]),
]


@pytest.mark.parametrize("stp, enough, want_fills, removed, asks_after", STP_CASES,
                         ids=[c[0].name for c in STP_CASES])
def test_own_orders_excluded_exactly_enough(engine_name, stp, enough, want_fills, removed,
                                            asks_after):
    eng = book_with(engine_name, asks=STP_BOOK, stp=stp)
    got = eng.submit(1, BUY, FOK, 101, enough)
    assert got == out(Status.FILLED, 4, 0, enough, len(want_fills), removed)
    assert fills(eng) == want_fills
    assert l2(eng) == {"bids": [], "asks": asks_after}


@pytest.mark.parametrize("stp, enough", [(c[0], c[1]) for c in STP_CASES],
                         ids=[c[0].name for c in STP_CASES])
def test_own_orders_excluded_one_short(engine_name, stp, enough):
    eng = book_with(engine_name, asks=STP_BOOK, stp=stp)
    before = state(eng)
    assert eng.submit(1, BUY, FOK, 101, enough + 1) == unfillable(4, enough + 1)
    assert state(eng) == before  # not even the own order is cancelled
    assert fills(eng) == []


def test_other_owners_unaffected_by_stp(engine_name):
    eng = book_with(engine_name, asks=STP_BOOK, stp=StpMode.CANCEL_BOTH)
    assert eng.submit(3, BUY, FOK, 101, 9) == out(Status.FILLED, 4, 0, 9, 3)

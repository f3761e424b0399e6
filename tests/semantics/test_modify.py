"""Modify: qty down keeps priority, qty up goes to the tail, a price change re-enters."""

from __future__ import annotations

import pytest
from conftest import BUY, IOC, LIMIT, SELL, book_with, fills, l2, out, state

from lob.semantics import Reason, Status, StpMode


def test_qty_down_keeps_priority(engine_name):
    eng = book_with(engine_name, bids=[(100, 5, 1), (100, 5, 2)])
    assert eng.modify(1, 2) == out(Status.ACCEPTED, 1, 2)
    assert l2(eng) == {"bids": [(100, 7, 2)], "asks": []}
    assert eng.submit(3, SELL, LIMIT, 100, 3) == out(Status.FILLED, 3, 0, 3, 2)
    assert fills(eng) == [(3, 1, 100, 2), (3, 2, 100, 1)]


def test_qty_down_with_the_same_price_spelled_out(engine_name):
    eng = book_with(engine_name, bids=[(100, 5, 1), (100, 5, 2)])
    assert eng.modify(1, 2, 100) == out(Status.ACCEPTED, 1, 2)
    eng.submit(3, SELL, LIMIT, 100, 1)
    assert fills(eng) == [(3, 1, 100, 1)]


def test_same_qty_keeps_priority(engine_name):
    # the reference treats "not an increase" as keeping priority (see semantics docstring)
    eng = book_with(engine_name, bids=[(100, 5, 1), (100, 5, 2)])
    assert eng.modify(1, 5) == out(Status.ACCEPTED, 1, 5)
    eng.submit(3, SELL, LIMIT, 100, 1)
    assert fills(eng) == [(3, 1, 100, 1)]


def test_qty_up_goes_to_the_tail(engine_name):
    eng = book_with(engine_name, bids=[(100, 5, 1), (100, 5, 2)])
    assert eng.modify(1, 8) == out(Status.ACCEPTED, 1, 8)
    assert l2(eng) == {"bids": [(100, 13, 2)], "asks": []}
    assert eng.submit(3, SELL, LIMIT, 100, 6) == out(Status.FILLED, 3, 0, 6, 2)
    assert fills(eng) == [(3, 2, 100, 5), (3, 1, 100, 1)]


def test_qty_is_the_new_open_qty_after_a_partial_fill(engine_name):
    eng = book_with(engine_name, asks=[(100, 5, 1), (100, 5, 2)])
    eng.submit(3, BUY, IOC, 100, 2)  # id 3; order 1 has 3 open
    assert eng.modify(1, 3) == out(Status.ACCEPTED, 1, 3)  # not an increase: keeps its place
    assert eng.modify(1, 4) == out(Status.ACCEPTED, 1, 4)  # an increase: to the tail
    assert l2(eng) == {"bids": [], "asks": [(100, 9, 2)]}
    eng.submit(3, BUY, IOC, 100, 6)
    assert fills(eng)[1:] == [(4, 2, 100, 5), (4, 1, 100, 1)]


def test_price_change_re_enters_with_the_same_id(engine_name):
    eng = book_with(engine_name, bids=[(100, 5, 1), (99, 5, 2)])
    assert eng.modify(1, 5, 98) == out(Status.ACCEPTED, 1, 5)
    assert l2(eng) == {"bids": [(99, 5, 1), (98, 5, 1)], "asks": []}
    assert eng.cancel(1) == out(Status.CANCELLED, 1, 0, removed=1)


def test_price_change_goes_to_the_tail_of_the_new_level(engine_name):
    eng = book_with(engine_name, bids=[(100, 5, 1), (99, 5, 2), (99, 5, 3)])
    assert eng.modify(1, 5, 99) == out(Status.ACCEPTED, 1, 5)
    assert l2(eng) == {"bids": [(99, 15, 3)], "asks": []}
    eng.submit(4, SELL, LIMIT, 99, 11)
    assert fills(eng) == [(4, 2, 99, 5), (4, 3, 99, 5), (4, 1, 99, 1)]


def test_price_change_may_trade_at_the_makers_price(engine_name):
    eng = book_with(engine_name, bids=[(100, 5, 1)], asks=[(102, 3, 2)])
    assert eng.modify(1, 5, 103) == out(Status.PARTIALLY_FILLED, 1, 2, 3, 1)
    assert fills(eng) == [(1, 2, 102, 3)]
    assert l2(eng) == {"bids": [(103, 2, 1)], "asks": []}
    assert eng.cancel(1) == out(Status.CANCELLED, 1, 0, removed=1)


def test_price_change_that_fills_completely(engine_name):
    eng = book_with(engine_name, asks=[(105, 4, 1), (106, 4, 2)])
    assert eng.modify(1, 3, 100) == out(Status.ACCEPTED, 1, 3)  # the ask moves down, no cross
    assert eng.submit(3, BUY, LIMIT, 99, 2) == out(Status.ACCEPTED, 3, 2)
    assert eng.modify(3, 2, 100) == out(Status.FILLED, 3, 0, 2, 1)
    assert fills(eng) == [(3, 1, 100, 2)]
    assert eng.cancel(3).status == Status.NOT_FOUND
    assert l2(eng) == {"bids": [], "asks": [(100, 1, 1), (106, 4, 1)]}


def test_modify_takes_no_id(engine_name):
    eng = book_with(engine_name, bids=[(100, 5, 1)])
    eng.modify(1, 2)
    eng.modify(1, 2, 90)
    eng.modify(1, 9)
    assert eng.submit(1, SELL, LIMIT, 105, 1) == out(Status.ACCEPTED, 2, 1)


@pytest.mark.parametrize("oid", [99, 0, -3])
def test_unknown_id(engine_name, oid):
    eng = book_with(engine_name, bids=[(100, 5, 1)])
    before = state(eng)
    assert eng.modify(oid, 3) == out(Status.NOT_FOUND, oid, 0, reason=Reason.UNKNOWN_ID)
    assert eng.modify(oid, 3, 101) == out(Status.NOT_FOUND, oid, 0, reason=Reason.UNKNOWN_ID)
    assert state(eng) == before


def test_dead_id_is_not_found(engine_name):
    eng = book_with(engine_name, bids=[(100, 5, 1)])
    eng.cancel(1)
    assert eng.modify(1, 3) == out(Status.NOT_FOUND, 1, 0, reason=Reason.UNKNOWN_ID)


def test_re_entry_meeting_its_own_order_under_cancel_taker(engine_name):
    # the re-entry's outcome is the modify's: the taker is cancelled, so the order is gone
    eng = book_with(engine_name, bids=[(100, 5, 1)], asks=[(102, 3, 1)],
                    stp=StpMode.CANCEL_TAKER)
    assert eng.modify(1, 5, 102) == out(Status.CANCELLED, 1, 5, reason=Reason.SELF_TRADE)
    assert l2(eng) == {"bids": [], "asks": [(102, 3, 1)]}
    assert eng.cancel(1).status == Status.NOT_FOUND

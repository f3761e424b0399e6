"""Cancel by id: CANCELLED with remaining 0 and removed 1 (the C++ seed's convention);
anything else is NOT_FOUND."""

from __future__ import annotations

import pytest
from conftest import BUY, IOC, LIMIT, SELL, book_with, fills, l2, out, state

from lob.semantics import Reason, Status


def not_found(oid: int):
    return out(Status.NOT_FOUND, oid, 0, reason=Reason.UNKNOWN_ID)


def test_cancel_a_resting_order(engine_name):
    eng = book_with(engine_name, bids=[(100, 5, 1), (100, 3, 2)], asks=[(101, 4, 1)])
    assert eng.cancel(1) == out(Status.CANCELLED, 1, 0, removed=1)
    assert l2(eng) == {"bids": [(100, 3, 1)], "asks": [(101, 4, 1)]}
    assert eng.cancel(3) == out(Status.CANCELLED, 3, 0, removed=1)
    assert l2(eng) == {"bids": [(100, 3, 1)], "asks": []}


def test_cancel_after_a_partial_fill_removes_the_open_qty(engine_name):
    eng = book_with(engine_name, asks=[(100, 5, 1)])
    assert eng.submit(2, BUY, IOC, 100, 2) == out(Status.FILLED, 2, 0, 2, 1)
    assert eng.cancel(1) == out(Status.CANCELLED, 1, 0, removed=1)
    assert l2(eng) == {"bids": [], "asks": []}


@pytest.mark.parametrize("oid", [99, 0, -1, 2**40])
def test_unknown_id(engine_name, oid):
    eng = book_with(engine_name, bids=[(100, 5, 1)])
    before = state(eng)
    assert eng.cancel(oid) == not_found(oid)
    assert state(eng) == before


def test_twice_then_not_found(engine_name):
    eng = book_with(engine_name, bids=[(100, 5, 1)])
    assert eng.cancel(1) == out(Status.CANCELLED, 1, 0, removed=1)
    assert eng.cancel(1) == not_found(1)


def test_filled_and_non_resting_ids_are_not_found(engine_name):
    eng = book_with(engine_name, asks=[(100, 2, 1)])
    assert eng.submit(2, BUY, LIMIT, 100, 2).status == Status.FILLED  # id 2 fills id 1
    assert eng.submit(2, BUY, IOC, 100, 2).status == Status.CANCELLED  # id 3, never rests
    for oid in (1, 2, 3):
        assert eng.cancel(oid) == not_found(oid)


def test_cancel_takes_no_id(engine_name):
    eng = book_with(engine_name, bids=[(100, 5, 1)])
    eng.cancel(1)
    eng.cancel(7)
    assert eng.submit(1, SELL, LIMIT, 105, 1) == out(Status.ACCEPTED, 2, 1)


def test_others_keep_their_fifo_order(engine_name):
    eng = book_with(engine_name, bids=[(100, 1, 1), (100, 1, 2), (100, 1, 3)])
    assert eng.cancel(2) == out(Status.CANCELLED, 2, 0, removed=1)
    assert l2(eng) == {"bids": [(100, 2, 2)], "asks": []}
    assert eng.submit(4, SELL, LIMIT, 100, 2) == out(Status.FILLED, 4, 0, 2, 2)
    assert fills(eng) == [(4, 1, 100, 1), (4, 3, 100, 1)]


def test_cancelling_the_best_level_moves_the_best_price(engine_name):
    eng = book_with(engine_name, asks=[(100, 1, 1), (103, 1, 1)])
    assert eng.cancel(1).status == Status.CANCELLED
    assert eng.submit(2, BUY, LIMIT, 102, 1) == out(Status.ACCEPTED, 3, 1)
    assert eng.submit(2, BUY, IOC, 103, 1) == out(Status.FILLED, 4, 0, 1, 1)
    assert fills(eng) == [(4, 2, 103, 1)]

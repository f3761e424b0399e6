"""POST_ONLY orders: rest like a LIMIT, or are cancelled (WOULD_CROSS) if they would trade."""

from __future__ import annotations

import pytest
from conftest import BUY, LIMIT, POST_ONLY, SELL, book_with, fills, l2, out, state

import lob
from lob.semantics import Reason, Status, StpMode


def test_rests_when_not_crossing(engine_name):
    eng = book_with(engine_name, asks=[(101, 5, 1)])
    assert eng.submit(2, BUY, POST_ONLY, 100, 3) == out(Status.ACCEPTED, 2, 3)
    assert l2(eng) == {"bids": [(100, 3, 1)], "asks": [(101, 5, 1)]}


def test_rests_on_an_empty_book(engine_name):
    eng = lob.get_engine(engine_name)
    assert eng.submit(2, SELL, POST_ONLY, 100, 3) == out(Status.ACCEPTED, 1, 3)
    assert l2(eng) == {"bids": [], "asks": [(100, 3, 1)]}


@pytest.mark.parametrize("price", [101, 105])
def test_buy_at_or_through_best_ask_would_cross(engine_name, price):
    eng = book_with(engine_name, bids=[(99, 1, 1)], asks=[(101, 5, 1)])
    before = state(eng)
    assert eng.submit(2, BUY, POST_ONLY, price, 3) == out(Status.CANCELLED, 3, 3,
                                                          reason=Reason.WOULD_CROSS)
    assert state(eng) == before
    assert fills(eng) == []
    assert eng.submit(2, BUY, LIMIT, 90, 1) == out(Status.ACCEPTED, 4, 1)  # id 3 was taken


def test_sell_side(engine_name):
    eng = book_with(engine_name, bids=[(100, 5, 1)])
    assert eng.submit(2, SELL, POST_ONLY, 100, 2) == out(Status.CANCELLED, 2, 2,
                                                         reason=Reason.WOULD_CROSS)
    assert eng.submit(2, SELL, POST_ONLY, 101, 2) == out(Status.ACCEPTED, 3, 2)
    assert l2(eng) == {"bids": [(100, 5, 1)], "asks": [(101, 2, 1)]}


def test_joins_the_tail_of_its_level(engine_name):
    eng = book_with(engine_name, bids=[(100, 2, 1)])
    assert eng.submit(2, BUY, POST_ONLY, 100, 3) == out(Status.ACCEPTED, 2, 3)
    assert l2(eng) == {"bids": [(100, 5, 2)], "asks": []}
    assert eng.submit(3, SELL, LIMIT, 100, 3) == out(Status.FILLED, 3, 0, 3, 2)
    assert fills(eng) == [(3, 1, 100, 2), (3, 2, 100, 1)]


@pytest.mark.parametrize("stp", list(StpMode))
def test_own_best_order_still_counts_as_crossing(engine_name, stp):
    # post-only never trades, so STP never applies: crossing its own order is a would-cross
    eng = book_with(engine_name, asks=[(100, 5, 1)], stp=stp)
    before = state(eng)
    assert eng.submit(1, BUY, POST_ONLY, 100, 1) == out(Status.CANCELLED, 2, 1,
                                                        reason=Reason.WOULD_CROSS)
    assert state(eng) == before

"""MARKET orders by quantity: cross every price, price field ignored, leftover dropped."""

from __future__ import annotations

import pytest
from conftest import BUY, LIMIT, MARKET, SELL, book_with, fills, l2, out

import lob
from lob.semantics import BookConfig, Reason, Status


def test_walks_every_level_whatever_the_price(engine_name):
    eng = book_with(engine_name, asks=[(100, 2, 1), (150, 3, 1), (9000, 1, 1)])
    assert eng.submit(2, BUY, MARKET, 0, 4) == out(Status.FILLED, 4, 0, 4, 2)
    assert fills(eng) == [(4, 1, 100, 2), (4, 2, 150, 2)]
    assert l2(eng) == {"bids": [], "asks": [(150, 1, 1), (9000, 1, 1)]}


def test_leftover_is_dropped(engine_name):
    eng = book_with(engine_name, asks=[(100, 2, 1)])
    assert eng.submit(2, BUY, MARKET, 0, 5) == out(Status.PARTIALLY_FILLED, 2, 3, 2, 1)
    assert l2(eng) == {"bids": [], "asks": []}
    assert eng.cancel(2).status == Status.NOT_FOUND


def test_empty_book_cancels_and_consumes_an_id(engine_name):
    eng = lob.get_engine(engine_name)
    assert eng.submit(1, SELL, MARKET, 0, 5) == out(Status.CANCELLED, 1, 5,
                                                    reason=Reason.NO_LIQUIDITY)
    assert eng.submit(1, SELL, LIMIT, 100, 5) == out(Status.ACCEPTED, 2, 5)


def test_sell_takes_highest_bids_first_fifo(engine_name):
    eng = book_with(engine_name, bids=[(5, 9, 1), (100, 1, 2), (100, 1, 3), (50, 2, 4)])
    assert eng.submit(5, SELL, MARKET, 0, 3) == out(Status.FILLED, 5, 0, 3, 3)
    assert fills(eng) == [(5, 2, 100, 1), (5, 3, 100, 1), (5, 4, 50, 1)]
    assert l2(eng) == {"bids": [(50, 1, 1), (5, 9, 1)], "asks": []}


@pytest.mark.parametrize("price", [0, -5, 100, 10**9])
def test_price_field_is_ignored_even_outside_the_band(engine_name, price):
    eng = lob.get_engine(engine_name, BookConfig(90, 110))
    assert eng.submit(1, SELL, LIMIT, 110, 2) == out(Status.ACCEPTED, 1, 2)
    assert eng.submit(2, BUY, MARKET, price, 1) == out(Status.FILLED, 2, 0, 1, 1)
    assert l2(eng) == {"bids": [], "asks": [(110, 1, 1)]}

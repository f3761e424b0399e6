"""IOC orders: trade what crosses now, drop the leftover, never rest."""

from __future__ import annotations

from conftest import BUY, IOC, LIMIT, SELL, book_with, fills, l2, out

import lob
from lob.semantics import Reason, Status


def test_empty_book_cancels_and_consumes_an_id(engine_name):
    eng = lob.get_engine(engine_name)
    assert eng.submit(1, BUY, IOC, 100, 5) == out(Status.CANCELLED, 1, 5,
                                                  reason=Reason.NO_LIQUIDITY)
    assert l2(eng) == {"bids": [], "asks": []}
    assert eng.submit(1, BUY, LIMIT, 100, 1) == out(Status.ACCEPTED, 2, 1)


def test_not_crossing_cancels_and_leaves_the_book(engine_name):
    eng = book_with(engine_name, asks=[(101, 3, 1)])
    assert eng.submit(2, BUY, IOC, 100, 2) == out(Status.CANCELLED, 2, 2,
                                                  reason=Reason.NO_LIQUIDITY)
    assert l2(eng) == {"bids": [], "asks": [(101, 3, 1)]}
    assert fills(eng) == []


def test_partial_fill_drops_the_leftover(engine_name):
    eng = book_with(engine_name, asks=[(100, 3, 1), (102, 4, 1)])
    assert eng.submit(2, BUY, IOC, 101, 5) == out(Status.PARTIALLY_FILLED, 3, 2, 3, 1)
    assert fills(eng) == [(3, 1, 100, 3)]
    assert l2(eng) == {"bids": [], "asks": [(102, 4, 1)]}
    assert eng.cancel(3).status == Status.NOT_FOUND


def test_full_fill_walking_levels(engine_name):
    eng = book_with(engine_name, asks=[(100, 3, 1), (101, 3, 2)])
    assert eng.submit(3, BUY, IOC, 101, 4) == out(Status.FILLED, 3, 0, 4, 2)
    assert fills(eng) == [(3, 1, 100, 3), (3, 2, 101, 1)]
    assert l2(eng) == {"bids": [], "asks": [(101, 2, 1)]}


def test_sell_ioc_fifo_and_maker_price(engine_name):
    eng = book_with(engine_name, bids=[(100, 1, 1), (100, 2, 2), (99, 5, 3)])
    assert eng.submit(4, SELL, IOC, 90, 4) == out(Status.FILLED, 4, 0, 4, 3)
    assert fills(eng) == [(4, 1, 100, 1), (4, 2, 100, 2), (4, 3, 99, 1)]
    assert l2(eng) == {"bids": [(99, 4, 1)], "asks": []}

"""Market orders by quote amount: per level at most ``left // price`` lots; stop at p > left."""

from __future__ import annotations

from conftest import BUY, LIMIT, NOTIONAL, SELL, book_with, fills, l2, out

import lob
from lob.semantics import Reason, Status


def test_stops_when_the_next_price_exceeds_what_is_left(engine_name):
    eng = book_with(engine_name, asks=[(100, 5, 1), (101, 5, 1)])
    # 350 // 100 = 3 lots, 50 left, the next price (100) is dearer than 50: done
    assert eng.submit(2, BUY, NOTIONAL, 0, 350) == out(Status.FILLED, 3, 50, 3, 1)
    assert fills(eng) == [(3, 1, 100, 3)]
    assert l2(eng) == {"bids": [], "asks": [(100, 2, 1), (101, 5, 1)]}


def test_walks_levels_spending_the_budget(engine_name):
    eng = book_with(engine_name, asks=[(100, 2, 1), (101, 5, 1)])
    # 2 lots at 100 (250 left), 250 // 101 = 2 lots (48 left), 101 > 48: done
    assert eng.submit(2, BUY, NOTIONAL, 0, 450) == out(Status.FILLED, 3, 48, 4, 2)
    assert fills(eng) == [(3, 1, 100, 2), (3, 2, 101, 2)]
    assert l2(eng) == {"bids": [], "asks": [(101, 3, 1)]}


def test_exact_spend(engine_name):
    eng = book_with(engine_name, asks=[(100, 5, 1)])
    assert eng.submit(2, BUY, NOTIONAL, 0, 300) == out(Status.FILLED, 2, 0, 3, 1)
    assert l2(eng) == {"bids": [], "asks": [(100, 2, 1)]}


def test_book_runs_out_before_the_budget(engine_name):
    eng = book_with(engine_name, asks=[(100, 2, 1)])
    assert eng.submit(2, BUY, NOTIONAL, 0, 1000) == out(Status.PARTIALLY_FILLED, 2, 800, 2, 1)
    assert l2(eng) == {"bids": [], "asks": []}


def test_first_level_too_dear_trades_nothing(engine_name):
    eng = book_with(engine_name, asks=[(100, 5, 1)])
    assert eng.submit(2, BUY, NOTIONAL, 0, 99) == out(Status.CANCELLED, 2, 99,
                                                      reason=Reason.NO_LIQUIDITY)
    assert l2(eng) == {"bids": [], "asks": [(100, 5, 1)]}


def test_empty_book(engine_name):
    eng = lob.get_engine(engine_name)
    assert eng.submit(2, BUY, NOTIONAL, 0, 500) == out(Status.CANCELLED, 1, 500,
                                                       reason=Reason.NO_LIQUIDITY)
    assert eng.submit(2, BUY, LIMIT, 10, 1).id == 2


def test_several_orders_in_one_level(engine_name):
    eng = book_with(engine_name, asks=[(100, 1, 1), (100, 1, 2), (100, 5, 1)])
    assert eng.submit(3, BUY, NOTIONAL, 0, 250) == out(Status.FILLED, 4, 50, 2, 2)
    assert fills(eng) == [(4, 1, 100, 1), (4, 2, 100, 1)]
    assert l2(eng) == {"bids": [], "asks": [(100, 5, 1)]}


def test_sell_by_amount_walks_bids_down(engine_name):
    eng = book_with(engine_name, bids=[(100, 5, 1), (90, 5, 1)])
    # 5 lots at 100 (90 left), 90 // 90 = 1 lot: nothing left
    assert eng.submit(2, SELL, NOTIONAL, 0, 590) == out(Status.FILLED, 3, 0, 6, 2)
    assert fills(eng) == [(3, 1, 100, 5), (3, 2, 90, 1)]
    assert l2(eng) == {"bids": [(90, 4, 1)], "asks": []}


def test_cheaper_later_level_is_not_reached_past_a_dear_one(engine_name):
    # for a sell the levels get cheaper: 150 // 100 = 1 lot, 50 left, 100 > 50 stops it
    # even though later levels are not visited at all
    eng = book_with(engine_name, bids=[(100, 5, 1), (40, 5, 1)])
    assert eng.submit(2, SELL, NOTIONAL, 0, 150) == out(Status.FILLED, 3, 50, 1, 1)
    assert l2(eng) == {"bids": [(100, 4, 1), (40, 5, 1)], "asks": []}

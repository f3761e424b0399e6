"""LIMIT (good-till-cancel) orders: priority, maker price, walking levels, resting leftovers."""

from __future__ import annotations

from conftest import BUY, LIMIT, SELL, book_with, fills, l2, out

import lob
from lob.semantics import Status


def test_rests_on_an_empty_book(engine_name):
    eng = lob.get_engine(engine_name)
    assert eng.submit(1, BUY, LIMIT, 100, 5) == out(Status.ACCEPTED, 1, 5)
    assert eng.submit(1, SELL, LIMIT, 101, 7) == out(Status.ACCEPTED, 2, 7)
    assert l2(eng) == {"bids": [(100, 5, 1)], "asks": [(101, 7, 1)]}
    assert fills(eng) == []


def test_non_crossing_order_rests_beside_the_other_side(engine_name):
    eng = book_with(engine_name, asks=[(101, 5, 1)])
    assert eng.submit(2, BUY, LIMIT, 100, 3) == out(Status.ACCEPTED, 2, 3)
    assert l2(eng) == {"bids": [(100, 3, 1)], "asks": [(101, 5, 1)]}
    assert fills(eng) == []


def test_fifo_within_a_level(engine_name):
    eng = book_with(engine_name, asks=[(101, 3, 1), (101, 4, 2)])
    assert eng.submit(3, BUY, LIMIT, 101, 5) == out(Status.FILLED, 3, 0, filled=5, fills=2)
    assert fills(eng) == [(3, 1, 101, 3), (3, 2, 101, 2)]
    assert l2(eng) == {"bids": [], "asks": [(101, 2, 1)]}


def test_best_price_first_whatever_the_arrival_order(engine_name):
    eng = book_with(engine_name, asks=[(103, 5, 1), (101, 5, 1), (102, 5, 1)])
    assert eng.submit(2, BUY, LIMIT, 102, 7) == out(Status.FILLED, 4, 0, filled=7, fills=2)
    assert fills(eng) == [(4, 2, 101, 5), (4, 3, 102, 2)]
    assert l2(eng) == {"bids": [], "asks": [(102, 3, 1), (103, 5, 1)]}


def test_bids_best_is_highest(engine_name):
    eng = book_with(engine_name, bids=[(98, 1, 1), (100, 1, 1), (99, 1, 1)])
    assert eng.submit(2, SELL, LIMIT, 98, 2) == out(Status.FILLED, 4, 0, filled=2, fills=2)
    assert fills(eng) == [(4, 2, 100, 1), (4, 3, 99, 1)]
    assert l2(eng) == {"bids": [(98, 1, 1)], "asks": []}


def test_fill_at_the_makers_price(engine_name):
    eng = book_with(engine_name, bids=[(100, 5, 1)])
    assert eng.submit(2, SELL, LIMIT, 95, 2) == out(Status.FILLED, 2, 0, filled=2, fills=1)
    assert fills(eng) == [(2, 1, 100, 2)]
    eng2 = book_with(engine_name, asks=[(100, 5, 1)])
    assert eng2.submit(2, BUY, LIMIT, 120, 2) == out(Status.FILLED, 2, 0, filled=2, fills=1)
    assert fills(eng2) == [(2, 1, 100, 2)]


def test_walks_several_levels_then_rests_the_leftover(engine_name):
    eng = book_with(engine_name, asks=[(100, 2, 1), (101, 3, 1), (102, 4, 1)])
    got = eng.submit(2, BUY, LIMIT, 101, 10)
    assert got == out(Status.PARTIALLY_FILLED, 4, 5, filled=5, fills=2)
    assert fills(eng) == [(4, 1, 100, 2), (4, 2, 101, 3)]
    assert l2(eng) == {"bids": [(101, 5, 1)], "asks": [(102, 4, 1)]}
    assert eng.cancel(4) == out(Status.CANCELLED, 4, 0, removed=1)


def test_sell_walks_bids_down(engine_name):
    eng = book_with(engine_name, bids=[(100, 2, 1), (99, 3, 1)])
    assert eng.submit(2, SELL, LIMIT, 99, 4) == out(Status.FILLED, 3, 0, filled=4, fills=2)
    assert fills(eng) == [(3, 1, 100, 2), (3, 2, 99, 2)]
    assert l2(eng) == {"bids": [(99, 1, 1)], "asks": []}


def test_partial_fill_of_a_maker_keeps_its_place(engine_name):
    eng = book_with(engine_name, asks=[(100, 5, 1), (100, 5, 2)])
    assert eng.submit(3, BUY, LIMIT, 100, 2) == out(Status.FILLED, 3, 0, filled=2, fills=1)
    assert eng.submit(3, BUY, LIMIT, 100, 4) == out(Status.FILLED, 4, 0, filled=4, fills=2)
    assert fills(eng) == [(3, 1, 100, 2), (4, 1, 100, 3), (4, 2, 100, 1)]
    assert l2(eng) == {"bids": [], "asks": [(100, 4, 1)]}


def test_leftover_joins_the_tail_of_its_level(engine_name):
    eng = book_with(engine_name, bids=[(100, 1, 1)], asks=[(101, 1, 2)])
    # crosses the 101 ask, then its leftover rests at 101 behind nobody ...
    assert eng.submit(3, BUY, LIMIT, 101, 3) == out(Status.PARTIALLY_FILLED, 3, 2, 1, 1)
    assert eng.submit(4, BUY, LIMIT, 101, 1) == out(Status.ACCEPTED, 4, 1)
    assert eng.submit(5, BUY, LIMIT, 100, 1) == out(Status.ACCEPTED, 5, 1)
    # ... and a seller meets 101 (ids 3 then 4) before 100 (ids 1 then 5)
    assert eng.submit(6, SELL, LIMIT, 100, 5) == out(Status.FILLED, 6, 0, 5, 4)
    assert fills(eng) == [(3, 2, 101, 1), (6, 3, 101, 2), (6, 4, 101, 1), (6, 1, 100, 1),
                          (6, 5, 100, 1)]
    assert l2(eng) == {"bids": [], "asks": []}


def test_exact_fill_empties_the_level(engine_name):
    eng = book_with(engine_name, asks=[(100, 3, 1), (105, 1, 1)])
    assert eng.submit(2, BUY, LIMIT, 100, 3) == out(Status.FILLED, 3, 0, filled=3, fills=1)
    assert l2(eng) == {"bids": [], "asks": [(105, 1, 1)]}
    # the emptied level no longer holds anything: a buy at 100 now rests
    assert eng.submit(2, BUY, LIMIT, 100, 1) == out(Status.ACCEPTED, 4, 1)


def test_prices_at_the_band_edges(engine_name):
    eng = book_with(engine_name, bids=[(1, 1, 1)], asks=[(10, 2, 1)], band=(1, 10))
    assert l2(eng) == {"bids": [(1, 1, 1)], "asks": [(10, 2, 1)]}
    assert eng.submit(2, SELL, LIMIT, 1, 2) == out(Status.PARTIALLY_FILLED, 3, 1, 1, 1)
    assert l2(eng) == {"bids": [], "asks": [(1, 1, 1), (10, 2, 1)]}
    assert eng.submit(2, BUY, LIMIT, 10, 4) == out(Status.PARTIALLY_FILLED, 4, 1, 3, 2)
    assert fills(eng) == [(3, 1, 1, 1), (4, 3, 1, 1), (4, 2, 10, 2)]
    assert l2(eng) == {"bids": [(10, 1, 1)], "asks": []}


def test_snapshot_depth_limits_levels(engine_name):
    eng = book_with(engine_name, bids=[(100, 1, 1), (99, 2, 1), (98, 3, 1)],
                    asks=[(101, 4, 1), (102, 5, 1), (103, 6, 1)])
    assert l2(eng, 2) == {"bids": [(100, 1, 1), (99, 2, 1)], "asks": [(101, 4, 1), (102, 5, 1)]}

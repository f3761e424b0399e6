"""Mass cancel: all, one side, one owner, a price range (both sides); id 0, ``removed`` counts."""

from __future__ import annotations

import pytest
from conftest import BUY, LIMIT, SELL, book_with, fills, l2, out

import lob
from lob.semantics import Scope, Status

# ids 1-3 bids, 4-6 asks; owners alternate 1, 2, 1 / 2, 1, 2
BIDS = [(100, 1, 1), (99, 2, 2), (98, 3, 1)]
ASKS = [(101, 4, 2), (102, 5, 1), (103, 6, 2)]
ALL_BIDS = [(100, 1, 1), (99, 2, 1), (98, 3, 1)]
ALL_ASKS = [(101, 4, 1), (102, 5, 1), (103, 6, 1)]

CASES = {
    "all": (dict(scope=Scope.ALL), 6, [], []),
    "side_buy": (dict(scope=Scope.SIDE, side=BUY), 3, [], ALL_ASKS),
    "side_sell": (dict(scope=Scope.SIDE, side=SELL), 3, ALL_BIDS, []),
    "owner_1": (dict(scope=Scope.OWNER, owner=1), 3, [(99, 2, 1)], [(101, 4, 1), (103, 6, 1)]),
    "owner_2": (dict(scope=Scope.OWNER, owner=2), 3, [(100, 1, 1), (98, 3, 1)], [(102, 5, 1)]),
    "range_99_101": (dict(scope=Scope.PRICE_RANGE, price_lo=99, price_hi=101), 3,
                     [(98, 3, 1)], [(102, 5, 1), (103, 6, 1)]),
    "range_one_price": (dict(scope=Scope.PRICE_RANGE, price_lo=102, price_hi=102), 1,
                        ALL_BIDS, [(101, 4, 1), (103, 6, 1)]),
    "range_everything": (dict(scope=Scope.PRICE_RANGE, price_lo=1, price_hi=10_000), 6, [], []),
    "range_nothing": (dict(scope=Scope.PRICE_RANGE, price_lo=200, price_hi=300), 0,
                      ALL_BIDS, ALL_ASKS),
    "owner_nothing": (dict(scope=Scope.OWNER, owner=7), 0, ALL_BIDS, ALL_ASKS),
}


@pytest.mark.parametrize("case", list(CASES))
def test_scope(engine_name, case):
    kwargs, removed, bids, asks = CASES[case]
    eng = book_with(engine_name, bids=BIDS, asks=ASKS)
    kwargs = dict(kwargs)
    assert eng.mass_cancel(kwargs.pop("scope"), **kwargs) == out(Status.CANCELLED, 0, 0,
                                                                 removed=removed)
    assert l2(eng) == {"bids": bids, "asks": asks}
    # exactly the removed orders are gone: the others still cancel one by one
    alive = sum(eng.cancel(i).status == Status.CANCELLED for i in range(1, 7))
    assert alive == 6 - removed


def test_empty_book(engine_name):
    eng = lob.get_engine(engine_name)
    assert eng.mass_cancel(Scope.ALL) == out(Status.CANCELLED, 0, 0, removed=0)


def test_takes_no_id(engine_name):
    eng = book_with(engine_name, bids=BIDS, asks=ASKS)
    eng.mass_cancel(Scope.OWNER, owner=1)
    eng.mass_cancel(Scope.ALL)
    assert eng.submit(1, BUY, LIMIT, 100, 1) == out(Status.ACCEPTED, 7, 1)


def test_survivors_keep_fifo(engine_name):
    eng = book_with(engine_name, bids=[(100, 1, 1), (100, 1, 2), (100, 1, 1), (100, 1, 2)])
    assert eng.mass_cancel(Scope.OWNER, owner=1) == out(Status.CANCELLED, 0, 0, removed=2)
    assert eng.submit(3, SELL, LIMIT, 100, 2) == out(Status.FILLED, 5, 0, 2, 2)
    assert fills(eng) == [(5, 2, 100, 1), (5, 4, 100, 1)]


def test_book_works_after_cancel_all(engine_name):
    eng = book_with(engine_name, bids=BIDS, asks=ASKS)
    eng.mass_cancel(Scope.ALL)
    assert eng.submit(1, BUY, LIMIT, 103, 2) == out(Status.ACCEPTED, 7, 2)
    assert eng.submit(2, SELL, LIMIT, 98, 1) == out(Status.FILLED, 8, 0, 1, 1)
    assert fills(eng) == [(8, 7, 103, 1)]
    assert l2(eng) == {"bids": [(103, 1, 1)], "asks": []}

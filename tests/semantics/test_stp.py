"""Self-trade prevention: NONE, CANCEL_MAKER, CANCEL_TAKER, CANCEL_BOTH, for every order type."""

from __future__ import annotations

import pytest
from conftest import BUY, IOC, LIMIT, MARKET, NOTIONAL, SELL, book_with, fills, l2, out

from lob.semantics import Reason, Status, StpMode

P, C, ST = Status.PARTIALLY_FILLED, Status.CANCELLED, Reason.SELF_TRADE

# asks: id 1 (100, 2, owner 2), id 2 (100, 3, owner 1), id 3 (101, 4, owner 2);
# owner 1 buys LIMIT 101 qty 7 (id 4)
WALK = {
    StpMode.NONE: (out(Status.FILLED, 4, 0, 7, 3),
                   [(4, 1, 100, 2), (4, 2, 100, 3), (4, 3, 101, 2)], [], [(101, 2, 1)]),
    StpMode.CANCEL_MAKER: (out(P, 4, 1, 6, 2, removed=1),
                           [(4, 1, 100, 2), (4, 3, 101, 4)], [(101, 1, 1)], []),
    StpMode.CANCEL_TAKER: (out(P, 4, 5, 2, 1, reason=ST),
                           [(4, 1, 100, 2)], [], [(100, 3, 1), (101, 4, 1)]),
    StpMode.CANCEL_BOTH: (out(P, 4, 5, 2, 1, removed=1, reason=ST),
                          [(4, 1, 100, 2)], [], [(101, 4, 1)]),
}


@pytest.mark.parametrize("stp", list(StpMode), ids=[m.name for m in StpMode])
def test_limit_walk_meets_own_order_mid_level(engine_name, stp):
    want, want_fills, bids, asks = WALK[stp]
    eng = book_with(engine_name, asks=[(100, 2, 2), (100, 3, 1), (101, 4, 2)], stp=stp)
    assert eng.submit(1, BUY, LIMIT, 101, 7) == want
    assert fills(eng) == want_fills
    assert l2(eng) == {"bids": bids, "asks": asks}


# asks: id 1 (100, 3, owner 1), id 2 (100, 2, owner 2); owner 1 buys LIMIT 100 qty 2 (id 3)
TOP = {
    StpMode.NONE: (out(Status.FILLED, 3, 0, 2, 1), [(3, 1, 100, 2)], [(100, 3, 2)]),
    StpMode.CANCEL_MAKER: (out(Status.FILLED, 3, 0, 2, 1, removed=1), [(3, 2, 100, 2)], []),
    StpMode.CANCEL_TAKER: (out(C, 3, 2, reason=ST), [], [(100, 5, 2)]),
    StpMode.CANCEL_BOTH: (out(C, 3, 2, removed=1, reason=ST), [], [(100, 2, 1)]),
}


@pytest.mark.parametrize("stp", list(StpMode), ids=[m.name for m in StpMode])
def test_own_order_first_in_line(engine_name, stp):
    want, want_fills, asks = TOP[stp]
    eng = book_with(engine_name, asks=[(100, 3, 1), (100, 2, 2)], stp=stp)
    assert eng.submit(1, BUY, LIMIT, 100, 2) == want
    assert fills(eng) == want_fills
    assert l2(eng) == {"bids": [], "asks": asks}


@pytest.mark.parametrize("stp", list(StpMode), ids=[m.name for m in StpMode])
def test_other_owners_always_trade(engine_name, stp):
    eng = book_with(engine_name, asks=[(100, 2, 2), (100, 3, 1), (101, 4, 2)], stp=stp)
    assert eng.submit(3, BUY, LIMIT, 101, 9) == out(Status.FILLED, 4, 0, 9, 3)
    assert l2(eng) == {"bids": [], "asks": []}


def test_cancel_maker_sell_walk(engine_name):
    # bids: id 1 (100, 1, own), id 2 (99, 1, own), id 3 (99, 2, other), id 4 (98, 1, own)
    eng = book_with(engine_name, bids=[(100, 1, 1), (99, 1, 1), (99, 2, 2), (98, 1, 1)],
                    stp=StpMode.CANCEL_MAKER)
    assert eng.submit(1, SELL, LIMIT, 98, 5) == out(P, 5, 3, 2, 1, removed=3)
    assert fills(eng) == [(5, 3, 99, 2)]
    assert l2(eng) == {"bids": [], "asks": [(98, 3, 1)]}


@pytest.mark.parametrize("stp", list(StpMode), ids=[m.name for m in StpMode])
def test_ioc_and_market(engine_name, stp):
    want, want_fills, _, asks = WALK[stp]
    for otype in (IOC, MARKET):
        eng = book_with(engine_name, asks=[(100, 2, 2), (100, 3, 1), (101, 4, 2)], stp=stp)
        got = eng.submit(1, BUY, otype, 101, 7)
        if stp == StpMode.CANCEL_MAKER:  # the leftover lot is dropped, not rested
            assert got == out(P, 4, 1, 6, 2, removed=1)
        else:
            assert got == want
        assert fills(eng) == want_fills
        assert l2(eng) == {"bids": [], "asks": asks}


NOTIONAL_CASES = {
    # asks: id 1 (100, 2, own), id 2 (100, 2, other); owner 1 buys by amount 250 (id 3)
    StpMode.NONE: (out(Status.FILLED, 3, 50, 2, 1), [(3, 1, 100, 2)], [(100, 2, 1)]),
    # own removed, 2 lots from id 2, 50 left and the book is empty: partially filled
    StpMode.CANCEL_MAKER: (out(P, 3, 50, 2, 1, removed=1), [(3, 2, 100, 2)], []),
    StpMode.CANCEL_TAKER: (out(C, 3, 250, reason=ST), [], [(100, 4, 2)]),
    StpMode.CANCEL_BOTH: (out(C, 3, 250, removed=1, reason=ST), [], [(100, 2, 1)]),
}


@pytest.mark.parametrize("stp", list(StpMode), ids=[m.name for m in StpMode])
def test_notional(engine_name, stp):
    want, want_fills, asks = NOTIONAL_CASES[stp]
    eng = book_with(engine_name, asks=[(100, 2, 1), (100, 2, 2)], stp=stp)
    assert eng.submit(1, BUY, NOTIONAL, 0, 250) == want
    assert fills(eng) == want_fills
    assert l2(eng) == {"bids": [], "asks": asks}

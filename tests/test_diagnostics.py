"""Diagnostics measured on a hand-built stream, and cross-checked against plain replays."""

import numpy as np

import lob
from lob.semantics import BookConfig, Kind, OrderType, Scope, commands
from lob.workloads import Workload, build
from lob.workloads.diagnostics import diagnose, summary_text

MKT, MASS = int(OrderType.MARKET), int(Kind.MASS_CANCEL)


def _hand_workload() -> Workload:
    sell = dict(kind=0, otype=0, side=1, owner=1)
    buy = dict(kind=0, otype=0, side=0, owner=2)
    rows = [
        dict(sell, price=100, qty=5, timed=False),      # 0: id 1
        dict(sell, price=101, qty=5, timed=False),      # 1: id 2
        dict(buy, price=99, qty=3),                     # 2: id 3, rests, does not cross
        dict(buy, otype=MKT, qty=7),                    # 3: id 4, walks 100 and 101
        dict(buy, price=101, qty=3, owner=3),           # 4: id 5, takes the last 3: asks empty
        dict(buy, otype=MKT, qty=1),                    # 5: id 6, meets an empty ask side
        dict(kind=1, id=1),                             # 6: miss (id 1 filled)
        dict(kind=1, id=3),                             # 7: hit: bids empty
        dict(sell, price=200, qty=1, timed=False),      # 8
        dict(buy, price=50, qty=1, timed=False),        # 9
        dict(kind=MASS, otype=int(Scope.ALL)),          # 10: 2 resting
    ]
    return Workload("hand", "test", commands(rows), BookConfig(1, 1000), 0)


def test_hand_built_stream():
    d = diagnose(_hand_workload(), sample_every=1)
    assert (d["timed_submits"], d["cross_pct"]) == (4, 50.0)
    assert (d["timed_markets"], d["market_empty_pct"]) == (2, 50.0)
    assert (d["timed_cancels"], d["cancel_hit_pct"]) == (2, 50.0)
    assert (d["fills_mean"], d["fills_max"]) == (0.75, 2)
    assert (d["levels_walked_mean"], d["levels_walked_max"]) == (0.75, 2)
    assert (d["ask_empties_at"], d["ask_empties_at_timed"]) == (4, 2)
    assert (d["bid_empties_at"], d["bid_empties_at_timed"]) == (7, 5)
    assert d["resting_before_mass_cancel"] == [2]
    assert d["series"]["resting"].tolist() == [1, 2, 3, 2, 1, 1, 1, 0, 1, 2, 0]
    assert d["series"]["span"].tolist() == [1, 2, 3, 3, 1, 1, 1, 0, 1, 151, 0]
    assert d["resting_end"] == 0 and d["resting_max"] == 3
    assert "50.0% of 2" in summary_text(d)


def test_aggressive_walk_empties_where_the_lots_run_out():
    wl = build("aggressive_walk", scale=0.05)
    d = diagnose(wl)
    c = wl.commands
    lots = int(c["qty"][~c["timed"]].sum())
    k = int(np.argmax(np.cumsum(c["qty"][c["timed"]]) >= lots))  # the buy that takes the last
    assert d["ask_empties_at_timed"] == k
    n = wl.n_timed
    assert d["market_empty_pct"] == round(100.0 * (n - k - 1) / n, 2)


def test_mass_cancel_counts_match_removed():
    wl = build("mass_cancel_burst", bursts=4, burst_size=2000)
    d = diagnose(wl)
    run = lob.replay("reference", wl)
    mass = wl.commands["kind"] == MASS
    assert d["resting_before_mass_cancel"] == run.outcomes["removed"][mass].tolist()
    assert min(d["resting_before_mass_cancel"]) > 0

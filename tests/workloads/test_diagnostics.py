"""Diagnostics measured on a hand-built stream, and cross-checked against plain replays; the
book followed from a replay's outputs alone matches the reference engine's, command by
command, on fuzz streams with every command kind and every STP mode."""

import numpy as np
import pytest
from test_fuzz import PROFILES, gen_stream

import lob
from lob.semantics import BookConfig, Kind, OrderType, Scope, StpMode, commands
from lob.workloads import Workload, build
from lob.workloads.diagnostics import (
    BookShape,
    diagnose,
    follow,
    levels_walked,
    stream_diagnostics,
    summary_text,
)

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


@pytest.mark.parametrize("stp", list(StpMode), ids=lambda m: m.name)
@pytest.mark.parametrize("profile", ["narrow", "wide"])
def test_the_followed_book_is_the_reference_book_after_every_command(profile, stp):
    lo, hi, window, unit, _, _ = PROFILES[profile]
    cmds = gen_stream(7 + int(stp), 800, lo, hi, window, unit)
    assert set(cmds["kind"].tolist()) >= {int(k) for k in Kind}
    cfg = BookConfig(lo, hi, stp)
    run = lob.get_engine("reference", cfg).replay(cmds)
    eng = lob.get_engine("reference", cfg)
    for _, cmd, _, _, book in follow(cmds, run.outcomes, run.fills):
        assert book.resting() == eng.resting()
        eng.step(*cmd)
    assert book.resting() == eng.resting()


def test_outputs_of_another_stream_are_refused():
    wl = _hand_workload()
    run = lob.replay("reference", wl)
    with pytest.raises(ValueError, match="not one replay's outputs"):
        list(follow(wl.commands, run.outcomes, run.fills[:-1]))
    book = BookShape()
    mass = (int(Kind.MASS_CANCEL), int(Scope.ALL), 0, 0, 0, 0, 0, 0)
    with pytest.raises(RuntimeError, match="mass cancel removed 2 orders"):
        book.apply(mass, (3, 0, 0, 0, 0, 0, 2))


def test_any_engine_gives_the_same_diagnostics():
    wl = build("stp_sweep", scale=0.01)
    a = diagnose(wl, sample_every=7)
    b = diagnose(wl, sample_every=7, run=lob.replay("v2@numba", wl))
    assert a.pop("series").equals(b.pop("series")) and a == b


# --- the vectorised regime diagnostics (the claims' regime checks) agree with diagnose ----

@pytest.mark.parametrize("workload", ["aggressive_walk", "thin_book_sweep", "mass_cancel_burst",
                                      "stp_sweep", "cancel_only", "cpp_comprehensive"])
def test_stream_diagnostics_agree_with_the_reference_replay(workload):
    wl = lob.workload(workload, scale=0.002)
    r = lob.replay("v3", wl)
    a = stream_diagnostics(wl.commands, r.outcomes, r.fills)
    d = diagnose(wl, sample_every=1)
    for k in ("market_empty_pct", "cancel_hit_pct", "resting_max", "resting_end"):
        assert a[k] == d[k], k
    assert a["resting_mean"] == pytest.approx(d["resting_mean"])
    assert a["count"] == d["timed"] and a["commands"] == d["commands"]
    mb = d["resting_before_mass_cancel"]
    assert a["resting_before_mass_cancel_mean"] == (pytest.approx(sum(mb) / len(mb)) if mb
                                                    else None)
    lw = levels_walked(wl.commands, r.outcomes, r.fills)
    c = wl.commands
    m = c["timed"] & (c["kind"] == lob.Kind.SUBMIT) & (r.outcomes["status"] != lob.Status.REJECTED)
    if m.any():  # (no timed submit in cancel_only or mass_cancel_burst)
        assert round(float(lw[m].mean()), 3) == d["levels_walked_mean"]
        assert int(lw[m].max()) == d["levels_walked_max"]

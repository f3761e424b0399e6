"""lob.studies.tail_mechanisms on synthetic captures: the chain check, each step call, each
attribution call (supported / not supported / not decidable, for a credited mechanism and for
the scenario's own work), the table's sentences, and the procedure with stand-in captures."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from lob.studies import tail_mechanisms as tm

CHAIN = ["base", "+a", "+b"]
STEPS = [{"engine": "base", "parent": None, "toggle": None, "value": None},
         {"engine": "+a", "parent": "base", "toggle": "orders", "value": "heap"},
         {"engine": "+b", "parent": "+a", "toggle": "index", "value": "sharded"}]


def durations(p50: float, p99: float, n: int = 2000) -> np.ndarray:
    """n durations whose p50 is p50 and whose p99 is p99 (and p99.99 unsupported)."""
    k = n * 98 // 100
    return np.r_[np.full(k, p50), np.full(n - k, p99)]


def caps(*ratios: float, p50: float = 100.0) -> list[dict]:
    return [tm.capture_stats(durations(p50, p50 * r)) for r in ratios]


def mech(cells: dict, steps=STEPS, scenarios=None) -> dict:
    return {"engines": CHAIN, "scenarios": scenarios or list(cells), "scale": 0.1,
            "captures": 5, "steps": steps, "cells": cells, "skipped": []}


NARROW = (3.0, 3.1, 3.2, 3.3, 3.4)
NARROW2 = (3.1, 3.2, 3.3, 3.3, 3.5)
WIDE = (9.0, 9.5, 10.0, 10.5, 11.0)
ABOVE = (3.3, 3.45, 3.6, 3.8, 4.0)  # median above NARROW's top, interval overlapping it
HIGHER = (3.3, 3.35, 3.4, 6.0, 9.0)  # median inside NARROW's interval, NARROW's median not
LOWER = (1.0, 1.1, 1.2, 1.3, 1.4)  # wholly below NARROW


def test_capture_stats_supports_only_what_the_count_does():
    s = tm.capture_stats(durations(100, 500))
    assert s["count"] == 2000 and s["p50"] == 100 and s["p99"] == 500
    assert s["p99/p50"] == 5.0
    assert s["p99.99"] is None and s["p99.99/p50"] is None  # 2,000 < 100,000 samples
    assert tm.capture_stats(np.full(50, 7.0))["p99"] is None


@pytest.mark.parametrize("child,call", [(WIDE, "widens"), (NARROW2, "no widening"),
                                        (LOWER, "no widening"), (ABOVE, "undecided"),
                                        (HIGHER, "undecided")])
def test_step_call(child, call):
    p = tm._summary(caps(*NARROW))
    c = tm._summary(caps(*child))
    assert tm.step_call(p, c, "p99/p50") == call


def test_step_call_without_intervals_is_undecided():
    p = tm._summary(caps(3.0, 3.1))  # two captures: no 90% interval
    c = tm._summary(caps(*WIDE))
    assert tm.step_call(p, c, "p99/p50") == "undecided"
    assert tm.step_call(c, c, "p99.99/p50") == "undecided"  # unsupported percentile


def hyp(credits, scenario="s"):
    return tm.Attribution(scenario, "p99/p50", credits, f"h{credits}", "quote")


@pytest.mark.parametrize("a,b,credits,call", [
    (WIDE, NARROW2, ("orders",), "supported"),         # the credited step widens
    (NARROW2, WIDE, ("orders",), "not supported"),     # another step does, not the credited
    (ABOVE, NARROW2, ("orders",), "not decidable"),    # the credited step is undecided
    (NARROW2, WIDE, ("index",), "supported"),
    (NARROW2, NARROW2, ("orders", "index"), "not supported"),
    (NARROW2, NARROW2, (), "supported"),               # own work: no step widens
    (WIDE, WIDE, (), "not supported"),                 # own work, but a step widens
    (ABOVE, NARROW2, (), "not decidable"),
    (NARROW2, NARROW2, ("levels",), "not decidable"),  # no step adds the credited toggle
])
def test_attribution_calls(a, b, credits, call):
    # the base's tail is NARROW; +a takes it to `a`, then +b to `b`
    cells = {"s": {"base": caps(*NARROW), "+a": caps(*a), "+b": caps(*b)}}
    got = tm.attributions(mech(cells), [hyp(credits)])[0]
    assert got["call"] == call, got["evidence"]
    assert got["quote"] == "quote"


def test_an_unmeasured_scenario_is_not_decidable():
    got = tm.attributions(mech({"s": {"base": caps(*NARROW)}}), [hyp(("orders",), "t")])[0]
    assert got["call"] == "not decidable"
    assert got["evidence"] == "no step of the chain adds orders"


def test_tables_say_which_step_widens_and_quote_their_cells():
    cells = {"s": {"base": caps(*NARROW), "+a": caps(*WIDE), "+b": caps(*WIDE)}}
    m = mech(cells)
    t = tm.mechanism_table(m)
    assert [r["step"] for r in t.rows] == ["base", "+orders=heap", "+index=sharded"]
    assert t.value(("s", "+a"), "p99/p50 step") == "widens"
    assert t.value(("s", "+b"), "p99/p50 step") == "no widening"
    assert t.value(("s", "+a"), "p99/p50 low") == pytest.approx(9.0)
    assert t.sentences == ["s: p99 / p50 widens at +orders=heap."]
    a = tm.attribution_table(m, [hyp(("orders",))])
    assert a.sentences == ["h('orders',): supported (p99/p50: +orders=heap: 3.20 [3.00-3.40] "
                           "-> 10 [9.00-11] (widens))."]


def test_the_seed_attributions_quote_the_seed():
    assert {h.scenario for h in tm.ATTRIBUTIONS} == {"add_only", "cancel_only",
                                                     "aggressive_walk", "notional_walk"}
    for h in tm.ATTRIBUTIONS:
        assert h.ratio in tm.RATIOS and len(h.quote) > 40


def test_check_chain_wants_one_toggle_per_step():
    specs = {"a": SimpleNamespace(parent=None, toggles={"x": 1, "y": 1}),
             "b": SimpleNamespace(parent="a", toggles={"x": 2, "y": 1}),
             "c": SimpleNamespace(parent="b", toggles={"x": 3, "y": 2}),
             "d": SimpleNamespace(parent="a", toggles={"x": 2, "y": 2})}
    steps = tm.check_chain(["a", "b"], spec=specs.__getitem__)
    assert steps[1] == {"engine": "b", "parent": "a", "toggle": "x", "value": 2}
    with pytest.raises(ValueError, match="changes 2 toggles"):
        tm.check_chain(["b", "c"], spec=specs.__getitem__)
    with pytest.raises(ValueError, match="parent is 'a', not 'b'"):
        tm.check_chain(["b", "d"], spec=specs.__getitem__)
    with pytest.raises(ValueError, match="at least one"):
        tm.check_chain([], spec=specs.__getitem__)


def test_measure_mechanisms_interleaves_fresh_captures(monkeypatch):
    import lob.studies.declared as declared

    monkeypatch.setattr(declared, "refusal", lambda e, wl: "no" if e == "+b" and wl == "w2"
                        else None)
    seen = []

    def capture(e, wl):
        seen.append((wl, e))
        return {"durations": durations(100, 300 if e == "base" else 900)}

    built = []

    def workload(s, scale):
        built.append((s, scale))
        return s

    m = tm.measure_mechanisms(CHAIN, ["w1", "w2"], 0.5, 3, {"w2": 0.1}, steps=STEPS,
                              workload=workload, capture=capture)
    assert built == [("w1", 0.5), ("w2", 0.1)] and m["scales"] == {"w1": 0.5, "w2": 0.1}
    with pytest.raises(ValueError, match="not in `scenarios`"):
        tm.measure_mechanisms(CHAIN, ["w1"], 0.5, 3, {"w9": 0.1}, steps=STEPS,
                              workload=workload, capture=capture)
    assert m["skipped"] == [{"scenario": "w2", "engine": "+b", "reason": "no"}]
    assert len(seen) == 5 * 3 and seen[:5] != seen[5:10]  # rotated rounds
    assert [c["p99/p50"] for c in m["cells"]["w1"]["+a"]] == [9.0, 9.0, 9.0]
    assert "+b" not in m["cells"]["w2"]


def test_the_regime_engine_brings_its_mechanisms_to_the_tail_claims():
    """tail_analysis's claims carry the regime engine's mechanisms (from its toggles): what a
    tail claim crediting a mechanism is judged against."""
    from lob.engines import native
    from lob.studies import tail_analysis as ta

    if native.unavailable() is not None:
        pytest.skip("no C++ compiler: lob's C++ engines are not registered")
    assert ta._mechanisms("orderbook_rs@cpp") == [
        "per_order_heap_allocation", "skip_list_levels", "refcounted_level_objects",
        "sharded_locked_index"]
    assert ta._mechanisms("ladder@cpp") == [] and ta._mechanisms("v2@numba") == [
        "node_pool", "bitmap_best_price", "fok_early_exit"]
    assert ta._mechanisms("no-such-engine") is None

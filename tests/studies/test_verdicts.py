"""Verdicts that survive a rerun (issue 24): every verdict branch reached by a synthetic
measurement with a known answer, the clock floor on either side, matching mechanisms, single
points, per-part judging, and the verdicts claims.yaml's own definitions give."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from lob.studies import claims as C
from lob.studies.claims.model import step_mechanisms


def _claim(**kw) -> C.Claim:
    base = dict(id="x", seed="seed001", finding="f", machine="Apple M2 Pro", metric="a / b",
                workload="w", size="s", experiment="fok_scan_bottleneck", kind="ratio",
                detail="d", value=2.0, pivot=1.0, tolerance=0.25)
    base.update(kw)
    return C.Claim(**base)


def _m(v, lo=None, hi=None, **kw) -> dict:
    return C.measurement(v, ci=(lo, hi) if lo is not None else None, **kw)


# --- every branch ---------------------------------------------------------------------------

def test_every_verdict_branch_is_reached():
    c = _claim(regime=(C.RegimeCheck("count", min=1000),), mechanism=("fok_early_exit",),
               lob_mechanisms=("fok_early_exit",), seed_percentiles=(("p50", 500.0),),
               seed_tick_ns=41.667)
    ok = {"count": 5000}
    got = {
        "reproduced": C.judge(c, _m(2.1, 2.0, 2.2, diagnostics=ok)),
        "direction only": C.judge(c, _m(4.0, 3.8, 4.2, diagnostics=ok)),
        "inconclusive": C.judge(c, _m(2.4, 2.3, 2.7, diagnostics=ok)),
        "not reproduced": C.judge(c, _m(0.5, 0.4, 0.6, diagnostics=ok)),
        "not comparable": C.judge(c, _m(2.1, 2.0, 2.2, diagnostics={"count": 10})),
        "not comparable: at the clock floor": C.judge(c, _m(
            2.1, 2.0, 2.2, diagnostics=ok, clock={"tick_ns": 10.0, "percentiles": {"p50": 10}})),
        "not comparable: different mechanism": C.judge(c, _m(
            2.1, 2.0, 2.2, diagnostics=ok, mechanisms=["bitmap_best_price"])),
        "not measured": C.judge(c, None),
        "not measurable on this machine": C.judge(c, _m(
            2.1, 2.0, 2.2, diagnostics=ok, runs=5,
            aa={"low": 0.5, "high": 2.5, "n": 6, "what": "w"})),
        "inconclusive: single point": C.judge(c, _m(2.1, diagnostics=ok)),
    }
    sane = replace(c, sanity_check="guaranteed")
    got["sanity check: holds"] = C.judge(sane, _m(2.1, 2.0, 2.2, diagnostics=ok))
    got["sanity check: fails"] = C.judge(sane, _m(0.5, 0.4, 0.6, diagnostics=ok))
    assert {k: v.verdict for k, v in got.items()} == {k: k for k in got}
    assert set(got) == set(C.VERDICTS)


def test_an_interval_holding_the_pivot_is_inconclusive_unless_it_rules_out_the_seed():
    c = _claim()  # seed 2.0 +-25%: band 1.5-2.5, pivot 1
    wide = C.judge(c, _m(1.2, 0.8, 2.0))
    assert wide.verdict == "inconclusive" and "no direction either way" in wide.reason
    tight = C.judge(c, _m(1.0, 0.98, 1.03))  # no effect at all, measured precisely
    assert tight.verdict == "not reproduced" and "the seed's effect is ruled out" in tight.reason
    d = _claim(kind="direction", direction="up", value=None, tolerance=None)
    assert C.judge(d, _m(1.0, 0.98, 1.03)).verdict == "inconclusive"


def test_single_point_is_never_reproduced_or_not_reproduced():
    c = _claim()
    for v in (2.0, 0.5, 40.0):  # inside the band, the other side of the pivot, far outside
        verdict = C.judge(c, C.measurement(v))
        assert verdict.verdict == "inconclusive: single point"
        assert "neither reproduce nor refute" in verdict.reason
    d = _claim(kind="direction", direction="up", value=None, tolerance=None)
    assert C.judge(d, C.measurement(3.0)).verdict == "inconclusive: single point"
    # kinds whose figure is a count, not a noisy timing, are judged as they stand
    assert C.judge(_claim(kind="band", value=[15, 19]), C.measurement(16)).verdict == \
        "reproduced"
    assert C.judge(_claim(kind="exact", value={"a": 1}), C.measurement({"a": 1})).verdict == \
        "reproduced"


def test_clock_floor_on_the_seeds_side():
    tick = 1e3 / 24
    c = _claim(seed_percentiles=(("p50", 42.0), ("p99", 292.0)), seed_tick_ns=tick)
    v = C.judge(c, _m(2.1, 2.0, 2.2))
    assert v.verdict == "not comparable: at the clock floor"
    assert "the seed's p50 42 ns is 1.0 ticks" in v.reason and "p99 292 ns is 7.0" in v.reason
    above = _claim(seed_percentiles=(("p50", 917.0),), seed_tick_ns=tick)
    assert C.judge(above, _m(2.1, 2.0, 2.2)).verdict == "reproduced"


def test_clock_floor_on_lobs_side_uses_the_measured_tick():
    c = _claim()  # seed 2.0 +-25%: 1.5-2.5, pivot 1
    at = C.judge(c, _m(2.1, 2.0, 2.2, clock={"tick_ns": 41.667, "percentiles": {"p50": 83}}))
    assert at.verdict == "not comparable: at the clock floor"
    assert ("lob's interval 2-2.2 becomes 0.996-4.418 at its clock's ticks (p50 83 ns +-1 tick "
            "of 41.67 ns), which holds the pivot") in at.reason
    # a coarse tick that still decides: the interval its ticks allow is judged
    ten = C.judge(c, _m(2.0, 1.9, 2.1, clock={"tick_ns": 10.0, "percentiles": {"p50": 83}}))
    assert ten.verdict == "reproduced" and "at its clock's ticks" in ten.reason
    wide = C.judge(c, _m(2.3, 2.2, 2.4, clock={"tick_ns": 10.0, "percentiles": {"p50": 83}}))
    assert wide.verdict == "inconclusive" and "2.5" in wide.reason
    fine = C.judge(c, _m(2.1, 2.0, 2.2, clock={"tick_ns": 1.0, "percentiles": {"p50": 83}}))
    assert fine.verdict == "reproduced"
    # p99 / p50 recorded by name: the exact interval of the ratio, not the bound
    r = C.judge(c, _m(2.1, 2.0, 2.2, clock={"tick_ns": 10.0, "percentiles": {"p50": 100,
                                                                            "p99": 210}}))
    # 2.0 x (200 / 110) / (210 / 100) and 2.2 x (220 / 90) / (210 / 100)
    assert "taken to 1.732-2.561" in r.reason
    with pytest.raises(ValueError, match="tick_ns"):
        C.measurement(1.0, clock={"percentiles": {}})


def test_the_seeds_figure_is_the_interval_its_ticks_allow_on_both_sides_of_a_verdict():
    # a ratio whose seed interval lies on one side of the pivot is judged on that interval
    c = replace(_claim(value=10.0, pivot=1.0, tolerance=0.3), seed_bounds=(9.0, 11.0),
                seed_bounds_what="w")  # strict 7.7-11.7, loose 6.3-14.3
    assert C.judge(c, _m(10, 9, 11)).verdict == "reproduced"
    assert C.judge(c, _m(4, 3, 5)).verdict == "direction only"
    mid = C.judge(c, _m(7, 6.9, 7.5))
    assert mid.verdict == "inconclusive" and "known to 9-11" in mid.reason
    # one-sided: a one-tick p50 leaves p99 / p50 at least 229 and no upper end (cancel_only)
    one = replace(_claim(value=463.6, pivot=10.0, tolerance=0.5), seed_bounds=(229.4, math.inf),
                  seed_bounds_what="w")
    assert C.judge(one, _m(40, 35, 45)).verdict == "direction only"  # below 229 x 0.5
    assert C.judge(one, _m(5, 4, 6)).verdict == "not reproduced"  # the other side of 10
    up = C.judge(one, _m(300, 250, 350))
    assert up.verdict == "inconclusive" and "magnitude cannot be told" in up.reason
    # an interval that holds the pivot decides nothing: the clock floor (s001_v2_tail's 3-inf)
    nothing = replace(_claim(value=6.95, pivot=10.0, tolerance=0.5), seed_bounds=(2.99, math.inf),
                      seed_bounds_what="p50 42 ns +-1 tick")
    v = C.judge(nothing, _m(5, 4, 6))
    assert v.verdict == "not comparable: at the clock floor"
    assert "known only to 2.99-inf" in v.reason and "direction is not known" in v.reason


def test_clock_record_measures_the_tick_from_durations_or_a_histogram():
    import numpy as np
    from hdrh.histogram import HdrHistogram

    rng = np.random.default_rng(4)
    d = np.floor(rng.integers(1, 40, 5000) * (1e3 / 24)) + rng.integers(-1, 2, 5000)
    rec = C.clock_record(d, {"p50": float(np.median(d))})
    assert rec["tick_ns"] == pytest.approx(41.667, rel=0.005)
    h = HdrHistogram(1, 10**9, 3)
    for v in d.astype(int):
        h.record_value(int(v))
    assert C.clock_record(h, {})["tick_ns"] == pytest.approx(41.667, rel=0.005)
    # a lob figure whose p50 is two ticks of that clock is at the floor
    m = _m(2.1, 2.0, 2.2, clock=C.clock_record(d, {"p50": 83.0}))
    assert C.judge(_claim(), m).verdict == "not comparable: at the clock floor"


def test_mechanism_must_match():
    c = _claim(mechanism=("validation_hardening",), lob_mechanisms=("bitmap_best_price",))
    v = C.judge(c, _m(2.1, 2.0, 2.2))
    assert v.verdict == "not comparable: different mechanism"
    assert ("credits validation_hardening; what lob measured (engine or step) has "
            "bitmap_best_price") in v.reason
    # the measurement's own declaration wins over claims.yaml's
    assert C.judge(c, _m(2.1, 2.0, 2.2, mechanisms=["validation_hardening"])).verdict == \
        "reproduced"
    undeclared = _claim(mechanism=("fok_early_exit",))
    assert "not declared" in C.judge(undeclared, _m(2.1, 2.0, 2.2)).reason
    none = _claim(mechanism=("skip_list_levels", "concurrent_maps"), lob_mechanisms=())
    assert "has none of them" in C.judge(none, _m(2.1, 2.0, 2.2)).reason
    # any one mechanism the seed credits is enough
    some = _claim(mechanism=("node_pool", "bitmap_best_price"),
                  lob_mechanisms=("bitmap_best_price",))
    assert C.judge(some, _m(2.1, 2.0, 2.2)).verdict == "reproduced"


def test_regime_failure_wins_over_mechanism_and_floor():
    c = _claim(regime=(C.RegimeCheck("count", min=1000),), mechanism=("x",),
               lob_mechanisms=(), seed_percentiles=(("p50", 1.0),), seed_tick_ns=41.667)
    assert C.judge(c, _m(2.1, 2.0, 2.2, diagnostics={"count": 1})).verdict == "not comparable"


def test_engines_are_named_in_every_reason():
    c = _claim(seed_engine="the seed's engine", lob_engine_lacks="lob lacks X")
    for m in (_m(2.1, 2.0, 2.2), _m(2.1), _m(0.5, 0.4, 0.6)):
        assert C.judge(c, m).reason.endswith(
            "seed engine: the seed's engine; lob's engine: lob lacks X")


def test_parts_are_judged_each_on_their_own():
    c = _claim(seed_engine="E")
    same = C.measurement(2.1, parts={"a": _m(2.1, 2.0, 2.2), "b": _m(1.9, 1.8, 2.3)})
    v = C.judge(c, same)
    assert v.verdict == "reproduced" and v.reason.startswith("every part alike")
    assert v.reason.count("seed engine: E") == 1
    mixed = C.measurement(2.1, parts={"a": _m(2.1, 2.0, 2.2), "b": _m(0.5, 0.4, 0.6)})
    v = C.judge(c, mixed)
    assert v.verdict == "inconclusive" and "a: reproduced" in v.reason \
        and "b: not reproduced" in v.reason
    assert v.lob_figure.startswith("a: 2.10 [2-2.2")
    # a pooled point never stands in for the parts: each part without an interval is a
    # single point
    pts = C.measurement(2.1, parts={"a": _m(2.1), "b": _m(2.0)})
    assert C.judge(c, pts).verdict == "inconclusive: single point"


def test_tally_and_table_know_the_new_verdicts():
    vs = [C.judge(_claim(id="a"), _m(2.1)),
          C.judge(_claim(id="b", mechanism=("m",), lob_mechanisms=()), _m(2.1, 2.0, 2.2))]
    head = C.reproduction_markdown(vs).splitlines()[0]
    assert "1 inconclusive: single point" in head
    assert "1 not comparable: different mechanism" in head


# --- one rule per kind of claim (issue 41) ---------------------------------------------------

def test_a_claim_the_method_guarantees_is_a_sanity_check_counted_apart():
    c = _claim(id="s", sanity_check="the search guarantees it")
    held = C.judge(c, _m(2.1, 2.0, 2.2))
    assert held.verdict == "sanity check: holds"
    assert held.reason.endswith("A sanity check, not a finding: the search guarantees it")
    assert C.judge(c, _m(0.5, 0.4, 0.6)).verdict == "sanity check: fails"
    assert C.judge(c, _m(4.0, 3.8, 4.2)).verdict == "sanity check: fails"
    assert C.judge(c, _m(2.4, 2.3, 2.7)).verdict == "inconclusive"  # no call either way
    assert C.judge(c, None).verdict == "not measured"
    head = C.reproduction_markdown([held, C.judge(_claim(id="a"), _m(2.1, 2.0, 2.2))])
    head = head.splitlines()[0]
    assert head.startswith("1 claims: 1 reproduced; sanity checks (guaranteed by lob's method, "
                           "counted apart): 1 holds")
    # the saturation claim is one again: its rows sit at fixed multiples of a capacity
    # searched once (pipeline_latency.measure_sweep), so rows that keep up make it fail
    sat = _by()["s003_pipeline_saturation"]
    assert not sat.sanity_check
    assert C.judge(sat, _m(1.0, 0.85, 1.0, diagnostics={"count": 18})).verdict == \
        "reproduced"
    assert C.judge(sat, _m(0.1, 0.0, 0.3, diagnostics={"count": 18})).verdict == \
        "not reproduced"


def test_a_pure_python_ratio_of_an_allocator_step_is_not_the_seeds_mechanism():
    c = _claim(engine="v0, v1", mechanism=("node_pool", "bitmap_best_price"),
               lob_mechanisms=("node_pool", "bitmap_best_price"))
    v = C.judge(c, _m(2.1, 2.0, 2.2))
    assert v.verdict == "not comparable: different mechanism"
    assert "pure-Python engines, where node_pool is not the seed's mechanism" in v.reason
    # the same step compiled, or a measurement that says it is compiled: compared
    assert C.judge(replace(c, engine="v0+pool@numba, v1@numba"),
                   _m(2.1, 2.0, 2.2)).verdict == "reproduced"
    assert C.judge(c, _m(2.1, 2.0, 2.2, backend="compiled")).verdict == "reproduced"
    # a step with no memory mechanism is compared in pure Python too
    fok = _claim(engine="v1, v2", mechanism=("fok_early_exit",),
                 lob_mechanisms=("fok_early_exit",))
    assert C.judge(fok, _m(2.1, 2.0, 2.2)).verdict == "reproduced"
    with pytest.raises(ValueError, match="backend"):
        C.measurement(1.0, backend="pypy")
    lim = _by()["s001_v0_v1_limit_only"]
    if "@" not in lim.engine:  # pure Python as claims.yaml names it
        assert C.judge(lim, _good(lim)).verdict == "not comparable: different mechanism"


def test_every_tail_claim_is_judged_by_one_rule():
    tails = [c for c in C.load() if c.metric.startswith("p99 / p50")]
    assert len(tails) >= 9
    for c in tails:
        # one rule: p99 / p50 of two seed percentiles, judged on the interval their ticks
        # allow, pivot 10 (a wide tail), +-50%, from at least 1,000 of lob's samples
        assert c.kind == "ratio" and c.pivot == 10 and c.tolerance == 0.5, c.id
        assert c.seed_bounds is not None and c.seed_bounds[0] <= c.value <= c.seed_bounds[1]
        assert any(r.diagnostic == "count" and r.min == 1000 for r in c.regime), c.id
        # a figure set by a mechanism lob's engine lacks is never reproduced
        v = C.judge(c, _good(c))
        if c.mechanism and not set(c.mechanism) & set(c.lob_mechanisms or ()):
            assert v.verdict == "not comparable: different mechanism", c.id
    stp = C.judge(_by()["s000_tail_stp_sweep"], _good(_by()["s000_tail_stp_sweep"]))
    assert stp.verdict == "not comparable: different mechanism"
    assert "validation_hardening" in stp.reason


# --- claims.yaml's definitions --------------------------------------------------------------

def _by() -> dict[str, C.Claim]:
    return {c.id: c for c in C.load()}


def _good(c: C.Claim) -> dict:
    """A measurement that passes c's regime checks and sits on the seed's figure, with a
    tight interval: only the mechanism and the clock floor can stop it being reproduced."""
    diags = {}
    for r in c.regime:
        if r.equals is not C.model._UNSET:
            diags[r.diagnostic] = r.equals
        else:
            diags[r.diagnostic] = r.min if r.min is not None else r.max
    v = c.value if c.kind == "ratio" else 2.0
    return _m(v, v * 0.999, v * 1.001, diagnostics=diags)


def test_step_mechanisms_come_from_the_toggles():
    assert step_mechanisms("v1 -> v2") == ("fok_early_exit",)
    assert step_mechanisms("v0+pool@numba -> v1@numba") == ("bitmap_best_price",)
    assert step_mechanisms("v0 -> v1") == ("node_pool", "bitmap_best_price")
    with pytest.raises(ValueError, match="lob_step"):
        step_mechanisms("v1 -> v9")


def test_the_issues_mechanism_claims_are_not_comparable():
    by = _by()
    for cid in ("s000_mass_cancel_gain", "s000_stp_one_step", "s003_version_steps",
                *(f"s000_tail_{s}" for s in ("add_only", "cancel_only", "aggressive_walk",
                                              "notional_walk", "mixed_70_20_10",
                                              "thin_book_sweep"))):
        v = C.judge(by[cid], _good(by[cid]))
        assert v.verdict == "not comparable: different mechanism", (cid, v.reason)
        assert "seed engine:" in v.reason and "lob's engine:" in v.reason, cid
    # a tail claim's figure without the engine's mechanisms (claims.yaml declares none: the
    # regime engine's toggles say them, lob.studies.tail_analysis.claims)
    tail = C.judge(by["s000_tail_add_only"], _good(by["s000_tail_add_only"]))
    assert "refcounted_level_objects" in tail.reason and "not declared" in tail.reason
    assert 'the seed credits skip_list_levels: "secondary is L2 cache misses' in tail.reason
    stp = C.judge(by["s000_stp_one_step"], _good(by["s000_stp_one_step"]))
    assert "validation_hardening" in stp.reason and "bitmap_best_price" in stp.reason


def test_the_seeds_one_tick_percentiles_are_judged_as_intervals():
    by = _by()
    v = C.judge(by["s001_v2_tail"], _good(by["s001_v2_tail"]))  # 292 / one tick: 3-inf vs 10
    assert v.verdict == "not comparable: at the clock floor", v.reason
    assert by["s001_v2_tail"].seed_tick_ns == pytest.approx(1e3 / 24, rel=1e-3)
    # the issue's: a p99 of 7 ticks is known to +-14%, inside a +-50% tolerance: compared
    p99 = by["s001_v1_v2_p99"]
    assert p99.seed_bounds == pytest.approx((19958.3 / 333.7, 20041.7 / 250.3), rel=1e-3)
    assert C.judge(p99, _good(p99)).verdict == "reproduced"
    # cancel_only: p99 19,007 over a one-tick p50 is at least 229 and unbounded above
    lo, hi = by["s000_tail_cancel_only"].seed_bounds
    assert lo == pytest.approx(229.4, abs=0.1) and hi == math.inf


def test_matching_mechanism_claims_are_compared():
    by = _by()
    for cid in ("s001_v1_v2_comprehensive", "s003_bitmap_narrow"):
        assert C.judge(by[cid], _good(by[cid])).verdict == "reproduced", cid


def test_every_claim_names_the_seeds_engine_and_what_lob_lacks():
    for c in C.load():
        if c.kind in ("exact", "band", "ceiling"):
            continue  # counters: not a matter of design
        assert c.seed_engine and c.lob_engine_lacks, c.id


def test_definitions_refuse_bad_mechanism_and_floor_fields(tmp_path):
    import yaml

    data = C.read()
    for change, msg in (({"lob_step": "v1 -> v2", "lob_mechanisms": ["x"]}, "not both"),
                        ({"lob_step": "v1 -> nope"}, "lob_step"),
                        ({"seed": "seed003"}, "timer_tick_ns")):  # seed003: no tick
        d = dict(data)
        d["claims"] = [{**data["claims"][0], **change}]
        p = tmp_path / "claims.yaml"
        p.write_text(yaml.safe_dump(d))
        with pytest.raises(ValueError, match=msg):
            C.load(p)


def test_a_pipeline_run_is_judged_with_todays_definitions(tmp_path):
    import json

    rows = [{"batch": 1, "pinning": "unpinned", "fraction": 1.5, "keeps_up": False}] * 20
    run = tmp_path / "pipeline_latency" / "default-1"
    run.mkdir(parents=True)
    old = {"s003_pipeline_saturation": C.measurement(1.0)}  # recorded by yesterday's code
    (run / "summary.json").write_text(json.dumps({"tables": {"sweep": rows}, "claims": old}))
    (run / "COMPLETE").write_text("")
    m = C.collect(tmp_path)["s003_pipeline_saturation"][0]
    assert m["ci"][0] > 0.8 and "20 of 20" in m["detail"]
    by = {v.claim.id: v for v in C.verdicts(tmp_path)}
    assert by["s003_pipeline_saturation"].verdict == "reproduced"


# --- the A/A control and the count of runs -------------------------------------------------

def test_a_change_inside_the_aa_band_is_inconclusive_beyond_it_judged():
    from lob.measure.stats import aa_band

    c = _claim(value=1.15, tolerance=0.3)  # a small change: seed 1.15, pivot 1
    band = aa_band([0.9, 1.1, 0.95, 1.05, 1.08, 0.93])  # identical code: a 0.80-1.24 band
    inside = C.judge(c, _m(1.12, 1.06, 1.18, aa=band, runs=7))
    assert inside.verdict == "inconclusive"
    assert "A/A control" in inside.reason and "not told apart from noise" in inside.reason
    assert "A/A control" in inside.lob_figure  # the band is shown beside the figure
    beyond = C.judge(c, _m(1.35, 1.30, 1.40, aa=band, runs=7))
    assert beyond.verdict == "reproduced"
    # without the control the same interval would have been called reproduced
    assert C.judge(c, _m(1.12, 1.06, 1.18, runs=7)).verdict == "reproduced"
    # too few A/A ratios: no band, so the control decides nothing
    assert C.judge(c, _m(1.12, 1.06, 1.18, aa=aa_band([1.0, 1.1]), runs=7)).verdict == \
        "reproduced"


def test_fewer_than_five_runs_is_a_single_point_even_with_an_interval():
    c = _claim()
    v = C.judge(c, _m(2.1, 2.0, 2.2, runs=3))
    assert v.verdict == "inconclusive: single point" and "3 independent run(s)" in v.reason
    assert C.judge(c, _m(2.1, 2.0, 2.2, runs=5)).verdict == "reproduced"


def test_measurement_checks_its_aa_and_runs():
    with pytest.raises(ValueError, match="aa needs low and high"):
        C.measurement(1.0, aa={"band": [0.9, 1.1]})
    with pytest.raises(ValueError, match="runs must be >= 1"):
        C.measurement(1.0, runs=0)
    rec = C.measurement(1.0, aa={"low": 0.9, "high": 1.1, "n": 6, "what": "w"}, runs=6)
    assert rec["aa"] == {"low": 0.9, "high": 1.1, "n": 6, "what": "w"} and rec["runs"] == 6


def test_a_different_mechanism_also_names_the_clock_floor():
    c = _claim(mechanism=("skip_list_levels",), lob_mechanisms=())
    v = C.judge(c, _m(2.1, 2.0, 2.2, runs=5,
                      clock={"tick_ns": 10.0, "percentiles": {"p50": 10.0}}))
    assert v.verdict == "not comparable: different mechanism"
    assert "also at the clock floor: lob's interval 2-2.2 becomes 0-inf" in v.reason
    assert "also at the clock floor" not in C.judge(c, _m(2.1, 2.0, 2.2, runs=5)).reason


def test_the_interval_is_never_widened_by_the_aa_band_as_well():
    c = _claim(value=2.12, tolerance=0.25)  # band 1.59-2.65
    band = {"low": 0.9, "high": 1.11, "n": 8, "what": "w"}
    # 2.3-2.6 is inside the tolerance band and beyond the A/A band: the A/A band has been
    # used once (the change call); it does not widen the interval a second time
    v = C.judge(c, _m(2.45, 2.3, 2.6, aa=band, runs=8))
    assert v.verdict == "reproduced" and "widened" not in v.reason
    assert C.judge(c, _m(150.0, 45.0, 240.0, aa=band, runs=5)).verdict == "direction only"


def test_an_aa_band_wider_than_two_is_not_measurable_naming_the_spread():
    c = _claim(value=1.0, pivot=None, tolerance=0.25)  # "pinning changes nothing"
    band = {"low": 0.0034, "high": 296.0, "n": 5, "what": "w"}
    v = C.judge(c, _m(1.05, 0.3, 3.0, aa=band, runs=5))
    assert v.verdict == "not measurable on this machine"
    assert "0.0034-296" in v.reason and "would not narrow" in v.reason
    assert "more repeats or a quieter machine would settle it" not in v.reason


def test_a_seed_percentile_from_too_few_samples_is_bounded_by_its_neighbours():
    # claims.yaml's own: the seed's mass_cancel_burst p99 rests on its 500 bursts, so only
    # p50 <= p99 <= max bounds it: p99 / p50 in [1, max / p50 = 1.67]
    mc = C.get("s000_tail_mass_cancel_burst")
    assert mc.seed_samples == 500
    assert mc.seed_bounds == pytest.approx((1.0, 54504.67 / 32549.33), rel=1e-4)
    assert "only between p50 and max" in mc.seed_bounds_what
    ok = {"count": 1000, "resting_before_mass_cancel_mean": 1100}
    assert C.judge(mc, _m(1.2, 1.1, 1.3, runs=9, diagnostics=ok)).verdict == "reproduced"
    assert C.judge(mc, _m(3.0, 2.8, 3.3, runs=9, diagnostics=ok)).verdict == "direction only"
    assert C.judge(mc, _m(2.1, 1.8, 2.4, runs=9, diagnostics=ok)).verdict == "inconclusive"
    # a seed figure no neighbour bounds (not a ratio of two percentiles) is not compared
    c = _claim(seed_percentiles=(("p50", 32591.0), ("p99", 42271.0)), seed_tick_ns=41.667,
               seed_samples=500)
    v = C.judge(c, _m(2.1, 2.0, 2.2, runs=9))
    assert v.verdict == "not comparable"
    assert "the seed's p99 come(s) from 500 samples (a p99 needs 1,000)" in v.reason
    assert C.judge(replace(c, seed_samples=1000), _m(2.1, 2.0, 2.2, runs=9)).verdict == \
        "reproduced"

"""lob.studies.tail_analysis on synthetic data: every sentence branch of every table builder,
the plots' axes and lines, the claims, and the procedures with stand-in captures (one real
capture on the reference engine checks the wiring)."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from lob.measure.stats import min_count
from lob.studies import claims as C
from lob.studies import published
from lob.studies import tail_analysis as ta
from lob.workloads import diagnostics as D

CLOCK = {"source": "test clock", "overhead_median_ns": 20.0}


def _spread(n, lo, hi):  # n values over the multiples of 10 from lo to hi (a 10 ns grid)
    return np.resize(np.arange(lo, hi + 1, 10), n)


def narrow(n=2000):  # p99 / p50 = 1272 / 1060 = 1.2, on a 10 ns grid (p50 is 106 ticks)
    a, b = n * 80 // 100, n * 15 // 100
    return np.sort(np.r_[_spread(a, 1000, 1090), _spread(b, 1100, 1250),
                         np.full(n - a - b, 1272)]).astype(np.int64)


def wide(n=2000):  # p99 / p50 = 53,000 / 1060 = 50
    a, b = n * 80 // 100, n * 17 // 100
    return np.sort(np.r_[_spread(a, 1000, 1090), _spread(b, 1100, 1260),
                         np.full(n - a - b, 53_000)]).astype(np.int64)


def fast(n=2000):  # p50 40 ns: 4 ticks of a 10 ns grid, at the clock floor
    a = n * 55 // 100
    return np.r_[np.full(a, 40), _spread(n - a, 50, 200)].astype(np.int64)


def few(n=50):  # too few for a p99
    return np.full(n, 300, dtype=np.int64)


def diag(empty=None, hit=None, mass=None, commands=10_000):
    return {"commands": commands, "count": 0, "market_empty_pct": empty,
            "cancel_hit_pct": hit, "resting_before_mass_cancel_mean": mass}


def fake_run(monkeypatch, samples: dict, diags: dict, *, untimed=7, refuse=None, clock=CLOCK):
    """A workload/capture pair standing in for lob: the workload carries the scenario name in
    ``commands``; diagnostics come from ``diags``; ``refuse`` maps (engine, scenario) to an
    engine's refusal line. A scenario's samples may be a list: one array per capture, in
    turn. Returns (workload, capture, calls)."""
    from lob.studies import declared

    calls = []
    refuse = refuse or {}
    monkeypatch.setattr(declared, "refusal", lambda e, wl: refuse.get((e, wl.commands)))

    def workload(name, scale):
        return SimpleNamespace(commands=name, scale=scale)

    def capture(engine, wl, gc_enabled=True):
        calls.append((engine, wl.commands, gc_enabled))
        d = samples[wl.commands]
        d = d[(engine, gc_enabled)] if isinstance(d, dict) else d
        if isinstance(d, list):  # one array per capture
            d = d[sum(c[1] == wl.commands for c in calls) - 1]
        return {"durations": np.asarray(d), "replay": SimpleNamespace(outcomes=None, fills=None),
                "clock": clock, "untimed": untimed}

    monkeypatch.setattr(D, "stream_diagnostics", lambda commands, o, f: diags[commands])
    return workload, capture, calls


def regime(monkeypatch, samples, diags, tmp_path=None, **kw):
    workload, capture, _ = fake_run(monkeypatch, samples, diags, clock=kw.get("clock", CLOCK))
    return ta.measure_regime("eng", list(samples), 0.5, kw.get("overrides", {}),
                             kw.get("captures", 5), tmp_path, workload=workload,
                             capture=capture)


# --- parameters and constants ----------------------------------------------------------------

def test_check_parameters_names_what_is_wrong():
    ta.check_parameters(["a", "b"], "a", 1, {"b": 2.0}, 5)
    with pytest.raises(ValueError, match="scenarios is empty"):
        ta.check_parameters([], "a", 1, {})
    with pytest.raises(ValueError, match="tail_scenario 'c' must be one of"):
        ta.check_parameters(["a"], "c", 1, {})
    for bad in (0, True, 1.5):
        with pytest.raises(ValueError, match="repeat must be >= 1"):
            ta.check_parameters(["a"], "a", bad, {})
        with pytest.raises(ValueError, match="claim_captures must be >= 1"):
            ta.check_parameters(["a"], "a", 1, {}, bad)
    with pytest.raises(ValueError, match=r"scale_overrides names scenarios not in .*\['z'\]"):
        ta.check_parameters(["a"], "a", 1, {"z": 1.0})


def test_constants_agree_with_the_claims_and_the_published_table():
    tails = [c for c in C.load() if c.id.startswith("s000_tail_")]
    assert tails and {c.pivot for c in tails} == {ta.TAIL_PIVOT}
    assert set(ta.SEED000_COUNT) == set(published.SEED000_PERCENTILES)
    assert {c.workload for c in tails} == set(ta.SEED000_COUNT)


# --- the regime --------------------------------------------------------------------------------

def test_measure_regime_interleaves_fresh_captures_in_rotated_order(monkeypatch, tmp_path):
    ws = [wide(), wide(), narrow(), wide(), wide()]  # one capture of five is narrow
    workload, capture, calls = fake_run(monkeypatch, {"n": narrow(), "w": ws, "f": fast()},
                                        {"n": diag(), "w": diag(), "f": diag()})
    reg = ta.measure_regime("eng", ["n", "w", "f"], 0.5, {"w": 2.0}, 5, tmp_path,
                            workload=workload, capture=capture)
    order = [c[1] for c in calls]
    assert order == ["n", "w", "f", "w", "f", "n", "f", "n", "w", "n", "w", "f", "w", "f", "n"]
    rows = {r["scenario"]: r for r in reg["rows"]}
    assert rows["n"]["scale"] == 0.5 and rows["w"]["scale"] == 2.0
    assert rows["n"]["captures"] == 5 and rows["n"]["count"] == 10_000  # five merged
    assert rows["n"]["untimed"] == 7 and reg["counts"]["n"] == [2000] * 5
    assert reg["ratios"]["w"] == pytest.approx([50, 50, 1.2, 50, 50])
    assert rows["w"]["p99/p50"] == 50.0  # the median of the per-capture ratios
    assert (rows["w"]["ci_low"], rows["w"]["ci_high"]) == pytest.approx((1.2, 50))
    assert reg["interval"]["w"]["what"] == "93.8% interval of the median of 5 fresh captures"
    assert rows["n"]["p99/p50"] == pytest.approx(1.2) and len(reg["samples"]["w"]) == 10_000
    assert reg["clock"] == CLOCK and reg["grid"]["tick_ns"] == pytest.approx(10, rel=0.01)
    assert rows["f"][ta.FLOOR] == "p50" and rows["n"][ta.FLOOR] == ""
    assert reg["clocks"]["f"]["percentiles"] == {"p50": 40.0, "p99": 200.0}
    assert reg["clocks"]["f"]["tick_ns"] == pytest.approx(10, rel=0.01)
    assert sorted(p.name for p in tmp_path.glob("*.hgrm")) == ["eng__f.hgrm", "eng__n.hgrm",
                                                                 "eng__w.hgrm"]


def test_regime_table_wide_and_narrow_with_empty_books_and_hidden_percentiles(monkeypatch):
    reg = regime(monkeypatch, {"n": narrow(), "w": wide(), "f": few()},
                 {"n": diag(empty=97.0), "w": diag(empty=12.5), "f": diag()})
    t = ta.regime_table(reg)
    assert t.name == "regime (eng)" and t.check() == []
    assert t.sentences[0] == "The narrowest tail (p99 / p50) is n's (1.20); the widest is w's (50)."
    assert t.sentences[1] == "Wide tails (p99 at least 10 times p50): w."
    assert t.sentences[2].startswith("Most market orders met an empty book in n (97%):")
    assert t.sentences[3] == "Percentiles hidden for want of samples: n (p99.99); " \
                             "w (p99.99); f (p99, p99.9, p99.99)."  # five captures merged
    assert t.cell("f", "p99/p50") == "-" and t.cell("f", "ci_low") == "-"
    assert t.note.startswith("Clock test clock: one read costs 20 ns (median), in every "
                             "sample, never subtracted. Clock: durations fall on a 10.0 ns grid "
                             "(measured from the samples: ")
    assert "under 10 ticks (100 ns) are marked in `under_10_ticks`" in t.note
    assert "ratios of 5 fresh capture(s) per scenario" in t.note and "93.8% interval" in t.note


def test_regime_table_across_the_pivot_and_at_the_clock_floor(monkeypatch):
    ws = [wide(), narrow(), narrow(), wide(), wide()]  # 50, 1.2, 1.2, 50, 50: median 50
    t = ta.regime_table(regime(monkeypatch, {"w": ws, "f": fast(), "n": narrow()},
                               {"w": diag(), "f": diag(), "n": diag()}))
    assert t.check() == []
    assert "Wide tails (p99 at least 10 times p50): " not in t.text  # its interval reaches 1.2
    assert t.sentences[1] == "No scenario has a wide tail (p99 at least 10 times p50) here."
    assert t.sentences[2] == ("The interval reaches across 10 in w (1.20-50): wide or narrow, "
                              "the captures do not tell.")
    assert t.sentences[3] == ("At the clock floor (p50 under 10 ticks of the measured grid): "
                              "f; their p99 / p50 divides by a p50 known only to a tick, so "
                              "its claim is not compared.")


def test_regime_table_without_a_wide_tail_or_an_empty_book(monkeypatch):
    big = np.r_[narrow(200_000)]
    t = ta.regime_table(regime(monkeypatch, {"a": big, "b": narrow(50_000)},
                               {"a": diag(), "b": diag(empty=50.0)}, captures=1))
    assert t.check() == []
    assert t.sentences[1] == "No scenario has a wide tail (p99 at least 10 times p50) here."
    assert not any("empty book" in s or "clock floor" in s for s in t.sentences)
    assert t.sentences[-1].startswith("Percentiles hidden for want of samples: b (p99.99)")
    assert "ci_low-ci_high: no interval: 1 fresh captures" in t.note  # one capture: no interval
    t = ta.regime_table(regime(monkeypatch, {"a": narrow(200_000)}, {"a": diag()}, captures=1))
    assert t.sentences == ["Only a has a tail (p99 / p50): 1.20.",
                           "No scenario has a wide tail (p99 at least 10 times p50) here."]
    t = ta.regime_table(regime(monkeypatch, {"a": few()}, {"a": diag()}))
    assert t.sentences[0] == "No row has a tail (p99 / p50) to compare."
    assert "no interval (no capture supports a p99)" in t.note
    assert ta.grid_line(ta.grid_of([few(50)])) == (
        "Clock: the durations fall on no grid lob can measure (fewer than 100 of them under "
        "4,096 ns); no percentile is marked as at the clock floor.")


def test_grid_line_and_the_floor_marks():
    g = ta.grid_of([fast(), narrow(), np.array([0, 9_000_000])])  # zeros and the tail left out
    assert g["tick_ns"] == pytest.approx(10, rel=0.01) and g["n"] == 4000
    assert ta.grid_line(g, marked=False).endswith("percentiles under 10 ticks (100 ns) are at "
                                                  "the clock floor.")
    assert ta.grid_of([few(50)]) is None and ta.grid_of([]) is None
    none = {"tick_ns": None, "what": "no grid from 1 to 500 ns holds 90% of 5000 samples"}
    assert ta.grid_line(none) == ("Clock: the durations fall on no grid lob can measure (no grid "
                                  "from 1 to 500 ns holds 90% of 5000 samples); no percentile "
                                  "is marked as at the clock floor.")
    row = {"count": 100, "p50": 40.0, "p90": 50.0, "p99": 60.0, "max": 60.0}
    assert ta.under_floor(row, g) == "p50, p90, max"  # 100 samples support no p99
    assert ta.under_floor(row, None) == "" and ta.under_floor({"p50": "n<20"}, g) == ""


def test_clock_of_measures_the_tick_or_says_why_not():
    c = ta.clock_of(np.r_[fast(), np.full(10, 9_000_000)], {"p50": 40.0})
    assert c["tick_ns"] == pytest.approx(10, rel=0.01) and c["percentiles"] == {"p50": 40.0}
    c = ta.clock_of(np.full(500, 7000), {"p50": 7000.0, "p99": 7000.0})
    assert c["tick_ns"] is None and c["what"] == ("0 durations under 4096 ns: too few to "
                                                  "measure a grid")
    # a one-tick p50 leaves lob's p99 / p50 unbounded above: across the pivot of 10 (the
    # stp_sweep claim's rule, without the mechanism its seed figure has and lob lacks)
    stp = replace(C.get("s000_tail_stp_sweep"), mechanism=())
    verdict = C.judge(stp, C.measurement(
        1.3, ci=(1.2, 1.4), runs=5, diagnostics={"count": 2000},
        clock=ta.clock_of(fast(), {"p50": 10.0, "p99": 20.0})))
    assert verdict.verdict == "not comparable: at the clock floor"
    # four and five ticks still bound it below the pivot: judged on that interval
    verdict = C.judge(stp, C.measurement(
        1.3, ci=(1.2, 1.4), runs=5, diagnostics={"count": 2000},
        clock=ta.clock_of(fast(), {"p50": 40.0, "p99": 50.0})))
    assert verdict.verdict != "not comparable: at the clock floor"
    assert "at its clock's ticks" in verdict.reason


def peaked(n=4000, seed=0):
    """notional_walk on the cycle counter: whole ns, 93% on 24-26 ns, a tail above."""
    rng = np.random.default_rng(seed)
    u = rng.random(n)
    tail = np.floor(27 + rng.exponential(60, n))
    return np.where(u < 0.45, 24, np.where(u < 0.85, 25, np.where(u < 0.93, 26, tail)))


def test_a_capture_timed_by_the_cycle_counter_takes_its_tick_not_a_fit(monkeypatch):
    """r2's notional_walk: a 12.25 ns "grid" was fitted to a peak at 24-26 ns of TSC-timed
    samples and +-1 tick carried 6.24-6.72 across the pivot 10. Timed by the cycle counter,
    the tick is its known resolution (in whole ns: 1 ns) in the claim's record, the regime's
    grid and the line under the table."""
    tsc = {**CLOCK, "source": "rdtsc (rate measured against CLOCK_MONOTONIC)",
           "resolution_ns": 0.385}
    reg = regime(monkeypatch, {"p": [peaked(seed=k) for k in range(5)]}, {"p": diag(empty=1)},
                 clock=tsc)
    assert reg["clocks"]["p"]["tick_ns"] == 1.0 and "not fitted" in reg["clocks"]["p"]["what"]
    assert reg["grid"]["saw"] == "known" and reg["grid"]["tick_ns"] == 1.0
    assert "each duration is known to 1.00 ns (known, not fitted: the cycle counter ticks " \
        "every 0.385 ns" in ta.grid_line(reg["grid"])
    m = ta.claims(reg)["s000_tail_p"]
    assert m["clock"]["tick_ns"] == 1.0
    # engines on different clocks: no one known tick, measured from the samples
    assert ta.common_clock([tsc, CLOCK]) is None and ta.common_clock([tsc, tsc]) == tsc
    assert ta.common_clock([CLOCK, CLOCK]) is None and ta.common_clock([]) is None


def test_claims_carry_the_interval_the_runs_the_clock_and_the_diagnostics(monkeypatch):
    reg = regime(monkeypatch, {"n": narrow(), "f": few()},
                 {"n": diag(empty=1.0, hit=2.0, mass=3.0, commands=1234), "f": diag()})
    m = ta.claims(reg)
    assert set(m) == {"s000_tail_n", "s000_tail_f"}
    n = m["s000_tail_n"]
    assert n["value"] == pytest.approx(1.2) and n["ci"] == pytest.approx([1.2, 1.2])
    assert n["runs"] == 5 and n["ci_what"] == "93.8% interval of the median of 5 fresh captures"
    assert n["clock"]["tick_ns"] == pytest.approx(10, rel=0.01)
    assert n["clock"]["percentiles"] == {"p50": 1060.0, "p99": 1272.0}
    assert n["diagnostics"] == {
        "count": 2000, "commands": 1234, "market_empty_pct": 1.0, "cancel_hit_pct": 2.0,
        "resting_before_mass_cancel_mean": 3.0}
    assert n["explain"] == {"p50 in clock reads": 1060 / 20.0}
    assert n["detail"] == "eng p99 / p50, median of 5 fresh captures"
    f = m["s000_tail_f"]  # no p99 from 50 samples: no ratio, no run, no interval
    assert f["value"] is None and "runs" not in f and "ci" not in f
    assert f["ci_what"] == "no interval: no capture supports a p99"


# --- the seed's table and the tail-shape plot --------------------------------------------------

def test_seed_table_applies_the_percentile_rule_and_says_which_claim_rests_on_too_few():
    t = ta.seed_table(list(ta.SEED000_COUNT))
    m000 = C.get("s000_tail_add_only").machine
    assert t.name == f"seed 000 ({m000})" and t.machine == f"{m000} (seed 000)"
    assert t.check() == []
    add = published.SEED000_PERCENTILES["add_only"]
    assert t.value("add_only", "p99/p50") == pytest.approx(add["p99"] / add["p50"])
    assert t.cell("mass_cancel_burst", "p99") == f"n<{min_count(99)}"
    burst = published.SEED000_PERCENTILES["mass_cancel_burst"]
    assert t.value("mass_cancel_burst", "p99/p50") == pytest.approx(
        burst["p99"] / burst["p50"]) == pytest.approx(C.get("s000_tail_mass_cancel_burst").value)
    assert t.sentences[0] == (
        f"mass_cancel_burst's p99 / p50 ({t.cell('mass_cancel_burst', 'p99/p50')}), the figure "
        "its claim is judged on, rests on the seed's 500 samples: fewer than the 1,000 a p99 "
        "needs, so the seed's own p99 is hidden here (n<1000) and its claim says so.")
    assert t.sentences[1] == "Percentiles hidden for want of samples: mass_cancel_burst (p99, " \
                             "p99.9, p99.99)."
    tick = published.figures()["seed000"]["timer_tick_ns"]
    assert t.note.startswith(f"Clock: the seed's timer ticks every {tick:.1f} ns (published)")
    assert t.cell("cancel_only", ta.FLOOR) == "p50" and t.cell("add_only", ta.FLOOR) == ""
    assert ta.seed_table(["add_only", "stp_sweep"]).text == ""  # nothing hidden: no sentence


def test_seed_table_takes_injected_figures():
    t = ta.seed_table(["x"], machine="M", percentiles={"x": {"p50": 2, "p99": 8}},
                      counts={"x": 1000}, tick_ns=1.0)
    assert t.value("x", "p99/p50") == 4.0 and t.name == "seed 000 (M)" and t.text == ""
    assert t.cell("x", ta.FLOOR) == "p50, p99" and "every 1.00 ns" in t.note


def test_plot_tail_shape_one_panel_per_scenario_lob_beside_the_seed(monkeypatch):
    names = ["add_only", "cancel_only", "aggressive_walk", "notional_walk", "stp_sweep"]
    reg = regime(monkeypatch, {n: wide() for n in names[:-1]} | {"stp_sweep": few(2)},
                 {n: diag() for n in names}, captures=1)
    fig = ta.plot_tail_shape(reg)
    shown = [ax for ax in fig.axes if ax.axison]
    assert [ax.get_title() for ax in shown] == names and len(fig.axes) == 8  # 2 x 4 grid
    lob_line, seed_line = shown[0].get_lines()
    assert list(lob_line.get_xdata()) == pytest.approx([2, 10, 100])  # p50, p90, p99 only
    p90 = np.percentile(wide(), 90, method="inverted_cdf")
    assert list(lob_line.get_ydata()) == pytest.approx([1, p90 / 1060, 50])
    add = published.SEED000_PERCENTILES["add_only"]
    assert seed_line.get_ydata()[-1] == pytest.approx(add["p99.99"] / add["p50"])
    assert len(shown[-1].get_lines()[0].get_xdata()) == 0  # 2 samples: not even a p50
    assert fig.legends and "this machine" in fig.legends[0].get_texts()[0].get_text()


# --- pure-Python versions ----------------------------------------------------------------------

def test_measure_versions_measures_the_last_engine_with_the_gc_off_too(monkeypatch, tmp_path):
    samples = {"s": {("a", True): narrow(), ("b", True): wide(), ("b", False): narrow()}}
    workload, capture, calls = fake_run(monkeypatch, samples, {"s": diag(empty=5.0)})
    vers = ta.measure_versions(["a", "b"], ["s"], 0.1, 1, True, tmp_path, workload=workload,
                               capture=capture)
    assert calls == [("a", "s", True), ("b", "s", True), ("b", "s", False)]
    assert [(r["engine"], r["gc"]) for r in vers["rows"]] == [("a", "on"), ("b", "on"),
                                                              ("b", "off")]
    assert vers["rows"][0]["market_empty_pct"] == 5.0 and vers["clock"] == CLOCK
    assert sorted(p.name for p in tmp_path.glob("*.hgrm")) == ["a__s.hgrm", "b__s.hgrm"]
    calls.clear()
    ta.measure_versions(["a", "b"], ["s"], 0.1, 1, False, None, workload=workload,
                        capture=capture)
    assert [c[2] for c in calls] == [True, True]


def versions(monkeypatch, samples, engines, gc_compare=False):
    workload, capture, _ = fake_run(monkeypatch, samples, {s: diag() for s in samples})
    return ta.measure_versions(engines, list(samples), 0.1, 1, gc_compare, None,
                               workload=workload, capture=capture)


def test_percentiles_table_names_the_lowest_p50_per_engine(monkeypatch):
    vers = versions(monkeypatch, {
        "s1": {("a", True): narrow(), ("b", True): narrow() * 2},
        "s2": {("a", True): narrow() * 3, ("b", True): narrow()},
        "s3": {("a", True): narrow() * 2, ("b", True): narrow()},
        "s4": {("a", True): few(10), ("b", True): few(10)}}, ["a", "b"])
    t = ta.percentiles_table(vers)
    assert t.check() == [] and t.note.startswith("Clock test clock: one read costs 20 ns")
    assert t.sentences[:2] == ["a has the lowest p50 in s1.", "b has the lowest p50 in s2, s3."]
    assert "s4" not in " ".join(t.sentences[:2])  # no p50 on either side: no winner
    assert t.sentences[2].startswith("Percentiles hidden for want of samples:")
    assert "gc" not in t.columns


def test_percentiles_table_with_one_engine_says_only_what_is_hidden(monkeypatch):
    t = ta.percentiles_table(versions(monkeypatch, {"s": narrow(200_000)}, ["a"]))
    assert t.sentences == []
    t = ta.percentiles_table(versions(monkeypatch, {"s": narrow()}, ["a"]))
    assert t.sentences == ["Percentiles hidden for want of samples: s / a (p99.9, p99.99)."]


def test_gc_table_compares_p99s_never_single_max_samples(monkeypatch):
    vers = versions(monkeypatch, {
        "s1": {("a", True): narrow(), ("a", False): narrow()},
        "s2": {("a", True): wide(), ("a", False): narrow()}}, ["a"], gc_compare=True)
    t = ta.gc_table(vers, "a")
    assert t.name == "GC on / off (a)" and t.check() == []
    ratios = [r["p99_on_over_off"] for r in t.rows]
    p99 = {(r["scenario"], r["gc"]): r["p99"] for r in t.rows}
    assert ratios[0] == 1.0 and ratios[1] is None and ratios[3] is None
    assert ratios[2] == pytest.approx(p99["s2", "on"] / p99["s2", "off"])
    assert "max_on_over_off" not in t.columns
    assert "max" not in t.text and "max: one sample each (shown, never compared)" in t.note
    assert t.text.startswith("The lowest p99 latency with the GC on over off is s1's (1.00)")
    off = versions(monkeypatch, {"s1": narrow()}, ["a"])  # no GC-off rows
    assert ta.gc_table(off, "a").text == \
        "No row has a p99 latency with the GC on over off to compare."


def test_every_latency_table_says_what_a_clock_read_costs():
    clock = {"source": "perf_counter_ns", "overhead_median_ns": 23.0}
    assert ta.grid_line(None, clock=clock).startswith(
        "Clock perf_counter_ns: one read costs 23 ns (median), in every sample, never "
        "subtracted. Clock: the durations fall on no grid")
    assert ta.grid_line(None, clock={}).startswith("Clock read cost: not reported")
    assert ta.grid_line(None) .startswith("Clock: the durations")  # bisection's: no record


# --- where the slowest 1% comes from -----------------------------------------------------------

def frame(n=2000, *, constant_work=False):
    rng = np.random.default_rng(3)
    fills = np.zeros(n, dtype=np.int64) if constant_work else rng.integers(0, 5, n)
    lat = 100 + 50 * fills + rng.integers(0, 10, n)
    return pd.DataFrame({"latency_ns": lat, "fills": fills,
                         "levels": np.zeros(n, dtype=np.int64) if constant_work
                         else np.minimum(fills, 1),
                         "depth": np.full(n, 40) if constant_work else rng.integers(10, 90, n)})


def test_sources_table_compares_the_slowest_1pct_and_names_the_driver():
    po = frame()
    t = ta.sources_table(po, "mix", "v9")
    assert t.name == "tail sources (mix, v9)" and t.check() == []
    assert [r["group"] for r in t.rows] == ["rest", "slowest 1%"]
    assert sum(r["count"] for r in t.rows) == len(po)
    p99 = np.percentile(po.latency_ns, 99, method="inverted_cdf")
    assert t.value("slowest 1%", "count") == int((po.latency_ns >= p99).sum())
    assert t.value("slowest 1%", "fills") == 4.0
    assert t.sentences[0].startswith("The slowest 1% averaged 4.00 fills, 1.00 levels")
    assert t.sentences[1].startswith("The strongest rank correlation with latency is fills (rho")


def test_sources_table_without_correlations_or_without_a_p99():
    t = ta.sources_table(frame(constant_work=True), "mix", "v9")
    assert t.check() == []
    assert t.sentences[1] == ("No rank correlation with latency is defined (the work did not "
                              "vary).")
    t = ta.sources_table(frame(999), "mix", "v9")
    assert t.check() == [] and t.rows == [{"group": "all", "count": 999}]
    assert t.text == f"999 samples: too few for a p99 (needs {min_count(99):,}); no tail view."


def test_plot_tail_sources_three_panels_with_the_p99_line():
    fig = ta.plot_tail_sources(frame(), "mix", "v9")
    assert [ax.get_xlabel() for ax in fig.axes] == list(ta.WORK)
    for ax in fig.axes:
        assert len(ax.collections) == 1 and len(ax.collections[0].get_offsets()) == 2000
        (line,) = ax.get_lines()
        assert line.get_label().startswith("p99 (2,000 samples)")
    assert fig.axes[0].get_title().startswith("rho=0.")
    assert ta.plot_tail_sources(frame(999), "mix", "v9") is None


# --- the real thing, once and small --------------------------------------------------------------

def test_measure_sources_and_measure_on_the_reference_engine():
    from lob.workloads import build

    po = ta.measure_sources("reference", "mixed_70_20_10", 0.0005)
    wl = build("mixed_70_20_10", scale=0.0005)
    assert len(po) == int(np.count_nonzero(wl.commands["timed"])) > 100
    assert list(po.columns) == ["latency_ns", *ta.WORK]
    assert (po.latency_ns > 0).all() and (po.levels <= po.fills).all()
    m = ta.measure("reference", wl, 2)
    assert m["row"]["count"] == 2 * len(po) and m["diag"]["commands"] == len(wl.commands)
    assert m["untimed"] == len(wl.commands) - len(po) and m["clock"]


# --- an engine that declares less (orderly_chaos: STP NONE only) ---------------------------------

WHY = "engine 'oc' does not support STP mode CANCEL_MAKER (it declares: NONE)"


def test_measure_versions_skips_a_cell_outside_an_engines_capabilities_and_says_why(
        monkeypatch, tmp_path):
    samples = {"s": narrow(), "stp": narrow()}
    workload, capture, calls = fake_run(monkeypatch, samples, {s: diag() for s in samples},
                                        refuse={("oc", "stp"): WHY})
    vers = ta.measure_versions(["oc", "a"], ["s", "stp"], 0.1, 1, False, tmp_path,
                               workload=workload, capture=capture)
    assert ("oc", "stp", True) not in calls and ("a", "stp", True) in calls
    assert [(r["scenario"], r["engine"]) for r in vers["rows"]] == [
        ("s", "oc"), ("s", "a"), ("stp", "a")]  # no row from another stream
    assert vers["skipped"] == [{"scenario": "stp", "engine": "oc", "reason": WHY}]
    assert not (tmp_path / "oc__stp.hgrm").exists()
    t = ta.percentiles_table(vers)
    assert t.check() == []
    assert f"Not run: oc on stp ({WHY})." in t.sentences


def test_measure_regime_skips_a_scenario_the_engine_refuses(monkeypatch):
    workload, capture, _ = fake_run(monkeypatch, {"n": narrow(), "stp": narrow()},
                                    {"n": diag(), "stp": diag()}, refuse={("eng", "stp"): WHY})
    reg = ta.measure_regime("eng", ["n", "stp"], 0.5, {}, 1, None, workload=workload,
                            capture=capture)
    assert [r["scenario"] for r in reg["rows"]] == ["n"] and "stp" not in ta.claims(reg)
    t = ta.regime_table(reg)
    assert t.check() == [] and f"Not run: stp ({WHY})." in t.sentences


def test_the_real_refusal_of_orderly_chaos_on_stp_sweep_when_built():
    from lob.engines.foreign.adapters import not_built_hint
    from lob.studies import declared
    from lob.workloads import build

    if not_built_hint("orderly_chaos"):
        pytest.skip(not_built_hint("orderly_chaos"))
    assert declared.refusal("orderly_chaos", build("mixed_70_20_10", scale=0.001)) is None
    why = declared.refusal("orderly_chaos", build("stp_sweep", scale=0.001))
    assert why.startswith("engine 'orderly_chaos' does not support STP mode CANCEL_MAKER")
    assert declared.refusal("v3", build("stp_sweep", scale=0.001)) is None


def test_built_only_drops_an_adapter_not_built_with_one_line(monkeypatch):
    from lob.engines.foreign import adapters
    from lob.studies import declared

    said = []
    monkeypatch.setattr(adapters, "not_built_hint",
                        lambda e: "engine 'oc' is not built yet: run X" if e == "oc" else None)
    assert declared.built_only(["oc", "v3"], say=said.append) == ["v3"]
    assert said == ["engine 'oc' is not built yet: run X; this run goes on without it"]
    assert declared.built_only(["v0", "v3"], say=said.append) == ["v0", "v3"] and len(said) == 1


def test_captures_overrides_spend_more_captures_where_asked(monkeypatch):
    workload, capture, calls = fake_run(monkeypatch, {"a": narrow(), "b": narrow()},
                                        {"a": diag(), "b": diag()})
    reg = ta.measure_regime("eng", ["a", "b"], 0.5, {}, 5, None, workload=workload,
                            capture=capture, captures_overrides={"b": 9})
    rows = {r["scenario"]: r for r in reg["rows"]}
    assert rows["a"]["captures"] == 5 and rows["b"]["captures"] == 9
    order = [c[1] for c in calls]
    assert order.count("a") == 5 and order.count("b") == 9 and order[-4:] == ["b"] * 4
    assert "more where a verdict is close" in ta.regime_table(reg).note
    assert "5 fresh capture(s) per scenario" in ta.regime_table(
        ta.measure_regime("eng", ["a", "b"], 0.5, {}, 5, None, workload=workload,
                          capture=capture)).note
    with pytest.raises(ValueError, match="captures_overrides names scenarios"):
        ta.check_parameters(["a"], "a", 1, {}, 5, {"z": 3})
    with pytest.raises(ValueError, match="captures_overrides"):
        ta.check_parameters(["a"], "a", 1, {}, 5, {"a": 0})

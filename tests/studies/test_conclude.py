"""Percentile hygiene, warm-up dropping, the number check and the conclusion builders, on
synthetic tables that reach every branch."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lob.studies import conclude as K

# --- percentile hygiene ---------------------------------------------------------------------


@pytest.mark.parametrize("q, need", [(50, 20), (90, 100), (99, 1_000), (99.9, 10_000),
                                     (99.99, 100_000)])
def test_min_count(q, need):
    assert K.min_count(q) == need
    assert K.supported(q, need) and not K.supported(q, need - 1)
    assert K.marker(q) == f"n<{need}"


def test_min_count_refuses_bad_percentiles():
    for q in (0, 100, -1, 101):
        with pytest.raises(ValueError):
            K.min_count(q)


def test_pct_of_reads_every_spelling():
    assert K.pct_of("p99.99") == 99.99
    assert K.pct_of("p99_9") == 99.9
    assert K.pct_of("lat_p99") == 99.0
    assert K.pct_of("count") is None and K.pct_of("p99/p50") is None


def test_drop_warmup_counts_what_it_drops():
    kept, n = K.drop_warmup([676, 120, 121, 119], 1)
    assert n == 1 and kept.tolist() == [120, 121, 119]
    kept, n = K.drop_warmup([1, 2], 5)
    assert n == 2 and kept.size == 0
    with pytest.raises(ValueError):
        K.drop_warmup([1], -1)


def test_percentile_row_suppresses_and_counts():
    row = K.percentile_row(np.arange(2_001), warmup=1)
    assert row["count"] == 2_000 and row["warmup_dropped"] == 1
    assert row["p50"] == pytest.approx(1_000, abs=1) and isinstance(row["p99"], float)
    assert row["p99.9"] == "n<10000" and row["p99.99"] == "n<100000"
    assert row["min"] == 1 and row["max"] == 2_000
    empty = K.percentile_row([], qs=(50,))
    assert empty["count"] == 0 and empty["p50"] == "n<20" and empty["max"] is None


def test_suppress_frames_and_records():
    df = pd.DataFrame({"scenario": ["a", "b"], "count": [10, 2_000], "p50": [5.0, 6.0],
                       "p99": [50.0, 60.0], "p99.99": [99.0, 99.0]})
    out = K.suppress(df)
    assert out.loc[0, "p50"] == "n<20" and out.loc[1, "p50"] == 6.0
    assert out.loc[0, "p99"] == "n<1000" and out.loc[1, "p99"] == 60.0
    assert list(out["p99.99"]) == ["n<100000", "n<100000"]
    recs = K.suppress([{"count": 25, "p50": 1.0, "p90": 2.0}])
    assert recs == [{"count": 25, "p50": 1.0, "p90": "n<100"}]
    with pytest.raises(ValueError, match="count"):
        K.suppress([{"p50": 1.0}])


def test_clock_line():
    line = K.clock_line({"source": "rdtsc", "overhead_median_ns": 11.0, "overhead_min_ns": 9.0,
                         "resolution_ns": 0.4})
    assert "rdtsc" in line and "11 ns (median, min 9.00 ns)" in line and "never subtracted" \
        in line
    assert "not reported" in K.clock_line(None)
    assert "nominal resolution 0.40 ns" in line and "grid was not measured" in line


def test_clock_line_says_a_known_tick_is_the_clocks_not_the_samples():
    from lob.studies.capture import with_grid

    tsc = {"source": "rdtsc (rate measured against CLOCK_MONOTONIC)", "overhead_median_ns": 8,
           "resolution_ns": 0.4}
    clock = with_grid(tsc, np.r_[np.full(900, 25), np.arange(26, 126)])
    assert clock["grid_ns"] == 1.0 and clock["grid_share"] is None and clock["grid_n"] == 1000
    line = K.clock_line(clock)
    assert "Each duration is known to 1 ns (known, not fitted: the cycle counter ticks every " \
        "0.4 ns" in line and "under 10 ticks (10 ns)" in line


def test_clock_line_says_the_grid_measured_from_the_samples():
    from lob.studies.capture import with_grid

    rng = np.random.default_rng(3)
    on_grid = rng.integers(2, 60, 5000) * 10.015 + rng.integers(0, 2, 5000)
    clock = with_grid({"source": "clock_gettime", "overhead_median_ns": 20,
                       "resolution_ns": 1.0}, on_grid.astype(np.int64))
    assert abs(clock["grid_ns"] - 10.015) < 0.05 and clock["grid_share"] == 1.0
    line = K.clock_line(clock)
    assert "fall on a 10 ns grid (100% of 5,000, measured from the samples)" in line
    assert "nominal resolution: 1.00 ns" in line and "under 10 ticks (100 ns)" in line
    smooth = with_grid({"source": "x", "overhead_median_ns": 20},
                       rng.uniform(100, 4000, 5000))  # not whole ns: no grid
    assert smooth["grid_ns"] is None
    assert "No clock grid shows in the 5,000 durations" in K.clock_line(smooth)
    assert with_grid({"source": "x"}, np.zeros(3)) == {"source": "x"}  # nothing to measure


# --- formatting and the number check ----------------------------------------------------------

@pytest.mark.parametrize("v, s", [(0.58, "0.58"), (1.874, "1.87"), (13.06, "13.1"),
                                  (1208.4, "1,208"), (63.0, "63"), (2_000_000, "2,000,000"),
                                  (None, "-"), (float("nan"), "-"), (True, "yes"),
                                  (0.004, "0.004"), ("n<100", "n<100")])
def test_fmt(v, s):
    assert K.fmt(v) == s


def test_numbers_in_skips_names():
    assert K.numbers_in("v2@numba is 13.1x faster than v1 at p99 on mixed_70_20_10, B=1, "
                        "1,208 ns, -4%") == {"13.1", "1", "1208", "4"}


def _table():
    return K.Conclusion("speed", pd.DataFrame({
        "engine": ["v1", "v2"], "count": [5_000, 5_000], "ns_op": [765.1, 58.6],
        "p50": [42.0, 40.0], "p99.9": [3000.0, 800.0], "ratio": [1.0, 13.06]}), key="engine")


def test_conclusion_cells_are_what_the_table_shows():
    c = _table()
    assert c.cell("v2", "ratio") == "13.1" and c.value("v2", "ratio") == 13.06
    assert c.cell("v1", "p99.9") == "n<10000"  # suppressed on the way in
    with pytest.raises(KeyError):
        c.cell("v9", "ratio")
    with pytest.raises(KeyError):
        c.cell("v1", "nope")
    c.say(f"v2 is {c.cell('v2', 'ratio')}x faster than v1 ({c.cell('v2', 'ns_op')} ns/op).")
    assert c.check() == []
    md = c.markdown()
    assert md.index("| engine |") < md.index("v2 is 13.1x")


def test_check_catches_a_number_the_table_does_not_show():
    c = _table().say("v2 is 13.5x faster.")
    (p,) = c.check()
    assert "13.5" in p and "does not show" in p
    noted = _table()
    noted.note = K.clock_line({"source": "rdtsc", "overhead_median_ns": 11.0})
    assert noted.say("A read costs 11 ns.").check() == []  # the note under the table counts


def test_check_catches_an_unsupported_percentile_in_a_stored_record():
    rec = _table().record()
    rec["rows"][0]["p99.9"] = "3,000"  # as if a notebook had bypassed suppression
    assert any("p99.9 = 3,000 from 5,000 samples" in p for p in K.check_record(rec))
    rec2 = _table().record()
    rec2["columns"].remove("count")
    assert any("without a count" in p for p in K.check_record(rec2))


def test_check_catches_two_machines_in_one_table():
    seed = K.seed_column("ns/op", "seed 001", "Apple M2 Pro")
    mixed = K.Conclusion("mixed", [{"engine": "v1", "ns_op": 900.0, seed: 765.1}], key="engine")
    (p,) = mixed.check()
    assert "2 machines" in p
    ok = K.Conclusion("ratios", [{"engine": "v1", "v1/v2": 20.0, seed: 765.1}], key="engine",
                      kinds={"v1/v2": "ratio"})
    assert ok.check() == []


def test_check_summary_checks_the_top_level_conclusion():
    r = _table().cell("v2", "ratio")
    c = _table().say(f"v2: {r}x.")
    s = {"conclusions": [c.record()], "conclusion": f"Overall {r}x; v1 took 999 ns."}
    (p,) = K.check_summary(s)
    assert "999" in p


# --- builders -------------------------------------------------------------------------------

@pytest.mark.parametrize("capacity, ns, source, bound", [
    (96_000.0, [5_000.0, 6_000.0], "closed-loop", 200_000.0),      # estimate above: a bound
    (190_000.0, [10_400.0], "measured capacity", 190_000.0),        # estimate below: capacity
    (100_000.0, 10_000.0, "closed-loop", 100_000.0),                # equal: still a bound
])
def test_capacity_bound_never_below_capacity(capacity, ns, source, bound):
    b = K.capacity_bound(capacity, ns)
    assert b["source"] == source and b["bound"] == pytest.approx(bound)
    assert b["bound"] >= capacity and b["headroom"] >= 1.0


@pytest.mark.parametrize("capacity, ns", [(0, 1.0), (1.0, 0), (1.0, []), (1.0, [float("nan")])])
def test_capacity_bound_refuses_bad_input(capacity, ns):
    with pytest.raises(ValueError):
        K.capacity_bound(capacity, ns)


def test_conclude_capacity_both_branches():
    rows = []
    for batch, cap, ns in ((1, 190_000.0, 10_400.0), (8, 400_000.0, 1_000.0)):
        b = K.capacity_bound(cap, ns)
        rows.append({"batch": batch, "capacity": cap, "bound": b["bound"],
                     "bound_source": b["source"]})
    c = K.conclude_capacity(K.Conclusion("capacity", rows, key="batch"))
    assert "below that" in c.sentences[0] and "190,000" in c.sentences[0]
    assert "bounds it at 1,000,000/s" in c.sentences[1]
    assert c.check() == []


def test_conclude_extremes_branches():
    c = K.Conclusion("t", [{"s": "a", "count": 2_000, "p99/p50": 3.0},
                           {"s": "b", "count": 2_000, "p99/p50": 80.0}], key="s",
                     kinds={"p99/p50": "ratio"})
    K.conclude_extremes(c, "p99/p50", what="tail width", lower_is="narrowest",
                        higher_is="widest")
    assert c.sentences[-1] == "The narrowest tail width is a's (3.00); the widest is b's (80)."
    one = K.Conclusion("t", [{"s": "a", "r": 2.0}], key="s")
    K.conclude_extremes(one, "r")
    assert one.sentences[-1] == "Only a has a r: 2.00."
    none = K.Conclusion("t", [{"s": "a", "count": 5, "p99": 9.0}], key="s")
    K.conclude_extremes(none, "p99")
    assert none.sentences[-1].startswith("No row")
    assert c.check() == [] and one.check() == [] and none.check() == []


def test_conclude_ratio_branches():
    c = K.Conclusion("r", [{"pair": "a", "ratio": 1.02}, {"pair": "b", "ratio": 1.5},
                           {"pair": "c", "ratio": 0.5}, {"pair": "d", "ratio": None}],
                     key="pair")
    K.conclude_ratio(c, "a", "ratio", what="a's ratio", band=0.05)
    K.conclude_ratio(c, "b", "ratio", what="b's ratio", above="faster", below="slower")
    K.conclude_ratio(c, "c", "ratio", what="c's ratio", above="faster", below="slower")
    K.conclude_ratio(c, "d", "ratio", what="d's ratio")
    assert c.sentences == ["a's ratio is 1.02, no change beyond the noise band.",
                           "b's ratio is 1.50, faster.", "c's ratio is 0.50, slower.",
                           "d's ratio: not measured."]
    assert c.check() == []


def test_conclude_suppressed_names_hidden_rows():
    c = K.Conclusion("t", [{"s": "burst", "count": 10, "p50": 5.0, "p99": 9.0},
                           {"s": "walk", "count": 5_000, "p50": 5.0, "p99": 9.0}], key="s")
    K.conclude_suppressed(c)
    assert c.sentences == ["Percentiles hidden for want of samples: burst (p50, p99)."]
    quiet = K.Conclusion("t", [{"s": "walk", "count": 5_000, "p50": 5.0}], key="s")
    assert K.conclude_suppressed(quiet).sentences == []


def test_unknown_column_kind_refused():
    with pytest.raises(ValueError, match="kinds"):
        K.Conclusion("t", [{"a": 1}], kinds={"a": "weird"})


def test_conditions_markdown_before_and_after():
    before = {"cpu_model": "Test CPU", "cpu_count": 2, "affinity": [0, 1], "os": "Linux",
              "load_avg": [1.0, 2.0, 3.0], "python": "3.11.9",
              "packages": {"numpy": "2.0", "numba": "0.60"}, "lob_version": "0.1",
              "git_sha": "abcdef1234567890", "gc_enabled": True, "date_utc": "t0"}
    md = K.conditions_markdown(before)
    assert "Test CPU, 2 logical CPUs" in md and "before 1.00 / 2.00 / 3.00" in md
    assert "still going" in md and "numba 0.60" in md and "GC: on" in md
    md2 = K.conditions_markdown(before, {**before, "load_avg": [4.0, 4.0, 4.0],
                                         "date_utc": "t1"})
    assert "after 4.00 / 4.00 / 4.00" in md2 and "finished t1" in md2
    assert "(steal) during the run: not recorded (no /proc/stat)" in md2
    t0 = {"user": 5.0, "idle": 5.0, "steal": 0.0}
    md3 = K.conditions_markdown({**before, "cpu_time": t0}, {
        **before, "cpu_time": {"user": 11.0, "idle": 8.0, "steal": 1.0}, "date_utc": "t1"})
    assert "(steal) during the run: 10.0% of all CPUs' time" in md3


def test_run_conditions_finish_records_load_before_and_after():
    import time

    rc = K.RunConditions()
    time.sleep(0.05)  # /proc/stat counts in 10 ms ticks: with no tick between, no steal share
    out = rc.finish()
    assert out["load_avg_before"] == rc.before["load_avg"] and "load_avg_after" in out
    assert out["steal_fraction"] is None or 0 <= out["steal_fraction"] <= 1
    assert (out["steal_fraction"] is None) == (rc.before["cpu_time"] is None)
    assert out["cpu_model"] and out["gc_enabled_at_start"] in (True, False)


def test_plain_rows_and_summary_tables():
    c = K.Conclusion("t", pd.DataFrame({"s": ["a"], "count": [np.int64(5)],
                                        "p50": [np.float64(1.5)], "x": [float("nan")]}), key="s")
    (row,) = K.summary_tables([c])["t"]
    assert row == {"s": "a", "count": 5, "p50": "n<20", "x": None}
    assert type(row["count"]) is int

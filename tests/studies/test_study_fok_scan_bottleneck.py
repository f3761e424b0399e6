"""lob.studies.fok_scan_bottleneck on synthetic data: every sentence branch of every table
builder, the plots' axes and lines, the claims, and the procedures with injected replays and
captures (one small real run checks the comprehensive stream's procedure end to end)."""

from __future__ import annotations

from types import SimpleNamespace

import matplotlib
import numpy as np
import pytest

import lob
from lob.measure.stats import rotations
from lob.studies import conclude as K
from lob.studies import fok_scan_bottleneck as fok

matplotlib.use("Agg")

LINEAGE = ["v0", "v1", "v2", "v3"]
PAIR = ["v0", "v1"]
SEED = {"stream": "seed 001 (M), 2,000,000 commands", "commands": fok.SEED_COMMANDS,
        "resting_mean": None, "resting_max": None, "v1/v2": 13.1,
        "scan_over_rest": 12.06, "machine": "M"}


def comp(commands=4000, ns=None, counters=None):
    return {"commands": commands, "ns_op": ns or {"v0": 100.0, "v1": 50.0, "v2": 10.0, "v3": 8.0},
            "diag": {"commands": commands, "resting_mean": 68.6, "resting_max": 120,
                     "fok_pct": 25.0, "cancel_hit_pct": 9.5},
            "counters": counters or {"filled": 3, "trades": 4, "remaining_sum": 11},
            "counters_engine": "v3"}


def lim(rounds=5, commands=4000, remaining=12):
    a = [200.0, 210.0, 190.0, 205.0, 220.0, 180.0][:rounds]
    b = [100.0, 100.0, 100.0, 100.0, 100.0, 100.0][:rounds]
    return {"commands": commands, "orders": rotations(PAIR, rounds),
            "ns_op": {"v0": a, "v1": b},
            "counters": {"v0": {"remaining_sum": remaining}, "v1": {"remaining_sum": remaining}},
            "load": 1.234}


def sweep(ratios=(1.5, 3.0)):
    return [{"stream": f"lob, {n:,} commands", "commands": n, "resting_mean": 10.0 * (i + 1),
             "resting_max": 20 * (i + 1), "v1/v2": r, "scan_over_rest": r - 1}
            for i, (n, r) in enumerate(zip((1000, 4000), ratios, strict=False))]


def durations(p50=100, tail=500, n=2000):
    """n samples: 98% at p50, the rest at tail (p99 lands on the tail)."""
    k = int(n * 0.98)
    return np.array([p50] * k + [tail] * (n - k), dtype=np.int64)


def fake_capture(by_engine):
    def capture(engine, wl):
        return {"durations": by_engine[engine], "clock": {"source": "fake",
                                                         "overhead_median_ns": 20.0}}
    return capture


def checked(t: K.Conclusion) -> K.Conclusion:
    assert t.check() == [], t.check()
    return t


# --- parameters and vocabulary ------------------------------------------------------------------

def test_check_parameters():
    fok.check_parameters(LINEAGE, PAIR)
    with pytest.raises(ValueError, match="pairs must be >= 1"):
        fok.check_parameters(LINEAGE, PAIR, pairs=0)
    with pytest.raises(ValueError, match="limit_max_repeat must be >= 1"):
        fok.check_parameters(LINEAGE, PAIR, limit_max_repeat=0)
    with pytest.raises(ValueError, match="lineage needs"):
        fok.check_parameters(["v0", "v1"], PAIR)
    with pytest.raises(ValueError, match="limit_pair needs two"):
        fok.check_parameters(LINEAGE, ["v0"])


def test_step_and_fok_rule(monkeypatch):
    assert fok.step("v0", "v1") == "levels, best"
    assert fok.step("v1", "v2") == "fok"
    assert fok.fok_of("v2") == "early_exit" and fok.fok_of("v3@numba") == "level_sums"
    real = fok.toggles_of
    monkeypatch.setattr(fok, "toggles_of", lambda e: {} if e == "c" else real(e))
    assert fok.step("v2", "c") == "another engine"
    assert fok.fok_of("c") == "own"
    assert fok.step("v0@cpp", "v1@cpp") == "levels, best"  # lob's C++ build: its toggles
    assert fok.step("v2@cpp", "v2@numba") == "another backend (numba)"


# --- the comprehensive stream -------------------------------------------------------------------

def test_comprehensive_table():
    t = checked(fok.comprehensive_table({**comp(), "rounds": 3}, LINEAGE))
    assert [r["vs_previous"] for r in t.rows] == [None, 2.0, 5.0, 1.25]
    assert [r["step"] for r in t.rows] == ["", "levels, best", "fok", "fok"]
    assert t.text == ("On 4,000 commands, in the fastest of 3 interleaved rounds, v1 over v0 is "
                      "2.00x (step: levels, best), and v2 over v1 is 5.00x (step: fok).")
    assert t.note.startswith("ns_op: for each engine, the fastest of 3 interleaved rounds (a "
                             "floor, with no interval")
    one = checked(fok.comprehensive_table({**comp(), "rounds": 1}, LINEAGE))
    assert one.text.startswith("On 4,000 commands, in one round, v1 over v0 is 2.00x")
    assert one.note.startswith("ns_op: for each engine, one round (one measurement, with no "
                               "interval")


def test_regime():
    s = fok.regime(comp()["diag"])
    assert list(s.index) == list(fok.REGIME_KEYS) and s["fok_pct"] == 25.0


def test_measure_comprehensive_runs_the_lineage():
    from lob.workloads import build

    wl = build(fok.COMPREHENSIVE, scale=0.0005)
    c = fok.measure_comprehensive(["v0", "v1", "v2"], wl, 1, "v3")
    assert c["commands"] == len(wl.commands) and set(c["ns_op"]) == {"v0", "v1", "v2"}
    assert c["rounds"] == 1
    assert all(x > 0 for x in c["ns_op"].values())
    assert c["diag"]["commands"] == len(wl.commands) and c["diag"]["fok_pct"] > 0
    assert c["counters_engine"] == "v3" and c["counters"]["trades"] > 0
    sw = fok.measure_depth_sweep(["v0", "v1", "v2"], c, 0.0005, [0.00025], 1)
    assert [r["commands"] for r in sw] == sorted(r["commands"] for r in sw)
    assert sw[-1]["v1/v2"] == c["ns_op"]["v1"] / c["ns_op"]["v2"]
    assert sw[0]["commands"] < sw[-1]["commands"] and sw[0]["resting_mean"] > 0


def test_measure_comprehensive_refuses_disagreeing_engines():
    wl = SimpleNamespace(commands=[0] * 10)

    def replay(e, w):
        return SimpleNamespace(elapsed_ns=100, checksum=hash(e))
    with pytest.raises(RuntimeError, match="engines disagree on the comprehensive stream"):
        fok.measure_comprehensive(["v0", "v1", "v2"], wl, 1, "v2", replay=replay)


TWIN = fok.aa_name("v2")


def with_pairs(v1, v2, twin, commands=4000):
    c = comp(commands)
    c["pairs"] = {"orders": rotations(["v1", "v2", TWIN], len(v1)),
                  "ns_op": {"v1": list(v1), "v2": list(v2), TWIN: list(twin)}}
    return c


FIVE = (1000, 1010, 990, 1005, 995)
FLAT = (10, 10.2, 9.9, 10.1, 10)
AA = (10.1, 10, 10, 10.2, 9.8)


def test_measure_comprehensive_with_pairs_runs_v2_twice_in_every_round():
    from lob.workloads import build

    wl = build(fok.COMPREHENSIVE, scale=0.00025)
    calls = []

    def replay(e, w):
        from lob.engines.registry import replay as real

        calls.append(e)
        return real(e, w)
    c = fok.measure_comprehensive(["v0", "v1", "v2"], wl, 2, "v2", pairs=5, replay=replay)
    p = c["pairs"]
    assert set(c["ns_op"]) == {"v0", "v1", "v2"}  # the copy is not a lineage engine
    # each warmed once (v2 and its copy), then 5 rounds of the pair and 2 of the lineage
    assert calls.count("v1") == 6 and calls.count("v2") == 12 and calls.count("v0") == 3
    assert [len(p["ns_op"][e]) for e in ("v1", "v2", TWIN)] == [5, 5, 5]
    # the lineage's two rounds (v0 first, then last), then three more continuing the rotation
    assert p["orders"] == [["v1", "v2", TWIN], ["v1", "v2", TWIN], [TWIN, "v1", "v2"],
                           ["v1", "v2", TWIN], ["v2", TWIN, "v1"]]
    assert fok.measure_comprehensive(["v0", "v1", "v2"], wl, 1, "v2")["pairs"] is None
    sw = fok.measure_depth_sweep(["v0", "v1", "v2"], c, 0.00025, [], 1)
    assert sw[0]["v1/v2"] == fok.v1_v2_interval(c, ["v0", "v1", "v2"])["ratio"]


def test_v1_v2_pairs_table_faster_beyond_the_aa_band():
    c = with_pairs(FIVE, FLAT, AA)
    vi = fok.v1_v2_interval(c, LINEAGE)
    assert vi["n"] == 5 and vi["ratio"] == 100.0 and vi["ci"][0] < 100 < vi["ci"][1]
    assert vi["aa_ratios"] == pytest.approx([b / a for a, b in zip(FLAT, AA, strict=True)])
    t = checked(fok.v1_v2_pairs_table(c, LINEAGE))
    assert [r["order"] for r in t.rows[:2]] == ["v1, v2, v2 (A/A)", "v2, v2 (A/A), v1"]
    lo, hi = (t.cell("median", k) for k in ("interval_low", "interval_high"))
    alo, ahi = (t.cell("median", k) for k in ("aa_low", "aa_high"))
    assert t.text == (f"On 4,000 commands, v2 is 100x as fast as v1 over 5 interleaved rounds "
                      f"(interval {lo}-{hi}). v2 run twice in the same rounds differs by "
                      f"{alo}-{ahi}x (the A/A band); v2 is faster than v1 beyond it.")
    assert ("95% percentile-bootstrap interval of the ratio of the medians of 5 and 5 "
            "interleaved rounds") in t.note


TEN = tuple(x * 10 for x in FLAT)


@pytest.mark.parametrize(("v1", "v2", "twin", "words"), [
    ((10, 10.1, 9.9, 10.2, 10), TEN, tuple(x * 10 for x in AA),
     "v2 is slower than v1 beyond it"),
    ((10.01, 10.2, 9.9, 10.1, 10), FLAT, (11, 9, 10, 10.2, 9.8),
     "the difference lies inside it: within noise"),
    ((10.4, 10.6, 10.3, 10.5, 10.4), FLAT, (10.3, 9.9, 10.2, 10.4, 9.7),
     "the interval reaches into it: inconclusive"),
])
def test_v1_v2_pairs_table_calls(v1, v2, twin, words):
    t = checked(fok.v1_v2_pairs_table(with_pairs(v1, v2, twin), LINEAGE))
    assert t.text.endswith(f"(the A/A band); {words}."), t.text


def test_v1_v2_pairs_table_too_few_rounds():
    t = checked(fok.v1_v2_pairs_table(with_pairs(FIVE[:2], FLAT[:2], AA[:2]), LINEAGE))
    assert t.rows[-1]["interval_low"] is None and t.rows[-1]["aa_low"] is None
    assert t.text == ("On 4,000 commands, v2 is 99.5x as fast as v1 over 2 interleaved rounds; "
                      "too few rounds for an interval, so no call.")


# --- the limit-only pairs -----------------------------------------------------------------------

def test_collected_replay_keeps_the_time_and_the_checksum_and_counters_of_the_replay():
    wl = lob.workload(fok.LIMIT_ONLY, scale=0.0005)
    rr = lob.replay("v1", wl)
    kept = fok._collected_replay("v1", wl)
    assert kept.elapsed_ns > 0 and not hasattr(kept, "book")  # no pure-Python book kept alive
    assert kept.checksum == rr.checksum and kept.counters == rr.counters
    assert kept.counters["remaining_sum"] > 0


def test_measure_limit_pairs_interleaves():
    calls = []

    def replay(e, wl):
        calls.append(e)
        return SimpleNamespace(elapsed_ns={"v0": 2, "v1": 1}[e] * len(wl.commands), checksum=7,
                               counters={"remaining_sum": 5})
    m = fok.measure_limit_pairs(PAIR, 0.0005, 3, replay=replay)
    assert calls == ["v0", "v1"] + ["v0", "v1", "v1", "v0", "v0", "v1"]  # a warm-up first
    assert m["orders"] == [["v0", "v1"], ["v1", "v0"], ["v0", "v1"]]
    assert m["ns_op"] == {"v0": [2.0] * 3, "v1": [1.0] * 3}
    assert m["counters"]["v1"] == {"remaining_sum": 5} and m["load"] >= 0
    assert (m["looks"], m["cap"], m["cleared"]) == (1, 3, False)  # no interval from 3 pairs


def sequential_replay(v0_ns):
    """v1 at 100 ns/op; v0 at the next of ``v0_ns`` each time a round runs it (its
    warm-up, the first call, at 1 ns/op and untimed)."""
    it = iter(v0_ns)
    warm = set()

    def replay(e, wl):
        ns = 100.0 if e != "v0" else next(it) if e in warm else 1.0
        warm.add(e)
        return SimpleNamespace(elapsed_ns=ns * len(wl.commands), checksum=7,
                               counters={"remaining_sum": 5})
    return replay


def test_measure_limit_pairs_adds_abba_blocks_while_the_interval_straddles_an_edge():
    # 4 pairs give no interval: one ABBA block more, then the interval of 6 clears the edges
    m = fok.measure_limit_pairs(PAIR, 0.0005, 4, limit_max_repeat=8, edges=(1.0, 2.65),
                                replay=sequential_replay([200] * 10))
    assert len(m["orders"]) == 6 and m["looks"] == 2 and m["cleared"]
    assert m["orders"][4:] == [["v0", "v1"], ["v1", "v0"]]  # the rotation continues: ABBA
    assert m["level"] == pytest.approx(1 - 0.1 / 3)  # Bonferroni over the 3 looks allowed
    # still straddling at the cap: stops there, not cleared
    m = fok.measure_limit_pairs(PAIR, 0.0005, 6, limit_max_repeat=9, edges=(2.0,),
                                replay=sequential_replay([200, 210, 190, 220, 180, 200] * 2))
    assert len(m["orders"]) == 9 and m["looks"] == 3 and not m["cleared"]
    # clear from the start: no more rounds
    m = fok.measure_limit_pairs(PAIR, 0.0005, 6, limit_max_repeat=10, edges=(1.0, 2.65),
                                replay=sequential_replay([200, 210, 190, 220, 180, 200]))
    assert len(m["orders"]) == 6 and m["looks"] == 1 and m["cleared"]


def test_sixteen_pairs_keep_two_low_pairs_off_the_edge_that_six_could_not():
    """lob's v0/v1 sits ~4% above the tolerance edge with a pair-to-pair spread of ~3.5%:
    six pairs give an interval that is their whole range, so one low pair put it across the
    edge (r3). Sixteen pairs in one look give the 5th to 12th of 16 (92.3%)."""
    v0 = [168, 172, 158.4, 170, 166, 174, 169, 134, 167, 173, 165, 171, 156, 168, 172, 166]
    six = fok.measure_limit_pairs(PAIR, 0.0005, 6, limit_max_repeat=6, edges=(1.59,),
                                  replay=sequential_replay(v0))  # v1 at 100: ratio = v0 / 100
    assert not six["cleared"] and len(six["orders"]) == 6
    many = fok.measure_limit_pairs(PAIR, 0.0005, 16, limit_max_repeat=16, edges=(1.59,),
                                   replay=sequential_replay(v0))
    assert many["cleared"] and len(many["orders"]) == 16 and many["looks"] == 1
    mi = fok.limit_interval(many, PAIR)[1]
    assert mi["ci"] == pytest.approx((1.66, 1.71)) and mi["what"].startswith("92.3% interval")


def test_claim_edges_are_the_pivot_and_the_tolerance_band():
    from lob.studies.claims import get

    c = get("s001_v0_v1_limit_only")
    assert fok.claim_edges() == pytest.approx(
        (1.0, c.value * (1 - c.tolerance), c.value * (1 + c.tolerance)))


def limit_with(v0, v1, cleared=True):
    return {"commands": 4000, "orders": rotations(PAIR, len(v0)),
            "ns_op": {"v0": list(v0), "v1": list(v1)},
            "counters": {e: {"remaining_sum": 12} for e in PAIR}, "load": 1.0,
            "level": 0.95, "cleared": cleared}


def test_limit_aa_pairs_each_engines_two_rounds_of_an_abba_block():
    ratios, band = fok.limit_aa(limit_with([100, 110, 100, 90, 100], [50, 55, 50, 45, 60]),
                                PAIR)
    assert ratios == pytest.approx([1.1, 0.9, 1.1, 0.9])  # the fifth round has no partner
    assert band["low"] is None
    ratios, band = fok.limit_aa(limit_with([100, 110, 100, 90, 100, 100], [50] * 6), PAIR)
    # log ratios +-0.1 and four zeros: median 0, MAD 0, so the scaled mean deviation sets it
    dev = np.mean(np.abs(np.log(ratios))) * np.sqrt(np.pi / 2)
    assert len(ratios) == 6 and band["high"] == pytest.approx(np.exp(1.959964 * dev), rel=1e-4)


def test_limit_table_with_an_interval():
    t = checked(fok.limit_table(lim(5), PAIR))
    med = t.rows[-1]
    assert med["pair"] == "median" and med["ratio"] == 2.05
    ci = fok.limit_interval(lim(5), PAIR)[1]["ci"]
    assert (med["interval_low"], med["interval_high"]) == ci and ci[0] < 2.05 < ci[1]
    assert [r["order"] for r in t.rows[:2]] == ["v0, v1", "v1, v0"]
    assert ci == (1.9, 2.2)
    assert t.text == ("On the limit-only stream (4,000 commands), v1 is 2.05x as fast as v0, "
                      "the median of 5 interleaved pairs (step: levels, best); its interval is "
                      "1.90-2.20: it lies clear of the claim's pivot and tolerance edges (the "
                      "rounds reached their cap). Too few A/A ratios for a band: inconclusive.")
    across = checked(fok.limit_table({**lim(5), "ns_op": {"v0": [150.0, 170, 160, 165, 158],
                                                          "v1": [100.0] * 5}}, PAIR))
    assert ("it still holds 1 of the claim's pivot and tolerance edges (claims.yaml): no "
            "verdict on this interval") in across.text
    assert "93.8% interval of the median of 5 interleaved pairs" in t.note


def test_limit_table_without_an_interval():
    t = checked(fok.limit_table(lim(2), PAIR))
    assert t.rows[-1]["interval_low"] is None
    assert t.text.endswith("the median of 2 interleaved pairs (step: levels, best); too few "
                           "pairs for an interval.")


@pytest.mark.parametrize(("v0", "v1", "words"), [
    ([200, 202, 198, 201, 199, 200], [100] * 6, "v1 is faster than v0 beyond it"),
    ([50, 50.5, 49.5, 50.2, 49.8, 50], [100] * 6, "v1 is slower than v0 beyond it"),
    ([100, 130, 100, 77, 100.5, 100.2], [100, 110, 99.8, 90, 100.1, 100],
     "the difference lies inside it: within noise"),
    ([100, 103, 110, 107, 104, 102], [100] * 6, "the interval reaches into it: inconclusive"),
])
def test_limit_table_calls_the_change_against_the_aa_band(v0, v1, words):
    t = checked(fok.limit_table(limit_with(v0, v1), PAIR))
    med = t.rows[-1]
    cut = [e for e in fok.claim_edges() if med["interval_low"] <= e <= med["interval_high"]]
    # the sentence is of the interval shown, never against what it shows
    assert ("it lies clear of the claim's pivot and tolerance edges" in t.text) == (not cut)
    assert "the rounds stopped when the sequential look's interval cleared them" in t.text
    assert t.text.endswith(f"(the A/A band); {words}."), t.text
    med = t.rows[-1]
    assert t.cell("median", "aa_low") in t.text and med["aa_high"] > 1


# --- the counters -------------------------------------------------------------------------------

PUBLISHED = {"trades": 4, "remaining_sum": 11, "limit_only_remaining_sum": 12}


def test_counters_table_short_streams():
    t = checked(fok.counters_table(comp(), lim(), PAIR, published=PUBLISHED))
    assert t.text.startswith("These streams are shorter than the seed's")
    assert [r["counter"] for r in t.rows] == list(PUBLISHED)


def test_counters_table_full_and_equal():
    n = fok.SEED_COMMANDS
    t = checked(fok.counters_table(comp(n), lim(commands=n), PAIR, published=PUBLISHED))
    assert all(r["equal"] for r in t.rows)
    assert t.text == "Every published counter is reproduced exactly."


def test_counters_table_full_and_different():
    n = fok.SEED_COMMANDS
    t = checked(fok.counters_table(comp(n), lim(commands=n, remaining=13), PAIR,
                                   published={**PUBLISHED, "missing": 1}))
    assert t.text == "Counters that differ: limit_only_remaining_sum, missing."


def test_counters_table_reads_the_published_claim():
    t = fok.counters_table(comp(), lim(), PAIR)
    assert "matched_volume" in [r["counter"] for r in t.rows]


# --- latency ------------------------------------------------------------------------------------

def test_measure_latency_and_its_table(tmp_path):
    cap = fake_capture({"v1": durations(100, 2000), "v2": durations(100, 300),
                        "v3": durations(100, 300, n=500)})
    lat = fok.measure_latency(["v1", "v2", "v3"], None, tmp_path, capture=cap)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f"{e}__cpp_comprehensive.hgrm" for e in ("v1", "v2", "v3")]
    assert [r["p99/p50"] for r in lat["rows"]] == [20.0, 3.0, None]
    t = checked(fok.latency_table(lat))
    assert t.text == ("v1's p99 over its p50 is 20, a wide tail. v2's p99 over its p50 is "
                      "3.00, a narrow tail. v3's p99 over its p50: not measured. Percentiles "
                      "hidden for want of samples: v1 (p99.9, p99.99); v2 (p99.9, p99.99); "
                      "v3 (p99, p99.9, p99.99).")
    assert "Clock fake" in t.note
    # the grid the samples fall on, measured from them, goes under the table
    assert lat["clock"]["grid_ns"] == pytest.approx(100) and lat["clock"]["grid_n"] == 500
    assert t.note == K.clock_line(lat["clock"])
    v2 = lat["clocks"]["v2"]
    assert v2["tick_ns"] == pytest.approx(100) and v2["percentiles"] == {"p50": 100.0,
                                                                         "p99": 300.0}
    assert lat["clocks"]["v3"]["percentiles"] == {"p50": 100.0}  # p99 unsupported: left out


def test_with_grid_keeps_a_measured_grid_and_a_missing_clock():
    assert fok.with_grid(None, durations()) is None
    assert fok.with_grid({"grid_ns": 7.0}, durations()) == {"grid_ns": 7.0}
    assert fok.with_grid({"source": "x"}, [0, 0]) == {"source": "x"}
    g = fok.with_grid({"source": "x"}, np.array([30, 50, 70] * 100))
    assert g["grid_ns"] == pytest.approx(10, rel=0.01) and g["grid_share"] == 1.0
    # only the short durations are read (milliseconds would make the grid search explode),
    # and too few of them measure no grid
    g = fok.with_grid({"source": "x"}, np.array([30, 50, 70] * 40 + [16_000_003] * 500))
    assert g["grid_ns"] == pytest.approx(10, rel=0.01) and g["grid_n"] == 120
    assert fok.with_grid({"source": "x"}, np.array([30] * 99 + [5000] * 900)) == {"source": "x"}


# --- the machine effect -------------------------------------------------------------------------

ME = {"seed": 13.1, "seed_machine": "M", "low": 20.0, "high": 21.0, "machine": "VM",
      "factor_low": 20.0 / 13.1, "factor_high": 21.0 / 13.1, "tolerance": 0.3}


def test_machine_effect_comes_from_the_cpp_build_measured_in_the_run():
    from lob.studies.claims import get

    c = get("s001_v1_v2_comprehensive")
    cpp = {"ci": (20.0, 21.0), "engines": ["v1@cpp", "v2@cpp"], "commands": 2_000_000}
    me = fok.machine_effect(cpp)
    assert (me["seed"], me["tolerance"], me["seed_machine"]) == (c.value, c.tolerance,
                                                                  c.machine)
    assert (me["low"], me["high"]) == (20.0, 21.0)
    assert me["factor_high"] == pytest.approx(21.0 / c.value)
    assert me["machine"] == "this machine: v1@cpp / v2@cpp, g++ -O3, 2,000,000 commands"
    none = fok.machine_effect(None)  # no C++ build here (no compiler): no figure, no call
    assert none["low"] is None and none["factor_low"] is None


def test_the_cpp_pair_reuses_the_lineages_rounds_or_runs_its_own():
    c = with_pairs(FIVE, FLAT, AA)
    lineage = ["v0@cpp", "v1@cpp", "v2@cpp"]
    c["pairs"]["ns_op"] = {"v1@cpp": list(FIVE), "v2@cpp": list(FLAT),
                           fok.aa_name("v2@cpp"): list(AA)}
    got = fok.measure_cpp_v1_v2(c, lineage, None, 5, replay=lambda e, w: 1 / 0)  # no replay
    assert got["ratio"] == fok.v1_v2_interval(c, lineage)["ratio"] and got["n"] == 5
    from lob.workloads import build

    wl = build(fok.COMPREHENSIVE, scale=0.00025)
    ran = []

    def replay(name, w):
        ran.append(name)
        return lob.replay("v2", w)

    got = fok.measure_cpp_v1_v2(comp(), LINEAGE, wl, 2, engines=["v1", "v2"], replay=replay)
    assert got["n"] == 5 and got["engines"] == ["v1", "v2"]  # at least 5 rounds
    assert set(ran) == {"v1", "v2"}  # the A/A copy runs as v2


@pytest.mark.parametrize(("ci", "end"), [
    ((90.0, 110.0), "beyond what the machine alone explains (above)."),
    ((5.0, 9.0), "beyond what the machine alone explains (below)."),
    ((18.0, 30.0), "within what the machine alone (and the tolerance) explains."),
])
def test_machine_effect_table_places_lob_beside_the_machine_effect(ci, end):
    t = checked(fok.machine_effect_table({"ci": ci}, ME, LINEAGE))
    assert t.sentences[0] == (
        "On this machine the seed's design gives v1/v2 20-21x against 13.1x published, "
        "1.53-1.60x the published figure: more than the claim's tolerance of +-30%, so a "
        "ratio measured on another machine (and compiler) can miss the seed's by more than "
        "the tolerance with no difference in the design.")
    assert t.value("v1 / v2, interval low", "over C++ build") == ci[0] / 21.0
    assert t.sentences[1].startswith(f"v1 / v2's {K.fmt(ci[0])}-{K.fmt(ci[1])}x is ")
    assert t.sentences[1].endswith(end)


def test_machine_effect_table_within_tolerance_and_without_an_interval():
    me = {**ME, "low": 14.0, "high": 15.0, "factor_low": 14 / 13.1, "factor_high": 15 / 13.1}
    t = checked(fok.machine_effect_table({"ci": None}, me, LINEAGE))
    assert t.text == ("On this machine the seed's design gives v1/v2 14-15x against 13.1x "
                      "published, 1.07-1.15x the published figure: within the claim's "
                      "tolerance of +-30%. v1 / v2 has no interval here, so no call on it.")
    assert len(t.rows) == 3
    t = checked(fok.machine_effect_table({"ci": (1.0, 2.0)}, fok.machine_effect(None),
                                         LINEAGE))
    assert "has no interval in this run" in t.text and len(t.rows) == 1


# --- v1's limit-only gain split between pool and bitmask -----------------------------------------

def test_limit_split_gives_each_step_its_interval_and_share_of_the_gain():
    lm = limit_with([400.0] * 6, [100.0, 101, 99, 100, 100.5, 99.5])
    lm["ns_op"]["v0+pool"] = [200.0, 202, 198, 200, 201, 199]  # pool: 2x, bitmap then 2x
    lm["ns_op"]["v0+bitmap"] = [360.0, 364, 356, 360, 362, 358]  # bitmap alone: ~1.1x
    rows = fok.limit_split(lm, PAIR, ["v0+pool", "v0+bitmap"])
    by = {r["step"]: r for r in rows}
    assert [r["step"] for r in rows] == ["v0 -> v0+pool", "v0+pool -> v1", "v0 -> v0+bitmap",
                                         "v0+bitmap -> v1"]
    assert by["v0 -> v0+pool"]["ratio"] == pytest.approx(2.0)
    assert by["v0 -> v0+pool"]["share_of_gain"] == pytest.approx(0.5, abs=0.01)
    assert by["v0 -> v0+bitmap"]["share_of_gain"] == pytest.approx(np.log(400 / 360) / np.log(4),
                                                                  rel=0.01)
    low, high = by["v0+pool -> v1"]["interval_low"], by["v0+pool -> v1"]["interval_high"]
    assert low <= by["v0+pool -> v1"]["ratio"] <= high
    t = checked(fok.limit_split_table(lm, PAIR, ["v0+pool", "v0+bitmap"]))
    assert len(t.sentences) == 4 and t.sentences[0].startswith("v0 -> v0+pool (")
    assert "of the gain" in t.sentences[0]
    m = fok.claims(LINEAGE, PAIR, comp(), lm, sweep(), SEED, lat_rows(["v3"]),
                   split=["v0+pool"])
    ex = m["s001_v0_v1_limit_only"]["explain"]
    assert list(ex) == [f"v0 -> v0+pool ({fok.step('v0', 'v0+pool')})",
                        f"v0+pool -> v1 ({fok.step('v0+pool', 'v1')})"]
    assert ex[f"v0 -> v0+pool ({fok.step('v0', 'v0+pool')})"].startswith("2x (")
    assert checked(fok.limit_split_table(lm, PAIR, [])).text.startswith("No single-step")


def test_the_limit_rounds_carry_the_single_steps():
    calls = []

    def replay(name, w):
        calls.append(name)
        return lob.replay("v2", w)

    lm = fok.measure_limit_pairs(PAIR, 0.0005, 2, limit_max_repeat=2, edges=(), replay=replay,
                                 split=["v0+pool"])
    assert set(lm["ns_op"]) == {"v0", "v1", "v0+pool"}
    assert all(len(x) == 2 for x in lm["ns_op"].values())
    # split_repeat: the single steps in the first rounds only, the pair alone after them
    calls.clear()
    lm = fok.measure_limit_pairs(PAIR, 0.0005, 5, limit_max_repeat=5, edges=(), replay=replay,
                                 split=["v0+pool"], split_repeat=2)
    assert [len(lm["ns_op"][e]) for e in ("v0", "v1", "v0+pool")] == [5, 5, 2]
    assert calls.count("v0+pool") == 1 + 2  # its warm-up and two rounds
    assert [len(o) for o in lm["orders"]] == [3, 3, 2, 2, 2]
    assert lm["orders"][2:4] == [["v0", "v1"], ["v1", "v0"]]  # the pair alone, still ABBA
    rows = fok.limit_split(lm, PAIR, ["v0+pool"])  # over the two rounds all three ran
    assert [r["n"] for r in rows] == [2, 2]
    checked(fok.limit_table(lm, PAIR))  # every pair in its table


# --- the depth sweep ----------------------------------------------------------------------------

def test_depth_sweep_grows():
    t = checked(fok.depth_sweep_table(sweep(), LINEAGE, SEED))
    assert t.rows[-1]["stream"] == SEED["stream"] and "machine" not in t.columns
    assert t.text == ("v1/v2 grows with the book: 1.50x at a mean depth of 10 resting orders, "
                      "3.00x at 20. The seed's 13.1x was measured on the 2,000,000-command "
                      "stream, whose depth this run did not reach (a smaller scale): lob's "
                      "ratio at the seed's depth is not measured here.")
    assert "hence" not in t.text  # no identity offered as an explanation


def test_the_seed_sits_at_its_own_streams_depth():
    full = [*sweep(), {"stream": "lob, 2,000,000 commands", "commands": fok.SEED_COMMANDS,
                       "resting_mean": 27040.0, "resting_max": 40000, "v1/v2": 9.0,
                       "scan_over_rest": 8.0}]
    seed = fok.seed_sweep_row(full)
    assert seed["resting_mean"] == 27040.0
    t = checked(fok.depth_sweep_table(full, LINEAGE, seed))
    assert t.text.endswith("The seed's 13.1x (its machine) is at its stream's mean depth of "
                           "27,040 resting orders, where lob's is 9.00x.")
    fig = fok.plot_v1_v2_vs_depth(full, LINEAGE, seed)
    (ax,) = fig.axes
    pt = ax.get_lines()[1]
    assert list(pt.get_xdata()) == [27040.0] and list(pt.get_ydata()) == [seed["v1/v2"]]
    assert fok.seed_sweep_row(sweep())["resting_mean"] is None


def test_depth_sweep_does_not_grow():
    t = checked(fok.depth_sweep_table(sweep((3.0, 1.5)), LINEAGE, SEED))
    assert t.text.startswith("v1/v2 does not grow with the book here: 3.00x at a mean depth of "
                             "10 resting orders, 1.50x at 20.")


def test_depth_sweep_one_stream():
    t = checked(fok.depth_sweep_table(sweep((2.5,)), LINEAGE, SEED))
    assert t.text.startswith("One stream only: v1/v2 is 2.50x at a mean depth of 10 resting "
                             "orders.")


def test_seed_sweep_row_is_the_published_claim():
    r = fok.seed_sweep_row()
    assert r["commands"] == fok.SEED_COMMANDS and r["v1/v2"] > 10
    assert r["scan_over_rest"] == pytest.approx((765.1 - 58.6) / 58.6)
    assert r["machine"] in r["stream"]


def test_plot_v1_v2_vs_depth():
    fig = fok.plot_v1_v2_vs_depth(sweep(), LINEAGE, SEED)
    (ax,) = fig.axes
    line = ax.get_lines()[0]
    assert list(line.get_xdata()) == [10.0, 20.0] and list(line.get_ydata()) == [1.5, 3.0]
    assert len(ax.get_lines()) == 1  # no horizontal seed line across depths it did not run
    assert "its point is not drawn" in ax.get_title()
    assert ax.get_xlabel().startswith("mean resting orders")


# --- the worst-case FOK check -------------------------------------------------------------------

def fd(few=False):
    rows = []
    for e, slope in (("v1", 10.0), ("v3", 0.0)):
        for dep in (1000, 100):  # out of order: the table sorts
            rows.append({"engine": e, "depth": dep, "count": 5 if few and e == "v3" else 400,
                         "p50": "n<20" if few and e == "v3" else 100.0 + slope * dep,
                         "p90": 200.0})
    return {"rows": rows, "clock": {"source": "fake", "overhead_median_ns": 20.0}}


def test_measure_fok_depth():
    cap = fake_capture({"v1": durations(300, 400, n=400), "v2": durations(100, 200, n=400)})
    real = cap

    def cap(e, w):  # a capture that measured its own grid (of its samples alone)
        return {**real(e, w), "clock": {**real(e, w)["clock"], "grid_ns": 1.0, "grid_n": 1}}
    m = fok.measure_fok_depth(["v1", "v2"], [100, 200], 50, capture=cap)
    assert [(r["engine"], r["depth"]) for r in m["rows"]] == [
        ("v1", 100), ("v2", 100), ("v1", 200), ("v2", 200)]
    assert m["rows"][0]["p50"] == 300.0 and set(m["rows"][0]) == {"engine", "depth", "count",
                                                                  "p50", "p90"}
    assert m["clock"]["grid_ns"] == pytest.approx(100) and m["clock"]["grid_n"] == 1600


def test_fok_depth_table():
    t = checked(fok.fok_depth_table(fd()))
    assert [(r["engine"], r["depth"]) for r in t.rows] == [
        ("v1", 100), ("v1", 1000), ("v3", 100), ("v3", 1000)]
    assert t.text == ("v1 (full): p50 1,100 ns at depth 100, 10,100 ns at 1,000 (9.18x, 10.1 ns "
                      "per order walked). v3 (level_sums): p50 100 ns at depth 100, 100 ns at "
                      "1,000 (1.00x).")
    assert t.value(("v1", 1000), "ns_per_order_walked") == pytest.approx(10.1)
    assert t.value(("v3", 1000), "ns_per_order_walked") is None


def test_fok_depth_table_too_few_probes():
    t = checked(fok.fok_depth_table(fd(few=True)))
    assert t.value(("v3", 1000), "p50_vs_shallowest") is None
    assert t.text.endswith("v3 (level_sums): too few probes for a p50 at depth 100 or 1,000.")


def test_plot_fok_vs_depth():
    fig = fok.plot_fok_vs_depth(fd())
    (ax,) = fig.axes
    lines = ax.get_lines()
    assert [ln.get_label() for ln in lines] == ["v1 (full)", "v3 (level_sums)"]
    assert list(lines[0].get_xdata()) == [100, 1000]
    assert list(lines[0].get_ydata()) == [1100.0, 10100.0]
    fig = fok.plot_fok_vs_depth(fd(few=True))
    assert len(fig.axes[0].get_lines()[1].get_xdata()) == 0


# --- the claims ---------------------------------------------------------------------------------

def lat_rows(engines, p99=True):
    rows = []
    for i, e in enumerate(engines):
        p = 1000.0 * (i + 1)
        rows.append({"engine": e, "count": 2000, "p50": 100.0, "p99": p if p99 else "n<1000",
                     "p99/p50": p / 100 if p99 else None})
    return {"rows": rows, "clock": {"overhead_median_ns": 20.0}}


def test_claims_all_measured():
    m = fok.claims(LINEAGE, PAIR, comp(), lim(), sweep(), SEED, lat_rows(["v1", "v2"]))
    assert list(m) == ["s001_counters", "s001_v0_v1_limit_only", "s001_v0_v1_comprehensive",
                       "s001_v1_v2_comprehensive", "s001_v2_tail", "s001_v1_v2_p99"]
    assert m["s001_counters"]["value"]["limit_only_remaining_sum"] == 12
    lo = m["s001_v0_v1_limit_only"]
    assert lo["value"] == 2.05 and lo["ci"] == [1.9, 2.2] and lo["diagnostics"]["load_avg"] == 1.23
    assert m["s001_v0_v1_comprehensive"]["value"] == 2.0
    assert m["s001_v0_v1_comprehensive"]["explain"] == {"FOK share of timed submits %": 25.0}
    v12 = m["s001_v1_v2_comprehensive"]
    assert v12["value"] == 5.0 and v12["explain"]["v1/v2 at mean depth 10"] == 1.5
    assert v12["explain"]["v1 scan cost / v2 op cost here (4,000 commands)"] == 2.0
    assert m["s001_v2_tail"]["value"] == 20.0
    assert m["s001_v2_tail"]["explain"] == {"clock read, median ns": 20.0}
    assert m["s001_v1_v2_p99"]["value"] == 0.5


def test_claims_with_pairs_carry_interval_aa_runs_machine_effect_and_clock(tmp_path):
    c = with_pairs(FIVE, FLAT, AA, commands=fok.SEED_COMMANDS)
    cap = fake_capture({"v1": durations(100, 2000), "v2": durations(100, 300)})
    lat = fok.measure_latency(["v1", "v2"], None, tmp_path, capture=cap)
    lm = limit_with([200, 202, 198, 201, 199, 200], [100] * 6)
    m = fok.claims(LINEAGE, PAIR, c, lm, sweep(), SEED, lat, ME)
    v12 = m["s001_v1_v2_comprehensive"]
    vi = fok.v1_v2_interval(c, LINEAGE)
    assert v12["value"] == 100.0 and v12["ci"] == list(vi["ci"]) and v12["runs"] == 5
    assert v12["aa"]["low"] == vi["aa"]["low"] and v12["aa"]["n"] == 5
    assert v12["detail"] == "v1 / v2 ns/op, ratio of the medians"
    ex = v12["explain"]
    assert ex["the seed's design in lob's C++ build (VM)"] == "20-21"
    assert ex["the machine alone moved the seed's ratio (x)"] == "1.53-1.6"
    assert ex["beyond what the machine alone explains"] == "yes (above)"
    assert ex["v1/v2 at mean depth 10"] == 1.5  # the depth explanation stays
    lo = m["s001_v0_v1_limit_only"]
    assert lo["runs"] == 6 and lo["aa"]["n"] == 6 and lo["value"] == 2.0
    tail, p99 = m["s001_v2_tail"], m["s001_v1_v2_p99"]
    assert tail["clock"]["tick_ns"] == pytest.approx(100)
    assert tail["clock"]["percentiles"] == {"p50": 100.0, "p99": 300.0}
    assert p99["clock"]["percentiles"] == {"v1/p99": 2000.0, "v2/p99": 300.0}
    from lob.studies.claims import get, judge

    # judged: the pairs give an interval and the A/A band is far from it
    v = judge(get("s001_v1_v2_comprehensive"), v12)
    assert v.verdict == "direction only" and "beyond what the machine alone explains: yes" \
        in v.reason


def test_claims_without_latency_or_tail():
    m = fok.claims(LINEAGE, PAIR, comp(), lim(2), sweep(), SEED, lat_rows(["v3"]))
    assert "s001_v2_tail" not in m and "s001_v1_v2_p99" not in m
    assert "ci" not in m["s001_v0_v1_limit_only"]
    assert m["s001_v0_v1_limit_only"]["ci_what"].startswith("no interval")
    m = fok.claims(LINEAGE, PAIR, comp(), lim(), sweep(), SEED,
                   lat_rows(["v1", "v2"], p99=False))
    assert m["s001_v2_tail"]["value"] is None and "s001_v1_v2_p99" not in m


def test_latency_table_at_the_pivot_and_nothing_hidden():
    row = {"engine": "v2", "count": 200_000, "warmup_dropped": 0, "p50": 42.0, "p90": 50.0,
           "p99": 420.0, "p99.9": 500.0, "p99.99": 600.0, "p99/p50": 10.0}
    t = checked(fok.latency_table({"rows": [row], "clock": None}))
    assert t.text == "v2's p99 over its p50 is 10, no change beyond the noise band."
    assert t.note == "Clock: not reported by this engine."


# --- an engine that declares less (orderly_chaos: STP NONE only) --------------------------------

WHY = "engine 'oc' does not support STP mode CANCEL_MAKER (it declares: NONE)"


@pytest.fixture
def oc_refuses(monkeypatch):
    from lob.studies import declared

    monkeypatch.setattr(declared, "refusal",
                        lambda e, wl: WHY if e == "oc" and wl.config.stp.name != "NONE" else None)


def stream(stp="CANCEL_MAKER"):
    from lob.semantics import BookConfig, StpMode

    return SimpleNamespace(name="cpp_comprehensive", commands=[0] * 10,
                           config=BookConfig(1, 99, StpMode[stp]))


def test_measure_latency_runs_a_labelled_stp_copy_for_every_engine_beside_a_refusing_one(
        oc_refuses, tmp_path):
    cap = fake_capture({"v2": durations(100, 300), "oc": durations(100, 2000)})
    seen = []

    def copy(engines, wl):
        seen.append(list(engines))
        return stream("NONE"), "cpp_comprehensive: STP CANCEL_MAKER -> NONE for every engine"

    lat = fok.measure_latency(["v2", "oc"], stream(), tmp_path, capture=cap, copy=copy)
    assert [r["engine"] for r in lat["rows"]] == ["v2"]  # the seed's stream: oc not on it
    assert [r["engine"] for r in lat["copy"]["rows"]] == ["v2", "oc"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "oc__cpp_comprehensive_stp_none.hgrm", "v2__cpp_comprehensive.hgrm",
        "v2__cpp_comprehensive_stp_none.hgrm"]
    assert [r["engine"] for r in checked(fok.latency_table(lat)).rows] == ["v2"]
    t = checked(fok.copy_latency_table(lat))
    assert t.name == "latency (cpp_comprehensive, STP NONE copy)"
    assert t.sentences[0] == (
        "The same commands with another STP mode, so an engine that declares only it runs "
        "beside the others: cpp_comprehensive: STP CANCEL_MAKER -> NONE for every engine. "
        "These rows are not the seed's stream.")
    assert t.sentences[2] == "oc's p99 over its p50 is 20, a wide tail."


def test_measure_latency_without_a_refusal_has_no_copy(oc_refuses, tmp_path):
    cap = fake_capture({"v2": durations(100, 300)})
    lat = fok.measure_latency(["v2"], stream(), tmp_path, capture=cap)
    assert lat["copy"] is None and fok.copy_latency_table(lat) is None


def test_measure_comprehensive_refuses_a_lineage_engine_that_declares_less(oc_refuses):
    with pytest.raises(ValueError, match=r"^lineage: engine 'oc' does not support STP mode "
                                         r"CANCEL_MAKER .* belongs in `latency`"):
        fok.measure_comprehensive(["v0", "oc", "v2"], stream(), 1, "v2")


def test_stp_none_copy_of_the_real_stream_when_orderly_chaos_is_built():
    from lob.engines.foreign.adapters import not_built_hint
    from lob.studies import declared
    from lob.workloads import build

    if not_built_hint("orderly_chaos"):
        pytest.skip(not_built_hint("orderly_chaos"))
    wl = build(fok.COMPREHENSIVE, scale=0.0005)
    assert declared.stp_none_copy(["v2"], wl) == (wl, None)
    cp, note = declared.stp_none_copy(["v2", "orderly_chaos"], wl)
    assert cp.config.stp.name == "NONE" and cp.commands is wl.commands
    assert note.startswith("cpp_comprehensive: STP CANCEL_MAKER -> NONE")


# --- v0/v1 on the comprehensive stream: its own interleaved rounds -----------------------------

def test_v0_v1_comprehensive_rounds_give_the_claim_an_interval():
    calls = []

    def replay(name, w):
        calls.append((name, len(w.commands)))
        return lob.replay("v2", w)

    assert fok.measure_v01_pairs(LINEAGE, 0.0005, 0, replay=replay) is None and not calls
    v01 = fok.measure_v01_pairs(LINEAGE, 0.0005, 2, replay=replay)
    assert v01["stream"] == fok.COMPREHENSIVE and v01["commands"] == 1000
    assert {n for n, _ in calls} == {"v0", "v1"} and len(v01["ns_op"]["v0"]) == 2
    t = checked(fok.v01_table(v01, LINEAGE))
    assert t.name == "v0_v1_pairs" and t.sentences[0].startswith(
        "On the comprehensive stream (1,000 commands), v1 is ")
    lm = limit_with([200.0, 202, 198, 201, 199, 200], [100.0] * 6)
    lm["stream"] = fok.COMPREHENSIVE
    m = fok.claims(LINEAGE, PAIR, comp(), lim(2), sweep(), SEED, lat_rows(["v3"]), v01=lm)
    got = m["s001_v0_v1_comprehensive"]
    assert got["value"] == pytest.approx(2.0) and got["ci"] is not None and got["runs"] == 6
    assert got["aa"]["n"] == 6 and got["diagnostics"]["step"] == "levels, best"
    assert got["explain"] == {"FOK share of timed submits %": 25.0}
    one = fok.claims(LINEAGE, PAIR, comp(), lim(2), sweep(), SEED, lat_rows(["v3"]))
    assert one["s001_v0_v1_comprehensive"]["value"] == 2.0  # 100 / 50, one round
    assert one["s001_v0_v1_comprehensive"].get("ci") is None


# --- the v1/v2 p99 over interleaved captures -------------------------------------------------

def test_p99_rounds_give_the_p99_claim_an_interval(tmp_path):
    order = []

    def cap(e, wl):
        order.append(e)
        base = {"v1": 2000, "v2": 300}[e] + len(order)
        return {"durations": durations(100, base), "clock": {"source": "fake"}}

    assert fok.measure_p99_rounds(LINEAGE, None, 0, capture=cap) is None and not order
    pr = fok.measure_p99_rounds(LINEAGE, None, 6, capture=cap)
    assert order[:4] == ["v1", "v2", "v2", "v1"]  # the order alternates
    assert len(pr["ratios"]) == 6 and pr["ci"] is not None and pr["n"] == 6
    assert pr["ci"][0] <= pr["median"] <= pr["ci"][1]
    t = checked(fok.p99_rounds_table(pr))
    assert t.sentences[0].startswith("Over 6 interleaved captures, v1's p99 is ")
    lat = fok.measure_latency(["v1", "v2"], None, tmp_path,
                              capture=fake_capture({"v1": durations(100, 2000),
                                                    "v2": durations(100, 300)}))
    m = fok.claims(LINEAGE, PAIR, comp(), lim(2), sweep(), SEED, lat, p99r=pr)
    got = m["s001_v1_v2_p99"]
    assert got["value"] == pytest.approx(pr["median"]) and got["ci"] == list(pr["ci"])
    assert got["runs"] == 6 and got["detail"].endswith("median of interleaved captures")
    assert got["clock"]["percentiles"] == {"v1/p99": 2000.0, "v2/p99": 300.0}

"""lob.studies.bisection on synthetic samples: the parameter checks, the interleaved walk with
its dropped warm-up, every sentence of every table (and that each quotes only its table),
seed 000's points read from the one published home, the plot and the claim measurements."""

from __future__ import annotations

import matplotlib
import numpy as np
import pytest

from lob.measure.stats import aa_band, change_beyond_aa
from lob.studies import bisection as bi
from lob.studies import published

matplotlib.use("Agg")

NAMES = ["v0", "v0+pool", "v1", "v2"]


def _plan(names=NAMES, metric="p50", workload="stp_sweep", backend=""):
    return {"metric": metric, "path": [n.removesuffix(backend) for n in names],
            "names": list(names), "wl": None, "n_timed": 5000, "workload": workload,
            "backend": backend}


def _walk(levels: dict[str, float], runs: int = 7, spread: float = 0.01,
          aa: float | None = 0.01) -> dict:
    """A walk whose kept runs sit at ``levels`` (a fixed zig-zag of +-spread); the warm-up
    run of each version is twice its level. The A/A control repeats the start version with
    ratios to it of 1 +- ``aa`` (None: a walk without an A/A control)."""
    wiggle = [1 + spread * ((-1) ** i) * (i % 3) / 2 for i in range(runs)]
    samples = {e: [2 * v] + [v * w for w in wiggle] for e, v in levels.items()}
    walk = {"samples": samples, "kept": {e: x[1:] for e, x in samples.items()},
            "dropped": {e: 1 for e in levels}, "clock": None, "durations": {}, "hgrm": []}
    if aa is not None:
        start = next(iter(levels))
        ratios = [1 + aa * ((-1) ** i) for i in range(runs)]
        kept = [x * r for x, r in zip(walk["kept"][start], ratios, strict=True)]
        walk["aa"] = {"name": start + bi.AA, "samples": [2 * levels[start], *kept],
                      "kept": kept, "ratios": ratios, "band": aa_band(ratios)}
    return walk


# --- parameters -------------------------------------------------------------------------------

def test_metric_auto_and_bad_metric():
    assert bi.resolve_metric("auto", "cpp_comprehensive") == "ns_per_op"
    assert bi.resolve_metric("auto", "stp_sweep") == "p50"
    with pytest.raises(ValueError, match="metric must be one of"):
        bi.resolve_metric("p95", "stp_sweep")


@pytest.mark.parametrize("kw, msg", [
    ({"runs": 2}, "runs must be >= 3"),
    ({"start": "v9"}, "not on the lineage chain"),
    ({"start": "v2", "end": "v1"}, "must come before"),
    ({"backend": "@gpu"}, "backend must be one of"),
    ({"start": "v0", "end": "v0+pool", "backend": "@numba"}, "fewer than two versions"),
    ({"metric": "p99", "scale": 0.0001}, "p99 needs 1,000 timed ops"),
])
def test_bad_parameters_are_refused_with_one_line(kw, msg):
    args = {"start": "v0", "end": "v3", "workload": "stp_sweep", "metric": "p50",
            "scale": 0.0001, "runs": 5, "backend": ""} | kw
    with pytest.raises(ValueError, match=msg):
        bi.prepare(args.pop("start"), args.pop("end"), args.pop("workload"), args.pop("metric"),
                   **args)


def test_prepare_walks_only_the_backends_versions():
    plan = bi.prepare("v0", "v2", "stp_sweep", "auto", scale=0.0001,
                      scale_overrides={"stp_sweep": 0.0002}, runs=3, backend="@numba")
    assert plan["path"] == ["v0+pool", "v1", "v2"] and plan["metric"] == "p50"
    assert plan["names"] == ["v0+pool@numba", "v1@numba", "v2@numba"]
    assert plan["n_timed"] == int(plan["wl"].commands["timed"].sum()) > 0
    t = bi.path_table(plan)
    assert t["step from the previous"].iloc[0] == "" and all(t["step from the previous"][1:])
    assert bi.changed("v0", "v0+pool") == "levels: deque -> pool"


def test_the_walk_rotates_and_drops_one_warmup_per_version_with_an_aa_control(tmp_path):
    calls = []

    def fake(engine, wl, metric):
        calls.append(engine)
        d = np.full(1000, 40 + 10 * (len(calls) % 3))
        return float(len(calls)), {"source": "fake"} if metric != "ns_per_op" else None, d

    plan = _plan(NAMES[:3])
    w = bi.measure_walk(plan, 5, tmp_path, measure=fake)
    # four in the interleaving: the three versions and the start again (the A/A control)
    assert calls[:4] == [*NAMES[:3], "v0"] and calls[4:8] == [*NAMES[1:3], "v0", "v0"]
    assert len(calls) == 4 * (5 + bi.WARMUP)
    assert all(len(w["samples"][e]) == 6 and len(w["kept"][e]) == 5 for e in NAMES[:3])
    assert w["kept"]["v0"] == w["samples"]["v0"][1:] and w["dropped"]["v0"] == 1
    aa = w["aa"]
    assert aa["name"] == "v0" + bi.AA and len(aa["kept"]) == 5
    assert aa["ratios"] == [b / a for a, b in zip(w["kept"]["v0"], aa["kept"], strict=True)]
    assert aa["band"]["n"] == 5 and aa["band"]["low"] < 1 < aa["band"]["high"]
    assert w["clock"] == {"source": "fake"} and len(w["durations"]["v1"]) == 5 * 1000
    assert sorted(w["hgrm"]) == ["v0+pool__stp_sweep.hgrm", "v0__stp_sweep.hgrm",
                                 "v1__stp_sweep.hgrm"]  # from the kept runs: no extra capture
    raw = bi.raw_table(w)
    assert raw.shape == (6, 4) and list(raw.columns)[-1] == "v0" + bi.AA
    calls.clear()
    w = bi.measure_walk(plan, 3, None, measure=lambda e, wl, m: (1.0, None))  # ns/op shape
    assert w["durations"] == {} and w["aa"]["band"]["low"] is None  # 3 ratios: no band


# --- the steps table: every sentence --------------------------------------------------------------

def test_one_step_carries_the_walk_and_the_rest_is_noise():
    plan = _plan()
    # the A/A band of ratios 1 +- 1% is 0.97-1.031 (median offset plus 1.96 robust sigmas):
    # steps of 3% straddle its edge
    w = _walk({"v0": 300.0, "v0+pool": 309.0, "v1": 1236.0, "v2": 1273.0})
    c = bi.steps_table(w, plan)
    assert c.check() == []
    whole = c.rows[-1]
    assert whole["change"] == "slower" and whole["called"] and whole["runs"] == 7
    band = w["aa"]["band"]
    for r in c.rows:  # every call is the one against the A/A band
        assert r["change"] == change_beyond_aa(r["ci_low"], r["ci_high"], band)
    assert [r["change"] for r in c.rows[:-1]] == ["inconclusive", "slower", "inconclusive"]
    logs = [abs(np.log(r["ratio"])) for r in c.rows[:-1]]
    assert c.value("v0+pool -> v1", "share_of_change") == pytest.approx(logs[1] / sum(logs))
    assert c.value("v0+pool -> v1", "ratio") == pytest.approx(4.0, rel=0.01)
    s1, s2, s3, s4 = c.sentences
    assert s1.startswith(f"p50 on stp_sweep went from {c.cell(whole['step'], 'median_before')}")
    assert "interval" in s1 and s1.endswith(": slower.")
    assert s2 == (f"The A/A control puts no change at {band['low']:.4g}-{band['high']:.4g} "
                  "here: a step inside that band is within noise.")
    assert s3.startswith("Steps clear of the A/A band: v0+pool -> v1 (slower, ")
    assert "the largest of them is v0+pool -> v1" in s3
    assert s4 == ("Not told apart from noise: v0 -> v0+pool (inconclusive), "
                  "v1 -> v2 (inconclusive).")
    assert "bootstrap" in c.note and "resamples" in c.note
    assert f"A/A control (v0 measured twice in the same interleaving, one ratio per round): " \
           f"{band['what']}." in c.note


def test_a_step_inside_the_aa_band_is_within_noise():
    w = _walk({"v0": 100.0, "v1": 100.3}, spread=0.001, aa=0.05)  # band 0.95-1.05
    c = bi.steps_table(w, _plan(["v0", "v1"]))
    assert c.check() == [] and c.rows[0]["change"] == "within noise"
    assert not c.rows[0]["called"]
    assert c.sentences[2] == "No step's 95% interval lies beyond the A/A band."
    assert c.sentences[3] == "Not told apart from noise: v0 -> v1 (within noise)."
    # the same step, with a tight band, is called: the band, not the interval alone, decides
    tight = bi.steps_table(_walk({"v0": 100.0, "v1": 100.3}, spread=0.001, aa=0.0001),
                           _plan(["v0", "v1"]))
    assert tight.rows[0]["change"] == "slower" and tight.rows[0]["called"]


def test_every_step_called_and_no_quiet_sentence():
    w = _walk({"v0": 100.0, "v0+pool": 80.0, "v1": 60.0, "v2": 40.0})
    c = bi.steps_table(w, _plan(), confidence=0.9)
    assert c.check() == [] and len(c.sentences) == 3
    assert all(r["change"] == "faster" for r in c.rows)
    assert not any(s.startswith("Not told apart") for s in c.sentences)


def test_no_step_clears_the_noise_and_no_interval_from_few_runs():
    w = _walk({"v0": 100.0, "v1": 100.5}, runs=3)  # fewer than 5 a side: no interval, no band
    c = bi.steps_table(w, _plan(["v0", "v1"], metric="ns_per_op"))
    assert c.check() == []
    assert c.rows[-1]["ci_low"] is None and c.rows[-1]["change"] == "inconclusive"
    assert "no interval from 3 runs" in c.sentences[0] and " ns/op (" in c.sentences[0]
    assert c.sentences[1] == ("No A/A band here (3 A/A ratio(s), fewer than 5): no step can be "
                              "told apart from noise, so none is called.")
    assert c.sentences[2] == "No step's 95% interval lies beyond the A/A band."
    assert c.sentences[3].startswith("Not told apart from noise: v0 -> v1")
    c = bi.steps_table(_walk({"v0": 100.0, "v1": 300.0}, aa=None), _plan(["v0", "v1"]))
    assert c.rows[0]["change"] == "inconclusive"  # no A/A control recorded: nothing is called
    assert c.sentences[1].startswith("No A/A band here (no A/A control in this walk)")


def test_a_walk_that_does_not_move_has_no_shares():
    w = _walk({"v0": 100.0, "v1": 100.0}, spread=0.0)
    c = bi.steps_table(w, _plan(["v0", "v1"]))
    assert c.rows[0]["share_of_change"] is None and c.rows[0]["change"] == "within noise"


def test_the_clock_line_goes_under_the_table():
    w = {**_walk({"v0": 1.0, "v1": 2.0}), "clock": {"source": "perf_counter_ns",
                                                    "overhead_median_ns": 40}}
    assert "Clock perf_counter_ns" in bi.steps_table(w, _plan(["v0", "v1"])).note
    grid = np.resize(np.arange(40, 300, 10), 5000)  # durations on a 10 ns grid
    w = {**w, "durations": {"v0": grid, "v1": grid}}
    c = bi.steps_table(w, _plan(["v0", "v1"]))
    assert "Clock: durations fall on a 10 ns grid (measured from the samples" in c.note
    assert "Clock perf_counter_ns" not in c.note and c.check() == []
    three = bi.three_points_table(w, _plan(["v0", "v1"]))
    assert three.note.startswith("Clock: durations fall on a 10 ns grid") and three.check() == []
    assert bi.three_points_table(_walk({"v0": 1.0, "v1": 2.0}), _plan(["v0", "v1"])).note == ""


# --- three points, and the seed's ---------------------------------------------------------------

def test_three_points_are_ratios_to_the_start():
    w = _walk({"v0": 100.0, "v0+pool": 150.0, "v1": 200.0, "v2": 400.0})
    c = bi.three_points_table(w, _plan())
    assert [r["version"] for r in c.rows] == ["v0", "v1", "v2"]
    assert c.value("end", "vs_start") == pytest.approx(4.0, rel=0.02)
    assert c.text == (f"lob's midpoint (v1) is {c.cell('midpoint', 'vs_start')}x the start, "
                      f"the end {c.cell('end', 'vs_start')}x.") and c.check() == []


def test_seed_points_come_from_the_published_home():
    pts = published.SEED000_BISECTION["stp_sweep"]
    c = bi.seed_points_table("p50", "stp_sweep")
    assert [r["vs_start"] for r in c.rows] == [x / pts[0] for x in pts]
    assert c.text.startswith("The seed's p50 at the midpoint is") and c.check() == []
    assert "(seed 000)" in c.machine


def test_seed_points_without_a_published_midpoint():
    pts = published.SEED000_BISECTION["mass_cancel_burst"]
    assert pts[1] is None  # the seed published the release's two ends only
    c = bi.seed_points_table("p50", "mass_cancel_burst")
    assert [r["point"] for r in c.rows] == ["start", "end"]
    assert c.text.startswith("The seed published only the release's ends") and c.check() == []


def test_no_seed_table_where_the_seed_did_not_bisect():
    assert bi.seed_points_table("ns_per_op", "stp_sweep") is None
    assert bi.seed_points_table("p50", "add_only") is None


# --- the plot and the claims ----------------------------------------------------------------------

def test_plot_has_the_runs_and_the_steps():
    import matplotlib.pyplot as plt

    w = _walk({"v0": 300.0, "v0+pool": 301.0, "v1": 1200.0, "v2": 1201.0})
    plan = _plan()
    fig = bi.plot_walk(w, bi.steps_table(w, plan), plan)
    a, b = fig.axes
    assert [t.get_text() for t in a.get_xticklabels()] == NAMES
    assert [t.get_text() for t in b.get_yticklabels()] == [r["step"] for r in
                                                          bi.steps_table(w, plan).rows[:-1]]
    assert a.get_ylabel() == "ns" and "attribution" in b.get_title()
    assert "bar: 95% interval of the median" in a.get_title()  # 7 runs give one
    few = _walk({"v0": 300.0, "v1": 600.0}, runs=5)
    plan2 = _plan(["v0", "v1"])
    fig2 = bi.plot_walk(few, bi.steps_table(few, plan2), plan2)
    assert "no 95% interval from 5 runs" in fig2.axes[0].get_title()
    plt.close(fig2)
    assert sorted(t.get_text() for t in b.texts) == ["called", "noise", "noise"]
    band = w["aa"]["band"]
    (shade,) = b.patches  # the A/A band, shaded
    ext = shade.get_window_extent()  # in data units: x from the band's low to its high
    lo, hi = b.transData.inverted().transform([[ext.x0, 0], [ext.x1, 0]])[:, 0]
    assert (lo, hi) == pytest.approx((band["low"], band["high"]), rel=1e-3)
    assert b.get_legend().get_texts()[0].get_text() == "A/A band (7 ratios)"
    plt.close(fig)
    fig = bi.plot_walk(few, bi.steps_table(few, plan2), plan2)  # five ratios: a band
    assert len(fig.axes[1].patches) == 1
    plt.close(fig)
    none = _walk({"v0": 300.0, "v1": 600.0}, aa=None)
    fig = bi.plot_walk(none, bi.steps_table(none, plan2), plan2)
    assert not fig.axes[1].patches and fig.axes[1].get_legend() is None
    plt.close(fig)


def test_claims_of_the_two_bisected_scenarios():
    w = _walk({"v0": 300.0, "v0+pool": 301.0, "v1": 1200.0, "v2": 1201.0})
    grid = np.resize(np.arange(40, 300, 10), 5000)
    w["durations"] = {e: grid for e in NAMES}
    plan = _plan()
    steps = bi.steps_table(w, plan)
    m = bi.claims(steps, plan, w)["s000_stp_one_step"]
    assert m["value"] == max(r["share_of_change"] for r in steps.rows[:-1])
    assert m["diagnostics"] == {"total_change_called": True, "count": 5000}
    assert m["runs"] == 7 and m["aa"]["low"] == pytest.approx(w["aa"]["band"]["low"])
    assert m["aa"]["n"] == 7 and m["aa"]["what"] == w["aa"]["band"]["what"]
    assert m["clock"]["tick_ns"] == pytest.approx(10, rel=0.01)
    assert m["clock"]["percentiles"] == {f"p50 {e}": pytest.approx(float(np.median(w["kept"][e])))
                                         for e in NAMES}
    plan = _plan(workload="mass_cancel_burst")
    w = _walk({"v0": 400.0, "v0+pool": 390.0, "v1": 300.0, "v2": 300.0})
    m = bi.claims(bi.steps_table(w, plan), plan, w)["s000_mass_cancel_gain"]
    assert m["value"] == pytest.approx(0.75, rel=0.02) and len(m["ci"]) == 2
    assert m["runs"] == 7 and m["aa"]["n"] == 7 and "clock" not in m  # no durations kept
    few = _walk({"v0": 400.0, "v1": 300.0}, runs=3)
    plan = _plan(["v0", "v1"], workload="mass_cancel_burst")
    m = bi.claims(bi.steps_table(few, plan), plan, few)["s000_mass_cancel_gain"]
    assert "ci" not in m and m["ci_what"] == ("no interval: 3 and 3 kept runs, fewer than 5 a "
                                              "side for a bootstrap of a median")
    assert m["runs"] == 3 and m["aa"]["low"] is None
    assert bi.claims(steps, _plan(metric="ns_per_op")) == {}
    from lob.studies.claims import get, judge

    v = judge(get("s000_mass_cancel_gain"), m)  # three runs: a single point at best
    assert v.verdict in ("not comparable: different mechanism", "inconclusive: single point")

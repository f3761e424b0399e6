"""lob.studies.evolution_stress on synthetic data: every sentence branch of every table
builder, the plot's panels and bars, the claims, the v2+sorted registration, and the
procedures with injected replays and captures (one small real run of the bitmap pair)."""

from __future__ import annotations

from types import SimpleNamespace

import matplotlib
import numpy as np
import pytest

from lob.studies import conclude as K
from lob.studies import evolution_stress as es

matplotlib.use("Agg")

ENGINES = ["v0", "v0+pool", "v1", "v2"]
PAIR = ["v2+sorted", "v2"]


def checked(t: K.Conclusion) -> K.Conclusion:
    assert t.check() == [], t.check()
    return t


@pytest.fixture(autouse=True)
def steady_core(monkeypatch):
    """The core probe of the throughput rounds reads a quiet core: the procedures' call
    sequences below do not depend on this machine's neighbours (the top-up itself is tested
    in tests/studies/test_study.py with scripted probes)."""
    from lob.diagnose import probes

    monkeypatch.setattr(probes, "core_probe",
                        lambda steps=0, now=None: {"core_ghz": 3.0, "width": 3.3})


ROUND = [1.0, 1.1, 0.9, 1.05, 0.95]  # the machine's drift, the same for every engine in a round
TWIN = [1.0, 1.02, 0.98, 1.01, 0.99]  # the A/A copy's own noise: a robust band of 0.971-1.030
TWIN_LOW = 0.97122  # the A/A band's low end: its median offset plus 1.96 robust sigmas (in log)


def rounds_of(mops, noise=None):
    """ns/op per round for a median of ``mops`` M ops/s (per-engine ``noise`` factors)."""
    return [1e3 / mops * f * (noise[i] if noise else 1.0) for i, f in enumerate(ROUND)]


def perf(workloads=("lobster_replay", "lobster_sparse"), mops=None, noise=None, n=5):
    """Synthetic throughput: per workload, M ops/s of each engine of ENGINES in ``n``
    interleaved rounds, the last engine measured twice (the A/A control)."""
    mops = mops or {"lobster_replay": [1.0, 2.0, 4.0, 5.0],
                    "lobster_sparse": [1.0, 0.4, 2.0, 3.0]}
    noise = noise or {}
    ns = {w: {e: rounds_of(m, noise.get((w, e)))[:n]
              for e, m in zip(ENGINES, mops[w], strict=True)} for w in workloads}
    for w in workloads:
        ns[w][ENGINES[-1] + es.AA] = [x * t for x, t in zip(ns[w][ENGINES[-1]], TWIN, strict=False)]
    rows = [{"workload": w, "engine": e, "commands": 20_000, "mops": m,
             "mops_lo": m * 0.9 if n >= 5 else None, "mops_hi": m * 1.1 if n >= 5 else None}
            for w in workloads for e, m in zip(ENGINES, mops[w], strict=True)]
    shape = {w: {"commands": 2000, "resting_mean": 50.0 * (i + 1), "resting_max": 90,
                 "cancel_hit_pct": 12.5, "fok_pct": None} for i, w in enumerate(workloads)}
    return {"rows": rows, "ns": ns, "aa": {w: es.aa_band(ns[w], ENGINES[-1]) for w in workloads},
            "rounds": n, "shape": shape}


def bitmap_rows(with_scan=True, calls=("within noise", "faster")):
    band = {"aa_low": 0.9, "aa_high": 1.1}
    rows = [{"workload": w, "pair": "v2+sorted -> v2", "baseline_best": "sorted",
             "commands": 1000, "resting_mean": 40.0, "mops_without": 2.0, "mops_with": x,
             "with_over_without": x / 2.0, "lo": x / 2.0 - 0.05, "hi": x / 2.0 + 0.05, **band,
             "call": c, "runs": 5, "ci_what": "93.8% interval of the median of 5 rounds"}
            for (w, x), c in zip((("lobster_replay", 1.9), ("lobster_sparse", 2.6)), calls,
                                 strict=True)]
    if with_scan:
        rows += [{"workload": w, "pair": "v0+pool -> v1", "baseline_best": "scan",
                  "commands": 2000, "resting_mean": 50.0, "mops_without": 1.0, "mops_with": x,
                  "with_over_without": x, "lo": x * 0.9, "hi": x * 1.1, **band,
                  "call": "faster", "runs": 5, "ci_what": "93.8% interval"}
                 for w, x in (("lobster_replay", 2.0), ("lobster_sparse", 5.0))]
    return rows


# --- engines and parameters ---------------------------------------------------------------------

def test_register_sorted_is_idempotent():
    from lob.engines.registry import engine_names, engine_spec

    assert es.register_sorted() == es.SORTED_NAME
    assert es.register_sorted() == es.SORTED_NAME  # a second call changes nothing
    assert engine_names().count(es.SORTED_NAME) == 1
    spec = engine_spec(es.SORTED_NAME)
    assert spec.toggles == es.SORTED and spec.parent == "v2"
    assert es.best_rule(es.SORTED_NAME) == "sorted"


def test_best_rule(monkeypatch):
    from lob.engines import registry

    assert es.best_rule("v0") == "scan" and es.best_rule("v2@numba") == "bitmap"
    real = registry.engine_spec
    monkeypatch.setattr(registry, "engine_spec",
                        lambda e: SimpleNamespace(toggles={}) if e == "c" else real(e))
    assert es.best_rule("c") == "own" and "own" in es.BASELINE


def test_check_parameters():
    es.check_parameters(["lobster_replay"], {"lobster_replay": 0.1}, PAIR)
    with pytest.raises(ValueError, match=r"scale_overrides names workloads not in `workloads`: "
                                         r"\['lobster_deep'\]"):
        es.check_parameters(["lobster_replay"], {"lobster_deep": 0.1}, PAIR)
    with pytest.raises(ValueError, match="bitmap_pair needs two engines"):
        es.check_parameters(["lobster_replay"], {}, ["v2"])


# --- rounds, ratios, the A/A band ----------------------------------------------------------------

def test_speedup_aa_band_and_call():
    ns = {"a": [100.0, 110.0, 90.0, 105.0, 95.0], "b": [200.0, 220.0, 180.0, 210.0, 190.0]}
    r = es.speedup(ns, "a", "b")
    assert r["ratio"] == 2.0 and (r["lo"], r["hi"]) == (2.0, 2.0) and r["n"] == 5
    assert "interval of the median of 5 interleaved rounds" in r["what"]
    ns["a" + es.AA] = [x * t for x, t in zip(ns["a"], TWIN, strict=True)]
    band = es.aa_band(ns, "a")
    assert band["engine"] == "a" and band["n"] == 5
    assert band["low"] == pytest.approx(TWIN_LOW, rel=1e-4) and band["high"] == pytest.approx(
        1 / TWIN_LOW, rel=1e-4)
    assert es.call(r, band) == "faster"  # a's throughput twice b's: beyond the band
    assert es.call(es.speedup(ns, "b", "a"), band) == "slower"
    assert es.call({"lo": 0.99, "hi": 1.01}, band) == "within noise"
    assert es.call({"lo": 0.99, "hi": 1.5}, band) == "inconclusive"  # reaches into the band
    assert es.call({"lo": None, "hi": None}, band) == "inconclusive"  # no interval
    assert es.call(r, {"low": None, "high": None}) == "inconclusive"  # no band
    few = es.speedup({"a": [1.0, 1.0], "b": [2.0, 2.0]}, "a", "b")
    assert few["lo"] is None and few["ratio"] == 2.0


def test_aa_engine_is_the_lineage_last():
    assert es.aa_engine(["orderly_chaos", "v1", "v2"]) == "v2"
    assert es.aa_engine(["orderly_chaos"]) == "orderly_chaos"


# --- throughput ---------------------------------------------------------------------------------

def test_measure_throughput_with_an_injected_replay(monkeypatch):
    from lob.workloads import build

    seen = []

    def replay(e, wl):
        seen.append((e, len(wl.commands)))
        return real(e, wl)

    from lob.engines.registry import replay as real
    p = es.measure_throughput(["v1", "v2"], ["lobster_replay"], 0.001,
                              {"lobster_replay": 0.0005}, 2, replay=replay)
    n = len(build("lobster_replay", scale=0.0005).commands)
    # one untimed warm-up of each (the stream is shorter than the warm-up prefix), then at
    # least MIN_ROUNDS rotated rounds of v1, v2 and v2 again (the A/A control)
    order = ["v1", "v2", "v2", "v2", "v2", "v1", "v2", "v1", "v2"]
    assert seen[:3] == [("v1", n), ("v2", n), ("v2", n)]
    assert seen[3:] == [(e, n) for e in (order + order)[:3 * es.MIN_ROUNDS]]
    assert p["rounds"] == es.MIN_ROUNDS
    assert p["kept"] == {"lobster_replay": [es.MIN_ROUNDS, es.MIN_ROUNDS]}  # none shared
    assert set(p["ns"]["lobster_replay"]) == {"v1", "v2", "v2" + es.AA}
    assert all(len(x) == es.MIN_ROUNDS for x in p["ns"]["lobster_replay"].values())
    aa = p["aa"]["lobster_replay"]
    assert aa["engine"] == "v2" and aa["n"] == es.MIN_ROUNDS and aa["low"] <= 1 <= aa["high"]
    assert [(r["engine"], r["commands"]) for r in p["rows"]] == [("v1", n), ("v2", n)]
    for r in p["rows"]:
        assert 0 < r["mops_lo"] <= r["mops"] <= r["mops_hi"]
    assert p["shape"]["lobster_replay"]["commands"] == n


def test_measure_throughput_refuses_disagreeing_engines():
    def replay(e, wl):
        return SimpleNamespace(elapsed_ns=100, checksum=hash(e))
    with pytest.raises(RuntimeError, match="engines disagree on lobster_replay"):
        es.measure_throughput(["v1", "v2"], ["lobster_replay"], 0.0005, {}, 1, replay=replay)


def test_throughput_table_names_the_fastest_and_a_costly_step():
    t = checked(es.throughput_table(perf(), ENGINES))
    sp = [r for r in t.rows if r["workload"] == "lobster_sparse"]
    assert [r["vs_first"] for r in sp] == pytest.approx([1.0, 0.4, 2.0, 3.0])
    assert sp[0]["vs_previous"] is None
    assert [r["vs_previous"] for r in sp[1:]] == pytest.approx([0.4, 5.0, 1.5])
    assert [r["step_call"] for r in sp] == [None, "slower", "faster", "faster"]
    assert sp[0]["aa_low"] == pytest.approx(TWIN_LOW, rel=1e-4)
    assert "v0 measured" not in t.note and "v2 measured twice in the same rounds" in t.note
    assert "kept / run" not in t.note  # a record without the quiet-round counts
    assert "median of the 5 interleaved rounds" in t.note
    p = perf()
    p["kept"] = {"lobster_replay": [5, 7], "lobster_sparse": [10, 10]}
    note = checked(es.throughput_table(p, ENGINES)).note
    assert ("median of the interleaved rounds kept (5 asked; up to 10 run while fewer than 5 "
            "had every replay on a quiet core, only those kept when there were 5; kept / run: "
            "lobster_replay 5 / 7, lobster_sparse 10 / 10)" in note)
    assert t.sentences == [
        "On lobster_replay the fastest is v2 (5.00 M ops/s, 4.50-5.50): faster than every "
        "other engine beyond the A/A band (0.97-1.03).",
        "On lobster_replay, each step's throughput over its parent: v0+pool 2.00x v0 "
        "(2.00-2.00), faster; v1 2.00x v0+pool (2.00-2.00), faster; v2 1.25x v1 (1.25-1.25), "
        "faster.",
        "On lobster_sparse the fastest is v2 (3.00 M ops/s, 2.70-3.30): faster than every "
        "other engine beyond the A/A band (0.97-1.03).",
        "On lobster_sparse, each step's throughput over its parent: v0+pool 0.40x v0 "
        "(0.40-0.40), slower; v1 5.00x v0+pool (5.00-5.00), faster; v2 1.50x v1 (1.50-1.50), "
        "faster.",
        "On lobster_sparse, v0+pool keeps only 0.40x the throughput of v0: that step costs "
        "more than it gains on this stream."]


def test_throughput_table_says_within_noise_and_names_no_fastest_inside_the_band():
    # v1 and v2 do the same work: their per-round ratios wander 0.95-1.05, wider than the A/A
    # band: no ranking between them, and no fastest
    wobble = [1.0, 1.05, 0.95, 1.03, 0.97]
    p = perf(workloads=("lobster_replay",), mops={"lobster_replay": [1.0, 2.0, 4.0, 4.0]},
             noise={("lobster_replay", "v2"): wobble})
    t = checked(es.throughput_table(p, ENGINES))
    assert t.value(("lobster_replay", "v2"), "step_call") == "inconclusive"
    assert t.sentences[0] == ("On lobster_replay no engine is the fastest beyond the A/A band "
                              "(0.97-1.03): v1 has the highest median (4.00 M ops/s) but is not "
                              "told apart from v2.")
    assert t.sentences[1].endswith("v2 1.00x v1 (0.95-1.05), inconclusive.")
    same = perf(workloads=("lobster_replay",), mops={"lobster_replay": [1.0, 2.0, 4.0, 4.0]})
    t = checked(es.throughput_table(same, ENGINES))
    assert t.value(("lobster_replay", "v2"), "step_call") == "within noise"
    assert "not told apart from v2" in t.sentences[0]


def test_throughput_table_without_a_band_names_no_fastest():
    t = checked(es.throughput_table(perf(workloads=("lobster_replay",), n=3), ENGINES))
    assert t.value(("lobster_replay", "v2"), "step_call") == "inconclusive"
    assert t.value(("lobster_replay", "v2"), "vs_previous_lo") is None
    assert t.sentences[0] == ("On lobster_replay no engine is called the fastest: too few "
                              "rounds for an A/A band (v2 has the highest median, 5.00 M ops/s).")


def test_shape_table():
    s = es.shape_table(perf())
    assert list(s.columns) == list(es.SHAPE_KEYS)
    assert list(s.index) == ["lobster_replay", "lobster_sparse"]


def _dots(ax):
    return next(ln for ln in ax.get_lines() if ln.get_marker() == "o")


def test_a_stream_too_short_to_tell_engines_apart_gets_no_ratio():
    p = perf()
    for r in p["rows"]:
        if r["workload"] == "lobster_sparse":
            r["commands"] = 1000  # at 3 M ops/s: 333 us a replay
    t = es.throughput_table(p, ENGINES)
    sparse = [r for r in t.rows if r["workload"] == "lobster_sparse"]
    assert all(r["vs_first"] is None and r["step_call"] == "too short" for r in sparse)
    assert ("On lobster_sparse the fastest replay (v2) takes 333 us, under 1,000 us: too short "
            "to tell engines apart, so no ratio and no call is given on it.") in t.sentences
    assert not any("lobster_sparse" in x and "x v" in x for x in t.sentences)
    assert es.too_short(p) == {"lobster_sparse": pytest.approx(1000 / 3)}
    assert t.check() == []


def test_plot_throughput_draws_dots_with_their_intervals():
    # a dot plot: no bar from an arbitrary floor on a log axis (the 1e-4 floors)
    p = perf(workloads=("lobster_replay", "lobster_sparse"),
             mops={"lobster_replay": [1.0, 2.0, 4.0, 5.0],
                   "lobster_sparse": [1.05, 0.4 * 100, 2.0 * 100, 3.0 * 100]})
    fig = es.plot_throughput(p, ENGINES)
    assert len(fig.axes) == 2
    ax = fig.axes[1]
    assert not ax.patches  # no bars
    assert [round(y, 6) for y in _dots(ax).get_ydata()] == [1.05, 40.0, 200.0, 300.0]
    assert ax.get_yscale() == "log"
    assert ax.get_ylim()[0] <= 1.05 * 0.9 and ax.get_ylim()[1] >= 300.0 * 1.1
    assert ax.get_title() == "lobster_sparse\n(2,000 cmds)"
    assert [t.get_text() for t in ax.get_xticklabels()] == [es.bar_label(e) for e in ENGINES]
    assert es.bar_label("v0+pool@numba") == "v0+pool\n@numba"
    assert es.bar_label("orderly_chaos") == "orderly_\nchaos"
    (bars,) = [c for c in ax.containers if type(c).__name__ == "ErrorbarContainer"]
    lo, hi = bars.lines[2][0].get_segments()[0][:, 1]
    assert (lo, hi) == pytest.approx((1.05 * 0.9, 1.05 * 1.1))
    lin = es.plot_throughput(perf(workloads=("lobster_replay",), n=3,
                                  mops={"lobster_replay": [2.0, 3.0, 4.0, 5.0]}), ENGINES)
    ax = lin.axes[0]
    assert ax.get_yscale() == "linear"  # no interval: no error bars
    assert not [c for c in ax.containers if type(c).__name__ == "ErrorbarContainer"]


@pytest.mark.parametrize("preset", ["default", "full"])
def test_plot_throughput_fits_every_engine_of_the_presets(preset):
    # the default preset's six engines overlapped their labels in five-bar panels (the
    # overlap check refused the figure); a preset's names are the real ones, full length
    from lob.experiments import registry

    names = registry.get_experiment("evolution_stress").presets[preset]["engines"]
    workloads = ("lobster_replay", "lobster_deep", "lobster_sparse", "lobster_bursty")
    mops = [3.0 * 10 ** (i % 4 - 2) for i in range(len(names))]  # decades apart: a log axis
    p = {"rows": [{"workload": w, "engine": e, "commands": 1000, "mops": m,
                   "mops_lo": m * 0.9, "mops_hi": m * 1.1}
                  for w in workloads for e, m in zip(names, mops, strict=True)],
         "shape": {w: {"commands": 1000} for w in workloads}}
    fig = es.plot_throughput(p, names)  # raises if any two texts overlap
    assert fig.axes[0].get_yscale() == "log"
    shown = [ax for ax in fig.axes if ax.get_visible()]
    assert [len(_dots(ax).get_xdata()) for ax in shown] == [len(names)] * 4
    per_row = len({round(ax.get_position().y0, 3) for ax in shown})
    assert per_row == (1 if len(names) <= 6 else 2)  # rows of panels


def test_plot_throughput_fits_the_labels_of_a_real_default_run():
    # a default make run's figures (f0d2082ce4): a later panel's y range (sparse: 0.001 to 10)
    # moved the layout after the first panels' labels were fitted, so they overlapped (the
    # engines of that run: the default preset then ran the lineage up to v5@numba)
    names = ["orderly_chaos", "v0+pool@numba", "v1@numba", "v2@numba", "v3@numba",
             "v3+packed@numba", "v3+packed+hot@numba", "v3+packed+hot+select@numba",
             "v4@numba", "v5@numba"]
    real = {  # M ops/s, low, high per engine of the preset, in its order
        "lobster_replay": [(11.4, 10.6, 12.6), (1.19, 1.17, 1.22), (31.3, 27.5, 32.1),
            (30.7, 24.7, 33.9), (25.6, 23.7, 29.7), (37.6, 32.8, 38.6), (43.6, 39.7, 54.5),
            (47.9, 37.3, 49.6), (54.0, 51.7, 67.0), (59.0, 49.0, 78.4)],
        "lobster_deep": [(5.4, 4.87, 6.19), (0.28, 0.27, 0.28), (21.2, 12.4, 28.2),
            (20.0, 16.2, 24.4), (12.8, 7.09, 14.6), (20.8, 15.7, 33.0), (23.2, 16.8, 24.7),
            (23.7, 17.6, 26.4), (35.9, 27.7, 40.5), (41.1, 35.8, 79.9)],
        "lobster_sparse": [(3.38, 1.43, 5.64), (0.0011, 0.001, 0.0012), (10.1, 7.11, 16.3),
            (8.9, 5.34, 15.2), (9.63, 6.22, 13.9), (11.8, 4.58, 15.3), (15.6, 8.57, 20.6),
            (9.2, 7.95, 12.5), (11.3, 9.44, 18.2), (11.3, 8.18, 17.5)],
        "lobster_bursty": [(10.7, 8.82, 12.3), (1.14, 1.12, 1.16), (29.5, 27.0, 31.0),
            (30.0, 27.1, 32.2), (25.0, 22.8, 29.2), (37.1, 33.7, 45.0), (39.9, 36.1, 43.3),
            (45.1, 37.8, 46.5), (48.9, 41.7, 52.6), (54.8, 43.9, 60.1)],
    }
    p = {"rows": [{"workload": w, "engine": e, "commands": 1000, "mops": m, "mops_lo": lo,
                   "mops_hi": hi} for w, ms in real.items()
                  for e, (m, lo, hi) in zip(names, ms, strict=True)],
         "shape": {w: {"commands": 1000} for w in real}}
    fig = es.plot_throughput(p, names)  # raises if any two texts overlap
    assert [len(_dots(ax).get_xdata()) for ax in fig.axes if ax.get_visible()] == [10] * 4


# --- latency ------------------------------------------------------------------------------------

def durations(p50=100, tail=500, n=2000):
    k = int(n * 0.98)
    return np.array([p50] * k + [tail] * (n - k), dtype=np.int64)


def fake_capture(by_workload):
    def capture(engine, wl):
        return {"durations": by_workload[len(wl.commands)], "clock": {"source": "fake"}}
    return capture


def lat(rows, engine="v3"):
    return {"engine": engine, "rows": rows, "clock": {"source": "fake",
                                                      "overhead_median_ns": 20.0}}


def test_measure_latency(tmp_path):
    from lob.workloads import build

    n = {w: len(build(w, scale=s).commands)
         for w, s in (("lobster_replay", 0.0005), ("lobster_bursty", 0.001))}
    cap = fake_capture({n["lobster_replay"]: durations(100, 300),
                        n["lobster_bursty"]: durations(100, 3000, n=500)})
    m = es.measure_latency("v3", ["lobster_replay", "lobster_bursty"], 0.001,
                           {"lobster_replay": 0.0005}, tmp_path, capture=cap)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v3__lobster_bursty.hgrm",
                                                          "v3__lobster_replay.hgrm"]
    assert m["engine"] == "v3" and [r["p99/p50"] for r in m["rows"]] == [3.0, None]
    assert m["rows"][1]["p99"] == "n<1000"


def test_latency_table_extremes_and_hidden():
    rows = [{"workload": "a", "count": 2000, "p50": 100.0, "p99": 300.0, "p99/p50": 3.0},
            {"workload": "b", "count": 2000, "p50": 100.0, "p99": 900.0, "p99/p50": 9.0},
            {"workload": "c", "count": 500, "p50": 100.0, "p99": "n<1000", "p99/p50": None}]
    t = checked(es.latency_table(lat(rows)))
    assert t.name == "latency (v3)" and "Clock fake" in t.note
    assert t.text == ("The narrowest tail (p99 / p50) is a's (3.00); the widest is b's (9.00). "
                      "Percentiles hidden for want of samples: c (p99).")


def test_latency_table_one_row_and_none():
    one = [{"workload": "a", "count": 2000, "p50": 100.0, "p99": 300.0, "p99/p50": 3.0}]
    assert checked(es.latency_table(lat(one))).text == "Only a has a tail (p99 / p50): 3.00."
    none = [{"workload": "a", "count": 50, "p50": 100.0, "p99": "n<1000", "p99/p50": None}]
    assert checked(es.latency_table(lat(none))).text.startswith(
        "No row has a tail (p99 / p50) to compare.")


# --- the seed's versions ------------------------------------------------------------------------

def test_seed_versions_table():
    t = checked(es.seed_versions_table({"a": 10.0, "b": 25.0}, "M"))
    assert t.name == "seed 003 versions (M)" and t.machine == "M (seed 003)"
    assert [r["vs_first"] for r in t.rows] == [1.0, 2.5] and t.text == ""
    t = es.seed_versions_table()
    assert t.rows[0]["version"] == "v1" and t.rows[0]["vs_first"] == 1.0


# --- the bitmap ---------------------------------------------------------------------------------

def test_bitmap_pairs():
    assert es.bitmap_pairs(ENGINES, PAIR) == [("v2+sorted", "v2"), ("v0+pool", "v1")]
    assert es.bitmap_pairs(["v1", "v2"], PAIR) == [("v2+sorted", "v2")]


def test_measure_bitmap_runs_the_pair_and_reads_the_lineage():
    es.register_sorted()
    p = perf(workloads=("lobster_replay",), mops={"lobster_replay": [1.0, 2.0, 4.0, 5.0]})
    seen = []

    def replay(e, wl):
        seen.append(e)
        return real(e, wl)

    from lob.engines.registry import replay as real
    rows = es.measure_bitmap(PAIR, ENGINES, p, 0.0005, 1, replay=replay)
    assert [(r["workload"], r["pair"]) for r in rows] == [
        ("lobster_replay", "v2+sorted -> v2"), ("lobster_replay", "v0+pool -> v1"),
        ("lobster_sparse", "v2+sorted -> v2")]  # the sparse stream did not run the lineage
    # the pair and the A/A copy of its first engine, a warm-up and MIN_ROUNDS rounds on
    # each stream
    assert sorted(set(seen)) == ["v2", "v2+sorted"]
    assert len(seen) == 2 * 3 * (1 + es.MIN_ROUNDS)
    assert seen.count("v2+sorted") == 2 * 2 * (1 + es.MIN_ROUNDS)
    scan = rows[1]
    assert scan["with_over_without"] == pytest.approx(2.0) and scan["baseline_best"] == "scan"
    assert (scan["aa_low"], scan["call"], scan["runs"]) == (p["aa"]["lobster_replay"]["low"],
                                                           "faster", es.MIN_ROUNDS)
    pair = rows[0]
    assert pair["baseline_best"] == "sorted" and pair["mops_with"] > 0 and pair["commands"] > 0
    assert pair["lo"] <= pair["with_over_without"] <= pair["hi"] and pair["runs"] == 5
    assert pair["aa_low"] <= 1 <= pair["aa_high"] and pair["call"] in es.BITMAP_CALL
    assert rows[2]["resting_mean"] > 0 and "interval of the median" in rows[2]["ci_what"]
    # a quiet core throughout: no round added; the lineage's row ran the rounds it read
    assert [r["ran"] for r in rows] == [es.MIN_ROUNDS, 5, es.MIN_ROUNDS]
    assert not any("quiet core" in r["ci_what"] for r in rows)


def test_measure_bitmap_adds_rounds_while_the_core_is_shared_and_keeps_the_quiet_ones(
        monkeypatch):
    """The pair's first three rounds run on a core shared with another hardware thread (the
    probe reads a narrow issue width): rounds are added until MIN_ROUNDS quiet ones ran, and
    the ratio uses only those."""
    from lob.diagnose import probes

    es.register_sorted()
    calls = []

    def probe(steps=0, now=None):
        calls.append(1)
        # 4 probes a round (before each of 3 replays, after the last): 8 rounds a stream
        return {"core_ghz": 3.0, "width": 2.2 if (len(calls) - 1) % 32 < 12 else 3.3}

    monkeypatch.setattr(probes, "core_probe", probe)
    p = perf(workloads=("lobster_replay",), mops={"lobster_replay": [1.0, 2.0, 4.0, 5.0]})
    rows = es.measure_bitmap(PAIR, ENGINES, p, 0.0005, 1)
    pair = [r for r in rows if r["pair"] == "v2+sorted -> v2"]
    assert [(r["runs"], r["ran"]) for r in pair] == [(es.MIN_ROUNDS, es.MIN_ROUNDS + 3)] * 2
    assert all(r["ci_what"].endswith(f" (the {es.MIN_ROUNDS} of {es.MIN_ROUNDS + 3} rounds run "
                                     "with every replay on a quiet core)") for r in pair)
    t = checked(es.bitmap_table(rows, PAIR))
    assert "ran: the rounds run" in t.note


def test_measure_bitmap_takes_a_scale_per_stream():
    """The narrow stream longer than the sparse one (a replay of a few ms let one stray round
    set an A/A band over 2x): a stream's override sets its scale; an override of a stream the
    pair does not run is a one-line error before anything runs."""
    from lob.engines.registry import replay

    es.register_sorted()
    ran = []
    p = perf(workloads=("lobster_replay",), mops={"lobster_replay": [1.0, 2.0, 4.0, 5.0]})
    rows = es.measure_bitmap(PAIR, ["v1", "v2"], p, 0.0005, 1, replay=replay,
                             scale_overrides={"lobster_replay": 0.002})
    assert [r["commands"] for r in rows] == [2000, 500]
    # the claim's A/A record says how its band was made: 1.4826 x the MAD, never the extremes
    m = es.claims(rows, PAIR, p, ["v1", "v2"])["s003_bitmap_narrow"]
    assert "1.4826 MAD of the log of 5 A/A ratios" in m["aa"]["what"]
    with pytest.raises(ValueError, match=r"scale_overrides name streams it does not run: "
                                         r"\['lobster_deep'\]"):
        es.measure_bitmap(PAIR, ["v1", "v2"], p, 0.0005, 1, replay=lambda e, wl: ran.append(e),
                          scale_overrides={"lobster_deep": 0.1})
    assert ran == []  # refused before any replay


def test_bitmap_table_with_the_rescanning_baseline():
    t = checked(es.bitmap_table(bitmap_rows(), PAIR))
    assert "ci_what" not in t.columns
    assert t.text == ("On lobster_replay, adding the bitmap to the sorted baseline gives 0.95x "
                      "the throughput (0.90-1.00): within noise (inside the A/A band). On "
                      "lobster_sparse, adding the bitmap to the sorted baseline gives 1.30x the "
                      "throughput (1.25-1.35): a gain beyond the A/A band. Against lob's "
                      "rescanning baseline the bitmap gives 2.00x (v0+pool -> v1, lobster_replay, "
                      "faster), 5.00x (v0+pool -> v1, lobster_sparse, faster): there it removes "
                      "a scan problem, which lobster's narrow book never had.")


def test_bitmap_table_without_the_rescanning_baseline_and_every_call():
    t = checked(es.bitmap_table(bitmap_rows(False, ("slower", "inconclusive")), PAIR))
    assert "rescanning" not in t.text and t.text.count("adding the bitmap") == 2
    assert t.sentences[0].endswith(": a loss beyond the A/A band.")
    assert t.sentences[1].endswith(": inconclusive (its interval reaches into the A/A band, or "
                                   "too few rounds for one).")


# --- the claims ---------------------------------------------------------------------------------

def test_claims_carry_interval_band_and_rounds_and_keep_their_verdicts():
    from lob.studies.claims import get, judge

    es.register_sorted()
    m = es.claims(bitmap_rows(), PAIR, perf(), ENGINES)
    assert list(m) == ["s003_bitmap_narrow", "s003_bitmap_sparse", "s003_version_steps"]
    n = m["s003_bitmap_narrow"]
    assert n["value"] == 0.95 and n["detail"] == "v2+sorted -> v2 M ops/s"
    assert n["ci"] == pytest.approx([0.90, 1.00]) and n["runs"] == 5
    assert (n["aa"]["low"], n["aa"]["high"], n["aa"]["n"]) == (0.9, 1.1, 5)
    assert n["diagnostics"] == {"baseline": es.BASELINE["sorted"], "resting_mean": 40.0,
                                "commands": 1000}
    assert n["explain"] == {"against lob's rescanning baseline": "2.00x"}
    assert m["s003_bitmap_sparse"]["explain"] == {"against lob's rescanning baseline": "5.00x"}
    v = m["s003_version_steps"]
    assert v["value"] == pytest.approx(5.0) and v["ci"] == pytest.approx([5.0, 5.0])
    assert v["runs"] == 5 and v["aa"]["low"] == pytest.approx(TWIN_LOW, rel=1e-4)
    assert v["diagnostics"] == {"resting_mean": 50.0}
    assert v["explain"] == {"lob's steps": "v0 -> v0+pool -> v1 -> v2"}
    assert "quiet core" not in v["ci_what"]  # every round run was used
    # the 5 rounds used were the quiet ones of 9 run: the claim's interval says so
    kept = es.claims(bitmap_rows(), PAIR, {**perf(), "kept": {"lobster_replay": [5, 9]}},
                     ENGINES)["s003_version_steps"]
    assert kept["ci_what"].endswith(" (the 5 of 9 rounds run with every replay on a quiet core)")
    assert kept["runs"] == 5
    # the verdicts stay decided by regime (the bitmap's baseline) and mechanism, not by noise
    assert judge(get("s003_bitmap_narrow"), n).verdict == "not comparable"
    assert judge(get("s003_bitmap_sparse"), m["s003_bitmap_sparse"]).verdict == "not comparable"
    assert judge(get("s003_version_steps"), {**v, "diagnostics": {"resting_mean": 5000.0}}
                 ).verdict == "not comparable: different mechanism"


def test_the_tracked_baseline_has_the_bitmap_claims_judged():
    """With lob's reading of lobster's v4 (best=tracked) as the pair's baseline, the bitmap
    claims meet their regime and mechanism: both get a verdict on their interval."""
    from lob.studies.claims import get, judge

    pair = ["v2+tracked@numba", "v2@numba"]
    rows = bitmap_rows(with_scan=False)
    for r in rows:
        r.update(pair="v2+tracked@numba -> v2@numba", baseline_best="tracked",
                 resting_mean=5000.0)
    rows[0].update(lo=0.945, hi=0.96, aa_low=0.995, aa_high=1.005)  # inside 0.96 +- 4%
    m = es.claims(rows, pair, perf(), ENGINES)
    n, sp = m["s003_bitmap_narrow"], m["s003_bitmap_sparse"]
    assert n["diagnostics"]["baseline"] == es.BASELINE["tracked"] == \
        "tracked best price, no per-level upkeep"
    assert judge(get("s003_bitmap_narrow"), n).verdict == "reproduced"  # 0.95 (0.945-0.96)
    assert judge(get("s003_bitmap_sparse"), sp).verdict == "reproduced"  # 1.30 (1.25-1.35): up


def test_claims_without_the_replay_stream_or_an_interval():
    es.register_sorted()
    rows = bitmap_rows(with_scan=False)
    rows[0].update(lo=None, hi=None, ci_what="no interval: 3 interleaved rounds")
    m = es.claims(rows, PAIR, perf(workloads=("lobster_sparse",)), ENGINES)
    assert list(m) == ["s003_bitmap_narrow", "s003_bitmap_sparse"]
    assert m["s003_bitmap_narrow"]["explain"] == {"against lob's rescanning baseline": ""}
    assert "ci" not in m["s003_bitmap_narrow"]
    assert m["s003_bitmap_narrow"]["ci_what"] == "no interval: 3 interleaved rounds"


# --- an engine outside lob's lineage (orderly_chaos), refused cells, the shim's cost ------------

WHY = "engine 'oc' does not support STP mode CANCEL_MAKER (it declares: NONE)"


@pytest.fixture
def oc_outside(monkeypatch):
    """'oc' stands for a third-party engine: outside the lineage, refusing lobster_sparse."""
    from lob.studies import declared

    monkeypatch.setattr(declared, "lineage", lambda engines: [e for e in engines if e != "oc"])
    monkeypatch.setattr(declared, "refusal", lambda e, wl: WHY if (
        e == "oc" and wl.name == "lobster_sparse") else None)


def test_measure_throughput_skips_a_refused_cell_and_keeps_the_reason(oc_outside):
    seen = []

    def replay(e, wl):
        seen.append((e, wl.name))
        return SimpleNamespace(elapsed_ns=1000, checksum=7, outcomes=None, fills=None)

    import lob.workloads.diagnostics as D
    orig = D.stream_diagnostics
    D.stream_diagnostics = lambda c, o, f: {"commands": len(c)}
    try:
        p = es.measure_throughput(["oc", "v1"], ["lobster_replay", "lobster_sparse"], 0.0005,
                                  {}, 1, replay=replay)
    finally:
        D.stream_diagnostics = orig
    assert ("oc", "lobster_sparse") not in seen and ("v1", "lobster_sparse") in seen
    assert [(r["workload"], r["engine"]) for r in p["rows"]] == [
        ("lobster_replay", "oc"), ("lobster_replay", "v1"), ("lobster_sparse", "v1")]
    assert p["skipped"] == [{"workload": "lobster_sparse", "engine": "oc", "reason": WHY}]


def test_throughput_table_steps_along_the_lineage_only_and_names_the_outsider(oc_outside):
    es.register_sorted()  # the claims below read the v2+sorted pair, whichever worker runs this
    p = perf()
    p["rows"].insert(0, {"workload": "lobster_replay", "engine": "oc", "commands": 20_000,
                         "mops": 6.0, "mops_lo": 5.4, "mops_hi": 6.6})
    p["ns"]["lobster_replay"]["oc"] = rounds_of(6.0)
    p["skipped"] = [{"workload": "lobster_sparse", "engine": "oc", "reason": WHY}]
    t = checked(es.throughput_table(p, ["oc", *ENGINES]))
    oc = next(r for r in t.rows if r["engine"] == "oc")
    assert oc["vs_first"] == pytest.approx(6.0) and oc["vs_previous"] is None  # over v0; no step
    assert oc["step_call"] is None
    v0 = next(r for r in t.rows if r["engine"] == "v0" and r["workload"] == "lobster_replay")
    assert v0["vs_previous"] is None and v0["vs_first"] == 1.0
    assert t.sentences[0] == ("On lobster_replay the fastest is oc (6.00 M ops/s, 5.40-6.60): "
                              "faster than every other engine beyond the A/A band (0.97-1.03).")
    assert ("On lobster_replay, oc (not of lob's lineage) runs 6.00 M ops/s, 6.00x v0 (faster "
            "against the A/A band).") in t.sentences
    assert t.sentences[-1] == f"Not run: oc on lobster_sparse ({WHY})."
    fig = es.plot_throughput(p, ["oc", *ENGINES])  # a panel without oc draws the others
    assert [len(_dots(ax).get_xdata()) for ax in fig.axes] == [5, 4]
    m = es.claims(bitmap_rows(), PAIR, p, ["oc", *ENGINES])
    assert m["s003_version_steps"]["value"] == pytest.approx(5.0)  # v2 / v0, not over oc


def ratio(median, change):
    return {"median": median, "ci": [median * 0.9, median * 1.1], "change": change}


def beside_data(shim=True):
    pt = {"LIMIT": {"n": 90, "p50": 100.0, "p99": 900.0},
          "FOK": {"n": 10, "p50": 40.0, "p99": 600.0}}
    w = {"commands": 100, "timed": 100, "engines": {}, "ratios": {}, "per_type": {}}
    eng = {k: {"median": 200.0, "min": 150.0} for k in
           ("ns_per_op", "work_ns_per_op", "p50", "p99", "p99.9")}
    cheap = {k: {"median": 50.0, "min": 40.0} for k in eng}
    repl = {**w, "stp": "NONE", "engines": {"oc": eng, "c_book": cheap},
            "ratios": {"c_book": {"work_ns_per_op": ratio(4.0, "slower")}},
            "per_type": {"oc": {"LIMIT": pt["LIMIT"]}, "c_book": {"LIMIT": pt["LIMIT"]}}}
    cpp = {**w, "stp": "NONE", "engines": {"oc": eng, "c_book": cheap},
           "ratios": {"c_book": {"work_ns_per_op": ratio(3.0, "slower")}},
           "per_type": {"oc": pt, "c_book": pt}}
    res = {"rounds": 5, "others": ["c_book"], "workloads": {"lobster_replay": repl,
                                                            "cpp_comprehensive": cpp},
           "notes": ["cpp_comprehensive: STP CANCEL_MAKER -> NONE for every engine"]}
    sc = {"workload": "lobster_replay", "types": {
        "LIMIT": {"n": 90, "work": {"ratio": ratio(1.0, "inconclusive")}},
        "all native": {"n": 90, "work": {"ratio": ratio(0.5, "faster")}}}}
    return {"beside": res, "shim": sc if shim else None}


def test_beside_table_labels_the_stp_copy_and_quotes_the_ratios():
    t = checked(es.beside_table("oc", beside_data()))
    assert {r["stream"] for r in t.rows} == {"lobster_replay",
                                            "cpp_comprehensive (STP NONE copy)"}
    assert t.sentences[:3] == [
        "On lobster_replay, oc's work ns/op is 4.00x c_book's (slower).",
        "On cpp_comprehensive (STP NONE copy), oc's work ns/op is 3.00x c_book's (slower).",
        "Run as a copy, for every engine alike: cpp_comprehensive: STP CANCEL_MAKER -> NONE "
        "for every engine."]
    assert t.value(("lobster_replay", "oc"), "oc_over") is None


def test_shim_table_says_which_costs_are_the_emulations_per_type():
    t = checked(es.shim_table("oc", beside_data()))
    assert [(r["stream"], r["type"]) for r in t.rows] == [
        ("lobster_replay", "LIMIT"), ("cpp_comprehensive (STP NONE copy)", "LIMIT"),
        ("cpp_comprehensive (STP NONE copy)", "FOK")]
    assert t.value(("lobster_replay", "LIMIT"), "shim_over_native") == 1.0
    assert t.value(("cpp_comprehensive (STP NONE copy)", "LIMIT"), "shim_over_native") is None
    assert t.sentences[0].startswith("Emulated by the shim (the engine's C API has no call for "
                                     "them): FOK;")
    assert t.sentences[1] == ("LIMIT on lobster_replay: shim / native work ns/op 1.00 (no call: "
                              "the interval straddles 1, or too few rounds).")
    t = checked(es.shim_table("oc", beside_data(shim=False), how={"LIMIT": "native: x"}))
    assert t.sentences == ["No native driver in this engine's library: the shim's own cost "
                           "is not split."]


def test_measure_outsiders_runs_each_outsider_and_goes_on_without_c_book(oc_outside):
    calls, said = [], []

    def c_book():
        raise RuntimeError("no C compiler: gcc not found")

    def no_shim(*a, **k):
        raise AttributeError("oc_raw_replay")

    m = SimpleNamespace(
        c_book=c_book, shim_cost=no_shim,
        measure_beside=lambda e, others, workloads, scale, rounds: calls.append(
            (e, others, workloads, scale, rounds)) or {"engine": e})
    out = es.measure_outsiders(["oc", "v1", "v2"], 0.125, 2, say=said.append, measure=m)
    assert calls == [("oc", ("v2@numba",), es.BESIDE_WORKLOADS, 0.125, es.BESIDE_ROUNDS)]
    assert out == {"oc": {"beside": {"engine": "oc"}, "shim": None}}
    assert said == ["c_book is not available here (no C compiler: gcc not found); measured "
                    "without it"]
    assert es.measure_outsiders(["v1", "v2"], 0.125, 2, say=said.append, measure=m) == {}
    assert len(said) == 1  # no outsider: c_book is not even built
    calls.clear()
    es.measure_outsiders(["oc"], 1.0, 9, say=said.append, measure=m)
    assert calls[0][3:] == (es.BESIDE_MAX_SCALE, 9)  # capped size, more rounds when asked


def test_throughput_slower_gives_the_throughput_sections_steps():
    # ENGINES v0 -> v0+pool -> v1 -> v2; on lobster_sparse v0+pool keeps 0.4x of v0
    p = perf()
    lin = es.throughput_slower(p, ENGINES, 0.25, {"lobster_sparse": 0.001})
    rows = {(r["workload"], r["step"]): r for r in lin["lineage"]}
    assert set(rows) == {(w, e) for w in ("lobster_replay", "lobster_sparse")
                         for e in ENGINES[1:]}  # the first engine is no step
    slow = rows[("lobster_sparse", "v0+pool")]
    assert (slow["parent"], slow["call"], slow["scale"]) == ("v0", "slower", 0.001)
    assert rows[("lobster_replay", "v2")]["parent"] == "v1"
    assert rows[("lobster_replay", "v2")]["scale"] == 0.25



def test_beside_table_calls_only_beyond_the_aa_band():
    b = beside_data()
    repl = b["beside"]["workloads"]["lobster_replay"]
    repl["aa"] = {"work_ns_per_op": {"low": 0.5, "high": 2.0, "n": 5, "what": "w"}}
    repl["ratios"]["c_book"]["work_ns_per_op"]["call"] = "inconclusive"
    t = checked(es.beside_table("oc", b))
    assert t.sentences[0] == "On lobster_replay, oc's work ns/op is 4.00x c_book's (inconclusive)."
    assert t.value(("lobster_replay", "c_book"), "aa_high") == 2.0
    assert "A/A control" in t.note

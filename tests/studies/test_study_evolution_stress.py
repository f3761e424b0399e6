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


def perf(workloads=("lobster_replay", "lobster_sparse"), mops=None):
    """Synthetic throughput: per workload, M ops/s of each engine of ENGINES."""
    mops = mops or {"lobster_replay": [1.0, 2.0, 4.0, 5.0],
                    "lobster_sparse": [1.0, 0.4, 2.0, 3.0]}
    rows = [{"workload": w, "engine": e, "commands": 2000, "mops": m}
            for w in workloads for e, m in zip(ENGINES, mops[w], strict=True)]
    shape = {w: {"commands": 2000, "resting_mean": 50.0 * (i + 1), "resting_max": 90,
                 "cancel_hit_pct": 12.5, "fok_pct": None} for i, w in enumerate(workloads)}
    return {"rows": rows, "shape": shape}


def bitmap_rows(with_scan=True):
    rows = [{"workload": w, "pair": "v2+sorted -> v2", "baseline_best": "sorted",
             "commands": 1000, "resting_mean": 40.0, "mops_without": 2.0, "mops_with": x,
             "with_over_without": x / 2.0}
            for w, x in (("lobster_replay", 1.9), ("lobster_sparse", 2.6))]
    if with_scan:
        rows += [{"workload": w, "pair": "v0+pool -> v1", "baseline_best": "scan",
                  "commands": 2000, "resting_mean": 50.0, "mops_without": 1.0, "mops_with": x,
                  "with_over_without": x}
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
    assert seen == [("v1", n), ("v2", n), ("v2", n), ("v1", n)]
    assert [(r["engine"], r["commands"]) for r in p["rows"]] == [("v1", n), ("v2", n)]
    assert all(r["mops"] > 0 for r in p["rows"]) and p["shape"]["lobster_replay"]["commands"] == n


def test_measure_throughput_refuses_disagreeing_engines():
    def replay(e, wl):
        return SimpleNamespace(elapsed_ns=100, checksum=hash(e))
    with pytest.raises(RuntimeError, match="engines disagree on lobster_replay"):
        es.measure_throughput(["v1", "v2"], ["lobster_replay"], 0.0005, {}, 1, replay=replay)


def test_throughput_table_names_the_fastest_and_a_costly_step():
    t = checked(es.throughput_table(perf(), ENGINES))
    sp = [r for r in t.rows if r["workload"] == "lobster_sparse"]
    assert [r["vs_first"] for r in sp] == [1.0, 0.4, 2.0, 3.0]
    assert [r["vs_previous"] for r in sp] == [None, 0.4, 5.0, 1.5]
    assert t.text == ("On lobster_replay the fastest is v2 (5.00 M ops/s, 5.00x v0). "
                      "On lobster_sparse the fastest is v2 (3.00 M ops/s, 3.00x v0). "
                      "On lobster_sparse, v0+pool keeps only 0.40x the throughput of v0: that "
                      "step costs more than it gains on this stream.")


def test_shape_table():
    s = es.shape_table(perf())
    assert list(s.columns) == list(es.SHAPE_KEYS)
    assert list(s.index) == ["lobster_replay", "lobster_sparse"]


def test_plot_throughput():
    fig = es.plot_throughput(perf(), ENGINES)
    assert len(fig.axes) == 2
    ax = fig.axes[1]
    assert [round(p.get_height(), 6) for p in ax.patches] == [1.0, 0.4, 2.0, 3.0]
    assert ax.get_title() == "lobster_sparse\n(2,000 cmds)"
    assert [t.get_text() for t in ax.get_xticklabels()] == ENGINES


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
    rows = es.measure_bitmap(PAIR, ENGINES, p, 0.0005, 1)
    assert [(r["workload"], r["pair"]) for r in rows] == [
        ("lobster_replay", "v2+sorted -> v2"), ("lobster_replay", "v0+pool -> v1"),
        ("lobster_sparse", "v2+sorted -> v2")]  # the sparse stream did not run the lineage
    assert rows[1]["with_over_without"] == 2.0 and rows[1]["baseline_best"] == "scan"
    assert rows[0]["baseline_best"] == "sorted" and rows[0]["mops_with"] > 0
    assert rows[0]["commands"] > 0 and rows[2]["resting_mean"] > 0


def test_bitmap_table_with_the_rescanning_baseline():
    t = checked(es.bitmap_table(bitmap_rows(), PAIR))
    assert t.text == ("On lobster_replay, adding the bitmap to the sorted baseline gives 0.95x "
                      "the throughput. On lobster_sparse, adding the bitmap to the sorted "
                      "baseline gives 1.30x the throughput. Against lob's rescanning baseline "
                      "the bitmap gives 2.00x (v0+pool -> v1, lobster_replay), 5.00x (v0+pool "
                      "-> v1, lobster_sparse): there it removes a scan problem, which lobster's "
                      "narrow book never had.")


def test_bitmap_table_without_the_rescanning_baseline():
    t = checked(es.bitmap_table(bitmap_rows(with_scan=False), PAIR))
    assert "rescanning" not in t.text and t.text.count("adding the bitmap") == 2


# --- the claims ---------------------------------------------------------------------------------

def test_claims():
    es.register_sorted()
    m = es.claims(bitmap_rows(), PAIR, perf(), ENGINES)
    assert list(m) == ["s003_bitmap_narrow", "s003_bitmap_sparse", "s003_version_steps"]
    n = m["s003_bitmap_narrow"]
    assert n["value"] == 0.95 and n["detail"] == "v2+sorted -> v2 M ops/s"
    assert n["diagnostics"] == {"baseline": es.BASELINE["sorted"], "resting_mean": 40.0,
                                "commands": 1000}
    assert n["explain"] == {"against lob's rescanning baseline": "2.00x"}
    assert m["s003_bitmap_sparse"]["explain"] == {"against lob's rescanning baseline": "5.00x"}
    v = m["s003_version_steps"]
    assert v["value"] == 5.0 and v["diagnostics"] == {"resting_mean": 50.0}
    assert v["explain"] == {"lob's steps": "v0 -> v0+pool -> v1 -> v2"}


def test_claims_without_the_replay_stream():
    es.register_sorted()
    m = es.claims(bitmap_rows(with_scan=False), PAIR, perf(workloads=("lobster_sparse",)),
                  ENGINES)
    assert list(m) == ["s003_bitmap_narrow", "s003_bitmap_sparse"]
    assert m["s003_bitmap_narrow"]["explain"] == {"against lob's rescanning baseline": ""}


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
    p = perf()
    p["rows"].insert(0, {"workload": "lobster_replay", "engine": "oc", "commands": 2000,
                         "mops": 2.5})
    p["skipped"] = [{"workload": "lobster_sparse", "engine": "oc", "reason": WHY}]
    t = checked(es.throughput_table(p, ["oc", *ENGINES]))
    oc = next(r for r in t.rows if r["engine"] == "oc")
    assert oc["vs_first"] == 2.5 and oc["vs_previous"] is None  # over v0; no step
    v0 = next(r for r in t.rows if r["engine"] == "v0" and r["workload"] == "lobster_replay")
    assert v0["vs_previous"] is None and v0["vs_first"] == 1.0
    assert "On lobster_replay the fastest is v2 (5.00 M ops/s, 5.00x v0)." in t.sentences
    assert "On lobster_replay, oc (not of lob's lineage) runs 2.50 M ops/s, 2.50x v0." \
        in t.sentences
    assert t.sentences[-1] == f"Not run: oc on lobster_sparse ({WHY})."
    fig = es.plot_throughput(p, ["oc", *ENGINES])  # a panel without oc draws the others
    assert [len(ax.patches) for ax in fig.axes] == [5, 4]
    m = es.claims(bitmap_rows(), PAIR, p, ["oc", *ENGINES])
    assert m["s003_version_steps"]["value"] == 5.0  # v2 / v0, not over oc


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


def test_measure_beside_runs_each_outsider_and_goes_on_without_c_book(oc_outside):
    calls, said = [], []

    def c_book():
        raise RuntimeError("no C compiler: gcc not found")

    def no_shim(*a, **k):
        raise AttributeError("oc_raw_replay")

    m = SimpleNamespace(
        c_book=c_book, shim_cost=no_shim,
        measure_beside=lambda e, others, workloads, scale, rounds: calls.append(
            (e, others, workloads, scale, rounds)) or {"engine": e})
    out = es.measure_beside(["oc", "v1", "v2"], 0.125, 2, say=said.append, measure=m)
    assert calls == [("oc", ("v2@numba",), es.BESIDE_WORKLOADS, 0.125, es.BESIDE_ROUNDS)]
    assert out == {"oc": {"beside": {"engine": "oc"}, "shim": None}}
    assert said == ["c_book is not available here (no C compiler: gcc not found); measured "
                    "without it"]
    assert es.measure_beside(["v1", "v2"], 0.125, 2, say=said.append, measure=m) == {}
    assert len(said) == 1  # no outsider: c_book is not even built
    calls.clear()
    es.measure_beside(["oc"], 1.0, 9, say=said.append, measure=m)
    assert calls[0][3:] == (es.BESIDE_MAX_SCALE, 9)  # capped size, more rounds when asked

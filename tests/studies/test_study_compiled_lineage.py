"""lob.studies.compiled_lineage on synthetic data: the lineage measured once per stream with
its A/A twin, every table builder's sentences (steps, gains, v3 -> v4 in steps, the floor, side
by side, slower steps), the callgrind and hotspot sections with stand-in tools, and the study's
parameters."""

from __future__ import annotations

import numpy as np
import pytest

from lob.studies import compiled_lineage as cl
from lob.studies import conclude as K
from lob.studies import evolution_stress as es

ROUND = [1.0, 1.1, 0.9, 1.05, 0.95]  # the machine's drift, the same for every engine in a round
TWIN = [1.0, 1.02, 0.98, 1.01, 0.99]  # the A/A copy's own noise


def checked(t: K.Conclusion) -> K.Conclusion:
    assert t.check() == [], t.check()
    return t


# --- the compiled lineage and every engine side by side (lob.diagnose.profile) -------------------

CHAIN = ["v0+pool@numba", "v1@numba", "v2@numba", "v3@numba", "v4@numba"]
KERNEL = {"lobster_replay": [1000.0, 30.0, 30.0, 40.0, 20.0],  # v3 slower than v2, v4 faster
          "cpp_comprehensive": [150.0, 50.0, 40.0, 40.0, 40.0]}
REFUSED = "engine 'orderly_chaos' does not support STP mode CANCEL_MAKER (it declares: NONE)"


FLOOR = {"lobster_replay": 4.0, "cpp_comprehensive": 5.0}  # the stream's floor, ns/op


def fake_measure(engines, w, *, scale, rounds, twin, probes=None, top_up=0):
    """lob.diagnose.profile.measure's result: kernel ns/op per round (the same drift for every
    engine in a round, the twin 2% off at most), orderly_chaos refusing cpp_comprehensive;
    the probes a core clock of 3 GHz and the stream's floor, drifting with the round too."""
    k = dict(zip(CHAIN, KERNEL[w], strict=True), orderly_chaos=100.0)
    if probes is not None:  # on cpp_comprehensive the core is shared after round 2's v4
        order = [*engines, twin + es.AA]
        for i, r in enumerate(ROUND[:rounds]):
            width = [3.3] * (len(order) + 1)
            if w == "cpp_comprehensive" and i == 1:
                width[order.index(twin) + 1] = 2.2
            probes.append({"order": order, "core_ghz": [3.0] * len(width), "width": width,
                           "floor_ns": FLOOR[w] * r})
    out = {}
    for e in [*engines, twin + es.AA]:
        base = e.removesuffix(es.AA)
        if base == "orderly_chaos" and w == "cpp_comprehensive":
            out[e] = {"refused": REFUSED}
            continue
        f = TWIN if e.endswith(es.AA) else [1.0] * rounds
        ks = [k[base] * r * x for r, x in zip(ROUND, f, strict=True)][:rounds]
        out[e] = {"kernel": ks, "replay": [x * 1.2 for x in ks], "checksum": 7}
    return out


def lineage_data(rounds=1):
    seen = []

    def measure(engines, w, **kw):
        seen.append((tuple(engines), w, kw["scale"], kw["rounds"], kw["twin"]))
        assert kw["top_up"] == kw["rounds"]  # up to twice the rounds while too few are quiet
        return fake_measure(engines, w, **kw)
    lin = cl.measure_lineage([*CHAIN, "orderly_chaos"], 0.01, rounds, measure=measure)
    return lin, seen


def test_measure_lineage_measures_once_per_stream_with_the_newest_step_twice():
    lin, seen = lineage_data()
    assert seen == [((*CHAIN, "orderly_chaos"), w, 0.01, es.MIN_ROUNDS, "v4@numba")
                    for w in cl.LINEAGE_WORKLOADS]
    assert (lin["base"], lin["rounds"], lin["scale"]) == ("v4@numba", es.MIN_ROUNDS, 0.01)
    assert lin["ran"] == {w: es.MIN_ROUNDS for w in cl.LINEAGE_WORKLOADS}
    assert [r["step"] for r in lin["lineage"]] == CHAIN * 2
    v3 = lin["lineage"][3]
    assert v3["vs_parent"] == pytest.approx(40 / 30) and v3["call"] == "slower"
    assert lin["lineage"][0]["parent"] is None and lin["lineage"][0]["vs_parent"] is None
    oc = [r for r in lin["side"] if r["engine"] == "orderly_chaos"]
    assert oc[0]["vs_base"] == pytest.approx(5.0) and oc[1]["note"] == REFUSED


def test_floor_table_splits_the_newest_steps_time_into_stream_and_book():
    lin = lineage_data()[0]
    assert lin["floor"]["lobster_replay"]["base_ns"] == [20.0 * r for r in ROUND]
    t = checked(cl.floor_table(lin))
    assert [r["workload"] for r in t.rows] == list(cl.LINEAGE_WORKLOADS)
    r = t._row("lobster_replay")
    # floor 4 of v4's 20 ns/op in every round (both drift alike): 0.2 of it, the book 16
    assert r["share"] == pytest.approx(0.2) and r["book_ns"] == pytest.approx(16.0)
    assert r["floor_lo"] <= r["floor_ns"] <= r["floor_hi"]
    assert r["v4@numba cycles/op"] == pytest.approx(60.0) and r["core_ghz"] == 3.0
    c = t._row("cpp_comprehensive")
    assert c["share"] == pytest.approx(5 / 40)
    # v4's replay of round 2 (drift 1.1) on a shared core: four others, too few for a median
    assert (c["shared"], c["rounds"]) == (1, 5) and r["shared"] == 0
    assert c["quiet_ns"] is None
    assert t.sentences[1].endswith(
        "at the 3.00 GHz the core ran at. 1 of its 5 replays ran on a core shared with another "
        "hardware thread, where a kernel slows by up to half (too few others for a median of "
        "them).")
    # a sixth round, quiet: the five others' median
    f = lin["floor"]["cpp_comprehensive"]
    for k, v in (("floor_ns", 5.0), ("base_ns", 40.0), ("core_ghz", 3.0),
                 ("base_shared", False)):
        f[k] = [*f[k], v]
    t6 = checked(cl.floor_table(lin))
    c6 = t6._row("cpp_comprehensive")
    assert c6["quiet_ns"] == pytest.approx(np.median([40 * x for x in (1.0, 0.9, 1.05, 0.95,
                                                                       1.0)]))
    assert t6.sentences[1].endswith("1 of its 6 replays ran on a core shared with another "
                                    "hardware thread, where a kernel slows by up to half; its "
                                    "median over the others is 40 ns/op.")
    assert t.sentences[0] == (
        "On lobster_replay, reading the commands and writing the outcomes takes 4.00 ns/op "
        "(3.60-4.40), 0.20 (0.20-0.20) of v4@numba's kernel time: no engine replaying this "
        "stream can take less; what the book adds over it is 16 ns/op (14.4-17.6), and the "
        "whole kernel takes 60 cycles a command at the 3.00 GHz the core ran at.")
    # a record from before the probes (or a base that refused the stream): no row, no sentence
    del lin["floor"]
    t = checked(cl.floor_table(lin))
    assert t.rows == [] and t.sentences == []


def test_steps_table_names_each_mechanism():
    from lob.engines import toggles as tg

    t = checked(cl.steps_table(lineage_data()[0]))
    assert [r["step"] for r in t.rows] == CHAIN
    assert t.value("v4@numba", "parent") == "v3@numba"
    assert t.value("v2@numba", "mechanism") == tg.VERSIONS["v2"]["step"]


def test_lineage_table_gives_each_steps_gain_and_its_call():
    t = checked(cl.lineage_table(lineage_data()[0]))
    r = t._row(("lobster_replay", "v3@numba"))
    assert r["gain"] == pytest.approx(0.75) and r["call"] == "slower"
    assert r["aa_low"] == pytest.approx(0.97122, rel=1e-4) and r["kernel_ns"] == 40.0
    assert t._row(("lobster_replay", "v0+pool@numba")).get("gain") is None
    assert "v4@numba measured twice" in t.note
    assert t.sentences == [
        "On lobster_replay (A/A band 0.97-1.03), each step over its parent: faster: v1@numba "
        "33.3x v0+pool@numba (33.3-33.3), v4@numba 2.00x v3@numba (2.00-2.00); slower: "
        "v3@numba 0.75x v2@numba (0.75-0.75); within noise: v2@numba 1.00x v1@numba (1.00-1.00).",
        "On cpp_comprehensive (A/A band 0.97-1.03), each step over its parent: faster: "
        "v1@numba 3.00x v0+pool@numba (3.00-3.00), v2@numba 1.25x v1@numba (1.25-1.25); within "
        "noise: v3@numba 1.00x v2@numba (1.00-1.00), v4@numba 1.00x v3@numba (1.00-1.00)."]


def test_lineage_table_with_a_step_not_told_apart():
    lin = lineage_data()[0]
    lin["lineage"][2].update(vs_parent_lo=0.9, vs_parent_hi=1.2, call="inconclusive")
    t = checked(cl.lineage_table(lin))
    assert "; inconclusive: v2@numba 1.00x v1@numba (0.83-1.11)" in t.sentences[0]


def test_side_table_sets_every_engine_beside_the_newest_step():
    t = checked(cl.side_table(lineage_data()[0]))
    assert "vs_v4@numba" in t.columns
    assert t.value(("lobster_replay", "orderly_chaos"), "vs_v4@numba") == pytest.approx(0.2)
    assert t.value(("lobster_replay", "orderly_chaos"), "same_work") is True
    assert t.value(("cpp_comprehensive", "orderly_chaos"), "call") is None
    assert t.sentences == [
        "On lobster_replay, against v4@numba (A/A band 0.97-1.03): slower: v0+pool@numba "
        "0.02x, v1@numba 0.67x, v2@numba 0.67x, v3@numba 0.50x, orderly_chaos 0.20x.",
        "On cpp_comprehensive, against v4@numba (A/A band 0.97-1.03): slower: v0+pool@numba "
        "0.27x, v1@numba 0.80x; within noise: v2@numba 1.00x, v3@numba 1.00x.",
        f"Not run: orderly_chaos on cpp_comprehensive ({REFUSED})."]


def breakdown_of(parts):
    """command_breakdown's frame: per class (engine -> (time_share, median ns)), an untimed
    stream ns/op of 40 for every engine."""
    import pandas as pd

    def breakdown(engine, w, *, scale, rounds):
        assert rounds == cl.BREAKDOWN_ROUNDS
        return pd.DataFrame([{"class": c, "commands": 50, "share": 0.5, "median_ns": m[engine][1],
                              "p90_ns": m[engine][1], "time_share": m[engine][0],
                              "clock_ns": 20.0, "untimed_ns_per_op": 40.0}
                             for c, m in parts.items()])
    return breakdown


def test_explain_slower_names_the_class_that_took_the_added_time():
    lin = lineage_data()[0]
    rows = cl.explain_slower(lin, breakdown=breakdown_of(
        {"CANCEL hits": {"v3@numba": (0.25, 40.0), "v2@numba": (0.5, 30.0)},
         "LIMIT rests untouched": {"v3@numba": (0.75, 60.0), "v2@numba": (0.5, 30.0)}}))
    assert rows == [{"workload": "lobster_replay", "step": "v3@numba", "parent": "v2@numba",
                     "class": "LIMIT rests untouched", "share": 0.5, "step_part": 30.0,
                     "parent_part": 20.0, "added_ns_per_op": 10.0, "step_median": 60.0,
                     "parent_median": 30.0}]
    t = checked(cl.slower_table(rows))
    assert t.sentences == ["On lobster_replay, v3@numba is slower than v2@numba; the most "
                           "added time is in LIMIT rests untouched (0.50 of the commands): "
                           "30 ns of each op against 20 ns."]
    rows = cl.explain_slower(lin, breakdown=breakdown_of(
        {"CANCEL hits": {"v3@numba": (1.0, 30.0), "v2@numba": (1.0, 30.0)}}))
    assert rows[0]["class"] is None
    assert checked(cl.slower_table(rows)).sentences == [
        "On lobster_replay, v3@numba is slower than v2@numba, and no class of command shows "
        "where: every class's part of the ns/op is the same or lower."]
    assert checked(cl.slower_table([])).sentences == [
        "No step is slower than its parent beyond the A/A band on any stream."]


def test_side_engines_builds_c_book_or_says_why_not():
    from lob.engines import toggles as tg

    said = []

    def no_gcc():
        raise RuntimeError("no C compiler: gcc not found")
    names = cl.side_engines(say=said.append, c_book=no_gcc)
    assert names[:len(tg.chain("numba"))] == tg.chain("numba")
    assert "reference" not in names and "v2" not in names and "listbook" not in names
    assert said[0] == ("c_book is not built here (no C compiler: gcc not found); the "
                       "side-by-side goes on without it")


def test_profile_twin_measures_one_engine_twice():
    from lob.diagnose import profile as pf

    s = pf.measure(["v4@numba"], "lobster_replay", scale=0.001, rounds=5, twin="v4@numba")
    assert set(s) == {"v4@numba", "v4@numba" + pf.AA}
    assert len(s["v4@numba" + pf.AA]["kernel"]) == 5
    assert s["v4@numba" + pf.AA]["checksum"] == s["v4@numba"]["checksum"]
    band = pf.aa_control(s, "v4@numba")
    assert band["n"] == 5 and band["low"] <= 1 <= band["high"]
    assert pf.aa_control({}, "v4@numba")["low"] is None
    with pytest.raises(ValueError, match="twin 'v3@numba' is not one of the engines"):
        pf.measure(["v4@numba"], "lobster_replay", scale=0.001, rounds=1, twin="v3@numba")


def _fake_counts(instr: dict, checksum: dict | None = None):
    """A stand-in for lob.diagnose.callgrind.counts: fixed instructions per engine."""
    import pandas as pd

    calls = []

    def counts(engines, workload, *, scale, base):
        calls.append((list(engines), workload, scale, base))
        rows = []
        for e in engines:
            rows.append({"engine": e, "workload": workload, "commands": 1000,
                         "instructions": instr[e], "loads": 30.0, "stores": 18.0,
                         "branches": instr[e] / 8, "mispredicts": instr[e] / 100,
                         "d1_misses": 4.0, "ll_misses": 1.2,
                         "checksum": (checksum or {}).get(e, 7)})
        df = pd.DataFrame(rows)
        b = df[df.engine == base].iloc[0]
        df["instructions_vs_base"] = df.instructions / b.instructions
        df["mispredicts_vs_base"] = df.mispredicts / b.mispredicts
        df["same_work"] = df.checksum == b.checksum
        return df

    return counts, calls


def test_measure_counts_puts_the_newest_step_first_and_skips_at_scale_zero():
    counts, calls = _fake_counts({"v3@numba": 200.0, "v4@numba": 100.0, "c_book": 150.0})
    cnt = cl.measure_counts(["v3@numba", "v4@numba", "c_book"], 0.1, counts=counts,
                            workloads=["lobster_replay"])
    assert cnt["skipped"] is None and cnt["base"] == "v4@numba"
    assert calls == [(["v4@numba", "v3@numba", "c_book"], "lobster_replay", 0.1, "v4@numba")]
    assert [r["engine"] for r in cnt["rows"]] == ["v4@numba", "v3@numba", "c_book"]
    off = cl.measure_counts(["v3@numba", "v4@numba"], 0.0, counts=counts)
    assert off["rows"] == [] and off["skipped"] == "callgrind_scale is 0"
    assert len(calls) == 1  # nothing counted at scale 0
    t = cl.counts_table(off)
    assert t.text.startswith("Not counted: callgrind_scale is 0")


def test_counts_table_quotes_step_and_base_ratios_and_refuses_other_work():
    counts, _ = _fake_counts({"v3@numba": 250.0, "v4@numba": 100.0, "c_book": 150.0,
                              "odd": 90.0}, checksum={"odd": 8})
    cnt = cl.measure_counts(["v3@numba", "v4@numba", "c_book", "odd"], 0.1, counts=counts,
                            workloads=["lobster_replay"])
    t = cl.counts_table(cnt)
    k = ("lobster_replay", "v4@numba")
    assert t.value(k, "instr_vs_parent") == pytest.approx(0.4)  # v4 over its parent v3
    assert t.value(("lobster_replay", "c_book"), "instr_vs_v4@numba") == pytest.approx(1.5)
    assert t.value(("lobster_replay", "odd"), "instr_vs_v4@numba") is None  # other checksum
    assert t.value(("lobster_replay", "v3@numba"), "instr_vs_parent") is None  # v2 not counted
    s = t.text
    assert s.startswith("On lobster_replay, v4@numba executes 100 instructions a command "
                        "(12.5 branches, 1.00 simulated mispredicts, 4.00 L1 misses)")
    assert f"v4@numba {t.cell(k, 'instr_vs_parent')}x" in s
    assert f"c_book {t.cell(('lobster_replay', 'c_book'), 'instr_vs_v4@numba')}x" in s
    assert "odd (other work: no ratio)" in s
    assert "compiled for the CPU valgrind presents;" in t.note  # the fakes name no target
    cnt["rows"][0]["target"] = "haswell"
    assert "the CPU valgrind presents (haswell);" in cl.counts_table(cnt).note


def test_counts_table_names_an_engine_that_refused_the_stream():
    counts, _ = _fake_counts({"v4@numba": 100.0, "c_book": 150.0})
    cnt = cl.measure_counts(["v4@numba", "c_book"], 0.1, counts=counts,
                            workloads=["lobster_replay"])
    cnt["rows"].append({"engine": "orderly_chaos", "workload": "lobster_replay",
                        "note": "does not support STP mode CANCEL_MAKER"})
    t = cl.counts_table(cnt)
    assert t.value(("lobster_replay", "orderly_chaos"), "instructions") is None
    assert "orderly_chaos" not in t.sentences[0]
    assert t.sentences[-1] == ("Not run: orderly_chaos on lobster_replay (does not support "
                               "STP mode CANCEL_MAKER).")


def _fake_sample(shares: dict):
    """A stand-in for lob.diagnose.hotspots.hotspots: fixed lines per stream, calls recorded."""
    calls = []

    def sample(engine, workload, *, seconds, top):
        calls.append((engine, workload, seconds, top))
        lines = [{"share": v, "samples": round(1000 * v), "where": f"kernel_v4.py:{100 + k}",
                  "function": fn, "code": f"x = {k}"}
                 for k, (fn, v) in enumerate(shares[workload])]
        return {"commands": 1000, "reps": 9, "samples": 5000, "kernel_samples": 1000,
                "ns_per_op": 14.25, "lines": lines[:top]}

    return sample, calls


def test_measure_hotspots_samples_the_newest_step_and_skips_when_off():
    sample, calls = _fake_sample({"lobster_replay": [("run", 0.25), ("rest", 0.125)],
                                  "cpp_comprehensive": [("drop", 0.5)]})
    hot = cl.measure_hotspots(["c_book", "v3@numba", "v5@numba", "v4@numba"], 1.5,
                              sample=sample)
    assert hot["skipped"] is None and hot["engine"] == "v5@numba"  # the newest step, any order
    assert calls == [("v5@numba", "lobster_replay", 1.5, 12),
                     ("v5@numba", "cpp_comprehensive", 1.5, 12)]
    assert [(r["workload"], r["rank"], r["share_pct"], r["function"]) for r in hot["rows"]] == [
        ("lobster_replay", 1, 25.0, "run"), ("lobster_replay", 2, 12.5, "rest"),
        ("cpp_comprehensive", 1, 50.0, "drop")]
    assert hot["runs"]["cpp_comprehensive"] == {"commands": 1000, "reps": 9, "samples": 5000,
                                                "kernel_samples": 1000, "ns_per_op": 14.25}
    off = cl.measure_hotspots(["v5@numba"], 0, sample=sample)
    assert off["skipped"] == "hotspots_seconds is 0" and off["rows"] == []
    none = cl.measure_hotspots(["c_book", "v2"], 5, sample=sample)
    assert none["skipped"].startswith("no compiled step") and none["engine"] is None
    assert len(calls) == 2  # nothing sampled when off or with no compiled step
    t = cl.hotspots_table(off)
    assert t.text.startswith("Not sampled: hotspots_seconds is 0") and t.rows == []


def test_hotspots_table_names_each_streams_three_heaviest_lines_from_its_cells():
    sample, _ = _fake_sample({"lobster_replay": [("run", 0.25), ("rest", 0.125), ("drop", 0.0625),
                                                 ("bm_set", 0.03)],
                              "cpp_comprehensive": [("drop", 0.5)]})
    hot = cl.measure_hotspots(["v5@numba"], 2.0, sample=sample)
    t = cl.hotspots_table(hot)
    assert t.name == "hotspots (v5@numba)"
    assert t.sentences == [
        "On lobster_replay, v5@numba's kernel spends the most sampled time on kernel_v4.py:100 "
        "in run (25% of its samples), then kernel_v4.py:101 in rest (12.5% of its samples), "
        "then kernel_v4.py:102 in drop (6.25% of its samples).",
        "On cpp_comprehensive, v5@numba's kernel spends the most sampled time on "
        "kernel_v4.py:100 in drop (50% of its samples)."]
    assert "for 2 s of kernel time" in t.note and "the instruction after" in t.note
    assert "9 replays, 1,000 samples in the kernel, 14.2 ns/op" in t.note
    assert K.check_record(t.record()) == []  # every number quoted is shown


def test_explain_slower_reads_the_throughput_sections_steps():
    """The rows es.throughput_slower gives (a step slower on one stream, at that stream's
    scale) are explained at that scale; pure-Python engines are said to be untimed."""
    lin = {"scale": 0.25, "lineage": [
        {"workload": "lobster_sparse", "step": "v0+pool", "parent": "v0", "call": "slower",
         "scale": 0.001},
        {"workload": "lobster_replay", "step": "v2", "parent": "v1", "call": "faster",
         "scale": 0.25}]}
    asked = []

    def breakdown(engine, w, *, scale, rounds):
        asked.append((engine, w, scale))
        return breakdown_of({"CANCEL hits": {"v0+pool": (0.5, 40.0), "v0": (0.25, 30.0)}})(
            engine, w, scale=scale, rounds=rounds)

    got = cl.explain_slower(lin, breakdown=breakdown, times_itself=lambda e: True)
    assert asked == [("v0+pool", "lobster_sparse", 0.001), ("v0", "lobster_sparse", 0.001)]
    assert [(r["step"], r["class"], r["added_ns_per_op"]) for r in got] == [
        ("v0+pool", "CANCEL hits", 10.0)]
    # engines that do not time each command (the pure-Python ones): said, never split
    got = cl.explain_slower(lin, breakdown=None, times_itself=lambda e: e != "v0")
    assert got == [{"workload": "lobster_sparse", "step": "v0+pool", "parent": "v0",
                    "class": None, "untimed": True}]
    t = checked(cl.slower_table(got, name="slower steps (throughput)"))
    assert t.name == "slower steps (throughput)" and "untimed" not in t.columns
    assert t.sentences == [
        "On lobster_sparse, v0+pool is slower than v0; where, the data cannot say: these "
        "engines do not time each command inside their replay, so there is no per-class "
        "split."]
    assert not cl._times_itself("v2") and cl._times_itself("v4@numba")


V4_STEPS = ["v3@numba", "v3+packed@numba", "v3+packed+hot@numba",
            "v3+packed+hot+select@numba", "v4@numba"]


def test_v4_steps_table_sets_each_single_step_beside_the_whole_from_one_measurement():
    kernel = dict(zip(V4_STEPS, [40.0, 32.0, 25.0, 25.0, 20.0], strict=True))

    def measure(engines, w, *, scale, rounds, twin, probes=None, top_up=0):
        out = {}
        for e in [*engines, twin + es.AA]:
            f = TWIN if e.endswith(es.AA) else [1.0] * rounds
            ks = [kernel[e.removesuffix(es.AA)] * r * x
                  for r, x in zip(ROUND, f, strict=True)][:rounds]
            out[e] = {"kernel": ks, "replay": ks, "checksum": 7}
        return out

    lin = cl.measure_lineage(V4_STEPS, 0.01, 5, workloads=["lobster_replay"], measure=measure)
    whole = lin["v4_whole"]
    assert [(r["step"], r["parent"]) for r in whole] == [("v4@numba", "v3@numba")]
    assert whole[0]["vs_parent"] == pytest.approx(0.5)
    t = checked(cl.v4_steps_table(lin))
    single = [r for r in t.rows if r["kind"] == "single"]
    assert [r["step"] for r in single] == V4_STEPS[1:]
    lineage = {r["step"]: r for r in checked(cl.lineage_table(lin)).rows}
    for r in single:  # the very figure of the lineage table, not a second measurement
        assert r["gain"] == lineage[r["step"]]["gain"]
        assert (r["gain_lo"], r["gain_hi"]) == (lineage[r["step"]]["gain_lo"],
                                                lineage[r["step"]]["gain_hi"])
    assert t.value(("lobster_replay", "v3@numba", "v4@numba"), "gain") == pytest.approx(2.0)
    assert t.sentences == [
        "On lobster_replay, v4 over v3 is 2.00x (2.00-2.00, faster); its steps: "
        "v3+packed@numba 1.25x (faster), v3+packed+hot@numba 1.28x (faster), "
        "v3+packed+hot+select@numba 1.00x (within noise), v4@numba 1.25x (faster)."]


def test_v4_steps_table_without_the_sub_steps_shows_the_step_once():
    lin = lineage_data()[0]  # v3 -> v4 directly: the lineage row is the whole step
    t = checked(cl.v4_steps_table(lin))
    assert [(r["workload"], r["step"], r["kind"]) for r in t.rows] == [
        (w, "v4@numba", "single") for w in cl.LINEAGE_WORKLOADS]
    assert t.sentences == []


def test_parameters_refuse_what_the_notebook_would():
    assert cl.Parameters() == cl.Parameters(0.002, 3, 0.0, 0.0)
    with pytest.raises(ValueError, match="lineage_scale must be > 0, got 0"):
        cl.Parameters(lineage_scale=0)
    with pytest.raises(ValueError, match="repeat must be >= 1"):
        cl.Parameters(repeat=0)
    with pytest.raises(ValueError, match="hotspots_seconds must be >= 0, got -1"):
        cl.Parameters(hotspots_seconds=-1)
    assert cl.claims() == {}

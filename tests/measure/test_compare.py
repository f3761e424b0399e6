"""`lob compare`: per-metric ratios with bootstrap intervals, verdicts, machine check, gate."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lob.cli import main
from lob.measure.compare import compare
from lob.measure.results import MixedMachinesError, write_result
from lob.measure.stats import change, ratio_interval

HOST = {"hostname": "h1", "cpu_model": "Test CPU 3000", "cpu_count": 2, "os": "Linux 6"}


def write_side(folder, factor=1.0, *, files=5, cond=HOST, seed=0, engine="v1",
               workload="mixed_70_20_10"):
    """``files`` bench-shaped results (5 throughput runs each, one latency capture, one
    allocation count), every figure times ``factor``, with 2% noise."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(files):
        def noisy(x):
            return float(x * factor * np.exp(rng.normal(0, 0.02)))

        rec = {"kind": "bench", "engine": engine, "workload": workload, "conditions": cond,
               "throughput": {"runs_ns_per_op": [noisy(1000) for _ in range(5)]},
               "latency": {"p50": noisy(800), "p99": noisy(3000), "p99_9": noisy(9000)},
               "alloc": {"counts": {"allocs_per_op": noisy(4.0)}}}
        write_result(rec, folder / f"{engine}__{workload}__{i}.json")
    return folder


def test_identical_inputs_are_all_within_noise(tmp_path):
    a = write_side(tmp_path / "a")
    c = compare(a, a)
    assert set(c.rows.metric) == {"ns_per_op", "p50", "p99", "p99_9", "allocs_per_op"}
    assert (c.rows.verdict == "within noise").all(), c.markdown()
    assert np.allclose(c.rows.ratio, 1.0)
    assert (c.rows.ci_low <= 1).all() and (c.rows.ci_high >= 1).all()


def test_a_2x_change_is_slower_with_an_interval_excluding_1(tmp_path):
    a = write_side(tmp_path / "a", seed=1)
    b = write_side(tmp_path / "b", 2.0, seed=2)
    c = compare(a, b)
    assert (c.rows.verdict == "slower").all(), c.markdown()
    assert (c.rows.ci_low > 1).all()
    assert np.allclose(c.rows.ratio, 2.0, rtol=0.05)
    back = compare(b, a)
    assert (back.rows.verdict == "faster").all() and (back.rows.ci_high < 1).all()


def test_single_values_get_no_invented_interval(tmp_path, capsys):
    a = write_side(tmp_path / "a", files=1, seed=3)
    b = write_side(tmp_path / "b", 2.0, files=1, seed=4)
    r = compare(a, b).rows.set_index("metric")
    assert r.loc["ns_per_op", "verdict"] == "slower"  # five replays: an interval
    for m in ("p50", "p99", "p99_9", "allocs_per_op"):  # one capture, one count: none
        assert r.loc[m, "verdict"] == "inconclusive"
        assert r.loc[m, "ci_low"] is None or np.isnan(r.loc[m, "ci_low"])
    assert ratio_interval([1.0], [2.0, 2.1]) == (pytest.approx(2.05), None, None)
    # a gate fails only on a change beyond noise: the single values are listed, not gated
    assert main(["compare", str(a), str(b), "--metric", "p99", "--fail-above", "1.5"]) == 0
    assert main(["compare", str(a), str(b), "--fail-above", "1.5"]) == 1  # ns/op: 5 values


def test_mixed_machines_are_refused_unless_allowed(tmp_path, capsys):
    a = write_side(tmp_path / "a")
    for field, value in (("hostname", "h2"), ("cpu_model", "Other CPU"), ("cpu_count", 64)):
        b = write_side(tmp_path / f"b-{field}", cond={**HOST, field: value})
        with pytest.raises(MixedMachinesError, match="machines"):
            compare(a, b)
        assert compare(a, b, allow_mixed=True).mixed
        assert main(["compare", str(a), str(b)]) == 2
        assert "allow-mixed" in capsys.readouterr().err
        assert main(["compare", str(a), str(b), "--allow-mixed"]) == 0


def test_cli_markdown_png_and_fail_above(tmp_path, capsys):
    a = write_side(tmp_path / "a", seed=5)
    b = write_side(tmp_path / "b", 2.0, seed=6)
    out = tmp_path / "out"
    assert main(["compare", str(a), str(a), "--fail-above", "1.05", "--out", str(out)]) == 0
    assert (out / "compare.md").read_text().count("within noise") >= 5
    assert (out / "compare.png").stat().st_size > 1000
    capsys.readouterr()
    assert main(["compare", str(a), str(b), "--fail-above", "1.5"]) == 1
    assert "FAIL: 5 comparisons worse than x1.5" in capsys.readouterr().out
    assert main(["compare", str(a), str(b), "--fail-above", "2.5"]) == 0
    assert main(["compare", str(a), str(b), "--metric", "p99.9", "--fail-above", "1.5"]) == 1


def test_run_id_and_bad_input(tmp_path, monkeypatch):
    art = tmp_path / "artifacts"
    write_side(art / "tail_analysis" / "quick-0123456789")
    write_side(art / "tail_analysis" / "quick-abcdefabcd", 2.0)
    monkeypatch.setenv("LOB_ARTIFACTS", str(art))
    c = compare("quick-0123456789", "quick-abcdefabcd")
    assert (c.rows.verdict == "slower").all()
    with pytest.raises(FileNotFoundError, match="neither"):
        compare("quick-0123456789", "no-such-run")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no lob result"):
        compare(tmp_path / "empty", art)
    with pytest.raises(ValueError, match="unknown metric"):
        compare(art, art, metrics=["p42"])
    assert change(None, None) == "inconclusive" and change(0.96, 1.02, 0.05) == "within noise"
    assert change(0.9, 1.02, 0.05) == "inconclusive"


def test_real_bench_results_compare(tmp_path):
    """The figures lob.bench writes are the ones compare reads."""
    import lob

    for side in ("a", "b"):
        lob.bench("reference", "mixed_70_20_10", scale=0.001, repeat=3, diagnostics=False,
                  out=tmp_path / side)
    c = compare(tmp_path / "a", tmp_path / "b")
    r = c.rows.set_index("metric")
    assert {"ns_per_op", "p50", "p99", "p99_9"} <= set(r.index)
    rec = json.loads(next((tmp_path / "a").glob("*.json")).read_text())
    runs = rec.get("runs") or []  # a result that keeps its latency runs: one value per run
    assert r.loc["ns_per_op", "n_a"] == 3 and r.loc["p50", "n_a"] == (len(runs) or 1)


def test_latency_runs_give_repeat_level_percentiles(tmp_path):
    """A result that keeps its latency runs (one histogram each) gives one value per run."""
    from lob.measure.hgrm import encode
    from lob.measure.latency import histogram_from

    rng = np.random.default_rng(7)

    def side(name, factor):
        runs = [{"encoded": encode(histogram_from(
            (rng.lognormal(7, 0.3, 2000) * factor).astype(np.int64))[0])} for _ in range(5)]
        rec = {"kind": "bench", "engine": "v1", "workload": "w", "conditions": HOST,
               "runs": runs, "latency": {"p50": 1.0}}
        (tmp_path / name).mkdir()
        write_result(rec, tmp_path / name / "r.json")
        return tmp_path / name

    r = compare(side("a", 1.0), side("b", 2.0)).rows.set_index("metric")
    assert list(r.n_a) == [5, 5, 5] and (r.verdict == "slower").all()
    assert r.loc["p50", "ratio"] == pytest.approx(2.0, rel=0.05)


# --- issue 26: no silent wrong answer ------------------------------------------------------

@pytest.mark.parametrize("repeat", [5, 2])  # lob bench's default --repeat, and a quick 2
def test_identical_code_gets_at_most_5pct_false_calls(tmp_path, repeat):
    """100 comparisons of two sessions of identical code (10% lognormal noise per replay),
    compare's defaults (5% margin, 95%): at most 5 call slower or faster."""
    rng = np.random.default_rng(26)
    false = 0
    for i in range(100):
        sides = []
        for s in ("a", "b"):
            d = tmp_path / f"{i}{s}"
            d.mkdir()
            write_result({"kind": "bench", "engine": "v1", "workload": "w", "conditions": HOST,
                          "throughput": {"runs_ns_per_op":
                                         list(1000 * rng.lognormal(0, 0.1, repeat))}},
                         d / "r.json")
            sides.append(d)
        (verdict,) = compare(*sides, n_boot=500, seed=i).rows.verdict
        false += verdict in ("slower", "faster")
    assert false <= 5, (repeat, false)


def test_different_workload_parameters_or_schema_are_refused_unless_allowed(tmp_path, capsys):
    from lob.measure.compare import MixedWorkloadsError

    def side(name, **cond):
        d = tmp_path / name
        d.mkdir()
        write_result({"kind": "bench", "engine": "v1", "workload": "w",
                      "conditions": {**HOST, **cond},
                      "throughput": {"runs_ns_per_op": [1000.0 + i for i in range(5)]}},
                     d / "r.json")
        return d

    a = side("a", seed=1, params={"scale": 0.01, "seed": 1})
    b = side("b", seed=1, params={"scale": 0.02, "seed": 1})
    c = side("c", seed=2, params={"scale": 0.01, "seed": 2})
    same = side("same", seed=1, params={"scale": 0.01, "seed": 1})
    assert compare(a, same).different == []
    for other, what in ((b, "scale=0.02"), (c, "seed=2")):
        with pytest.raises(MixedWorkloadsError, match=what):
            compare(a, other)
        assert main(["compare", str(a), str(other)]) == 2
        assert "allow-different" in capsys.readouterr().err
        assert main(["compare", str(a), str(other), "--allow-different"]) == 0
        assert "DIFFERENT (allowed)" in capsys.readouterr().out
    rec = json.loads((same / "r.json").read_text())
    rec["schema_version"] = 2
    (same / "r.json").write_text(json.dumps(rec))
    with pytest.raises(MixedWorkloadsError, match="schema versions 1, 2"):
        compare(a, same)
    with pytest.raises(MixedWorkloadsError, match="schema version 2 .this lob reads 1"):
        compare(same, same)
    assert compare(same, same, allow_different=True).different


def test_dropped_files_are_reported_and_a_gate_fails_on_what_it_could_not_see(tmp_path,
                                                                             capsys):
    a = write_side(tmp_path / "a", seed=11)
    b = write_side(tmp_path / "b", seed=12)
    full = (b / "v1__mixed_70_20_10__0.json").read_text()
    (b / "v1__mixed_70_20_10__0.json").write_text(full[: len(full) // 2])  # truncated
    (b / "notes.json").write_text('{"hello": 1}')
    c = compare(a, b)
    text = c.markdown()
    assert "dropped from B: 2 file(s)" in text and "v1__mixed_70_20_10__0.json (unreadable" in text
    assert "notes.json (not a result" in text
    assert main(["compare", str(a), str(b), "--fail-above", "1.5"]) == 1
    assert "could not see" in capsys.readouterr().out
    # a metric the gate never saw: B keeps no allocation counts
    b2 = write_side(tmp_path / "b2", seed=13)
    for f in b2.glob("*.json"):
        rec = json.loads(f.read_text())
        del rec["alloc"]
        f.write_text(json.dumps(rec))
    assert "allocs/op only in A" in compare(a, b2).markdown()
    assert main(["compare", str(a), str(b2), "--fail-above", "1.5"]) == 1
    assert main(["compare", str(a), str(b2), "--metric", "ns/op", "--fail-above", "1.5"]) == 0
    # a pair on one side only
    write_side(tmp_path / "b3", seed=14, engine="v2")
    write_side(tmp_path / "b3", seed=15)
    assert "v2/mixed_70_20_10 only in B" in compare(a, tmp_path / "b3").unseen
    assert main(["compare", str(a), str(tmp_path / "b3"), "--fail-above", "1.5"]) == 1


# --- issue 44: results that disagree are never compared as if they agreed -----------------

def test_results_whose_replays_disagree_are_refused_even_by_the_gate(tmp_path, capsys):
    """An engine that never rests an order (0 trades) is not 'faster' than one that trades."""
    from lob.measure.compare import ResultsDisagreeError

    for side, factor, checksum, trades in (("a", 1.0, 111, 17240), ("b", 0.3, 222, 0)):
        write_side(tmp_path / side, factor)
        for f in (tmp_path / side).glob("*.json"):
            rec = json.loads(f.read_text())
            rec.update(checksum=checksum, counters={"trades": trades, "fills": trades})
            f.write_text(json.dumps(rec))
    with pytest.raises(ResultsDisagreeError, match="checksum 111; fills=17240, trades=17240 "
                                                   "vs B checksum 222; fills=0, trades=0"):
        compare(tmp_path / "a", tmp_path / "b", allow_different=True)
    code = main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--fail-above", "1.1"])
    out, err = capsys.readouterr()
    assert code == 2 and "disagree" in err and "faster" not in out
    # the same answers on both sides compare as before
    for f in (tmp_path / "b").glob("*.json"):
        rec = json.loads(f.read_text())
        rec.update(checksum=111, counters={"trades": 17240, "fills": 17240})
        f.write_text(json.dumps(rec))
    assert compare(tmp_path / "a", tmp_path / "b").rows.verdict.eq("faster").all()


def test_other_seeds_may_do_other_work_when_different_workloads_are_allowed(tmp_path):
    from lob.measure.compare import MixedWorkloadsError

    for side, seed, checksum in (("a", 1, 111), ("b", 2, 222)):
        write_side(tmp_path / side, cond={**HOST, "seed": seed, "params": {"scale": 0.1}})
        for f in (tmp_path / side).glob("*.json"):
            rec = json.loads(f.read_text())
            rec.update(checksum=checksum, counters={"trades": checksum})
            f.write_text(json.dumps(rec))
    with pytest.raises(MixedWorkloadsError):
        compare(tmp_path / "a", tmp_path / "b")
    c = compare(tmp_path / "a", tmp_path / "b", allow_different=True)
    assert len(c.rows) and c.different

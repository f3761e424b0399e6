"""lob.bench / lob bench: parameter errors before any work, the result, its files."""

import importlib
import json

import numpy as np
import pytest

import lob
import lob.workloads
from lob.cli import main
from lob.measure import load_results
from lob.measure.hgrm import decode, read_hgrm
from lob.measure.results import BenchResult, LatencyRun, MixedRunsError
from lob.semantics import commands
from lob.studies import nb

bench_mod = importlib.import_module("lob.measure.bench")  # the module, not the function


class _Wl:
    """A stand-in workload: the fields bench reads."""

    name = "tiny"
    family = "test"
    seed = 5
    params = {"n": 300}
    description = "300 submits around 100, the first 50 untimed"
    config = lob.BookConfig()

    def __init__(self):
        rows = [dict(kind=0, otype=i % 2 * 4, side=i % 2, owner=1 + i % 3, price=100 + i % 5,
                     qty=1 + i % 7) for i in range(300)]
        self.commands = commands(rows)
        self.commands["timed"][:50] = False


@pytest.fixture
def no_work(monkeypatch):
    """Fail the test if a workload gets built or an engine replayed."""
    def boom(*a, **k):
        raise AssertionError("work started before the parameters were checked")

    monkeypatch.setattr(lob.workloads, "build", boom)
    monkeypatch.setattr(bench_mod, "calibrate", boom)


def test_unknown_engine(no_work):
    with pytest.raises(ValueError, match="unknown engine 'nope'.*reference"):
        lob.bench("nope", "add_only")


def test_unknown_workload(no_work):
    with pytest.raises(ValueError, match="unknown workload 'nope'"):
        lob.bench("reference", "nope")


@pytest.mark.parametrize("repeat", [0, -3, 1.5, True])
def test_bad_repeat(no_work, repeat):
    with pytest.raises(ValueError, match="repeat"):
        lob.bench("reference", "add_only", repeat=repeat)


def test_unwritable_output_folder(no_work, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    with pytest.raises(PermissionError, match="not writable"):
        lob.bench("reference", "add_only", out=blocker / "sub")


def test_bad_workload_object(no_work):
    with pytest.raises(TypeError, match="workload"):
        lob.bench("reference", np.zeros(3))


def test_bench_result_and_files(tmp_path):
    wl = _Wl()
    res = lob.bench("reference", wl, repeat=2, alloc=True, gc=False, diagnostics=False)
    assert len(res.runs) == 2 and [r.count for r in res.runs] == [250, 250]
    assert res.latency.count == 500 and res.n_timed == 250 and res.n_commands == 300
    assert res.latency.min <= res.latency.p50 <= res.latency.p99 <= res.latency.max
    assert res.throughput["repeat"] == 2 and len(res.throughput["runs_ns_per_op"]) == 2
    assert res.throughput["min_ns_per_op"] <= res.throughput["median_ns_per_op"]
    assert res.checksum == lob.replay("reference", wl).checksum
    assert res.conditions["gc_enabled"] is False and res.conditions["seed"] == 5
    assert res.alloc["counts"]["ops"] == 250
    t = res.table()
    for word in ("p50", "p99.99", "max", "mean", "count", "clock", "not subtracted",
                 "throughput", "M ops/s", "allocs/op", "conditions"):
        assert word in t, word
    paths = res.save(tmp_path)
    assert paths["hgrm"].name == "reference__tiny.hgrm"
    assert read_hgrm(paths["hgrm"]).value_at_percentile(99) == res.latency.p99
    rec = json.loads(paths["json"].read_text())
    assert rec["schema_version"] == 1 and rec["conditions"]["cpu_count"]
    assert decode(rec["latency"]["encoded"]).get_total_count() == 500
    assert [decode(r["encoded"]).get_total_count() for r in rec["runs"]] == [250, 250]
    back = BenchResult.from_dict(rec)
    assert back.latency == res.latency and back.throughput == res.throughput
    assert rec["latency"]["unit"] == "ns"
    df = load_results(tmp_path)
    assert df.loc[0, "latency.p50"] == res.latency.p50


def test_tail_analysis_repeat_merges_captures():
    """The tail_analysis notebook's measurement (lob.bench -> nb.bench_row) with repeat=3
    holds three times the samples of repeat=1: every repeat is a capture, all merged."""
    wl = lob.workload("mixed_70_20_10", scale=0.001)
    rows = {r: nb.bench_row(lob.bench("v3", wl, repeat=r, latency=True, throughput=False,
                                      diagnostics=False)) for r in (1, 3)}
    assert rows[1]["count"] == wl.n_timed > 0
    assert rows[3]["count"] == 3 * rows[1]["count"]


def test_benchmark_merges_runs_of_one_machine_only():
    wl = _Wl()
    a = lob.bench("reference", wl, repeat=1, diagnostics=False)
    b = lob.bench("reference", wl, repeat=2, diagnostics=False)
    m = BenchResult.merge([a, b])
    assert len(m.runs) == 3 and m.latency.count == 750 and m.throughput["repeat"] == 3
    assert m.histogram.get_value_at_percentile(100) == max(a.latency.max, b.latency.max)
    moved = BenchResult.from_dict(b.to_dict())
    moved.conditions["machine"] = "elsewhere|cpu|2|os"
    with pytest.raises(MixedRunsError, match="machines"):
        BenchResult.merge([a, moved])
    other = LatencyRun(b.runs[0].encoded, "python-loop", 0, "elsewhere|cpu|2|os", b.checksum)
    with pytest.raises(MixedRunsError, match="from machine 'elsewhere"):
        m.add_run(other)
    with pytest.raises(MixedRunsError, match="cannot merge v2 on tiny"):
        BenchResult.merge([a, lob.bench("v2", wl, repeat=1, diagnostics=False)])


def test_bench_by_name_with_diagnostics(tmp_path):
    res = lob.bench("reference", "mixed_70_20_10", scale=0.002, repeat=1, out=tmp_path)
    assert res.workload == "mixed_70_20_10" and res.workload_meta["params"]["scale"] == 0.002
    assert res.diagnostics and "cross_pct" in res.diagnostics
    rec = json.loads((tmp_path / "reference__mixed_70_20_10.json").read_text())
    assert rec["diagnostics"]["cross_pct"] == pytest.approx(res.diagnostics["cross_pct"])


def test_cli_bench(tmp_path, capsys):
    rc = main(["bench", "--engine", "reference", "--workload", "mixed_70_20_10", "--scale",
               "0.002", "--repeat", "1", "--out", str(tmp_path), "--no-progress", "--no-gc"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "| p99 |" in out and "throughput" in out
    assert (tmp_path / "reference__mixed_70_20_10.hgrm").exists()
    assert (tmp_path / "reference__mixed_70_20_10.json").exists()


def test_cli_bad_parameters(tmp_path, capsys):
    assert main(["bench", "--engine", "nope", "--workload", "add_only"]) == 2
    assert "unknown engine" in capsys.readouterr().err
    assert main(["bench", "--engine", "reference", "--workload", "add_only",
                 "--repeat", "-1"]) == 2
    assert "repeat" in capsys.readouterr().err


def test_an_engine_that_breaks_the_rules_is_not_benchmarked(tmp_path):
    """An engine that declares every STP mode and implements none (issue 44): on stp_sweep it
    trades where reference refuses; lob bench says so and saves nothing."""
    import dataclasses

    import lob
    from lob.engines.base import EngineSpec
    from lob.engines.registry import get_engine, register_engine
    from lob.semantics import StpMode

    def no_stp(config):  # reference with self-trade prevention switched off
        return get_engine("reference", dataclasses.replace(config, stp=StpMode.NONE))

    register_engine(EngineSpec("no_stp", no_stp, "declares STP, ignores it"), replace=True)
    with pytest.raises(RuntimeError, match=r"no_stp disagrees with reference on stp_sweep "
                                           r"\(checksum .*trades"):
        lob.bench("no_stp", "stp_sweep", scale=0.01, repeat=1, diagnostics=False,
                  out=tmp_path)
    assert not list(tmp_path.glob("*.json"))
    ok = lob.bench("reference", "stp_sweep", scale=0.01, repeat=1, diagnostics=False)
    assert ok.checksum

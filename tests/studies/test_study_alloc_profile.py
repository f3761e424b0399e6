"""lob.studies.alloc_profile on synthetic data: every sentence branch of every table builder,
the plot's axes and bars, the claims, and the procedure with a stand-in bench."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from lob.studies import alloc_profile as ap
from lob.studies import claims as C
from lob.studies import published


def row(w, e, allocs, nbytes=100.0, ops=1000):
    return {"workload": w, "engine": e, "ops": ops, "allocs_per_op": allocs,
            "bytes_per_op": nbytes, "frees_per_op": allocs - 0.5, "harness_allocs_per_op": 1.0}


LINEAGE = [row("mix", "v0", 5.0, 400.0), row("mix", "v0+pool", 4.0, 330.0),
           row("mix", "v3", 9.5, 512.0), row("budget", "v0", 2.0), row("budget", "v0+pool", 2.0),
           row("budget", "v3", 8.0)]


def test_check_parameters_names_what_is_wrong():
    ap.check_parameters(["v0", "v3"], ["mix"], "v3", 8)
    with pytest.raises(ValueError, match="engines is empty"):
        ap.check_parameters([], ["mix"], "v3", 8)
    with pytest.raises(ValueError, match="workloads is empty"):
        ap.check_parameters(["v3"], [], "v3", 8)
    with pytest.raises(ValueError, match=r"claim_engine 'v9' must be one of engines \['v3'\]"):
        ap.check_parameters(["v3"], ["mix"], "v9", 8)
    for bad in (0, True, 2.5):
        with pytest.raises(ValueError, match="top must be >= 1"):
            ap.check_parameters(["v3"], ["mix"], "v3", bad)


def test_measure_allocations_with_a_stand_in_bench(tmp_path):
    saved, captured = [], []

    def bench(engine, wl, **kw):
        assert kw == {"repeat": 1, "latency": False, "throughput": False, "alloc": True,
                      "diagnostics": False}
        n = {"a": 2.0, "b": 3.0}[engine]
        sites = [{"site": f"/x/lob/engines/{engine}.py:{i}", "size_diff": 1024 * (5 - i),
                  "count_diff": i} for i in range(4)]
        return SimpleNamespace(
            alloc={"counts": {"ops": 10, "allocs_per_op": n, "bytes_per_op": 10 * n,
                              "frees_per_op": n - 1}, "harness_allocs_per_op": 1.0,
                   "trace": {"top_sites": sites}},
            save=lambda out: saved.append((engine, wl.name, out)))

    def capture(engine, wl):
        captured.append((engine, wl.name))
        return {"durations": np.arange(1, 101, dtype=np.int64)}

    data = ap.measure_allocations(["a", "b"], ["w1", "w2"], 0.5, 2, tmp_path, bench=bench,
                                  workload=lambda name, scale: SimpleNamespace(name=name),
                                  capture=capture)
    assert [(r["workload"], r["engine"], r["allocs_per_op"]) for r in data["rows"]] == [
        ("w1", "a", 2.0), ("w1", "b", 3.0), ("w2", "a", 2.0), ("w2", "b", 3.0)]
    assert {r["counter"] for r in data["rows"]} == {"CPython hook"}  # no method: Python's
    assert data["rows"][0]["harness_allocs_per_op"] == 1.0 and data["rows"][1]["ops"] == 10
    assert len(data["sites"]) == 8  # top 2 per (workload, engine)
    assert data["sites"][0] == {"workload": "w1", "engine": "a", "rank": 0,
                                "site": "engines/a.py:0", "kib": 5.0, "blocks": 0}
    assert saved == [("a", "w1", tmp_path), ("b", "w1", tmp_path), ("a", "w2", tmp_path),
                     ("b", "w2", tmp_path)]
    assert captured == [("b", "w1"), ("b", "w2")]  # the last engine, once per workload
    assert sorted(p.name for p in tmp_path.glob("*.hgrm")) == ["b__w1.hgrm", "b__w2.hgrm"]


def test_allocations_table_names_least_most_and_the_pool_step():
    t = ap.allocations_table(LINEAGE)
    assert t.name == "allocations" and t.check() == []
    assert [r["vs_first"] for r in t.rows] == [1.0, 0.8, 1.9, 1.0, 1.0, 4.0]
    assert t.sentences == [
        "On mix, v0+pool allocates least (4.00 allocs/op, 330 B/op) and v3 most (9.50).",
        "The node pool step (v0 -> v0+pool) takes allocs/op to 0.80x v0's."]
    assert "harness" in t.note


def test_allocations_table_without_the_pool_step_or_with_one_engine():
    t = ap.allocations_table([row("mix", "v1", 6.0), row("mix", "v3", 9.0)])
    assert t.check() == [] and len(t.sentences) == 1  # v0 not profiled: no pool step
    t = ap.allocations_table([row("mix", "v0+pool", 6.0), row("mix", "v0", 9.0)])
    assert len(t.sentences) == 1  # v0 is not the first: vs_first is not over v0
    t = ap.allocations_table([row("mix", "v3", 9.25, 512.0), row("budget", "v3", 7.0)])
    assert t.check() == []
    assert t.sentences == ["On mix, only v3 was profiled: 9.25 allocs/op, 512 B/op."]


def test_seed_table_comes_from_the_published_figures_and_the_claims():
    t = ap.seed_table()
    m000 = C.get("s000_allocs_mixed").machine
    assert t.name == f"seed 000 ({m000}, Rust global-allocator counter)"
    assert t.machine == f"{m000} (seed 000)" and t.check() == [] and t.text == ""
    mixed, budget = C.get("s000_allocs_mixed").workload, C.get("s000_alloc_budget").workload
    alloc = published.SEED000_ALLOC
    assert t.value(mixed, "allocs_per_op") == alloc["allocs_per_op"]
    assert t.value(mixed, "bytes_per_op") == alloc["bytes_per_op"]
    assert t.value(budget, "asserted_ceiling") == alloc["budget_ceiling_allocs_per_op"]
    assert t.value(budget, "allocs_per_op") is None
    t = ap.seed_table(alloc={"allocs_per_op": 1, "bytes_per_op": 2,
                             "budget_ceiling_allocs_per_op": 3}, machine="M",
                      workloads=["a", "b"])
    assert [r["workload"] for r in t.rows] == ["a", "b"] and t.value("b", "asserted_ceiling") == 3


def test_plot_allocations_two_panels_one_bar_per_engine_and_workload():
    fig = ap.plot_allocations(LINEAGE)
    assert [ax.get_ylabel() for ax in fig.axes] == ["allocs_per_op", "bytes_per_op"]
    ax = fig.axes[0]
    assert len(ax.patches) == 6  # 3 engines x 2 workloads
    assert [t.get_text() for t in ax.get_xticklabels()] == ["v0", "v0+pool", "v3"]
    assert sorted(p.get_height() for p in ax.patches) == sorted(r["allocs_per_op"]
                                                                  for r in LINEAGE)
    assert fig.legends and fig.legends[0].get_title().get_text() == "workload"


def test_sites_table_sums_sorts_and_keeps_the_top():
    sites = [{"site": "a.py:1", "kib": 1.0, "blocks": 2}, {"site": "b.py:2", "kib": 5.0,
                                                             "blocks": 1},
             {"site": "a.py:1", "kib": 5.5, "blocks": 3}, {"site": "c.py:3", "kib": 0.5,
                                                             "blocks": 9}]
    t = ap.sites_table(sites, 2)
    assert t.check() == []
    assert t.rows == [{"site": "a.py:1", "kib": 6.5, "blocks": 5},
                      {"site": "b.py:2", "kib": 5.0, "blocks": 1}]
    assert t.text == "The largest allocation site is a.py:1 (6.50 KiB net)."
    t = ap.sites_table([], 8)
    assert t.rows == [] and t.text == "No allocation site was traced."


def test_claims_follow_claims_yaml_and_skip_unprofiled_workloads():
    mixed, budget = C.get("s000_allocs_mixed").workload, C.get("s000_alloc_budget").workload
    rows = [row(mixed, "v0", 5.0, 400.0), row(mixed, "v3", 9.0, 512.0), row(budget, "v3", 7.0)]
    m = ap.claims(rows, "v3")
    assert set(m) == {c.id for c in C.for_experiment("alloc_profile")}
    assert m["s000_allocs_mixed"]["value"] == 9.0 and m["s000_bytes_mixed"]["value"] == 512.0
    assert m["s000_alloc_budget"]["value"] == 7.0
    assert m["s000_allocs_mixed"]["diagnostics"] == {"alloc_counter": ap.COUNTER}
    assert m["s000_bytes_mixed"]["detail"] == "v3, bytes/op"
    assert C.judge(C.get("s000_alloc_budget"), m["s000_alloc_budget"]).verdict == \
        "not comparable"  # the counters differ: never compared
    assert set(ap.claims(rows[:2], "v3")) == {"s000_allocs_mixed", "s000_bytes_mixed"}
    assert ap.claims(rows, "v1") == {}


def test_claims_on_a_native_counter_are_judged():
    """A native engine counts with the seed's definition: its claims pass the regime check
    and get a verdict (below the budget ceiling: reproduced; outside the band: not)."""
    mixed, budget = C.get("s000_allocs_mixed").workload, C.get("s000_alloc_budget").workload
    rows = [{**row(mixed, "n", 0.5, 40.0), "counter": "native"},
            {**row(budget, "n", 0.8), "counter": "native"}]
    m = ap.claims(rows, "n")
    assert m["s000_allocs_mixed"]["diagnostics"] == {"alloc_counter": ap.NATIVE_COUNTER}
    assert m["s000_allocs_mixed"]["detail"] == "n, allocs/op (the engine library's own counter)"
    assert C.judge(C.get("s000_alloc_budget"), m["s000_alloc_budget"]).verdict == "reproduced"
    assert C.judge(C.get("s000_allocs_mixed"), m["s000_allocs_mixed"]).verdict == \
        "not reproduced"


def test_beside_seed_table_quotes_both_counts_only_for_a_native_counter():
    mixed = C.get("s000_allocs_mixed").workload
    alloc = {"allocs_per_op": 18.23, "bytes_per_op": 6173}
    rows = [{**row(mixed, "n", 0.47, 29.8), "counter": "native"}, row(mixed, "v3", 9.0)]
    t = ap.beside_seed_table(rows, "n", alloc=alloc, machine="M")
    assert [r["engine"] for r in t.rows] == ["n"] and t.check() == []
    assert t.sentences == ["n makes 0.47 allocations per op against the seed's 18.2, and "
                           "requests 29.8 B per op against 6,173, counted the same way."]
    t = ap.beside_seed_table(rows, "v3", alloc=alloc, machine="M")
    assert "not the seed's count" in t.sentences[0]
    t = ap.beside_seed_table(rows, "x", alloc=alloc, machine="M")
    assert t.sentences == [f"x was not profiled on {mixed}."]

"""Claims: the definitions load, take their seed figures from claims.yaml's one ``published``
section (no figure typed twice); every verdict branch and every regime-check branch is reached
by a synthetic measurement."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest

from lob.studies import claims as C
from lob.studies import published as P
from lob.studies.pipeline_latency import claims as _pipeline_claims


def pl_claims(tables, cpu_count=None):
    """The pipeline's claims as read back from a summary (no cpu count: none recorded)."""
    return _pipeline_claims(tables, cpu_count, here=False)


def _claim(**kw) -> C.Claim:
    base = dict(id="x", seed="seed001", finding="f", machine="Apple M2 Pro", metric="a / b",
                workload="w", size="s", experiment="fok_scan_bottleneck", kind="ratio",
                detail="d", value=2.0, pivot=1.0, tolerance=0.25)
    base.update(kw)
    return C.Claim(**base)


def _pt(v, **kw) -> dict:
    """A measurement with a tight noise interval around ``v``: judged as the point would be
    (the single-point rule needs an interval to judge at all)."""
    return C.measurement(v, ci=(v * (1 - 1e-6), v * (1 + 1e-6)), **kw)


# --- the definitions ------------------------------------------------------------------------

def test_claims_load_and_cover_the_issue_list():
    ids = {c.id for c in C.load()}
    scenarios = P.SEED000_PERCENTILES
    assert {f"s000_tail_{s}" for s in scenarios} <= ids
    assert {"s000_allocs_mixed", "s000_bytes_mixed", "s000_alloc_budget", "s000_stp_one_step",
            "s000_mass_cancel_gain", "s001_counters", "s001_v0_v1_limit_only",
            "s001_v0_v1_comprehensive", "s001_v1_v2_comprehensive", "s001_v2_tail",
            "s003_bitmap_narrow", "s003_bitmap_sparse", "s003_version_steps",
            "s003_pipeline_capacity", "s003_pinning"} <= ids


def test_claim_experiments_exist():
    from lob.experiments import experiment_names

    names = set(experiment_names())
    for c in C.load():
        assert c.experiment in names, f"{c.id}: no experiment {c.experiment!r}"


def test_claim_values_are_computed_from_the_published_figures():
    by = {c.id: c for c in C.load()}
    for sc, q in P.SEED000_PERCENTILES.items():
        assert by[f"s000_tail_{sc}"].value == q["p99"] / q["p50"], sc
        assert by[f"s000_tail_{sc}"].detail == (f"p50 {C.show_figure(q['p50'])} ns, "
                                               f"p99 {C.show_figure(q['p99'])} ns")
    ns = P.SEED001_NS_PER_OP["cpp_comprehensive"]
    assert by["s001_v1_v2_comprehensive"].value == ns["v1"] / ns["v2"]
    assert by["s001_counters"].value == {
        **P.SEED001_COUNTERS, "limit_only_remaining_sum": P.SEED001_LIMIT_ONLY_REMAINING_SUM}
    assert by["s000_allocs_mixed"].value == P.SEED000_ALLOC["band"]
    assert by["s003_bitmap_narrow"].value == 1 - P.SEED003_BITMAP_NARROW_COST_PCT / 100
    # one step carries the whole stp_sweep shift: the share of the log change is 1
    assert by["s000_stp_one_step"].value == 1.0
    assert f"{C.show_figure(P.SEED000_BISECTION['stp_sweep'][0])} ->" in \
        by["s000_stp_one_step"].finding


def _figures(node):
    if isinstance(node, dict):
        for v in node.values():
            yield from _figures(v)
    elif isinstance(node, list):
        for v in node:
            yield from _figures(v)
    elif isinstance(node, int | float) and not isinstance(node, bool):
        yield node


def test_no_seed_figure_is_typed_twice():
    """A claim's value, finding, detail and caveat cite the published section, never retype
    a figure of it (three digits or more: 42 ns or a 4% cost may be words of a sentence)."""
    raw = C.read()
    figs = {C.show_figure(x) for x in _figures(raw["published"])} | {
        str(x) for x in _figures(raw["published"])}
    figs = {f for f in figs if sum(ch.isdigit() for ch in f) >= 3}
    for d in raw["claims"]:
        for k in ("value", "finding", "detail", "caveat"):
            text = str(d.get(k, ""))
            typed = [f for f in figs if re.search(rf"(?<![\w.,]){re.escape(f)}(?![\w,]|\.\d)",
                                                  text)]
            assert typed == [], f"{d['id']}.{k} types {typed}: cite the published section"


def test_a_reference_to_no_figure_is_refused(tmp_path):
    d = {"id": "x", "seed": "seed001", "finding": "about {nope}", "machine": "m",
         "metric": "a / b", "workload": "w", "size": "s", "experiment": "e", "kind": "ratio",
         "detail": "d", "value": {"ratio": ["t/a", "t/b"]}, "tolerance": 0.1}
    p = tmp_path / "claims.yaml"
    p.write_text(json.dumps({"machines": {"m": "M"}, "published": {"t": {"a": 3, "b": 2}},
                             "claims": [d]}))
    with pytest.raises(ValueError, match="no published figure 'nope'"):
        C.load(p)
    d["finding"] = "{value}x, {t/a} over {t/b}"
    p.write_text(json.dumps({"machines": {"m": "M"}, "published": {"t": {"a": 3, "b": 2}},
                             "claims": [d]}))
    assert (C.load(p)[0].value, C.load(p)[0].finding) == (1.5, "1.50x, 3 over 2")


def test_every_seed_figure_names_its_machine():
    for c in C.load():
        assert f"[{c.machine}]" in c.seed_figure


@pytest.mark.parametrize("change, msg", [
    ({"kind": "nope"}, "kind"),
    ({"machine": "pdp11"}, "machine"),
    ({"value": -1}, "positive value"),
    ({"tolerance": None}, "tolerance"),
    ({"value": 1}, "pivot"),
    ({"kind": "direction"}, "direction"),
    ({"kind": "band", "value": [3, 1]}, "band"),
    ({"regime": [{"diagnostic": "count"}]}, "regime"),
    ({"bogus": 1}, "unknown keys"),
])
def test_bad_definitions_are_refused(tmp_path, change, msg):
    d = {"id": "a", "seed": "seed001", "finding": "f", "machine": "m2pro", "metric": "m",
         "workload": "w", "size": "s", "experiment": "e", "kind": "ratio", "detail": "d",
         "value": 2.0, "pivot": 1, "tolerance": 0.1}
    d.update(change)
    p = tmp_path / "claims.yaml"
    p.write_text(json.dumps({"machines": {"m2pro": "Apple M2 Pro"}, "claims": [d]}))
    with pytest.raises(ValueError, match=msg):
        C.load(p)


def test_duplicate_ids_are_refused(tmp_path):
    d = {"id": "a", "seed": "s", "finding": "f", "machine": "m", "metric": "m",
         "workload": "w", "size": "s", "experiment": "e", "kind": "ceiling", "detail": "d",
         "value": 10}
    p = tmp_path / "claims.yaml"
    p.write_text(json.dumps({"machines": {"m": "M"}, "claims": [d, d]}))
    with pytest.raises(ValueError, match="twice"):
        C.load(p)


# --- verdicts -------------------------------------------------------------------------------

def test_not_measured():
    assert C.judge(_claim(), None).verdict == "not measured"
    assert C.judge(_claim(), C.measurement(None)).verdict == "not measured"


def test_ratio_reproduced_within_tolerance():
    v = C.judge(_claim(), _pt(2.4))
    assert v.verdict == "reproduced" and "the whole interval is inside" in v.reason


def test_ratio_direction_only_names_the_measured_reason():
    v = C.judge(_claim(value=13.1), _pt(63.2, explain={"v1/v2 at depth 525": 0.58}))
    assert v.verdict == "direction only"
    assert "lob 63.2, interval" in v.reason and "v1/v2 at depth 525: 0.58" in v.reason


def test_ratio_other_side_of_pivot_is_not_reproduced():
    assert C.judge(_claim(), _pt(0.9)).verdict == "not reproduced"
    assert C.judge(_claim(), _pt(1.0)).verdict == "not reproduced"  # on the pivot


def test_ratio_pivot_other_than_one():
    c = _claim(value=68.5, pivot=10, tolerance=0.5)
    assert C.judge(c, _pt(40.0)).verdict == "reproduced"
    assert C.judge(c, _pt(12.0)).verdict == "direction only"
    assert C.judge(c, _pt(3.0)).verdict == "not reproduced"


def test_ratio_noise_interval_around_pivot_is_no_direction():
    v = C.judge(_claim(), C.measurement(2.0, ci=(0.9, 3.0)))
    assert v.verdict == "inconclusive" and "no direction" in v.reason
    assert C.judge(_claim(), C.measurement(2.0, ci=(1.5, 2.5))).verdict == "reproduced"


# --- spread-aware verdicts: a ratio with a noise interval is judged on the whole interval ------

def _limit_only(**kw) -> C.Claim:  # the seed's 2.12 +-25%: the band is 1.59-2.65
    return _claim(value=2.12, tolerance=0.25, **kw)


def test_interval_inside_the_band_is_reproduced():
    v = C.judge(_limit_only(), C.measurement(1.65, ci=(1.60, 1.70),
                                             ci_what="93.8% interval of the median of 5 repeats"))
    assert v.verdict == "reproduced" and "the whole interval is inside" in v.reason
    assert "1.6-1.7: 93.8% interval of the median of 5 repeats" in v.lob_figure


def test_interval_outside_the_band_is_direction_only_or_not_reproduced():
    below = C.judge(_limit_only(), C.measurement(1.4, ci=(1.3, 1.5), explain={"why": 0.5}))
    assert below.verdict == "direction only" and "the whole interval is outside" in below.reason
    assert "why: 0.5" in below.reason
    assert C.judge(_limit_only(), C.measurement(3.0, ci=(2.8, 3.2))).verdict == "direction only"
    other = C.judge(_limit_only(), C.measurement(0.8, ci=(0.7, 0.9)))
    assert other.verdict == "not reproduced" and "other side of 1" in other.reason
    mag = _claim(value=1.0, pivot=None, tolerance=0.25)
    assert C.judge(mag, C.measurement(1.5, ci=(1.4, 1.6))).verdict == "not reproduced"
    assert C.judge(mag, C.measurement(1.1, ci=(1.0, 1.2))).verdict == "reproduced"


def test_interval_across_a_tolerance_edge_is_inconclusive():
    c = _limit_only()
    assert C.judge(c, _pt(1.62)).verdict == "reproduced"  # the point alone: inside
    v = C.judge(c, C.measurement(1.62, ci=(1.55, 1.65)))
    assert v.verdict == "inconclusive" and "inconclusive" in C.VERDICTS
    assert v.reason.startswith("interval 1.55-1.65 straddles the tolerance edge 1.59")
    up = C.judge(c, C.measurement(2.6, ci=(2.5, 2.8)))
    assert up.verdict == "inconclusive" and "edge 2.65" in up.reason
    wide = C.judge(c, C.measurement(2.0, ci=(1.2, 3.0)))
    assert wide.verdict == "inconclusive" and "both tolerance edges 1.59 and 2.65" in wide.reason
    # an edge shown to four figures: 1.588 is not written as 1.59 on both sides
    near = C.judge(c, C.measurement(1.6, ci=(1.588, 1.62)))
    assert near.verdict == "inconclusive" and "1.588-1.62 straddles" in near.reason
    mag = _claim(value=1.0, pivot=None, tolerance=0.25)
    assert C.judge(mag, C.measurement(1.2, ci=(1.1, 1.3))).verdict == "inconclusive"


def test_interval_across_the_pivot_is_still_no_direction():
    v = C.judge(_limit_only(), C.measurement(1.05, ci=(0.95, 1.2)))  # band 1.59-2.65 out
    assert v.verdict == "not reproduced" and "no direction either way" in v.reason
    assert "ruled out" in v.reason
    v = C.judge(_limit_only(), C.measurement(1.3, ci=(0.95, 1.7)))  # reaches into the band
    assert v.verdict == "inconclusive" and "no direction either way" in v.reason


def test_no_interval_is_a_single_point_and_says_so():
    c = _limit_only()
    ok = C.judge(c, C.measurement(1.62, detail="v0 / v1 ns/op"))
    assert ok.verdict == "inconclusive: single point" and ok.lob_figure == \
        "1.62 [no interval available] (v0 / v1 ns/op)"
    assert "neither reproduce nor refute" in ok.reason
    low = C.judge(c, C.measurement(1.58, ci_what="no interval: 3 repeat(s), too few"))
    assert low.verdict == "inconclusive: single point"
    assert low.lob_figure == "1.58 [no interval available: 3 repeat(s), too few]"
    band = _claim(kind="band", value=[15, 19])  # kinds that do not use an interval: no note
    assert "interval" not in C.judge(band, C.measurement(18.2)).lob_figure


def test_the_limit_only_claim_straddling_its_edge_is_inconclusive():
    # measured on compiled engines (a pure-Python measurement of its node pool is not the
    # seed's mechanism: test_verdicts)
    c = replace(C.get("s001_v0_v1_limit_only"), engine="v0+pool@numba, v1@numba")
    good = {"commands": 2_000_000, "step": "levels, best", "load_avg": 1.1}
    v = C.judge(c, C.measurement(1.6, diagnostics=good, ci=(1.55, 1.65)))
    edge = f"{c.value * (1 - c.tolerance):.4g}"  # the seed's 162.1 / 76.6, less 25%
    assert v.verdict == "inconclusive" and f"edge {edge}" in v.reason
    assert C.judge(c, C.measurement(1.63, diagnostics=good, ci=(1.61, 1.66))).verdict \
        == "reproduced"
    assert C.judge(c, C.measurement(1.5, diagnostics=good, ci=(1.45, 1.55))).verdict \
        == "direction only"
    # pairs measured while other work ran are not compared (load shifts v0 more than v1)
    busy = C.judge(c, C.measurement(1.63, diagnostics={**good, "load_avg": 3.2},
                                    ci=(1.61, 1.66)))
    assert busy.verdict == "not comparable" and "load_avg" in busy.regime


def test_inconclusive_is_tallied_and_listed():
    vs = [C.judge(_limit_only(id="a"), C.measurement(1.62, ci=(1.55, 1.65))),
          C.judge(_limit_only(id="b"), C.measurement(1.65, ci=(1.6, 1.7)))]
    assert C.reproduction_markdown(vs).splitlines()[0] == \
        "2 claims: 1 reproduced, 1 inconclusive."
    con = C.verdict_table({"s001_v0_v1_limit_only": C.measurement(
        1.6, diagnostics={"commands": 2_000_000, "step": "levels, best", "load_avg": 1.1},
        ci=(1.55, 1.65), backend="compiled")},
        "fok_scan_bottleneck", only_measured=True)
    assert con.text == "Inconclusive: s001_v0_v1_limit_only."
    assert con.check() == []


def test_magnitude_only_claim():
    c = _claim(value=1.0, pivot=None, tolerance=0.25)
    assert C.judge(c, _pt(1.1)).verdict == "reproduced"
    assert C.judge(c, _pt(1.6)).verdict == "not reproduced"


def test_direction_claim():
    c = _claim(kind="direction", direction="up", value=None, tolerance=None)
    assert C.judge(c, _pt(1.3)).verdict == "reproduced"
    assert C.judge(c, _pt(0.7)).verdict == "not reproduced"


def test_exact_claim_compares_every_counter():
    c = _claim(kind="exact", value={"filled": 3, "trades": 5}, pivot=None)
    assert C.judge(c, C.measurement({"filled": 3, "trades": 5})).verdict == "reproduced"
    v = C.judge(c, C.measurement({"filled": 3, "trades": 6}))
    assert v.verdict == "not reproduced" and "trades lob 6 vs seed 5" in v.reason
    assert C.judge(c, C.measurement({"filled": 3})).verdict == "not reproduced"


def test_ceiling_and_band():
    c = _claim(kind="ceiling", value=10)
    assert C.judge(c, C.measurement(9.99)).verdict == "reproduced"
    assert C.judge(c, C.measurement(10.0)).verdict == "not reproduced"
    b = _claim(kind="band", value=[15, 19])
    assert C.judge(b, C.measurement(18.2)).verdict == "reproduced"
    assert C.judge(b, C.measurement(3.0)).verdict == "not reproduced"


def test_absolute_claim_is_never_compared_across_machines():
    c = _claim(kind="absolute", value=6_300_000)
    v = C.judge(c, C.measurement(6_300_000.0), machine="Intel Xeon")
    assert v.verdict == "not comparable" and "machine" in v.reason
    assert "6,300,000" not in v.lob_figure  # lob's absolute figure stays in its notebook


def test_not_a_number_is_not_reproduced():
    assert C.judge(_claim(), C.measurement("fast")).verdict == "not reproduced"


# --- regime checks --------------------------------------------------------------------------

def _regime(**kw) -> C.RegimeCheck:
    return C.RegimeCheck(**kw)


def test_regime_min_fails_and_names_the_diagnostic():
    c = _claim(regime=(_regime(diagnostic="market_empty_pct", min=90, seed="~98%"),))
    v = C.judge(c, _pt(2.0, diagnostics={"market_empty_pct": 0.0}))
    assert v.verdict == "not comparable"
    assert v.reason == "market_empty_pct = 0 (needs >= 90; seed: ~98%)"
    ok = C.judge(c, _pt(2.0, diagnostics={"market_empty_pct": 97.8}))
    assert ok.verdict == "reproduced" and ok.regime.startswith("ok: market_empty_pct 97.8")


def test_regime_max_equals_and_missing():
    c = _claim(regime=(_regime(diagnostic="cancel_hit_pct", max=20),
                       _regime(diagnostic="commands", equals=2_000_000),
                       _regime(diagnostic="baseline_rescans", equals=False)))
    good = {"cancel_hit_pct": 11.0, "commands": 2_000_000, "baseline_rescans": False}
    assert C.judge(c, _pt(2.0, diagnostics=good)).verdict == "reproduced"
    for key, bad in (("cancel_hit_pct", 50.0), ("commands", 20_000),
                     ("baseline_rescans", True), ("baseline_rescans", 0)):
        v = C.judge(c, _pt(2.0, diagnostics={**good, key: bad}))
        assert v.verdict == "not comparable" and v.reason.startswith(key), (key, bad)
    missing = {k: v for k, v in good.items() if k != "commands"}
    v = C.judge(c, _pt(2.0, diagnostics=missing))
    assert v.verdict == "not comparable" and v.reason.startswith("commands not measured")


def test_regime_range_refuses_non_numbers():
    c = _claim(regime=(_regime(diagnostic="resting_mean", min=3000, max=12000),))
    assert C.judge(c, C.measurement(2.0, diagnostics={"resting_mean": "lots"})).verdict \
        == "not comparable"
    assert C.judge(c, C.measurement(2.0, diagnostics={"resting_mean": 20000})).verdict \
        == "not comparable"


# --- collecting from run directories ----------------------------------------------------------

def _run(root, exp, rid, claims, cpu="Test CPU"):
    d = root / exp / rid
    d.mkdir(parents=True)
    (d / "summary.json").write_text(json.dumps({"claims": claims,
                                                "conditions": {"cpu_model": cpu}}))
    (d / "COMPLETE").write_text("x\n")
    return d


def test_verdicts_from_artifacts(tmp_path):
    cs = [_claim(id="a"), _claim(id="b", experiment="tail_analysis"), _claim(id="c")]
    _run(tmp_path, "fok_scan_bottleneck", "quick-1", {"a": _pt(2.1),
                                                      "c": _pt(0.5)})
    vs = C.verdicts(tmp_path, cs)
    assert [v.verdict for v in vs] == ["reproduced", "not measured", "not reproduced"]
    assert vs[0].link == "fok_scan_bottleneck/quick-1/fok_scan_bottleneck.ipynb"
    md = C.reproduction_markdown(vs)
    assert md.splitlines()[0].startswith("3 claims: 1 reproduced, 1 not reproduced, "
                                         "1 not measured")
    assert "Test CPU" in md.splitlines()[0]
    assert "| claim | seed figure (machine) | lob figure (this machine) | regime check |" in md


def test_collect_ignores_partial_runs_and_older_presets(tmp_path):
    import os
    import time

    old = _run(tmp_path, "e", "quick-1", {"a": C.measurement(1.0)})
    os.utime(old / "COMPLETE", (time.time() - 100, time.time() - 100))
    _run(tmp_path, "e", "default-1", {"a": C.measurement(2.0)})
    partial = tmp_path / "e" / "default-2"
    partial.mkdir()
    (partial / "summary.json").write_text(json.dumps({"claims": {"a": C.measurement(9.0)}}))
    found = C.collect(tmp_path)
    assert found["a"][0]["value"] == 2.0


def test_measurement_converts_numpy_and_checks_ci():
    np = pytest.importorskip("numpy")
    m = C.measurement(np.float64(1.5), diagnostics={"count": np.int64(7)}, ci=(1, 2))
    assert json.loads(json.dumps(m)) == {"value": 1.5, "diagnostics": {"count": 7},
                                         "explain": {}, "detail": "", "ci": [1.0, 2.0]}
    with pytest.raises(ValueError):
        C.measurement(1.0, ci=(2, 1))


def test_failed_regime_wins_over_a_missing_figure():
    c = _claim(regime=(_regime(diagnostic="count", min=1000),))
    v = C.judge(c, C.measurement(None, diagnostics={"count": 200}))
    assert v.verdict == "not comparable" and v.reason == "count = 200 (needs >= 1,000)"
    assert C.judge(c, C.measurement(None, diagnostics={"count": 5000})).verdict == "not measured"


def test_passed_regime_reads_plainly():
    c = _claim(regime=(_regime(diagnostic="called", equals=True),
                       _regime(diagnostic="count", min=1000)))
    v = C.judge(c, C.measurement(2.0, diagnostics={"called": True, "count": 5000}))
    assert v.regime == "ok: called = yes; count 5,000 >= 1,000"


def test_index_opens_with_the_reproduction_table(tmp_path):
    from lob.experiments.report import write_index

    run = _run(tmp_path, "fok_scan_bottleneck", "quick-1",
               {"s001_v1_v2_comprehensive": _pt(
                   60.0, diagnostics={"commands": 2_000_000})})
    (run / "summary.json").write_text(json.dumps({
        "claims": {"s001_v1_v2_comprehensive": _pt(
            60.0, diagnostics={"commands": 2_000_000})},
        "conditions": {"cpu_model": "Test CPU"}, "run": {}, "conclusion": "x"}))
    text = write_index(tmp_path).read_text()
    head = text.split("## fok_scan_bottleneck", 1)[0]
    assert "## Reproduction of the seeds' claims" in head
    assert "| claim | seed figure (machine) | lob figure (this machine) | regime check |" in head
    row = next(ln for ln in head.splitlines() if ln.startswith("| s001_v1_v2_comprehensive"))
    assert "[Apple M2 Pro]" in row and "| direction only |" in row
    assert "(fok_scan_bottleneck/quick-1/fok_scan_bottleneck.ipynb)" in row
    assert len([ln for ln in head.splitlines() if ln.startswith("| s0")]) == len(C.load())


def test_pipeline_claims_from_its_tables(tmp_path):
    tables = {"capacity": [{"batch": 1, "capacity": 96_000.0}, {"batch": 8, "capacity": 4e5}],
              "sweep": [{"batch": 1, "pinning": "unpinned", "fraction": 1.2, "keeps_up": False,
                         "lat_p99": 9e6},
                        {"batch": 8, "pinning": "unpinned", "fraction": 1.5, "keeps_up": True,
                         "lat_p99": 9e6},
                        {"batch": 1, "pinning": "unpinned", "fraction": 0.5, "saturated": False,
                         "lat_p99": 1000.0},
                        {"batch": 1, "pinning": "pinned", "fraction": 0.5, "saturated": False,
                         "lat_p99": 1100.0}]}
    m = pl_claims(tables, cpu_count=2)
    assert m["s003_pipeline_capacity"]["value"] == 96_000.0
    assert m["s003_pipeline_saturation"]["value"] == 0.5
    assert m["s003_pipeline_saturation"]["ci"] == pytest.approx([0.0126, 0.9874], abs=1e-4)
    assert m["s003_pipeline_saturation"]["explain"][
        "p99 above / below capacity (medians)"] == pytest.approx(9e6 / 1000.0)
    assert m["s003_pinning"]["value"] == pytest.approx(1.1)
    assert pl_claims({}) == {}
    run = tmp_path / "pipeline_latency" / "default-1"
    run.mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps({"tables": tables,
                                                  "conditions": {"cpu_count": 2}}))
    (run / "COMPLETE").write_text("")
    by = {v.claim.id: v for v in C.verdicts(tmp_path)}
    assert by["s003_pipeline_capacity"].verdict == "not comparable"
    # 1 of 2 rows measured to saturate: the 0.01-0.99 interval holds the pivot 0.5
    assert by["s003_pipeline_saturation"].verdict == "inconclusive"
    assert "contains 0.50: no direction" in by["s003_pipeline_saturation"].reason
    assert by["s003_pinning"].verdict == "not comparable"  # one run each: no statement
    assert "repeats" in by["s003_pinning"].regime
    for pin, p99 in (("unpinned", 990.0), ("pinned", 1090.0), ("unpinned", 1010.0),
                     ("pinned", 1080.0)):
        tables["sweep"].append({"batch": 1, "pinning": pin, "fraction": 0.5,
                                "saturated": False, "lat_p99": p99})
    (run / "summary.json").write_text(json.dumps({"tables": tables,
                                                  "conditions": {"cpu_count": 2}}))
    by = {v.claim.id: v for v in C.verdicts(tmp_path)}
    assert pl_claims(tables, 2)["s003_pinning"]["diagnostics"]["repeats"] == 3
    # 3 per-round ratios: no interval, a single point
    assert by["s003_pinning"].verdict == "inconclusive: single point"


def test_pipeline_saturation_is_measured_not_defined():
    # rows offered above capacity that kept up by their own measurement count against the
    # claim (the old definition, offered > capacity, could not fail)
    rows = [{"batch": 1, "pinning": "unpinned", "fraction": 1.5, "saturated": True,
             "offered_rate": 150.0, "achieved_rate": a} for a in [149.0] * 20]
    m = pl_claims({"sweep": rows})["s003_pipeline_saturation"]
    assert m["value"] == 0.0 and m["ci"][1] < 0.25
    # rows above a capacity searched once that keep up: the claim is not reproduced
    assert C.judge(C.get("s003_pipeline_saturation"), m).verdict == "not reproduced"
    for r in rows:
        r["achieved_rate"] = 100.0  # achieved far below offered: saturated, 20 of 20
    m = pl_claims({"sweep": rows})["s003_pipeline_saturation"]
    assert m["value"] == 1.0 and m["ci"][0] > 0.8
    assert C.judge(C.get("s003_pipeline_saturation"), m).verdict == "reproduced"
    few = pl_claims({"sweep": rows[:4]})["s003_pipeline_saturation"]
    # 4 of 4: the 0.40-1 interval holds the pivot 0.5: no direction either way
    v = C.judge(C.get("s003_pipeline_saturation"), few)
    assert v.verdict == "inconclusive" and "no direction" in v.reason
    # the bare old column (offered above capacity) is no measurement: no claim
    bare = [{k: v for k, v in r.items() if k not in ("offered_rate", "achieved_rate")}
            for r in rows]
    assert "s003_pipeline_saturation" not in pl_claims({"sweep": bare})


def test_pipeline_claims_use_the_compiled_transport():
    tables = {"capacity": [{"batch": 1, "capacity_compiled": 19_000.0,
                            "capacity_python": 15_000.0}],
              "sweep": [{"transport": "python", "batch": 1, "pinning": "unpinned",
                         "fraction": 1.5, "keeps_up": True, "lat_p99": 1.0},
                        {"transport": "compiled", "batch": 1, "pinning": "unpinned",
                         "fraction": 1.5, "keeps_up": False, "lat_p99": 1.0}]}
    m = pl_claims(tables)
    assert m["s003_pipeline_capacity"]["value"] == 19_000.0
    assert m["s003_pipeline_saturation"]["value"] == 1.0


def test_pinning_claim_prefers_the_repeated_tail_runs():
    sweep = [{"transport": "compiled", "batch": 1, "pinning": p, "fraction": 0.5,
              "saturated": False, "lat_p99": v} for p, v in (("unpinned", 1000.0),
                                                             ("pinned", 3000.0))]
    tail = [{"fraction": f, "pinning": p, "run": k, "p99": v}
            for f in (0.5, 0.9) for k in (1, 2, 3)
            for p, v in (("unpinned", 2000.0 + k), ("pinned", 2200.0 + k))]
    tail.append({"fraction": 0.5, "pinning": "pinned", "run": 4, "p99": "n<1000"})  # a marker
    m = pl_claims({"sweep": sweep, "tail_runs": tail})["s003_pinning"]
    assert m["value"] == pytest.approx(2202 / 2002)
    assert m["diagnostics"]["repeats"] == 3 and m["explain"]["rate points"] == 2
    # without tail runs (or with only markers) the sweep's rows stand in
    only_markers = [dict(r, p99="n<1000") for r in tail]
    for t in ([], only_markers):
        m = pl_claims({"sweep": sweep, "tail_runs": t})["s003_pinning"]
        assert m["value"] == 3.0 and m["diagnostics"]["repeats"] == 1


def test_index_shows_an_inconclusive_verdict_and_its_interval(tmp_path):
    from lob.experiments.report import write_index

    m = C.measurement(1.6, diagnostics={"commands": 2_000_000, "step": "levels, best",
                                        "load_avg": 1.1},
                      ci=(1.55, 1.65), ci_what="93.8% interval of the median of 5 repeats",
                      backend="compiled")
    run = _run(tmp_path, "fok_scan_bottleneck", "default-1", {"s001_v0_v1_limit_only": m})
    (run / "summary.json").write_text(json.dumps({
        "claims": {"s001_v0_v1_limit_only": m}, "conditions": {"cpu_model": "Test CPU"},
        "run": {}, "conclusion": "x"}))
    head = write_index(tmp_path).read_text().split("## fok_scan_bottleneck", 1)[0]
    row = next(ln for ln in head.splitlines() if ln.startswith("| s001_v0_v1_limit_only"))
    c = C.get("s001_v0_v1_limit_only")
    edge = f"{c.value * (1 - c.tolerance):.4g}"
    assert "| inconclusive |" in row and f"straddles the tolerance edge {edge}" in row
    assert "1.55-1.65: 93.8% interval of the median of 5 repeats" in row
    assert "1 inconclusive" in head and "`inconclusive`" in head


def test_claims_name_registered_engines():
    from lob.engines.registry import engine_names

    known = set(engine_names())
    for c in C.load():
        names = [n for n in re.split(r"[,\s]+|->", c.engine.removeprefix("lineage ")) if n]
        assert names and set(names) <= known, (c.id, c.engine)


def test_pinning_claim_gets_an_interval_from_five_rounds():
    tail = [{"fraction": f, "pinning": p, "run": k, "p99": v * (1 + 0.01 * k)}
            for f in (0.5, 0.9) for k in range(1, 6)
            for p, v in (("unpinned", 1000.0), ("pinned", 1100.0))]
    m = pl_claims({"tail_runs": tail})["s003_pinning"]
    assert m["value"] == pytest.approx(1.1) and m["ci"] is not None
    assert m["ci"][0] == pytest.approx(1.1) and "10 per-round" in m["detail"]
    assert m["diagnostics"]["repeats"] == 5
    # a host pause in one run moves the median of the per-round ratios not at all, where a
    # ratio of medians over 3 runs could land on it
    tail[0]["p99"] = 50_000.0  # round 1, 0.5, unpinned
    m = pl_claims({"tail_runs": tail})["s003_pinning"]
    assert m["value"] == pytest.approx(1.1)
    # two rounds (4 ratios): too few for an interval, the ratio of medians as before
    m = pl_claims({"tail_runs": [r for r in tail if r["run"] <= 2]})["s003_pinning"]
    assert m.get("ci") is None and "run(s) each" in m["detail"]


def test_pinning_claim_pairs_pinnings_within_one_engine_loop_mode():
    # the tail section runs two modes per round: pinned/unpinned pairs are taken within a
    # mode (chunk's p99 is half command's here), never across modes
    tail = [{"mode": m, "fraction": f, "pinning": p, "run": k, "p99": v * scale}
            for m, scale in (("command", 1.0), ("chunk", 0.5)) for f in (0.5, 0.9)
            for k in range(1, 4) for p, v in (("unpinned", 1000.0), ("pinned", 1200.0))]
    m = pl_claims({"tail_runs": tail})["s003_pinning"]
    assert m["value"] == pytest.approx(1.2) and "per transport variant" in m["detail"]
    # one part per variant, each with its own 6 per-round ratios, never pooled
    assert set(m["parts"]) == {"chunk", "command"}
    assert all("6 per-round" in p["detail"] for p in m["parts"].values())
    assert all(p["value"] == pytest.approx(1.2) for p in m["parts"].values())


def test_s001_claims_are_judged_on_lobs_cpp_build_and_quote_the_seed():
    """Each s001 claim names lob's C++ engines; a claim crediting a mechanism quotes the
    seed's sentence, which every verdict's reason carries; a C++ lineage step has the
    mechanisms its toggles change."""
    assert C.step_mechanisms("v0@cpp -> v1@cpp") == ("node_pool", "bitmap_best_price")
    assert C.step_mechanisms("v0@cpp -> v0+bitmap@cpp") == ("bitmap_best_price",)
    assert C.step_mechanisms("v1@cpp -> v2@cpp") == ("fok_early_exit",)
    assert C.step_mechanisms("v0 -> v1") == ("node_pool", "bitmap_best_price")
    with pytest.raises(ValueError, match="lob's C\\+\\+ engines"):
        C.step_mechanisms("v0@cpp -> v1")
    s001 = [c for c in C.load() if c.id.startswith("s001")]
    assert len(s001) == 6 and all("@cpp" in c.engine for c in s001)
    for c in s001:
        assert {t for t, _ in c.mechanism_quotes} == set(c.mechanism), c.id
    c = C.get("s001_v1_v2_comprehensive")
    v = C.judge(c, C.measurement(c.value, ci=(c.value * 0.99, c.value * 1.01),
                                 diagnostics={"commands": 2_000_000}))
    assert v.verdict == "reproduced"
    assert 'the seed credits fok_early_exit: "A single line in availableToFill' in v.reason


def test_a_mechanism_mapping_must_quote_a_sentence(tmp_path):
    import yaml

    data = C.read()
    claim = next(d for d in data["claims"] if d["id"] == "s001_v1_v2_comprehensive")
    claim["mechanism"] = {"fok_early_exit": ""}
    data["claims"] = [claim]
    p = tmp_path / "claims.yaml"
    p.write_text(yaml.safe_dump(data, allow_unicode=True))
    with pytest.raises(ValueError, match="quotes the seed's sentence"):
        C.load(p)


def test_comparable_if_is_read(tmp_path):
    d = {"id": "a", "seed": "seed001", "finding": "f", "machine": "m2pro", "metric": "m",
         "workload": "w", "size": "s", "experiment": "e", "kind": "ratio", "detail": "d",
         "value": 2.0, "pivot": 1, "tolerance": 0.1, "comparable_if": "a finer clock"}
    p = tmp_path / "claims.yaml"
    p.write_text(json.dumps({"machines": {"m2pro": "Apple M2 Pro"}, "claims": [d]}))
    assert C.load(p)[0].comparable_if == "a finer clock"


def test_seed000_mechanisms_are_quoted_and_judged_on_the_engine_that_has_them():
    """Every mechanism a seed-000 tail claim credits quotes the seed; a measurement whose
    engine has one of them is compared, one whose engine has none is a different mechanism."""
    for c in C.load():
        if c.seed == "seed000":
            assert {t for t, _ in c.mechanism_quotes} == set(c.mechanism), c.id
        if c.seed == "seed000" and c.experiment in ("tail_analysis", "alloc_profile"):
            assert c.engine == "orderbook_rs@cpp"
    add = C.get("s000_tail_add_only")
    have = C.engine_mechanisms({"orders": "heap", "levels": "skiplist",
                                "level_objects": "refcounted", "index": "sharded"})
    assert have == ("per_order_heap_allocation", "skip_list_levels", "refcounted_level_objects",
                    "sharded_locked_index")
    m = C.measurement(60.0, ci=(55.0, 70.0), runs=5, mechanisms=have, backend="compiled",
                      diagnostics={"count": 10**6, "commands": 1_200_000})
    v = C.judge(add, m)
    assert v.verdict == "reproduced"
    assert 'the seed credits refcounted_level_objects: "The dominant contributor' in v.reason
    plain = C.engine_mechanisms({"orders": "pool", "levels": "ladder", "index": "flat"})
    assert plain == ()
    m = C.measurement(60.0, ci=(55.0, 70.0), runs=5, mechanisms=plain, backend="compiled",
                      diagnostics={"count": 10**6, "commands": 1_200_000})
    assert C.judge(add, m).verdict == "not comparable: different mechanism"
    stp = C.get("s000_tail_stp_sweep")  # credited to validation, which the engine lacks
    v = C.judge(stp, C.measurement(3.0, ci=(2.8, 3.2), runs=5, mechanisms=have,
                                   backend="compiled", diagnostics={"count": 100_000}))
    assert v.verdict == "not comparable: different mechanism"
    assert v.reason.endswith(f"Comparable if: {stp.comparable_if}.")
    stays = [c for c in C.load() if c.seed == "seed000" and c.comparable_if]
    assert {c.id for c in stays} >= {"s000_tail_mass_cancel_burst", "s000_stp_one_step",
                                     "s000_mass_cancel_gain", "s000_tail_stp_sweep"}

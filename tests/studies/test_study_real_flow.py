"""lob.studies.real_flow on synthetic data: the order-life and flow figures from hand-made
replay outputs, the distance that picks the closest stream, every sentence branch of every
table builder, the procedures with injected captures, and the plots. No fetch of the real
data here (tests/differential/test_real_flow.py runs the study on the real stream)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from lob.semantics import COMMAND_DTYPE, FILL_DTYPE, OUTCOME_DTYPE, Kind, OrderType, Status
from lob.studies import real_flow as rf
from lob.studies.conclude import check_record

REAL = rf.REAL
SUB, CAN = int(Kind.SUBMIT), int(Kind.CANCEL)
LIM = int(OrderType.LIMIT)
ACC, FILLED, CANCELLED = int(Status.ACCEPTED), int(Status.FILLED), int(Status.CANCELLED)


def _stream():
    """Four commands: two orders rest (ids 1, 2), a taker (id 3) fills order 1 whole,
    order 2 is cancelled; outcomes and fills as a replay would give them."""
    cmds = np.zeros(4, dtype=COMMAND_DTYPE)
    cmds["timed"] = True
    for i, (k, side, price, qty, oid) in enumerate(
            [(SUB, 0, 10, 5, 0), (SUB, 0, 9, 5, 0), (SUB, 1, 10, 5, 0), (CAN, 0, 0, 0, 2)]):
        cmds[i]["kind"], cmds[i]["otype"], cmds[i]["side"] = k, LIM if k == SUB else 0, side
        cmds[i]["price"], cmds[i]["qty"], cmds[i]["id"], cmds[i]["owner"] = price, qty, oid, 1
    outs = np.zeros(4, dtype=OUTCOME_DTYPE)
    outs["status"] = [ACC, ACC, FILLED, CANCELLED]
    outs["id"] = [1, 2, 3, 2]
    outs["remaining"] = [5, 5, 0, 0]
    outs["fills"] = [0, 0, 1, 0]
    fills = np.array([(3, 1, 10, 5)], dtype=FILL_DTYPE)
    return cmds, outs, fills


def test_order_life_and_flow_figures():
    cmds, outs, fills = _stream()
    s, e = rf.order_life(cmds, outs, fills)
    assert sorted(zip(s.tolist(), e.tolist(), strict=True)) == [(0, 2), (1, 3)]
    f = rf.flow_figures(cmds, outs, fills)
    assert f["cancel_share_pct"] == 25.0 and f["taker_share_pct"] == 25.0
    assert f["life_median_ops"] == 2.0 and f["takers_per_s"] is None
    ms = np.array([0, 500, 1500, 2000])  # the venue's clock: 2 s
    f = rf.flow_figures(cmds, outs, fills, ms)
    assert f["span_s"] == 2.0 and f["commands_per_s"] == 2.0 and f["takers_per_s"] == 0.5
    assert f["life_median_ms"] == 1500.0  # lives of 1,500 ms each
    cmds["timed"][:2] = False  # untimed rests are not counted
    s, _ = rf.order_life(cmds, outs, fills)
    assert len(s) == 0 and rf.flow_figures(cmds, outs, fills)["life_median_ops"] is None


def _row(name, **kw):
    base = {f: 1.0 for f in rf.FEATURES}
    return {"workload": name, **base, **kw}


def test_distance_picks_the_closest_and_penalises_missing_figures():
    rows = [_row(REAL, cross_pct=80.0, resting_mean=4000.0),
            _row("near", cross_pct=70.0, resting_mean=3000.0),
            _row("far", cross_pct=0.0, resting_mean=10.0),
            _row("blind", cross_pct=80.0, resting_mean=4000.0, cancel_hit_pct=None)]
    d = rf.distances(rows)
    assert [x["workload"] for x in d] == ["near", "blind", "far"]
    assert d[0]["distance"] < d[1]["distance"] < d[2]["distance"]
    assert all(x["features"] == len(rf.FEATURES) for x in d)
    with pytest.raises(ValueError, match="no bitstamp_btcusd row"):
        rf.distances(rows[1:])


def test_closest_table_sentences():
    rows = [_row(REAL, cross_pct=80.0), _row("a", cross_pct=70.0), _row("b", cross_pct=0.0),
            _row("c", cross_pct=10.0)]
    t = rf.closest_table(rows, compare=["b", "a"])
    assert "closest synthetic stream to bitstamp_btcusd is a" in t.text
    assert "farthest is b" in t.text and "named comparisons rank b 3" in t.text
    assert check_record(t.record()) == []
    one = rf.closest_table(rows[:2])  # one candidate: no farthest, no comparisons
    assert "farthest" not in one.text and "rank 1 of 1" in one.text
    blank = [{"workload": REAL, **dict.fromkeys(rf.FEATURES)},
             {"workload": "x", **dict.fromkeys(rf.FEATURES)}]
    assert "no closest stream" in rf.closest_table(blank).text


def test_misses_table_sentences():
    rows = [_row(REAL, cancel_hit_pct=100.0, fills_mean=0.001, cross_pct=50.0),
            _row("a", cancel_hit_pct=90.0, fills_mean=0.5, cross_pct=10.0),
            _row("b", cancel_hit_pct=5.0, fills_mean=1.0, cross_pct=60.0)]
    t = rf.misses_table(rows)
    # cancels hitting 100% is the conversion's doing: labelled, never "missed"
    assert "cancels hitting (%) is 100, above every synthetic" not in t.text
    assert ("Set by the conversion rules, not by the venue's flow (so not counted as missed): "
            "crossing submits (%) 50, cancels hitting (%) 100.") in t.text
    assert t.value("cancels hitting (%)", "artefact") == "conversion artefact"
    assert t.value("fills per submit", "artefact") == ""
    assert "fills per submit is 0.001, below every synthetic stream (lowest: a, 0.50)" in t.text
    assert "Inside the synthetic range: " in t.text and "crossing submits (%)" not in \
        t.text.split("Inside the synthetic range: ")[1]
    assert check_record(t.record()) == []
    same = [_row(REAL), _row("a"), _row("b")]
    assert "inside the synthetic streams' range on every diagnostic" in rf.misses_table(same).text
    gone = [_row(REAL, cancel_hit_pct=None), _row("a")]
    row = next(r for r in rf.misses_table(gone).rows if r["diagnostic"] == "cancels hitting (%)")
    assert row["real_is"] == "no value"
    allout = [_row(REAL, **{f: 1e6 for f in rf.FEATURES}), _row("a")]
    assert "Inside" not in rf.misses_table(allout).text


def _diag(name, real=False, ok=True):
    r = {"workload": name, **{c: 1 for c in rf.DIAG_COLUMNS}, "validated": None}
    r.update(venue_trades=None, trades_reproduced=None, takers_per_s=None,
             commands_per_s=None, life_median_ms=None)
    if real:
        r.update(venue_trades=284, trades_reproduced=284 if ok else 280, validated=ok,
                 takers_per_s=0.09, commands_per_s=111.0, life_median_ms=229.0,
                 life_median_ops=22.0)
    return r


def test_diagnostics_table_sentences():
    t = rf.diagnostics_table({"diag": [_diag(REAL, True), _diag("x")]}, closest="x")
    assert "284 of 284 reproduced, no other fill" in t.text
    assert "111 commands and 0.09 takers per second" in t.text and "229 ms" in t.text
    assert "x is the synthetic stream closest" in t.text
    assert check_record(t.record()) == []
    bad = rf.diagnostics_table({"diag": [_diag(REAL, True, ok=False), _diag("x")]})
    assert "does NOT reproduce" in bad.text and "280 of 284" in bad.text
    assert "closest" not in bad.text
    none = rf.diagnostics_table({"diag": [_diag("x")]}, closest="y")
    assert none.text == ""


def _lat(w, e, n, p50, p99, op="all"):
    return {"workload": w, "engine": e, "op": op, "count": n, "p50": p50, "p99": p99,
            "p99.9": p99}


def test_latency_table_sentences():
    lat = [_lat(REAL, "e", 5000, 30.0, 70.0), _lat("a", "e", 5000, 40.0, 100.0),
           _lat("b", "e", 5000, 20.0, 50.0), _lat("c", "e", 5000, 30.0, 70.0),
           _lat(REAL, "e", 50, 30.0, 70.0, op="cancel")]
    t = rf.latency_table({"lat": lat, "clock": None, "engines": ["e"]}, closest="a")
    assert "e's p99 on bitstamp_btcusd is 70 ns; lower than on a (100)" in t.text
    assert "higher than on b (50)" in t.text and "the same as on c" in t.text
    assert "(a) the real stream's p99 is lower" in t.text
    assert "Percentiles hidden" in t.text  # p99.9 everywhere, p99 on the cancels
    assert check_record(t.record()) == []
    few = [_lat(REAL, "e", 500, 30.0, 70.0), _lat("b", "e", 500, 20.0, 50.0)]
    t = rf.latency_table({"lat": few, "clock": None, "engines": ["e"]}, closest="b")
    assert "e's p50 on bitstamp_btcusd is 30 ns; higher than on b (20)" in t.text
    assert "(b) the real stream's p50 is higher" in t.text
    same = [_lat(REAL, "e", 500, 30.0, 70.0), _lat("b", "e", 500, 30.0, 50.0)]
    t = rf.latency_table({"lat": same, "clock": None, "engines": ["e"]}, closest="b")
    assert "real stream's p50 is the same" in t.text
    tiny = [_lat(REAL, "e", 5, 30.0, 70.0), _lat("b", "e", 5, 20.0, 50.0)]
    assert "too few samples" in rf.latency_table(
        {"lat": tiny, "clock": None, "engines": ["e"]}).text
    alone = rf.latency_table({"lat": [_lat(REAL, "e", 500, 1.0, 2.0)], "clock": None,
                              "engines": ["e", "f"]})
    assert "lower" not in alone.text and "higher" not in alone.text


def _ol(sp, n, p50, p99):
    return {"pace": rf._pace(sp), "speedup": sp, "venue_s": 10.0, "commands": n,
            "offered_per_s": 100.0 * sp, "achieved_per_s": 100.0 * sp, "count": n,
            "p50": p50, "p99": p99, "p99.9": p99}


def test_open_loop_table_sentences():
    t = rf.open_loop_table({"engine": "e", "rows": [_ol(1.0, 2000, 900.0, 2000.0),
                                                     _ol(math.inf, 2000, 5000.0, 9000.0)]})
    assert "The p99 response goes from 2,000 ns at 1x to 9,000 ns at all at once." in t.text
    assert check_record(t.record()) == []
    t = rf.open_loop_table({"engine": "e", "rows": [_ol(1.0, 50, 900.0, 2000.0),
                                                     _ol(100.0, 50, 5000.0, 9000.0)]})
    assert "The p50 response goes from 900 ns at 1x to 5,000 ns at 100x" in t.text
    t = rf.open_loop_table({"engine": "e", "rows": [_ol(1.0, 5, 1.0, 1.0),
                                                     _ol(100.0, 5, 1.0, 1.0)]})
    assert "goes from" not in t.text and "hidden for want of samples: 1x (p50" in t.text
    assert "One pace measured (1x)" in rf.open_loop_table(
        {"engine": "e", "rows": [_ol(1.0, 50, 1.0, 1.0)]}).text
    assert "No pace measured" in rf.open_loop_table({"engine": "e", "rows": []}).text
    # the idle path is said apart from the engine's cost
    assert ("a response at a slow pace is the pipeline's wake-up from that idle path plus the "
            "engine's service time, not the engine alone") in t.text


def test_conversion_table_opens_with_what_the_capture_shows():
    counts = {k: 0 for k in rf.CONVERSION_KEYS}
    counts.update(created_orders=100_000, limit_takers=60, market_sells=20, market_buys=5,
                  notional_buys=5, dropped_orders=10, dropped_share_pct=0.01, span_ms=1000,
                  timed_commands=90_000)
    t = rf.conversion_table(counts, {})
    assert t.sentences[0] == ("What the capture shows: 90 of 100,000 created orders (0.09%) "
                              "traded as takers; every other one rested or was deleted "
                              "unfilled - a flow of quotes, not of trades.")
    assert t.value("taker_share_pct", "value") == pytest.approx(0.09)
    assert check_record(t.record()) == []


def test_check_parameters():
    ok = dict(compare=["lobster_replay"], candidates=["lobster_replay", "add_only"],
              real_scale=0.1, scale=0.01, candidate_scale=0.01, repeat=1, speedups=[1.0])
    assert rf.check_parameters(**ok) == ["lobster_replay", "add_only"]
    assert REAL not in rf.check_parameters(**{**ok, "candidates": []})
    for bad, msg in ((dict(compare=["nope"]), "unknown workloads"),
                     (dict(candidates=[REAL]), "real stream"),
                     (dict(compare=[]), "compare is empty"),
                     (dict(real_scale=2.0), "real_scale"), (dict(scale=0), "scale must"),
                     (dict(repeat=0), "repeat"), (dict(speedups=[0]), "speedups")):
        with pytest.raises(ValueError, match=msg):
            rf.check_parameters(**{**ok, **bad})


def _fake_wl(name, n=40, seed=0):
    cmds = np.zeros(n, dtype=COMMAND_DTYPE)
    cmds["timed"] = True
    cmds["kind"][::4] = CAN
    return SimpleNamespace(name=name, commands=cmds, config=None)


def test_measure_streams_interleaves_merges_and_splits(monkeypatch, tmp_path):
    import lob.workloads as W

    monkeypatch.setattr(W, "build", lambda name, scale: _fake_wl(name))
    order = []

    def capture(e, wl):
        order.append((e, wl.name))
        return {"durations": np.arange(len(wl.commands)) + 1, "clock": {"source": "t"}}

    got = rf.measure_streams(["e1", "e2"], ["a"], 0.1, 0.01, 2, tmp_path, capture=capture,
                             diagnose=lambda wl, e: {"workload": wl.name, "by": e},
                             check=lambda e, wl: "")
    assert [d["by"] for d in got["diag"]] == ["e1", "e1"]
    assert len(order) == 8 and order[:4] != order[4:]  # rounds rotated
    rows = {(r["workload"], r["engine"], r["op"]): r for r in got["lat"]}
    assert rows[(REAL, "e1", "all")]["count"] == 80  # two captures merged
    assert rows[(REAL, "e1", "cancel")]["count"] == 20
    assert rows[("a", "e2", "submit")]["count"] == 60
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "e1__a.hgrm", "e1__bitstamp_btcusd.hgrm", "e2__a.hgrm", "e2__bitstamp_btcusd.hgrm"]
    md = rf.closing_markdown({**got, "diag": [_diag(REAL, True), _diag("a")]}, "e1")
    assert md.splitlines()[0] == "| | bitstamp_btcusd | a |" and "| e1 count | 80 | 80 |" in md


def test_measure_candidates_labels_scales(monkeypatch):
    import lob.workloads as W

    monkeypatch.setattr(W, "build", lambda name, scale: _fake_wl(name))
    rows = rf.measure_candidates("e", ["a", "b"], 0.5, 0.01,
                                 diagnose=lambda wl, e: {"workload": wl.name})
    assert [(r["workload"], r["scale"]) for r in rows] == [(REAL, 0.5), ("a", 0.01), ("b", 0.01)]


def test_plots():
    rows = [_row(REAL, cross_pct=80.0), _row("a", cross_pct=10.0), _row("b", cross_pct=None)]
    fig = rf.plot_features(rows, [REAL, "a", "b"])
    ax = fig.axes[0]
    assert len(ax.containers) == 3 and len(ax.get_xticklabels()) == len(rf.FEATURES)
    lat = [_lat(REAL, "e", 20_000, 30.0, 70.0), _lat("a", "e", 500, 40.0, 100.0),
           _lat("a", "e", 500, 40.0, 100.0, op="submit"), _lat(REAL, "f", 20_000, 3.0, 7.0)]
    fig = rf.plot_latency({"lat": lat, "engines": ["e", "f"]})
    assert [a.get_title() for a in fig.axes[:2]] == ["e", "f"]
    lines = fig.axes[0].get_lines()
    assert [len(x.get_xdata()) for x in lines] == [3, 1]  # p99.9 needs 10,000; p99 1,000


def test_every_engine_is_checked_against_the_venue_before_it_is_timed(monkeypatch, tmp_path):
    """An engine that fills 89 of 284 trades correctly is not timed, and every sentence says
    so (issue 44): only engines that reproduce the venue's trades get latency figures."""
    import lob.workloads as W

    monkeypatch.setattr(W, "build", lambda name, scale: _fake_wl(name))
    timed = []

    def capture(e, wl):
        timed.append(e)
        return {"durations": np.arange(len(wl.commands)) + 1, "clock": {"source": "t"}}

    checked = []

    def check(e, wl):
        checked.append((e, wl.name))
        return "it reproduces 89 of the venue's 284 trades (40 other fills)" if e == "bad" \
            else ""

    got = rf.measure_streams(["bad", "good"], ["a"], 0.1, 0.01, 1, None, capture=capture,
                             diagnose=lambda wl, e: {"workload": wl.name, "by": e},
                             check=check)
    assert checked == [("bad", REAL), ("good", REAL)]
    assert set(timed) == {"good"} and {r["engine"] for r in got["lat"]} == {"good"}
    assert [d["by"] for d in got["diag"]] == ["good", "good"]  # diagnosed on a passing one
    assert got["refused"] == {"bad": "it reproduces 89 of the venue's 284 trades "
                                     "(40 other fills)"}
    t = rf.latency_table(got)
    assert "bad is not timed: it reproduces 89 of the venue's 284 trades" in t.text
    d = rf.diagnostics_table({**got, "diag": [_diag(REAL, True), _diag("a")]})
    assert "on every engine timed (good)" in d.text and "bad does NOT reproduce them" in d.text
    assert "| good count |" in rf.closing_markdown(
        {**got, "diag": [_diag(REAL, True), _diag("a")]}, "bad")
    with pytest.raises(ValueError, match="no engine reproduces the venue's trades"):
        rf.measure_streams(["bad"], ["a"], 0.1, 0.01, 1, None, capture=capture,
                           diagnose=lambda wl, e: {}, check=check)


def test_the_runner_checks_real_flows_parameters_before_any_kernel_starts():
    """Issue 44: what the notebook would refuse only after its kernel started (or, for
    open_loop_s=-1, not at all) is refused when the batch is planned, in one line."""
    from lob.experiments.runner import plan

    for override, msg in (({"compare": ["nosuch"]}, "unknown workloads"),
                          ({"candidates": ["nosuch"]}, "unknown workloads"),
                          ({"real_scale": 5.0}, "real_scale must be in"),
                          ({"speedups": [0.0]}, "speedups must be > 0"),
                          ({"open_loop_s": -1}, "open_loop_s must be a number of seconds > 0")):
        with pytest.raises(ValueError, match=f"^real_flow: {msg}") as e:
            plan(["real_flow"], "quick", override, "/nonexistent/art")
        assert "\n" not in str(e.value)
    assert plan(["real_flow"], "quick", {"open_loop_s": 1.5}, "/nonexistent/art")
    with pytest.raises(ValueError, match="open_loop_s must be"):
        rf.measure_open_loop("v3", 0.01, [1.0], -1)

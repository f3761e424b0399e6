"""lob.studies.pipeline_latency: every table builder's sentence branches, the floor and model,
the stall count, the lineage's step calls, the plots and the claims, on synthetic data (no
pipeline process is started)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from lob.diagnose.hiccup import Hiccups
from lob.measure.stats import aa_band
from lob.studies import pipeline_latency as pl


def _clean(c):
    assert c.check() == [], c.check()
    return c


def _sweep_rows(transports=("python", "compiled"), batches=(1, 8), pins=(False,),
                fractions=(0.5, 0.9, 1.2), count=5_000, top=1.1, keeps=()):
    """Rows at ``fractions`` of capacity; the bracket's top at ``top`` x capacity; a row keeps
    up when offered at or below capacity, or when (transport, batch, fraction) is in
    ``keeps``."""
    rows = []
    for tr in transports:
        for b in batches:
            cap = 1e6 * b * (3 if tr == "compiled" else 1)
            for pinned in pins:
                for f in fractions:
                    base = 1_000 * f * (2 if pinned else 1)
                    ok = f <= 1 or (tr, b, f) in keeps
                    rows.append({"engine": "v2@numba", "transport": tr, "batch": b,
                                 "pinned": pinned, "fraction": f, "offered_rate": f * cap,
                                 "capacity_high": top * cap, "above_capacity": f > top,
                                 "achieved_rate": (f if ok else 1) * cap, "saturated": not ok,
                                 "keeps_up": ok, "lat_count": count, "lat_p50": base,
                                 "lat_p99": 4 * base, "lat_p99_9": 9 * base,
                                 "lat_max": 20 * base, "backlog_end": 0 if ok else 500,
                                 "lat_growth": 1.0 if ok else 40.0, "capacity": cap,
                                 "encoded": "x"})
    return pl._sweep_frame(rows)


def _caps(transports=("python", "compiled"), batches=(1, 8), found=True):
    return pd.DataFrame([{"transport": tr, "batch": b,
                          "capacity": 1e6 * b * (3 if tr == "compiled" else 1),
                          "unpaced_rate": 2e6 * b,
                          "bracket": (1e6 * b * (3 if tr == "compiled" else 1),
                                      1.1e6 * b * (3 if tr == "compiled" else 1)),
                          "found": found}
                         for tr in transports for b in batches])


SERVICE = [{"engine": "v2", "mode": m, "batch": b, "ns_per_op": ns, "rate_bound": 1e9 / ns}
           for b, ns in ((1, 400.0), (8, 5_000.0)) for m in ("chunk", "command")]


# --- service and sweep ----------------------------------------------------------------------

def test_service_table_keeps_the_rows_and_puts_the_closed_loop_figures_in_the_note():
    closed = SimpleNamespace(count=2_000, p50=250, p99=1_200, p99_9=9_000)
    c = _clean(pl.service_table(pl.Service(closed, "c-loop", SERVICE)))
    assert c.name == "service" and len(c.rows) == 4 and not c.sentences
    assert "p50 250 ns" in c.note and "p99 1,200 ns" in c.note and "2,000 samples" in c.note


def test_sweep_table_hides_percentiles_the_count_cannot_support():
    sw = pl.Sweep(_sweep_rows(count=500), _caps())
    c = _clean(pl.sweep_table(sw))
    assert c.name == "sweep" and c.columns == pl.SWEEP_COLUMNS
    assert c.rows[0]["lat_p50"] == 500.0 and c.rows[0]["lat_p99"] == "n<1000"
    assert c.rows[0]["pinning"] == "unpinned"


def test_sweep_table_says_when_a_row_that_fell_behind_reads_a_lower_p50():
    rows = _sweep_rows(transports=("python",), batches=(8,), fractions=(0.5, 0.9, 1.2, 1.5))
    c = _clean(pl.sweep_table(pl.Sweep(rows, _caps(("python",), (8,)))))
    assert c.sentences == []  # latency rising with the rate: nothing to say
    rows.loc[rows.fraction == 1.2, "lat_p50"] = 6_000.0  # saturated
    rows.loc[rows.fraction == 1.5, "lat_p50"] = 100.0  # saturated, below every row offered less
    rows.loc[rows.fraction == 0.5, "lat_p50"] = 5_000.0  # kept up, a lower rate, a higher p50
    c = _clean(pl.sweep_table(pl.Sweep(rows, _caps(("python",), (8,)))))
    assert c.sentences == [  # compared with the highest p50 offered less: the 1.2x row's
        "python B=8 unpinned: the row offered 12,000,000/s fell behind (achieved 8,000,000/s) "
        "and reads a p50 of 100 ns, below the 6,000 ns of the row offered 9,600,000/s, which "
        "fell behind too. A run that falls behind has no steady state: its queue grows for as "
        "long as the run lasts, so its percentiles say how long it ran at the rate it achieved, "
        "not what the offered rate costs (the plot draws such rows hollow at their achieved "
        "rate, apart from the curve)."]
    rows.loc[rows.fraction == 1.2, "lat_p50"] = 1_000.0  # now below the kept-up 0.5x row too
    c = _clean(pl.sweep_table(pl.Sweep(rows, _caps(("python",), (8,)))))
    assert len(c.sentences) == 2 and c.sentences[0].startswith(
        "python B=8 unpinned: the row offered 9,600,000/s fell behind (achieved 8,000,000/s) "
        "and reads a p50 of 1,000 ns, below the 5,000 ns of the row offered 4,000,000/s, which "
        "kept up.")


def test_plot_latency_by_rate_has_a_panel_per_batch_and_the_capacity_verticals():
    sw = pl.Sweep(_sweep_rows(), _caps())
    fig = pl.plot_latency_by_rate(sw, 250.0)
    assert len(fig.axes) == 2
    ax = fig.axes[0]
    assert ax.get_title().startswith("batch 1")
    for a in fig.axes:  # a log axis from the reference to the top latency, never below zero
        lo, hi = a.get_ylim()
        assert a.get_yscale() == "log" and 0 < lo < 250 and hi > 9 * 1_000 * 1.2
    # two transports x three percentiles x (kept-up curve + saturated markers), two
    # verticals, the closed-loop reference, the legend's entry for the saturated markers
    assert len(ax.lines) == 2 * 3 * 2 + 2 + 1 + 1
    assert sorted(ln.get_xdata()[0] for ln in ax.lines if ln.get_linestyle() in ("-", "--")
                  and len(ln.get_xdata()) == 2 and ln.get_xdata()[0] == ln.get_xdata()[1]) \
        == [1e6, 3e6]


def test_plot_latency_by_rate_draws_saturated_rows_apart_at_their_achieved_rate():
    # the 1.2x rows fall behind: achieved 1.0x capacity, with a p50 below the 0.9x row's (as a
    # short saturated run can read); they must not extend the offered-rate curve
    rows = _sweep_rows(transports=("python",), batches=(8,))
    rows.loc[rows.fraction == 1.2, "lat_p50"] = 100.0
    fig = pl.plot_latency_by_rate(pl.Sweep(rows, _caps(("python",), (8,))), 250.0)
    ax = fig.axes[0]
    cap = 8e6
    curves = [ln for ln in ax.lines if ln.get_linestyle() == "-" and ln.get_marker() == "o"]
    assert len(curves) == 3  # p50, p99, p99.9, each through the rows that kept up only
    assert all(list(ln.get_xdata()) == [0.5 * cap, 0.9 * cap] for ln in curves)
    hollow = [ln for ln in ax.lines if ln.get_markerfacecolor() == "none"
              and len(ln.get_xdata()) == 1]
    assert sorted(float(ln.get_ydata()[0]) for ln in hollow) == [100.0, 4_800.0, 10_800.0]
    assert {float(ln.get_xdata()[0]) for ln in hollow} == {cap}  # the achieved, not 1.2 x cap
    assert all(ln.get_linestyle() == "None" for ln in hollow)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "fell behind: at its achieved rate, not joined" in labels


# --- capacity ---------------------------------------------------------------------------------

def test_capacity_with_both_transports_names_the_ratio_and_the_bound():
    c = _clean(pl.capacity_table(_caps(), SERVICE, "chunk"))
    assert c.name == "capacity" and c.key == "batch"
    assert {"capacity_python", "capacity_compiled", "python_bound", "compiled_over_python",
            "all_found"} <= set(c.columns)
    s1, s8 = c.sentences
    assert s1 == ("Capacity at B=1: compiled 3,000,000/s, python 1,000,000/s (compiled/python "
                  "3.00x); the python transport's closed-loop bound is 2,500,000/s "
                  "(closed-loop).")
    # at B=8 the executor's estimate (1.6 M/s) sits below the capacity: no bound, the capacity
    assert "bound is 8,000,000/s (measured capacity)" in s8


def test_capacity_python_only_has_the_bound_but_no_ratio():
    c = _clean(pl.capacity_table(_caps(("python",)), SERVICE, "command"))
    assert "compiled_over_python" not in c.columns
    assert all("compiled/python" not in s and "closed-loop bound" in s for s in c.sentences)


def test_capacity_compiled_only_has_neither_and_all_found_records_a_failed_search():
    c = _clean(pl.capacity_table(_caps(("compiled",), found=False), SERVICE, "chunk"))
    assert "python_bound" not in c.columns and c.rows[0]["all_found"] is False
    assert c.sentences[0] == "Capacity at B=1: compiled 3,000,000/s."


def test_capacity_says_when_a_batch_was_searched_again():
    caps = _caps()
    caps["first_capacity"] = caps.capacity
    caps["searches"] = 1
    c = _clean(pl.capacity_table(caps, SERVICE, "chunk"))
    assert "searches" not in c.columns and len(c.sentences) == 2  # one search each: not said
    again = (caps.batch == 8) & (caps.transport == "compiled")
    caps.loc[again, ["first_capacity", "searches"]] = [1.2e6, 2]
    c = _clean(pl.capacity_table(caps, SERVICE, "chunk"))
    assert [r["searches"] for r in c.rows] == [1, 2] and len(c.sentences) == 3
    assert "first_capacity_python" not in c.columns  # the python searches found it at once
    assert c.sentences[2].startswith("At B=8 the compiled transport's first search read "
                                     "1,200,000/s, but a row offered above it kept up")


def test_plot_capacity_draws_dots_with_the_brackets_and_the_bound():
    c = pl.capacity_table(_caps(), SERVICE, "chunk")
    assert c.rows[0]["bracket_top_python"] == 1.1e6 and "found_python" not in c.columns
    fig = pl.plot_capacity(c, "v2@numba")
    ax = fig.axes[0]
    assert not ax.patches and ax.get_title().startswith("v2@numba")  # dots, no bars
    assert [t.get_text() for t in ax.get_xticklabels()] == ["B=1", "B=8"]
    dots = {ln.get_label(): list(ln.get_ydata()) for ln in ax.lines if ln.get_label()[0] != "_"}
    assert dots == {"capacity compiled": [3e6, 24e6], "capacity python": [1e6, 8e6],
                    "python bound": [2.5e6, 8e6]}
    # the brackets: one interval per transport and batch, from the capacity to the bracket's
    # top; the bound has none
    segs = sorted((round(s[0][1]), round(s[1][1])) for coll in ax.collections
                  for s in coll.get_segments())
    assert segs == [(1e6, 1.1e6), (3e6, 3.3e6), (8e6, 8.8e6), (24e6, 26.4e6)]
    from lob.studies import plots as lp
    assert not lp.overlaps(fig)


def test_plot_capacity_draws_a_failed_search_hollow():
    caps = _caps()
    caps.loc[caps.transport == "compiled", "found"] = False
    c = pl.capacity_table(caps, SERVICE, "chunk")
    assert c.rows[0]["found_compiled"] is False and c.rows[0]["found_python"] is True
    ax = pl.plot_capacity(c, "v2@numba").axes[0]
    hollow = [ln for ln in ax.lines if ln.get_markerfacecolor() == "none"]
    assert [list(ln.get_ydata()) for ln in hollow] == [[3e6, 24e6]]


# --- at 50% and 90% ---------------------------------------------------------------------------

def test_at_fraction_speaks_for_the_unpinned_smallest_batch_only():
    res = _sweep_rows(pins=(False, True), count=20_000)
    c = _clean(pl.at_fraction_table(res))
    assert c.name == "at 50% and 90% of capacity"
    assert {r["fraction"] for r in c.rows} == set(pl.AT_FRACTIONS)
    assert len(c.rows) == 2 * 2 * 2 * 2
    assert c.sentences == [
        "python B=1 at 0.50 of capacity: p50 500 ns, p99 2,000 ns.",
        "python B=1 at 0.90 of capacity: p50 900 ns, p99 3,600 ns.",
        "compiled B=1 at 0.50 of capacity: p50 500 ns, p99 2,000 ns.",
        "compiled B=1 at 0.90 of capacity: p50 900 ns, p99 3,600 ns."]


def test_at_fraction_names_the_rows_whose_tail_is_hidden():
    c = _clean(pl.at_fraction_table(_sweep_rows(transports=("python",), count=500)))
    assert c.sentences[-1].startswith("Percentiles hidden for want of samples: python / 1 / "
                                      "0.50 / unpinned (p99, p99.9)")


def test_at_fraction_pivot_is_flat_per_pinning():
    c = _clean(pl.at_fraction_pivot(_sweep_rows(pins=(False, True))))
    assert c.name == "at_fraction"
    assert {"transport", "batch", "fraction", "lat_p99_pinned", "lat_p99_unpinned"} \
        <= set(c.columns)
    assert len(c.rows) == 2 * 2 * 2


# --- scenarios --------------------------------------------------------------------------------

def test_scenarios_show_a_marker_where_the_samples_do_not_support_a_percentile():
    sc = pd.DataFrame([{"scenario": "add_only", "fraction": 0.5, "capacity": 1e6,
                        "capacity_found": True, "n": 2_000, "samples": 2_000, "keeps_up": True,
                        "achieved_rate": 5e5, "closed_p50": 100.0, "open_p50": 300.0,
                        "closed_p99": 500.0, "open_p99": 2_000.0, "closed_p99_9": math.nan,
                        "open_p99_9": math.nan, "p50_ok": True, "p99_ok": True,
                        "p99_9_ok": False, "transport": "compiled"}])
    c = _clean(pl.scenarios_table(sc))
    assert c.rows[0]["open_p99"] == 2_000.0 and c.rows[0]["open_p99_9"] == "n<10000"
    assert c.rows[0]["closed_p99_9"] == "n<10000" and "p99_9_ok" not in c.columns


# --- pauses -----------------------------------------------------------------------------------

def _summary(cpu, lock, irq=250.0):
    return {"cpu": cpu, "seconds": 0.2, "pauses_gt_10us_per_s": 30.0,
            "pauses_gt_100us_per_s": 2.0, "median_pause_gt_10us_us": 14.5, "longest_us": 480.0,
            "lost_share_gt_10us": 0.0012, "timer_irqs_per_s": irq, "kernel_hz": 250,
            "tick_locked_share": lock}


def test_pauses_say_the_tick_only_when_most_pauses_sit_at_one_phase():
    c = _clean(pl.pauses_table([_summary(0, 0.8), _summary(1, 0.1), _summary(2, None),
                                _summary(3, 0.9, None)]))
    assert c.sentences[0] == ("CPU 0: the loop was paused for more than 10 µs 30 times a "
                              "second (median 14.5 µs, longest 480 µs), 0.12% of its time.")
    assert c.sentences[1] == ("80% of those pauses began at one phase of the 250 Hz tick, and "
                              "the CPU took 250 timer interrupts a second: the pauses come with "
                              "the scheduler tick.")
    assert len(c.sentences) == 5  # CPUs 1 (unlocked), 2 (no share) and 3 (no irqs): one each
    assert not any("tick" in s for s in c.sentences[2:])


def test_pauses_raw_keeps_each_recording_summary():
    h = _hic(0, [1_000_000], [50_000])
    c = pl.pauses_raw([h])
    assert c.name == "pauses" and c.rows[0]["longest_us"] == 50.0


# --- the tail ---------------------------------------------------------------------------------

def _hic(cpu, at, gap, seconds=1.0, realtime=False):
    return Hiccups(cpu, int(seconds * 1e9), 2_000, 10**8, 0, np.array(at, np.int64),
                   np.array(gap, np.int64), None, 250, False, realtime)


def _tail(variants=("command/fields", "command/line", "chunk/line/realtime"), runs=None,
          recordings=None, repeat=5, stalled=(), n=30_000, pins=("unpinned", "pinned"),
          pinned_x=1.0, aa_x=1.0, tick=10.0):
    """Runs of ``variants``: p99 10 µs x (1 + variant index), times ``pinned_x`` (a list: one
    factor per round) pinned and ``aa_x`` (likewise) in the A/A run."""
    rt_of = {v: v.endswith("/realtime") for v in variants}

    def per_round(x, rep):
        return x[rep] if isinstance(x, list | tuple) else x

    if runs is None:
        rows = []
        for rep in range(repeat):
            for pin in pins:
                for f in pl.TAIL_FRACTIONS:
                    for i, v in enumerate(variants):
                        p99 = 10_000.0 * (1 + i) * (1 + 0.01 * rep)
                        p99 *= {"pinned": per_round(pinned_x, rep),
                                pl.AA_PINNING: per_round(aa_x, rep)}.get(pin, 1.0)
                        rows.append({"variant": v, "fraction": f, "pinning": pin,
                                     "run": rep + 1, "span_ms": 60.0, "keeps_up": True,
                                     "drain_ns": 300.0, "longest gap (µs)": 100.0,
                                     "stalled": (v, rep + 1) in stalled, "tick_ns": tick,
                                     "count": 20_000, "p50": 800.0, "p90": 2_000.0,
                                     "p99": p99, "p99.9": "n<10000"})
        runs = pd.DataFrame(rows)
    if recordings is None:
        recordings = {rt: [[_hic(0, [100_000_000, 600_000_000], [30_000, 900_000], 0.5, rt),
                            _hic(1, [300_000_000], [20_000], 0.5, rt)]]
                      for rt in set(rt_of.values())}
    return pl.Tail("compiled", list(variants), rt_of, "command/line", 1e6,
                   {v: 2e6 for v in variants}, n, runs,
                   {(v, f, "unpinned"): [np.arange(1, 20_001, dtype=np.int64) * (i + 1)]
                    for i, v in enumerate(variants) for f in pl.TAIL_FRACTIONS},
                   recordings)


def test_tail_model_on_recorded_pauses():
    short = {rt: [[_hic(0, [10_000_000, 30_000_000], [30_000, 900_000], 0.05, rt),
                   _hic(1, [20_000_000], [20_000], 0.05, rt)]] for rt in (False, True)}
    tail = _tail(recordings=short, n=3_000)
    tm = pl.tail_model(tail, [_hic(0, [], [])])
    assert tm.min_span_ms == pytest.approx(pl.TICK_PERIODS * 1e3 / 250)
    assert [(r["variant"], r["fraction"]) for r in tm.rows] == \
        [(v, f) for f in pl.TAIL_FRACTIONS for v in tail.variants]
    r = tm.rows[0]
    # 3,000 commands at half of 1 M/s span 6 ms: eight windows per 50 ms trace, both ways
    assert r["windows"] == 2 * 8 and r["pauses under"] == "ordinary"
    assert r["p99"] == pytest.approx(np.median([10_000 * (1 + 0.01 * k) for k in range(5)]))
    assert r["run p99 over model"] == pytest.approx(r["p99"] / r["model p99"])
    assert r["model check"] in ("holds", "fails: above", "fails: below", "cannot tell")
    assert tm.rows[2]["pauses under"] == "SCHED_FIFO"
    no_hz = pl.tail_model(tail, [SimpleNamespace(hz=None)])
    assert no_hz.min_span_ms == pl.MIN_SPAN_MS_NO_HZ
    # a recording shorter than one run: no window, no model
    none = pl.tail_model(_tail(recordings=short, n=300_000), [_hic(0, [], [])])
    assert {r["model check"] for r in none.rows} == {"no model"}


def test_model_check_can_fail_either_way():
    assert pl._model_check([1.0, 1.2, 0.9, 1.1, 0.8, 1.05, 0.95])[3] == "holds"
    # synthetic runs five times the model: the model fails (the transport adds to the tail)
    assert pl._model_check([5.0, 5.5, 4.8, 6.0, 5.2, 4.9, 5.1])[3] == "fails: above"
    assert pl._model_check([0.1, 0.2, 0.15, 0.12, 0.18])[3] == "fails: below"
    # a range from 12.7 µs to 16.8 ms against a model inside it: no longer "consistent"
    assert pl._model_check([0.01, 0.1, 1.0, 10.0, 100.0, 1_000.0])[3] == "cannot tell"
    assert pl._model_check([1.0, 1.0, 1.0]) == (1.0, None, None, "too few runs")


def _tail_row(variant, fraction, *, lo=9_000.0, hi=11_000.0, model=10_000.0, span=60.0,
              p99=10_000.0, check="holds", runs=5, ilo=0.9, ihi=1.1):
    return {"variant": variant, "fraction": fraction, "runs": runs, "count": 20_000,
            "shortest run (ms)": span, "p50": 800.0, "p99": p99, "p99 lowest run": lo,
            "p99 highest run": hi, "drain ns/command": 300.0, "send ns/command": 500.0,
            "unpaced /s": 2e6, "pauses under": "ordinary", "windows": 16, "model p99": model,
            "run p99 over model": None if model is None else p99 / model,
            "interval low": ilo, "interval high": ihi, "model check": check}


def test_tail_table_reaches_every_branch():
    rows = [_tail_row("a", 0.5),  # unpaced, measured, the model holds
            _tail_row("b", 0.5, model=2_000.0, check="fails: above", ilo=4.0, ihi=6.0),
            _tail_row("c", 0.5, model=50_000.0, check="fails: below", ilo=0.1, ihi=0.3),
            _tail_row("d", 0.5, check="cannot tell", ilo=0.01, ihi=1_000.0),
            _tail_row("e", 0.5, check="too few runs", runs=3, ilo=None, ihi=None),
            _tail_row("f", 0.5, model=None, check="no model", ilo=None, ihi=None),
            _tail_row("g", 0.5, span=12.5),  # too short to meet the pauses
            _tail_row("a", 0.9)]  # not the first rate: no unpaced sentence
    c = _clean(pl.tail_table(pl.TailModel({}, rows, 40.0), _tail()))
    t = " ".join(c.sentences)
    assert sum("Flat out (unpaced)" in s for s in c.sentences) == 7
    assert ("a at 0.50 of capacity: measured p99 10,000 ns (runs 9,000 to 11,000 ns), the "
            "model's 10,000 ns; the median run is 1.00x the model (interval 0.90 to 1.10), "
            "within a factor of two either way: the model holds") in t
    assert "(interval 4.00 to 6.00), the whole interval above twice the model: the model " \
           "fails, the transport adds" in t
    assert "the whole interval below half the model: the model fails the other way" in t
    assert "reaches past a factor of two: the runs cannot tell whether the model holds" in t
    assert "from 5 runs: too few for an interval, so the model is not tested" not in t
    assert "from 3 runs: too few for an interval, so the model is not tested." in t
    assert "f at 0.50 of capacity: no model to compare" in t
    assert "g at 0.50 of capacity: the shortest run spans 12.5 ms" in t
    assert "40 ms (10 periods" in c.note and "No floor is drawn" in c.note


def test_tail_runs_table_says_the_clock_grid_and_the_plot_draws_the_model():
    tail = _tail()
    c = _clean(pl.tail_runs_table(tail))
    assert c.name == "tail_runs" and len(c.rows) == len(tail.runs)
    assert c.note.startswith("Clock: durations fall on a 10 ns grid") and "(100 ns)" in c.note
    assert c.sentences == []
    low = _clean(pl.tail_runs_table(_tail(tick=100.0)))  # p50 800 ns < 10 ticks of 100 ns
    assert low.sentences[0].startswith("Some runs' p50 lie under ten ticks")
    none = _clean(pl.tail_runs_table(_tail(tick=None)))
    assert none.sentences[0].startswith("Clock: no grid found")
    tm = pl.TailModel({(v, f): [np.full(20_000, 300, np.int64)] * 3
                       for v in tail.variants for f in pl.TAIL_FRACTIONS}, [], 40.0)
    fig = pl.plot_tail_vs_model(tail, tm, "v2@numba")
    ax = fig.axes[0]
    assert ax.get_yscale() == "log" and ax.get_title() == "50% of capacity"
    labels = [ln.get_label() for ln in ax.lines]
    assert [lb for lb in labels if lb.endswith("median run")] == \
        [f"{v}, median run" for v in tail.variants]
    assert [lb for lb in labels if "model" in lb] == \
        [f"{v}, model (median window)" for v in tail.variants]
    assert not any("floor" in lb for lb in labels)


# --- pinning against its A/A control -----------------------------------------------------------

def test_pinnings_add_the_aa_run_only_with_a_cpu_pair():
    assert pl.pinnings([None]) == {"unpinned": None}
    assert pl.pinnings([None, (0, 1)]) == {"unpinned": None, "pinned": (0, 1),
                                            pl.AA_PINNING: None}


AA = [1.0, 1.02, 1 / 1.02, 1.01, 1 / 1.01]  # the A/A runs: within 2% of the first unpinned
ALL3 = ("unpinned", "pinned", pl.AA_PINNING)


def _pin_table(pinned_x, aa_x=AA, **kw):
    return _clean(pl.pinning_table(_tail(variants=["v0"], pins=ALL3, pinned_x=pinned_x,
                                         aa_x=aa_x, **kw), cpu_count=2))


def test_pinning_table_calls_each_variant_against_its_aa_band():
    inside = _pin_table([1.0, 1.01, 0.99, 1.005, 0.995])
    (r,) = inside.rows
    assert r["pairs"] == 10 and r["A/A pairs"] == 10 and r["call"] == "within noise"
    band = aa_band([x for x in AA for _ in range(2)])  # each A/A ratio in two pairs
    assert r["A/A band low"] == pytest.approx(band["low"])
    assert r["A/A band high"] == pytest.approx(band["high"])
    assert inside.sentences[0].startswith("v0: pinned / unpinned p99 1.00 over 10 pairs "
                                          "(interval 0.99 to 1.01), A/A band 0.97 to 1.03: "
                                          "inside the A/A band")
    assert _pin_table(0.5).rows[0]["call"] == "faster"
    assert "pinning lowers the p99 beyond noise" in _pin_table(0.5).sentences[0]
    assert "pinning raises the p99 beyond noise" in _pin_table(2.0).sentences[0]
    across = _pin_table([0.9, 1.1, 0.95, 1.05, 1.0])  # reaches past the band's edges
    assert across.rows[0]["call"] == "inconclusive"
    assert "cannot tell a pinning effect from noise" in across.sentences[0]


def test_pinning_table_without_aa_runs_too_few_pairs_or_no_pinned_runs():
    no_aa = _clean(pl.pinning_table(_tail(variants=["v0"], pinned_x=0.5), cpu_count=2))
    assert no_aa.rows[0]["A/A band low"] is None
    assert "no A/A band (fewer than 5 A/A pairs)" in no_aa.sentences[0]
    few = _clean(pl.pinning_table(_tail(variants=["v0"], pins=ALL3, repeat=2, aa_x=1.0),
                                  cpu_count=2))
    assert few.sentences[0].endswith("too few pairs for an interval, so no statement on "
                                     "pinning.")
    none = _clean(pl.pinning_table(_tail(pins=("unpinned",)), cpu_count=2))
    assert none.rows == [] and none.sentences[0].startswith("No pinned runs")
    many = _clean(pl.pinning_table(_tail(pins=ALL3, aa_x=AA), cpu_count=2))
    assert [r["variant"] for r in many.rows] == sorted(_tail().variants)


# --- stalls and steps -------------------------------------------------------------------------

def test_poisson_upper():
    assert pl.poisson_upper(0.0) == 0
    assert pl.poisson_upper(1.0) == 4  # P(<=3) = 0.981, P(<=4) = 0.996
    assert pl.poisson_upper(1.0, 0.5) == 1
    with pytest.raises(ValueError, match="mu"):
        pl.poisson_upper(-1.0)


def test_stall_rates_count_pauses_over_the_threshold_on_either_cpu():
    tail = _tail()
    # one pause over 500 µs in 0.5 s of recording under each policy
    assert pl.stall_rates(tail, 500.0) == {False: 2.0, True: 2.0}
    assert pl.stall_rates(tail, 10.0) == {False: 6.0, True: 6.0}


def test_stalls_table_none_explained_and_more_than_explained():
    stalled = {("command/line", 1)} | {("chunk/line/realtime", k) for k in range(1, 6)}
    c = _clean(pl.stalls_table(_tail(stalled=stalled), 500.0))
    none, explained, more = c.sentences
    assert none == "command/fields: none of 20 runs had a publish gap over 500 µs."
    assert explained.startswith("command/line: 4 of 20 runs had a publish gap over 500 µs, "
                                "against 2.26 expected") and explained.endswith("explain them.")
    assert "at most 6 at 99%" in more and more.endswith("so the variant itself stalls.")


def _step_runs(ratios: dict, stalled=()):
    """Runs of variants v0..vk whose p99 in round r is the previous variant's x ratios[step][r]."""
    rows = []
    n = len(next(iter(ratios.values())))
    for r in range(n):
        p99 = 10_000.0
        for i in range(len(ratios) + 1):
            if i:
                p99 *= ratios[i - 1][r]
            rows.append({"variant": f"v{i}", "fraction": 0.5, "pinning": "unpinned",
                         "run": r + 1, "span_ms": 60.0, "stalled": (i, r + 1) in stalled,
                         "count": 20_000, "p50": 1_000.0, "p99": p99})
    return pd.DataFrame(rows)


def test_steps_table_calls_each_step_with_the_one_change_rule():
    ratios = {0: [1.0, 1.01, 0.99, 1.02, 0.98, 1.0, 1.01],  # within noise
              1: [0.5, 0.52, 0.48, 0.51, 0.49, 0.5, 0.5],  # faster
              2: [2.0, 2.1, 1.9, 2.2, 1.8, 2.0, 2.05],  # slower
              3: [0.7, 1.3, 0.8, 1.2, 0.9, 1.25, 0.75],  # inconclusive: across 1
              4: [0.9, 0.97, 0.93, 0.96, 0.91, 0.92, 0.94]}  # inconclusive: below 1, past 0.95
    runs = _step_runs(ratios, stalled={(1, 1)})
    variants = [f"v{i}" for i in range(6)]
    tail = _tail(variants=variants, runs=runs)
    c = _clean(pl.steps_table(tail))
    p99 = {(r["step"], r["pairs"]): r for r in c.rows if r["percentile"] == "p99"}
    assert [p99[f"v{i} -> v{i + 1}", "all pairs"]["call"] for i in range(5)] == \
        ["within noise", "faster", "slower", "inconclusive", "inconclusive"]
    assert p99["v4 -> v5", "all pairs"]["interval high"] < 1
    assert p99["v0 -> v1", "pairs without a stall"]["count"] == 6  # round 1 of v1 stalled
    assert p99["v2 -> v3", "pairs without a stall"]["count"] == 7
    text = " ".join(c.sentences)
    assert "within 5% either way, so the step changes the p99 by nothing that matters" in text
    assert "the step lowers the p99 at these rates, by more than 5%" in text
    assert "the step raises the p99 at these rates, by more than 5%" in text
    assert ("the interval reaches across 1 or across an edge of the 5% band, so the runs "
            "cannot tell whether the step changes the p99 by more than 5%") in text
    # p50 is the same in every run: within noise everywhere
    assert {r["call"] for r in c.rows if r["percentile"] == "p50"} == {"within noise"}


def test_steps_table_says_nothing_from_too_few_pairs():
    runs = _step_runs({0: [1.0, 2.0, 3.0]})
    c = _clean(pl.steps_table(_tail(variants=["v0", "v1"], runs=runs)))
    assert all(s.endswith("too few pairs for an interval, so no statement on the difference.")
               for s in c.sentences)
    assert c.sentences[0].startswith("v0 -> v1, p50 (all pairs): median ratio 1.00 over "
                                     "3 pairs")


def test_steps_table_skips_a_percentile_no_run_supports():
    runs = _step_runs({0: [1.0] * 6}).assign(p99="n<1000")
    c = pl.steps_table(_tail(variants=["v0", "v1"], runs=runs))
    assert {r["percentile"] for r in c.rows} == {"p50"}


def test_realtime_variants_are_dropped_when_a_row_would_outrun_the_budget(capsys):
    import lob
    from lob.system import realtime_budget_s

    cmds = lob.workload("cpp_comprehensive", scale=0.001).commands
    vs = ["command/line", "chunk/line/realtime"]
    assert pl._fit_realtime(["command/line"], cmds, 1.0) == ["command/line"]
    assert pl._fit_realtime(vs, cmds, 1e9) == vs
    if not math.isfinite(realtime_budget_s()):
        pytest.skip("no real-time budget on this kernel")
    assert pl._fit_realtime(vs, cmds, len(cmds) / (2 * realtime_budget_s())) == vs[:1]
    assert "skipped the realtime variants: a row of" in capsys.readouterr().out


# --- claims and the plan ----------------------------------------------------------------------

def test_claims_from_the_study_tables():
    cap = pl.capacity_table(_caps(), SERVICE, "chunk")
    sweep = pl.sweep_table(pl.Sweep(_sweep_rows(fractions=(0.5, 0.9, 1.05, 1.5, 2.0)), _caps()))
    runs = pl.tail_runs_table(_tail(pins=ALL3, aa_x=AA))
    m = pl.claims([cap, sweep, runs], cpu_count=2)
    assert set(m) == {"s003_pipeline_capacity", "s003_pipeline_saturation", "s003_pinning"}
    assert m["s003_pipeline_capacity"]["value"] == 3e6  # the compiled transport's
    sat = m["s003_pipeline_saturation"]
    # 1.05 lies inside the bracket (top 1.1): 2 rates x 2 batches of the compiled transport
    assert sat["value"] == 1.0 and sat["diagnostics"]["count"] == 4
    assert sat["explain"]["latency growth above capacity (median, last / first tenth)"] == 40
    pin = m["s003_pinning"]
    assert pin["value"] == pytest.approx(1.0)  # same p99 pinned and unpinned
    assert set(pin["parts"]) == set(_tail().variants)
    for part in pin["parts"].values():
        assert part["runs"] == 10 and part["aa"]["n"] == 10 and part["ci"] is not None
        assert part["aa"]["high"] == pytest.approx(aa_band([x for x in AA for _ in (1, 2)])[
            "high"])
        assert part["clock"]["tick_ns"] == 10.0
    assert pin["aa"]["n"] == 30 and pin["runs"] == 30
    assert pl.claims({"capacity": []}) == {}


def test_saturation_leaves_out_batches_without_a_capacity():
    rows = _sweep_rows(transports=("compiled",), batches=(1, 8), fractions=(0.5, 1.5, 2.0),
                       keeps={("compiled", 1, 1.5), ("compiled", 1, 2.0)})
    recs = pl.sweep_table(pl.Sweep(rows, _caps())).plain_rows()
    with_b1 = pl.claims({"sweep": recs}, 2)["s003_pipeline_saturation"]
    assert with_b1["diagnostics"]["count"] == 4 and with_b1["value"] == 0.5
    cap = [{"batch": 1, "capacity_compiled": 1e6, "all_found": False},
           {"batch": 8, "capacity_compiled": 8e6, "all_found": True}]
    m = pl.claims({"sweep": recs, "capacity": cap}, 2)["s003_pipeline_saturation"]
    assert m["diagnostics"]["count"] == 2 and m["value"] == 1.0  # batch 1's rows left out
    for r in recs:  # the row's own flag wins over the capacity table's
        r["capacity_found"] = True
    assert pl.claims({"sweep": recs, "capacity": cap}, 2)[
        "s003_pipeline_saturation"]["diagnostics"]["count"] == 4


def test_claims_verdicts_per_variant_and_saturation_decided():
    from lob.studies.claims import judge, load

    cl = {c.id: c for c in load()}
    runs = pl.tail_runs_table(_tail(pins=ALL3, aa_x=AA))
    sweep = pl.sweep_table(pl.Sweep(_sweep_rows(transports=("python", "compiled"),
                                                batches=(1, 8, 64), pins=(False, True),
                                                fractions=(0.5, 0.9, 1.5, 2.0, 3.0)), _caps()))
    m = pl.claims([sweep, runs], cpu_count=2)
    v = judge(cl["s003_pipeline_saturation"], m["s003_pipeline_saturation"])
    assert m["s003_pipeline_saturation"]["diagnostics"]["count"] == 18
    # 18 of 18 compiled rows: interval 0.81-1, inside the band (rows at fixed multiples of a
    # capacity searched once: the method does not guarantee it, so it is a finding)
    assert v.verdict == "reproduced"
    keeps = {("compiled", 64, 1.5)}
    two = pl.claims([pl.sweep_table(pl.Sweep(_sweep_rows(
        batches=(1, 8, 64), pins=(False, True), fractions=(0.5, 0.9, 1.5, 2.0, 3.0),
        keeps=keeps), _caps()))], cpu_count=2)
    assert judge(cl["s003_pipeline_saturation"], two["s003_pipeline_saturation"]).verdict \
        == "inconclusive"  # 16 of 18 (its pinned and unpinned rows): 0.65-0.99 straddles 0.8
    every = {(tr, b, f) for tr in ("python", "compiled") for b in (1, 8, 64)
             for f in (1.5, 2.0, 3.0)}  # a capacity under-measured: every row above keeps up
    none = pl.claims([pl.sweep_table(pl.Sweep(_sweep_rows(
        batches=(1, 8, 64), pins=(False, True), fractions=(0.5, 0.9, 1.5, 2.0, 3.0),
        keeps=every), _caps()))], cpu_count=2)["s003_pipeline_saturation"]
    assert none["value"] == 0.0 and none["diagnostics"]["count"] == 18
    assert judge(cl["s003_pipeline_saturation"], none).verdict == "not reproduced"
    half = {(tr, b, f) for tr, b, f in every if f == 1.5}  # 1.5x keeps up, 2x and 3x do not
    some = pl.claims([pl.sweep_table(pl.Sweep(_sweep_rows(
        batches=(1, 8, 64), pins=(False, True), fractions=(0.5, 0.9, 1.5, 2.0, 3.0),
        keeps=half), _caps()))], cpu_count=2)["s003_pipeline_saturation"]
    assert some["value"] == pytest.approx(12 / 18)
    # 12 of 18: 0.41-0.87 straddles the 0.8 edge
    assert judge(cl["s003_pipeline_saturation"], some).verdict == "inconclusive"
    pv = judge(cl["s003_pinning"], m["s003_pinning"])
    assert pv.verdict == "reproduced" and "A/A control" in pv.lob_figure
    assert pv.reason.count("reproduced") >= 3  # one verdict per variant


def test_saturation_table_reaches_every_branch():
    rows = _sweep_rows(batches=(1, 8), pins=(False, True), fractions=(0.5, 0.9, 1.05, 1.5, 2.0),
                       keeps={("python", 8, 1.5)})
    rows.loc[(rows.transport == "compiled") & (rows.fraction == 0.5), "keeps_up"] = False
    rows["capacity_found"] = True
    c = _clean(pl.saturation_table(pl.Sweep(rows, _caps())))
    assert [r["transport"] for r in c.rows] == ["python", "compiled"]
    py, co = c.rows
    assert (py["rows above capacity"], py["fell behind"], py["kept up"]) == (8, 6, 2)
    assert py["inside the bracket"] == 4 and co["below capacity, fell behind"] == 4
    assert py["share"] == pytest.approx(6 / 8) and "compiled transport's row" in c.note
    t = " ".join(c.sentences)
    assert ("compiled: 8 of 8 rows offered above capacity fell behind (share 1.00, interval "
            "0.63 to 1.00); median achieved / offered 0.58, latency growth 40x over the "
            "run.") in t
    assert "python: 2 row(s) above capacity kept up" in t
    assert "python: 4 row(s) offered above the capacity found lie inside its bracket" in t
    assert "compiled: 4 of 8 rows offered below capacity fell behind as well" in t
    lost = rows.assign(capacity_found=rows.batch != 8)  # batch 8's search found none
    c8 = _clean(pl.saturation_table(pl.Sweep(lost, _caps())))
    assert c8.rows[1]["no capacity found"] == 6 and c8.rows[1]["rows above capacity"] == 4
    assert ("compiled: 6 row(s) at fractions of a batch whose capacity search found no rate "
            "that kept up are not counted") in " ".join(c8.sentences)
    one = _clean(pl.saturation_table(pl.Sweep(_sweep_rows(transports=("compiled",),
                                                          fractions=(0.5, 1.05)), _caps())))
    assert [r["transport"] for r in one.rows] == ["compiled"]
    assert one.sentences[0] == ("compiled: no row was offered above the top of its capacity's "
                                "bracket, so saturation is not measured (add fractions well "
                                "above capacity).")


def test_plan_skips_the_compiled_transport_for_a_python_engine():
    p = pl.plan("v2", "cpp_comprehensive", 0.001, ["python", "compiled"], False)
    assert p.transports == ["python"] and p.skipped == ["compiled"] and p.pins == [None]
    assert p.tail_transport == "python"
    d = p.describe()
    assert d.startswith("transport 'compiled' skipped: v2 is not a compiled engine\nv2 on "
                        "cpp_comprehensive x 0.001:")
    assert pl.resolve_engine("v1") == "v1" and pl.resolve_engine("")


def test_engines_table_reports_each_engine_and_the_capacity_ratio():
    rows = [{"engine": e, "round": k, "capacity": cap * (1 + 0.1 * k), "found": True,
             "fraction": 0.5, "keeps_up": True, "count": 5_000, "p50": p50, "p99": 4 * p50}
            for k in range(3) for e, cap, p50 in (("v5@numba", 6e6, 300.0),
                                                  ("v2@numba", 3e6, 500.0))]
    c = _clean(pl.engines_table(rows))
    by = {r["engine"]: r for r in c.rows}
    assert by["v5@numba"]["capacity"] == pytest.approx(6.6e6)
    assert by["v2@numba"]["capacity_over_v5@numba"] == pytest.approx(0.5)
    assert by["v2@numba"]["p50"] == 500.0 and by["v5@numba"]["rounds"] == 3
    text = " ".join(c.sentences)
    assert "v2@numba's capacity is 0.5" in text and "v5@numba: capacity at B=1 " in text


def test_default_engine_is_the_fastest_compiled_one():
    from lob.engines.registry import engine_names

    want = "v5@numba" if "v5@numba" in engine_names() else "v2"
    assert pl.resolve_engine("") == want and pl.resolve_engine("v2") == "v2"

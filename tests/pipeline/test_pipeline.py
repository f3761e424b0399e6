"""The paced sender -> ring -> engine process pipeline: same outcomes as a plain replay, due
times stamped from the schedule, batches published only when their last command is due, and
the keeps-up / saturation rule."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import lob
from lob.pipeline import PipelineRun, run_pipeline
from lob.pipeline.run import make_step_runner, warmup_commands
from lob.pipeline.sweep import save_rows, summarize
from lob.semantics import OUTCOME_DTYPE, BookConfig

CFG = BookConfig(1, 99)


@pytest.fixture(scope="module")
def cmds():
    c = warmup_commands(CFG, 3000, seed=5)
    c["timed"][:10] = False  # a pre-load the latencies must leave out
    return c


@pytest.fixture(scope="module")
def paced(cmds):
    return run_pipeline("reference", cmds, rate=20_000, batch=8, config=CFG, warmup=100)


def test_pipeline_outcomes_equal_a_plain_replay(cmds, paced):
    ref = lob.get_engine("reference", CFG).replay(cmds)
    assert (paced.outcomes == ref.outcomes).all()


def test_due_times_follow_the_schedule_and_batches_wait_for_their_last_command(paced):
    start = int(paced.due_ns[0])
    k = np.arange(paced.n)
    assert (paced.due_ns == start + (k * (1e9 / 20_000)).astype(np.int64)).all()
    last_of_batch = np.minimum((k // 8) * 8 + 7, paced.n - 1)
    assert (paced.done_ns >= paced.due_ns[last_of_batch]).all()  # never published early
    assert (paced.done_ns >= paced.due_ns).all()


def test_latency_counts_only_timed_commands_after_warmup(cmds, paced):
    assert len(paced.latency_ns) == int(cmds["timed"][100:].sum()) == paced.n - 100
    assert (paced.latency_ns >= 0).all()


def test_unpaced_run_is_due_at_once_and_never_keeps_up(cmds):
    r = run_pipeline("reference", cmds[:500], rate=math.inf, batch=64, config=CFG)
    assert (r.due_ns == r.due_ns[0]).all()
    assert not r.keeps_up() and r.achieved_rate > 0


@pytest.mark.parametrize("engine, transport, batch", [("reference", "python", 1),
                                                       ("v2@numba", "compiled", 1),
                                                       ("v2@numba", "compiled", 4)])
def test_due_times_given_per_command_drive_the_sender(cmds, engine, transport, batch):
    """Recorded inter-arrival times (ms steps, many commands sharing one ms, a pause): each
    command due at the row's start plus its own offset, published no earlier, same outcomes,
    on either transport (the compiled sender reads the offsets in its numba loop)."""
    n = 600
    rng = np.random.default_rng(3)
    offsets = np.cumsum(rng.choice([0, 0, 0, 1_000_000], size=n)).astype(np.int64)
    offsets[n // 2:] += 20_000_000  # a 20 ms pause in the middle of the row
    r = run_pipeline(engine, cmds[:n], rate=1000.0, batch=batch, config=CFG, due_ns=offsets,
                     transport=transport)
    assert r.transport == transport
    assert (r.due_ns - r.due_ns[0] == offsets - offsets[0]).all()
    assert (r.done_ns >= r.due_ns).all()  # never published before it fell due
    # a batch goes out when its last command is due: nothing of it before that
    last = np.minimum((np.arange(n) // batch + 1) * batch, n) - 1
    assert (r.done_ns >= r.due_ns[last]).all()
    ref = lob.get_engine("reference", CFG).replay(cmds[:n])
    assert (r.outcomes == ref.outcomes).all()


def test_bad_due_times_are_named(cmds, monkeypatch):
    from lob.pipeline import session as ses

    monkeypatch.setattr(ses, "PipelineSession", lambda *a, **k: pytest.fail("started"))
    for due, msg in ((np.zeros(5, np.int64), "one due time per command"),
                     (np.arange(10, 0, -1), "non-decreasing"),
                     (np.full(10, -1), ">= 0"), (np.zeros(10), "integers")):
        with pytest.raises(ValueError, match=msg):
            run_pipeline("reference", cmds[:10], rate=1000, due_ns=due)
    with pytest.raises(ValueError, match="transport must be one of"):
        ses.check_due(np.zeros(10, np.int64), 10, "nothing")


def _synthetic(rate: float, done_lag_ns: np.ndarray) -> PipelineRun:
    n = len(done_lag_ns)
    due = (np.arange(n) * (1e9 / rate)).astype(np.int64)
    return PipelineRun("x", rate, 1, "chunk", due, due + done_lag_ns, np.ones(n, bool),
                       np.zeros(n, OUTCOME_DTYPE))


def test_keeps_up_rule():
    steady = _synthetic(1000.0, np.full(1000, 50_000))  # 50 us behind, flat
    assert steady.keeps_up() and steady.backlog_end == 1
    growing = _synthetic(1000.0, np.arange(1000) * 20_000)  # 2% slower than offered
    assert not growing.keeps_up()
    assert growing.achieved_rate < 0.99 * 1000


def test_drain_speed_is_read_only_where_commands_queue():
    # one due every 1000 ns; a 10 us stall at command 100, then 100 ns per command until
    # the queue is gone; idle gaps (1000 ns) elsewhere must not count
    due = np.arange(400) * 1000
    done = due + 50
    t = 100 * 1000 + 10_000
    for k in range(100, 400):
        t = max(t, due[k]) + 100 if k > 100 else t
        done[k] = max(done[k], t)
    run = PipelineRun("x", 1e6, 1, "chunk", due, done, np.ones(400, bool),
                      np.zeros(400, OUTCOME_DTYPE))
    assert run.drain_ns() == 100.0
    assert _synthetic(1000.0, np.full(100, 50)).drain_ns() is None  # nothing ever queued


def test_drain_speed_counts_every_command_of_a_chunk():
    # mode "chunk": after a 20 us stall the queue is worked off in publishes of 4 commands,
    # 160 ns apart (one stamp each): 40 ns per command, not 0 (the median gap between
    # successive commands' stamps) and not 160 (between publishes)
    due = np.arange(400) * 1000
    done = due + 50
    t = 100 * 1000 + 20_000
    k = 100
    while k < 120:  # 20 queued commands: 5 publishes of 4
        done[k:k + 4] = t
        t += 160
        k += 4
    run = PipelineRun("x", 1e6, 1, "chunk", due, done, np.ones(400, bool),
                      np.zeros(400, OUTCOME_DTYPE))
    assert run.drain_ns() == 40.0
    assert run.longest_gap_ns() == 20_950  # the stall: command 99's publish to the first chunk


@pytest.mark.parametrize("engine", ["v2", "v2@numba"])
def test_step_runners_agree_with_replay(engine):
    c = warmup_commands(CFG, 500, seed=9)
    want = lob.get_engine(engine, CFG).replay(c).outcomes
    for mode in ("chunk", "command"):
        run = make_step_runner(lob.get_engine(engine, CFG), mode)
        out, done = np.zeros(len(c), OUTCOME_DTYPE), np.zeros(len(c), np.int64)
        for k in range(0, len(c), 7):
            run(c[k:k + 7], out[k:k + 7], done[k:k + 7])
        assert (out == want).all(), mode
        assert (np.diff(done) >= 0).all() and done.min() > 0


def test_bad_arguments_are_named(cmds):
    with pytest.raises(ValueError, match="batch must be an int >= 1"):
        run_pipeline("reference", cmds, rate=1000, batch=0)
    with pytest.raises(ValueError, match="rate must be a number > 0"):
        run_pipeline("reference", cmds, rate=-1)
    with pytest.raises(ValueError, match="mode must be one of"):
        run_pipeline("reference", cmds, rate=1000, mode="fast")
    with pytest.raises(ValueError, match="unknown engine 'nope'"):
        run_pipeline("nope", cmds, rate=1000)
    with pytest.raises(ValueError, match="must be <= ring_capacity"):
        run_pipeline("reference", cmds, rate=1000, batch=64, ring_capacity=16)


def test_save_rows_writes_hgrm_and_a_result_with_conditions(paced, tmp_path):
    row = summarize(paced)
    assert row["lat_count"] == paced.n - 100 and row["lat_p50"] <= row["lat_p99"]
    path = save_rows([row], tmp_path, params={"n": paced.n})
    rec = json.loads(path.read_text())
    assert rec["conditions"]["params"] == {"n": paced.n} and rec["schema_version"] == 1
    assert (tmp_path / rec["rows"][0]["hgrm"]).read_text().count("\n") > 10


def test_open_loop_scenario_rows_mark_unsupported_percentiles():
    from lob.pipeline.sweep import open_loop_scenarios

    (row,) = open_loop_scenarios("v2", ["thin_book_sweep"], scale=0.001, fractions=(0.5,),
                                 steps=0, transport="python")
    assert row["scenario"] == "thin_book_sweep" and row["samples"] == 200
    assert row["open_p50"] > 0 and row["closed_p50"] > 0 and row["p50_ok"]
    assert math.isnan(row["open_p99"]) and not row["p99_ok"]  # 200 < 1,000 samples
    assert row["capacity"] > 0 and math.isclose(row["fraction"], 0.5)


def test_bad_rows_are_refused_before_any_process_starts(cmds, monkeypatch):
    from lob.pipeline import session as ses

    def no_session(*a, **k):
        raise AssertionError("a session was started for a bad row")

    monkeypatch.setattr(ses, "PipelineSession", no_session)
    for kw, msg in (({"rate": 1000, "batch": 0}, "batch must be"), ({"rate": True}, "rate must"),
                    ({"rate": 1000, "batch": 64, "ring_capacity": 16}, "ring_capacity")):
        with pytest.raises(ValueError, match=msg):
            run_pipeline("reference", cmds, **kw)
    with pytest.raises(ValueError, match="commands is empty"):
        run_pipeline("reference", cmds[:0], rate=1000)


def test_variant_names_and_session_options():
    from lob.pipeline.transports import CompiledTransport, PythonTransport
    from lob.pipeline.variants import resolve, runs_on, variant_options

    assert variant_options("chunk/line/realtime") == {"mode": "chunk", "layout": "line",
                                                      "realtime": True}
    assert variant_options("command/fields") == {"mode": "command", "layout": "fields",
                                                 "realtime": False}
    for bad in ("chunk", "chunk/rows", "fast/line", "chunk/line/fifo", "a/b/c/d"):
        with pytest.raises(ValueError, match="a variant is"):
            variant_options(bad)
    assert resolve("v2", "python", None, None) == (PythonTransport, "chunk", "fields")
    assert resolve("v2@numba", "compiled", None, None) == (CompiledTransport, "command", "line")
    assert resolve("v2@numba", "compiled", "chunk", "fields")[1:] == ("chunk", "fields")
    assert runs_on("v2@numba", "python") and runs_on("v2@numba", "compiled")
    assert runs_on("reference", "python") and not runs_on("reference", "compiled")
    with pytest.raises(ValueError, match="transport must be one of"):
        runs_on("v2", "rust")
    with pytest.raises(ValueError, match="unknown engine"):
        resolve("nope", "python", None, None)


class _FlakySession:
    """A pipeline whose true capacity is ``cap`` commands/s; the runs listed in ``spurious``
    (by call number) fall behind below it, as a run does when another process takes a slice."""

    transport = "fake"

    def __init__(self, cap: float, spurious=()):
        self.cap, self.spurious, self.calls = cap, set(spurious), 0

    def run(self, commands, *, rate, batch, **_):
        self.calls += 1
        ok = rate <= self.cap and self.calls not in self.spurious
        achieved = min(rate, 1.2 * self.cap)

        class R:
            achieved_rate = achieved
            offered = rate

            def keeps_up(self):
                return ok
        return R()


@pytest.mark.parametrize("confirm", [1, 3])
def test_capacity_search_needs_a_fall_behind_confirmed(monkeypatch, confirm):
    """One spurious fall behind below capacity (the first probe, at 80% of the unpaced rate)
    puts a search that believes it under the truth: its bracket's top (the rate a sweep's
    rows must exceed to count as above capacity) lies below the real capacity, and a row
    offered between the two keeps up. With ``confirm=3`` the probe runs again, keeps up,
    and the bracket holds the truth."""
    from lob.pipeline import sweep as sw

    monkeypatch.setattr(sw, "summarize", lambda r: {"keeps_up": r.keeps_up()})
    s = _FlakySession(1000.0, spurious={2})  # call 1: unpaced (1200/s); call 2: 960/s
    cap = sw.find_capacity("v2", np.zeros(100), batch=1, steps=4, session=s, confirm=confirm)
    assert cap["found"] and cap["unpaced_rate"] == 1200.0
    lo, hi = cap["bracket"]
    assert lo <= 1000.0  # a run never keeps up above capacity
    assert (lo <= 1000.0 < hi) is (confirm == 3), cap
    # unpaced, the 80% probe (then 40%; with confirm: twice), 4 bisection probes: with confirm=3
    # those above capacity (1080, 1020, 1005/s) run three times, the one below (990) once
    assert len(cap["runs"]) == (1 + 2 + 4 if confirm == 1 else 1 + 2 + 3 * 3 + 1), cap


def test_capacity_search_rejects_a_bad_confirm():
    from lob.pipeline.sweep import find_capacity

    with pytest.raises(ValueError, match="confirm must be an integer >= 1"):
        find_capacity("v2", np.zeros(10), batch=1, session=_FlakySession(1.0), confirm=0)
    for bad in (-1.0, math.nan, math.inf, "fast"):
        with pytest.raises(ValueError, match="floor must be a finite rate"):
            find_capacity("v2", np.zeros(10), batch=1, session=_FlakySession(1.0), floor=bad)


@pytest.mark.parametrize("research", [False, True])
def test_sweep_searches_again_when_a_row_above_capacity_keeps_up(monkeypatch, research):
    """A slow stretch over the whole search (six fall-behinds in a row below the true
    capacity, 1000/s: every confirming run) leaves it at 450/s; the row offered at 2x (900/s)
    then keeps up, which no run above capacity can. Without ``research`` that row stands (the
    saturation claim reads 1 of 2); with it, the batch is searched again from 900/s up, and
    the rows at 2x and 3x of the new capacity both fall behind."""
    from lob.pipeline import sweep as sw

    monkeypatch.setattr(sw, "summarize", lambda r: {"keeps_up": r.keeps_up(),
                                                    "offered_rate": r.offered})
    s = _FlakySession(1000.0, spurious=range(2, 8))
    rows, caps = sw.sweep("v2", np.zeros(100), batches=(1,), fractions=(2.0, 3.0), steps=3,
                          session=s, confirm=3, research=research)
    (cap,) = caps
    assert cap["first_capacity"] == 450.0 and len(rows) == 2
    if not research:
        assert cap["searches"] == 1 and cap["superseded_rows"] == 0
        assert [r["saturated"] for r in rows] == [False, True]
        return
    assert cap["searches"] == 2 and cap["superseded_rows"] == 2
    lo, hi = cap["bracket"]
    assert 900.0 <= lo <= 1000.0 < hi, cap
    assert all(r["above_capacity"] and r["saturated"] for r in rows), rows
    assert [r["offered_rate"] for r in rows] == [2 * lo, 3 * lo]


@pytest.mark.parametrize("engine, stp", [("v2@cpp", "CANCEL_MAKER"), ("orderbook_rs@cpp", "NONE")])
def test_a_foreign_engine_runs_through_the_transport_interface(engine, stp):
    """lob's C++ engines (behind the C ABI) run in the pipeline through the same Transport
    interface as Python and compiled ones (the python transport: a drained chunk per library
    call), with the outcomes of a plain replay; the compiled transport, whose loops call the
    engine inside numba code, refuses them in one line before any process starts."""
    from lob.engines import native
    from lob.semantics import StpMode

    if native.unavailable() is not None:
        pytest.skip(f"lob's C++ engines: {native.unavailable()}")
    cfg = BookConfig(1, 99, StpMode[stp])
    c = warmup_commands(cfg, 1500, seed=11)
    r = run_pipeline(engine, c, rate=100_000, batch=8, config=cfg, warmup=50)
    assert r.transport == "python"
    assert (r.outcomes == lob.get_engine("reference", cfg).replay(c).outcomes).all()
    with pytest.raises(ValueError, match=r"compiled engines only .* is a cpp engine"):
        run_pipeline(engine, c[:10], rate=math.inf, config=cfg, transport="compiled")

"""The machine-pause recorder and the latency floor it drives (lob.diagnose.hiccup)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from lob.diagnose.hiccup import (
    Hiccups,
    floor_latency,
    floor_runs,
    kernel_hz,
    record_hiccups,
    timer_interrupts,
)
from lob.system import realtime_allowed


def trace(at=(), gap=(), *, duration_ns=10**6, hz=250, start_ns=0, cpu=0):
    return Hiccups(cpu, duration_ns, 2_000, 0, start_ns, np.array(at, np.int64),
                   np.array(gap, np.int64), hz=hz)


QUIET = trace()


def test_no_pauses_every_command_takes_the_service_time():
    lat = floor_latency(QUIET, QUIET, rate=1e8, service_ns=5)  # one due every 10 ns
    assert len(lat) == 100_000
    assert (lat == 5).all()


def test_an_engine_pause_delays_the_commands_due_in_it_then_the_backlog_drains():
    eng = trace([1_000], [10_000])  # engine CPU paused over [1000, 11000)
    lat = floor_latency(QUIET, eng, rate=1e8, service_ns=5)
    assert (lat[:100] == 5).all()  # due before the pause
    assert lat[100] == 10_005  # due at 1000: served when the pause ends
    assert lat[101] == 10_000  # due 10 ns later, served 5 ns later
    # the backlog drains at 5 ns per command against one due every 10: gone after ~2000
    assert (np.diff(lat[100:1100]) == -5).all()
    assert (lat[2200:] == 5).all()


def test_a_pause_during_service_stretches_it():
    eng = trace([1_002], [1_000])  # starts 2 ns into the service of the command due at 1000
    lat = floor_latency(QUIET, eng, rate=1e6, service_ns=5)  # one due every 1000 ns
    assert lat[0] == 5 and lat[1] == 1_005  # 5 ns of work around a 1000 ns pause
    assert lat[2] == 10 and lat[3] == 5  # due at 2000, behind the stretched one until 2005


def test_a_sender_pause_publishes_late_in_order():
    snd = trace([1_000], [10_000])
    lat = floor_latency(snd, QUIET, rate=1e8, service_ns=5)
    assert lat[99] == 5
    # due 1000..10990 are published together at 11000, then served one after another
    assert lat[100] == 10_005 and lat[101] == 10_000
    assert lat[100:1100].max() == 10_005


def test_a_sender_that_costs_time_sends_its_burst_at_its_own_pace():
    snd = trace([1_000], [10_000])  # sender CPU paused over [1000, 11000)
    lat = floor_latency(snd, QUIET, rate=1e7, service_ns=5, send_ns=50)  # one due every 100
    done = np.arange(len(lat)) * 100 + lat
    assert lat[9] == 5 and lat[10] == 10_005  # due at 1000: sent when the pause ends
    assert (np.diff(done[10:210]) == 50).all()  # the burst goes out 50 ns apart
    assert (lat[215:] == 5).all()  # caught up once 50 k >= 10,500
    with pytest.raises(ValueError, match="send_ns"):
        floor_latency(snd, QUIET, rate=1e7, service_ns=5, send_ns=-1)


def test_the_sender_trace_is_moved_onto_the_engine_time_line():
    snd = trace([1_000], [10_000], start_ns=500)  # began 500 ns after the engine's trace
    lat = floor_latency(snd, QUIET, rate=1e8, service_ns=5)
    assert lat[150] == 10_005 and lat[149] == 5  # the pause is at 1500 on the engine's line


@pytest.mark.parametrize("kw, msg", [({"rate": 0}, "rate"), ({"rate": float("inf")}, "rate"),
                                     ({"service_ns": 0}, "service_ns"),
                                     ({"n": 10**9}, "do not fit")])
def test_bad_arguments_are_refused(kw, msg):
    args = {"rate": 1e6, "service_ns": 5, **kw}
    with pytest.raises(ValueError, match=msg):
        floor_latency(QUIET, QUIET, **args)


def test_tick_locked_share_tells_tick_pauses_from_random_ones():
    period = 4_000_000  # 250 Hz
    locked = trace(np.arange(200) * period + 1_234_567, [20_000] * 200, duration_ns=10**9)
    assert locked.tick_locked_share() == 1.0
    rng = np.random.default_rng(1)
    at = np.sort(rng.integers(0, 10**9, 2000))
    random = trace(at, [20_000] * 2000, duration_ns=10**9)
    assert random.tick_locked_share() < 0.25
    assert trace([1], [20_000]).tick_locked_share() is None  # too few pauses
    assert trace(at, [20_000] * 2000, hz=None).tick_locked_share() is None


def test_summary_counts_and_shares():
    h = trace([0, 100_000, 500_000], [5_000, 20_000, 150_000], duration_ns=10**9)
    s = h.summary()
    assert s["pauses_gt_10us_per_s"] == 2 and s["pauses_gt_100us_per_s"] == 1
    assert s["longest_us"] == 150.0 and s["median_pause_gt_10us_us"] == 85.0
    assert s["lost_share_gt_10us"] == pytest.approx(170_000 / 1e9)


def test_record_hiccups_one_trace_per_cpu_sharing_a_time_line():
    cpus = sorted(os.sched_getaffinity(0))
    hs = record_hiccups(0.05)
    assert [h.cpu for h in hs] == cpus
    for h in hs:
        assert h.duration_ns == 50_000_000 and h.reads > 10_000
        assert (h.gap_ns > h.threshold_ns).all()
        assert (np.diff(h.at_ns) > 0).all()
        # every gap starts inside the run and ends (at a clock read) before the next begins
        assert ((h.at_ns >= 0) & (h.at_ns < h.duration_ns)).all()
        assert (h.at_ns[:-1] + h.gap_ns[:-1] <= h.at_ns[1:]).all()
        assert 0 <= h.lost_share() <= 1 + h.gap_ns.max(initial=0) / h.duration_ns
    assert max(h.start_ns for h in hs) - min(h.start_ns for h in hs) < 50_000_000



@pytest.mark.skipif(not realtime_allowed(), reason="this process may not use SCHED_FIFO")
def test_record_hiccups_realtime_loops_run_under_sched_fifo():
    hs = record_hiccups(0.05, realtime=True)
    assert hs and all(h.realtime and h.summary()["realtime"] for h in hs)
    assert not any(h.realtime for h in record_hiccups(0.02))
    assert os.sched_getscheduler(0) == os.SCHED_OTHER  # only the loops' threads changed


def test_record_hiccups_refuses_bad_arguments():
    with pytest.raises(ValueError, match="seconds"):
        record_hiccups(0)
    with pytest.raises(ValueError, match="threshold"):
        record_hiccups(0.01, threshold_ns=10)
    with pytest.raises(ValueError, match="may run on"):
        record_hiccups(0.01, cpus=[10_000])


def test_proc_readers():
    irq = timer_interrupts()
    if irq is not None:
        assert set(os.sched_getaffinity(0)) <= set(irq) and all(v >= 0 for v in irq.values())
    hz = kernel_hz()
    assert hz is None or hz in (100, 250, 300, 1000)


def test_floor_runs_cut_the_traces_into_windows_each_from_an_empty_queue():
    eng = trace([25_000], [10_000], duration_ns=100_000)  # one pause, in the third window
    runs = floor_runs(QUIET, eng, rate=1e8, service_ns=5, n=1_000)  # 10 µs per window
    assert len(runs) == 10 and all(len(r) == 1_000 for r in runs)
    assert [int(r.max()) for r in runs[:4]] == [5, 5, 10_005, 5_005]  # the backlog spills over
    assert all(int(r.max()) == 5 for r in runs[4:])
    # the pause sits at the same place on the engine's time line in the whole-trace floor
    whole = floor_latency(QUIET, eng, rate=1e8, service_ns=5)
    assert int(whole[2_500]) == 10_005
    assert floor_runs(QUIET, eng, rate=1e8, service_ns=5, n=10**6) == []
    with pytest.raises(ValueError):
        floor_runs(QUIET, eng, rate=1e8, service_ns=5, n=0)


@pytest.mark.skipif(not realtime_allowed(), reason="this process may not use SCHED_FIFO")
def test_record_hiccups_realtime_refuses_to_outrun_the_real_time_budget(monkeypatch):
    from lob import system

    monkeypatch.setattr(system, "realtime_budget_s", lambda: 0.5)
    with pytest.raises(ValueError, match="real-time budget"):
        record_hiccups(0.6, realtime=True)

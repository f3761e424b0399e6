"""The OS helpers of the bottom layer (lob.system): pinning, real-time scheduling and its
budget, the kernel's tick, timer interrupts and process liveness."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import threading

import pytest

from lob import system


def test_pin_one_cpu_then_back_in_a_thread():
    cpus = system.allowed_cpus()
    assert cpus and set(cpus) == os.sched_getaffinity(0)
    seen = {}

    def work():  # pinning applies to the calling thread only
        seen["one"] = system.pin(cpus[-1])
        seen["back"] = system.pin(None, default=cpus)

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert seen == {"one": [cpus[-1]], "back": cpus}
    assert system.allowed_cpus() == cpus  # the main thread was never pinned


@pytest.mark.parametrize("text, want", [("950000\n", 0.95), ("-1\n", math.inf),
                                        ("junk", math.inf), (None, math.inf)])
def test_realtime_budget_reads_the_kernel_setting(tmp_path, monkeypatch, text, want):
    f = tmp_path / "sched_rt_runtime_us"
    if text is not None:
        f.write_text(text)
    monkeypatch.setattr(system, "RT_RUNTIME", f)
    assert system.realtime_budget_s() == want


@pytest.mark.skipif(not system.realtime_allowed(), reason="this process may not use SCHED_FIFO")
def test_sched_fifo_runs_the_block_real_time_and_restores_the_policy():
    before = os.sched_getscheduler(0)
    assert not system.on_fifo()
    with system.sched_fifo(True):
        assert system.on_fifo()
    assert os.sched_getscheduler(0) == before and not system.on_fifo()
    with system.sched_fifo(False):
        assert not system.on_fifo()


def test_check_realtime_names_the_missing_right(monkeypatch):
    def deny(*a):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(system.os, "sched_setscheduler", deny)
    with pytest.raises(PermissionError, match="CAP_SYS_NICE"):
        system.check_realtime()
    assert system.realtime_allowed() is False


def test_pid_alive_tells_a_live_process_from_a_reaped_one():
    assert system.pid_alive(os.getpid())
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    assert not system.pid_alive(p.pid)


def test_proc_readers_answer_or_say_none():
    hz = system.kernel_hz()
    assert hz is None or hz in (100, 250, 300, 1000)
    irq = system.timer_interrupts()
    assert irq is None or (set(system.allowed_cpus()) <= set(irq)
                           and all(v >= 0 for v in irq.values()))

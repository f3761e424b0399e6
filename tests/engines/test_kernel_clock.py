"""The in-kernel cycle-counter clock (issue 41): used only where the TSC is invariant, its
rate measured against CLOCK_MONOTONIC, and in agreement with CLOCK_MONOTONIC (within 1%)
over a known sleep and a known spin timed after the rate was measured."""

from __future__ import annotations

import time

import pytest

from lob.engines.compiled import clock as K

FLAGS = "processor\t: 0\nflags\t\t: fpu tsc constant_tsc nonstop_tsc rdtscp\n"


def test_tsc_is_used_only_where_it_is_invariant(monkeypatch):
    monkeypatch.delenv("LOB_NO_TSC", raising=False)
    assert K.tsc_unusable(FLAGS, "x86_64") is None
    why = K.tsc_unusable(FLAGS.replace(" nonstop_tsc", ""), "x86_64")
    assert "lack nonstop_tsc" in why and "idle states" in why
    assert "constant_tsc and nonstop_tsc" in K.tsc_unusable("flags\t: fpu tsc\n", "x86_64")
    assert "not an x86-64 CPU (aarch64)" in K.tsc_unusable(FLAGS, "aarch64")
    monkeypatch.setenv("LOB_NO_TSC", "1")
    assert K.tsc_unusable(FLAGS, "x86_64") == "LOB_NO_TSC is set"


def test_kernel_clock_says_which_clock_and_what_both_cost(monkeypatch):
    monkeypatch.setenv("LOB_NO_TSC", "1")
    fb = K.kernel_clock(2000)
    assert fb["clock"] == "clock_gettime(CLOCK_MONOTONIC)" and fb["why"] == "LOB_NO_TSC is set"
    assert fb["ns_per_tick"] is None and fb["read_ns"] > 0
    monkeypatch.delenv("LOB_NO_TSC")
    if K.tsc_unusable() is not None:
        pytest.skip(f"no invariant TSC here: {K.tsc_unusable()}")
    c = K.kernel_clock(2000)
    assert c["clock"] == "rdtsc" and c["why"] == ""
    assert 0.05 < c["ns_per_tick"] < 2.0 and c["resolution_ns"] == c["ns_per_tick"]
    assert set(c["clocks"]) == {"rdtsc", "clock_gettime(CLOCK_MONOTONIC)"}
    assert all(v["read_ns"] > 0 and v["resolution_ns"] > 0 for v in c["clocks"].values())


@pytest.mark.skipif(K.tsc_unusable() is not None, reason="no invariant TSC on this machine")
def test_cycle_counter_agrees_with_clock_gettime_over_a_sleep_and_a_spin():
    rate = K.tsc_rate()
    for how in ("sleep", "spin"):
        n0, t0 = K._pair()
        if how == "sleep":
            time.sleep(0.1)
        else:
            K._spin_until(n0 + 50_000_000)
        n1, t1 = K._pair()
        tsc_ns, mono_ns = (t1 - t0) * rate, n1 - n0
        assert abs(tsc_ns / mono_ns - 1) < 0.01, (how, tsc_ns, mono_ns)
    with pytest.raises(ValueError, match="window_ns"):
        K.tsc_rate(0)


def test_a_compiled_capture_says_which_clock_timed_it(monkeypatch):
    import numpy as np

    import lob
    from lob.engines.registry import get_engine
    from lob.measure.latency import capture_latency

    wl = lob.workload("mixed_70_20_10", scale=0.001)
    monkeypatch.setenv("LOB_NO_TSC", "1")
    cap = capture_latency(get_engine("v3@numba", wl.config), wl.commands)
    cal = cap.calibration
    assert cal.source == ("clock_gettime(CLOCK_MONOTONIC) in-kernel (rdtsc not used: "
                          "LOB_NO_TSC is set)")
    assert "clock_gettime(CLOCK_MONOTONIC)" in cal.clocks
    mono = np.median(cap.durations_ns)
    monkeypatch.delenv("LOB_NO_TSC")
    if K.tsc_unusable() is not None:
        return
    cap = capture_latency(get_engine("v3@numba", wl.config), wl.commands)
    cal = cap.calibration
    assert cal.source.startswith("rdtsc in-kernel (") and cal.resolution_ns < 1.0
    assert set(cal.clocks) == {"rdtsc", "clock_gettime(CLOCK_MONOTONIC)"}
    assert "rdtsc a read" in __import__("lob.studies.conclude", fromlist=["x"]).clock_line(
        cal.to_dict())
    tsc = np.median(cap.durations_ns)
    assert 0 < tsc < 20 * mono + 1000  # ns, not ticks

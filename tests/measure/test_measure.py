"""Clock calibration, closed- and open-loop capture, run conditions, result records."""

import json

import numpy as np
import pytest

from lob.engines import get_engine
from lob.measure import clock, latency, results
from lob.measure.conditions import cpu_times, machine_key, run_conditions, steal_fraction
from lob.semantics import commands


def _stream(n=600, seed=3):
    """A small mixed stream: 100 untimed pre-load submits, then submits/cancels/markets."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        r = rng.random()
        if i < 100 or r < 0.6:
            rows.append(dict(kind=0, otype=0, side=int(rng.integers(2)),
                             owner=int(rng.integers(1, 5)), price=int(rng.integers(95, 106)),
                             qty=int(rng.integers(1, 50))))
        elif r < 0.85:
            rows.append(dict(kind=1, id=int(rng.integers(1, i + 1))))
        else:
            rows.append(dict(kind=0, otype=4, side=int(rng.integers(2)),
                             owner=int(rng.integers(1, 5)), qty=int(rng.integers(1, 20))))
    c = commands(rows)
    c["timed"][:100] = False
    return c


def test_clock_calibration_python_and_native():
    for cal in (clock.calibrate_python(2000), clock.calibrate(2000)):
        assert 0 <= cal.overhead_min_ns <= cal.overhead_median_ns <= cal.overhead_p99_ns
        assert cal.overhead_median_ns < 100_000  # a clock read is not a tenth of a millisecond
        assert cal.resolution_ns > 0 and cal.samples == 2000
        assert "not subtracted" in cal.line()
    with pytest.raises(ValueError):
        clock.calibrate_python(0)


def test_external_calibration():
    c = clock.external("numba rdtsc", 12.5, 1.0)
    assert c.overhead_median_ns == 12.5 and c.source == "numba rdtsc"
    assert clock.ClockCalibration.from_dict(c.to_dict()) == c
    with pytest.raises(ValueError):
        clock.external("x", -1)


@pytest.mark.parametrize("native", [True, False])
def test_closed_loop_records_only_timed_ops(native):
    cmds = _stream()
    cap = latency.capture_latency(get_engine("reference"), cmds, use_native=native)
    assert cap.method == (("native-tsc" if clock.tsc_usable() else "native-loop") if native
                           else "python-loop")
    assert cap.durations_ns.size == int(cmds["timed"].sum()) == 500
    assert (cap.durations_ns > 0).all()
    plain = get_engine("reference").replay(cmds)
    assert cap.replay.checksum == plain.checksum  # every command ran, in order


def test_closed_loop_uses_engine_clock_when_offered():
    cmds = _stream(200)

    class Timed:
        name = "fake"
        clock = "engine"

        def replay_timed(self, c):
            return get_engine("reference").replay(c), np.arange(1, int(c["timed"].sum()) + 1)

        def clock_overhead(self):
            return {"source": "fake", "min_ns": 7.0, "median_ns": 8.0, "samples": 10}

    cap = latency.capture_latency(Timed(), cmds)
    assert cap.method == "engine-clock" and cap.calibration.overhead_min_ns == 7.0
    assert cap.calibration.overhead_median_ns == 8.0 and cap.calibration.source == "fake"
    assert cap.durations_ns.tolist() == list(range(1, 101))


def test_capture_needs_a_known_clock():
    eng = get_engine("reference")
    eng.clock = "sundial"
    with pytest.raises(ValueError, match="clock='sundial'"):
        latency.capture_latency(eng, _stream(10))


def test_capture_cost_is_measured():
    c = latency.capture_cost(20_000)
    assert c["untimed_ns_per_op"] > 0 and c["noop_sample_median_ns"] > 0
    # a difference of two timings: its sign is at the mercy of a noisy machine, so it is
    # reported, not asserted
    assert np.isfinite(c["capture_ns_per_sample"])
    assert c["method"] in ("native-tsc", "native-loop", "python-loop")


def test_open_loop_below_and_above_capacity():
    cmds = _stream(400)
    slow = latency.open_loop(get_engine("reference"), cmds, rate=2_000)  # 500 us apart
    assert not slow.saturated
    assert slow.latency.count == 300
    assert slow.latency.p50 >= slow.service.p50  # latency counts from the due time
    fast = latency.open_loop(get_engine("reference"), cmds, rate=1e9)  # 1 ns apart
    assert fast.saturated
    assert fast.behind_at_end_ns > 0
    assert fast.latency.p99 > 10 * fast.service.p99  # queueing dominates past capacity
    with pytest.raises(ValueError, match="rate"):
        latency.open_loop(get_engine("reference"), cmds, rate=0)


def test_run_conditions():
    c = run_conditions(seed=42, params={"scale": 0.1})
    for k in ("cpu_model", "cpu_count", "affinity", "load_avg", "cpu_time", "os", "python",
              "packages",
              "lob_version", "git_sha", "git_dirty", "date_utc", "gc_enabled", "machine"):
        assert k in c, k
    assert c["seed"] == 42 and c["params"] == {"scale": 0.1}
    assert c["packages"]["numpy"] == np.__version__
    assert c["date_utc"].endswith("+00:00")
    json.dumps(c)


def test_cpu_times_read_proc_stat_and_refuse_what_is_not_it(tmp_path):
    import os

    hz = os.sysconf("SC_CLK_TCK")
    f = tmp_path / "stat"
    f.write_text(f"cpu  {10 * hz} 0 {2 * hz} {30 * hz} 0 0 0 {3 * hz} 7 7\ncpu0 1 2 3\n")
    t = cpu_times(f)
    assert t == {"user": 10, "nice": 0, "system": 2, "idle": 30, "iowait": 0, "irq": 0,
                 "softirq": 0, "steal": 3}  # guest columns (already in user) are not added
    f.write_text(f"cpu  {hz} 0 {hz} {hz}\n")  # a kernel without the later columns
    assert cpu_times(f)["steal"] == 0 and cpu_times(f)["idle"] == 1
    f.write_text("intr 1 2 3\n")
    assert cpu_times(f) is None
    assert cpu_times(tmp_path / "missing") is None


def test_steal_fraction_is_the_stolen_share_of_all_cpu_time():
    a = {"cpu_time": {"user": 10.0, "idle": 10.0, "steal": 1.0}}
    b = {"cpu_time": {"user": 16.0, "idle": 12.0, "steal": 3.0}}  # 10 s passed, 2 stolen
    assert steal_fraction(a, b) == pytest.approx(0.2)
    assert steal_fraction(a, a) is None  # no time passed
    assert steal_fraction(a, {"cpu_time": None}) is None and steal_fraction({}, b) is None
    c = run_conditions()
    if c["cpu_time"] is not None:  # Linux: the machine's own counters move forward
        assert 0 <= steal_fraction(c, run_conditions() | {"cpu_time": {
            k: v + 1 for k, v in c["cpu_time"].items()}}) <= 1


def _record(host="a", p50=10):
    cond = run_conditions()
    cond["hostname"] = host
    cond["machine"] = machine_key(cond)
    return {"kind": "bench", "engine": "e", "latency": {"p50": p50, "encoded": "xx"},
            "conditions": cond}


def test_results_write_load_and_refuse_mixed_machines(tmp_path):
    results.write_result(_record("a", 10), tmp_path / "r1.json")
    results.write_result(_record("a", 20), tmp_path / "r2.json")
    (tmp_path / "other.json").write_text('{"not": "a result"}')
    df = results.load_results(tmp_path)
    assert sorted(df["latency.p50"]) == [10, 20]
    assert "latency.encoded" not in df.columns
    text = (tmp_path / "r1.json").read_text()
    assert json.loads(text)["schema_version"] == results.SCHEMA_VERSION
    assert text == json.dumps(json.loads(text), sort_keys=True, indent=1) + "\n"
    assert not list(tmp_path.glob("*.tmp"))
    results.write_result(_record("b", 30), tmp_path / "r3.json")
    with pytest.raises(results.MixedMachinesError, match="2 machines"):
        results.load_results(tmp_path)
    assert len(results.load_results(tmp_path, allow_mixed=True)) == 3


def test_result_needs_conditions_and_known_schema(tmp_path):
    with pytest.raises(ValueError, match="conditions"):
        results.write_result({"engine": "e"}, tmp_path / "x.json")
    (tmp_path / "old.json").write_text('{"schema_version": 999, "conditions": {}}')
    with pytest.raises(ValueError, match="schema_version"):
        results.read_result(tmp_path / "old.json")
    with pytest.raises(FileNotFoundError):
        results.load_results(tmp_path / "missing")


def test_tsc_capture_agrees_with_the_monotonic_clock():
    """The TSC path converts ticks to ns: a ~50 us busy op must read ~50 us on both clocks."""
    import time

    from lob.measure._native import native
    from lob.measure.clock import tsc_usable
    from lob.measure.latency import _native_timed

    m = native()
    if m is None or not tsc_usable():
        pytest.skip("no native helper or no constant TSC here")

    def busy(*_):
        end = time.perf_counter_ns() + 50_000
        while time.perf_counter_ns() < end:
            pass

    rows, timed = [()] * 200, bytes([1]) * 200
    tsc = np.zeros(200, dtype=np.int64)
    k, method = _native_timed(m, busy, rows, timed, tsc, None)
    mono = np.zeros(200, dtype=np.int64)
    m.timed_loop(busy, rows, timed, mono, None)
    assert k == 200 and method == "native-tsc"
    assert 45_000 < np.median(tsc) < 80_000
    assert abs(np.median(tsc) - np.median(mono)) < 0.1 * np.median(mono)

"""Clock calibration: what reading the clock costs, and how fine it is.

Every latency table is printed beside the calibration of the clock that produced it. The
overhead is reported, never subtracted: a per-op duration includes roughly one clock read
(the tail of the first read and the head of the second).

Three sources exist:

* ``perf_counter_ns`` -- :func:`time.perf_counter_ns` read back to back from Python;
* ``clock_gettime`` -- ``CLOCK_MONOTONIC`` (the same clock) read back to back in C, which is
  what the native capture loop of :mod:`lob.measure.latency` uses where no TSC is usable;
* ``rdtsc`` -- the x86 time-stamp counter read in C (cheaper to read than ``clock_gettime``:
  ``docs/decisions/capture-clock-tsc.md``), used by the native capture loop when the CPU
  flags say it is constant and non-stop (``LOB_NO_TSC=1`` turns it off). Ticks are turned
  into ns with a rate measured against ``CLOCK_MONOTONIC`` over the same capture;
* an external figure supplied by a compiled backend that reads its own clock in-kernel
  (:func:`external`).

A duration's tick is the clock's known resolution where lob knows what timed it
(:func:`known_tick`: the cycle counter, or ``CLOCK_MONOTONIC`` on the kernel's ``tsc``
clocksource), never fitted from the samples then: a peaked distribution of merged captures
can look like a grid (:func:`lob.measure.stats.clock_grid`, used only for other clocks).
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class ClockCalibration:
    """Back-to-back read cost of a clock (ns) and its resolution (ns)."""

    source: str
    overhead_min_ns: float
    overhead_median_ns: float
    overhead_p99_ns: float
    resolution_ns: float
    samples: int
    # every clock the engine could time with: name -> {"read_ns", "resolution_ns"} (a
    # compiled engine: the cycle counter and clock_gettime), None for a single clock
    clocks: dict | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> ClockCalibration:
        return cls(**d)

    def line(self) -> str:
        return (f"clock {self.source}: back-to-back read min {self.overhead_min_ns:.0f} / "
                f"median {self.overhead_median_ns:.0f} / p99 {self.overhead_p99_ns:.0f} ns, "
                f"resolution {self.resolution_ns:g} ns ({self.samples} reads; not subtracted)")


def _from_deltas(source: str, deltas: np.ndarray, resolution_ns: float) -> ClockCalibration:
    d = np.asarray(deltas, dtype=np.int64)
    return ClockCalibration(source, float(d.min()), float(np.median(d)),
                            float(np.percentile(d, 99)), float(resolution_ns), int(d.size))


def _resolution_ns(deltas: np.ndarray) -> float:
    """The smaller of the declared resolution and the smallest non-zero observed step."""
    declared = time.get_clock_info("perf_counter").resolution * 1e9
    nz = deltas[deltas > 0]
    observed = float(nz.min()) if nz.size else float("inf")
    return min(declared, observed)


def calibrate_python(n: int = 100_000) -> ClockCalibration:
    """Back-to-back :func:`time.perf_counter_ns` reads from a Python loop."""
    if n <= 0:
        raise ValueError(f"n must be > 0, got {n}")
    clk = time.perf_counter_ns
    buf = [0] * n
    for i in range(n):
        a = clk()
        b = clk()
        buf[i] = b - a
    d = np.array(buf, dtype=np.int64)
    return _from_deltas("perf_counter_ns", d, _resolution_ns(d))


def calibrate_native(n: int = 100_000) -> ClockCalibration | None:
    """Back-to-back ``clock_gettime(CLOCK_MONOTONIC)`` reads in C (None without the helper)."""
    from lob.measure._native import native

    m = native()
    if m is None:
        return None
    d = np.zeros(n, dtype=np.int64)
    m.clock_deltas(d)
    return _from_deltas("clock_gettime(CLOCK_MONOTONIC)", d, _resolution_ns(d))


def tsc_usable() -> bool:
    """Can the native loop time with the TSC: x86 build, constant + non-stop TSC flags."""
    from lob.engines.compiled.clock import tsc_unusable
    from lob.measure._native import native

    if os.environ.get("LOB_NO_TSC"):
        return False
    m = native()
    if m is None or not m.has_tsc():
        return False
    return tsc_unusable() is None  # the one reading of the CPU flags


def tsc_rate(p0: tuple[int, int], p1: tuple[int, int], min_ns: int = 20_000_000) -> float:
    """ns per TSC tick between two ``tsc_pair()`` reads; busy-waits more if they are close."""
    from lob.measure._native import native

    if p1[0] - p0[0] < min_ns:  # too short a window for a precise rate: extend it
        while True:
            p1 = native().tsc_pair()
            if p1[0] - p0[0] >= min_ns:
                break
    return (p1[0] - p0[0]) / (p1[1] - p0[1])


def calibrate_tsc(n: int = 100_000) -> ClockCalibration:
    """Back-to-back TSC reads in C, converted to ns with a rate measured meanwhile."""
    from lob.measure._native import native

    m = native()
    d = np.zeros(n, dtype=np.int64)
    p0 = m.tsc_pair()
    m.clock_deltas(d, True)
    rate = tsc_rate(p0, m.tsc_pair())
    ns = d * rate
    return _from_deltas("rdtsc (rate measured against CLOCK_MONOTONIC)", ns, max(rate, 1e-3))


TSC_SOURCE = "rdtsc"  # how every cycle-counter clock record's source begins
RECORDED_NS = 1.0  # durations are recorded in whole ns, whatever the clock
CLOCKSOURCE = "/sys/devices/system/clocksource/clocksource0/current_clocksource"


def kernel_clocksource(path: str = CLOCKSOURCE) -> str | None:
    """The clocksource behind the kernel's ``CLOCK_MONOTONIC`` (``tsc``, ``kvm-clock``,
    ``hpet``, ...), None where it cannot be read."""
    try:
        with open(path) as f:
            return f.read().strip() or None
    except OSError:
        return None


def known_tick(clock: dict | None, *, clocksource: str | None = None) -> tuple[float, str] | None:
    """``(tick_ns, why)`` for durations timed by ``clock`` (a clock record: a
    :class:`ClockCalibration`'s dict) whose resolution lob knows, else None (the tick is then
    fitted from the samples: :func:`lob.measure.stats.clock_grid`).

    Known: the cycle counter (a source beginning with :data:`TSC_SOURCE`: lob's native
    capture loop or a compiled kernel), whose tick is its ``resolution_ns`` (ns per TSC tick,
    measured against ``CLOCK_MONOTONIC``); and ``CLOCK_MONOTONIC`` (a source naming it) when
    the kernel reads it from the ``tsc`` clocksource (the kernel keeps that clocksource only
    while the TSC is stable), in whole ns. Durations are recorded in whole ns, so the tick is
    never under :data:`RECORDED_NS`. ``clocksource`` defaults to :func:`kernel_clocksource`.
    An engine's own clock of unknown kind (a foreign library's) is not known."""
    if not clock:
        return None
    src = str(clock.get("source") or "")
    res = clock.get("resolution_ns")
    if src.startswith(TSC_SOURCE) and res is not None and float(res) > 0:
        tick = max(float(res), RECORDED_NS)
        return tick, (f"known, not fitted: the cycle counter ticks every {float(res):.3g} ns "
                      f"and durations are recorded in whole ns, so each is known to "
                      f"{tick:.3g} ns")
    if "CLOCK_MONOTONIC" in src:
        cs = clocksource if clocksource is not None else kernel_clocksource()
        if cs == "tsc":
            return RECORDED_NS, ("known, not fitted: CLOCK_MONOTONIC reads the kernel's tsc "
                                 "clocksource (the cycle counter), in whole ns")
    return None


def calibrate(n: int = 100_000, *, native: bool = True) -> ClockCalibration:
    """Calibration of the clock the closed-loop capture will use (native when available)."""
    if native:
        if tsc_usable():
            return calibrate_tsc(n)
        c = calibrate_native(n)
        if c is not None:
            return c
    return calibrate_python(n)


def external(source: str, overhead_ns: float, resolution_ns: float = 1.0, *,
             overhead_p99_ns: float | None = None, samples: int = 0) -> ClockCalibration:
    """A calibration supplied by a compiled backend for its in-kernel clock."""
    if overhead_ns < 0 or resolution_ns <= 0:
        raise ValueError("overhead_ns must be >= 0 and resolution_ns > 0")
    p99 = overhead_ns if overhead_p99_ns is None else overhead_p99_ns
    return ClockCalibration(str(source), float(overhead_ns), float(overhead_ns), float(p99),
                            float(resolution_ns), int(samples))

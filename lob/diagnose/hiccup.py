"""The machine's own pauses, and the latency floor they put under any pipeline.

A latency tail can come from the code or from the machine: a vCPU the hypervisor deschedules,
a timer interrupt, a page fault. :func:`record_hiccups` tells them apart the way jHiccup
does, with no code under test at all: a compiled loop on each CPU reads the clock back to
back for a while and records every gap between two reads longer than ``threshold_ns``.
What it sees, any spinning thread on that CPU sees too. While it runs, the CPU's local timer
interrupts are counted (``LOC`` in ``/proc/interrupts``) and each gap's phase within the
kernel's tick period is kept, so pauses that come with the scheduler tick show as a peak
at one phase (:meth:`Hiccups.tick_locked_share`).

:func:`floor_latency` turns two such traces (the sender's CPU and the engine's) into the
latency a transport with **no handoff cost** would see on this machine: command ``k`` due at
``k / rate`` is published at its due time unless the sender's CPU is paused then (then when
the pause ends), and served in ``service_ns`` by an engine that cannot run while its CPU is
paused. Measured percentiles far above the floor are the transport's; percentiles at the
floor are the machine's, and no software on this machine goes below them.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from lob import system
from lob.engines.compiled.clock import monotonic_ns
from lob.system import kernel_hz, timer_interrupts

__all__ = ["Hiccups", "record_hiccups", "floor_latency", "floor_runs", "kernel_hz",
           "timer_interrupts"]

_MAX_GAPS = 1 << 20


@njit(cache=True, nogil=True)
def _spin(duration_ns, threshold_ns, at, gap):
    """Read the clock back to back for ``duration_ns``; record gaps > ``threshold_ns``
    (their start, relative to the first read, and their length). -> (gaps, reads, t0)."""
    t0 = monotonic_ns()
    prev = t0
    k = 0
    reads = 0
    while prev - t0 < duration_ns:
        t = monotonic_ns()
        reads += 1
        g = t - prev
        if g > threshold_ns and k < at.size:
            at[k] = prev - t0
            gap[k] = g
            k += 1
        prev = t
    return k, reads, t0


@dataclass
class Hiccups:
    """The gaps one clock-reading loop saw on one CPU.

    ``at_ns``: when each gap began (ns after the first read); ``gap_ns``: its length.
    ``start_ns``: the first read's CLOCK_MONOTONIC time (traces recorded together share it
    up to the threads' start skew). ``timer_irqs``: local timer interrupts on that CPU during
    the run (None when /proc/interrupts is unreadable or the loop was not pinned).
    """

    cpu: int | None
    duration_ns: int
    threshold_ns: int
    reads: int
    start_ns: int
    at_ns: np.ndarray
    gap_ns: np.ndarray
    timer_irqs: int | None = None
    hz: int | None = field(default_factory=kernel_hz)
    truncated: bool = False
    realtime: bool = False  # the loop ran under SCHED_FIFO (only interrupts could pause it)

    @property
    def seconds(self) -> float:
        return self.duration_ns / 1e9

    def count(self, over_ns: int = 10_000) -> int:
        return int((self.gap_ns > over_ns).sum())

    def per_second(self, over_ns: int = 10_000) -> float:
        return self.count(over_ns) / self.seconds

    def lost_share(self, over_ns: int | None = None) -> float:
        """Share of the run spent inside gaps longer than ``over_ns`` (default: threshold)."""
        g = self.gap_ns if over_ns is None else self.gap_ns[self.gap_ns > over_ns]
        return float(g.sum()) / self.duration_ns

    def tick_locked_share(self, over_ns: int = 10_000, window: float = 1 / 16) -> float | None:
        """Share of the gaps > ``over_ns`` whose start falls in the busiest ``window`` (a
        fraction of the tick period 1/HZ) of phases: ~``window`` for pauses unrelated to the
        tick, near 1 for pauses that come with it. None without HZ or with < 10 gaps."""
        big = self.at_ns[self.gap_ns > over_ns]
        if not self.hz or len(big) < 10:
            return None
        period = 1e9 / self.hz
        nbins = round(1 / window)
        ph = ((self.start_ns + big) % period) / period
        hist = np.bincount(np.minimum((ph * nbins).astype(np.int64), nbins - 1), minlength=nbins)
        hist2 = hist + np.roll(hist, -1)  # a peak may straddle two bins
        return float(hist2.max()) / len(big)

    def summary(self) -> dict:
        g = self.gap_ns
        return {"cpu": self.cpu, "seconds": round(self.seconds, 3), "reads": self.reads,
                "ns_per_read": self.duration_ns / max(self.reads, 1),
                "pauses_gt_10us_per_s": self.per_second(10_000),
                "pauses_gt_100us_per_s": self.per_second(100_000),
                "longest_us": float(g.max()) / 1e3 if len(g) else 0.0,
                "median_pause_gt_10us_us": (float(np.median(g[g > 10_000])) / 1e3
                                            if (g > 10_000).any() else None),
                "lost_share_gt_10us": self.lost_share(10_000),
                "timer_irqs_per_s": (self.timer_irqs / self.seconds
                                     if self.timer_irqs is not None else None),
                "kernel_hz": self.hz,
                "tick_locked_share": self.tick_locked_share(),
                "threshold_ns": self.threshold_ns, "truncated": self.truncated,
                "realtime": self.realtime}


def _record_one(cpu, duration_ns, threshold_ns, out, i, barrier, realtime):
    if cpu is not None:
        system.pin(cpu)  # this thread only
    if realtime:  # this thread only; it ends with the loop
        system.set_fifo()
    at = np.zeros(_MAX_GAPS, np.int64)
    gap = np.zeros(_MAX_GAPS, np.int64)
    barrier.wait()
    irq0 = timer_interrupts()
    k, reads, t0 = _spin(duration_ns, threshold_ns, at, gap)
    irq1 = timer_interrupts()
    irqs = (irq1[cpu] - irq0[cpu]) if (cpu is not None and irq0 and irq1
                                         and cpu in irq0) else None
    out[i] = Hiccups(cpu, int(duration_ns), int(threshold_ns), int(reads), int(t0),
                     at[:k].copy(), gap[:k].copy(), irqs, truncated=bool(k >= _MAX_GAPS),
                     realtime=system.on_fifo())


def record_hiccups(seconds: float = 1.0, cpus=None, *, threshold_ns: int = 2_000,
                   realtime: bool = False) -> list[Hiccups]:
    """One clock-reading loop per CPU in ``cpus`` (default: every CPU this process may use),
    all at once for ``seconds``, each pinned to its CPU (``None`` in ``cpus``: unpinned).
    With ``realtime`` the loops run under ``SCHED_FIFO`` (as a pipeline session with
    ``realtime=True`` runs its rows): then no ordinary task can pause them, only interrupts
    and the host; ``seconds`` must then stay within the kernel's real-time budget (0.95 s of
    each second by default), past which the loops would be throttled.

    The loops run in threads of this process (the compiled loop releases the GIL), so they
    start together and their traces share a time line, which :func:`floor_latency` needs.
    """
    if not (isinstance(seconds, int | float) and math.isfinite(seconds) and 0 < seconds <= 600):
        raise ValueError(f"seconds must be in (0, 600], got {seconds!r}")
    if threshold_ns < 100:
        raise ValueError(f"threshold_ns must be >= 100 ns (a clock read costs tens), "
                         f"got {threshold_ns!r}")
    allowed = system.allowed_cpus()
    cpus = list(allowed if cpus is None else cpus)
    bad = [c for c in cpus if c is not None and c not in allowed]
    if bad or not cpus:
        raise ValueError(f"cpus {cpus!r}: this process may run on {allowed}")
    if realtime:
        system.check_realtime()  # a clear PermissionError here, not a traceback from a thread
        budget = system.realtime_budget_s()
        if seconds > 0.9 * budget:
            raise ValueError(f"a SCHED_FIFO loop of {seconds} s outruns the kernel's real-time "
                             f"budget ({budget:.2f} s of each second, "
                             "/proc/sys/kernel/sched_rt_runtime_us) and would be throttled: "
                             "record at most 0.9 of it at a time")
    warm = np.zeros(1, np.int64)
    _spin(1_000, 1_000_000, warm, warm)  # compile / load before the threads start
    out: list = [None] * len(cpus)
    barrier = threading.Barrier(len(cpus))
    ts = [threading.Thread(target=_record_one, args=(c, int(seconds * 1e9), int(threshold_ns),
                                                      out, i, barrier, bool(realtime)),
                           daemon=True)
          for i, c in enumerate(cpus)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out


@njit(cache=True)
def _floor(due, service_ns, send_ns, s_at, s_gap, e_at, e_gap, lat):
    ns, ne = s_at.size, e_at.size
    i = 0  # sender pause pointer
    j = 0  # engine pause pointer
    free = np.int64(-(1 << 62))  # when the engine is next free
    pub_prev = np.int64(-(1 << 62))
    for k in range(due.size):
        d = due[k]
        # publish: at the due time, unless the sender's CPU is paused then (and never
        # sooner than send_ns after the previous publish: one sender, in order)
        p = max(d, pub_prev + send_ns)
        while i < ns and s_at[i] + s_gap[i] <= p:
            i += 1
        if i < ns and s_at[i] <= p:
            p = s_at[i] + s_gap[i]
        pub_prev = p
        # serve: start when published and the engine is free and running
        st = max(p, free)
        while j < ne and e_at[j] + e_gap[j] <= st:
            j += 1
        if j < ne and e_at[j] <= st:
            st = e_at[j] + e_gap[j]
            j += 1
        fin = st + service_ns
        while j < ne and e_at[j] < fin:  # a pause during service stretches it
            fin += e_gap[j]
            j += 1
        free = fin
        lat[k] = fin - d


def floor_latency(sender: Hiccups, engine: Hiccups, *, rate: float, service_ns: float,
                  n: int | None = None, offset_ns: int = 0, send_ns: float = 0.0
                  ) -> np.ndarray:
    """Latency (ns) of ``n`` commands due at ``rate``/s through a transport whose sender and
    engine run on the CPUs these traces were recorded on, the engine taking ``service_ns``
    per command and the sender at least ``send_ns`` between two publishes (0: a sender that
    costs nothing, so a burst it owes after a pause goes out at once).

    ``n`` defaults to as many as fit in the shorter trace; due times start ``offset_ns``
    into the traces (both traces must come from one :func:`record_hiccups` call).
    """
    if not (rate > 0 and math.isfinite(rate)):
        raise ValueError(f"rate must be a positive finite number, got {rate!r}")
    if not service_ns > 0 or not send_ns >= 0:
        raise ValueError(f"service_ns must be > 0 and send_ns >= 0, got {service_ns!r}, "
                         f"{send_ns!r}")
    span = min(sender.duration_ns, engine.duration_ns) - offset_ns
    fit = int(span * rate / 1e9)
    n = fit if n is None else int(n)
    if n <= 0 or n > fit:
        raise ValueError(f"{n} commands at {rate:,.0f}/s do not fit in the traces' "
                         f"{span / 1e9:.3f} s (at most {fit:,})")
    skew = sender.start_ns - engine.start_ns  # put both on the engine trace's time line
    due = offset_ns + (np.arange(n, dtype=np.float64) * (1e9 / rate)).astype(np.int64)
    lat = np.empty(n, np.int64)
    _floor(due, np.int64(round(service_ns)), np.int64(round(send_ns)), sender.at_ns + skew,
           sender.gap_ns, engine.at_ns, engine.gap_ns, lat)
    return lat


def floor_runs(sender: Hiccups, engine: Hiccups, *, rate: float, service_ns: float, n: int,
               send_ns: float = 0.0) -> list[np.ndarray]:
    """The floor of runs like a measured one: the traces cut into back-to-back windows of
    ``n`` commands at ``rate``, each simulated from an empty queue (as each measured run
    starts), one latency array per window (none if not even one fits).

    A measured run lasts ``n / rate`` seconds and meets only the pauses of its own stretch
    of time; comparing its percentiles with those of windows of the same length (their median
    and range) compares like with like, where one percentile over the whole trace would let a
    rare long pause count against every run.
    """
    if not (rate > 0 and math.isfinite(rate)) or n <= 0:
        raise ValueError(f"rate and n must be positive, got rate={rate!r}, n={n!r}")
    span = min(sender.duration_ns, engine.duration_ns)
    length = int(math.ceil(n * 1e9 / rate))
    return [floor_latency(sender, engine, rate=rate, service_ns=service_ns, n=n, offset_ns=o,
                          send_ns=send_ns)
            for o in range(0, span - length + 1, length)]

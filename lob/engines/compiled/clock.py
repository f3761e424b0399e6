"""In-kernel clocks for numba code: ``clock_gettime(CLOCK_MONOTONIC)`` in ns, and the CPU's
cycle counter (the TSC, read by ``llvm.readcyclecounter``: ``rdtsc`` on x86-64).

Each clock is an ``@intrinsic``: ``monotonic_ns`` declares libc's ``clock_gettime`` as an
external LLVM symbol (resolved from the process at load time) and keeps the ``timespec`` on
the stack, ``cycles`` calls LLVM's cycle-counter intrinsic; both are callable in nopython
mode, allocate nothing, and - unlike a ctypes function pointer, whose address is baked into
the code - let the calling kernels be cached.

The cycle counter counts ticks, not ns: :func:`tsc_rate` measures ns per tick against
``CLOCK_MONOTONIC`` (at the start of each capture), and it is used only where the TSC is
invariant (``constant_tsc`` and ``nonstop_tsc`` in /proc/cpuinfo: a constant rate across
frequency changes and idle states); :func:`tsc_unusable` says why not elsewhere. A tick is
a fraction of a ns (0.3-0.5 ns on a 2-3 GHz counter) and a read costs a few ns, where a
``clock_gettime`` read costs 15-30 ns on a VM.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

CLOCK_MONOTONIC = 1  # Linux <time.h>


@intrinsic
def monotonic_ns(typingctx):
    """int64 nanoseconds from clock_gettime(CLOCK_MONOTONIC), for use inside @njit code."""
    sig = types.int64()

    def codegen(context, builder, signature, args):
        i32, i64 = ir.IntType(32), ir.IntType(64)
        ts_t = ir.LiteralStructType([i64, i64])  # struct timespec on LP64 Linux
        fnty = ir.FunctionType(i32, [i32, ts_t.as_pointer()])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "clock_gettime")
        ts = cgutils.alloca_once(builder, ts_t)
        builder.call(fn, [i32(CLOCK_MONOTONIC), ts])
        sec = builder.load(cgutils.gep_inbounds(builder, ts, 0, 0))
        nsec = builder.load(cgutils.gep_inbounds(builder, ts, 0, 1))
        return builder.add(builder.mul(sec, i64(1_000_000_000)), nsec)

    return sig, codegen


@intrinsic
def cycles(typingctx):
    """int64 ticks of the CPU's cycle counter (``llvm.readcyclecounter``: ``rdtsc`` on
    x86-64), for use inside @njit code. Ticks, not ns: see :func:`tsc_rate`."""
    sig = types.int64()

    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(ir.IntType(64), [])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.readcyclecounter")
        return builder.call(fn, [])

    return sig, codegen


def tsc_unusable(cpuinfo: str | None = None, machine: str | None = None) -> str | None:
    """None when the cycle counter can time in ns (x86-64, ``constant_tsc`` and
    ``nonstop_tsc`` among the CPU flags, ``LOB_NO_TSC`` unset), else why not, in words.
    ``cpuinfo`` / ``machine``: /proc/cpuinfo's text and the architecture (read when None)."""
    import os
    import platform

    if os.environ.get("LOB_NO_TSC"):
        return "LOB_NO_TSC is set"
    arch = machine or platform.machine()
    if arch not in ("x86_64", "AMD64"):
        return f"not an x86-64 CPU ({arch}): no invariant TSC to read"
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo") as f:
                cpuinfo = f.read()
        except OSError as e:
            return f"/proc/cpuinfo unreadable ({e.strerror})"
    flags = next((ln.split(":", 1)[1].split() for ln in cpuinfo.splitlines()
                  if ln.startswith("flags")), [])
    missing = [f for f in ("constant_tsc", "nonstop_tsc") if f not in flags]
    if missing:
        return (f"the CPU flags lack {' and '.join(missing)}: the TSC's rate may change with "
                "the clock frequency or stop in idle states")
    return None


# the kernels' ``timed`` argument: 0 untimed, MONOTONIC clock_gettime ns, TSC cycle ticks
MONOTONIC, TSC = 1, 2


@njit(inline="always")
def stamp(timed):
    """One read of the clock a kernel times with: cycle ticks when ``timed == TSC``, else
    clock_gettime ns (a branch on an argument fixed for the whole replay: predicted)."""
    if timed == TSC:
        return cycles()
    return monotonic_ns()


def capture_clock() -> tuple[int, float | None, str]:
    """``(timed, ns_per_tick, why)`` for a capture starting now: the TSC with its rate
    measured now (:func:`tsc_rate`) where it is invariant, else CLOCK_MONOTONIC with
    ``why`` the TSC is not used."""
    why = tsc_unusable()
    if why is None:
        return TSC, tsc_rate(), ""
    return MONOTONIC, None, why


def to_ns(durs: np.ndarray, ns_per_tick: float | None) -> np.ndarray:
    """Durations read in ticks as whole ns (unchanged when already ns: no rate)."""
    if ns_per_tick is None:
        return durs
    return np.rint(durs * ns_per_tick).astype(np.int64)


@njit(cache=True)
def _pair():
    """(ns, ticks) read as close together as two reads can be."""
    t = cycles()
    n = monotonic_ns()
    return n, t


@njit(cache=True)
def _spin_until(deadline_ns):
    while monotonic_ns() < deadline_ns:
        pass


def tsc_rate(window_ns: int = 20_000_000) -> float:
    """ns per tick of the cycle counter, measured against ``CLOCK_MONOTONIC`` over a spin
    of ``window_ns`` (20 ms: a read's own cost, a few ns at each end, is under 1e-6 of it)."""
    if window_ns <= 0:
        raise ValueError(f"window_ns must be > 0, got {window_ns}")
    n0, t0 = _pair()
    _spin_until(n0 + window_ns)
    n1, t1 = _pair()
    if t1 <= t0:
        raise RuntimeError("the cycle counter did not advance: not usable as a clock")
    return (n1 - n0) / (t1 - t0)


def kernel_clock(samples: int = 20_000) -> dict:
    """The in-kernel clock a compiled capture uses on this machine and what both cost.

    ``{"clock": "rdtsc" | "clock_gettime(CLOCK_MONOTONIC)", "ns_per_tick" (None for
    clock_gettime), "resolution_ns", "read_ns" (median back-to-back read of the clock in
    use), "why" (why the TSC is not used, or ""), "clocks": {name: {"read_ns",
    "resolution_ns"}} for both}``. The TSC's rate is measured here, at the start of the
    capture that uses it."""
    out: dict = {"clocks": {}}
    mono = kernel_clock_overhead(samples)
    d = np.empty(samples, dtype=np.int64)
    _back_to_back(d, False)
    nz = d[d > 0]
    mono_res = float(nz.min()) if nz.size else 1.0
    out["clocks"]["clock_gettime(CLOCK_MONOTONIC)"] = {"read_ns": mono["median"],
                                                       "resolution_ns": mono_res}
    why = tsc_unusable()
    if why is None:
        rate = tsc_rate()
        c = np.empty(samples, dtype=np.int64)
        _back_to_back(c[:10], True)
        _back_to_back(c, True)
        out["clocks"]["rdtsc"] = {"read_ns": float(np.median(c)) * rate, "resolution_ns": rate}
        out.update(clock="rdtsc", ns_per_tick=rate, resolution_ns=rate,
                   read_ns=float(np.median(c)) * rate, why="")
    else:
        out.update(clock="clock_gettime(CLOCK_MONOTONIC)", ns_per_tick=None,
                   resolution_ns=mono_res, read_ns=mono["median"], why=why)
    return out


@njit(cache=True)
def _back_to_back(out, tsc):
    """Back-to-back reads of one clock: the cycle counter (ticks) or clock_gettime (ns)."""
    for i in range(out.size):
        if tsc:
            t0 = cycles()
            t1 = cycles()
        else:
            t0 = monotonic_ns()
            t1 = monotonic_ns()
        out[i] = t1 - t0


def kernel_clock_overhead(samples: int = 100_000) -> dict[str, float]:
    """Cost of one in-kernel clock read: back-to-back reads inside a compiled loop (ns)."""
    if samples <= 0:
        raise ValueError(f"samples must be > 0, got {samples}")
    buf = np.empty(samples, dtype=np.int64)
    _back_to_back(buf[:10], False)  # compile / load outside the measured run
    _back_to_back(buf, False)
    return {"min": float(buf.min()), "median": float(np.median(buf)),
            "p99": float(np.percentile(buf, 99)), "samples": samples,
            "clock": "clock_gettime(CLOCK_MONOTONIC)"}

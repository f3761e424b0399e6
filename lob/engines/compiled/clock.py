"""An in-kernel monotonic clock for numba code: ``clock_gettime(CLOCK_MONOTONIC)`` in ns.

The clock is an ``@intrinsic`` that declares libc's ``clock_gettime`` as an external LLVM
symbol (resolved from the process at load time) and keeps the ``timespec`` on the stack,
so it is callable in nopython mode, allocates nothing, and - unlike a ctypes function
pointer, whose address is baked into the code - lets the calling kernels be cached.
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


@njit(cache=True)
def _back_to_back(out):
    for i in range(out.size):
        t0 = monotonic_ns()
        t1 = monotonic_ns()
        out[i] = t1 - t0


def kernel_clock_overhead(samples: int = 100_000) -> dict[str, float]:
    """Cost of one in-kernel clock read: back-to-back reads inside a compiled loop (ns)."""
    if samples <= 0:
        raise ValueError(f"samples must be > 0, got {samples}")
    buf = np.empty(samples, dtype=np.int64)
    _back_to_back(buf[:10])  # compile / load outside the measured run
    _back_to_back(buf)
    return {"min": float(buf.min()), "median": float(np.median(buf)),
            "p99": float(np.percentile(buf, 99)), "samples": samples,
            "clock": "clock_gettime(CLOCK_MONOTONIC)"}

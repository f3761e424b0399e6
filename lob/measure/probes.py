"""Two yardsticks measured beside an engine in the same interleaved rounds (``lob profile``).

* :func:`core_clock_ghz`: the rate at which this core retires dependent one-cycle
  instructions while the round runs: a chain of xorshift steps (shift, xor: one cycle of
  latency each on every x86-64 and ARM64 core of the last decade, and nothing a compiler can
  fold), timed by the same clock as the engines. With it a kernel's ns/op becomes cycles/op,
  and a reader can tell whether a slow round ran on a slower clock (the chain slows too) or
  on a contended memory system (the chain does not). On this workplace's VM the chain reads
  a steady ~3.0 GHz while the v4 kernel's ns/op moves by 50% from one stretch to the next:
  the spread is the memory system, shared with other guests, not the clock.
* :func:`stream_floor`: the replay contract's own cost with no book: read every command
  record (40 bytes) and write every outcome record (34 bytes) from it. It is the part of any
  engine's kernel time that no change to the book can remove (a replay must read its
  commands and write its outcomes), so ``lob profile`` reports it beside the engines: of a
  kernel's ns/op, this much is the stream.
"""

from __future__ import annotations

import time

import numpy as np
from numba import njit

from lob.engines.compiled.kernel import put

CHAIN_OPS = 6  # dependent one-cycle operations a chain step
_SEED = np.uint64(0x9E3779B97F4A7C15)


@njit(cache=True, _nrt=False)
def _chain(steps, x):
    for _ in range(steps):
        x ^= x << np.uint64(13)
        x ^= x >> np.uint64(7)
        x ^= x << np.uint64(17)
    return x


@njit(cache=True, _nrt=False)
def _floor(cmds, out):
    for i in range(cmds.size):
        c = cmds[np.uint64(i)]
        put(out, np.uint64(i), c.kind, c.otype + c.side, c.id, c.qty, c.price, c.owner, 0)


def core_clock_ghz(steps: int = 2_000_000, now=time.thread_time_ns) -> float:
    """Dependent one-cycle operations retired per ns (~ the core's clock in GHz) over a chain
    of ``steps`` xorshift steps timed by ``now`` (the measuring clock: by default the thread's
    CPU clock). 2M steps are 12M cycles, ~4 ms at 3 GHz."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    _chain(1, _SEED)  # compiled (or loaded) before the clock starts
    t0 = now()
    x = _chain(steps, _SEED)
    dt = now() - t0
    if x == 0:  # never (xorshift keeps a non-zero state): keeps the result live
        raise AssertionError("xorshift chain reached 0")
    return CHAIN_OPS * steps / max(dt, 1)


def stream_floor(cmds: np.ndarray, out: np.ndarray, now=time.thread_time_ns) -> float:
    """ns per command to read every record of ``cmds`` and write an outcome record for each
    into ``out`` (at least as long as ``cmds``), with no book: the floor of any replay."""
    from lob.semantics import COMMAND_DTYPE, OUTCOME_DTYPE

    if cmds.dtype != COMMAND_DTYPE or out.dtype != OUTCOME_DTYPE or len(out) < len(cmds):
        raise ValueError("stream_floor takes COMMAND_DTYPE commands and an OUTCOME_DTYPE "
                         "array at least as long")
    _floor(cmds[:0], out)
    t0 = now()
    _floor(cmds, out)
    return (now() - t0) / max(1, len(cmds))

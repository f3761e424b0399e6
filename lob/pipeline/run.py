"""One open-loop pipeline run: a paced sender process -> SPSC ring -> an engine process.

Command ``k`` is due at ``start + k / rate``. The sender publishes in batches of ``B``: a
batch goes out once its *last* command is due, and every command carries its original due
time even when the sender is late (so a late sender does not hide queueing). The engine
process drains the ring, runs the commands, writes their outcomes to a shared result block
and stamps, per command, the moment that outcome was written (its publish time).
Latency = publish time - due time; ``time.perf_counter_ns`` is CLOCK_MONOTONIC on Linux,
one clock for every process.

Why records travel through the ring (and not indices into a workload both sides load): the
engine process then never sees the workload, as a real engine behind a queue would not; the
copy of a 40-byte record is part of what a pipeline costs, so it is measured. The records
carry their due time in a parallel int64 field.

Engine modes: ``"chunk"`` hands each drained chunk to ``engine.replay_into`` (one call, one stamp
for the chunk: its outcomes are published together); ``"command"`` runs and stamps each
command on its own (``engine.step``, or a one-row ``replay_into``). Which is cheaper
depends on the engine; :func:`lob.pipeline.sweep.service_time` measures both closed-loop.
The compiled transport has the same two modes inside its numba loop
(:func:`lob.pipeline.compiled.engine_row`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from lob.pipeline.ring import now_ns
from lob.semantics import COMMAND_DTYPE, BookConfig

__all__ = ["PipelineRun", "PipelineError", "make_step_runner", "warmup_commands", "MODES"]

MODES = ("chunk", "command")


class PipelineError(RuntimeError):
    """A pipeline process failed; the message carries its traceback or exit code."""


@dataclass
class PipelineRun:
    """Per-command due and publish times of one run, plus what the engine answered."""

    engine: str
    rate: float  # offered commands/s (inf: unpaced, every command due at start)
    batch: int
    mode: str
    due_ns: np.ndarray
    done_ns: np.ndarray
    timed: np.ndarray  # which commands count (the workload's ``timed`` flag, after warmup)
    outcomes: np.ndarray
    pin: tuple | None = None
    gc_enabled: bool = False
    extra: dict = field(default_factory=dict)
    transport: str = "python"
    layout: str = "fields"  # the ring's slots (lob.pipeline.variants.LAYOUTS)
    realtime: bool = False  # both processes ran the row under SCHED_FIFO

    @property
    def n(self) -> int:
        return len(self.due_ns)

    @property
    def latency_ns(self) -> np.ndarray:
        """Publish - due of every counted command (int64 ns; never negative)."""
        return (self.done_ns - self.due_ns)[self.timed]

    @property
    def achieved_rate(self) -> float:
        """Commands completed per second, from the first due time to the last publish."""
        span = int(self.done_ns.max() - self.due_ns[0])
        return self.n / (span / 1e9) if span > 0 else math.inf

    @property
    def backlog_end(self) -> int:
        """Commands still unpublished when the last command fell due (the queue left over)."""
        return int(np.count_nonzero(self.done_ns > self.due_ns[-1]))

    def drain_ns(self, queued_ns: int = 3_000) -> float | None:
        """How fast the engine works off a queue, per command: over the publishes whose
        commands and the commands of the publish before all waited more than ``queued_ns``
        (so no gap holds idle time), the median of (time since the previous publish) /
        (commands in this publish). A publish is one stamp: one command in mode
        ``"command"``, a whole chunk in mode ``"chunk"``. None when no two queued publishes
        follow each other."""
        order = np.argsort(self.done_ns, kind="stable")
        done = self.done_ns[order]
        lat = done - self.due_ns[order]
        stamps, first, size = np.unique(done, return_index=True, return_counts=True)
        queued = np.minimum.reduceat(lat, first) > queued_ns  # every command of the publish
        both = queued[1:] & queued[:-1]
        if not both.any():
            return None
        return float(np.median((np.diff(stamps) / size[1:])[both]))

    def longest_gap_ns(self) -> int:
        """The longest time between two successive publishes (0 for a single publish): at a
        steady rate, a stall of the engine or of the sender (or a pause of either's CPU)."""
        d = np.diff(self.done_ns)
        if len(d) and d.min() < 0:  # out of order (never from one engine): sort first
            d = np.diff(np.sort(self.done_ns))
        return int(d.max()) if len(d) else 0

    def keeps_up(self, tolerance: float = 0.01) -> bool:
        """Achieved rate >= (1 - tolerance) x offered, backlog left <= max(2 B, tolerance x n).

        Two batches may legitimately be in flight when the last command falls due: the one
        being run and the last one, which goes out only then.
        """
        if not math.isfinite(self.rate):
            return False
        return (self.achieved_rate >= (1 - tolerance) * self.rate
                and self.backlog_end <= max(2 * self.batch, tolerance * self.n))


# --- engine side ----------------------------------------------------------------------------

def warmup_commands(config: BookConfig, n: int = 2000, seed: int = 1) -> np.ndarray:
    """A small valid stream (limits, IOCs, cancels) in the band, to compile/warm an engine."""
    rng = np.random.default_rng(seed)
    out = np.zeros(n, dtype=COMMAND_DTYPE)
    mid, span = (config.min_price + config.max_price) // 2, max(1, min(5, config.width // 2))
    kind = rng.integers(0, 10, n)
    out["kind"] = np.where(kind == 9, 1, 0)
    out["otype"] = np.where(kind == 8, 1, 0)
    out["side"] = rng.integers(0, 2, n)
    out["owner"] = rng.integers(1, 5, n)
    out["price"] = np.clip(mid + rng.integers(-span, span + 1, n), config.min_price,
                           config.max_price)
    out["qty"] = rng.integers(1, 20, n)
    out["id"] = rng.integers(1, n, n)
    out["timed"] = True
    return out


def make_step_runner(engine, mode: str):
    """``run(cmds, outcomes_view, done_view)``: execute, write outcomes, stamp publish times.

    Engine protocol only: ``chunk`` runs a chunk with ``replay_into`` straight into the
    shared outcome rows (no ReplayResult, fills discarded); ``each`` runs command by
    command (``step`` for a harness-clock engine, ``replay_into`` of one row otherwise) and
    stamps each one.
    """
    from lob.engines.base import command_tuples

    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if mode == "chunk":
        def run_chunk(cmds, out, done):
            engine.replay_into(cmds, out)
            done[:] = now_ns()
        return run_chunk
    if engine.clock == "harness":
        ex, clear = engine.step, engine.clear_fills

        def run_each(cmds, out, done):
            for j, r in enumerate(command_tuples(cmds)):
                out[j] = ex(*r)
                done[j] = now_ns()
            clear()
        return run_each

    def run_each_into(cmds, out, done):
        for j in range(len(cmds)):
            engine.replay_into(cmds[j:j + 1], out[j:j + 1])
            done[j] = now_ns()
    return run_each_into

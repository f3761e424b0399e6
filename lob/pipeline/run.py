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
"""

from __future__ import annotations

import gc
import math
import multiprocessing as mp
import os
import time
import traceback
from dataclasses import dataclass, field
from multiprocessing import shared_memory

import numpy as np

from lob.pipeline.ring import START_NS, RingError, SpscRing, now_ns
from lob.semantics import COMMAND_DTYPE, OUTCOME_DTYPE, BookConfig, as_commands

__all__ = ["PipelineRun", "PipelineError", "run_pipeline", "make_step_runner", "warmup_commands"]

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


def _pin(cpu: int | None) -> list[int]:
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {cpu})
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


def _block_size(n: int) -> int:
    return n * (16 + OUTCOME_DTYPE.itemsize + COMMAND_DTYPE.itemsize)


def _results_views(buf, n: int):
    """The parent's shared block: publish times, due times, outcomes (engine) and commands."""
    done = np.ndarray((n,), np.int64, buf, 0)
    due = np.ndarray((n,), np.int64, buf, 8 * n)
    out = np.ndarray((n,), OUTCOME_DTYPE, buf, 16 * n)
    cmds = np.ndarray((n,), COMMAND_DTYPE, buf, n * (16 + OUTCOME_DTYPE.itemsize))
    return done, due, out, cmds


def _engine_main(spec, res_name, n, engine_name, config, mode, cpu, gc_on, max_take,
                 ring_kw, report):
    ring = res = cons = None
    done = due = out = None
    try:
        from lob.engines.registry import get_engine

        affinity = _pin(cpu)
        ring = SpscRing.attach(spec)
        res = shared_memory.SharedMemory(name=res_name)
        done, due, out = _results_views(res.buf, n)[:3]
        cfg = BookConfig.from_dict(config)
        warm = get_engine(engine_name, cfg)  # compile / warm the code paths, then start fresh
        wc = warmup_commands(cfg)
        wout, wdone = np.zeros(len(wc), OUTCOME_DTYPE), np.zeros(len(wc), np.int64)
        make_step_runner(warm, mode)(wc, wout, wdone)
        engine = get_engine(engine_name, cfg)
        run = make_step_runner(engine, mode)
        gc.collect()
        if not gc_on:
            gc.disable()
        cons = ring.consumer(**ring_kw)  # attaching (pid written) tells the sender we are ready
        cons.wait_for_peer()
        pos = 0
        while True:
            first, rec = cons.take(max_take)
            m = len(rec["due"])
            if m == 0:
                break
            if first != pos:
                raise RingError(f"engine: expected record {pos}, got {first} (lost or reordered)")
            due[pos:pos + m] = rec["due"]
            run(rec["cmd"], out[pos:pos + m], done[pos:pos + m])
            pos += m
        if pos != n:
            raise RingError(f"engine: stream closed after {pos} of {n} records")
        report.put(("engine", "ok", {"affinity": affinity}))
    except BaseException:
        if cons is not None:
            cons.abort()
        report.put(("engine", "error", traceback.format_exc()))
        raise SystemExit(1) from None
    finally:
        del done, due, out
        gc.enable()
        if ring is not None:
            ring.close()
        if res is not None:
            res.close()


# --- sender side ----------------------------------------------------------------------------

def _sender_main(spec, res_name, n, rate, batch, cpu, gc_on, lead_ns, ring_kw, report):
    ring = prod = res = None
    try:
        affinity = _pin(cpu)
        res = shared_memory.SharedMemory(name=res_name)
        commands = _results_views(res.buf, n)[3].copy()  # private copy: the sender's own input
        res.close()
        res = None
        ring = SpscRing.attach(spec)
        prod = ring.producer(**ring_kw)
        prod.wait_for_peer(timeout_s=300.0)  # the engine attaches only once warmed up (JIT)
        gc.collect()
        if not gc_on:
            gc.disable()
        start = now_ns() + lead_ns
        if math.isfinite(rate):
            due = start + (np.arange(n, dtype=np.float64) * (1e9 / rate)).astype(np.int64)
        else:
            due = np.full(n, start, dtype=np.int64)
        ring.hdr[START_NS] = start
        late = 0
        for k in range(0, n, batch):
            m = min(batch, n - k)
            t_due = int(due[k + m - 1])
            t = now_ns()
            if t < t_due:
                _pace_until(t_due, prod)
            elif t - t_due > 1_000_000:
                late += 1
            prod.publish(cmd=commands[k:k + m], due=due[k:k + m])
        prod.close()
        report.put(("sender", "ok", {"affinity": affinity, "late_batches_1ms": late,
                                     "start_ns": start}))
    except BaseException:
        if prod is not None:
            prod.abort()
        report.put(("sender", "error", traceback.format_exc()))
        raise SystemExit(1) from None
    finally:
        gc.enable()
        if ring is not None:
            ring.close()


def _pace_until(t_due: int, prod) -> None:
    """Wait for ``t_due``: sleep while far away, spin for the last ~200 us; keep beating."""
    while True:
        t = now_ns()
        left = t_due - t
        if left <= 0:
            return
        if left > 2_000_000:
            prod.beat(t)
            prod.check_peer(t)
            time.sleep(min(left - 1_000_000, 20_000_000) / 1e9)
        elif left > 200_000:
            time.sleep(50e-6)


# --- parent ---------------------------------------------------------------------------------

def run_pipeline(engine: str, commands: np.ndarray, *, rate: float, batch: int = 1,
                 config: BookConfig | None = None, mode: str = "chunk",
                 pin: tuple[int, int] | None = None, gc_enabled: bool = False,
                 warmup: int = 0, ring_capacity: int = 4096, max_take: int | None = None,
                 lead_s: float = 0.02, timeout_s: float = 10.0,
                 liveness_s: float = 2.0) -> PipelineRun:
    """Run ``commands`` through a sender and an engine process at ``rate`` commands/s.

    ``rate=math.inf`` sends unpaced (every command due at start: the achieved rate is the
    capacity). ``pin=(sender_cpu, engine_cpu)`` pins the two processes. The first ``warmup``
    commands, and any whose ``timed`` flag is False, are left out of the latencies.
    """
    commands = as_commands(commands)
    n = len(commands)
    if n == 0:
        raise ValueError("commands is empty")
    if isinstance(batch, bool) or not isinstance(batch, (int, np.integer)) or batch < 1:
        raise ValueError(f"batch must be an int >= 1, got {batch!r}")
    if not (isinstance(rate, (int, float)) and rate > 0):
        raise ValueError(f"rate must be a number > 0 (commands/s, or math.inf), got {rate!r}")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if batch > ring_capacity:
        raise ValueError(f"batch ({batch}) must be <= ring_capacity ({ring_capacity})")
    from lob.engines.registry import engine_spec

    engine_spec(engine)  # unknown names fail here, listing the registered ones
    config = config or BookConfig()
    ctx = mp.get_context("spawn")  # no inherited threads or numba state; works in notebooks
    ring = SpscRing.create(ring_capacity, {"cmd": COMMAND_DTYPE, "due": np.int64})
    res = shared_memory.SharedMemory(create=True, size=_block_size(n))
    views = _results_views(res.buf, n)
    views[3][:] = commands
    del views
    report = ctx.SimpleQueue()
    ring_kw = dict(timeout_s=timeout_s, liveness_s=liveness_s)
    pe, ps = (None, None) if pin is None else (pin[1], pin[0])
    procs = [
        ctx.Process(target=_engine_main, name="lob-engine", daemon=True,
                    args=(ring.spec, res.name, n, engine, config.to_dict(), mode, pe,
                          gc_enabled, max_take or ring_capacity, ring_kw, report)),
        ctx.Process(target=_sender_main, name="lob-sender", daemon=True,
                    args=(ring.spec, res.name, n, float(rate), int(batch), ps, gc_enabled,
                          int(lead_s * 1e9), ring_kw, report)),
    ]
    try:
        for p in procs:
            p.start()
        budget = 300.0 + (n / rate if math.isfinite(rate) else 0.0) * 2 + timeout_s
        deadline = time.monotonic() + budget
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
        msgs = {}
        while not report.empty():
            role, status, info = report.get()
            msgs[role] = (status, info)
        errors = [f"{role} process failed:\n{info}" for role, (st, info) in msgs.items()
                  if st == "error"]
        for p in procs:
            if p.exitcode is None:
                errors.append(f"{p.name} did not finish within {budget:.0f} s")
            elif p.exitcode != 0 and p.name.removeprefix("lob-") not in msgs:
                errors.append(f"{p.name} exited with code {p.exitcode}")
        if errors:
            raise PipelineError("\n".join(errors))
        done, due, out = _results_views(res.buf, n)[:3]
        timed = commands["timed"].copy()
        timed[:warmup] = False
        run = PipelineRun(engine, float(rate), int(batch), mode, due.copy(), done.copy(),
                          timed, out.copy(), tuple(pin) if pin else None, gc_enabled,
                          {role: info for role, (_, info) in msgs.items()})
        del done, due, out
        return run
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join(5)
        ring.close()
        res.close()
        res.unlink()

"""A sender/engine process pair that lives for a whole sweep: rows run back to back.

:class:`PipelineSession` starts the two processes once (spawn: no inherited threads or
numba state; :mod:`lob.pipeline.workers`), warms them (numba's JIT, the engine's code paths),
then runs one row per :meth:`PipelineSession.run` call: the parent writes the row's commands
to a shared block (:mod:`lob.pipeline.rows`) and sends each child a job over a pipe; the
engine builds a fresh book (the book is reset between rows), says it is ready through the
ring's ``READY`` word, the sender paces and publishes, the engine drains, executes and
stamps; both report back over their pipes. How the commands cross is the transport's
(:mod:`lob.pipeline.transports`: ``"python"``, any engine, or ``"compiled"``, @numba
engines); the options a session takes are checked by :func:`lob.pipeline.variants.resolve`.

Liveness: each child sets ``PR_SET_PDEATHSIG`` (Linux) so it dies with the parent (strictly:
with the thread that started it, so start sessions from a thread that outlives them), and
also checks its parent pid in every wait; each side checks the other's heartbeat, pid and the
abort word (see :mod:`lob.pipeline.ring`). The parent watches both children while a row
runs (exit, silence, heartbeat age, a deadline): a dead, stopped or hung child makes
:meth:`~PipelineSession.run` raise :class:`~lob.pipeline.run.PipelineError` within about
``liveness_s`` + 1 s, after setting the abort word and killing both children (the session is
then closed). Shared blocks are named after the parent's pid, and the leftovers of a killed
process group are unlinked when the next session starts (:func:`~lob.pipeline.ring.clean_stale`).

The OS helpers the notebooks import from here (:func:`check_realtime`,
:func:`realtime_allowed`, :func:`realtime_budget_s`) live in :mod:`lob.system`; the
vocabulary (:func:`variant_options`, :func:`runs_on`, ...) in :mod:`lob.pipeline.variants`.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import time
from multiprocessing.connection import wait as mp_wait

import numpy as np

from lob import system
from lob.pipeline.ring import (
    ABORT,
    ABORT_PARENT,
    CONS_BEAT,
    PROD_BEAT,
    SpscRing,
    clean_stale,
    now_ns,
)
from lob.pipeline.rows import RowBlock, row_views, slot_fields
from lob.pipeline.run import PipelineError, PipelineRun
from lob.pipeline.transports import transport_class
from lob.pipeline.variants import (
    LAYOUTS,
    TRANSPORTS,
    default_layout,
    default_mode,
    resolve,
    runs_on,
    variant_options,
)
from lob.pipeline.workers import child_main
from lob.semantics import BookConfig, as_commands
from lob.system import check_realtime, realtime_allowed, realtime_budget_s

__all__ = ["PipelineSession", "PipelineRun", "PipelineError", "TRANSPORTS", "LAYOUTS",
           "run_pipeline", "check_row", "check_due", "runs_on", "default_mode", "default_layout",
           "variant_options", "check_realtime", "realtime_allowed", "realtime_budget_s"]

_L = 8  # int64 words per cache line (control word w at raw[w * 8])


def check_row(commands, rate: float, batch: int, ring_capacity: int,
              realtime: bool = False) -> np.ndarray:
    """A row's arguments checked (ValueError naming the first bad one) -> the commands as a
    command array. ``realtime``: a paced row must fit in the kernel's real-time budget."""
    commands = as_commands(commands)
    n = len(commands)
    if n == 0:
        raise ValueError("commands is empty")
    if isinstance(batch, bool) or not isinstance(batch, (int, np.integer)) or batch < 1:
        raise ValueError(f"batch must be an int >= 1, got {batch!r}")
    if not (isinstance(rate, (int, float)) and not isinstance(rate, bool) and rate > 0):
        raise ValueError(f"rate must be a number > 0 (commands/s, or math.inf), got {rate!r}")
    if batch > ring_capacity:
        raise ValueError(f"batch ({batch}) must be <= ring_capacity ({ring_capacity})")
    budget = system.realtime_budget_s() if realtime else math.inf
    if math.isfinite(rate) and n / rate > 0.9 * budget:
        raise ValueError(f"a row of {n / rate:.2f} s under realtime=True outruns the "
                         f"kernel's real-time budget ({budget:.2f} s of each "
                         "second, /proc/sys/kernel/sched_rt_runtime_us): it would be "
                         "throttled mid-row; run shorter rows")
    return commands


def check_due(due_ns, n: int, transport: str = "python") -> np.ndarray:
    """Per-command due times of a row (ns after its start: non-negative, non-decreasing, one
    per command) as int64; ValueError naming what is wrong, or a ``transport`` that cannot
    send on recorded due times (:attr:`~lob.pipeline.transports.Transport.due_times`)."""
    if not transport_class(transport).due_times:
        raise ValueError(f"due_ns needs a transport that sends on recorded due times, got "
                         f"{transport!r}")
    a = np.asarray(due_ns)
    if a.ndim != 1 or len(a) != n:
        raise ValueError(f"due_ns must hold one due time per command ({n:,}), got shape "
                         f"{a.shape}")
    if not np.issubdtype(a.dtype, np.integer):
        raise ValueError(f"due_ns must be integers (ns after the row's start), got {a.dtype}")
    if n and (a.min() < 0 or np.any(np.diff(a) < 0)):
        raise ValueError("due_ns must be >= 0 and non-decreasing (ns after the row's start)")
    return a.astype(np.int64)


class PipelineSession:
    """A sender and an engine process, started once, running rows until :meth:`close`.

    ``engine`` is a registered name; ``transport`` ``"python"`` or ``"compiled"`` (see
    :mod:`lob.pipeline.transports`); ``mode`` the engine loop (``"chunk"``: each drained
    chunk run in one call and published together; ``"command"``: each command run and
    published on its own; None: ``"chunk"`` on the python transport, ``"command"`` on the
    compiled one, as seed 003 defines its capacity, "every command published on its own");
    ``layout`` the ring's slots (``"fields"``: slot arrays published by ``head``, the python
    transport's; ``"line"``: one cache line per slot with its own sequence word, compiled
    only; None: ``"line"`` on the compiled transport); ``realtime`` runs both children under
    ``SCHED_FIFO`` (priority 1) while a row runs, so no ordinary task (a daemon, the parent)
    preempts them; the kernel's interrupts still do (needs root, CAP_SYS_NICE or an
    RLIMIT_RTPRIO; a hung row still ends: every wait in the children is bounded by
    ``timeout_s``, and the kernel by default keeps 5% of each second for ordinary tasks, the
    parent among them); ``ring_capacity`` slots in the ring; ``max_take`` the engine's chunk
    bound; ``timeout_s`` bounds any one wait; ``liveness_s`` is how long a silent peer is
    given; ``check_ms`` how often waits check; ``spin_us`` how long a compiled wait spins
    before it yields the CPU between spins (``math.inf``: spin only; see
    :mod:`lob.pipeline.compiled`). Use as a context manager.
    """

    def __init__(self, engine: str, *, transport: str = "python", config: BookConfig | None = None,
                 mode: str | None = None, layout: str | None = None, gc_enabled: bool = False,
                 realtime: bool = False, ring_capacity: int = 4096,
                 max_take: int | None = None, timeout_s: float = 10.0, liveness_s: float = 2.0,
                 check_ms: float = 10.0, spin_us: float = 50.0,
                 start_timeout_s: float = 600.0):
        _, mode, layout = resolve(engine, transport, mode, layout)
        if realtime:
            system.check_realtime()
        if isinstance(ring_capacity, bool) or not isinstance(ring_capacity, (int, np.integer)) \
                or ring_capacity < 1:
            raise ValueError(f"ring_capacity must be an int >= 1, got {ring_capacity!r}")
        self.engine, self.transport, self.mode, self.layout = engine, transport, mode, layout
        self.realtime = bool(realtime)
        self.config = config or BookConfig()
        self.gc_enabled = gc_enabled
        self.liveness_s, self.timeout_s = float(liveness_s), float(timeout_s)
        self.closed = False
        self.stale_removed = clean_stale()
        self._row = 0
        self._rows = RowBlock()
        self._procs = {}
        self._conns = {}
        ctx = mp.get_context("spawn")  # no inherited threads or numba state; works in notebooks
        self.ring = SpscRing.create(int(ring_capacity), slot_fields(layout))
        self.capacity = int(ring_capacity)
        opts = dict(transport=transport, engine=engine, mode=mode, layout=layout,
                    realtime=bool(realtime), gc_enabled=gc_enabled,
                    max_take=int(max_take or ring_capacity), timeout_s=float(timeout_s),
                    liveness_s=float(liveness_s), check_ms=float(check_ms),
                    spin_us=float(spin_us))
        try:
            for role in ("engine", "sender"):
                here, there = ctx.Pipe()
                p = ctx.Process(target=child_main, name=f"lob-{role}", daemon=True,
                                args=(role, there, self.ring.spec, os.getpid(), opts,
                                      self.config.to_dict()))
                p.start()
                there.close()
                self._procs[role], self._conns[role] = p, here
            self._wait_all("up", start_timeout_s, check_beats=False)
        except BaseException:
            self._kill()
            raise

    # --- supervision ------------------------------------------------------------------------
    @property
    def pids(self) -> dict:
        return {r: p.pid for r, p in self._procs.items()}

    def _beat_age_s(self, role: str) -> float:
        w = CONS_BEAT if role == "engine" else PROD_BEAT
        return (now_ns() - int(self.ring.raw[w * _L])) / 1e9

    def _wait_all(self, want: str, budget_s: float, check_beats: bool = True) -> dict:
        """Both children's replies, or PipelineError once one fails, dies, hangs or is late."""

        msgs, errors = {}, []
        deadline = time.monotonic() + budget_s
        sentinels = {p.sentinel: r for r, p in self._procs.items()}
        conns = {c: r for r, c in self._conns.items()}
        while len(msgs) < 2 and not errors:
            # a wake-up of this (third) process preempts a spinning child on a 2-CPU machine
            # (~150 us here): wake only for a message, an exit, or the beat check below
            ready = mp_wait(list(conns) + list(sentinels),
                            timeout=min(1.0, max(0.05, self.liveness_s / 2)))
            for obj in ready:
                if obj in conns and conns[obj] not in msgs:
                    role = conns[obj]
                    try:
                        status, info = obj.recv()
                    except (EOFError, OSError):
                        continue  # the sentinel reports the exit
                    if status == "error":
                        errors.append(f"{role} process failed:\n{info}")
                    msgs[role] = info
            for obj in ready:
                if obj in sentinels and sentinels[obj] not in msgs:
                    role = sentinels[obj]
                    self._procs[role].join(0.2)
                    errors.append(f"{role} process (pid {self._procs[role].pid}) died "
                                  f"(exit code {self._procs[role].exitcode})")
            if check_beats and not errors:
                for role in ("engine", "sender"):
                    age = self._beat_age_s(role)
                    if role not in msgs and age > self.liveness_s + 1.0:
                        errors.append(f"{role} process (pid {self._procs[role].pid}) silent "
                                      f"for {age:.1f} s (hung or stopped)")
            if not errors and time.monotonic() > deadline:
                errors.append(f"no {want!r} from {sorted(set(self._procs) - set(msgs))} within "
                              f"{budget_s:.0f} s")
        if errors:
            self.ring.raw[ABORT * _L] = ABORT_PARENT  # the other side stops at its next check
            t1 = time.monotonic() + 1.0
            for role, c in self._conns.items():  # its own account, if it gives one quickly
                if role not in msgs and c.poll(max(0.0, t1 - time.monotonic())):
                    try:
                        status, info = c.recv()
                        if status == "error":
                            errors.append(f"{role} process failed:\n{info}")
                    except (EOFError, OSError):
                        pass
            self.close()
            raise PipelineError("\n".join(errors))
        return msgs

    # --- rows -----------------------------------------------------------------------------
    def run(self, commands, *, rate: float, batch: int = 1, pin: tuple | None = None,
            config: BookConfig | None = None, warmup: int = 0, lead_s: float = 0.02,
            due_ns=None) -> PipelineRun:
        """One row: ``commands`` at ``rate`` commands/s (``math.inf``: unpaced) in batches of
        ``batch`` -> :class:`~lob.pipeline.run.PipelineRun`. ``pin=(sender_cpu, engine_cpu)``
        pins the two processes for this row; ``config`` the book (default: the session's).
        ``due_ns`` (either transport): each command's due time in ns after the row's start,
        instead of the constant pace (``rate`` is then only recorded as the offered rate)."""
        if self.closed:
            raise PipelineError("the session is closed (a row failed or close() was called)")
        commands = check_row(commands, rate, batch, self.capacity, self.realtime)
        if due_ns is not None:
            due_ns = check_due(due_ns, len(commands), self.transport)
        return self._run_row(commands, rate, batch, pin, config, warmup, lead_s, due_ns)

    def _run_row(self, commands, rate, batch, pin, config, warmup, lead_s,
                 due_ns=None) -> PipelineRun:
        """A row whose arguments :func:`check_row` (and :func:`check_due`) passed."""
        n = len(commands)
        config = config or self.config
        res = self._rows.fit(n)
        row_views(res.buf, n).cmds[:] = commands
        self._row += 1
        pe, ps = (None, None) if pin is None else (pin[1], pin[0])
        common = dict(row=self._row, res=res.name, n=n)
        self._conns["engine"].send(("row", dict(common, config=config.to_dict(), cpu=pe,
                                                 sender_pid=self._procs["sender"].pid)))
        self._conns["sender"].send(("row", dict(common, rate=float(rate), batch=int(batch),
                                                 cpu=ps, lead_ns=int(lead_s * 1e9),
                                                 engine_pid=self._procs["engine"].pid,
                                                 due_ns=due_ns)))
        span = (int(due_ns[-1]) / 1e9 if due_ns is not None
                else n / rate if math.isfinite(rate) else 0.0)
        budget = 60.0 + 2 * span + self.timeout_s
        msgs = self._wait_all("ok", budget)
        v = row_views(res.buf, n)
        timed = commands["timed"].copy()
        timed[:warmup] = False
        run = PipelineRun(self.engine, float(rate), int(batch), self.mode, v.due.copy(),
                          v.done.copy(), timed, v.out.copy(), tuple(pin) if pin else None,
                          self.gc_enabled, msgs, transport=self.transport, layout=self.layout,
                          realtime=self.realtime)
        del v
        return run

    # --- shutdown ---------------------------------------------------------------------------
    def _kill(self) -> None:
        for p in self._procs.values():
            if p.is_alive():
                p.kill()
        for p in self._procs.values():
            p.join(5)

    def close(self) -> None:
        """Stop the children (politely, then by force) and unlink the shared blocks."""
        if self.closed:
            return
        self.closed = True
        for role, c in self._conns.items():
            try:
                if self._procs[role].is_alive():
                    c.send(("stop", None))
            except OSError:
                pass
        t1 = time.monotonic() + 2.0
        for p in self._procs.values():
            p.join(max(0.0, t1 - time.monotonic()))
        self._kill()
        for c in self._conns.values():
            c.close()
        self.ring.close()
        self._rows.close()

    def __enter__(self) -> PipelineSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def run_pipeline(engine: str, commands: np.ndarray, *, rate: float, batch: int = 1,
                 config: BookConfig | None = None, mode: str | None = None,
                 layout: str | None = None, transport: str = "python", realtime: bool = False,
                 pin: tuple[int, int] | None = None, gc_enabled: bool = False, warmup: int = 0,
                 ring_capacity: int = 4096,
                 max_take: int | None = None, lead_s: float = 0.02, timeout_s: float = 10.0,
                 liveness_s: float = 2.0, session=None, due_ns=None) -> PipelineRun:
    """Run ``commands`` through a sender and an engine process at ``rate`` commands/s.

    ``rate=math.inf`` sends unpaced (every command due at start: the achieved rate is the
    capacity). ``pin=(sender_cpu, engine_cpu)`` pins the two processes. The first ``warmup``
    commands, and any whose ``timed`` flag is False, are left out of the latencies.
    ``transport`` is ``"python"`` or ``"compiled"`` (see :mod:`lob.pipeline.transports`). With
    ``session`` (a :class:`PipelineSession`) the row runs on its live
    processes (its engine, transport and ring settings apply); without, a session is started
    for this one row and closed after it. The session checks everything; the row's arguments
    are checked (:func:`check_row`) before its processes start, so bad input costs none.
    ``due_ns`` (either transport): each command's due time in ns after the row's start
    (non-decreasing), instead of the constant pace: an open-loop replay of recorded
    inter-arrival times; ``rate`` is then only recorded as the offered rate.
    """
    if session is not None:
        return session.run(commands, rate=rate, batch=batch, pin=pin, config=config,
                           warmup=warmup, lead_s=lead_s, due_ns=due_ns)
    commands = check_row(commands, rate, batch, ring_capacity, realtime)
    if due_ns is not None:
        due_ns = check_due(due_ns, len(commands), transport)
    with PipelineSession(engine, transport=transport, config=config, mode=mode, layout=layout,
                         realtime=realtime,
                         gc_enabled=gc_enabled, ring_capacity=ring_capacity, max_take=max_take,
                         timeout_s=timeout_s, liveness_s=liveness_s) as s:
        return s._run_row(commands, rate, batch, pin, None, warmup, lead_s, due_ns)

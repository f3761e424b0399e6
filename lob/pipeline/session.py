"""A sender/engine process pair that lives for a whole sweep: rows run back to back.

:class:`PipelineSession` starts the two processes once (spawn: no inherited threads or
numba state), warms them (numba's JIT, the engine's code paths), then runs one row per
:meth:`PipelineSession.run` call: the parent writes the row's commands to a shared block and
sends each child a job over a pipe; the engine builds a fresh book (the book is reset
between rows), says it is ready through the ring's ``READY`` word, the sender paces and
publishes, the engine drains, executes and stamps; both report back over their pipes.

Transports (``transport=``):

* ``"python"``: the sender's pacing loop, the ring operations and the engine loop are Python
  (:class:`~lob.pipeline.ring.Producer` / :class:`~lob.pipeline.ring.Consumer`); the engine
  runs each drained chunk through :func:`~lob.pipeline.run.make_step_runner`. Any engine.
* ``"compiled"``: both loops are numba functions (:mod:`lob.pipeline.compiled`) with
  acquire/release control words, spin waits with a pause hint, and the engine executing the
  commands from their slots into the shared outcome rows, stamping the publish time in-kernel:
  each command on its own (``mode="command"``, the default here) or whatever is queued in one
  call with one stamp (``mode="chunk"``). Compiled (``@numba``) engines only.

Liveness: each child sets ``PR_SET_PDEATHSIG`` (Linux) so it dies with the parent (strictly:
with the thread that started it, so start sessions from a thread that outlives them), and
also checks its parent pid in every wait; each side checks the other's heartbeat, pid and the
abort word (see :mod:`lob.pipeline.ring`). The parent watches both children while a row
runs (exit, silence, heartbeat age, a deadline): a dead, stopped or hung child makes
:meth:`~PipelineSession.run` raise :class:`~lob.pipeline.run.PipelineError` within about
``liveness_s`` + 1 s, after setting the abort word and killing both children (the session is
then closed). Shared blocks are named after the parent's pid, and the leftovers of a killed
process group are unlinked when the next session starts (:func:`~lob.pipeline.ring.clean_stale`).
"""

from __future__ import annotations

import contextlib
import gc
import math
import multiprocessing as mp
import os
import signal
import time
import traceback
from multiprocessing.connection import wait as mp_wait

import numpy as np

from lob.pipeline.ring import (
    ABORT,
    ABORT_PARENT,
    CONS_BEAT,
    CONS_PID,
    HEAD,
    LINE_DTYPE,
    PROD_BEAT,
    PROD_PID,
    READY,
    START_NS,
    TAIL,
    PeerError,
    RingError,
    SpscRing,
    attach_shm,
    clean_stale,
    create_shm,
    now_ns,
)
from lob.pipeline.run import MODES, PipelineError, PipelineRun, make_step_runner, warmup_commands
from lob.semantics import COMMAND_DTYPE, OUTCOME_DTYPE, BookConfig, as_commands

__all__ = ["PipelineSession", "TRANSPORTS", "LAYOUTS", "run_pipeline", "runs_on", "default_mode",
           "default_layout", "variant_options", "check_realtime", "realtime_allowed",
           "realtime_budget_s"]

TRANSPORTS = ("python", "compiled")
LAYOUTS = ("fields", "line")  # the ring's slots: per-field arrays + head, or a line per slot
_L = 8
_SUB_MAX = 4096  # python transport: a drained chunk runs in parts of ~check_ms (beats between)


def _backend(engine: str) -> str:
    from lob.engines.registry import engine_spec

    return getattr(engine_spec(engine), "backend", "python")  # unknown names raise here


def default_mode(transport: str) -> str:
    """The engine loop a transport runs when no ``mode`` is given: ``"chunk"`` for python (a
    Python call per command costs µs), ``"command"`` for compiled (each command published on
    its own, the definition behind seed 003's capacity)."""
    return "command" if transport == "compiled" else "chunk"


def default_layout(transport: str) -> str:
    """The ring layout a transport uses when no ``layout`` is given: ``"line"`` for compiled
    (a command crosses between the cores in one cache line), ``"fields"`` for python (its only
    one)."""
    return "line" if transport == "compiled" else "fields"


def _slot_fields(layout: str) -> dict:
    return {"line": LINE_DTYPE} if layout == "line" else {"cmd": COMMAND_DTYPE, "due": np.int64}


def _compiled_slots(ring_slots: dict, layout: str) -> tuple:
    """``(slot_cmd, slot_due, Lw)`` for the compiled loops: one layout's arrays, the other's
    empty (the loops tell the layouts apart by ``Lw``'s size)."""
    if layout == "line":
        return (np.zeros(0, COMMAND_DTYPE), np.zeros(0, np.int64),
                ring_slots["line"].view(np.int64))
    return ring_slots["cmd"], ring_slots["due"], np.zeros(0, np.int64)


def variant_options(name: str) -> dict:
    """A compiled transport variant named ``"<mode>/<layout>"`` or
    ``"<mode>/<layout>/realtime"`` (e.g. ``"chunk/line/realtime"``) -> the
    :class:`PipelineSession` keywords ``mode``, ``layout``, ``realtime``."""
    parts = str(name).split("/")
    if len(parts) not in (2, 3) or parts[0] not in MODES or parts[1] not in LAYOUTS \
            or parts[2:] not in ([], ["realtime"]):
        raise ValueError(f"a variant is '<mode>/<layout>' or '<mode>/<layout>/realtime' with "
                         f"mode in {MODES} and layout in {LAYOUTS}, got {name!r}")
    return {"mode": parts[0], "layout": parts[1], "realtime": len(parts) == 3}


def runs_on(engine: str, transport: str) -> bool:
    """Whether ``engine`` can run on ``transport`` (``compiled`` needs an @numba engine)."""
    if transport not in TRANSPORTS:
        raise ValueError(f"transport must be one of {TRANSPORTS}, got {transport!r}")
    backend = _backend(engine)
    return transport == "python" or backend == "numba"


def _block_size(n: int) -> int:
    return n * (16 + OUTCOME_DTYPE.itemsize + COMMAND_DTYPE.itemsize)


def _results_views(buf, n: int):
    """The row block: publish times, due times, outcomes (engine) and commands (sender)."""
    done = np.ndarray((n,), np.int64, buf, 0)
    due = np.ndarray((n,), np.int64, buf, 8 * n)
    out = np.ndarray((n,), OUTCOME_DTYPE, buf, 16 * n)
    cmds = np.ndarray((n,), COMMAND_DTYPE, buf, n * (16 + OUTCOME_DTYPE.itemsize))
    return done, due, out, cmds


def _die_with_parent(ppid: int) -> None:
    """Ask Linux to SIGKILL this process when its parent dies; exit now if it already has."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the parent-pid checks remain
        pass
    if os.getppid() != ppid:
        os._exit(3)


# --- children -------------------------------------------------------------------------------

class _Child:
    """What the two children share: the ring, the row block, pinning, idle beating."""

    beat_word = 0

    def __init__(self, spec, ppid, opts):
        self.ring = SpscRing.attach(spec)
        self.raw = self.ring.raw
        self.ppid = ppid
        self.opts = opts
        self.transport = opts["transport"]
        self.res = None
        self.res_name = None
        self.all_cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
            else []
        ns = lambda s: int(s * 1e9)  # noqa: E731
        self.check_ns = ns(opts["check_ms"] / 1e3)
        self.liveness_ns, self.timeout_ns = ns(opts["liveness_s"]), ns(opts["timeout_s"])
        self.spin_ns = ns(min(opts["spin_us"], 1e9) / 1e6)

    def beat(self) -> None:
        self.raw[self.beat_word * _L] = now_ns()

    def alive_parent(self) -> bool:
        return os.getppid() == self.ppid

    def _unmap(self) -> None:
        if self.res is not None:
            try:
                self.res.close()
            except BufferError:  # a view still alive: the mapping goes with the process
                pass
            self.res = None

    def views(self, name, n):
        if name != self.res_name:
            self._unmap()
            self.res, self.res_name = attach_shm(name), name
        return _results_views(self.res.buf, n)

    def pin(self, cpu) -> list[int]:
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {cpu} if cpu is not None else set(self.all_cpus))
            return sorted(os.sched_getaffinity(0))
        return []

    def close(self) -> None:
        self._unmap()
        self.ring.close()


class _EngineChild(_Child):
    beat_word = CONS_BEAT

    def __init__(self, spec, ppid, opts):
        super().__init__(spec, ppid, opts)
        from lob.engines.registry import get_engine

        self.get_engine = get_engine
        self.name = opts["engine"]
        self.raw[CONS_PID * _L] = os.getpid()
        if self.transport == "python":
            self.cons = self.ring.consumer(timeout_s=opts["timeout_s"],
                                           liveness_s=opts["liveness_s"],
                                           check_ms=opts["check_ms"])

    def warm(self, config) -> None:
        """Compile / load and exercise the code paths once, on a private book and ring."""
        cfg = BookConfig.from_dict(config)
        if cfg.width > 1000:  # the code paths, not the band, need warming (a wide book is slow)
            cfg = BookConfig(cfg.min_price, cfg.min_price + 999, cfg.stp)
        wc = warmup_commands(cfg)
        n = len(wc)
        out, done = np.zeros(n, OUTCOME_DTYPE), np.zeros(n, np.int64)
        eng = self.get_engine(self.name, cfg)
        if self.transport == "python":
            make_step_runner(eng, self.opts["mode"])(wc, out, done)
            return

        if not hasattr(eng, "kernel_state"):
            raise TypeError(f"transport 'compiled' needs a compiled engine (an @numba one), "
                            f"got {self.name!r}")
        raw = np.zeros_like(self.raw)
        raw[HEAD * _L] = n
        raw[PROD_BEAT * _L] = now_ns() + 10**12
        slots = {k: np.zeros(n, dt) for k, dt in _slot_fields(self.opts["layout"]).items()}
        if "line" in slots:  # every slot filled and published (sequence word = count)
            slots["line"]["seq"] = np.arange(1, n + 1)
            slots["line"]["cmd"] = wc
        else:
            slots["cmd"][:] = wc
        self._drain(eng, raw, _compiled_slots(slots, self.opts["layout"]), out, done,
                    np.zeros(n, np.int64), n, 0)

    def _drain(self, eng, raw, slots, out, done, due, n, peer_pid):
        from lob.pipeline.compiled import GROW, OK, STATUS, engine_row

        state = eng.kernel_state()
        durs = np.zeros(0, np.int64)
        take = 1 if self.opts["mode"] == "command" else self.opts["max_take"]
        # the line layout runs the commands from a private copy of their words
        scratch = np.zeros(take if self.opts["layout"] == "line" else 0, COMMAND_DTYPE)
        pos = 0
        while True:
            pos, st = engine_row(raw, *slots, scratch, out, done, due, pos, n, take, *state,
                                 durs, self.check_ns, self.liveness_ns, self.timeout_ns, self.ppid,
                                 peer_pid, self.spin_ns)
            if st >= GROW:
                state = eng.kernel_state(st - GROW)
                continue
            if st != OK:
                raise PeerError(f"engine: stopped after {pos} of {n} commands: {STATUS[st]}")
            return

    def run(self, job) -> dict:
        n = job["n"]
        done, due, out, _ = self.views(job["res"], n)
        done[:] = 0  # map the pages now, not as page faults inside the timed loop
        due[:] = 0
        out.view(np.uint8)[:] = 0
        cfg = BookConfig.from_dict(job["config"])
        eng = self.get_engine(self.name, cfg)  # a fresh book for every row
        affinity = self.pin(job["cpu"])
        if self.transport == "compiled":
            from lob.engines.compiled.kernel import GROW_FILLS, GROW_INDEX, GROW_POOL

            # size the book for the row before saying ready, as a live engine would: the id
            # index for n ids, the node pool and fill buffer for up to n resting orders
            # (capped at 2**20), so no array is copied (~ms) in the middle of the row
            cap = min(n, 1 << 20) + 2
            for code, which in ((GROW_INDEX, 2), (GROW_POOL, 1), (GROW_FILLS, 0)):
                while len(eng.kernel_state()[which]) < cap:
                    eng.kernel_state(code)
            start_tail = int(self.raw[TAIL * _L])
            self.beat()  # building the book took a while: fresh beat, then ready
            self.raw[READY * _L] = job["row"]
            self._drain(eng, self.raw, _compiled_slots(self.ring.slots, self.opts["layout"]),
                        out, done, due, n, job["sender_pid"])
        else:
            run = make_step_runner(eng, self.opts["mode"])
            cons, max_take = self.cons, self.opts["max_take"]
            start_tail = int(self.raw[TAIL * _L])
            self.beat()  # building the book took a while: fresh beat, then ready
            self.raw[READY * _L] = job["row"]
            pos, sub = 0, _SUB_MAX
            while pos < n:
                first, rec = cons.take(min(max_take, n - pos))
                m = len(rec["due"])
                if first != start_tail + pos:
                    raise RingError(f"engine: expected record {start_tail + pos}, got "
                                    f"{first} (lost or reordered)")
                due[pos:pos + m] = rec["due"]
                j = 0
                while j < m:  # a long chunk runs in parts, beating between them
                    k = min(m, j + sub)
                    t0 = now_ns()
                    run(rec["cmd"][j:k], out[pos + j:pos + k], done[pos + j:pos + k])
                    t1 = now_ns()
                    cons.beat(t1)
                    # next part: about check_ms of work (at least 1 command)
                    sub = max(1, min(_SUB_MAX, int((k - j) * self.check_ns
                                                   / max(1, t1 - t0))))
                    j = k
                pos += m
        end_tail = int(self.raw[TAIL * _L])
        if end_tail - start_tail != n:
            raise RingError(f"engine: consumed {end_tail - start_tail} records, expected {n}")
        return {"affinity": affinity, "grows": dict(getattr(eng, "grows", {}))}


class _SenderChild(_Child):
    beat_word = PROD_BEAT

    def __init__(self, spec, ppid, opts):
        super().__init__(spec, ppid, opts)
        self.raw[PROD_PID * _L] = os.getpid()
        if self.transport == "python":
            self.prod = self.ring.producer(timeout_s=opts["timeout_s"],
                                           liveness_s=opts["liveness_s"],
                                           check_ms=opts["check_ms"])

    def warm(self, config) -> None:
        if self.transport != "compiled":
            return
        from lob.pipeline.compiled import send_row

        wc = warmup_commands(BookConfig.from_dict(config))
        n = len(wc)
        raw = np.zeros_like(self.raw)
        raw[CONS_BEAT * _L] = now_ns() + 10**12
        slots = {k: np.zeros(n, dt) for k, dt in _slot_fields(self.opts["layout"]).items()}
        send_row(raw, wc, *_compiled_slots(slots, self.opts["layout"]), 0, n, now_ns(), 0.0, 7,
                 self.check_ns, self.liveness_ns, self.timeout_ns, self.ppid, 0, self.spin_ns)

    def _wait_ready(self, row: int) -> None:
        t0 = time.monotonic()
        while int(self.raw[READY * _L]) != row:
            self.beat()
            if self.raw[ABORT * _L]:
                raise PeerError("sender: aborted before the row started")
            if time.monotonic() - t0 > max(60.0, self.opts["timeout_s"]):
                raise RingError("sender: the engine did not get ready for the row")
            time.sleep(20e-6)

    def run(self, job) -> dict:
        n, rate, batch = job["n"], job["rate"], job["batch"]
        cmds = self.views(job["res"], n)[3]
        int(cmds.view(np.uint8)[::4096].sum())  # map the pages before the timed loop
        affinity = self.pin(job["cpu"])
        self._wait_ready(job["row"])
        start = now_ns() + job["lead_ns"]
        self.raw[START_NS * _L] = start
        period = 1e9 / rate if math.isfinite(rate) else 0.0
        if self.transport == "compiled":
            from lob.pipeline.compiled import OK, STATUS, send_row

            k, st, late = send_row(self.raw, cmds,
                                   *_compiled_slots(self.ring.slots, self.opts["layout"]), 0, n,
                                   start, period, batch, self.check_ns, self.liveness_ns,
                                   self.timeout_ns, self.ppid, job["engine_pid"], self.spin_ns)
            if st != OK:
                raise PeerError(f"sender: stopped after {k} of {n} commands: {STATUS[st]}")
        else:
            late = self._send_python(cmds, n, start, period, batch)
        return {"affinity": affinity, "late_batches_1ms": int(late), "start_ns": int(start)}

    def _send_python(self, cmds, n, start, period, batch) -> int:
        prod = self.prod
        due = start + (np.arange(n, dtype=np.float64) * period).astype(np.int64)
        late = 0
        for k in range(0, n, batch):
            m = min(batch, n - k)
            t_due = int(due[k + m - 1])
            t = now_ns()
            if t < t_due:
                _pace_until(t_due, prod)
            elif t - t_due > 1_000_000:
                late += 1
            prod.publish(cmd=cmds[k:k + m], due=due[k:k + m])
        return late


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


@contextlib.contextmanager
def _realtime(on: bool):
    """Run the block under SCHED_FIFO (priority 1) when ``on``, then restore the policy."""
    if not on:
        yield
        return
    old, prio = os.sched_getscheduler(0), os.sched_getparam(0).sched_priority
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    try:
        yield
    finally:
        os.sched_setscheduler(0, old, os.sched_param(prio))


def realtime_budget_s() -> float:
    """Seconds of each scheduling period a SCHED_FIFO task may run before the kernel throttles
    it for the rest of the period (``sched_rt_runtime_us``, default 0.95 s of every 1 s;
    ``inf`` when throttling is off or the setting is unreadable)."""
    try:
        us = int(open("/proc/sys/kernel/sched_rt_runtime_us").read())
    except (OSError, ValueError):
        return math.inf
    return math.inf if us < 0 else us / 1e6


def check_realtime() -> None:
    """Raise PermissionError unless this process may use SCHED_FIFO (tried on itself and
    undone at once)."""
    if not hasattr(os, "SCHED_FIFO"):
        raise PermissionError("realtime=True needs SCHED_FIFO (Linux)")
    try:
        with _realtime(True):
            pass
    except PermissionError:
        raise PermissionError("realtime=True needs the right to use SCHED_FIFO: root, "
                              "CAP_SYS_NICE or an RLIMIT_RTPRIO (ulimit -r) of 1 or more") from None


def realtime_allowed() -> bool:
    """Whether :func:`check_realtime` passes (this process may use SCHED_FIFO)."""
    try:
        check_realtime()
        return True
    except PermissionError:
        return False


def _child_main(role, conn, spec, ppid, opts, config):
    _die_with_parent(ppid)
    child = None
    try:
        child = (_EngineChild if role == "engine" else _SenderChild)(spec, ppid, opts)
        child.warm(config)
        gc.collect()
        gc.freeze()  # what warming left is permanent: later collections skip it
        if not opts["gc_enabled"]:
            gc.disable()  # for the process's life: no collector pause inside a row
        child.beat()
        conn.send(("up", {"pid": os.getpid()}))
        # idle: keep beating (well inside the liveness interval), notice a dead parent; each
        # wake-up preempts whatever spins on that CPU (~100 us here), so not too often
        idle_s = min(0.5, opts["liveness_s"] / 4)
        while True:
            while not conn.poll(idle_s):
                child.beat()
                if not child.alive_parent():
                    return
            msg, job = conn.recv()
            if msg == "stop":
                return
            with _realtime(opts["realtime"]):  # the row only: warming and idling stay normal
                reply = child.run(job)
                reply["sched_fifo"] = os.sched_getscheduler(0) == getattr(os, "SCHED_FIFO", -1)
            conn.send(("ok", reply))
    except BaseException:
        if child is not None and child.raw is not None:
            child.raw[ABORT * _L] = 1 if role == "sender" else 2
        try:
            conn.send(("error", traceback.format_exc()))
        except OSError:
            pass
        raise SystemExit(1) from None
    finally:
        if child is not None:
            child.close()


# --- parent ---------------------------------------------------------------------------------

class PipelineSession:
    """A sender and an engine process, started once, running rows until :meth:`close`.

    ``engine`` is a registered name; ``transport`` ``"python"`` or ``"compiled"`` (see the
    module docstring); ``mode`` the engine loop (``"chunk"``: each drained chunk run in one call
    and published together; ``"command"``: each command run and published on its own; None:
    ``"chunk"`` on the python transport, ``"command"`` on the compiled one, as seed 003
    defines its capacity, "every command published on its own"); ``layout`` the ring's slots
    (``"fields"``: slot arrays published by ``head``, the python transport's; ``"line"``: one
    cache line per slot with its own sequence word, compiled only; None: ``"line"`` on the
    compiled transport); ``realtime`` runs both children under ``SCHED_FIFO`` (priority 1)
    while a row runs, so no ordinary task (a daemon, the parent) preempts them; the kernel's
    interrupts still do (needs root, CAP_SYS_NICE or an RLIMIT_RTPRIO; a hung row still ends:
    every wait in the children is bounded by ``timeout_s``, and the kernel by default keeps
    5% of each second for ordinary tasks, the parent among them);
    ``ring_capacity`` slots in the ring; ``max_take`` the python engine's chunk bound;
    ``timeout_s`` bounds any one wait; ``liveness_s`` is how long a silent peer is given;
    ``check_ms`` how often waits check; ``spin_us`` how long a compiled wait spins before it
    yields the CPU between spins (``math.inf``: spin only; see :mod:`lob.pipeline.compiled`).
    Use as a context manager.
    """

    def __init__(self, engine: str, *, transport: str = "python", config: BookConfig | None = None,
                 mode: str | None = None, layout: str | None = None, gc_enabled: bool = False,
                 realtime: bool = False, ring_capacity: int = 4096,
                 max_take: int | None = None, timeout_s: float = 10.0, liveness_s: float = 2.0,
                 check_ms: float = 10.0, spin_us: float = 50.0,
                 start_timeout_s: float = 600.0):

        mode = default_mode(transport) if mode is None else mode
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        layout = default_layout(transport) if layout is None else layout
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
        if layout == "line" and transport != "compiled":
            raise ValueError("layout 'line' is the compiled transport's (the python one reads "
                             "and writes the ring's fields with numpy calls)")
        if realtime:
            check_realtime()
        if not runs_on(engine, transport):  # unknown names fail here, listing the registered
            raise ValueError(f"transport 'compiled' runs compiled engines only (an @numba one); "
                             f"{engine!r} is a {_backend(engine)} engine")
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
        self._res = None
        self._res_n = 0
        self._procs = {}
        self._conns = {}
        ctx = mp.get_context("spawn")  # no inherited threads or numba state; works in notebooks
        self.ring = SpscRing.create(int(ring_capacity), _slot_fields(layout))
        self.capacity = int(ring_capacity)
        opts = dict(transport=transport, engine=engine, mode=mode, layout=layout,
                    realtime=bool(realtime), gc_enabled=gc_enabled,
                    max_take=int(max_take or ring_capacity), timeout_s=float(timeout_s),
                    liveness_s=float(liveness_s), check_ms=float(check_ms),
                    spin_us=float(spin_us))
        try:
            for role in ("engine", "sender"):
                here, there = ctx.Pipe()
                p = ctx.Process(target=_child_main, name=f"lob-{role}", daemon=True,
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
    def _block(self, n: int):
        if n > self._res_n:
            if self._res is not None:
                self._res.close()
                self._res.unlink()
            self._res = create_shm(_block_size(n), "rows")
            self._res_n = n
        return self._res

    def run(self, commands, *, rate: float, batch: int = 1, pin: tuple | None = None,
            config: BookConfig | None = None, warmup: int = 0, lead_s: float = 0.02):
        """One row: ``commands`` at ``rate`` commands/s (``math.inf``: unpaced) in batches of
        ``batch`` -> :class:`~lob.pipeline.run.PipelineRun`. ``pin=(sender_cpu, engine_cpu)``
        pins the two processes for this row; ``config`` the book (default: the session's)."""

        if self.closed:
            raise PipelineError("the session is closed (a row failed or close() was called)")
        commands = as_commands(commands)
        n = len(commands)
        if n == 0:
            raise ValueError("commands is empty")
        if isinstance(batch, bool) or not isinstance(batch, (int, np.integer)) or batch < 1:
            raise ValueError(f"batch must be an int >= 1, got {batch!r}")
        if not (isinstance(rate, (int, float)) and not isinstance(rate, bool) and rate > 0):
            raise ValueError(f"rate must be a number > 0 (commands/s, or math.inf), got {rate!r}")
        if batch > self.capacity:
            raise ValueError(f"batch ({batch}) must be <= ring_capacity ({self.capacity})")
        rt_budget = realtime_budget_s() if self.realtime else math.inf
        if math.isfinite(rate) and n / rate > 0.9 * rt_budget:
            raise ValueError(f"a row of {n / rate:.2f} s under realtime=True outruns the "
                             f"kernel's real-time budget ({rt_budget:.2f} s of each "
                             "second, /proc/sys/kernel/sched_rt_runtime_us): it would be "
                             "throttled mid-row; run shorter rows")
        config = config or self.config
        res = self._block(n)
        views = _results_views(res.buf, n)
        views[3][:] = commands
        del views
        self._row += 1
        pe, ps = (None, None) if pin is None else (pin[1], pin[0])
        common = dict(row=self._row, res=res.name, n=n)
        self._conns["engine"].send(("row", dict(common, config=config.to_dict(), cpu=pe,
                                                 sender_pid=self._procs["sender"].pid)))
        self._conns["sender"].send(("row", dict(common, rate=float(rate), batch=int(batch),
                                                 cpu=ps, lead_ns=int(lead_s * 1e9),
                                                 engine_pid=self._procs["engine"].pid)))
        budget = 60.0 + 2 * (n / rate if math.isfinite(rate) else 0.0) + self.timeout_s
        msgs = self._wait_all("ok", budget)
        done, due, out = _results_views(res.buf, n)[:3]
        timed = commands["timed"].copy()
        timed[:warmup] = False
        run = PipelineRun(self.engine, float(rate), int(batch), self.mode, due.copy(),
                          done.copy(), timed, out.copy(), tuple(pin) if pin else None,
                          self.gc_enabled, msgs, transport=self.transport, layout=self.layout,
                          realtime=self.realtime)
        del done, due, out
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
        if self._res is not None:
            self._res.close()
            self._res.unlink()
            self._res = None

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
                 liveness_s: float = 2.0, session=None) -> PipelineRun:
    """Run ``commands`` through a sender and an engine process at ``rate`` commands/s.

    ``rate=math.inf`` sends unpaced (every command due at start: the achieved rate is the
    capacity). ``pin=(sender_cpu, engine_cpu)`` pins the two processes. The first ``warmup``
    commands, and any whose ``timed`` flag is False, are left out of the latencies.
    ``transport`` is ``"python"`` or ``"compiled"`` (see the module docstring). With
    ``session`` (a :class:`PipelineSession`) the row runs on its live
    processes (its engine, transport and ring settings apply); without, a session is started
    for this one row and closed after it.
    """
    commands = as_commands(commands)
    if session is not None:
        return session.run(commands, rate=rate, batch=batch, pin=pin, config=config,
                           warmup=warmup, lead_s=lead_s)
    if len(commands) == 0:
        raise ValueError("commands is empty")
    if isinstance(batch, bool) or not isinstance(batch, (int, np.integer)) or batch < 1:
        raise ValueError(f"batch must be an int >= 1, got {batch!r}")
    if not (isinstance(rate, (int, float)) and rate > 0):
        raise ValueError(f"rate must be a number > 0 (commands/s, or math.inf), got {rate!r}")
    if batch > ring_capacity:
        raise ValueError(f"batch ({batch}) must be <= ring_capacity ({ring_capacity})")
    with PipelineSession(engine, transport=transport, config=config, mode=mode, layout=layout,
                         realtime=realtime,
                         gc_enabled=gc_enabled, ring_capacity=ring_capacity, max_take=max_take,
                         timeout_s=timeout_s, liveness_s=liveness_s) as s:
        return s.run(commands, rate=rate, batch=batch, pin=pin, warmup=warmup, lead_s=lead_s)

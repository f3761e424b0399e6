"""The two ways commands cross from the sender process to the engine process, one object each.

A :class:`Transport` is what differs between them: its vocabulary (default engine loop and
ring layout, the layouts and engines it takes, :meth:`Transport.check`) and, inside a child
process, its per-row work: warming, sizing the book, the sender's pacing and publishing
loop, the engine's drain-and-execute loop. Everything else (processes, the row block,
readiness, supervision) is shared (:mod:`lob.pipeline.workers`, :mod:`lob.pipeline.session`).

* :class:`PythonTransport` (``"python"``): Python loops over the ring's
  :class:`~lob.pipeline.ring.Producer` / :class:`~lob.pipeline.ring.Consumer`; the engine
  runs each drained chunk through :func:`~lob.pipeline.run.make_step_runner`. Any engine.
* :class:`CompiledTransport` (``"compiled"``): both loops are numba functions
  (:mod:`lob.pipeline.compiled`) with acquire/release control words and spin waits; the
  engine executes commands from their slots into the shared outcome rows and stamps in-kernel.
  Compiled (``@numba``) engines only.

An instance lives in one child process (``role`` ``"engine"`` or ``"sender"``) and works on
that worker's ring and timing (:class:`~lob.pipeline.workers.Worker`).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from typing import ClassVar

import numpy as np

from lob.pipeline.ring import CONS_BEAT, HEAD, PROD_BEAT, PeerError, RingError, now_ns
from lob.pipeline.rows import compiled_slots, slot_fields
from lob.pipeline.run import make_step_runner
from lob.semantics import COMMAND_DTYPE

__all__ = ["Transport", "PythonTransport", "CompiledTransport", "TRANSPORTS", "transport_class"]

_L = 8  # int64 words per cache line (control word w at raw[w * 8])
_NO_DUE = np.zeros(0, np.int64)  # the compiled sender's "no recorded due times": paced by rate


class Transport(ABC):
    """One transport: its vocabulary (class attributes) and, per child, its row work (the
    abstract methods each transport implements; the others have a default)."""

    name: ClassVar[str] = ""
    default_mode: ClassVar[str] = "chunk"
    default_layout: ClassVar[str] = "fields"
    layouts: ClassVar[tuple[str, ...]] = ("fields",)
    backends: ClassVar[tuple[str, ...] | None] = None  # engine backends it runs (None: any)
    engines: ClassVar[str] = "any engine"  # the same, in words
    layouts_why: ClassVar[str] = ""
    due_times: ClassVar[bool] = False  # sends on per-command due times (``send``'s offsets)

    @classmethod
    def runs(cls, backend: str) -> bool:
        """Whether an engine of ``backend`` can run on this transport."""
        return cls.backends is None or backend in cls.backends

    @classmethod
    def check(cls, engine: str, backend: str, layout: str) -> None:
        """Raise ValueError when ``layout`` or the engine (of ``backend``) is not this one's."""
        if layout not in cls.layouts:
            owners = " or ".join(t.name for t in _CLASSES if layout in t.layouts)
            raise ValueError(f"layout {layout!r} is the {owners} transport's ({cls.layouts_why})")
        if not cls.runs(backend):
            raise ValueError(f"transport {cls.name!r} runs {cls.engines}; {engine!r} is a "
                             f"{backend} engine")

    def __init__(self, worker, role: str):
        self.w = worker
        self.role = role

    # engine side
    @abstractmethod
    def warm_engine(self, eng, cmds, out, done) -> None:
        """Run the warm-up ``cmds`` on ``eng`` the way rows will (compile, load, exercise)."""
        raise NotImplementedError

    def prepare_book(self, eng, n: int) -> None:
        """Size ``eng`` for an ``n``-command row before the engine says it is ready (by
        default nothing: the engine grows as it goes)."""
        return None

    @abstractmethod
    def serve(self, eng, out, done, due, n: int, start_tail: int, peer_pid: int) -> None:
        """Drain ``n`` records from the ring (the first at ``start_tail``; the sender is
        ``peer_pid``): execute, write ``out``, stamp ``done``, copy their ``due`` times."""
        raise NotImplementedError

    # sender side
    def warm_sender(self, cmds) -> None:
        """Exercise the sender's loop once on ``cmds`` (by default nothing: Python code)."""
        return None

    @abstractmethod
    def send(self, cmds, n: int, start: int, period: float, batch: int,
             peer_pid: int, offsets=None) -> int:
        """Publish ``cmds`` in batches, command ``k`` due at ``start + k * period`` (or at
        ``start + offsets[k]`` when given: recorded inter-arrival times) -> the number of
        batches that went out more than 1 ms late."""
        raise NotImplementedError


class PythonTransport(Transport):
    """Python loops over the ring's endpoints; a drained chunk per engine call by default."""

    name = "python"
    default_mode, default_layout, layouts = "chunk", "fields", ("fields",)
    layouts_why = "the python one reads and writes the ring's fields with numpy calls"
    due_times = True
    SUB_MAX = 4096  # a drained chunk runs in parts of ~check_ms (beats between)

    def __init__(self, worker, role: str):
        super().__init__(worker, role)
        o = worker.opts
        kw = dict(timeout_s=o["timeout_s"], liveness_s=o["liveness_s"], check_ms=o["check_ms"])
        if role == "engine":
            self.cons = worker.ring.consumer(**kw)
        else:
            self.prod = worker.ring.producer(**kw)

    def warm_engine(self, eng, cmds, out, done) -> None:
        make_step_runner(eng, self.w.opts["mode"])(cmds, out, done)

    def serve(self, eng, out, done, due, n, start_tail, peer_pid) -> None:
        run = make_step_runner(eng, self.w.opts["mode"])
        cons, max_take, check_ns = self.cons, self.w.opts["max_take"], self.w.check_ns
        pos, sub = 0, self.SUB_MAX
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
                sub = max(1, min(self.SUB_MAX, int((k - j) * check_ns / max(1, t1 - t0))))
                j = k
            pos += m

    def send(self, cmds, n, start, period, batch, peer_pid, offsets=None) -> int:
        prod = self.prod
        due = (start + (np.arange(n, dtype=np.float64) * period).astype(np.int64)
               if offsets is None else start + np.asarray(offsets, dtype=np.int64))
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


class CompiledTransport(Transport):
    """The numba loops of :mod:`lob.pipeline.compiled`; each command published on its own and
    a cache line per slot by default (the definition behind seed 003's capacity)."""

    name = "compiled"
    default_mode, default_layout, layouts = "command", "line", ("fields", "line")
    backends = ("numba",)
    engines = "compiled engines only (an @numba one)"
    due_times = True

    def _timing(self, peer_pid: int) -> tuple:
        w = self.w
        return (w.check_ns, w.liveness_ns, w.timeout_ns, w.ppid, peer_pid, w.spin_ns)

    def _private_ring(self, n: int, peer_beat: int) -> tuple:
        """A private header (the peer's beat far ahead) and ``n`` slots in this layout."""
        raw = np.zeros_like(self.w.raw)
        raw[peer_beat * _L] = now_ns() + 10**12
        return raw, {k: np.zeros(n, dt) for k, dt in slot_fields(self.w.opts["layout"]).items()}

    def warm_engine(self, eng, cmds, out, done) -> None:
        if not hasattr(eng, "kernel_state"):
            raise TypeError(f"transport 'compiled' needs a compiled engine (an @numba one), "
                            f"got {self.w.opts['engine']!r}")
        n = len(cmds)
        raw, slots = self._private_ring(n, PROD_BEAT)
        raw[HEAD * _L] = n
        if "line" in slots:  # every slot filled and published (sequence word = count)
            slots["line"]["seq"] = np.arange(1, n + 1)
            slots["line"]["cmd"] = cmds
        else:
            slots["cmd"][:] = cmds
        self._drain(eng, raw, compiled_slots(slots, self.w.opts["layout"]), out, done,
                    np.zeros(n, np.int64), n, 0)

    def prepare_book(self, eng, n) -> None:
        # size the book for the row before saying ready, as a live engine would: the id
        # index for n ids, the node pool and fill buffer for up to n resting orders
        # (capped at 2**20), so no array is copied (~ms) in the middle of the row
        eng.reserve(n, min(n, 1 << 20))

    def serve(self, eng, out, done, due, n, start_tail, peer_pid) -> None:
        w = self.w
        self._drain(eng, w.raw, compiled_slots(w.ring.slots, w.opts["layout"]), out, done,
                    due, n, peer_pid)

    def _drain(self, eng, raw, slots, out, done, due, n, peer_pid) -> None:
        from lob.pipeline.compiled import GROW, OK, STATUS, engine_row

        opts = self.w.opts
        state = eng.kernel_state()
        durs = np.zeros(0, np.int64)
        take = 1 if opts["mode"] == "command" else opts["max_take"]
        # the line layout runs the commands from a private copy of their words
        scratch = np.zeros(take if opts["layout"] == "line" else 0, COMMAND_DTYPE)
        pos = 0
        while True:
            pos, st = engine_row(raw, *slots, scratch, out, done, due, pos, n, take, state,
                                 durs, *self._timing(peer_pid))
            if st >= GROW:
                state = eng.kernel_state(st - GROW)
                continue
            if st != OK:
                raise PeerError(f"engine: stopped after {pos} of {n} commands: {STATUS[st]}")
            return

    def warm_sender(self, cmds) -> None:
        from lob.pipeline.compiled import OK, STATUS, send_row

        n = len(cmds)
        for offs in (_NO_DUE, np.zeros(n, np.int64)):  # both ways of pacing, each on an
            raw, slots = self._private_ring(n, CONS_BEAT)  # empty ring (a full one waits)
            k, st, _ = send_row(raw, cmds, offs, *compiled_slots(slots, self.w.opts["layout"]),
                                0, n, now_ns(), 0.0, 7, *self._timing(0))
            if st != OK or k != n:
                raise RingError(f"sender warm-up: stopped after {k} of {n} commands: "
                                f"{STATUS[st]}")

    def send(self, cmds, n, start, period, batch, peer_pid, offsets=None) -> int:
        from lob.pipeline.compiled import OK, STATUS, send_row

        w = self.w
        offs = _NO_DUE if offsets is None else np.ascontiguousarray(offsets, dtype=np.int64)
        k, st, late = send_row(w.raw, cmds, offs,
                               *compiled_slots(w.ring.slots, w.opts["layout"]), 0,
                               n, start, period, batch, *self._timing(peer_pid))
        if st != OK:
            raise PeerError(f"sender: stopped after {k} of {n} commands: {STATUS[st]}")
        return late


_CLASSES = (PythonTransport, CompiledTransport)
TRANSPORTS = tuple(t.name for t in _CLASSES)


def transport_class(name: str) -> type[Transport]:
    """The transport called ``name``; ValueError naming the transports otherwise."""
    for t in _CLASSES:
        if t.name == name:
            return t
    raise ValueError(f"transport must be one of {TRANSPORTS}, got {name!r}")

"""The two child processes of a pipeline session: the sender and the engine.

Each child (:func:`child_main`, started by spawn) attaches the ring, dies with its parent
(``PR_SET_PDEATHSIG``, and a parent-pid check in every wait), warms its transport's code
paths, freezes what warming left for the garbage collector (and disables it unless asked
not to), then serves jobs from its pipe: ``("row", job)`` runs one row, ``("stop", None)``
ends. While idle it keeps beating (well inside the liveness interval). A failure sets the
ring's abort word (so the peer stops at its next check) and sends the traceback back.

A row, engine side: map the row block, fault its pages in, build a fresh book, pin, let the
transport size the book, beat and say ready (the ring's ``READY`` word = the row id), serve
the row, check that exactly ``n`` records were consumed. Sender side: map the commands, pin,
wait for ``READY``, fix the start time, let the transport pace and publish. Rows run under
``SCHED_FIFO`` when the session asked for ``realtime`` (warming and idling never do).
"""

from __future__ import annotations

import gc
import math
import os
import time
import traceback

import numpy as np

from lob import system
from lob.pipeline.ring import (
    ABORT,
    ABORT_CONSUMER,
    ABORT_PRODUCER,
    CONS_BEAT,
    CONS_PID,
    PROD_BEAT,
    PROD_PID,
    READY,
    START_NS,
    TAIL,
    PeerError,
    RingError,
    SpscRing,
    now_ns,
)
from lob.pipeline.rows import MappedRows
from lob.pipeline.run import warmup_commands
from lob.pipeline.transports import transport_class
from lob.semantics import OUTCOME_DTYPE, BookConfig

__all__ = ["Worker", "EngineWorker", "SenderWorker", "child_main"]

_L = 8  # int64 words per cache line (control word w at raw[w * 8])


class Worker:
    """What the two children share: the ring, the row block, the transport, pinning, beats."""

    role = ""
    beat_word = pid_word = 0

    def __init__(self, spec, ppid: int, opts: dict):
        self.ring = SpscRing.attach(spec)
        self.raw = self.ring.raw
        self.ppid = ppid
        self.opts = opts
        self.rows = MappedRows()
        self.all_cpus = system.allowed_cpus()
        ns = lambda s: int(s * 1e9)  # noqa: E731
        self.check_ns = ns(opts["check_ms"] / 1e3)
        self.liveness_ns, self.timeout_ns = ns(opts["liveness_s"]), ns(opts["timeout_s"])
        self.spin_ns = ns(min(opts["spin_us"], 1e9) / 1e6)
        self.raw[self.pid_word * _L] = os.getpid()
        self.transport = transport_class(opts["transport"])(self, self.role)

    def beat(self) -> None:
        self.raw[self.beat_word * _L] = now_ns()

    def alive_parent(self) -> bool:
        return os.getppid() == self.ppid

    def pin(self, cpu: int | None) -> list[int]:
        return system.pin(cpu, default=self.all_cpus)

    def close(self) -> None:
        self.rows.close()
        self.ring.close()


class EngineWorker(Worker):
    """The engine: a fresh book per row, fed from the ring, outcomes into the row block."""

    role, beat_word, pid_word = "engine", CONS_BEAT, CONS_PID

    def __init__(self, spec, ppid, opts):
        super().__init__(spec, ppid, opts)
        from lob.engines.registry import get_engine

        self.get_engine = get_engine

    def warm(self, config: dict) -> None:
        """Compile / load and exercise the code paths once, on a private book and ring."""
        cfg = BookConfig.from_dict(config)
        if cfg.width > 1000:  # the code paths, not the band, need warming (a wide book is slow)
            cfg = BookConfig(cfg.min_price, cfg.min_price + 999, cfg.stp)
        wc = warmup_commands(cfg)
        out, done = np.zeros(len(wc), OUTCOME_DTYPE), np.zeros(len(wc), np.int64)
        self.transport.warm_engine(self.get_engine(self.opts["engine"], cfg), wc, out, done)

    def run(self, job: dict) -> dict:
        n = job["n"]
        done, due, out, _ = self.rows.views(job["res"], n)
        done[:] = 0  # map the pages now, not as page faults inside the timed loop
        due[:] = 0
        out.view(np.uint8)[:] = 0
        eng = self.get_engine(self.opts["engine"], BookConfig.from_dict(job["config"]))
        affinity = self.pin(job["cpu"])
        self.transport.prepare_book(eng, n)
        start_tail = int(self.raw[TAIL * _L])
        self.beat()  # building the book took a while: fresh beat, then ready
        self.raw[READY * _L] = job["row"]
        self.transport.serve(eng, out, done, due, n, start_tail, job["sender_pid"])
        end_tail = int(self.raw[TAIL * _L])
        if end_tail - start_tail != n:
            raise RingError(f"engine: consumed {end_tail - start_tail} records, expected {n}")
        return {"affinity": affinity, "grows": dict(getattr(eng, "grows", {}))}


class SenderWorker(Worker):
    """The sender: paces the row block's commands into the ring once the engine is ready."""

    role, beat_word, pid_word = "sender", PROD_BEAT, PROD_PID

    def warm(self, config: dict) -> None:
        self.transport.warm_sender(warmup_commands(BookConfig.from_dict(config)))

    def _wait_ready(self, row: int) -> None:
        t0 = time.monotonic()
        while int(self.raw[READY * _L]) != row:
            self.beat()
            if self.raw[ABORT * _L]:
                raise PeerError("sender: aborted before the row started")
            if time.monotonic() - t0 > max(60.0, self.opts["timeout_s"]):
                raise RingError("sender: the engine did not get ready for the row")
            time.sleep(20e-6)

    def run(self, job: dict) -> dict:
        n, rate, batch = job["n"], job["rate"], job["batch"]
        cmds = self.rows.views(job["res"], n).cmds
        int(cmds.view(np.uint8)[::4096].sum())  # map the pages before the timed loop
        affinity = self.pin(job["cpu"])
        self._wait_ready(job["row"])
        start = now_ns() + job["lead_ns"]
        self.raw[START_NS * _L] = start
        period = 1e9 / rate if math.isfinite(rate) else 0.0
        late = self.transport.send(cmds, n, start, period, batch, job["engine_pid"],
                                   offsets=job.get("due_ns"))
        return {"affinity": affinity, "late_batches_1ms": int(late), "start_ns": int(start)}


def child_main(role: str, conn, spec, ppid: int, opts: dict, config: dict) -> None:
    """A child's life (the target of the session's processes): warm, report up, serve rows."""
    system.die_with_parent(ppid)
    child = None
    try:
        child = (EngineWorker if role == "engine" else SenderWorker)(spec, ppid, opts)
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
            with system.sched_fifo(opts["realtime"]):  # the row only, not warming or idling
                reply = child.run(job)
                reply["sched_fifo"] = system.on_fifo()
            conn.send(("ok", reply))
    except BaseException:
        if child is not None and child.raw is not None:
            child.raw[ABORT * _L] = ABORT_PRODUCER if role == "sender" else ABORT_CONSUMER
        try:
            conn.send(("error", traceback.format_exc()))
        except OSError:
            pass
        raise SystemExit(1) from None
    finally:
        if child is not None:
            child.close()

"""A single-producer single-consumer ring of numpy records over ``multiprocessing.shared_memory``.

Layout
------
One shared block: a header of int64 control words, each on its own 64-byte cache line (so
the producer's ``head`` and the consumer's ``tail`` never share a line), then one array of
``capacity`` slots per field (a ring carries parallel fields, e.g. a command record and its
due time). ``head`` counts records ever published, ``tail`` records ever consumed; both only
grow, slot = count % capacity, so full is ``head - tail == capacity`` and empty is
``head == tail`` without a wasted slot.

Publish ordering (the memory-model assumption)
----------------------------------------------
The producer writes the slots, *then* stores the new ``head``; the consumer loads ``head``,
*then* reads the slots, *then* stores the new ``tail``. Each step is a separate numpy call
(an opaque C call the compiler cannot reorder across), and each control word is an aligned
8-byte store, which is atomic on x86-64. x86-64 is TSO: stores become visible to other cores
in program order and loads are not reordered with older loads, so a consumer that sees the
new ``head`` sees the records written before it. On a weakly ordered CPU (ARM, POWER) this
would need release/acquire fences that pure Python cannot issue; :func:`check_platform`
warns there. Only one process writes each control word, so no read-modify-write is needed.

Liveness and bounded waits
--------------------------
Every wait (for space, for data, for the peer to attach) spins with ``os.sched_yield`` and,
every ``check_ms``, refreshes its own heartbeat and checks the peer: an ``abort`` word set
by the peer, a peer pid that is gone or a zombie (a killed process), or a peer heartbeat
older than ``liveness_s`` (a hung or stopped process) all raise :class:`PeerError`; a wait
longer than ``timeout_s`` raises :class:`RingTimeout`. Nothing waits forever.

Names and leftovers
-------------------
Every shared block lob creates is named ``lob_<owner pid>_<random>_<tag>`` (see
:func:`create_shm`). A process group killed outright (``kill -9`` of the whole group, the
resource tracker included) leaves its blocks in ``/dev/shm``; :func:`clean_stale`, run by
every pipeline session at start, unlinks those whose owner pid is gone. The pipeline creates
no semaphores (its processes talk over pipes), so nothing else can be left behind.
"""

from __future__ import annotations

import os
import platform
import re
import secrets
import time
import warnings
from dataclasses import dataclass
from multiprocessing import resource_tracker, shared_memory

import numpy as np

from lob.system import pid_alive

__all__ = ["LINE_DTYPE", "RingSpec", "SpscRing", "Producer", "Consumer", "RingError", "PeerError",
           "RingTimeout", "check_platform", "create_shm", "attach_shm", "clean_stale"]

_LINE = 8  # int64 words per 64-byte cache line
# control words, one per cache line (READY: the row id the engine is ready for)
HEAD, TAIL, PROD_BEAT, CONS_BEAT, CLOSED, ABORT, PROD_PID, CONS_PID, START_NS, READY = range(10)
_NWORDS = 10
_HEADER_BYTES = _NWORDS * _LINE * 8
ABORT_PRODUCER, ABORT_CONSUMER, ABORT_PARENT = 1, 2, 3
_ABORTER = {ABORT_PRODUCER: "producer", ABORT_CONSUMER: "consumer", ABORT_PARENT: "parent"}
SHM_DIR = "/dev/shm"
_NAME = re.compile(r"^(?:sem\.)?lob_(\d+)_[0-9a-f]+_\w+$")

now_ns = time.perf_counter_ns  # CLOCK_MONOTONIC on Linux: one clock for every process


def _line_dtype() -> np.dtype:
    from lob.semantics import COMMAND_DTYPE

    dt = np.dtype([("seq", "<i8"), ("due", "<i8"), ("cmd", COMMAND_DTYPE), ("pad", "<i8")])
    assert dt.itemsize == 64 and COMMAND_DTYPE.itemsize % 8 == 0
    return dt


# the compiled transport's "line" layout: one 64-byte cache line per slot, holding the slot's
# sequence word (the count of records published once the slot is filled), the command's due
# time and the command (see lob.pipeline.compiled)
LINE_DTYPE = _line_dtype()


class RingError(RuntimeError):
    """Base class of ring failures."""


class PeerError(RingError):
    """The other side died, hung, or aborted."""


class RingTimeout(RingError):
    """A bounded wait ran out."""


def check_platform() -> None:
    """Warn when the CPU is not known to be TSO (the publish ordering relies on it)."""
    if platform.machine().lower() not in ("x86_64", "amd64", "i686", "i386"):
        warnings.warn(f"SpscRing relies on x86 TSO store ordering; {platform.machine()} is "
                      "weakly ordered, records may be read before they are visible",
                      RuntimeWarning, stacklevel=2)


_pid_alive = pid_alive  # the name the tests and older callers use


def shm_name(tag: str) -> str:
    """``lob_<this pid>_<random>_<tag>``: the owner can be found from the name."""
    return f"lob_{os.getpid()}_{secrets.token_hex(4)}_{tag}"


def create_shm(size: int, tag: str) -> shared_memory.SharedMemory:
    """A new shared block named after this process (see :func:`clean_stale`)."""
    return shared_memory.SharedMemory(name=shm_name(tag), create=True, size=max(1, size))


def attach_shm(name: str) -> shared_memory.SharedMemory:
    """Map a block created by another process, without adopting it."""
    # Python < 3.13 registers attached blocks with this process's resource tracker. A
    # multiprocessing child shares its parent's tracker (fd already set), where the
    # owner's unlink clears the entry; a process with a tracker of its own would unlink
    # the owner's block at exit, so there the registration is undone.
    own_tracker = getattr(resource_tracker._resource_tracker, "_fd", None) is None
    shm = shared_memory.SharedMemory(name=name)
    if own_tracker:
        resource_tracker.unregister(shm._name, "shared_memory")
    return shm


def clean_stale(shm_dir: str = SHM_DIR) -> list[str]:
    """Unlink the ``lob_<pid>_*`` blocks (and ``sem.lob_<pid>_*`` semaphores) whose owner
    process is gone; returns their names. Blocks of live owners are left alone."""
    removed = []
    try:
        names = os.listdir(shm_dir)
    except OSError:  # no /dev/shm (not Linux)
        return removed
    for name in names:
        m = _NAME.match(name)
        if m is None or pid_alive(int(m.group(1))):
            continue
        try:
            os.unlink(os.path.join(shm_dir, name))
            removed.append(name)
        except OSError:
            pass
    return removed


@dataclass(frozen=True)
class RingSpec:
    """What another process needs to attach: block name, capacity and field dtypes."""

    name: str
    capacity: int
    fields: tuple  # ((name, dtype descr), ...)


class SpscRing:
    """The shared block: header words plus one slot array per field.

    ``SpscRing.create(capacity, {"cmd": COMMAND_DTYPE, "due": np.int64})`` in the owner;
    ``SpscRing.attach(ring.spec)`` in the other processes; then one :class:`Producer` and
    one :class:`Consumer` endpoint (``ring.producer()``, ``ring.consumer()``).
    """

    def __init__(self, shm: shared_memory.SharedMemory, spec: RingSpec, owner: bool):
        self._shm, self.spec, self._owner = shm, spec, owner
        buf = shm.buf
        self.raw = np.ndarray((_NWORDS * _LINE,), np.int64, buf, 0)  # word w at raw[w * 8]
        self.hdr = self.raw[::_LINE]
        self.slots: dict[str, np.ndarray] = {}
        off = _HEADER_BYTES
        for fname, descr in spec.fields:
            dt = np.dtype(descr)
            self.slots[fname] = np.ndarray((spec.capacity,), dt, buf, off)
            off += -(-spec.capacity * dt.itemsize // 64) * 64  # keep each array line-aligned
        self.capacity = spec.capacity

    @staticmethod
    def _size(capacity: int, fields) -> int:
        return _HEADER_BYTES + sum(-(-capacity * np.dtype(d).itemsize // 64) * 64
                                   for _, d in fields)

    @classmethod
    def create(cls, capacity: int, fields: dict) -> SpscRing:
        """A new zeroed ring of ``capacity`` slots (>= 1) with the given field dtypes."""
        if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)):
            raise TypeError(f"capacity must be an int, got {type(capacity).__name__}")
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        if not fields:
            raise ValueError("fields must name at least one field")
        check_platform()
        descr = tuple((str(k), np.dtype(v).descr if np.dtype(v).names else np.dtype(v).str)
                      for k, v in fields.items())
        shm = create_shm(cls._size(int(capacity), descr), "ring")
        spec = RingSpec(shm.name, int(capacity), descr)
        ring = cls(shm, spec, owner=True)
        ring.hdr[:] = 0
        return ring

    @classmethod
    def attach(cls, spec: RingSpec) -> SpscRing:
        """Map an existing ring created by another process."""
        return cls(shm=attach_shm(spec.name), spec=spec, owner=False)

    def producer(self, **kw) -> Producer:
        return Producer(self, **kw)

    def consumer(self, **kw) -> Consumer:
        return Consumer(self, **kw)

    @property
    def head(self) -> int:
        return int(self.hdr[HEAD])

    @property
    def tail(self) -> int:
        return int(self.hdr[TAIL])

    def close(self) -> None:
        """Unmap (and, in the owner, unlink) the block; views taken from it become invalid."""
        self.hdr = self.raw = None
        self.slots = {}
        try:
            self._shm.close()
        except BufferError:  # a caller still holds a view; the mapping goes with the process
            pass
        if self._owner:
            try:
                self._shm.unlink()
            except FileNotFoundError:
                pass

    def __enter__(self) -> SpscRing:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Endpoint:
    _me_beat = _peer_beat = _me_pid = _peer_pid = 0
    _me_abort = _role = 0
    role = ""

    def __init__(self, ring: SpscRing, *, timeout_s: float = 10.0, liveness_s: float = 2.0,
                 check_ms: float = 10.0):
        self.ring = ring
        self.hdr = ring.hdr
        self.cap = ring.capacity
        self.timeout_ns = int(timeout_s * 1e9)
        self.liveness_ns = int(liveness_s * 1e9)
        self.check_ns = int(check_ms * 1e6)
        self.hdr[self._me_pid] = os.getpid()
        self.beat()

    def beat(self, t: int | None = None) -> None:
        """Refresh this side's heartbeat (every wait does it; long work should too)."""
        self.hdr[self._me_beat] = now_ns() if t is None else t

    def abort(self) -> None:
        """Tell the peer this side failed, so it stops at its next check."""
        if self.hdr is not None:
            self.hdr[ABORT] = self._me_abort

    def check_peer(self, t: int | None = None) -> None:
        """Raise :class:`PeerError` if the peer aborted, died or stopped beating."""
        hdr = self.hdr
        t = now_ns() if t is None else t
        ab = int(hdr[ABORT])
        if ab and ab != self._me_abort:
            raise PeerError(f"{self.role}: the {_ABORTER.get(ab, self._peer_name)} aborted")
        pid = int(hdr[self._peer_pid])
        if pid == 0:
            return  # not attached yet: only the wait's own timeout applies
        if not pid_alive(pid):
            raise PeerError(f"{self.role}: the {self._peer_name} (pid {pid}) died")
        age = t - int(hdr[self._peer_beat])
        if age > self.liveness_ns:
            raise PeerError(f"{self.role}: no heartbeat from the {self._peer_name} (pid {pid}) "
                            f"for {age / 1e9:.2f} s (hung or stopped)")

    def _wait(self, ready, what: str, timeout_ns: int | None = None) -> None:
        """Spin (yielding the CPU) until ``ready()``; bounded, checking the peer as it goes."""
        if ready():
            return
        t0 = now_ns()
        limit = self.timeout_ns if timeout_ns is None else timeout_ns
        nxt = t0 + self.check_ns
        while not ready():
            t = now_ns()
            if t >= nxt:
                self.beat(t)
                try:
                    self.check_peer(t)
                except PeerError:
                    if ready():  # e.g. the producer closed the stream, then exited
                        return
                    raise
                if t - t0 > limit:
                    raise RingTimeout(f"{self.role}: waited {limit / 1e9:.1f} s for {what}")
                nxt = t + self.check_ns
            os.sched_yield()

    def wait_for_peer(self, timeout_s: float = 60.0) -> None:
        """Wait until the peer has attached (its pid is written)."""
        self._wait(lambda: self.hdr[self._peer_pid] != 0, f"the {self._peer_name} to attach",
                   int(timeout_s * 1e9))


class Producer(_Endpoint):
    """The writing side: :meth:`publish` batches, :meth:`close` when done."""

    role, _peer_name = "producer", "consumer"
    _me_beat, _peer_beat, _me_pid, _peer_pid = PROD_BEAT, CONS_BEAT, PROD_PID, CONS_PID
    _me_abort = ABORT_PRODUCER

    def publish(self, **fields: np.ndarray) -> None:
        """Write one batch (equal-length arrays per field) and publish it with one ``head`` store.

        Waits (bounded) while the ring lacks room: a full ring is back-pressure, never an
        overwrite. A batch larger than the capacity raises ``ValueError``.
        """
        hdr, cap = self.hdr, self.cap
        n = len(next(iter(fields.values())))
        if n > cap:
            raise ValueError(f"batch of {n} records exceeds the ring capacity {cap}")
        head = int(hdr[HEAD])
        if head + n - int(hdr[TAIL]) > cap:
            self._wait(lambda: head + n - hdr[TAIL] <= cap, f"room for {n} records")
        i = head % cap
        k = min(n, cap - i)  # records before the wrap
        slots = self.ring.slots
        for name, arr in fields.items():
            s = slots[name]
            s[i:i + k] = arr[:k]
            if k < n:
                s[:n - k] = arr[k:]
        hdr[HEAD] = head + n  # publish: after the data (TSO keeps the order)
        hdr[PROD_BEAT] = now_ns()  # a steady producer never waits, so it beats here

    def free(self) -> int:
        """Slots free right now."""
        return self.cap - int(self.hdr[HEAD] - self.hdr[TAIL])

    def close(self) -> None:
        """No more records: the consumer's :meth:`Consumer.take` returns empty after draining."""
        self.hdr[CLOSED] = 1


class Consumer(_Endpoint):
    """The reading side: :meth:`take` copies out up to ``max_n`` records and frees their slots."""

    role, _peer_name = "consumer", "producer"
    _me_beat, _peer_beat, _me_pid, _peer_pid = CONS_BEAT, PROD_BEAT, CONS_PID, PROD_PID
    _me_abort = ABORT_CONSUMER

    def available(self) -> int:
        return int(self.hdr[HEAD] - self.hdr[TAIL])

    def take(self, max_n: int | None = None, *, block: bool = True) -> tuple[int, dict]:
        """``(first_index, {field: copy})`` of up to ``max_n`` contiguous records.

        ``first_index`` is the stream position of the first record. Blocks (bounded) until a
        record arrives; returns 0 records once the producer has closed and the ring is drained
        (or at once when ``block=False`` and nothing is there).
        """
        hdr, cap = self.hdr, self.cap
        tail = int(hdr[TAIL])
        if hdr[HEAD] == tail and block:
            self._wait(lambda: hdr[HEAD] != tail or hdr[CLOSED], "records")
        head = int(hdr[HEAD])  # load head before the slots (TSO: loads stay in order)
        i = tail % cap
        n = min(head - tail, cap - i, cap if max_n is None else max_n)
        out = {name: s[i:i + n].copy() for name, s in self.ring.slots.items()}
        hdr[TAIL] = tail + n  # release the slots only after copying them out
        hdr[CONS_BEAT] = now_ns()
        return tail, out

    @property
    def closed(self) -> bool:
        return bool(self.hdr[CLOSED]) and self.available() == 0

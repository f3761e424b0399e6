"""The compiled transport's two loops: the sender's pacing + publish loop and the engine's
drain + execute loop, each one numba function over the shared ring.

Both work on the ring of :mod:`lob.pipeline.ring`: ``H`` is the raw int64 header (control word
``w`` at ``H[w * 8]``, one per cache line). The slots come in two layouts:

* ``"fields"``: the Python transport's, ``slot_cmd`` / ``slot_due`` arrays published by the
  ``head`` word. A command crosses from the sender's core to the engine's in two cache
  lines at least: ``head``'s, then its slot's (a 40-byte record straddles two lines at some
  slots);
* ``"line"``: one 64-byte line per slot (:data:`LINE_DTYPE`: a sequence word, the due time,
  the command). The sender fills the line and releases its sequence word; the engine waits on
  that word, so the command arrives with the line that says it is there.

Control and sequence words are read with :func:`~lob.pipeline.atomics.load_acquire` and
written with :func:`~lob.pipeline.atomics.store_release`; each side keeps a private copy of
the other's counter and reloads it only when its copy says "full" (sender) or "empty"
(engine), so the counters' cache lines move between cores only when they must.

Waits spin with :func:`~lob.pipeline.atomics.cpu_pause`; the sender's wait for room and the
engine's wait for commands are one function, :func:`wait_for`. A wait that has spun for
``spin_ns`` without progress (and a sender whose next due time is more than ``spin_ns`` away)
calls ``sched_yield`` instead of pausing: on a dedicated core that returns at once (the wait stays
a spin, a few hundred ns per turn), on a shared machine it lets the other runnable tasks have
the CPU instead of burning the time slice the scheduler would then take back in the middle
of a busy stretch. Every ``check_ns`` (read off the
clock every 64 spins, or after each command) a side refreshes its heartbeat and checks: the
abort word, its parent (``getppid``), the peer's heartbeat age and the peer's pid. Any of
them makes the loop return a status, so a failure reaches Python (and the caller) within
about ``liveness_ns``. The engine refreshes its heartbeat after commands too, so a long
unpaced backlog (no waiting at all) is never mistaken for a hang.

Both loops read the one clock the engine stamps with
(:func:`lob.engines.compiled.clock.monotonic_ns`, ``CLOCK_MONOTONIC``, the clock behind
Python's ``time.perf_counter_ns`` on Linux).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from lob.engines.compiled.clock import monotonic_ns
from lob.engines.compiled.entry import run_state
from lob.pipeline.atomics import (
    cpu_pause,
    getppid,
    load_acquire,
    pid_alive,
    sched_yield,
    store_release,
)
from lob.pipeline.ring import ABORT, CONS_BEAT, HEAD, LINE_DTYPE, PROD_BEAT, TAIL
from lob.semantics import COMMAND_DTYPE

__all__ = ["send_row", "engine_row", "OK", "ABORTED", "PARENT_GONE", "PEER_STALE",
           "PEER_DEAD", "TIMEOUT", "GROW", "STATUS"]

# what a loop returns (GROW + code: the engine needs kernel_state(code) and a re-entry)
OK, ABORTED, PARENT_GONE, PEER_STALE, PEER_DEAD, TIMEOUT = 0, 1, 2, 3, 4, 5
GROW = 100
STATUS = {OK: "done", ABORTED: "aborted (the other side or the parent gave up)",
          PARENT_GONE: "the parent process is gone",
          PEER_STALE: "no heartbeat from the peer (hung or stopped)",
          PEER_DEAD: "the peer process died", TIMEOUT: "a bounded wait ran out"}

_L = 8  # int64 words per cache line
_SPIN_CHECK = 63  # read the clock every 64 spins
# the line ring as int64 words: per slot, the sequence word, the due time, the command's words
_W = LINE_DTYPE.itemsize // 8
_CW = COMMAND_DTYPE.itemsize // 8


@njit(cache=True)
def check(H, me_beat, peer_beat, t, liveness_ns, ppid, peer_pid):
    """Beat, then look at the abort word, the parent, the peer's heartbeat and pid."""
    store_release(H, me_beat * _L, t)
    if load_acquire(H, ABORT * _L) != 0:
        return ABORTED
    if ppid > 0 and getppid() != ppid:
        return PARENT_GONE
    if t - load_acquire(H, peer_beat * _L) > liveness_ns:
        return PEER_STALE
    if peer_pid > 0 and not pid_alive(peer_pid):
        return PEER_DEAD
    return OK


@njit(cache=True, inline="always")
def wait_for(H, W, word, target, t, nxt, me_beat, peer_beat, check_ns, liveness_ns, timeout_ns,
             ppid, peer_pid, spin_ns):
    """Spin until word ``W[word * 8]`` reaches ``target`` (a control word of the header ``H``,
    or a slot's sequence word of the line ring; both only grow), from
    time ``t`` with the next :func:`check` due at ``nxt``: a pause between loads, a
    ``sched_yield`` once ``spin_ns`` have passed; the clock read every 64 spins (every spin
    once yielding); :data:`TIMEOUT` after ``timeout_ns``.

    Returns ``(value, t, nxt, status)``: the word's last value, the last clock reading, the
    next check time and :data:`OK` once it is reached (else why the wait gave up).
    """
    v = load_acquire(W, word * _L)
    spins = 0
    t0 = t
    lazy = False
    while v < target:
        if lazy:
            sched_yield()
        else:
            cpu_pause()
        spins += 1
        if lazy or spins & _SPIN_CHECK == 0:
            t = monotonic_ns()
            lazy = t - t0 > spin_ns
            if t >= nxt:
                st = check(H, me_beat, peer_beat, t, liveness_ns, ppid, peer_pid)
                if st != OK:
                    return v, t, nxt, st
                if t - t0 > timeout_ns:
                    return v, t, nxt, TIMEOUT
                nxt = t + check_ns
        v = load_acquire(W, word * _L)
    return v, t, nxt, OK


@njit(cache=True, inline="always")
def _due(start, offs, k, period):
    """Command ``k``'s due time: ``start + offs[k]`` (recorded due times), else the rate's."""
    if offs.size > 0:
        return start + offs[k]
    return start + np.int64(k * period)


@njit(cache=True)
def send_row(H, cmds, offs, slot_cmd, slot_due, Lw, k0, n, start, period, batch, check_ns,
             liveness_ns, timeout_ns, ppid, peer_pid, spin_ns):
    """Publish ``cmds[k0:n]`` in batches of ``batch``, command ``k`` due at
    ``start + int64(k * period)`` (``period`` = 1e9 / rate, 0 = unpaced), or at
    ``start + offs[k]`` when ``offs`` (int64, ns, one per command) is not empty: recorded
    inter-arrival times; a batch goes out when its last command is due, each slot carrying its
    own due time.

    The slots are ``slot_cmd`` / ``slot_due`` (layout ``"fields"``: published by the release
    store of ``head``), or, when ``Lw`` is not empty, the line ring's words (layout
    ``"line"``: each slot's due time and command written into its own cache line, then its
    sequence word released; ``head`` is still stored, for the record).

    Returns ``(next k, status, late_batches_1ms)``; status :data:`OK` when all are sent.
    """
    line = Lw.size > 0
    cap = Lw.size // _W if line else slot_due.size
    cw = cmds.view(np.int64)  # the command records as words (the line ring copies words)
    head = H[HEAD * _L]  # only this side writes head
    tail = load_acquire(H, TAIL * _L)
    t = monotonic_ns()
    nxt = t + check_ns
    late = 0
    k = k0
    while k < n:
        m = min(batch, n - k)
        t_due = _due(start, offs, k + m - 1, period)
        # pace: spin until the batch's last command is due
        t = monotonic_ns()
        while t < t_due:
            if t >= nxt:
                st = check(H, PROD_BEAT, CONS_BEAT, t, liveness_ns, ppid, peer_pid)
                if st != OK:
                    return k, st, late
                nxt = t + check_ns
            if t_due - t > spin_ns:
                sched_yield()
            else:
                cpu_pause()
            t = monotonic_ns()
        if t - t_due > 1_000_000:
            late += 1
        # room: back-pressure, never overwrite
        if head + m - tail > cap:
            tail, t, nxt, st = wait_for(H, H, TAIL, head + m - cap, t, nxt, PROD_BEAT, CONS_BEAT,
                                        check_ns, liveness_ns, timeout_ns, ppid, peer_pid,
                                        spin_ns)
            if st != OK:
                return k, st, late
        if line:
            for j in range(m):
                b = ((head + j) % cap) * _W
                Lw[b + 1] = _due(start, offs, k + j, period)
                for w in range(_CW):
                    Lw[b + 2 + w] = cw[(k + j) * _CW + w]
            for j in range(m):  # publish: each slot's sequence word, after all the writes
                store_release(Lw, ((head + j) % cap) * _W, head + j + 1)
        else:
            for j in range(m):
                s = (head + j) % cap
                slot_cmd[s] = cmds[k + j]
                slot_due[s] = _due(start, offs, k + j, period)
        head += m
        store_release(H, HEAD * _L, head)  # publish (layout fields): after the slot writes
        k += m
        if t >= nxt:
            st = check(H, PROD_BEAT, CONS_BEAT, t, liveness_ns, ppid, peer_pid)
            if st != OK:
                return k, st, late
            nxt = t + check_ns
    store_release(H, PROD_BEAT * _L, monotonic_ns())
    return k, OK, late


@njit(cache=True)
def engine_row(H, slot_cmd, slot_due, Lw, scratch, out, done, due, pos, n, take, state, durs,
               check_ns, liveness_ns, timeout_ns, ppid, peer_pid, spin_ns):
    """Drain ``n - pos`` records: run the commands from their slots into ``out[pos:]`` (on the
    book ``state``, a compiled engine's ``kernel_state()``, through
    :func:`lob.engines.compiled.entry.run_state`: one specialisation of this loop per
    layout), stamp ``done`` right after, copy their due times, then free the slots (one
    release store of ``tail``).

    Layout ``"fields"`` (``Lw`` empty): wait for ``head`` to move past ``tail``, then run the
    commands straight from ``slot_cmd``. Layout ``"line"``: wait on the next slot's own
    sequence word (one cache line carries the word, the due time and the command, so a
    command crosses between the cores in one line, not in the ``head`` line and a slot
    line), copy the ready commands' words into ``scratch`` and run them from there.

    ``take`` bounds how many queued commands one kernel call runs: ``1`` runs and stamps
    every command on its own (mode ``"command"``); more runs whatever is queued, up to
    ``take``, in one call with one stamp, published together (mode ``"chunk"``: the
    "smart batching" of a queue consumer, which costs nothing while the queue is empty and
    works a backlog off at the engine's closed-loop speed; the stamp is never earlier than
    any of the chunk's outcomes, so no latency is understated). So that a slow engine still
    beats often, a call that took longer than a quarter of ``check_ns`` halves the next
    call's bound; a faster one doubles it again, up to ``take`` (the bound starts at 1).

    Fills are discarded (the fill count is reset before each call, as
    ``replay_into(..., fills=None)`` does). Returns ``(pos, status)``; a status ``GROW + c``
    means the book needs ``kernel_state(c)`` before re-entering at ``pos``.
    """
    line = Lw.size > 0
    cap = Lw.size // _W if line else slot_due.size
    sw = scratch.view(np.int64)
    tail = H[TAIL * _L]  # only this side writes tail
    head = tail if line else load_acquire(H, HEAD * _L)  # line: slots seen ready so far
    t = monotonic_ns()
    nxt = t + check_ns
    lim = 1
    while pos < n:
        if head == tail:
            if line:
                head, t, nxt, st = wait_for(H, Lw, tail % cap, tail + 1, monotonic_ns(), nxt,
                                            CONS_BEAT, PROD_BEAT, check_ns, liveness_ns,
                                            timeout_ns, ppid, peer_pid, spin_ns)
            else:
                head, t, nxt, st = wait_for(H, H, HEAD, tail + 1, monotonic_ns(), nxt,
                                            CONS_BEAT, PROD_BEAT, check_ns, liveness_ns,
                                            timeout_ns, ppid, peer_pid, spin_ns)
            if st != OK:
                return pos, st
        s = tail % cap
        t0 = t  # the last clock reading: at or before the call's start
        if line:
            want = min(n - pos, lim)
            while head - tail < want and load_acquire(Lw, (head % cap) * _W) == head + 1:
                head += 1  # the next slot is ready too
            m = min(head - tail, want)
            for j in range(m):
                b = ((tail + j) % cap) * _W
                for w in range(_CW):
                    sw[j * _CW + w] = Lw[b + 2 + w]
            cmds = scratch[:m]
        else:
            m = min(head - tail, cap - s, n - pos, lim)  # queued, contiguous, this row's
            cmds = slot_cmd[s:s + m]
        i, code = run_state(cmds, out[pos:pos + m], state, durs)
        if i == 0:  # not even one command ran: the book must grow first
            return pos, GROW + code
        t = monotonic_ns()
        if t - t0 > check_ns >> 2:
            lim = max(1, i >> 1)
        elif lim < take:
            lim = min(take, lim << 1)
        for j in range(i):  # (a grow cut the call short: publish what ran, then grow)
            done[pos + j] = t
            due[pos + j] = Lw[((tail + j) % cap) * _W + 1] if line else slot_due[s + j]
        pos += i
        tail += i
        store_release(H, TAIL * _L, tail)
        if t >= nxt:
            st = check(H, CONS_BEAT, PROD_BEAT, t, liveness_ns, ppid, peer_pid)
            if st != OK:
                return pos, st
            nxt = t + check_ns
    return pos, OK

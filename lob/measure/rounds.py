"""Interleaved rounds, the one loop every comparison of lob runs, and the clock it is timed by.

A round runs every contender once, in an order rotated from round to round
(:func:`lob.measure.stats.rotations`), so a machine that drifts slows all of them alike and
no contender always runs first. :func:`interleaved_rounds` is that loop; what a run measures,
what a probe reads and when to stop early are its callers' (``lob profile``, the studies'
throughput, ``lob bisect``).

The clock is passed, never swapped process-wide: :func:`clock_of` names it and
:func:`timed_replay` times one replay on it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from lob.measure.stats import rotation

CLOCKS = ("cpu", "wall")

__all__ = ["CLOCKS", "clock_of", "interleaved_rounds", "timed_replay"]


def clock_of(clock: str):
    """The clock ``clock`` names, as a function returning ns: ``"cpu"`` the measuring
    thread's CPU clock (:func:`time.thread_time_ns`), ``"wall"`` :func:`time.perf_counter_ns`.
    It is passed to whatever times with it; nothing process-wide is swapped."""
    if clock not in CLOCKS:
        raise ValueError(f"clock must be one of {CLOCKS}, got {clock!r}")
    return time.thread_time_ns if clock == "cpu" else time.perf_counter_ns


def timed_replay(call, now):
    """``call()`` (a replay), timed by ``now`` (:func:`clock_of`): ``(run, kernel_ns,
    call_ns)``. ``call_ns`` is the whole call on ``now``; ``kernel_ns`` the engine's own
    timer (``run.elapsed_ns``, on the wall clock, around its compiled call) carried onto
    ``now``: the kernel's share of the call's wall time, times the call's time on ``now``
    (the engine's own figure when ``now`` is the wall clock)."""
    w0, t0 = time.perf_counter_ns(), now()
    run = call()
    t1, w1 = now(), time.perf_counter_ns()
    call_ns = t1 - t0
    if now is time.perf_counter_ns:
        return run, run.elapsed_ns, call_ns
    return run, call_ns * min(1.0, run.elapsed_ns / max(1, w1 - w0)), call_ns


def interleaved_rounds(names: Sequence, run: Callable, rounds: int, *, extra: int = 0,
                       enough: Callable[[], bool] | None = None,
                       probe: Callable[[], object] | None = None,
                       after: Callable[[list, list], object] | None = None,
                       first: int = 0):
    """Run ``rounds`` rounds, then up to ``extra`` more while ``enough()`` says False; in
    each, ``run(name, k)`` once for every one of ``names`` in the order :func:`rotation`
    gives round ``k`` (rounds are numbered from ``first``, so a series continued by another
    call keeps rotating). ``probe()``, when given, is read before each run and after the
    round's last; ``after(order, probed)`` gets the round's order and those readings once
    the round is done. A value other than None returned by ``run`` or ``after`` stops the
    rounds at once and is returned; else None once the rounds are done."""
    if rounds < 0 or extra < 0:
        raise ValueError(f"rounds and extra must be >= 0, got {rounds} and {extra}")
    for r in range(rounds + extra):
        if r >= rounds and (enough is None or enough()):
            break
        k = first + r
        order = rotation(names, k)
        probed = []
        for name in order:
            if probe is not None:
                probed.append(probe())
            stop = run(name, k)
            if stop is not None:
                return stop
        if probe is not None:
            probed.append(probe())
        if after is not None and (stop := after(order, probed)) is not None:
            return stop
    return None

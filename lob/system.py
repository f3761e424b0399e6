"""The operating system under the measurements: CPU pinning, real-time scheduling
(``SCHED_FIFO``), the kernel's tick and timer interrupts, and process liveness.

A bottom-layer module: it imports nothing from lob, so measurement (:mod:`lob.diagnose.hiccup`)
and the pipeline (:mod:`lob.pipeline`) share one copy of each helper. Linux-first; where an
interface is missing (another OS, no /proc) a helper says so (None, ``inf``, a no-op or a
clear ``PermissionError``) rather than failing deep inside.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import math
import os
import signal
from collections.abc import Iterator
from pathlib import Path

__all__ = ["allowed_cpus", "pin", "sched_fifo", "set_fifo", "on_fifo", "check_realtime",
           "realtime_allowed", "realtime_budget_s", "kernel_hz", "timer_interrupts",
           "pid_alive", "die_with_parent"]

FIFO_PRIORITY = 1  # the lowest real-time priority: above every ordinary task, below the kernel's
RT_RUNTIME = Path("/proc/sys/kernel/sched_rt_runtime_us")


# --- CPUs -------------------------------------------------------------------------------------

def allowed_cpus() -> list[int]:
    """The CPUs this process may run on (empty where the OS cannot say)."""
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


def pin(cpus: int | list[int] | set[int] | None, *, default: list[int] | None = None
        ) -> list[int]:
    """Pin the calling thread to ``cpus`` (one CPU or a set); ``None`` restores ``default``
    (the CPUs it may use) -> the CPUs it now runs on ([] where pinning is unsupported)."""
    if not hasattr(os, "sched_setaffinity"):
        return []
    if cpus is None:
        want = set(default if default is not None else allowed_cpus())
    else:
        want = {cpus} if isinstance(cpus, int) else set(cpus)
    os.sched_setaffinity(0, want)
    return sorted(os.sched_getaffinity(0))


# --- real-time scheduling -------------------------------------------------------------------

def set_fifo(priority: int = FIFO_PRIORITY) -> None:
    """Put the calling thread under ``SCHED_FIFO`` at ``priority`` (no way back: for a thread
    that ends with its work; see :func:`sched_fifo` for a block)."""
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))


def on_fifo() -> bool:
    """Whether the calling thread runs under ``SCHED_FIFO``."""
    return hasattr(os, "sched_getscheduler") and \
        os.sched_getscheduler(0) == getattr(os, "SCHED_FIFO", -1)


@contextlib.contextmanager
def sched_fifo(on: bool = True) -> Iterator[None]:
    """Run the block under ``SCHED_FIFO`` (priority 1) when ``on``, then restore the policy."""
    if not on:
        yield
        return
    old, prio = os.sched_getscheduler(0), os.sched_getparam(0).sched_priority
    set_fifo()
    try:
        yield
    finally:
        os.sched_setscheduler(0, old, os.sched_param(prio))


def realtime_budget_s() -> float:
    """Seconds of each scheduling period a SCHED_FIFO task may run before the kernel throttles
    it for the rest of the period (``sched_rt_runtime_us``, default 0.95 s of every 1 s;
    ``inf`` when throttling is off or the setting is unreadable)."""
    try:
        us = int(RT_RUNTIME.read_text())
    except (OSError, ValueError):
        return math.inf
    return math.inf if us < 0 else us / 1e6


def check_realtime() -> None:
    """Raise PermissionError unless this process may use SCHED_FIFO (tried on itself and
    undone at once)."""
    if not hasattr(os, "SCHED_FIFO"):
        raise PermissionError("realtime=True needs SCHED_FIFO (Linux)")
    try:
        with sched_fifo(True):
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


# --- the kernel's clock tick ------------------------------------------------------------------

@functools.cache
def kernel_hz() -> int | None:
    """The kernel's tick rate (``CONFIG_HZ`` from /proc/config.gz or /boot), or None."""
    for p in (Path("/proc/config.gz"), Path(f"/boot/config-{os.uname().release}")):
        try:
            text = gzip.decompress(p.read_bytes()).decode() if p.suffix == ".gz" \
                else p.read_text()
        except (OSError, EOFError, gzip.BadGzipFile):
            continue
        for ln in text.splitlines():
            if ln.startswith("CONFIG_HZ="):
                return int(ln.split("=", 1)[1])
    return None


def timer_interrupts() -> dict[int, int] | None:
    """Local timer interrupts so far per CPU (the ``LOC`` row of /proc/interrupts), or None."""
    try:
        lines = Path("/proc/interrupts").read_text().splitlines()
    except OSError:
        return None
    cpus = [int(c.removeprefix("CPU")) for c in lines[0].split()]
    for ln in lines[1:]:
        parts = ln.split()
        if parts and parts[0] == "LOC:":
            return {c: int(v) for c, v in zip(cpus, parts[1:1 + len(cpus)], strict=True)}
    return None


# --- processes -------------------------------------------------------------------------------

def pid_alive(pid: int) -> bool:
    """False if ``pid`` is gone or a zombie (killed but not yet reaped by its parent)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:  # no /proc (not Linux): rely on os.kill (and the caller's heartbeat)
        return True


def die_with_parent(ppid: int) -> None:
    """Ask Linux to SIGKILL this process when its parent dies (strictly: when the thread that
    started it ends); exit now if the parent ``ppid`` is already gone."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the caller's parent-pid checks remain
        pass
    if os.getppid() != ppid:
        os._exit(3)

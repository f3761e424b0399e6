"""A watchdog around one foreign library call made on the caller's own thread.

A C call cannot be stopped from outside, and while it runs Python never gets to its Ctrl-C
handler. Running the call on another thread would let the caller give up on it, but the
handoff moves the engine's work to another thread and CPU, which slows the library's own
code (the run: ``docs/decisions/foreign-calls-on-caller-thread.md``). So the call stays
where it is, and a small watcher thread decides when the process must end:

* Ctrl-C (SIGINT) during the call: Python's C-level handler writes the signal number to
  the wakeup fd (:func:`signal.set_wakeup_fd`, pointed at a pipe the watcher reads for the
  length of the call). If the call has not returned ``GRACE_S`` seconds later, the watcher
  prints one line naming the engine and the call and ends the process (exit status 130). A
  call that returns in time gets the ordinary ``KeyboardInterrupt`` right after it.
* a call longer than its timeout: one line, and the process ends (exit status 124).

Either way the crash marker (:mod:`.crash`) says why, so ``lob bench``'s parent and the
experiment runner report it for the engine and the command.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import threading
import time

GRACE_S = 2.0
EXIT_INTERRUPTED, EXIT_TIMEOUT = 130, 124

_pipe: tuple[int, int] | None = None


def _wakeup_pipe() -> tuple[int, int]:
    global _pipe
    if _pipe is None:
        r, w = os.pipe()
        os.set_blocking(r, False)
        os.set_blocking(w, False)
        _pipe = (r, w)
    return _pipe


def _drain(fd: int) -> bytes:
    out = b""
    with contextlib.suppress(BlockingIOError, InterruptedError):
        while chunk := os.read(fd, 512):
            out += chunk
    return out


def _end(line: str, status: int, marker, state: int) -> None:
    from lob.engines.foreign import crash

    crash.leave(marker, state=state)
    with contextlib.suppress(Exception):
        sys.stderr.write(f"lob: {line}\n")
        sys.stderr.flush()
    os._exit(status)


@contextlib.contextmanager
def watch(engine: str, where: str, timeout: float, marker=None):
    """Run the body (one foreign call) under the watchdog. Only on the main thread (the
    only one that can own the wakeup fd); elsewhere the body runs unwatched."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    r, w = _wakeup_pipe()
    _drain(r)
    try:
        old = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    except ValueError:  # not the main interpreter's main thread
        yield
        return
    stop_r, stop_w = os.pipe()
    deadline = time.monotonic() + timeout

    def watcher():
        sigint_at = None
        while True:
            now = time.monotonic()
            until = deadline if sigint_at is None else min(deadline, sigint_at + GRACE_S)
            if now >= until:
                if sigint_at is not None and now >= sigint_at + GRACE_S:
                    _end(f"interrupted: foreign engine {engine!r} did not return from {where} "
                         f"within {GRACE_S:g} s of Ctrl-C; a C call cannot be stopped, so the "
                         f"process was ended", EXIT_INTERRUPTED, marker, 4)
                _end(f"foreign engine {engine!r} did not return from {where} within "
                     f"{timeout:g} s ($LOB_FOREIGN_TIMEOUT_S); a C call cannot be stopped, so "
                     f"the process was ended", EXIT_TIMEOUT, marker, 3)
            ready, _, _ = select.select([r, stop_r], [], [], until - now)
            if stop_r in ready:
                return
            if r in ready and signal.SIGINT in _drain(r) and sigint_at is None:
                sigint_at = time.monotonic()

    t = threading.Thread(target=watcher, name=f"lob watchdog {engine}", daemon=True)
    t.start()
    try:
        yield
    finally:
        os.write(stop_w, b"x")
        t.join()
        os.close(stop_r)
        os.close(stop_w)
        got = _drain(r)
        signal.set_wakeup_fd(old, warn_on_full_buffer=False)
        if old >= 0 and got:  # hand the signals on to the previous owner (an event loop)
            with contextlib.suppress(OSError):
                os.write(old, got)


__all__ = ["EXIT_INTERRUPTED", "EXIT_TIMEOUT", "GRACE_S", "watch"]

"""What a foreign engine was doing when its process died: a crash marker.

A foreign engine runs inside lob's process, so a segfault, an abort or an ``exit()`` in it
takes the process down with nothing said (``lob bench`` dies with 139/134/3; a batch sees
"DeadKernelError: Kernel died"). When ``$LOB_CRASH_MARKER`` names a file, every foreign
library call first writes into that file, through a shared memory map (no system call, so
about a microsecond): the engine, the library function, the index of the first command of
the call and that command; and clears it when the call returns. The kernel keeps the pages
of a shared file mapping when the process dies, so whoever started the process reads the
marker afterwards (:func:`read`) and reports the engine, the command and the signal.

``lob bench`` of a foreign engine runs the measurement in a child process armed this way
(:func:`run_child`); the experiment runner arms each notebook's kernel (:func:`arm`) and
explains a dead kernel with :func:`explain`.
"""

from __future__ import annotations

import faulthandler
import mmap
import os
import signal
import struct
import subprocess
import sys
from pathlib import Path

ENV = "LOB_CRASH_MARKER"
SIZE = 256
# magic, state (1 inside a call), pid, first command index, commands in the call,
# the function, the engine name, the first command as text
_FMT = "<8sqqqq24s64s120s"
_MAGIC = b"LOBCRASH"
CALLS = ("lob_replay", "lob_replay_timed", "lob_snapshot", "lob_resting", "lob_check",
         "lob_create", "lob_destroy", "lob_clock_samples", "lob_last_error")

_marker: mmap.mmap | None = None
_opened_for: str | None = None


def _open() -> mmap.mmap | None:
    global _marker, _opened_for
    path = os.environ.get(ENV)
    if path == _opened_for:
        return _marker
    _opened_for, _marker = path, None
    global _fault_file
    if _fault_file is not None:  # the marker moved: stop writing faults to the old place
        faulthandler.disable()
        _fault_file.close()
        _fault_file = None
    if path:
        try:
            with open(path, "a+b") as f:
                if os.fstat(f.fileno()).st_size < SIZE:
                    f.truncate(SIZE)
                _marker = mmap.mmap(f.fileno(), SIZE)
            # a fatal signal's name goes to <marker>.fault (faulthandler writes it in C)
            _fault_file = open(path + ".fault", "w")  # noqa: SIM115 (open for the process)
            faulthandler.enable(file=_fault_file, all_threads=False)
        except OSError:
            _marker = None
    return _marker


_fault_file = None


def armed() -> bool:
    """Whether foreign calls are marked in this process (``$LOB_CRASH_MARKER`` is set)."""
    return _open() is not None


def enter(engine: str, call: str, first: int, n: int, command: str = "") -> mmap.mmap | None:
    """Mark a foreign call as in progress (no-op without ``$LOB_CRASH_MARKER``); returns the
    marker for :func:`leave`."""
    m = _open()
    if m is not None:
        struct.pack_into(_FMT, m, 0, _MAGIC, 1, os.getpid(), first, n, call.encode()[:24],
                         engine.encode()[:64], command.encode()[:120])
    return m


IDLE, IN_CALL, TIMED_OUT, INTERRUPTED = 0, 1, 3, 4  # the marker's state


def leave(m: mmap.mmap | None, state: int = IDLE) -> None:
    """The call returned (``IDLE``), or the watchdog ends the process inside it
    (``TIMED_OUT``, ``INTERRUPTED``)."""
    if m is not None:
        struct.pack_into("<q", m, 8, state)


def read(path: str | os.PathLike) -> dict | None:
    """The call in progress recorded in ``path`` (engine, call, first, n, command, pid), or
    None when no foreign call was in progress (or no marker)."""
    try:
        data = Path(path).read_bytes()[: struct.calcsize(_FMT)]
        magic, state, pid, first, n, call, engine, cmd = struct.unpack(_FMT, data)
    except (OSError, struct.error):
        return None
    if magic != _MAGIC or state not in (IN_CALL, TIMED_OUT, INTERRUPTED):
        return None
    text = lambda b: b.rstrip(b"\0").decode(errors="replace")  # noqa: E731
    try:
        fault = Path(str(path) + ".fault").read_text().strip().splitlines()
    except OSError:
        fault = []
    sig = fault[0].removeprefix("Fatal Python error: ").strip() if fault else ""
    return {"engine": text(engine), "call": text(call), "first": first, "n": n,
            "command": text(cmd), "pid": pid, "signal": sig, "state": state}


def signal_name(rc: int) -> str:
    """``SIGSEGV (segmentation fault)`` for a child's return code -11; ``exit status 3``."""
    if rc < 0:
        try:
            sig = signal.Signals(-rc)
            return f"{sig.name} ({signal.strsignal(sig) or sig.name})".replace(
                "Segmentation fault", "segmentation fault")
        except ValueError:
            return f"signal {-rc}"
    return f"exit status {rc}"


def describe(info: dict, how: str) -> str:
    """One line: which engine died how, in which call, at which command."""
    where = f"at command {info['first']}"
    if info["n"] > 1:
        where += f" (a call of {info['n']} commands from there)"
    cmd = f": {info['command']}" if info["command"] else ""
    if info.get("state") in (TIMED_OUT, INTERRUPTED):
        why = ("did not return within its timeout ($LOB_FOREIGN_TIMEOUT_S)"
               if info["state"] == TIMED_OUT else "did not return after Ctrl-C")
        return (f"foreign engine {info['engine']!r} {why} from {info['call']} {where}{cmd}; "
                f"the process was ended ({how}); no result of this run was kept")
    return (f"foreign engine {info['engine']!r} crashed the process ({how}) inside "
            f"{info['call']} {where}{cmd}. The engine is broken, not lob; no result of this "
            f"run was kept")


def arm(folder: str | os.PathLike | None = None) -> str:
    """Set ``$LOB_CRASH_MARKER`` to a fresh marker file (in ``folder``, else the temporary
    folder, named by this process), inherited by the processes started from here (e.g. a
    notebook's kernel); returns its path."""
    import tempfile

    path = Path(folder or tempfile.gettempdir()) / f"lob-crash-marker-{os.getpid()}"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\0" * SIZE)
    Path(str(path) + ".fault").unlink(missing_ok=True)
    os.environ[ENV] = str(path)
    return str(path)


class ForeignEngineCrash(RuntimeError):
    """The process running a foreign engine died inside one of its calls."""


def explain(exc: BaseException) -> BaseException:
    """``exc`` (e.g. papermill's DeadKernelError) as a :class:`ForeignEngineCrash` naming the
    engine and the command when the armed marker shows a foreign call in progress; else
    ``exc`` itself. Only for an exception that says the process died (not an error the
    notebook raised)."""
    if getattr(exc, "ename", None) is not None or "died" not in f"{type(exc).__name__} {exc}":
        return exc
    path = os.environ.get(ENV)
    info = read(path) if path else None
    if info is None:
        return exc
    how = info["signal"] or ("ended by lob's watchdog" if info["state"] != IN_CALL else
                             "the process ended without a fatal signal: exit() in the engine, "
                             "or killed, e.g. by the out-of-memory killer")
    return ForeignEngineCrash(describe(info, f"{how}; {type(exc).__name__}"))


def run_child(argv: list[str]) -> int:
    """Run ``python -c 'lob.cli.main(argv)'`` in a child with an armed marker; if the child
    dies inside a foreign call, print one line naming the engine, the signal and the
    command (to stderr) and return 1. Otherwise the child's own return code."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="lob-crash-") as tmp:
        env = dict(os.environ)
        env[ENV] = str(Path(tmp) / "marker")
        Path(env[ENV]).write_bytes(b"\0" * SIZE)
        code = "import sys; from lob.cli import main; sys.exit(main(sys.argv[1:]))"
        try:
            p = subprocess.Popen([sys.executable, "-c", code, *argv], env=env)
            rc = p.wait()
        except KeyboardInterrupt:  # the child got the SIGINT too and reports it itself
            rc = p.wait()
        info = read(env[ENV])
    if info is not None and info["pid"] == p.pid and info["state"] != IN_CALL:
        return rc  # the watchdog ended it and said so itself
    if info is not None and info["pid"] == p.pid:
        how = signal_name(rc) + (" (killed: out of memory?)" if rc == -signal.SIGKILL else "")
        print(f"lob: {describe(info, how)}", file=sys.stderr)
        return 1
    if rc < 0:  # killed by a signal outside any marked call: said, and a valid exit code
        print(f"lob: the measuring process died of {signal_name(rc)} outside any foreign "
              "engine call; no result of this run was kept", file=sys.stderr)
        return 1
    return rc


__all__ = ["ENV", "ForeignEngineCrash", "arm", "armed", "describe", "enter", "explain", "leave",
           "read", "run_child", "signal_name"]

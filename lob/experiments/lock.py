"""The artifacts folder lock: one batch at a time writes a folder.

A batch (:func:`lob.experiments.runner.run_batch`) holds an advisory ``fcntl.flock`` on
``<artifacts>/.lock`` from before it looks at the folder until its last manifest line is
written. The lock file says who holds it (JSON: pid, host, start time, command line and a
random token); it is emptied on release and never deleted (deleting a locked file would let
a third process lock a new file of the same name while the second still holds the old one).

* A second batch on the same folder waits up to ``wait`` seconds, saying who it waits for,
  then refuses with :class:`ArtifactsLocked`, which names the holder.
* A holder that dies, however it dies, loses the lock: the kernel releases a ``flock`` when
  the last descriptor of its open file closes. The next batch takes the lock over at once
  and says whose stale record it replaces.
* A run folder is deleted (or written) only under the lock: the jobs of a batch carry its
  token, and :func:`check_token` refuses a job whose batch no longer holds the folder. On a
  Dask cluster the driver holds the lock for its workers, which check the token through the
  shared filesystem.

``flock`` is advisory: it orders lob's own batches, not other programs writing the folder.
On NFS, Linux emulates it with byte-range locks, which the server releases when the client
that held them goes away.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

LOCK_FILE = ".lock"


class ArtifactsLocked(RuntimeError):
    """Another batch holds the artifacts folder."""


@dataclass(frozen=True)
class Held:
    """The lock as held by this process: the folder, the token of this batch, the record."""

    folder: Path
    token: str
    info: dict


def _read(fd: int) -> dict | None:
    try:
        data = os.pread(fd, 1 << 16, 0)
    except OSError:
        return None
    if not data.strip():
        return None
    try:
        info = json.loads(data)
    except ValueError:
        return {"unreadable": data[:200].decode(errors="replace")}
    return info if isinstance(info, dict) else None


def holder(folder: str | Path) -> dict | None:
    """The record of the batch holding (or, if stale, last holding) ``folder``'s lock."""
    try:
        fd = os.open(Path(folder) / LOCK_FILE, os.O_RDONLY)
    except OSError:
        return None
    try:
        return _read(fd)
    finally:
        os.close(fd)


def describe(info: dict | None) -> str:
    if not info:
        return "a batch that has not written its name yet"
    if "unreadable" in info:
        return f"an unreadable lock record ({info['unreadable']!r})"
    return (f"pid {info.get('pid')} on host {info.get('host')} (since {info.get('started')}: "
            f"{info.get('command', '?')})")


@contextmanager
def artifacts_lock(folder: str | Path, wait: float = 0.0, *, poll: float = 0.2,
                   log=None) -> Iterator[Held]:
    """Hold ``folder``'s lock for the ``with`` block; wait at most ``wait`` seconds for it.

    Raises :class:`ArtifactsLocked` (naming the holder) when it is still held after
    ``wait``. Messages (waiting, taking over a stale record) go to ``log`` (default stderr).
    """
    log = log or (lambda msg: print(msg, file=sys.stderr))
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + max(0.0, wait)
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                info = _read(fd)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ArtifactsLocked(
                        f"the artifacts folder {folder} is in use by another batch: "
                        f"{describe(info)}. Wait for it to finish (or give the batch a "
                        f"wait), or use another folder.") from None
                if not told:
                    log(f"waiting up to {left:.0f} s for the artifacts folder {folder}, "
                        f"held by {describe(info)}")
                    told = True
                time.sleep(min(poll, left))
        stale = _read(fd)
        if stale:  # the lock was free, so its last holder ended without releasing it
            log(f"taking over the artifacts lock of {folder} from {describe(stale)}, "
                "which ended without releasing it")
        info = {"pid": os.getpid(), "host": socket.gethostname(),
                "started": datetime.now(UTC).isoformat(timespec="seconds"),
                "command": " ".join(sys.argv)[:300], "token": uuid.uuid4().hex}
        data = json.dumps(info, sort_keys=True).encode() + b"\n"
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
        os.fsync(fd)
        try:
            yield Held(folder, info["token"], info)
        finally:
            os.ftruncate(fd, 0)  # released: nobody's record (the flock goes with the close)
    finally:
        os.close(fd)


def check_token(folder: str | Path, token: str) -> None:
    """Raise :class:`ArtifactsLocked` unless the batch of ``token`` holds ``folder``'s lock.

    The record must carry ``token`` and the lock must be held right now (a record left by
    a batch that died names a holder that no longer holds anything).
    """
    info = holder(folder)
    held = False
    if info and info.get("token") == token:
        fd = os.open(Path(folder) / LOCK_FILE, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # succeeds only if nobody holds it
        except BlockingIOError:
            held = True
        finally:
            os.close(fd)
    if not held:
        raise ArtifactsLocked(
            f"the batch of this job does not hold the artifacts folder {folder} (its lock "
            f"record: {describe(info)}); its run folders are left alone")

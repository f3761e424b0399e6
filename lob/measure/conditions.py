"""Run conditions attached to every result: host, CPU, OS, interpreter, packages, code, date.

``machine_key`` (hostname, CPU model, core count, OS) identifies the machine a result came
from; :mod:`lob.measure.results` refuses to merge results whose keys differ.
"""

from __future__ import annotations

import datetime as _dt
import gc
import os
import platform
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path

PACKAGES = ("numpy", "pandas", "numba", "hdrhistogram", "sortedcontainers", "llvmlite")


def _cpu_model() -> str:
    try:
        for ln in Path("/proc/cpuinfo").read_text().splitlines():
            if ln.lower().startswith("model name"):
                return ln.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git(*args: str) -> str | None:
    root = Path(__file__).resolve().parents[2]
    try:
        p = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return p.stdout.strip() if p.returncode == 0 else None


def _versions() -> dict[str, str | None]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def machine() -> dict:
    """The identity fields of this machine (what :func:`machine_key` reads), cheaply."""
    return {"hostname": socket.gethostname(), "cpu_model": _cpu_model(),
            "cpu_count": os.cpu_count(), "os": f"{platform.system()} {platform.release()}"}


def machine_key(cond: dict) -> str:
    """The identity of the machine in ``cond`` (results from different keys never merge)."""
    return "|".join(str(cond.get(k)) for k in ("hostname", "cpu_model", "cpu_count", "os"))


_STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def cpu_times(path: str | os.PathLike = "/proc/stat") -> dict[str, float] | None:
    """The machine's CPU time by state since boot, in seconds summed over its CPUs (the first
    line of Linux's ``/proc/stat``); None where there is no such file. ``steal`` is the time
    a hypervisor ran something else while this guest's virtual CPUs wanted to run."""
    try:
        first = Path(path).read_text().splitlines()[0].split()
        hz = os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError, AttributeError):
        return None
    if not first or first[0] != "cpu":
        return None
    ticks = [int(x) for x in first[1:1 + len(_STAT_FIELDS)]]
    ticks += [0] * (len(_STAT_FIELDS) - len(ticks))  # old kernels have no steal column
    return {k: t / hz for k, t in zip(_STAT_FIELDS, ticks, strict=True)}


def steal_fraction(before: dict, after: dict) -> float | None:
    """The share of all CPUs' time between two :func:`run_conditions` that the hypervisor gave
    to others (steal; 0 on bare metal), or None when either has no ``cpu_time`` or no time
    passed. A busy neighbour slows a measurement without showing in the load average."""
    a, b = (before or {}).get("cpu_time"), (after or {}).get("cpu_time")
    if not a or not b:
        return None
    total = sum(b.values()) - sum(a.values())
    if total <= 0:
        return None
    return max(0.0, b.get("steal", 0.0) - a.get("steal", 0.0)) / total


def run_conditions(*, seed=None, params: dict | None = None) -> dict:
    """The conditions of a run now (call it right before or after measuring)."""
    from lob._version import __version__

    try:
        affinity = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    try:
        load = list(os.getloadavg())
    except (AttributeError, OSError):
        load = None
    sha = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=no") if sha else None
    cond = {
        "hostname": socket.gethostname(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "affinity": affinity,
        "load_avg": load,
        "cpu_time": cpu_times(),
        "os": f"{platform.system()} {platform.release()}",
        "platform": platform.platform(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "python_build": " ".join(platform.python_build()),
        "packages": _versions(),
        "lob_version": __version__,
        "git_sha": sha,
        "git_dirty": bool(status) if status is not None else None,
        "date_utc": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "gc_enabled": gc.isenabled(),
        "argv0": Path(sys.argv[0]).name if sys.argv and sys.argv[0] else None,
    }
    if seed is not None:
        cond["seed"] = int(seed)
    if params is not None:
        cond["params"] = dict(params)
    cond["machine"] = machine_key(cond)
    return cond

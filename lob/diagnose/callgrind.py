"""Instructions, branches, mispredicts and cache misses per command of a replay, counted by
callgrind (valgrind) on a simulated CPU: the profile where the machine has no hardware
counters.

Why: on a VM without a virtual PMU ``perf stat`` reports ``<not supported>``
(:func:`lob.diagnose.profile.hardware_counters`), and a time per command moves by +-20% with
the host within minutes. Callgrind runs the process on a synthetic CPU and counts every
instruction (``Ir``), load (``Dr``) and store (``Dw``) of the counted region, every
conditional and indirect branch with its simulated mispredicts (``Bcm``, ``Bim``: a bimodal
and a branch-target predictor) and simulated cache misses (``D1mr``/``D1mw`` in a 32 KB
8-way L1, ``DLmr``/``DLmw`` in the last level). The counts are exact and repeat run to run
(the child runs with ``PYTHONHASHSEED=0``): a step that changes the instructions a command
costs shows as a change in ``instructions``, with no interval needed. Their limits: the
predictor and the caches are models, not this CPU. A modern core predicts better, and the
model's predictor is a table indexed by branch address, so a change that only moves code
can move ``mispredicts``: it ranks engines, it does not price a step. There is no hardware
prefetcher (a stream read in order counts a miss per cache line), and there is no time:
fewer instructions need not mean less time (the runs that showed both are in
``docs/decisions/callgrind-limits.md``).

The code counted is compiled for the CPU valgrind presents, not for this one: numba compiles
for the host LLVM detects, and under valgrind that is a Haswell-class CPU without AVX-512
(valgrind cannot run AVX-512 instructions at all), so the instruction selection differs
from a native build while the kernel's logic, branches, loads and stores are the same. The
``target`` column names it. So that every child runs code from numba's cache and never its
own compile (an in-process compile changed the next replay's count by 0.3%), each engine is
first compiled and replayed once natively for that target (``NUMBA_CPU_NAME`` and
``NUMBA_CPU_FEATURES`` set to what valgrind presents), and the children run with the same
settings.

Only the ``replay`` call is counted: valgrind client requests (``<valgrind/callgrind.h>``,
the few lines of ``_callgrind.c``, built with gcc on first use) switch counting on just
before it and off just after, so Python's start-up, numba's compiler and the workload's
build are not counted (and run uninstrumented). Each engine runs in its own valgrind
process; its kernel is compiled (or loaded from numba's cache) by this process first, and the
child warms it with one replay of the stream before the counted one.

:func:`counts` needs ``valgrind`` on ``PATH`` and its headers (Debian: ``apt-get install
valgrind``); :func:`available` says why not when they are missing. ``lob callgrind`` is the
command line.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from lob.engines.foreign import ENV as ENGINES_TOML

if TYPE_CHECKING:  # pandas is imported where a frame is built: `lob --help` does not pay for it
    import pandas as pd

EVENTS = ("Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw", "Bc", "Bcm",
          "Bi", "Bim")
# the table's columns, per command: name -> the callgrind events summed
COLUMNS = {
    "instructions": ("Ir",),
    "loads": ("Dr",),
    "stores": ("Dw",),
    "branches": ("Bc", "Bi"),
    "mispredicts": ("Bcm", "Bim"),
    "d1_misses": ("D1mr", "D1mw"),
    "ll_misses": ("DLmr", "DLmw"),
}
_SRC = Path(__file__).with_name("_callgrind.c")
_HEADER = "valgrind/callgrind.h"
_OPTIONS = ("--tool=callgrind", "--instr-atstart=no", "--collect-atstart=no",
            "--cache-sim=yes", "--branch-sim=yes")

__all__ = ["COLUMNS", "EVENTS", "available", "counts", "parse"]


def available() -> str | None:
    """None when :func:`counts` can run here, else why not (one line)."""
    if shutil.which("valgrind") is None:
        return "valgrind is not installed (Debian: apt-get install valgrind)"
    try:
        _requests_library()
    except RuntimeError as e:
        return str(e).splitlines()[0]
    return None


def _requests_library() -> Path:
    """The client-request helper, built with gcc on first use (RuntimeError if it cannot be:
    no compiler, or valgrind's headers missing)."""
    from lob.measure._native import build_shared

    try:
        return build_shared(_SRC, "_lobcallgrind")
    except RuntimeError as e:
        if _HEADER in str(e):
            raise RuntimeError(f"valgrind's header <{_HEADER}> is missing (Debian: apt-get "
                               f"install valgrind)") from None
        raise


def parse(path) -> dict[str, int]:
    """The totals of one callgrind output file: ``{event: count}`` for every event of its
    ``events:`` line (from its ``summary:`` line, or ``totals:`` when there is none)."""
    names = None
    totals = None
    summary = None
    with open(path) as f:
        for line in f:
            if line.startswith("events:"):
                names = line.split()[1:]
            elif line.startswith("summary:"):
                summary = line.split()[1:]
            elif line.startswith("totals:"):
                totals = line.split()[1:]
    values = summary if summary is not None else totals
    if names is None or values is None:
        raise ValueError(f"{path}: not a callgrind output file (no events: and summary: lines)")
    got = {name: 0 for name in names}
    for name, v in zip(names, values, strict=False):  # trailing zeros may be left out
        got[name] = int(v)
    return got


class Refused(Exception):
    """An engine refused the stream in the child (its message is the engine's reason)."""


@functools.cache
def _valgrind_target() -> dict[str, str]:
    """``NUMBA_CPU_NAME`` and ``NUMBA_CPU_FEATURES`` of the CPU valgrind presents (what LLVM
    detects when run under it)."""
    code = ("import llvmlite.binding as b; print(b.get_host_cpu_name()); "
            "print(b.get_host_cpu_features().flatten())")
    proc = subprocess.run(["valgrind", "-q", sys.executable, "-c", code], capture_output=True,
                          text=True, timeout=600)
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    if proc.returncode != 0 or len(lines) < 2:
        raise RuntimeError(f"cannot read the CPU valgrind presents: {proc.stderr.strip()[-300:]}")
    return {"NUMBA_CPU_NAME": lines[-2].strip(), "NUMBA_CPU_FEATURES": lines[-1].strip()}


def _prime(engine: str, workload: str, scale: float, env: dict, timeout: float) -> None:
    """Compile ``engine``'s kernel for valgrind's CPU into numba's cache, natively (a compile
    under valgrind takes minutes), by running the child's own replays without valgrind."""
    with tempfile.TemporaryDirectory(prefix="lob-callgrind-") as tmp:
        out = Path(tmp) / "meta.json"
        proc = subprocess.run([sys.executable, "-m", "lob.diagnose.callgrind", "--child", engine,
                               workload, repr(scale), str(out)], capture_output=True,
                              text=True, timeout=timeout, env=env)
        if proc.returncode != 0:
            lines = proc.stderr.strip().splitlines()
            refused = [ln for ln in lines if "Unsupported: " in ln]
            if refused:  # the engine refuses a command of the stream
                raise Refused(refused[-1].split("Unsupported: ", 1)[1])
            tail = "\n".join(lines[-5:])
            raise RuntimeError(f"{engine} on {workload} failed before counting:\n{tail}")


def _child(engine: str, workload: str, scale: float, out: str) -> None:
    """Run under valgrind: warm ``engine`` with one replay of the stream, then count a
    second replay by a fresh engine; write its checksum and size to ``out`` (JSON)."""
    from lob.engines.registry import get_engine
    from lob.workloads import build as build_workload

    wl = build_workload(workload, scale=scale)
    lib = ctypes.CDLL(str(_requests_library()))
    get_engine(engine, wl.config).replay(wl.commands)
    eng = get_engine(engine, wl.config)
    lib.lob_cg_start()
    res = eng.replay(wl.commands)
    lib.lob_cg_stop()
    Path(out).write_text(json.dumps({"checksum": int(res.checksum),
                                     "commands": len(wl.commands)}))


def _child_env(tomls: Sequence[str | os.PathLike]) -> dict:
    """The children's environment: a fixed hash seed, valgrind's CPU as numba's target, and
    the foreign engine lists of ``tomls`` after those already in ``$LOB_ENGINES_TOML``."""
    env = dict(os.environ, PYTHONHASHSEED="0", **_valgrind_target())
    listed = [p for p in env.get(ENGINES_TOML, "").split(os.pathsep) if p]
    env[ENGINES_TOML] = os.pathsep.join([*listed, *map(str, tomls)])
    return env


def _count_one(engine: str, workload: str, scale: float, timeout: float,
               tomls: Sequence[str | os.PathLike]) -> dict:
    with tempfile.TemporaryDirectory(prefix="lob-callgrind-") as tmp:
        cg = Path(tmp) / "callgrind.out"
        meta = Path(tmp) / "meta.json"
        cmd = ["valgrind", *_OPTIONS, f"--callgrind-out-file={cg}", sys.executable, "-m",
               "lob.diagnose.callgrind", "--child", engine, workload, repr(scale), str(meta)]
        env = _child_env(tomls)
        _prime(engine, workload, scale, env, timeout)
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        if proc.returncode != 0 or not meta.exists():
            mine = [ln for ln in proc.stderr.splitlines() if not ln.startswith("==")]
            tail = "\n".join(mine[-5:])  # the child's own error, not valgrind's summary
            raise RuntimeError(f"callgrind run of {engine} on {workload} failed "
                               f"(exit {proc.returncode}):\n{tail}")
        return {"events": parse(f"{cg}.1"), **json.loads(meta.read_text()),
                "target": env["NUMBA_CPU_NAME"]}


def counts(engines: list[str], workload: str = "lobster_replay", *, scale: float = 1.0,
           base: str | None = None, tomls: Sequence[str | os.PathLike] = (),
           timeout: float = 1800.0) -> pd.DataFrame:
    """Callgrind's counts per command of each engine's ``replay`` of one workload, one row
    per engine.

    Columns: ``engine``, ``workload``, ``commands``, ``target`` (the CPU the counted code
    was compiled for: valgrind's, see the module's notes), the per-command figures of
    :data:`COLUMNS` (``instructions``, ``loads``, ``stores``, ``branches``,
    ``mispredicts``, ``d1_misses``, ``ll_misses``), ``mispredict_rate`` (mispredicts per
    branch), ``checksum``, and against ``base`` (default: the first engine):
    ``instructions_vs_base`` and ``mispredicts_vs_base`` (ratios; exact, not estimates)
    and ``same_work`` (the checksums agree: a ratio between engines that did different work
    is not a comparison). Each engine runs in a child process, which knows the engines of
    ``$LOB_ENGINES_TOML`` and of ``tomls`` (foreign engine lists; an engine registered only
    in this process, such as ``c_book``, needs its list here). RuntimeError when callgrind
    cannot run here (:func:`available`) or an engine's run fails; ValueError for an empty
    engine list or a base not among them.
    """
    from lob.engines.registry import get_engine
    from lob.workloads import build as build_workload

    engines = list(engines)
    if not engines:
        raise ValueError("counts needs at least one engine")
    base = engines[0] if base is None else base
    if base not in engines:
        raise ValueError(f"base {base!r} is not one of the engines counted")
    why = available()
    if why is not None:
        raise RuntimeError(f"callgrind cannot run here: {why}")
    wl = build_workload(workload, scale=scale)
    rows = []
    for name in engines:
        try:  # an engine that refuses the book (a band, an STP mode) refuses it here
            get_engine(name, wl.config)
            got = _count_one(name, workload, scale, timeout, tomls)
        except (ValueError, TypeError, NotImplementedError, Refused) as e:
            if name == base:
                raise
            rows.append({"engine": name, "workload": workload, "commands": len(wl.commands),
                         "note": str(e).splitlines()[0]})
            continue
        ev, n = got["events"], max(1, got["commands"])
        row = {"engine": name, "workload": workload, "commands": got["commands"],
               "target": got["target"]}
        for col, names in COLUMNS.items():
            row[col] = sum(ev.get(e, 0) for e in names) / n
        row["mispredict_rate"] = row["mispredicts"] / row["branches"] if row["branches"] else 0.0
        row["checksum"] = got["checksum"]
        rows.append(row)
    import pandas as pd

    df = pd.DataFrame(rows)
    if "note" not in df:
        df["note"] = None
    b = df[df.engine == base].iloc[0]
    df["instructions_vs_base"] = df.instructions / b.instructions
    df["mispredicts_vs_base"] = df.mispredicts / b.mispredicts if b.mispredicts else float("nan")
    df["same_work"] = df.checksum == b.checksum
    return df


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "--child":
        _child(sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5])
    else:
        sys.exit("usage: python -m lob.diagnose.callgrind --child ENGINE WORKLOAD SCALE OUT")

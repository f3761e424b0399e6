"""Where a compiled kernel's time goes, line by line of its Python source: ``lob hotspots``.

perf samples a child process on its ``cpu-clock`` software event (a timer interrupt: no
hardware counter needed, so it works on a VM whose ``perf stat`` says ``<not supported>``)
while fresh engines replay the stream again and again. Each sample's instruction address is
mapped into the machine code numba compiled for the replay and, through the line table that
``NUMBA_DEBUGINFO=1`` adds to it, to the source line that instruction came from (a helper
inlined into the kernel, such as ``drop`` or ``rest``, keeps its own lines). A line's share
of the kernel's samples is its share of the kernel's time.

How to read it:

* a timer interrupt is taken once the instruction in hand retires, so a sample names the
  instruction *after* the one the core waited on: a load that missed shows on the next
  instruction (sometimes the next source line: on lobster_replay the cancel's id-index load
  of ``node = IDX[...]`` shows on ``qrem += ND[node].qty``), and a mispredicted branch on the
  first instructions of the path it resumes on. ``--asm`` (``instructions`` of each line)
  shows the instructions, so the one before a hot one can be read;
* the sampled kernel is the debug-info build, compiled afresh in the child (into a cache of
  its own, so the user's cache is untouched): the same optimisation level, but its machine
  code can differ in small ways from the cached build's, so its ns/op is given beside the
  lines (the child's own timing under sampling, not a benchmark);
* only numba's compiled code of ``lob.engines`` is mapped; Python, the workload's build and
  numba's compiler are counted in ``samples`` only.

:func:`hotspots` needs ``perf`` (Debian: linux-perf) and ``objdump`` (binutils);
:func:`available` says why not when either is missing or sampling is not permitted.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from lob.engines.compiled.hotspots import (
    compiled_functions,
    instructions_of,
    line_table,
    map_instructions,
    parse_objdump,
    per_line,
    short,
    symbol,
)

__all__ = ["available", "hotspots"]

# samples a second asked of perf: each costs the guest a timer interrupt, which slows the
# sampled kernel, so the default is low and the replays more (docs/decisions/hotspots-rate.md)
FREQUENCY = 4_000
_RECORD = ("perf", "record", "-q", "-e", "cpu-clock")


def available() -> str | None:
    """None when :func:`hotspots` can run here, else why not (one line)."""
    for tool, pkg in (("perf", "linux-perf"), ("objdump", "binutils")):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian: apt-get install {pkg})"
    with tempfile.TemporaryDirectory(prefix="lob-hotspots-") as tmp:
        proc = subprocess.run([*_RECORD, "-o", str(Path(tmp) / "probe.data"), "true"],
                              capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or ["no message"])[0]
        return f"perf cannot sample here (cpu-clock): {why}"
    return None


MAX_SECONDS = 600.0  # kernel seconds a stream is sampled for at most (2.4M samples at 4 kHz)


def _child(engine: str, workload: str, scale: float, seconds: float, out: str) -> None:
    from lob.engines.registry import get_engine
    from lob.workloads import build as build_workload

    wl = build_workload(workload, scale=scale)
    get_engine(engine, wl.config).replay(wl.commands)  # compiles, with debug info
    funcs = compiled_functions(Path(out).parent)
    ns, checksum, spent = [], None, 0
    while not ns or spent < seconds * 1e9:  # fresh engines until the kernel ran `seconds`
        r = get_engine(engine, wl.config).replay(wl.commands)
        ns.append(r.elapsed_ns / len(wl.commands))
        spent += r.elapsed_ns
        checksum = int(r.checksum)
    Path(out).write_text(json.dumps({"functions": funcs, "ns_per_op": ns,
                                     "commands": len(wl.commands), "checksum": checksum}))


# --- the parent --------------------------------------------------------------------------------

def hotspots(engine: str, workload: str = "lobster_replay", *, scale: float = 1.0,
             seconds: float = 2.0, top: int = 25, frequency: int = FREQUENCY,
             timeout: float = 1800.0) -> dict:
    """Sample ``engine``'s compiled kernel while fresh engines replay ``workload`` until the
    kernel has run ``seconds`` (at least one replay; at :data:`FREQUENCY` samples a second of
    CPU time, ``seconds`` sets the samples a stream gets whatever its length), and map the
    samples to source lines (the module's notes say how to read them).

    Returns ``{"engine", "workload", "commands", "reps" (replays run), "samples" (all of the
    child's),
    "kernel_samples" (those in numba's code of lob.engines), "ns_per_op" (median of the
    sampled replays, the debug-info build), "checksum", "functions" ({short name: share}),
    "lines" (:func:`line_table`, each with its most sampled ``instructions``:
    :func:`instructions_of`)}``. RuntimeError when perf cannot run here or the child
    fails; ValueError for an engine that is not numba's (a pure-Python or foreign engine),
    ``seconds`` <= 0, an unknown engine or workload, or a scale out of range, before anything
    runs."""
    from lob.engines.registry import engine_spec
    from lob.workloads import check_scale

    if not 0 < seconds <= MAX_SECONDS:  # nan and inf fail here too
        raise ValueError(f"seconds must be above 0 and at most {MAX_SECONDS:g} (the kernel "
                         f"time sampled), got {seconds}")
    backend = engine_spec(engine).backend  # ValueError for a name no engine has
    if backend != "numba":
        raise ValueError(f"{engine} is a {backend} engine: hotspots maps numba's compiled "
                         f"kernels (the v*@numba engines)")
    check_scale(workload, scale)  # a workload that exists at a scale it can be built at
    why = available()
    if why is not None:
        raise RuntimeError(f"hotspots cannot run here: {why}")
    with tempfile.TemporaryDirectory(prefix="lob-hotspots-") as tmp:
        data, meta = Path(tmp) / "perf.data", Path(tmp) / "meta.json"
        env = dict(os.environ, NUMBA_DEBUGINFO="1", NUMBA_CACHE_DIR=str(Path(tmp) / "cache"))
        cmd = [*_RECORD, "-F", str(frequency), "-o", str(data), "--", sys.executable, "-m",
               "lob.diagnose.hotspots", "--child", engine, workload, repr(scale), repr(seconds),
               str(meta)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                                  env=env)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"sampling {engine} on {workload} did not end within "
                               f"{timeout:g} s; it was stopped") from None
        if proc.returncode != 0 or not meta.exists():
            tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
            raise RuntimeError(f"sampling {engine} on {workload} failed "
                               f"(exit {proc.returncode}):\n{tail}")
        got = json.loads(meta.read_text())
        if not got["functions"]:
            raise ValueError(f"{engine} ran no numba code of lob.engines: nothing to map "
                             f"(hotspots samples the compiled engines, v*@numba)")
        script = subprocess.run(["perf", "script", "-i", str(data), "-F", "ip"],
                                capture_output=True, text=True, timeout=timeout, check=True)
        ips = [int(x, 16) for x in script.stdout.split()]
        code: dict[tuple[str, str], list] = {}
        for obj in sorted({f["object"] for f in got["functions"]}):
            dis = subprocess.run(["objdump", "-d", "-l", "--no-show-raw-insn", obj],
                                 capture_output=True, text=True, check=True).stdout
            for name, insns in parse_objdump(dis).items():
                code[(obj, name)] = insns
    per_insn = map_instructions(ips, got["functions"], code)
    counts = per_line(per_insn, code)
    total = sum(counts.values())
    per_fn: collections.Counter = collections.Counter()
    for (_, _, fn), n in counts.items():
        per_fn[short(symbol(fn))] += n
    ns = sorted(got["ns_per_op"])
    return {"engine": engine, "workload": workload, "commands": got["commands"],
            "reps": len(ns),
            "samples": len(ips), "kernel_samples": total, "ns_per_op": ns[len(ns) // 2],
            "checksum": got["checksum"],
            "functions": {k: n / total for k, n in per_fn.most_common()} if total else {},
            "lines": [{**r, "instructions": instructions_of(per_insn, code, r["path"],
                                                            r["line"])}
                      for r in line_table(counts, total, top)]}


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "--child":
        _child(sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5]), sys.argv[6])
    else:
        sys.exit("usage: python -m lob.diagnose.hotspots --child ENGINE WORKLOAD SCALE SECONDS "
                 "OUT")

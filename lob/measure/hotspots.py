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

import argparse
import ast
import bisect
import collections
import functools
import json
import linecache
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["available", "enclosing", "hotspots", "instructions_of", "line_table",
           "map_instructions", "map_samples", "parse_objdump", "per_line"]

# samples a second asked of perf: each costs the guest a timer interrupt (on this project's VMs
# 10 kHz slowed the kernel by ~25%, so the default is lower and the replays more)
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


# --- the machine code and its line table --------------------------------------------------------

_SYMBOL = re.compile(r"^([0-9a-f]+) <(.+)>:$")
_LOCATION = re.compile(r"^(/\S+\.py):(\d+)(?: \(discriminator \d+\))?$")
_INSN = re.compile(r"^\s+([0-9a-f]+):\s+(.*)$")
_TARGET = re.compile(r"<([^<>+]+)(\+0x[0-9a-f]+)?>")


def parse_objdump(text: str) -> dict[str, list[tuple[int, str, int, str]]]:
    """``objdump -d -l --no-show-raw-insn`` output -> per function symbol, its instructions
    in address order as ``(offset in the object, source file, source line, instruction)``
    (file ``""`` and line 0 where the line table says nothing)."""
    funcs: dict[str, list] = {}
    cur = None
    where = ("", 0)
    for line in text.splitlines():
        m = _SYMBOL.match(line)
        if m:
            cur = funcs.setdefault(m.group(2), [])
            where = ("", 0)
            continue
        m = _LOCATION.match(line.strip())
        if m:
            where = (m.group(1), int(m.group(2)))
            continue
        m = _INSN.match(line)
        if m and cur is not None:
            insn = _TARGET.sub(lambda t: f"<{_short(t.group(1))}{t.group(2) or ''}>",
                               m.group(2).strip())  # a jump's or call's target, by its name
            cur.append((int(m.group(1), 16), where[0], where[1], insn))
    return funcs


def map_instructions(ips, functions: list[dict],
                     code: dict[str, list]) -> collections.Counter:
    """Count samples per ``(function, index of the instruction in code[function])``: ``ips``
    are sampled instruction addresses; ``functions`` the compiled functions as ``{"name",
    "address", "size", "offset"}`` and optionally ``"object"`` (run-time address, size in
    bytes, offset of the symbol in its object file); ``code`` their instructions
    (:func:`parse_objdump`), keyed by ``(object, name)`` where functions name their object
    (two libraries can each hold a copy of one symbol, at other offsets), else by name. A
    sample maps to the instruction at or before its address; one outside every function is
    not counted. The function of each key is that key of ``code``."""
    by_start = {}  # one function an address: a symbol two libraries both hold resolves once
    for f in functions:
        by_start.setdefault(f["address"], f)
    spans = [(a, a + f["size"], f) for a, f in sorted(by_start.items())]
    starts = [s[0] for s in spans]
    offsets = {key: [i[0] for i in insns] for key, insns in code.items()}
    got: collections.Counter = collections.Counter()
    for ip in ips:
        k = bisect.bisect_right(starts, ip) - 1
        if k < 0 or ip >= spans[k][1]:
            continue
        f = spans[k][2]
        key = (f["object"], f["name"]) if "object" in f else f["name"]
        if not code.get(key):
            continue
        j = bisect.bisect_right(offsets[key], f["offset"] + ip - f["address"]) - 1
        if j >= 0:
            got[(key, j)] += 1
    return got


def _symbol(key) -> str:
    """The symbol of a ``code`` key (a name, or ``(object, name)``)."""
    return key[1] if isinstance(key, tuple) else key


def map_samples(ips, functions: list[dict], code: dict[str, list]) -> collections.Counter:
    """Count samples per ``(file, line, function)`` (:func:`map_instructions`, each
    instruction's samples given to its source line)."""
    return per_line(map_instructions(ips, functions, code), code)


def per_line(per_insn: collections.Counter, code: dict[str, list]) -> collections.Counter:
    """Per-instruction counts (:func:`map_instructions`) summed per ``(file, line,
    function)``."""
    got: collections.Counter = collections.Counter()
    for (fn, j), n in per_insn.items():
        _, path, line, _ = code[fn][j]
        got[(path, line, fn)] += n
    return got


def instructions_of(per_insn: collections.Counter, code: dict[str, list], path: str,
                    line: int, most: int = 6) -> list[dict]:
    """The sampled instructions of one source line, most samples first (at most ``most``):
    ``{"function", "offset", "insn", "samples"}`` (offset in the function's object)."""
    rows = [{"function": _short(_symbol(fn)), "offset": code[fn][j][0],
             "insn": code[fn][j][3], "samples": n} for (fn, j), n in per_insn.items()
            if code[fn][j][1] == path and code[fn][j][2] == line]
    rows.sort(key=lambda r: (-r["samples"], r["offset"]))
    return rows[:most]


def _short(symbol: str) -> str:
    """A numba symbol's Python name: ``_ZN3lob...kernel_v43runB...`` -> ``kernel_v4.run``."""
    parts, s = [], symbol.removeprefix("_ZN")
    while s and s[0].isdigit():
        m = re.match(r"(\d+)", s)
        n = int(m.group(1))
        parts.append(s[len(m.group(1)):len(m.group(1)) + n])
        s = s[len(m.group(1)) + n:]
    if not parts:
        return symbol
    name = re.sub(r"B\d+v\d+.*$", "", parts[-1])  # numba's specialisation suffix
    return ".".join(parts[-2:-1] + [name])


@functools.cache
def _definitions(path: str) -> tuple[tuple[int, int, str], ...]:
    """``(first line, last line, name)`` of every function defined in a source file,
    innermost last among those that nest."""
    try:
        tree = ast.parse(Path(path).read_text())
    except (OSError, SyntaxError, ValueError):
        return ()
    return tuple(sorted((n.lineno, n.end_lineno or n.lineno, n.name) for n in ast.walk(tree)
                        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))))


def enclosing(path: str, line: int) -> str | None:
    """The name of the innermost function whose source holds ``line``, or None (a line of
    the module itself: numba tags the instructions that materialise a module-level constant,
    such as an outcome code, with the line that defines or imports it)."""
    name = None
    for first, last, n in _definitions(path):
        if first <= line <= last:
            name = n
    return name


def line_table(counts: collections.Counter, total: int, top: int = 25) -> list[dict]:
    """The ``top`` source lines by samples: ``{"share", "samples", "path", "line", "where",
    "function", "code"}`` (share of ``total``, the kernel's samples; ``where`` as
    ``file.py:line``;
    ``function`` the Python function the line is in: an inlined helper is named as itself,
    and a module-level line (a constant) as ``(module constant)``). Counts of the same line
    from several compiled functions are added."""
    by_line: collections.Counter = collections.Counter()
    for (path, line, _), n in counts.items():
        by_line[(path, line)] += n
    rows = []
    for (path, line), n in by_line.most_common(top):
        # the line as written, less a continuation backslash (it would escape a table's bar)
        code = linecache.getline(path, line).strip().removesuffix("\\").rstrip() if path else ""
        fn = enclosing(path, line) if path else None
        rows.append({"share": n / total if total else 0.0, "samples": n, "path": path,
                     "line": line, "where": f"{Path(path).name}:{line}" if path else "(no line)",
                     "function": fn or ("(module constant)" if path else "(unknown)"),
                     "code": code})
    return rows


# --- the child: compile with debug info, report the code, replay under perf ---------------------

def _compiled_functions(out_dir: Path) -> list[dict]:
    """Every function numba compiled for ``lob.engines`` in this process: name, run-time
    address, size and symbol offset, its object file written to ``out_dir``."""
    from numba.core.registry import CPUDispatcher

    seen, funcs = set(), []
    for mod_name, mod in list(sys.modules.items()):
        if not mod_name.startswith("lob.engines") or mod is None:
            continue
        for obj in list(vars(mod).values()):
            if not isinstance(obj, CPUDispatcher):
                continue
            for cres in obj.overloads.values():
                lib = cres.library
                if id(lib) in seen:
                    continue
                seen.add(id(lib))
                try:
                    blob = lib._get_compiled_object()  # numba's object code of the library
                except Exception:  # noqa: BLE001 - a library loaded from a cache has none
                    continue
                path = out_dir / f"lib{len(seen)}.o"
                path.write_bytes(blob)
                table = subprocess.run(["objdump", "-t", str(path)], capture_output=True,
                                       text=True, check=True).stdout
                for row in table.splitlines():
                    p = row.split()
                    if len(p) >= 6 and "F" in p[2:4] and p[-2] != "0000000000000000":
                        try:
                            addr = lib.get_pointer_to_function(p[-1])
                        except Exception:  # noqa: BLE001 - not resolvable: not mapped
                            continue
                        if addr:
                            funcs.append({"name": p[-1], "address": int(addr),
                                          "size": int(p[-2], 16), "offset": int(p[0], 16),
                                          "object": str(path)})
    return funcs


MAX_SECONDS = 600.0  # kernel seconds a stream is sampled for at most (2.4M samples at 4 kHz)


def _child(engine: str, workload: str, scale: float, seconds: float, out: str) -> None:
    from lob.engines.registry import get_engine
    from lob.workloads import build as build_workload

    wl = build_workload(workload, scale=scale)
    get_engine(engine, wl.config).replay(wl.commands)  # compiles, with debug info
    funcs = _compiled_functions(Path(out).parent)
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
               "lob.measure.hotspots", "--child", engine, workload, repr(scale), repr(seconds),
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
        per_fn[_short(_symbol(fn))] += n
    ns = sorted(got["ns_per_op"])
    return {"engine": engine, "workload": workload, "commands": got["commands"],
            "reps": len(ns),
            "samples": len(ips), "kernel_samples": total, "ns_per_op": ns[len(ns) // 2],
            "checksum": got["checksum"],
            "functions": {k: n / total for k, n in per_fn.most_common()} if total else {},
            "lines": [{**r, "instructions": instructions_of(per_insn, code, r["path"],
                                                            r["line"])}
                      for r in line_table(counts, total, top)]}


def _cmd(args) -> int:
    why = available()
    if why is not None:
        print(f"lob hotspots: {why}", file=sys.stderr)
        return 2
    try:
        h = hotspots(args.engine, args.workload, scale=args.scale, seconds=args.seconds,
                     top=args.top)
    except (RuntimeError, ValueError, KeyError) as e:
        print(f"lob hotspots: error: {e}", file=sys.stderr)
        return 1
    print(f"{h['engine']} on {h['workload']} ({h['commands']:,} commands), {h['reps']} "
          f"replays sampled by perf's cpu-clock: {h['kernel_samples']:,} of {h['samples']:,} "
          f"samples in the compiled kernel; the debug-info build ran "
          f"{h['ns_per_op']:.1f} ns/op under sampling")
    print("functions: " + ", ".join(f"{k} {v:.1%}" for k, v in h["functions"].items()))
    print(f"{'share':>6}  {'line':<18} {'function':<22} source")
    for r in h["lines"]:
        print(f"{r['share']:6.1%}  {r['where']:<18} {r['function']:<22} {r['code']}")
        if args.asm:
            for i in r["instructions"]:
                print(f"{'':8}{i['samples'] / h['kernel_samples']:6.1%}  {i['function']}"
                      f"+{i['offset']:#x}  {i['insn']}")
    return 0


def add_parsers(sub) -> None:
    """Register ``lob hotspots`` on the ``lob`` CLI's subparsers."""
    s = sub.add_parser("hotspots", help="where a compiled engine's kernel spends its time, "
                       "source line by source line (perf's cpu-clock samples)",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    s.add_argument("engine", help="a compiled engine (see `lob engines`), e.g. v5@numba")
    s.add_argument("--workload", default="lobster_replay", help="workload name")
    s.add_argument("--scale", type=float, default=1.0, help="workload scale")
    s.add_argument("--seconds", type=float, default=2.0,
                   help="kernel time sampled (fresh engines replay until it has run this long)")
    s.add_argument("--top", type=int, default=25, help="lines shown")
    s.add_argument("--asm", action="store_true",
                   help="under each line, its most sampled machine instructions")
    s.set_defaults(func=_cmd)


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "--child":
        _child(sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5]), sys.argv[6])
    else:
        sys.exit("usage: python -m lob.measure.hotspots --child ENGINE WORKLOAD SCALE SECONDS "
                 "OUT")

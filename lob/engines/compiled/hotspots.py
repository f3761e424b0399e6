"""Where a numba kernel's time goes, line by line of its Python source: the machine code numba
compiled for ``lob.engines`` in this process (read through numba's dispatcher and library
internals, so it lives beside the kernels it reads), objdump's line table of it, and
sampled instruction addresses mapped onto source lines. :mod:`lob.diagnose.hotspots` runs
the sampler (perf) and the command ``lob hotspots``; its notes say how to read the lines.

Needs ``objdump`` (binutils) for :func:`compiled_functions` and the disassembly it maps.
"""

from __future__ import annotations

import ast
import bisect
import collections
import functools
import linecache
import re
import subprocess
import sys
from pathlib import Path

__all__ = ["compiled_functions", "enclosing", "instructions_of", "line_table",
           "map_instructions", "map_samples", "parse_objdump", "per_line", "short", "symbol"]


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
            insn = _TARGET.sub(lambda t: f"<{short(t.group(1))}{t.group(2) or ''}>",
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


def symbol(key) -> str:
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
    rows = [{"function": short(symbol(fn)), "offset": code[fn][j][0],
             "insn": code[fn][j][3], "samples": n} for (fn, j), n in per_insn.items()
            if code[fn][j][1] == path and code[fn][j][2] == line]
    rows.sort(key=lambda r: (-r["samples"], r["offset"]))
    return rows[:most]


def short(symbol: str) -> str:
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


# --- the compiled code of this process ----------------------------------------------------------

def compiled_functions(out_dir: Path) -> list[dict]:
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

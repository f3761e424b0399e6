"""lob.engines.compiled.hotspots: objdump's line table, samples mapped to source lines, numba's
symbols read as Python names."""

import collections

import pytest

from lob.engines.compiled import hotspots as hs

OBJDUMP = """
/tmp/lib1.o:     file format elf64-x86-64


Disassembly of section .ltext:

0000000000000000 <_ZN3lob7engines8compiled9kernel_v43runB2v9B40xyzE5Array>:
_ZN3lob7engines8compiled9kernel_v43runB2v9B40xyzE5Array():
/src/k.py:10
       0:\tpush   %rbp
       1:\tmov    %rsp,%rbp
/src/k.py:12 (discriminator 1)
       4:\tadd    $0x1,%rax
       8:\tjmp    4 <_ZN3lob7engines8compiled9kernel_v43runB2v9B40xyzE5Array+0x4>
0000000000000010 <helper>:
      10:\tnop
/src/k.py:20
      11:\tret
"""


def test_parse_objdump_reads_each_functions_instructions_and_lines():
    code = hs.parse_objdump(OBJDUMP)
    run = "_ZN3lob7engines8compiled9kernel_v43runB2v9B40xyzE5Array"
    assert list(code) == [run, "helper"]
    assert code[run] == [(0, "/src/k.py", 10, "push   %rbp"), (1, "/src/k.py", 10,
                         "mov    %rsp,%rbp"), (4, "/src/k.py", 12, "add    $0x1,%rax"),
                         (8, "/src/k.py", 12, "jmp    4 <kernel_v4.run+0x4>")]
    # a new symbol starts with no line until the table gives one
    assert code["helper"] == [(0x10, "", 0, "nop"), (0x11, "/src/k.py", 20, "ret")]


def test_samples_map_to_the_instruction_at_or_before_their_address():
    code = hs.parse_objdump(OBJDUMP)
    run = next(iter(code))
    functions = [{"name": run, "address": 0x7000, "size": 0x10, "offset": 0},
                 {"name": "helper", "address": 0x9000, "size": 2, "offset": 0x10},
                 {"name": "helper", "address": 0x9000, "size": 2, "offset": 0x10}]  # twice
    ips = [0x7000, 0x7003,  # line 10 (0x7003 lies inside the mov at offset 1)
           0x7004, 0x7008, 0x700f,  # line 12
           0x9001,  # helper's ret: line 20
           0x9000,  # helper's nop: no line
           0x6fff, 0x7010, 0x9002]  # outside every function: not counted
    got = hs.map_samples(ips, functions, code)
    assert got == collections.Counter({("/src/k.py", 10, run): 2, ("/src/k.py", 12, run): 3,
                                       ("/src/k.py", 20, "helper"): 1, ("", 0, "helper"): 1})
    assert hs.map_samples([], functions, code) == collections.Counter()
    per = hs.map_instructions(ips, functions, code)
    assert per == collections.Counter({(run, 0): 1, (run, 1): 1, (run, 2): 1, (run, 3): 2,
                                       ("helper", 1): 1, ("helper", 0): 1})
    # a line's sampled instructions, most samples first, named by their Python function
    assert hs.instructions_of(per, code, "/src/k.py", 12) == [
        {"function": "kernel_v4.run", "offset": 8, "insn": "jmp    4 <kernel_v4.run+0x4>",
         "samples": 2},
        {"function": "kernel_v4.run", "offset": 4, "insn": "add    $0x1,%rax", "samples": 1}]
    assert hs.instructions_of(per, code, "/src/k.py", 12, most=1)[0]["offset"] == 8
    assert hs.instructions_of(per, code, "/src/k.py", 99) == []


def test_a_symbol_two_objects_hold_maps_through_its_own_objects_code():
    """numba links a callee into its caller's library as well as into its own: the same name
    at another offset in another object. Each run-time copy maps through its own object."""
    one = hs.parse_objdump(OBJDUMP)
    other = {"helper": [(0x400, "/src/other.py", 7, "nop"), (0x401, "/src/other.py", 8, "ret")]}
    code = {("a.o", n): v for n, v in one.items()} | {("b.o", n): v for n, v in other.items()}
    functions = [{"name": "helper", "object": "a.o", "address": 0x9000, "size": 2,
                  "offset": 0x10},
                 {"name": "helper", "object": "b.o", "address": 0x5000, "size": 2,
                  "offset": 0x400}]
    got = hs.map_samples([0x9001, 0x5000, 0x5001, 0x5001], functions, code)
    assert got == collections.Counter({("/src/k.py", 20, ("a.o", "helper")): 1,
                                       ("/src/other.py", 7, ("b.o", "helper")): 1,
                                       ("/src/other.py", 8, ("b.o", "helper")): 2})
    per = hs.map_instructions([0x5001], functions, code)
    assert hs.instructions_of(per, code, "/src/other.py", 8) == [
        {"function": "helper", "offset": 0x401, "insn": "ret", "samples": 1}]


def test_line_table_names_the_python_function_of_each_line(tmp_path):
    src = tmp_path / "kern.py"
    src.write_text("CODE = 7\n"                      # 1: a module constant
                   "def outer(x):\n"                 # 2
                   "    y = x + CODE\n"              # 3
                   "    def inner(z):\n"             # 4
                   "        return z * 2\n"          # 5
                   "    return inner(y) + \\\n"    # 6: continued
                   "        0\n")                      # 7
    p = str(src)
    counts = collections.Counter({(p, 3, "sym_a"): 5, (p, 5, "sym_a"): 3, (p, 5, "sym_b"): 4,
                                  (p, 1, "sym_a"): 2, ("", 0, "sym_a"): 1})
    rows = hs.line_table(counts, total=15, top=10)
    # the same line from two compiled functions is one row; ordered by samples
    assert [(r["where"], r["samples"], r["function"]) for r in rows] == [
        ("kern.py:5", 7, "inner"), ("kern.py:3", 5, "outer"), ("kern.py:1", 2,
                                                                "(module constant)"),
        ("(no line)", 1, "(unknown)")]
    assert rows[0]["code"] == "return z * 2" and rows[0]["share"] == pytest.approx(7 / 15)
    assert [r["where"] for r in hs.line_table(counts, total=15, top=2)] == ["kern.py:5",
                                                                          "kern.py:3"]
    assert hs.enclosing(p, 6) == "outer" and hs.enclosing(p, 1) is None
    cont = hs.line_table(collections.Counter({(p, 6, "sym_a"): 1}), total=1)
    assert cont[0]["code"] == "return inner(y) +"  # no continuation backslash


def test_numba_symbols_read_as_python_names():
    assert hs.short("_ZN3lob7engines8compiled9kernel_v43runB2v9B40c8tJTIeFIjxE5Array") == \
        "kernel_v4.run"
    assert hs.short("cfunc._ZN3lob3runE") == "cfunc._ZN3lob3runE"  # not numba's: as it is

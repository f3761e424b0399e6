"""The shape of the package, read from the source with ``ast``: no import cycle anywhere in
``lob/`` (module-level and function-level imports, and modules imported by name from a
string), and no reach into engine internals from measurement, the pipeline or the
experiments (only the ``Engine`` protocol)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

LOB = Path(__file__).resolve().parents[2] / "lob"
PROTOCOL_USERS = ("workloads", "measure", "diagnose", "pipeline", "studies", "experiments")
# the package order: a module may import its own layer and the layers before it, never after
# (at module or function level). lob/__init__ (the facade) and lob/cli/ sit above all.
LAYERS = ("semantics", "engines", "workloads", "measure", "diagnose", "pipeline", "studies",
          "experiments")
BOTTOM = ("_version", "paths", "system", "semantics")


# --- import graph --------------------------------------------------------------------------

def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of import nodes under ``if TYPE_CHECKING:`` (never executed)."""
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in node.body:
                skip.update(id(n) for n in ast.walk(sub))
    return skip


def _imported_by_name(tree: ast.AST, files) -> set[int]:
    """ids of string constants naming a module that the code imports by name: the argument
    of ``import_module``/``__import__``, or a tuple/list of module names (the registry's
    MEMBERS, the CLI's subcommand modules, fed to ``import_module``)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            arg = node.args[0]
            if name in ("import_module", "__import__") and isinstance(arg, ast.Constant):
                found.add(id(arg))
        elif isinstance(node, ast.Tuple | ast.List) and node.elts and all(
                isinstance(e, ast.Constant) and e.value in files for e in node.elts):
            found.update(id(e) for e in node.elts)
    return found


# programs run as script files against another revision's lob (not imported by lob): their
# ``import lob`` is that revision's facade, outside this checkout's import graph
RUN_ELSEWHERE = ("lob.studies.gitbisect.probe",)


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> modules of ``root``'s package it imports, at any depth of the code."""
    files = {_module_name(root, p): p for p in root.rglob("*.py")}
    files = {m: p for m, p in files.items() if m not in RUN_ELSEWHERE}
    pkg = root.name
    graph: dict[str, set[str]] = {m: set() for m in files}

    def resolve(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    for mod, path in files.items():
        tree = ast.parse(path.read_text(), str(path))
        skip = _type_checking_nodes(tree)
        by_name = _imported_by_name(tree, files)
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = mod.split(".")
                    anchor = anchor[: len(anchor) - node.level + (1 if is_pkg else 0)]
                    base = ".".join(anchor + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base
                           for a in node.names]
            elif id(node) in by_name:
                targets = [node.value]
            for t in targets:
                if t == pkg or t.startswith(pkg + "."):
                    r = resolve(t)
                    if r and r != mod:
                        graph[mod].add(r)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path (first node repeated at the end), or None."""
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                return stack[stack.index(n):] + [n]
            if n not in state:
                found = visit(n)
                if found:
                    return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def test_lob_import_graph_has_no_cycle():
    graph = import_graph(LOB)
    assert len(graph) > 40 and "lob.engines.registry" in graph["lob.engines"]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_cycle_finder_sees_function_level_and_relative_imports(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from pkg.sub.b import g\n")
    (pkg / "a.py").write_text("def f():\n    from pkg.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def g():\n    from .. import a\n")
    assert find_cycle(import_graph(pkg)) == ["pkg.a", "pkg.sub.b", "pkg.a"]
    (pkg / "sub" / "b.py").write_text("from typing import TYPE_CHECKING\n"
                                      "if TYPE_CHECKING:\n    from pkg import a\n")
    assert find_cycle(import_graph(pkg)) is None
    (pkg / "sub" / "b.py").write_text("import importlib\n"
                                      "def g():\n    importlib.import_module('pkg.a')\n")
    assert find_cycle(import_graph(pkg)) == ["pkg.a", "pkg.sub.b", "pkg.a"]


def test_no_internal_module_imports_the_facade():
    """``import lob`` inside lob is how measure/* used to get a version string (a cycle)."""
    graph = import_graph(LOB)
    users = sorted(m for m, deps in graph.items() if "lob" in deps)
    assert users == []


# --- package order -----------------------------------------------------------------------

def layer(module: str) -> int | None:
    """The rank of a module in the package order; None for the facade and the CLI (top)."""
    parts = module.split(".")
    if len(parts) < 2 or parts[1] == "cli":
        return None
    if parts[1] in BOTTOM:
        return 0
    return LAYERS.index(parts[1]) if parts[1] in LAYERS else None


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for mod, deps in sorted(graph.items()):
        mine = layer(mod)
        if mine is None:
            continue
        for d in sorted(deps):
            theirs = layer(d)
            if theirs is None or theirs > mine:
                bad.append(f"{mod} -> {d}")
    return bad


def test_every_lob_module_has_a_place_in_the_order():
    graph = import_graph(LOB)
    homeless = [m for m in graph if layer(m) is None and m != "lob"
                and m.split(".")[1] != "cli"]
    assert homeless == []


def test_no_module_imports_up_the_package_order():
    assert upward_imports(import_graph(LOB)) == []


def test_package_order_check_fails_on_a_planted_upward_import(tmp_path):
    import shutil

    pkg = tmp_path / "lob"
    shutil.copytree(LOB, pkg, ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.c"))
    assert upward_imports(import_graph(pkg)) == []
    hook = pkg / "workloads" / "rng.py"
    hook.write_text(hook.read_text() + "\n\ndef _planted():\n"
                    "    from lob.measure.clock import calibrate  # noqa\n")
    assert upward_imports(import_graph(pkg)) == ["lob.workloads.rng -> lob.measure.clock"]
    hook = pkg / "diagnose" / "hiccup.py"
    hook.write_text(hook.read_text() + "\nimport lob.studies.conclude  # noqa\n")
    assert "lob.diagnose.hiccup -> lob.studies.conclude" in upward_imports(import_graph(pkg))
    hook = pkg / "measure" / "stats.py"  # measurement sits below the diagnostics
    hook.write_text(hook.read_text() + "\n\ndef _planted():\n"
                    "    from lob.diagnose import probes  # noqa\n")
    assert "lob.measure.stats -> lob.diagnose.probes" in upward_imports(import_graph(pkg))


# --- engine internals -----------------------------------------------------------------------

def engine_private_names() -> set[str]:
    """Every underscore attribute an engine class defines: methods and ``self._x`` stores."""
    names = set()
    for path in (LOB / "engines").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                for sub in ast.walk(node):
                    if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef):
                        names.add(sub.name)
                    elif (isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Store)
                          and isinstance(sub.value, ast.Name) and sub.value.id == "self"):
                        names.add(sub.attr)
    return {n for n in names if n.startswith("_") and not n.endswith("__")}


def private_engine_uses(source: str, private: set[str]) -> list[str]:
    """``x._name`` reads/writes and ``getattr/hasattr/setattr(x, "_name")`` on anything but
    ``self``/``cls`` or an imported module, for the underscore names engines define."""
    tree = ast.parse(source)
    modules = {"self", "cls"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update((a.asname or a.name).split(".")[0] for a in node.names)
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in private:
            base = node.value
            if not (isinstance(base, ast.Name) and base.id in modules):
                bad.append(f"{node.lineno}: {ast.unparse(node)}")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("getattr", "hasattr", "setattr", "delattr")
              and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
              and node.args[1].value in private):
            bad.append(f"{node.lineno}: {ast.unparse(node)}")
    return bad


def test_engine_private_names_are_found():
    private = engine_private_names()
    assert {"_fills", "_submit", "_prepare", "_run", "_G", "_lv"} <= private


@pytest.mark.parametrize("where", PROTOCOL_USERS)
def test_protocol_users_touch_no_engine_internals(where):
    private = engine_private_names()
    bad = {str(p.relative_to(LOB.parent)): found for p in sorted((LOB / where).rglob("*.py"))
           if (found := private_engine_uses(p.read_text(), private))}
    assert bad == {}


def test_internals_checker_fails_on_the_old_code():
    private = engine_private_names()
    old = ("def capture(engine, rows):\n"
           "    engine._fills = []\n"
           "    if hasattr(engine, '_exec'):\n"
           "        return engine._prepare(rows)\n"
           "    return self._fills\n")
    assert private_engine_uses(old, private | {"_exec"}) == [
        "2: engine._fills", "3: hasattr(engine, '_exec')", "4: engine._prepare"]


def test_only_the_cli_package_parses_command_lines():
    """argparse and subcommand registration live in lob/cli/, one module per command group;
    domain modules expose functions (a child process's ``__main__`` reads its fixed argv)."""
    bad = []
    for path in sorted(LOB.rglob("*.py")):
        if path.relative_to(LOB).parts[0] == "cli":
            continue
        text = path.read_text()
        if "import argparse" in text or "add_parser(" in text or "def add_parsers" in text:
            bad.append(str(path.relative_to(LOB.parent)))
    assert bad == []
    groups = {p.stem for p in (LOB / "cli").glob("*.py")} - {"__init__", "__main__"}
    from lob.cli import GROUPS

    assert sorted(m.rsplit(".", 1)[1] for m in GROUPS) == sorted(groups)

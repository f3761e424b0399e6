"""The notebooks: each has an experiment definition, no committed outputs, nbval coverage,
a documented parameters cell whose defaults are the ``quick`` preset, and runs at that preset."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from lob.experiments import (
    MARKER,
    experiment_names,
    get_experiment,
    notebook_parameters,
    run_batch,
)

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
EXPERIMENTS = experiment_names()
NB_IDS = [p.stem for p in NOTEBOOKS]


def test_there_are_notebooks_and_experiments():
    assert NOTEBOOKS and EXPERIMENTS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=NB_IDS)
def test_notebook_has_an_experiment_definition(path):
    defined = {get_experiment(n).notebook for n in EXPERIMENTS}
    assert path.resolve() in defined, f"{path.name} has no experiments/<name>.yaml"


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_definition_points_at_a_notebook(name):
    exp = get_experiment(name)
    assert exp.notebook.exists(), f"{name}.yaml names a missing notebook {exp.notebook}"
    assert exp.description and exp.tags


@pytest.mark.parametrize("path", NOTEBOOKS, ids=NB_IDS)
def test_committed_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    dirty = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"
             and (c.get("outputs") or c.get("execution_count") is not None)]
    assert not dirty, f"{path.name}: cells {dirty} carry outputs; clear them before committing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=NB_IDS)
def test_no_cell_opts_out_of_nbval(path):
    nb = nbformat.read(path, as_version=4)
    for i, c in enumerate(nb.cells):
        tags = c.metadata.get("tags", [])
        assert "nbval-skip" not in tags and "NBVAL_SKIP" not in c.source, f"cell {i} skips nbval"


def test_nbval_collects_every_notebook():
    """`pytest --nbval-lax notebooks/` (CI) must see each notebook: no notebook goes unrun."""
    r = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "--nbval-lax",
                        "-p", "no:cacheprovider", "notebooks/"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    collected = {line.split("::")[0] for line in r.stdout.splitlines() if "::" in line}
    missing = [p.name for p in NOTEBOOKS if f"notebooks/{p.name}" not in collected]
    assert not missing, f"nbval does not collect {missing}"


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_parameters_documented_and_quick_is_the_default(name):
    """nbval runs the notebook as committed, so its defaults must be the quick preset."""
    exp = get_experiment(name)
    params = notebook_parameters(exp.notebook)
    assert "out_dir" in params
    for p, spec in params.items():
        assert spec["inferred_type_name"] != "None", f"{name}: parameter {p!r} has no type"
        assert spec["help"], f"{name}: parameter {p!r} has no comment"
    defaults = {p: ast.literal_eval(s["default"]) for p, s in params.items()}
    for key, value in exp.presets["quick"].items():
        assert defaults[key] == value, (f"{name}: quick preset {key}={value!r} but the notebook "
                                        f"default is {defaults[key]!r}")
    for preset in ("default", "full"):
        exp.param_sets(preset)  # every preset (and grid point) validates against the cell


# nbval runs every notebook once in `make test` (tests/notebooks/test_claims_outputs.py reads what it
# wrote); through the runner, with its artifacts checked, under `make test-extended`
@pytest.mark.extended
@pytest.mark.parametrize("name", EXPERIMENTS)
def test_runs_at_quick_preset(name, tmp_path):
    """Papermill run through the runner: executed notebook, .hgrm, summary, PNG, marker."""
    assert run_batch([name], "quick", artifacts=tmp_path, progress=False) == 0
    (run,) = (tmp_path / name).iterdir()
    assert (run / MARKER).exists()
    assert (run / f"{name}.ipynb").exists()
    assert list(run.glob("*.hgrm")) and list(run.glob("*.png"))
    s = json.loads((run / "summary.json").read_text())
    assert s["conclusion"] and s["key_table"] in s["tables"] and s["conditions"]
    assert s["tables"][s["key_table"]], "key table is empty"


def _say_literal_numbers(src: str) -> list[tuple[str, str]]:
    """(number, literal) for each number written into a ``.say(...)`` sentence's literal text
    that no other string literal of the cell (a column name, a dict key) also holds."""
    from lob.studies.conclude import numbers_in

    tree = ast.parse(src)
    in_say, elsewhere = [], set()
    said = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "say":
            for sub in ast.walk(node):
                if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                    in_say.append(sub.value)
                    said.add(id(sub))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and id(node) not in said:
            elsewhere |= numbers_in(node.value)
    return [(n, s) for s in in_say for n in sorted(numbers_in(s) - elsewhere)]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_sentences_write_no_number_of_their_own(path):
    """A conclusion quotes its table; a number typed into a sentence's text (not a cell, not a
    column name) is caught here in every branch, not only in the branches a run takes."""
    nb = nbformat.read(path, as_version=4)
    bad = [(i, hit) for i, c in enumerate(nb.cells) if c.cell_type == "code"
           for hit in _say_literal_numbers(c.source)]
    assert not bad, bad


def test_sentence_number_check_catches_a_typed_number():
    src = 'c.say(f"{x} lies within a factor 2 of it")\nc.say("over 10 µs")\nk = "> 10 µs"'
    assert _say_literal_numbers(src) == [("2", " lies within a factor 2 of it")]


# --- notebooks are views: the logic lives in lob.studies, where unit tests reach it -----------

MAX_CODE_LINES = 80


def _code_cells(nb) -> list[tuple[int, str, bool]]:
    """(index, source, is the parameters cell) of every code cell."""
    return [(i, c.source, "parameters" in c.metadata.get("tags", []))
            for i, c in enumerate(nb.cells) if c.cell_type == "code"]


def code_lines(src: str) -> int:
    """Lines of code: not blank, not a comment, not a cell magic."""
    return sum(1 for ln in src.splitlines()
               if ln.strip() and not ln.strip().startswith(("#", "%", "!")))


def view_violations(src: str, *, parameters: bool = False) -> list[str]:
    """What makes a cell more than a view: a definition (def, class, lambda), or a number
    typed into the code (any numeric literal but 0 and 1; the parameters cell may hold them)."""
    bad = []
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            bad.append(f"line {node.lineno}: {type(node).__name__.lower()} in a notebook")
        elif (not parameters and isinstance(node, ast.Constant)
              and isinstance(node.value, int | float) and not isinstance(node.value, bool)
              and node.value not in (0, 1)):
            bad.append(f"line {node.lineno}: the number {node.value!r} typed into a cell")
    return sorted(bad, key=lambda b: int(b.split(":")[0].removeprefix("line ")))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=NB_IDS)
def test_notebook_is_a_view(path):
    nb = nbformat.read(path, as_version=4)
    cells = _code_cells(nb)
    total = sum(code_lines(src) for _, src, _ in cells)
    assert total <= MAX_CODE_LINES, f"{path.name}: {total} code lines (at most {MAX_CODE_LINES})"
    bad = {i: v for i, src, par in cells if (v := view_violations(src, parameters=par))}
    assert not bad, f"{path.name}: {bad}"


def test_view_check_catches_definitions_and_typed_numbers():
    assert code_lines("x = 1\n\n# note\n%matplotlib inline\ny = 2\n") == 2
    src = "def f(x):\n    return x\ng = lambda y: y\nclass A: pass\nt = table(rows, 0.05)\n"
    assert view_violations(src) == ["line 1: functiondef in a notebook",
                                    "line 3: lambda in a notebook",
                                    "line 4: classdef in a notebook",
                                    "line 5: the number 0.05 typed into a cell"]
    assert view_violations("scale: float = 0.002  # size", parameters=True) == []
    assert view_violations("s = Study.start(out_dir, 'x'); t = s.add(table(rows[1:], 0))") == []


# --- sentences in the study modules quote their tables too ---------------------------------------

STUDY_MODULES = sorted((ROOT / "lob" / "studies").glob("*.py"))


@pytest.mark.parametrize("path", STUDY_MODULES, ids=lambda p: p.stem)
def test_study_sentences_write_no_number_of_their_own(path):
    """The same check as the notebooks', function by function in lob/studies."""
    tree = ast.parse(path.read_text())
    bad = [(f.name, hit) for f in ast.walk(tree)
           if isinstance(f, ast.FunctionDef) for hit in _say_literal_numbers(ast.unparse(f))]
    assert not bad, bad

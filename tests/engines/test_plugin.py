"""An engine from another installed package: ``examples/py_engine`` (``lob-listbook``) is
pip-installed into a throwaway folder (never into the user's environment) put on the path of
this process and its children, found through the ``lob.engines`` entry point, held to
``reference`` on the fuzz streams and run through a notebook by name."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

import lob
from lob.engines import registry

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "py_engine"
DIST = "lob-listbook"


_TARGET: list[Path] = []  # the throwaway folder the example is installed into
_BEFORE: list[set] = []  # the environment's lob_listbook files before the install


def _in_environment() -> set:
    return {str(p) for p in Path(sys.prefix).rglob("lob_listbook*")}


@pytest.fixture(scope="module")
def listbook(tmp_path_factory):
    """The example installed with ``pip install --target`` into a temporary folder, which
    goes first on ``sys.path`` (importlib.metadata finds its entry point there) and on the
    children's ``PYTHONPATH``; taken off both, and the registry refreshed, afterwards."""
    src = tmp_path_factory.mktemp("py_engine") / "py_engine"  # the build writes beside it
    shutil.copytree(EXAMPLE, src, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    target = tmp_path_factory.mktemp("site")
    _BEFORE.append(_in_environment())
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                        "--no-build-isolation", "--target", str(target), str(src)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    sys.path.insert(0, str(target))
    _TARGET.append(target)
    try:
        assert "listbook" in registry.refresh()
        yield "listbook"
    finally:
        sys.path.remove(str(target))
        _TARGET.remove(target)
        sys.modules.pop("lob_listbook", None)
        registry.refresh()


def test_installed_only_in_a_throwaway_folder(listbook):
    """Running the tests installs nothing into the environment they run in (issue 44)."""
    dist = metadata.distribution(DIST)
    where = Path(dist.locate_file("lob_listbook/__init__.py")).resolve()
    assert where.is_relative_to(_TARGET[0].resolve()), where
    assert _in_environment() == _BEFORE[0]  # nothing added to (or left in) the environment


def test_listed_by_lob_engines_with_its_source(listbook):
    from lob.cli.engines import engines_table

    spec = registry.engine_spec(listbook)
    assert spec.source.startswith(f"{DIST} (lob_listbook:ENGINES)")
    assert spec.backend == "python" and spec.parent is None
    r = subprocess.run([sys.executable, "-m", "lob.cli", "engines"], capture_output=True,
                       text=True, timeout=120, cwd=ROOT, env=_env())
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("listbook "))
    assert f"[from {DIST}" in line and line in engines_table()


def _env() -> dict:
    import os

    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *map(str, _TARGET), *filter(None, [os.environ.get("PYTHONPATH")])])}


def test_agrees_with_reference_on_the_fuzz_streams(listbook):
    from test_fuzz import GROUPS, assert_same, case_config, reference_run, run_checked, stream

    n = 0
    for group in GROUPS:
        for profile, stp, seed in group:
            res, book = reference_run(profile, stp, seed)
            cmds = stream(profile, stp, seed)
            got = run_checked(listbook, case_config(profile, stp), cmds)
            assert_same(listbook, cmds, (res.outcomes, res.fills, book), got)
            assert lob.get_engine(listbook, case_config(profile, stp)).replay(cmds).checksum \
                == res.checksum
            n += len(cmds)
    assert n >= 50_000


def test_a_fresh_process_runs_a_study_with_it_by_name(listbook, tmp_path):
    """A notebook's kernel is another process: it finds the engine from the package metadata,
    as it finds built-in engines, and the study measures it like any other (tail_analysis's
    procedure, here in a fresh interpreter; the notebook itself runs once, under nbval)."""
    code = ("import json, sys; from lob.studies import tail_analysis as ta; "
            "v = ta.measure_versions([sys.argv[1]], ['add_only', 'mixed_70_20_10'], 0.001, 1, "
            "False, sys.argv[2]); print(json.dumps(v['rows']))")
    r = subprocess.run([sys.executable, "-c", code, listbook, str(tmp_path)], env=_env(),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout.strip().splitlines()[-1])
    assert {x["engine"] for x in rows} == {listbook} and all(x["count"] > 0 for x in rows)
    assert (tmp_path / f"{listbook}__add_only.hgrm").exists()


def test_the_distribution_has_a_name_of_its_own():
    """`import lob` comes from the distribution lob-workbench, and from it alone (PyPI's `lob`
    is a mail API's bindings that also import as `lob`; issue 44)."""
    import tomllib

    got = metadata.packages_distributions()["lob"]
    assert got == ["lob-workbench"], (f"`lob` is provided by {got}: run `make setup` (the "
                                      "distribution was renamed lob-workbench; it drops the "
                                      "old record)")
    assert metadata.version("lob-workbench") == lob.__version__
    (script,) = [e for e in metadata.distribution("lob-workbench").entry_points
                 if e.group == "console_scripts"]
    assert (script.name, script.value) == ("lob", "lob.cli:main")
    example = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())
    assert example["project"]["dependencies"] == ["lob-workbench"]

"""Experiment batches on a Dask cluster: the same artifacts and manifest as the local executor,
parameter grids, timing runs kept apart per host, failures reported, lost workers retried."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import nbformat
import pytest

from lob.cli import main
from lob.experiments import MANIFEST, MARKER, get_experiment, plan, run_batch
from lob.experiments.executors import check_timing_workers

distributed = pytest.importorskip("distributed")

PARAMS_CELL = """\
n: int = 1  # how many rows to write
label: str = "x"  # a free label
fail_on: str = ""  # raise in the notebook when label equals this
kill: str = ""  # "path": kill this kernel's worker once (flag file); "always": every time
out_dir: str = ""  # run directory (set by the runner)
"""

START = """\
import json, os, signal, time
from pathlib import Path
from lob.studies.nb import run_dir, write_summary
out = run_dir(out_dir, "dummy")
t0 = time.time()
"""

FAIL = """\
if label == fail_on:
    raise ValueError(f"planned failure for {label}")
"""

KILL = """\
if kill == "always" or (kill and not Path(kill).exists()):
    if kill != "always":
        Path(kill).write_text(str(os.getppid()))
    os.kill(os.getppid(), signal.SIGKILL)  # the kernel's parent: the Dask worker process
    time.sleep(30)
"""

END = """\
time.sleep(0.3)  # long enough that overlapping runs would overlap
(out / "interval.json").write_text(json.dumps([t0, time.time()]))
write_summary(out, tables={"t": [{"i": i, "label": label} for i in range(n)]},
              conclusion=f"{label}: {n} rows", key_table="t", plots=[])
print(f"rows={n} label={label}")
"""


def _notebook(path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    p = nbformat.v4.new_code_cell(PARAMS_CELL)
    p.metadata["tags"] = ["parameters"]
    nb.cells = [p] + [nbformat.v4.new_code_cell(c) for c in (START, FAIL, KILL, END)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, path)


def _yaml(quick: str, timing: bool = True) -> str:
    return (f"notebook: ../dummy.ipynb\ndescription: dummy\ntags: [test]\n"
            f"timing: {str(timing).lower()}\n"
            f"presets:\n  quick: {quick}\n  default: {{n: 2}}\n  full: {{n: 3}}\n")


@pytest.fixture
def defs(tmp_path, monkeypatch):
    """Dummy experiments over one tiny notebook (run by real papermill)."""
    d = tmp_path / "experiments"
    d.mkdir()
    _notebook(tmp_path / "dummy.ipynb")
    files = {
        "exp_grid": _yaml("{grid: {label: [a, b], n: [1, 2]}}", timing=False),
        "exp_timed": _yaml("{n: 1, grid: {label: [t1, t2]}}"),
        "exp_fail": _yaml("{fail_on: b, grid: {label: [a, b, c]}}"),
        "exp_kill": _yaml(f"{{kill: {tmp_path / 'killed-once'}}}", timing=False),
        "exp_kill_always": _yaml("{kill: always}", timing=False),
    }
    for name, text in files.items():
        (d / f"{name}.yaml").write_text(text)
    monkeypatch.setenv("LOB_EXPERIMENTS_DIR", str(d))
    return tmp_path


@pytest.fixture(scope="module")
def cluster():
    """An existing cluster: 2 worker processes, each (wrongly) offering a timing unit."""
    import dask

    with dask.config.set({"distributed.scheduler.allowed-failures": 1}), \
            distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                     resources={"timing": 1}, dashboard_address=None,
                                     silence_logs=40) as c:
        yield c


def _manifest(art: Path) -> list[dict]:
    return [json.loads(line) for line in (art / MANIFEST).read_text().splitlines()]


def _interval(run: Path) -> tuple[float, float]:
    return tuple(json.loads((run / "interval.json").read_text()))


# --- grids (no kernels) ----------------------------------------------------------------------

def test_grid_expands_on_top_of_the_preset(defs):
    jobs = plan(["exp_grid", "exp_timed"], "quick", None, defs / "art")
    assert [j.params for j in jobs] == [
        {"label": "a", "n": 1}, {"label": "a", "n": 2}, {"label": "b", "n": 1},
        {"label": "b", "n": 2}, {"label": "t1", "n": 1}, {"label": "t2", "n": 1}]
    assert len({j.run_dir for j in jobs}) == 6
    assert [j.timing for j in jobs] == [False] * 4 + [True] * 2
    # an override pins its axis; the other axis still expands
    assert [j.params for j in plan(["exp_grid"], "quick", {"n": 5}, defs / "art")] == [
        {"label": "a", "n": 5}, {"label": "b", "n": 5}]
    # a name given twice is one run, not two writing the same folder
    assert len(plan(["exp_timed", "exp_timed"], "quick", None, defs / "art")) == 2
    with pytest.raises(ValueError, match="grid of 4 runs"):
        get_experiment("exp_grid").params("quick")


@pytest.mark.parametrize("quick,match", [
    ("{grid: {nn: [1, 2]}}", "unknown parameter 'nn'"),
    ("{grid: {n: [1, x]}}", "parameter 'n' must be int"),
    ("{grid: {n: 3}}", "grid axis 'n' must be a non-empty list"),
    ("{grid: {n: []}}", "grid axis 'n' must be a non-empty list"),
    ("{grid: {n: [1, 1]}}", "grid axis 'n' repeats a value"),
    ("{n: 1, grid: {n: [1, 2]}}", r"sets \['n'\] both as a parameter and as a grid axis"),
    ("{grid: [n, 1]}", "'grid' must map parameters to lists"),
])
def test_bad_grid_is_rejected_before_anything_runs(defs, quick, match):
    (defs / "experiments" / "exp_bad.yaml").write_text(_yaml(quick))
    with pytest.raises(ValueError, match=match):
        run_batch(["exp_grid", "exp_bad"], "quick", None, defs / "art", progress=False)
    assert not (defs / "art").exists()


def test_timing_workers_check():
    ok = {"w1": {"host": "h1", "resources": {"timing": 1}}, "w2": {"host": "h1"},
          "w3": {"host": "h2", "resources": {"timing": 1}}}
    check_timing_workers(ok)
    with pytest.raises(ValueError, match="no Dask worker offers the 'timing' resource"):
        check_timing_workers({"w1": {"host": "h1", "resources": {}}})
    with pytest.raises(ValueError, match=r"hosts \{'h1': 2\} offer more than one"):
        check_timing_workers({**ok, "w2": {"host": "h1", "resources": {"timing": 1}}})


# --- on a cluster ----------------------------------------------------------------------------

def _run_view(art: Path, rel: Path) -> dict:
    """What must not depend on the executor: files, tables, run record, notebook outputs
    (paths relative to the artifacts directory)."""
    run = art / rel
    s = json.loads((run / "summary.json").read_text())
    volatile = ("wall_s", "started", "host", "executor", "timing_exclusive")
    s["run"] = {k: v for k, v in s["run"].items() if k not in volatile}
    s.pop("conditions")
    nb = nbformat.read(run / f"{run.parent.name}.ipynb", as_version=4)
    cells = [(c.source, [o.get("text") for o in c.get("outputs", [])]) for c in nb.cells]
    view = {"files": sorted(p.name for p in run.iterdir()), "summary": s, "cells": cells,
            "marker": (run / MARKER).read_text()}
    return json.loads(json.dumps(view).replace(str(art), "<artifacts>"))


def _manifest_view(art: Path) -> list[dict]:
    volatile = ("wall_s", "started", "host", "executor", "timing_exclusive")
    lines = [{k: v for k, v in r.items() if k not in volatile} for r in _manifest(art)]
    for r in lines:
        r["run_dir"] = str(Path(r["run_dir"]).relative_to(art))
    return sorted(lines, key=lambda r: r["run_dir"])


@pytest.mark.ci  # make test-ci: a local dask cluster
def test_dask_grid_writes_what_local_writes(defs, cluster):
    local, dask = defs / "local", defs / "dask"
    assert run_batch(["exp_grid"], "quick", None, local, progress=False) == 0
    assert run_batch(["exp_grid"], "quick", None, dask, executor="dask",
                     scheduler=cluster.scheduler_address, progress=False) == 0
    runs = sorted(p.relative_to(local) for p in local.glob("*/*") if p.is_dir())
    assert len(runs) == 4
    assert sorted(p.relative_to(dask) for p in dask.glob("*/*") if p.is_dir()) == runs
    for rel in runs:
        assert _run_view(dask, rel) == _run_view(local, rel), rel
    assert _manifest_view(dask) == _manifest_view(local)
    assert {r["status"] for r in _manifest(dask)} == {"complete"}
    # where each ran is recorded in the manifest, the summary and the conditions
    for art, executor in ((local, "local"), (dask, "dask")):
        assert {(r["executor"], r["host"]) for r in _manifest(art)} == {
            (executor, socket.gethostname())}
        for rel in runs:
            s = json.loads((art / rel / "summary.json").read_text())
            assert s["run"]["executor"] == s["conditions"]["executor"] == executor
            assert s["conditions"]["worker_host"] == socket.gethostname()
    assert {r["timing_exclusive"] for r in _manifest(dask)} == {False}  # timing: false
    # resume: a second dask batch finds every run complete and runs nothing
    assert run_batch(["exp_grid"], "quick", None, dask, executor="dask",
                     scheduler=cluster.scheduler_address, progress=False) == 0
    assert len(_manifest(dask)) == 4


def test_timing_runs_refused_where_they_could_overlap(defs, cluster):
    art = defs / "art"
    with pytest.raises(ValueError, match="offer more than one 'timing' unit"):
        run_batch(["exp_timed"], "quick", None, art, executor="dask",
                  scheduler=cluster.scheduler_address, progress=False)
    assert not (art / MANIFEST).exists() and not (art / "exp_timed").exists()
    assert run_batch(["exp_timed"], "quick", None, art, executor="dask", progress=False,
                     scheduler=cluster.scheduler_address, concurrent_timing=True) == 0
    assert [r["timing_exclusive"] for r in _manifest(art)] == [False, False]


@pytest.mark.ci  # CI runs it after `make test` (make test-ci): a local cluster
def test_failed_run_is_reported_and_the_others_complete(defs, capsys):
    """Through the CLI, on a cluster lob starts (2 workers, one timing unit)."""
    art = defs / "art"
    code = main(["experiments", "run", "exp_fail", "--preset", "quick", "--out", str(art),
                 "--executor", "dask", "--workers", "2"])
    assert code == 1
    status = {r["params"]["label"]: r for r in _manifest(art)}
    assert {k: r["status"] for k, r in status.items()} == {
        "a": "complete", "b": "failed", "c": "complete"}
    failed = status["b"]
    assert failed["error"].startswith("ValueError: planned failure for b (notebook cell")
    assert failed["extra"]["ename"] == "ValueError"
    run_b = Path(failed["run_dir"])
    assert not (run_b / MARKER).exists()
    nb = nbformat.read(run_b / "exp_fail.ipynb", as_version=4)  # kept, with the error cell
    (cell,) = [c for c in nb.cells if c.get("execution_count") == failed["extra"]["exec_count"]]
    assert "planned failure" in cell.source
    out = capsys.readouterr()
    assert "FAILED exp_fail" in out.out and "planned failure for b" in out.out
    assert "1 of 3 runs failed" in out.err
    # timing runs: one at a time on the host, both marked exclusive
    a, c = (_interval(Path(status[k]["run_dir"])) for k in "ac")
    assert a[1] <= c[0] or c[1] <= a[0], "timing runs overlapped on one host"
    assert status["a"]["timing_exclusive"] and status["c"]["timing_exclusive"]


@pytest.mark.ci  # CI runs it after `make test` (make test-ci): a local cluster, a worker killed
def test_lost_worker_is_retried_once(defs, cluster):
    art = defs / "art"
    assert run_batch(["exp_kill"], "quick", None, art, executor="dask",
                     scheduler=cluster.scheduler_address, progress=False) == 0
    assert (defs / "killed-once").exists()  # the first attempt did lose its worker
    (line,) = _manifest(art)
    assert line["status"] == "complete" and (Path(line["run_dir"]) / MARKER).exists()
    # a run that kills every worker it lands on fails after one retry
    assert run_batch(["exp_kill_always"], "quick", None, art, executor="dask",
                     scheduler=cluster.scheduler_address, progress=False) == 1
    (lost,) = _manifest(art)[1:]
    assert lost["status"] == "failed" and "KilledWorker" in lost["error"]
    assert not list((art / "exp_kill_always").glob(f"*/{MARKER}"))

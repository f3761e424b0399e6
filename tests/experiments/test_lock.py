"""The artifacts folder lock: two batches on one folder never destroy each other's runs.

The issue's race (a second batch 3 s or 11 s after the first on the same folder) is replayed
deterministically: the first batch's stand-in notebook blocks at the chosen moment (mid-run,
or done but not yet marked complete), the second batch starts then, and the first is let go
afterwards. Cross-process behaviour (flock between processes, a holder killed with SIGKILL)
is checked with real subprocesses, in a few seconds.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import nbformat
import pytest

from lob.experiments import MANIFEST, MARKER, plan, run_batch
from lob.experiments.job import run_job
from lob.experiments.lock import LOCK_FILE, ArtifactsLocked, artifacts_lock, holder

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def defs(tmp_path, monkeypatch):
    """Two dummy experiments over one tiny notebook (never executed: execute is faked)."""
    d = tmp_path / "experiments"
    d.mkdir()
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell('n: int = 1\nout_dir: str = ""\n')
    cell.metadata["tags"] = ["parameters"]
    nb.cells = [cell]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, tmp_path / "dummy.ipynb")
    for name in ("exp_a", "exp_c"):
        (d / f"{name}.yaml").write_text(
            f"notebook: ../dummy.ipynb\ndescription: dummy {name}\ntags: [test]\n"
            "presets:\n  quick: {n: 1}\n  default: {n: 2}\n  full: {n: 3}\n")
    monkeypatch.setenv("LOB_EXPERIMENTS_DIR", str(d))
    return tmp_path


def _manifest(art: Path) -> list[dict]:
    p = art / MANIFEST
    return [json.loads(x) for x in p.read_text().splitlines()] if p.exists() else []


def _writer(label: str, gate: threading.Event | None = None, at: str = "",
            reached: threading.Event | None = None):
    """A stand-in notebook: writes its files (tagged with the batch ``label``); with a gate,
    stops ``at`` "mid" (before writing) or "end" (after writing, before returning)."""
    def execute(job):
        out = Path(job.run_dir)
        if gate is not None and at == "mid":
            reached.set()
            assert gate.wait(20)
        (out / "token.txt").write_text(label)
        (out / "x.hgrm").write_text(f"{label}\n")
        (out / "summary.json").write_text(json.dumps({"tables": {}, "conclusion": label}))
        if gate is not None and at == "end":
            reached.set()
            assert gate.wait(20)
    return execute


def _check_folder(art: Path, runs: dict[str, str]) -> None:
    """Every run complete with the files of exactly one batch; one manifest line per run."""
    lines = _manifest(art)
    assert sorted(r["experiment"] for r in lines) == sorted(runs), lines
    assert all(r["status"] == "complete" for r in lines)
    for name, label in runs.items():
        (run,) = (art / name).iterdir()
        assert (run / MARKER).exists()
        assert (run / "token.txt").read_text() == label
        assert (run / "x.hgrm").read_text() == f"{label}\n"
        assert json.loads((run / "summary.json").read_text())["conclusion"] == label


BIG, SMALL = ["exp_a", "exp_c"], ["exp_c"]


@pytest.mark.parametrize("at", ["mid", "end"], ids=["3s-mid-run", "11s-done-not-marked"])
@pytest.mark.parametrize("first, second", [(BIG, SMALL), (SMALL, BIG)],
                         ids=["big-then-small", "small-then-big"])
def test_a_second_batch_refuses_while_the_first_runs(defs, first, second, at):
    art = defs / "art"
    gate, reached = threading.Event(), threading.Event()
    codes = []
    t = threading.Thread(target=lambda: codes.append(run_batch(
        first, "quick", None, art, execute=_writer("first", gate, at, reached),
        progress=False)))
    t.start()
    try:
        assert reached.wait(10)
        ran = []
        with pytest.raises(ArtifactsLocked) as info:
            run_batch(second, "quick", None, art, execute=ran.append, progress=False)
        msg = str(info.value)
        assert f"pid {os.getpid()}" in msg and socket.gethostname() in msg, msg
        assert ran == []
    finally:
        gate.set()
        t.join(30)
    assert codes == [0]
    _check_folder(art, {name: "first" for name in first})
    # the second batch, run again now, does only what the first did not
    assert run_batch(second, "quick", None, art, execute=_writer("second"),
                     progress=False) == 0
    _check_folder(art, {**{n: "second" for n in second}, **{n: "first" for n in first}})


@pytest.mark.parametrize("at", ["mid", "end"], ids=["3s-mid-run", "11s-done-not-marked"])
@pytest.mark.parametrize("first, second", [(BIG, SMALL), (SMALL, BIG)],
                         ids=["big-then-small", "small-then-big"])
def test_a_second_batch_waits_then_skips_what_is_done(defs, first, second, at, capsys):
    art = defs / "art"
    gate, reached = threading.Event(), threading.Event()
    codes = {}
    t1 = threading.Thread(target=lambda: codes.setdefault("first", run_batch(
        first, "quick", None, art, execute=_writer("first", gate, at, reached),
        progress=False)))
    t1.start()
    assert reached.wait(10)
    t2 = threading.Thread(target=lambda: codes.setdefault("second", run_batch(
        second, "quick", None, art, execute=_writer("second"), progress=False,
        lock_wait=30)))
    t2.start()
    time.sleep(0.5)
    assert t2.is_alive() and "second" not in codes  # waiting, not running
    gate.set()
    t1.join(30)
    t2.join(30)
    assert codes == {"first": 0, "second": 0}
    _check_folder(art, {**{n: "second" for n in second}, **{n: "first" for n in first}})
    assert "waiting up to 30 s" in capsys.readouterr().err


def test_the_lock_record_names_the_holder_and_is_emptied_on_release(tmp_path):
    with artifacts_lock(tmp_path) as held:
        info = holder(tmp_path)
        assert info["pid"] == os.getpid() and info["host"] == socket.gethostname()
        assert info["token"] == held.token
        with pytest.raises(ArtifactsLocked, match=f"pid {os.getpid()}"):
            with artifacts_lock(tmp_path, wait=0.3):
                pass
    assert holder(tmp_path) is None
    assert (tmp_path / LOCK_FILE).exists()  # kept: deleting a lock file races


def test_a_job_whose_batch_does_not_hold_the_lock_deletes_nothing(defs):
    art = defs / "art"
    (job,) = plan(["exp_a"], "quick", None, art)
    partial = Path(job.run_dir)
    partial.mkdir(parents=True)
    (partial / "other.txt").write_text("another batch's work in progress")
    from dataclasses import replace

    ran = []
    with artifacts_lock(art):  # some other batch holds the folder
        rec = run_job(replace(job, lock_token="not-the-holder"), ran.append)
        assert rec.status == "failed" and "left alone" in rec.error
        with pytest.raises(ArtifactsLocked):  # a job sent without a batch takes the lock
            run_job(job, ran.append)
    with artifacts_lock(art) as held:
        token = held.token
    rec = run_job(replace(job, lock_token=token), ran.append)  # that batch has ended
    assert rec.status == "failed" and ran == []
    assert (partial / "other.txt").exists()


_HOLD = textwrap.dedent("""
    import sys, time
    from lob.experiments.lock import artifacts_lock
    with artifacts_lock(sys.argv[1]):
        print("held", flush=True)
        time.sleep(60)
""")

_BATCH = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from lob.experiments import run_batch
    from lob.experiments.lock import ArtifactsLocked
    label, wait, gate = sys.argv[2], float(sys.argv[3]), sys.argv[4]
    def execute(job):
        out = Path(job.run_dir)
        (out / "token.txt").write_text(label)
        while gate and not Path(gate).exists():  # hold the batch until the test says
            time.sleep(0.02)
        (out / "x.hgrm").write_text(label + "\\n")
        (out / "summary.json").write_text(json.dumps({"tables": {}, "conclusion": label}))
    try:
        sys.exit(run_batch(["exp_a", "exp_c"], "quick", None, sys.argv[1], execute=execute,
                           progress=False, lock_wait=wait))
    except ArtifactsLocked as e:
        print(e, file=sys.stderr)
        sys.exit(3)
""")


def _py(code: str, *args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]])}
    return subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


@pytest.mark.ci  # make test-ci: two batch processes
def test_two_batch_processes_on_one_folder(defs):
    """Real processes: the second refuses naming the first, the third waits and skips."""
    art = defs / "art"
    gate = defs / "release"
    p1 = _py(_BATCH, str(art), "first", "0", str(gate))
    t0 = time.time()
    while not (holder(art) or {}).get("pid"):
        assert p1.poll() is None and time.time() - t0 < 30, p1.communicate()
        time.sleep(0.05)
    p2 = _py(_BATCH, str(art), "second", "0", "")
    p3 = _py(_BATCH, str(art), "third", "60", "")
    _, err2 = p2.communicate(timeout=60)
    assert p2.returncode == 3, err2
    assert f"pid {p1.pid} on host {socket.gethostname()}" in err2
    assert p1.poll() is None
    while "waiting" not in p3.stderr.readline():  # it is waiting for the first
        assert p3.poll() is None
    gate.touch()
    assert p1.wait(60) == 0 and p3.wait(60) == 0, (p1.communicate(), p3.communicate())
    _check_folder(art, {"exp_a": "first", "exp_c": "first"})


def test_a_dead_holder_is_taken_over_and_its_partial_run_redone(defs):
    art = defs / "art"
    p = _py(_HOLD, str(art))
    assert p.stdout.readline().strip() == "held"
    (job,) = plan(["exp_a"], "quick", None, art)
    Path(job.run_dir).mkdir(parents=True)
    (Path(job.run_dir) / "token.txt").write_text("dead")  # the dead batch's partial run
    with pytest.raises(ArtifactsLocked, match=f"pid {p.pid}"):
        run_batch(["exp_a"], "quick", None, art, execute=_writer("new"), progress=False)
    os.kill(p.pid, signal.SIGKILL)
    p.wait(10)
    assert holder(art)["pid"] == p.pid  # its record stays, but it holds nothing
    msgs = []
    t0 = time.perf_counter()
    with artifacts_lock(art, log=msgs.append):
        assert time.perf_counter() - t0 < 1
    assert len(msgs) == 1 and "taking over" in msgs[0] and f"pid {p.pid}" in msgs[0]
    assert run_batch(["exp_a", "exp_c"], "quick", None, art, execute=_writer("new"),
                     progress=False) == 0
    _check_folder(art, {"exp_a": "new", "exp_c": "new"})


def test_the_cli_refuses_naming_the_holder(defs, capsys):
    from lob.cli import main

    art = defs / "art"
    with artifacts_lock(art):
        assert main(["experiments", "run", "exp_a", "--preset", "quick", "--out",
                     str(art)]) == 3
    err = capsys.readouterr().err
    assert f"pid {os.getpid()} on host {socket.gethostname()}" in err
    assert "Traceback" not in err and not (art / "exp_a").exists()

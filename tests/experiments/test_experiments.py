"""The experiment runner: validation before execution, artifact layout, resume after a kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from lob.cli.experiments import parse_assignment
from lob.experiments import MANIFEST, MARKER, plan, run_batch, run_id
from lob.experiments.report import write_index

ROOT = Path(__file__).resolve().parents[2]

PARAMS_CELL = """\
n: int = 2  # how many numbers to write
label: str = "x"  # a free label
scale: float = 0.5  # a float parameter
names: list[str] = ["a", "b"]  # a list parameter
out_dir: str = ""  # run directory (set by the runner)
"""

BODY = """\
import os, time, uuid
from pathlib import Path
from lob.studies.nb import run_dir, write_summary
out = run_dir(out_dir, "dummy")
(out / "token.txt").write_text(uuid.uuid4().hex)
hang = os.environ.get("LOB_TEST_HANG")
if hang and Path(hang).exists() and label == "hang":
    (out / "partial_only.txt").write_text("written by the attempt that was killed")
    while Path(hang).exists():
        time.sleep(0.05)
(out / "x.hgrm").write_text("Value Percentile TotalCount 1/(1-Percentile)\\n")
write_summary(out, tables={"t": [{"i": i, "label": label} for i in range(n)]},
              conclusion=f"wrote {n} rows", key_table="t", plots=[])
"""


def _notebook(path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    p = nbformat.v4.new_code_cell(PARAMS_CELL)
    p.metadata["tags"] = ["parameters"]
    nb.cells = [p, nbformat.v4.new_code_cell(BODY)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, path)


@pytest.fixture
def defs(tmp_path, monkeypatch):
    """Three dummy experiments (a, b hangs on request, c) over one tiny notebook."""
    d = tmp_path / "experiments"
    d.mkdir()
    _notebook(tmp_path / "dummy.ipynb")
    for name, label in (("exp_a", "a"), ("exp_b", "hang"), ("exp_c", "c")):
        (d / f"{name}.yaml").write_text(
            f"notebook: ../dummy.ipynb\ndescription: dummy {name}\ntags: [test]\n"
            f"presets:\n  quick: {{n: 1, label: {label}}}\n  default: {{n: 2, label: {label}}}\n"
            f"  full: {{n: 3, label: {label}}}\n")
    monkeypatch.setenv("LOB_EXPERIMENTS_DIR", str(d))
    return tmp_path


def _fake_execute(job):
    """Stand-in for papermill: writes what a notebook would."""
    out = Path(job.run_dir)
    (out / f"{job.experiment}.ipynb").write_text("{}")
    (out / "summary.json").write_text(json.dumps(
        {"tables": {"t": [{"n": job.params["n"]}]}, "key_table": "t", "plots": [],
         "conclusion": "ok"}))


def _manifest(art: Path) -> list[dict]:
    return [json.loads(line) for line in (art / MANIFEST).read_text().splitlines()]


def test_unknown_parameter_rejected_before_anything_runs(defs):
    art = defs / "art"
    ran = []
    with pytest.raises(ValueError, match="unknown parameter 'nn'.*label"):
        run_batch(["exp_a", "exp_c"], "quick", {"nn": 3}, art, execute=ran.append,
                  progress=False)
    assert ran == [] and not art.exists()


@pytest.mark.parametrize("key,value", [("n", "3"), ("n", 1.5), ("n", True), ("scale", "x"),
                                       ("names", [1, 2]), ("label", 3)])
def test_wrong_type_rejected_before_anything_runs(defs, key, value):
    ran = []
    with pytest.raises(ValueError, match=f"parameter '{key}' must be"):
        run_batch(["exp_a"], "quick", {key: value}, defs / "art", execute=ran.append,
                  progress=False)
    assert ran == []


def test_bad_batch_member_stops_the_whole_batch(defs):
    ran = []
    with pytest.raises(ValueError, match="unknown experiment 'nope'.*exp_a"):
        run_batch(["exp_a", "nope"], "quick", None, defs / "art", execute=ran.append,
                  progress=False)
    with pytest.raises(ValueError, match="no preset 'huge'"):
        run_batch(["exp_a"], "huge", None, defs / "art", execute=ran.append, progress=False)
    with pytest.raises(ValueError, match="'out_dir' is set by the runner"):
        run_batch(["exp_a"], "quick", {"out_dir": "/tmp"}, defs / "art", execute=ran.append,
                  progress=False)
    assert ran == []


def test_valid_overrides_and_cli_values(defs):
    assert parse_assignment("names=[v0, v1]") == ("names", ["v0", "v1"])
    assert parse_assignment("scale=0.25") == ("scale", 0.25)
    assert parse_assignment("n=3") == ("n", 3)
    with pytest.raises(ValueError, match="key=value"):
        parse_assignment("n3")
    (job,) = plan(["exp_a"], "quick", {"scale": 2, "names": ["z"]}, defs / "art")
    assert job.params == {"n": 1, "label": "a", "scale": 2, "names": ["z"]}


def test_run_ids_are_deterministic_and_distinct():
    a = run_id("e", "quick", {"n": 1, "m": 2})
    assert a == run_id("e", "quick", {"m": 2, "n": 1})
    assert a.startswith("quick-")
    assert len({a, run_id("e", "quick", {"n": 2, "m": 2}), run_id("f", "quick", {"n": 1, "m": 2}),
                run_id("e", "default", {"n": 1, "m": 2})}) == 4


def test_layout_marker_manifest_and_skip(defs):
    art = defs / "art"
    assert run_batch(["exp_a", "exp_c"], "default", None, art, execute=_fake_execute,
                     progress=False) == 0
    for name in ("exp_a", "exp_c"):
        (run,) = (art / name).iterdir()
        assert run.name == run_id(name, "default", plan([name], "default", None, art)[0].params)
        assert (run / MARKER).exists() and (run / f"{name}.ipynb").exists()
        s = json.loads((run / "summary.json").read_text())
        assert s["run"]["experiment"] == name and s["run"]["params"]["n"] == 2
        assert s["conditions"] and s["schema_version"] == 1
        # the marker is the newest file: written after the summary
        assert (run / MARKER).stat().st_mtime_ns >= (run / "summary.json").stat().st_mtime_ns
    m = _manifest(art)
    assert [(r["experiment"], r["status"]) for r in m] == [("exp_a", "complete"),
                                                           ("exp_c", "complete")]
    assert all(r["params"]["n"] == 2 and r["wall_s"] >= 0 and "git_sha" in r for r in m)
    # a second batch skips complete runs: nothing executes, nothing appended
    ran = []
    assert run_batch(["exp_a", "exp_c"], "default", None, art, execute=ran.append,
                     progress=False) == 0
    assert ran == [] and len(_manifest(art)) == 2
    index = write_index(art).read_text()
    assert "## exp_a" in index and "| n |" in index and "> ok" in index


def test_failure_and_interrupt_leave_no_complete_run(defs):
    art = defs / "art"

    def boom(job):
        (Path(job.run_dir) / "half.txt").write_text("partial")
        raise RuntimeError("cell 3 failed")

    assert run_batch(["exp_a", "exp_c"], "quick", None, art, execute=boom,
                     progress=False) == 1
    assert [r["status"] for r in _manifest(art)] == ["failed", "failed"]
    assert "cell 3 failed" in _manifest(art)[0]["error"]
    assert not list(art.glob(f"*/*/{MARKER}"))

    def ctrl_c(job):
        (Path(job.run_dir) / "half.txt").write_text("partial")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_batch(["exp_a"], "quick", None, art, execute=ctrl_c, progress=False)
    assert _manifest(art)[-1]["status"] == "interrupted"
    # the re-run clears the partial dirs and completes them
    assert run_batch(["exp_a", "exp_c"], "quick", None, art, execute=_fake_execute,
                     progress=False) == 0
    assert len(list(art.glob(f"*/*/{MARKER}"))) == 2
    assert not list(art.glob("*/*/half.txt"))


def _wait_for(pred, timeout: float, proc) -> None:
    t0 = time.time()
    while not pred():
        if proc.poll() is not None:
            raise AssertionError(f"batch exited early: {proc.stderr.read()}")
        if time.time() - t0 > timeout:
            raise AssertionError("timed out")
        time.sleep(0.1)


@pytest.mark.ci  # make test-ci: a batch killed mid-run
def test_killed_batch_resumes_without_redoing_or_keeping_partial(defs, monkeypatch):
    """A real papermill batch is SIGKILLed mid-run (with its kernel); the re-run resumes."""
    art = defs / "art"
    hang = defs / "hang"
    hang.write_text("1")
    env = {**os.environ, "LOB_TEST_HANG": str(hang), "PYTHONPATH": str(ROOT)}
    code = ("import sys; from lob.experiments import run_batch; "
            f"sys.exit(run_batch(['exp_a', 'exp_b', 'exp_c'], 'quick', None, {str(art)!r}))")
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: list(art.glob("exp_b/*/partial_only.txt")), 120, proc)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the batch and its kernel, like `kill -9`
        proc.wait()
    (a_run,) = (art / "exp_a").iterdir()
    (b_run,) = (art / "exp_b").iterdir()
    assert (a_run / MARKER).exists() and not (b_run / MARKER).exists()
    assert not (art / "exp_c").exists()
    a_token = (a_run / "token.txt").read_text()
    b_token = (b_run / "token.txt").read_text()
    assert [r["experiment"] for r in _manifest(art)] == ["exp_a"]

    hang.unlink()
    monkeypatch.setenv("LOB_TEST_HANG", str(hang))
    assert run_batch(["exp_a", "exp_b", "exp_c"], "quick", None, art, progress=False) == 0
    assert (a_run / "token.txt").read_text() == a_token  # finished run not redone
    assert (b_run / MARKER).exists()
    assert (b_run / "token.txt").read_text() != b_token  # partial run redone from scratch
    assert not (b_run / "partial_only.txt").exists()
    assert json.loads((b_run / "summary.json").read_text())["tables"]["t"] == [
        {"i": 0, "label": "hang"}]
    assert [(r["experiment"], r["status"]) for r in _manifest(art)] == [
        ("exp_a", "complete"), ("exp_b", "complete"), ("exp_c", "complete")]


def test_report_lists_every_run_of_the_latest_preset(tmp_path):
    import os

    from lob.experiments.report import latest_runs

    def run(exp, rid, t):
        d = tmp_path / exp / rid
        d.mkdir(parents=True)
        (d / "COMPLETE").write_text("x\n")
        os.utime(d / "COMPLETE", (t, t))
        return d

    run("bisection", "quick-aaa", 100)
    g1, g2 = run("bisection", "default-bbb", 200), run("bisection", "default-ccc", 300)
    (tmp_path / "bisection" / "default-ddd").mkdir()  # partial: no marker, never listed
    only = run("tail_analysis", "default-eee", 50)
    assert latest_runs(tmp_path) == {"bisection (default-bbb)": g1,
                                     "bisection (default-ccc)": g2, "tail_analysis": only}


# --- issue 26: nothing lost ----------------------------------------------------------------

def test_experiment_name_must_be_registered(defs):
    """An absolute path or ``../`` as the name must not pick a YAML outside the registry
    (whose run would land outside --out)."""
    elsewhere = defs / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "evil.yaml").write_text((defs / "experiments" / "exp_a.yaml").read_text()
                                         .replace("../dummy.ipynb", "../dummy.ipynb"))
    art = defs / "art"
    ran = []
    for name in (str(elsewhere / "evil"), "../elsewhere/evil", "../experiments/exp_a"):
        with pytest.raises(ValueError, match="unknown experiment"):
            run_batch([name], "quick", None, art, execute=ran.append, progress=False)
    assert ran == [] and not art.exists()
    assert sorted(p.name for p in elsewhere.iterdir()) == ["evil.yaml"]


def test_force_keeps_the_recorded_run_until_the_rerun_is_complete(defs):
    art = defs / "art"
    assert run_batch(["exp_a"], "quick", None, art, execute=_fake_execute, progress=False) == 0
    (run,) = (art / "exp_a").iterdir()
    before = (run / "summary.json").read_text()

    def boom(job):
        (Path(job.run_dir) / "half.txt").write_text("partial")
        raise RuntimeError("the rerun failed")

    assert run_batch(["exp_a"], "quick", None, art, force=True, execute=boom,
                     progress=False) == 1
    assert (run / MARKER).exists() and (run / "summary.json").read_text() == before
    assert not (run / "half.txt").exists()
    assert [r["status"] for r in _manifest(art)] == ["complete", "failed"]

    def ctrl_c(job):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_batch(["exp_a"], "quick", None, art, force=True, execute=ctrl_c, progress=False)
    assert (run / MARKER).exists() and (run / "summary.json").read_text() == before

    def other(job):
        _fake_execute(job)
        (Path(job.run_dir) / "new.txt").write_text("the rerun")

    assert run_batch(["exp_a"], "quick", None, art, force=True, execute=other,
                     progress=False) == 0
    assert (run / MARKER).exists() and (run / "new.txt").exists()
    assert json.loads((run / "summary.json").read_text())["run"]["run_dir"] == str(run)
    assert [p.name for p in (art / "exp_a").iterdir()] == [run.name]
    assert not [p for p in art.rglob("*") if p.is_file() and ".scratch" in p.parts]


def _enospc():
    import errno

    return OSError(errno.ENOSPC, "No space left on device")


def test_disk_full_while_finalizing_fails_that_run_only(defs, monkeypatch):
    art = defs / "art"
    real = Path.write_text
    hits = []

    def write_text(self, *a, **k):
        if self.name.endswith(".tmp") and not hits:
            hits.append(self)
            real(self, '{"half": ')  # a partial file, as a full disk leaves it
            raise _enospc()
        return real(self, *a, **k)

    monkeypatch.setattr(Path, "write_text", write_text)
    assert run_batch(["exp_a", "exp_c"], "quick", None, art, execute=_fake_execute,
                     progress=False) == 1
    m = _manifest(art)
    assert [(r["experiment"], r["status"]) for r in m] == [("exp_a", "failed"),
                                                           ("exp_c", "complete")]
    assert "No space left" in m[0]["error"]
    assert not list(art.rglob("*.tmp")) and not list((art / "exp_a").glob(f"*/{MARKER}"))


def test_disk_full_while_writing_the_manifest_loses_no_line(defs, monkeypatch, capsys):
    import builtins

    from lob.experiments import runner

    art = defs / "art"
    fails = [1]

    def fake_open(path, mode="r", *a, **k):
        f = builtins.open(path, mode, *a, **k)
        if str(path).endswith(MANIFEST) and "a" in mode and fails[0]:
            fails[0] -= 1

            class Full:
                def __enter__(self):
                    return self

                def __exit__(self, *exc):
                    f.close()

                def write(self, s):
                    f.write(s[: len(s) // 2])  # half a line reaches the disk
                    f.flush()
                    raise _enospc()
            return Full()
        return f

    monkeypatch.setattr(runner, "open", fake_open, raising=False)
    assert run_batch(["exp_a", "exp_c"], "quick", None, art, execute=_fake_execute,
                     progress=False) == 0
    m = _manifest(art)  # every line whole (json.loads of each), none lost
    assert [(r["experiment"], r["status"]) for r in m] == [("exp_a", "complete"),
                                                           ("exp_c", "complete")]
    assert "kept to write later" in capsys.readouterr().err

    # a disk that stays full: the lines are printed whole, the batch says it failed
    fails[0] = 99
    assert run_batch(["exp_b"], "quick", None, art, execute=_fake_execute,
                     progress=False) == 1
    err = capsys.readouterr().err
    assert "to append by hand" in err and '"experiment": "exp_b"' in err
    assert len(_manifest(art)) == 2


def test_an_adapter_not_built_here_is_no_unknown_engine(tmp_path, monkeypatch):
    """`make run` on a machine without g++: orderly_chaos in a preset is left to the notebook
    (one line, then runs without it), while a misspelt engine is still refused up front."""
    from lob.engines.foreign.adapters import not_built_hint
    from lob.experiments.runner import check_values

    monkeypatch.setenv("LOB_CACHE", str(tmp_path / "empty-cache"))
    assert not_built_hint("orderly_chaos") is not None
    check_values("tail_analysis", {"engines": ["orderly_chaos", "v3"], "scale": 0.002})
    with pytest.raises(ValueError, match="unknown engine 'orderly_chaoz'"):
        check_values("tail_analysis", {"engines": ["orderly_chaoz", "v3"], "scale": 0.002})


# --- issue 44: a --force swap killed between its two renames -------------------------------

KILL_BETWEEN_RENAMES = """
import json, os, sys
from pathlib import Path
from lob.experiments import run_batch

real = Path.rename
def rename(self, target):
    out = real(self, target)
    if str(target).endswith(".old"):  # the recorded run moved aside: die before the new one
        os._exit(9)                   # takes its place, as `kill -9` would
    return out
Path.rename = rename

def execute(job):
    out = Path(job.run_dir)
    (out / "exp_a.ipynb").write_text("{}")
    (out / "new.txt").write_text("the rerun")
    (out / "summary.json").write_text(json.dumps({"tables": {}, "key_table": None,
                                                  "plots": [], "conclusion": "ok"}))
sys.exit(run_batch(["exp_a"], "quick", None, sys.argv[1], force=True, execute=execute,
                   progress=False))
"""


@pytest.mark.ci  # make test-ci: a process killed mid-swap
def test_a_swap_killed_between_its_renames_is_restored_first(defs):
    art = defs / "art"
    assert run_batch(["exp_a"], "quick", None, art, execute=_fake_execute, progress=False) == 0
    (run,) = (art / "exp_a").iterdir()
    before = (run / "summary.json").read_text()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", KILL_BETWEEN_RENAMES, str(art)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 9, proc.stderr
    assert not run.exists()  # the state the kill leaves: the run folder is gone
    assert list(art.glob(".scratch/exp_a/*.old"))
    ran = []
    # a plain run finds the recorded run back in place (restored first), so skips it
    assert run_batch(["exp_a"], "quick", None, art, execute=ran.append, progress=False) == 0
    assert ran == [] and (run / MARKER).exists()
    assert (run / "summary.json").read_text() == before and not (run / "new.txt").exists()
    assert not list(art.glob(".scratch/exp_a/*.old"))
    # the kill again, then --force: the old run is restored, then replaced (nothing silent)
    proc = subprocess.run([sys.executable, "-c", KILL_BETWEEN_RENAMES, str(art)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 9 and not run.exists()

    def other(job):
        _fake_execute(job)
        (Path(job.run_dir) / "third.txt").write_text("the third run")

    assert run_batch(["exp_a"], "quick", None, art, force=True, execute=other,
                     progress=False) == 0
    assert (run / "third.txt").exists() and (run / MARKER).exists()
    assert not list(art.glob(".scratch/exp_a/*.old"))

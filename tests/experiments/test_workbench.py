"""The workbench as a user meets it: recorded runs are never rewritten, bad -p values are
refused before any kernel starts, the report survives a bad run, the CLIs say what they do."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import nbformat
import pytest

from lob.cli import main as lob_main
from lob.experiments import MARKER, run_batch
from lob.experiments import job as job_mod
from lob.experiments.report import slug, write_index
from lob.studies.nb import run_dir

PARAMS = 'n: int = 2  # rows\nout_dir: str = ""  # run folder (set by the runner)\n'
BODY = """\
import uuid
from lob.studies.nb import run_dir, write_summary
out = run_dir(out_dir, "dummy")
(out / "token.txt").write_text(uuid.uuid4().hex)
write_summary(out, tables={"t": [{"i": i} for i in range(n)]}, conclusion="ok",
              key_table="t", plots=[])
"""


@pytest.fixture
def dummy(tmp_path, monkeypatch):
    """One experiment ``dummy`` over a two-cell notebook; artifacts in tmp_path/art."""
    d = tmp_path / "experiments"
    d.mkdir()
    nb = nbformat.v4.new_notebook()
    p = nbformat.v4.new_code_cell(PARAMS)
    p.metadata["tags"] = ["parameters"]
    nb.cells = [p, nbformat.v4.new_code_cell(BODY)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, d / "dummy.ipynb")
    (d / "dummy.yaml").write_text("notebook: dummy.ipynb\ndescription: d\ntags: [t]\n"
                                  "timing: false\npresets: {quick: {}, default: {}, full: {}}\n")
    monkeypatch.setenv("LOB_EXPERIMENTS_DIR", str(d))
    monkeypatch.setenv("LOB_ARTIFACTS", str(tmp_path / "art"))
    return tmp_path


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_rerunning_an_executed_notebook_never_touches_its_run(dummy):
    """"Run All" on an executed notebook (its out_dir is the complete run): the run stays
    byte-identical and the work lands in a new interactive-<time> folder beside it."""
    import papermill as pm

    art = dummy / "art"
    assert run_batch(["dummy"], "quick", None, art, progress=False) == 0
    (run,) = (art / "dummy").iterdir()
    assert (run / MARKER).exists()
    before = _files(run)
    executed = run / "dummy.ipynb"
    # the executed notebook names the installed kernelspec: Lab opens it unmodified
    from jupyter_client.kernelspec import get_kernel_spec

    ks = nbformat.read(executed, as_version=4).metadata.kernelspec
    assert ks["display_name"] == get_kernel_spec("python3").display_name
    pm.execute_notebook(str(executed), str(dummy / "again.ipynb"), kernel_name="python3",
                        progress_bar=False, cwd=str(dummy))  # parameters as recorded
    assert _files(run) == before
    fresh = [p for p in (art / "dummy").iterdir() if p.name.startswith("interactive-")]
    assert len(fresh) == 1 and (fresh[0] / "token.txt").exists()
    assert not (fresh[0] / MARKER).exists()  # never mistaken for a recorded run
    out = "".join(o.get("text", "") for c in nbformat.read(dummy / "again.ipynb", 4).cells
                  for o in c.get("outputs", []))
    assert "complete recorded run" in out and "--force" in out


def test_run_dir_interactive_incomplete_and_file(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LOB_ARTIFACTS", str(tmp_path / "art"))
    a, b = run_dir("", "exp"), run_dir("", "exp")  # two in one second: two folders
    assert a != b and a.parent == b.parent == tmp_path / "art" / "exp"
    assert a.name.startswith("interactive-") and not any(a.iterdir())
    partial = tmp_path / "mine"
    assert run_dir(str(partial), "exp") == partial and partial.is_dir()
    done = tmp_path / "art" / "exp" / "quick-abc"
    done.mkdir()
    (done / MARKER).write_text("sha\n")
    (done / "summary.json").write_text(json.dumps(
        {"run": {"preset": "quick", "params": {"engines": ["v0", "v3"]}}}))
    redirected = run_dir(str(done), "exp")
    assert redirected.parent == done.parent and redirected.name.startswith("interactive-")
    err = capsys.readouterr().err
    assert "lob experiments run exp --preset quick -p 'engines=[\"v0\",\"v3\"]' --force" in err
    (tmp_path / "f").write_text("")
    with pytest.raises(NotADirectoryError):
        run_dir(str(tmp_path / "f"), "exp")


@pytest.mark.parametrize("param, says", [
    ("engines=[v0, v9]", "unknown engine 'v9'"),
    ("scenarios=[add_only, nope]", "unknown workload 'nope'"),
    ("tail_scenario=nope", "unknown workload 'nope'"),
    ("scale=-1", "'scale' must be in (0, 100]"),
    ("scale=0", "'scale' must be in (0, 100]"),
    ("scale=.nan", "'scale' must be a finite number"),
    ("repeat=0", "'repeat' must be at least 1"),
    ("engines=[]", "'engines' is an empty list"),
])
def test_bad_values_fail_before_any_kernel(param, says, tmp_path, monkeypatch, capsys):
    import papermill

    def no_kernel(*a, **k):
        raise AssertionError("a notebook was executed")

    monkeypatch.setattr(papermill, "execute_notebook", no_kernel)
    monkeypatch.setattr(job_mod, "execute_notebook", no_kernel)
    rc = lob_main(["experiments", "run", "tail_analysis", "--preset", "quick", "-p", param,
                   "--out", str(tmp_path / "art")])
    cap = capsys.readouterr()
    assert rc == 2
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], cap.err
    assert lines[0].startswith("lob experiments: error: tail_analysis: parameter")
    assert not (tmp_path / "art").exists()


def test_bisection_walk_ends_checked_before_any_kernel(tmp_path, capsys):
    assert lob_main(["experiments", "run", "bisection", "--preset", "quick", "-p",
                     "start=v9", "--out", str(tmp_path / "art")]) == 2
    assert not (tmp_path / "art").exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'start' must be a version on the lineage chain" in err[0]


def test_out_pointing_at_a_file_is_a_clean_error(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("")
    for argv in (["experiments", "run", "tail_analysis", "--preset", "quick"], ["report"]):
        assert lob_main([*argv, "--out", str(f)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "is a file" in err[0]


def test_batch_says_where_runs_went_and_what_it_skipped(dummy, capsys):
    art = dummy / "art"

    def fake(job):
        Path(job.run_dir, "summary.json").write_text(json.dumps(
            {"tables": {"t": [{"i": 1}]}, "key_table": "t", "conclusion": "ok", "plots": []}))

    assert run_batch(["dummy"], "quick", None, art, execute=fake) == 0
    (run,) = (art / "dummy").iterdir()
    err = capsys.readouterr().err
    assert f"complete: {run}" in err and "index.md" in err
    assert (art / "index.md").exists()
    (art / "index.md").unlink()
    assert run_batch(["dummy"], "quick", None, art, execute=fake) == 0
    err = capsys.readouterr().err
    assert f"already complete: {run} (use --force to rerun)" in err
    assert (art / "index.md").exists()  # refreshed by every batch


def _run(root: Path, exp: str, rid: str, t: float, summary) -> Path:
    d = root / exp / rid
    d.mkdir(parents=True)
    (d / "summary.json").write_text(summary if isinstance(summary, str) else json.dumps(summary))
    (d / MARKER).write_text("x\n")
    os.utime(d / MARKER, (t, t))
    return d


def _summary(rid: str) -> dict:
    return {"tables": {"t": [{"rid": rid}]}, "key_table": "t", "conclusion": f"from {rid}",
            "plots": [], "run": {"preset": rid.split("-")[0], "params": {"n": 1},
                                 "git_sha": "abc", "notebook": "x.ipynb"}}


def test_report_skips_a_corrupt_run_and_lists_every_run(tmp_path, capsys):
    _run(tmp_path, "bisection", "quick-aaa", 100, _summary("quick-aaa"))
    _run(tmp_path, "bisection", "default-bbb", 200, _summary("default-bbb"))
    _run(tmp_path, "bisection", "default-ccc", 300, _summary("default-ccc"))
    bad = _run(tmp_path, "tail_analysis", "default-ddd", 400, '{"tables": {')  # truncated
    _run(tmp_path, "alloc_profile", "default-eee", 50, _summary("default-eee"))
    index = write_index(tmp_path).read_text()
    err = capsys.readouterr().err
    assert str(bad / "summary.json") in err and "not valid JSON" in err
    assert str(bad / "summary.json") in index
    assert "from default-bbb" in index and "from default-ccc" in index  # the rest is there
    assert "from default-eee" in index
    # every run of an experiment, latest first
    runs = re.findall(r"^- \[`bisection/([\w-]+)`\]", index, re.M)
    assert runs == ["default-ccc", "default-bbb", "quick-aaa"]
    # table-of-contents anchors resolve to headings (GitHub-style slugs)
    heads = {slug(h) for h in re.findall(r"^#+ (.+)$", index, re.M)}
    toc = re.findall(r"^- \[[^\]]+\]\(#([^)]+)\)", index, re.M)
    assert toc and set(toc) <= heads, (toc, heads)
    assert "bisection-default-bbb" in toc


def test_slug_matches_github():
    assert slug("bisection (default-0a1b)") == "bisection-default-0a1b"
    assert slug("tail_analysis") == "tail_analysis"
    assert slug("Runs skipped") == "runs-skipped"


def test_workloads_describe_states_scale_and_no_na_rates(capsys):
    assert lob_main(["workloads", "describe", "cancel_only", "--scale", "0.001"]) == 0
    out = capsys.readouterr().out
    assert "n/a%" not in out and "no timed submits" in out
    assert "scale: 0.001 (0.001 x the published size): 2,000 commands" in out
    assert lob_main(["workloads", "list", "--full"]) == 0
    out = capsys.readouterr().out
    assert "..." not in out and "provenance:" in out
    with pytest.raises(SystemExit):
        lob_main(["workloads", "describe", "cancel_only", "--scale", "nan"])


@pytest.mark.parametrize("dies", [False, True])
def test_the_crash_marker_is_armed_for_the_kernel_only(tmp_path, monkeypatch, dies):
    """A batch arms the foreign-call marker for each notebook's kernel and disarms it after:
    left set, a later `lob bench` from the same process would skip its crash guard."""
    from lob.engines.foreign import crash

    monkeypatch.delenv(crash.ENV, raising=False)
    seen = []

    def fake(pm, job, out):
        seen.append(os.environ.get(crash.ENV))
        if dies:
            raise RuntimeError("Kernel died before replying to kernel_info")

    monkeypatch.setattr(job_mod, "_papermill", fake)
    job = job_mod.Job("dummy", str(tmp_path / "nb.ipynb"), "quick", {}, "quick-x",
                      str(tmp_path), str(tmp_path))
    if dies:
        with pytest.raises(RuntimeError, match="Kernel died"):  # no foreign call: as it was
            job_mod.execute_notebook(job)
    else:
        job_mod.execute_notebook(job)
    assert seen and seen[0]  # armed while the kernel ran
    assert crash.ENV not in os.environ

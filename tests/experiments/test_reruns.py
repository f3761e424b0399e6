"""`lob report --reruns K`: the claims' experiments run K times from scratch, each claim's
verdicts counted, disagreement named, the tally shown in index.md (papermill replaced by a
stand-in that records a claim the way a notebook would)."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from lob.experiments import reruns as R
from lob.experiments.report import write_index
from lob.studies import claims as C

CLAIMS = """
machines: {m: Some Machine}
published: {}
claims:
  - id: x_ratio
    seed: seed9
    finding: a is {value}x b
    machine: m
    metric: a / b
    workload: w
    size: s
    experiment: exp_a
    kind: ratio
    value: 2.0
    detail: d
    tolerance: 0.25
  - id: x_steady
    seed: seed9
    finding: below 10
    machine: m
    metric: n
    workload: w
    size: s
    experiment: exp_a
    kind: ceiling
    value: 10
    detail: d
  - id: x_elsewhere
    seed: seed9
    finding: not rerun
    machine: m
    metric: n
    workload: w
    size: s
    experiment: exp_z
    kind: ceiling
    value: 10
    detail: d
"""


@pytest.fixture
def defs(tmp_path, monkeypatch):
    d = tmp_path / "experiments"
    d.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("n = 1", metadata={"tags": ["parameters"]})]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, tmp_path / "dummy.ipynb")
    for name in ("exp_a", "exp_b"):
        (d / f"{name}.yaml").write_text(
            f"notebook: ../dummy.ipynb\ndescription: dummy {name}\ntags: [test]\n"
            "presets:\n  quick: {n: 1}\n  default: {n: 2}\n  full: {n: 3}\n")
    (d / "claims.yaml").write_text(CLAIMS)
    monkeypatch.setenv("LOB_EXPERIMENTS_DIR", str(d))
    return tmp_path


def _executor(ratios):
    """A notebook stand-in: the k-th run of exp_a records x_ratio at ratios[k] (interval
    +-2%) and x_steady at 3 every time."""
    calls = []

    def execute(job):
        out = Path(job.run_dir)
        claims = {}
        if job.experiment == "exp_a":
            r = ratios[len(calls)]
            calls.append(r)
            claims = {"x_ratio": C.measurement(r, ci=(r * 0.98, r * 1.02), runs=5),
                      "x_steady": C.measurement(3)}
        (out / f"{job.experiment}.ipynb").write_text("{}")
        (out / "summary.json").write_text(json.dumps(
            {"tables": {}, "key_table": None, "plots": [], "conclusion": "ok",
             "claims": claims}))
    return execute, calls


def test_tally_and_summary():
    assert R.tally(["reproduced"] * 5) == "reproduced 5/5"
    assert R.tally(["inconclusive", "direction only", "direction only"]) == \
        "direction only 2/3, inconclusive 1/3"
    with pytest.raises(ValueError):
        R.tally([])
    s = R.summarise([{"a": {"verdict": "reproduced", "lob_figure": "2"}},
                     {"a": {"verdict": "reproduced", "lob_figure": "2.1"}, "b": {
                         "verdict": "inconclusive", "lob_figure": "1"}}])
    assert s["a"]["agree"] and s["a"]["figures"] == ["2", "2.1"]
    assert s["b"]["verdicts"] == ["not measured", "inconclusive"] and not s["b"]["agree"]


def test_reruns_count_each_claims_verdicts_and_name_the_ones_that_flip(defs):
    art = defs / "art"
    # run 1 and 3 inside 1.5-2.5, run 2 beyond it: x_ratio flips, x_steady does not
    execute, calls = _executor([2.0, 3.5, 2.1])
    path = R.run_reruns(3, ["exp_a"], "quick", art, progress=False, execute=execute)
    assert len(calls) == 3  # each rerun ran the notebook again (force), none was skipped
    rec = json.loads(path.read_text())
    assert rec["k"] == 3 and rec["experiments"] == ["exp_a"] and rec["exit_codes"] == [0] * 3
    assert set(rec["claims"]) == {"x_ratio", "x_steady"}  # exp_z's claim is not rerun
    assert rec["claims"]["x_ratio"]["tally"] == "reproduced 2/3, direction only 1/3"
    assert not rec["claims"]["x_ratio"]["agree"]
    assert rec["claims"]["x_steady"] == {**rec["claims"]["x_steady"], "agree": True,
                                         "tally": "reproduced 3/3"}
    for i in (1, 2, 3):
        assert list((art / "reruns" / str(i) / "exp_a").glob("*/COMPLETE"))
    md = (art / "reruns" / "reruns.md").read_text()
    assert "1 of 2 claims gave the same verdict in all 3 reruns; 1 did not: x_ratio." in md
    # the index shows the tally; the reruns are not taken for the latest runs
    index = write_index(art).read_text()
    assert "## Reruns of the claims" in index and "| x_ratio | reproduced 2/3" in index
    assert "reruns/1" not in index.split("## Reruns of the claims")[0]
    # a new --reruns replaces the old one
    execute, _ = _executor([2.0, 2.0])
    R.run_reruns(2, ["exp_a"], "quick", art, progress=False, execute=execute)
    assert not (art / "reruns" / "3").exists()
    assert json.loads(path.read_text())["claims"]["x_ratio"]["tally"] == "reproduced 2/2"


def test_reruns_refuse_bad_input(defs):
    execute, _ = _executor([2.0] * 4)
    with pytest.raises(ValueError, match="K >= 2"):
        R.run_reruns(1, ["exp_a"], "quick", defs / "art", execute=execute)
    with pytest.raises(ValueError, match="exp_b measure.* no claim"):
        R.run_reruns(2, ["exp_b"], "quick", defs / "art", execute=execute)
    assert R.claim_experiments() == ["exp_a"]  # exp_z is not an experiment, exp_b has none
    assert R.read(defs / "art") is None


def test_cli_refuses_experiments_without_reruns(defs, capsys):
    from lob.cli import main

    (defs / "art").mkdir()
    assert main(["report", "--out", str(defs / "art"), "--experiments", "exp_a"]) == 2
    assert "--experiments only goes with --reruns" in capsys.readouterr().err


# --- issue 44: reruns follow the rules of `experiments run` ---------------------------------

def _tally_files(art):
    return {p.name: p.read_text() for p in (art / "reruns").iterdir() if p.is_file()}


@pytest.fixture
def tallied(defs):
    art = defs / "art"
    execute, _ = _executor([2.0, 2.0])
    R.run_reruns(2, ["exp_a"], "quick", art, progress=False, execute=execute)
    return art, _tally_files(art)


def test_a_bad_preset_or_a_held_lock_touches_nothing(tallied):
    from lob.experiments.lock import ArtifactsLocked, artifacts_lock

    art, before = tallied
    execute, calls = _executor([2.0] * 4)
    with pytest.raises(ValueError, match="no preset 'quik'"):
        R.run_reruns(2, ["exp_a"], "quik", art, progress=False, execute=execute)
    with artifacts_lock(art), pytest.raises(ArtifactsLocked):
        R.run_reruns(2, ["exp_a"], "quick", art, progress=False, execute=execute)
    assert calls == [] and _tally_files(art) == before
    assert list((art / "reruns").glob("*/exp_a/*/COMPLETE"))


def test_ctrl_c_during_a_rerun_keeps_the_previous_reruns(tallied, monkeypatch, capsys):
    from lob.cli import main

    art, before = tallied

    def ctrl_c(job):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        R.run_reruns(2, ["exp_a"], "quick", art, progress=False, execute=ctrl_c)
    assert _tally_files(art) == before
    assert len(list((art / "reruns").glob("*/exp_a/*/COMPLETE"))) == 2
    # the command says it in one line, no traceback
    monkeypatch.setattr(R, "run_reruns", lambda *a, **k: ctrl_c(None))
    assert main(["report", "--out", str(art), "--reruns", "2"]) == 130
    err = capsys.readouterr().err
    assert "interrupted" in err and "Traceback" not in err


def test_a_failed_rerun_is_no_verdict_and_fails_the_command(tallied):
    art, before = tallied
    good, _ = _executor([2.0] * 4)

    def killed(job):  # as a kernel killed mid-run leaves it
        raise RuntimeError("Kernel died before replying to execute_request")

    with pytest.raises(R.RerunsFailed, match=r"2 of 2 reruns failed \(exit codes \[1, 1\]\)"):
        R.run_reruns(2, ["exp_a"], "quick", art, progress=False, execute=killed)
    assert _tally_files(art) == before  # the previous tally is not replaced by no verdict
    calls = []

    def one_killed(job):
        calls.append(job)
        if len(calls) == 2:
            raise RuntimeError("Kernel died")
        good(job)

    with pytest.raises(R.RerunsFailed) as e:
        R.run_reruns(3, ["exp_a"], "quick", art, progress=False, execute=one_killed)
    rec = e.value.record
    assert rec["exit_codes"] == [0, 1, 0] and rec["failed"] == [2]
    assert rec["claims"]["x_ratio"]["verdicts"] == ["reproduced", "reproduced"]
    md = "\n".join(R.markdown_section(rec))
    assert "rerun 2 failed (exit code 1)" in md and "not a verdict" in md
    assert "2 of 2 claims gave the same verdict in all 2 reruns that completed (of 3)" in md
    assert _tally_files(art) == before


def test_an_unreadable_tally_is_a_warning_not_a_dead_folder(tallied, capsys):
    art, _ = tallied
    tally = art / "reruns" / "reruns.json"
    for text in ("", "[]", json.dumps({"k": 2, "preset": "quick"})):
        tally.write_text(text)  # a full disk's empty file; a tally without claims
        assert R.read(art) is None
        assert "ignored the reruns' tally" in capsys.readouterr().err
        index = write_index(art).read_text()
        assert "## Reruns of the claims" not in index


def test_a_short_write_of_the_tally_leaves_the_previous_one(tallied, monkeypatch):
    import errno

    from lob.experiments import job as J

    art, before = tallied
    execute, _ = _executor([2.0] * 4)

    def full_disk(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(J.os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space"):
        R.run_reruns(2, ["exp_a"], "quick", art, progress=False, execute=execute)
    monkeypatch.undo()
    assert _tally_files(art) == before and not list(art.rglob("*.tmp"))
    write_index(art)


def test_concurrent_index_writers_never_share_a_temporary_file(tallied, monkeypatch):
    """Each writer of index.md has its own temporary file: a second writer that writes and
    renames while the first is between its write and its rename breaks nothing."""
    from lob.experiments import report

    art, _ = tallied
    real = Path.replace
    nested = []

    def replace(self, target):
        if self.name.endswith(".tmp") and not nested:  # another writer gets in between
            nested.append(None)
            nested[0] = report.write_index(art)
        return real(self, target)

    monkeypatch.setattr(Path, "replace", replace)
    assert report.write_index(art).read_text() == nested[0].read_text()
    assert not list(art.glob("*.tmp")) and not list(art.glob(".*.tmp"))

"""Hostile input and hostile conditions (issue 26): what must fail in one clear line before
anything runs, and what must never be passed through silently."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from lob.cli import main
from lob.experiments import plan

ROOT = Path(__file__).resolve().parents[2]


# --- scale limits and nested values, checked before any kernel starts ----------------------

def test_a_scale_whose_memory_need_exceeds_the_machine_is_refused(monkeypatch):
    import lob.workloads as W

    monkeypatch.setattr(W, "available_memory", lambda: 8 * 2**30, raising=False)
    with pytest.raises(ValueError, match=r"cpp_comprehensive.*scale 100 needs about \d+\.\d "
                                         r"GiB .*more than the 8\.0 GiB available"):
        W.check_scale("cpp_comprehensive", 100)
    W.check_scale("cpp_comprehensive", 1.0)  # the published sizes are not estimated
    W.check_scale("cpp_comprehensive", 2.0)  # ~0.7 GiB
    with pytest.raises(ValueError, match="needs about"):
        W.build("cpp_comprehensive", scale=100)  # refused before 200 M commands are built
    for bad in (0, -1, 101, float("nan"), "1", True):
        with pytest.raises(ValueError, match=r"in \(0, 100\]"):
            W.check_scale("add_only", bad)
    # the estimate grows with the scale, from the workload's own size
    assert W.memory_estimate("cpp_comprehensive", 50) == 2 * W.memory_estimate(
        "cpp_comprehensive", 25)
    assert W.memory_estimate("alloc_budget", 50) < W.memory_estimate("cpp_comprehensive", 50)


def test_the_runner_checks_scales_engines_and_nested_values_before_any_kernel(monkeypatch,
                                                                             tmp_path):
    import lob.workloads as W

    monkeypatch.setattr(W, "available_memory", lambda: 8 * 2**30, raising=False)
    art = tmp_path / "art"
    cases = [
        ("tail_analysis", {"scale": 100}, r"'scale'.*needs about"),
        ("tail_analysis", {"scale_overrides": {"mass_cancel_burst": float("nan")}},
         r"scale_overrides.*mass_cancel_burst"),
        ("tail_analysis", {"scale_overrides": {"mass_cancel_burst": 100.0}},
         r"scale_overrides.*needs about"),
        ("tail_analysis", {"scale_overrides": {"no_such_workload": 0.1}},
         r"unknown workload 'no_such_workload'"),
        ("tail_analysis", {"claim_engine": "v9@warp"}, r"'claim_engine'.*unknown engine"),
        ("tail_analysis", {"claim_scale": float("inf")}, r"'claim_scale'.*finite"),
    ]
    for name, params, why in cases:
        with pytest.raises(ValueError, match=why):
            plan([name], "default", params, art)
    assert not art.exists()
    assert main(["experiments", "run", "tail_analysis", "-p", "claim_engine=v9@warp",
                 "--out", str(art)]) == 2
    # every shipped preset still passes
    from lob.experiments import experiment_names

    monkeypatch.undo()
    for preset in ("quick", "default", "full"):
        for name in experiment_names():
            assert plan([name], preset, None, art)


def test_a_yaml_error_in_a_parameter_is_one_line(capsys):
    assert main(["experiments", "run", "tail_analysis", "-p", "engines=[v0, v3"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert "engines=[v0, v3" in err and "not valid YAML" in err


# --- the report: nothing from summary.json runs as HTML; both kinds of percentile said ------

def test_the_index_escapes_html_from_summary_json(tmp_path):
    from lob.experiments.report import write_index

    run = tmp_path / "exp_x" / "quick-0000000000"
    run.mkdir(parents=True)
    evil = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    (run / "summary.json").write_text(json.dumps({
        "run": {"preset": "quick", "params": {"label": evil}, "notebook": "exp_x.ipynb"},
        "tables": {"t": [{"name": evil, "p99.9": "n<10000"}]}, "key_table": "t",
        "conclusion": f"done {evil}", "plots": []}))
    (run / "COMPLETE").write_text("sha\n")
    text = write_index(tmp_path).read_text()
    assert not re.search(r"<(script|img)", text), text
    assert "&lt;script>" in text and "&lt;img" in text
    assert "n<10000" in text  # a marker is not a tag: left as it is
    assert ".hgrm" in text and "3 significant digits" in text and "0.1%" in text


# --- the README's Dask recipe ---------------------------------------------------------------

def test_the_dask_recipe_binds_to_loopback_and_warns():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Running on a Dask cluster", 1)[1].split("\n## ", 1)[0]
    commands = re.sub(r"\\\n\s*", " ", section)
    starts = [ln for ln in commands.splitlines()
              if re.search(r"\bdask (scheduler|worker)\b", ln) and not ln.startswith("#")
              and ".venv/bin/dask" in ln]
    assert len(starts) >= 3
    for ln in starts:
        assert "--host 127.0.0.1" in ln, ln
    sched = [ln for ln in starts if "dask scheduler" in ln]
    assert sched and all("--dashboard-address 127.0.0.1" in ln for ln in sched)
    assert "0.0.0.0" in section and "no authentication" in section and "TLS" in section


# --- issue 44: relative paths are resolved once, at the command line ---------------------------

def test_relative_paths_in_the_environment_are_made_absolute_for_every_child(tmp_path,
                                                                             monkeypatch):
    import os

    from lob.cli import main
    from lob.experiments import job as J

    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine").mkdir()
    monkeypatch.setenv("LOB_ENGINES_TOML", os.pathsep.join(["mine/a.toml", "b.toml"]))
    monkeypatch.setenv("LOB_CACHE", "relcache")
    monkeypatch.setenv("LOB_DATA_DIR", "~/data")
    main(["experiments", "list"])
    assert os.environ["LOB_ENGINES_TOML"] == os.pathsep.join(
        [str(tmp_path / "mine" / "a.toml"), str(tmp_path / "b.toml")])
    assert os.environ["LOB_CACHE"] == str(tmp_path / "relcache")
    assert os.environ["LOB_DATA_DIR"] == os.path.expanduser("~/data")
    # a batch started from Python (no command line) gives its kernel absolute paths too
    monkeypatch.setenv("LOB_CACHE", "other")
    seen = {}
    monkeypatch.setattr(J, "_papermill", lambda pm, job, out: seen.update(
        cache=os.environ["LOB_CACHE"]))
    J.execute_notebook(J.Job("e", "n.ipynb", "quick", {}, "r", str(tmp_path / "run"),
                             str(tmp_path)))
    assert seen["cache"] == str(tmp_path / "other")


def test_a_reader_that_leaves_the_pipe_early_gets_no_traceback():
    import subprocess
    import sys

    p = subprocess.run(f"{sys.executable} -m lob.cli engines | head -1", shell=True,
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert p.stdout.startswith("name") and "Traceback" not in p.stderr, p.stderr

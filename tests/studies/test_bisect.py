"""`lob bisect` on a synthetic git repository: a package registering engine ``demo`` through
the ``lob.engines`` entry point, 12 commits (commit 5 does not import, 6 repairs it, 7 adds a
fixed cost per command)."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

from lob.cli import main
from lob.studies.gitbisect import (
    Sample,
    SubprocessMeasurer,
    bisect_versions,
    demo_repo,
    revisions,
)

SLOW, BROKEN = 7, 5


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    root = tmp_path_factory.mktemp("bisect")
    shas = demo_repo(root / "repo", n_commits=12, slow_at=SLOW, broken_at=BROKEN,
                     spin_ns=50_000)  # well above the demo's own cost, and a loaded machine's noise
    return root / "repo", shas, root / "cache"


def fake(shas, step_at=None, factor=1.0, sigma=0.0, seed=0, broken=()):
    """A measurement function: 1000 * (factor from commit ``step_at`` on) * lognormal noise."""
    index = {s: i for i, s in enumerate(shas)}
    calls = []

    def measure(sha, nonce, hist):
        i = index[sha]
        calls.append(i)
        if i in broken:
            return Sample("broken", error="SyntaxError (fake)")
        rng = np.random.default_rng([seed, nonce])
        f = factor if step_at is not None and i >= step_at else 1.0
        return Sample("ok", 1000.0 * f * float(np.exp(rng.normal(0, sigma))))

    measure.calls = calls
    return measure


@pytest.mark.extended  # ~3 minutes of real processes (5 rounds before any call); the search
# logic is covered by the simulated searches below, in every `make test`
def test_names_exactly_the_slow_commit_and_skips_the_broken_one(demo, tmp_path, capsys):
    repo, shas, cache = demo
    out = tmp_path / "run"
    code = main(["bisect", "--repo", str(repo), "--good", shas[0], "--bad", shas[-1],
                 "--engine", "demo", "--workload", "mixed_70_20_10", "--scale", "0.001",
                 "--runs", "5", "--max-runs", "5", "--threshold", "50", "--inner", "3",
                 "--cache", str(cache),
                 "--out", str(out)])
    text = capsys.readouterr().out
    assert code == 0, text
    assert f"first change: {shas[SLOW]} demo engine: 50000 ns of extra work" in text
    assert "skipped: broken" in text and "SyntaxError" in text
    rec = json.loads((out / "bisect.json").read_text())
    assert rec["first_change"]["sha"] == shas[SLOW] and rec["first_change"]["ci_low"] > 1
    assert rec["revisions"][BROKEN]["status"] == "skipped"
    measured = [r for r in rec["revisions"] if r["values"]]
    assert len(list(out.glob("*.hgrm"))) == len(measured) >= 4
    assert (out / "bisect.png").stat().st_size > 1000
    assert rec["conditions"]["hostname"] and rec["schema_version"] == 1


# A real search over real processes with no change in range: ten fresh processes of ~3-4 s
# each (importing numba for the workload's generator is half of it), a twentieth of CI's
# test time. CI covers its parts another way: the statistics of a no-change range with
# injected noise (test_noise_without_change_makes_no_false_call, 40 seeds), the subprocess
# probe (test_the_probe_reads_injected_noise_and_misses_engines) and a real search that finds
# a change (the version_bisection notebook under nbval).
@pytest.mark.extended
def test_a_range_without_change_is_no_change_beyond_noise(demo, capsys):
    repo, shas, cache = demo
    res = bisect_versions(shas[SLOW + 1], shas[-1], "demo", "mixed_70_20_10", repo=repo,
                          scale=0.001, runs=5, max_runs=5, threshold=0.5, inner=3,
                          cache=cache)
    assert res.line() == "no change beyond noise"
    assert res.first_change is None and len(res.steps) == 1
    assert capsys.readouterr().out.splitlines()[-2] == "no change beyond noise"


def test_the_probe_reads_injected_noise_and_misses_engines(demo, monkeypatch):
    repo, shas, cache = demo
    m = SubprocessMeasurer(repo, "demo", "mixed_70_20_10", "ns_per_op", scale=0.0005,
                           inner=1, cache=cache)
    monkeypatch.setenv("LOB_BISECT_NOISE", "0.5")
    a, b = m(shas[0], 1, False), m(shas[0], 2, False)
    assert a.status == b.status == "ok" and a.value != b.value
    assert a.output == b.output and a.output.startswith("checksum ")  # what the replay did
    # the committed .dist-info makes the entry point visible from PYTHONPATH: lob's registry
    # finds it where it loads entry points, the probe's own loader otherwise
    has_ep_registry = importlib.util.find_spec("lob.engines.registry") is not None
    assert a.via == ("registry" if has_ep_registry else "entry point")
    assert m(shas[BROKEN], 3, False).status == "broken"
    gone = SubprocessMeasurer(repo, "no_such_engine", "mixed_70_20_10", "ns_per_op",
                              scale=0.0005, inner=1, cache=cache)
    s = gone(shas[0], 4, False)
    assert s.status == "missing" and "no_such_engine" in s.error


def test_noise_without_change_makes_no_false_call(demo):
    """10% lognormal noise per value, a 5% threshold, no real change: never a call."""
    repo, shas, _ = demo
    for seed in range(40):
        res = bisect_versions(shas[0], shas[-1], "demo", "w", repo=repo, runs=5,
                              threshold=0.05, measure=fake(shas, sigma=0.1, seed=seed),
                              log=None)
        assert res.first_change is None, (seed, [s.decision for s in res.steps])


def test_the_same_noise_does_not_hide_a_real_step(demo):
    """The control: a 30% step at commit 7 under the same noise is found, every seed."""
    repo, shas, _ = demo
    for seed in range(10):
        res = bisect_versions(shas[0], shas[-1], "demo", "w", repo=repo, runs=5,
                              threshold=0.05, log=None,
                              measure=fake(shas, SLOW, 1.3, sigma=0.1, seed=seed))
        assert res.first_change and res.first_change["sha"] == shas[SLOW], seed


def test_interleaved_rounds_and_skips(demo):
    repo, shas, _ = demo
    m = fake(shas, SLOW, 2.0, broken=(5, 6))
    res = bisect_versions(shas[0], shas[-1], "demo", "w", repo=repo, runs=2, log=None,
                          measure=m)
    assert res.first_change["sha"] == shas[SLOW]
    assert [r.index for r in res.revisions if r.status == "skipped"] == [5, 6]
    # the first comparison interleaves good and bad; later rounds good, bad and the probe
    assert m.calls[:4] == [0, 11, 11, 0]
    # no interval before MIN_RATIO_N rounds: the first probe comes after five of them
    assert sorted(m.calls[10:13]) == [0, 5, 11]
    # every revision between the last good and the change skipped: the change is ambiguous
    m2 = fake(shas, 7, 2.0, broken=(4, 5, 6))
    res = bisect_versions(shas[3], shas[7], "demo", "w", repo=repo, runs=2, log=None,
                          measure=m2)
    assert res.first_change["sha"] == shas[7]
    assert res.candidates == shas[4:7] and "or one of the skipped" in res.line()


def test_endpoints_compares_good_and_bad_only_even_when_they_differ(demo, tmp_path):
    repo, shas, _ = demo
    m = fake(shas, SLOW, 1.3, broken=(5,))
    res = bisect_versions(shas[0], shas[-1], "demo", "w", repo=repo, runs=5, log=None,
                          measure=m, endpoints=True, out=tmp_path / "out")
    assert set(m.calls) == {0, len(shas) - 1}  # no revision between them is measured
    assert res.first_change is None and len(res.steps) == 1
    s = res.steps[0]
    assert s.decision == "slower" and s.ratio == pytest.approx(1.3)
    assert res.line() == (f"bad over good: 1.3000 (CI {s.ci_low:.4f}-{s.ci_high:.4f}): slower "
                          f"({s.rounds} rounds)")
    rec = json.loads((tmp_path / "out" / "bisect.json").read_text())
    assert rec["endpoints"] is True and rec["conclusion"] == res.line()
    # the same range searched: the walk measures the middle and names the step
    assert bisect_versions(shas[0], shas[-1], "demo", "w", repo=repo, runs=5, log=None,
                           measure=fake(shas, SLOW, 1.3, broken=(5,))
                           ).first_change["sha"] == shas[SLOW]


def test_lob_bisect_endpoints_reaches_the_search(monkeypatch, tmp_path):
    import lob.cli.bisect as cli

    seen = []

    def stop(*a, **kw):
        seen.append(kw["endpoints"])
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "bisect_versions", stop)
    base = ["bisect", "--good", "a", "--bad", "b", "--engine", "e", "--workload", "w",
            "--out", str(tmp_path)]
    assert main([*base, "--endpoints"]) == 130 and main(base) == 130
    assert seen == [True, False]


def test_the_renovation_benchmark_script_tables_every_comparison(demo, tmp_path, monkeypatch):
    """docs/decisions/renovation-benchmark.py: the revisions resolved once, one --endpoints
    comparison per engine and stream, the table written, exit 1 when one is slower."""
    from pathlib import Path

    repo, shas, _ = demo
    root = Path(__file__).resolve().parents[2]
    path = root / "docs" / "decisions" / "renovation-benchmark.py"
    spec = importlib.util.spec_from_file_location("renovation", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    seen = []

    def run(good, bad, engine, workload, metric, **kw):
        seen.append((good, bad, engine, workload, kw["scale"], kw["endpoints"]))
        factor = 1.3 if engine == "slow" else 1.0
        return bisect_versions(good, bad, engine, workload, metric, repo=kw["repo"],
                               runs=5, max_runs=5, endpoints=True, log=None,
                               measure=fake(shas, SLOW, factor), out=kw["out"])

    monkeypatch.setattr(mod, "bisect_versions", run)
    args = ["--repo", str(repo), "--before", shas[0], "--after", "HEAD", "--engines", "a",
            "slow", "--streams", "w1", "w2", "--scale", "0.01", "--out", str(tmp_path)]
    assert mod.main(args) == 1  # "slow" is slower
    assert [x[2:4] for x in seen] == [("a", "w1"), ("slow", "w1"), ("a", "w2"), ("slow", "w2")]
    assert {x[:2] for x in seen} == {(shas[0], shas[-1])} and all(x[5] for x in seen)
    md = (tmp_path / "renovation.md").read_text()
    assert "| slow | w2 | 1000.0 | 1300.0 | 1.300 " in md and "| a | w1 | 1000.0 | 1000.0 " in md
    rec = json.loads((tmp_path / "renovation.json").read_text())
    assert [r["decision"] for r in rec["rows"]] == ["within noise", "slower"] * 2
    assert mod.main([*args[:7], "a", "--streams", "w1", "--scale", "0.01",
                     "--out", str(tmp_path / "b")]) == 0


def test_bad_input(demo, tmp_path):
    repo, shas, _ = demo
    with pytest.raises(ValueError, match="not an ancestor"):
        revisions(repo, shas[5], shas[2])
    with pytest.raises(ValueError, match="same commit"):
        revisions(repo, shas[3], shas[3])
    with pytest.raises(ValueError, match="unknown metric"):
        bisect_versions(shas[0], shas[1], "demo", "w", "p42", repo=repo, log=None)
    with pytest.raises(ValueError, match="runs"):
        bisect_versions(shas[0], shas[1], "demo", "w", repo=repo, runs=0, log=None)
    with pytest.raises(ValueError, match="max_runs .* must be >= 5"):
        bisect_versions(shas[0], shas[1], "demo", "w", repo=repo, runs=2, max_runs=3,
                        log=None)
    with pytest.raises(ValueError, match="cannot measure good"):
        bisect_versions(shas[0], shas[1], "demo", "w", repo=repo, log=None,
                        measure=fake(shas, broken=(0,)))
    (tmp_path / "plain").mkdir()
    with pytest.raises(ValueError):
        revisions(tmp_path / "plain", "HEAD~1", "HEAD")
    assert main(["bisect", "--repo", str(repo), "--good", "nope", "--bad", shas[1],
                 "--engine", "demo", "--workload", "w"]) == 2


def test_version_bisection_is_not_in_the_default_batch(tmp_path, monkeypatch):
    from lob.experiments.registry import batch_names, experiment_names, get_experiment
    from lob.paths import repo_root

    for name in ("version_bisection", "bisection"):  # this one, and one of the batch
        text = (repo_root() / "experiments" / f"{name}.yaml").read_text()
        nb = repo_root() / "notebooks" / f"{name}.ipynb"
        (tmp_path / f"{name}.yaml").write_text(
            text.replace(f"../notebooks/{name}.ipynb", str(nb)))
    monkeypatch.setenv("LOB_EXPERIMENTS_DIR", str(tmp_path))
    assert experiment_names() == ["bisection", "version_bisection"]
    assert not get_experiment("version_bisection").batch and get_experiment("bisection").batch
    assert batch_names() == ["bisection"]
    from lob.experiments import run_batch

    ran = []
    run_batch(None, "quick", artifacts=tmp_path / "art", progress=False,
              execute=lambda job: ran.append(job.experiment))
    assert ran == ["bisection"]  # `lob main` runs the batch; version_bisection only by name


# --- issue 26: nothing lost, no silent wrong answer -----------------------------------------

def _git(repo, *a):
    import subprocess

    return subprocess.run(["git", "-C", str(repo), *a], check=True, capture_output=True,
                          text=True).stdout


def test_the_cache_never_touches_the_users_worktrees(tmp_path):
    """A user's worktree whose folder is absent (an unplugged disk) keeps its admin data."""
    from lob.studies.gitbisect import Checkouts

    shas = demo_repo(tmp_path / "repo", n_commits=3, slow_at=None, broken_at=None)
    repo = tmp_path / "repo"
    _git(repo, "worktree", "add", "--detach", str(tmp_path / "usb" / "wt"), shas[1])
    import shutil

    shutil.rmtree(tmp_path / "usb")  # absent right now, not gone for good
    before = _git(repo, "worktree", "list", "--porcelain")
    m = SubprocessMeasurer(repo, "demo", "mixed_70_20_10", "ns_per_op", scale=0.0005,
                           inner=1, cache=tmp_path / "cache")
    assert m(shas[0], 1, False).status == "ok" and m(shas[2], 2, False).status == "ok"
    assert _git(repo, "worktree", "list", "--porcelain") == before
    assert str(tmp_path / "usb" / "wt") in before
    assert _git(repo, "status", "--porcelain") == ""  # index and work tree untouched
    assert Checkouts(repo, tmp_path / "cache").complete(shas[0]) is not None


def test_a_half_built_checkout_is_never_reused(tmp_path, monkeypatch):
    """Ctrl-C right after git wrote part of a checkout: the next search rebuilds it."""
    import subprocess


    shas = demo_repo(tmp_path / "repo", n_commits=2, slow_at=None, broken_at=None)
    repo, cache = tmp_path / "repo", tmp_path / "cache"
    real = subprocess.run

    def interrupted(cmd, *a, **k):
        r = real(cmd, *a, **k)
        if "checkout-index" in cmd or "worktree" in cmd and "add" in cmd:
            for f in cache.rglob("lobdemo/__init__.py"):
                f.unlink()  # the half that never reached the disk
            raise KeyboardInterrupt
        return r

    monkeypatch.setattr(subprocess, "run", interrupted)
    m = SubprocessMeasurer(repo, "demo", "mixed_70_20_10", "ns_per_op", scale=0.0005,
                           inner=1, cache=cache)
    with pytest.raises(KeyboardInterrupt):
        m(shas[0], 1, False)
    monkeypatch.setattr(subprocess, "run", real)
    s = m(shas[0], 2, False)
    assert s.status == "ok", s.error


def test_two_searches_take_turns_on_the_cache(tmp_path):
    import fcntl
    import os

    from lob.studies.gitbisect import Checkouts

    shas = demo_repo(tmp_path / "repo", n_commits=2, slow_at=None, broken_at=None)
    co = Checkouts(tmp_path / "repo", tmp_path / "cache", wait=0.3)
    co.root.mkdir(parents=True)
    fd = os.open(co.root / ".lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another search is building a checkout
    try:
        with pytest.raises(ValueError, match="busy"):
            co.path(shas[0])
    finally:
        os.close(fd)
    assert (co.path(shas[0]) / "lobdemo" / "__init__.py").exists()


@pytest.mark.parametrize("preset,runs,max_runs,threshold,sigma", [
    ("default", 5, 15, 0.05, 0.1),  # the CLI's defaults
    ("quick", 2, 6, 0.2, 0.3),  # experiments/version_bisection.yaml quick
])
def test_identical_code_gets_at_most_5pct_false_calls(demo, preset, runs, max_runs,
                                                      threshold, sigma):
    """100 searches over 12 commits of identical code (lognormal noise, fixed seeds)."""
    repo, shas, _ = demo
    false = 0
    for seed in range(100):
        res = bisect_versions(shas[0], shas[-1], "demo", "w", repo=repo, runs=runs,
                              max_runs=max_runs, threshold=threshold, n_boot=1000,
                              measure=fake(shas, sigma=sigma, seed=seed), log=None)
        false += res.first_change is not None
        assert all(s.decision.split(" (")[0] in ("slower", "faster", "within noise",
                                                 "inconclusive") for s in res.steps)
    assert false <= 5, (preset, false)


def test_ctrl_c_is_one_line(demo, monkeypatch, capsys, tmp_path):
    from lob.studies import gitbisect

    repo, shas, _ = demo

    def ctrl_c(self, sha, nonce, hist):
        raise KeyboardInterrupt

    monkeypatch.setattr(gitbisect.SubprocessMeasurer, "__call__", ctrl_c)
    code = main(["bisect", "--repo", str(repo), "--good", shas[0], "--bad", shas[1],
                 "--engine", "demo", "--workload", "mixed_70_20_10",
                 "--cache", str(tmp_path / "c"), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 130 and "interrupted" in err and "Traceback" not in err


def test_a_revision_whose_replay_does_other_work_is_never_timed_against_good(demo):
    """lob bisect compares what each revision's replay did (checksum, counters) with good's:
    a revision that answers differently is skipped, named, and a bad one is refused."""
    repo, shas, _ = demo
    base = fake(shas, SLOW, 2.0)

    def measure(sha, nonce, hist):
        s = base(sha, nonce, hist)
        i = shas.index(sha)
        s.output = "checksum 7; trades=10" if i not in (4, 5) else "checksum 9; trades=0"
        return s

    res = bisect_versions(shas[0], shas[-1], "demo", "w", repo=repo, runs=2, log=None,
                          measure=measure)
    skipped = {r.index: r.reason for r in res.revisions if r.status == "skipped"}
    assert set(skipped) <= {4, 5} and skipped
    assert all("other work than good's (checksum 9; trades=0 vs checksum 7; trades=10)" in why
               for why in skipped.values())

    def bad_differs(sha, nonce, hist):
        s = base(sha, nonce, hist)
        s.output = "checksum 1" if sha != shas[-1] else "checksum 2"
        return s

    with pytest.raises(ValueError, match="cannot measure bad revision .*other work than good"):
        bisect_versions(shas[0], shas[-1], "demo", "w", repo=repo, runs=2, log=None,
                        measure=bad_differs)

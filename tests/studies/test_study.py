"""lob.studies.study: the start and end every notebook shares (engine check, interleaved
throughput, the summary), on synthetic stand-ins."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from lob.studies.study import Study, check_engines, interleaved_throughput


def test_unknown_engines_are_named_with_the_registered_ones():
    check_engines(["reference", "v2"])
    with pytest.raises(ValueError, match=r"unknown engines 'nope', 'zz'; engines: .*reference"):
        check_engines(["reference", "zz", "nope"])


def test_interleaved_throughput_rotates_and_keeps_every_round():
    calls = []

    def fake_replay(engine, wl):
        calls.append(engine)
        return SimpleNamespace(elapsed_ns=1000 * (len(calls)), engine=engine)

    wl = SimpleNamespace(commands=[0] * 10)
    out = interleaved_throughput(["a", "b"], wl, 4, replay=fake_replay, warmup=0)
    assert calls == ["a", "b", "b", "a", "a", "b", "b", "a"]
    assert out["a"]["ns_per_op"] == [100, 400, 500, 800]
    assert out["b"]["last"].engine == "b" and len(out["b"]["ns_per_op"]) == 4
    with pytest.raises(ValueError, match="repeat"):
        interleaved_throughput(["a"], wl, 0, replay=fake_replay)


def test_interleaved_throughput_warms_every_engine_before_the_first_round():
    # a compiled engine's first call loads its kernel: a one-time cost that must not land
    # in round 1 of whichever engine first runs that code
    seen, loaded = [], set()

    def fake_replay(engine, wl):
        seen.append((engine, len(wl.commands)))
        first = engine not in loaded
        loaded.add(engine)
        return SimpleNamespace(elapsed_ns=(10**6 if first else 0) + 10 * len(wl.commands))

    wl = SimpleNamespace(commands=list(range(5000)), config="cfg")
    out = interleaved_throughput(["a", "b"], wl, 3, replay=fake_replay)
    assert seen[:2] == [("a", 2000), ("b", 2000)]  # the stream's first commands, once each
    assert [k for _, k in seen[2:]] == [5000] * 6
    assert out["a"]["ns_per_op"] == out["b"]["ns_per_op"] == [10.0] * 3  # no first-call cost
    assert wl.commands == list(range(5000))  # the caller's workload is not cut
    short = interleaved_throughput(["a"], SimpleNamespace(commands=[1, 2]), 1,
                                   replay=fake_replay)
    assert seen[-2:] == [("a", 2), ("a", 2)] and short["a"]["ns_per_op"] == [10.0]


def test_interleaved_throughput_tops_up_and_keeps_the_quiet_rounds():
    calls = []

    def fake_replay(engine, wl):
        calls.append(engine)
        return SimpleNamespace(elapsed_ns=1000 * len(calls), engine=engine)

    def scripted(widths):
        it = iter(widths)
        return lambda: {"core_ghz": 3.0, "width": next(it, 3.3)}

    wl = SimpleNamespace(commands=[0] * 10)
    # two engines, three probes a round: round 2's middle probe narrow (its two replays on a
    # shared core), so a fourth round is run and rounds 1, 3, 4 are kept
    out = interleaved_throughput(["a", "b"], wl, 3, replay=fake_replay, warmup=0, top_up=3,
                                 probe=scripted([3.3, 3.3, 3.3, 3.3, 2.0, 3.3]))
    assert calls == ["a", "b", "b", "a", "a", "b", "b", "a"]
    assert out["a"]["ns_per_op"] == [100, 500, 800] and out["b"]["ns_per_op"] == [200, 600, 700]
    assert (out["a"]["rounds_run"], out["a"]["rounds_kept"]) == (4, 3)
    # never quiet enough: every round run is kept, and no more than repeat + top_up run
    calls.clear()
    out = interleaved_throughput(["a"], wl, 3, replay=fake_replay, warmup=0, top_up=2,
                                 probe=scripted([3.3] + [2.0] * 100))
    assert len(calls) == 5 and len(out["a"]["ns_per_op"]) == 5
    assert (out["a"]["rounds_run"], out["a"]["rounds_kept"]) == (5, 5)
    # nothing shared: exactly the rounds asked for
    calls.clear()
    out = interleaved_throughput(["a"], wl, 3, replay=fake_replay, warmup=0, top_up=3,
                                 probe=scripted([]))
    assert len(calls) == 3 and out["a"]["rounds_kept"] == 3
    with pytest.raises(ValueError, match="top_up"):
        interleaved_throughput(["a"], wl, 3, replay=fake_replay, top_up=-1)


def test_a_study_writes_its_summary_with_the_claims_table(tmp_path, monkeypatch):
    from lob.studies.conclude import Conclusion

    monkeypatch.setenv("LOB_ARTIFACTS", str(tmp_path))
    s = Study.start(str(tmp_path / "run"), "alloc_profile", engines=["v2"])
    t = Conclusion("sizes", [{"engine": "v2", "x": 1.0}], key="engine")
    t.say("v2 is the only engine.")
    assert s.add(t) is t
    text = s.finish(key_table="sizes")
    summary = json.loads((s.out / "summary.json").read_text())
    assert summary["key_table"] == "sizes" and "claims" in summary["tables"]
    assert text.startswith("v2 is the only engine.")
    assert summary["conditions"]["cpu_count"] >= 1


def test_a_run_that_measured_no_claim_shows_no_empty_claims_table(tmp_path):
    from lob.studies.conclude import Conclusion

    s = Study.start(str(tmp_path / "run"), "bisection")
    s.add(Conclusion("steps", [{"step": "a", "x": 1.0}], key="step"))
    s.finish(key_table="steps", only_measured=True)
    summary = json.loads((s.out / "summary.json").read_text())
    assert "claims" not in summary["tables"] and list(summary["tables"]) == ["steps"]

"""lob.diagnose.profile: the lineage table, the side-by-side table and the per-class breakdown
hold what they say (small streams; the figures themselves are benchmarks, not tested)."""

from __future__ import annotations

import json
import time

import numpy as np
import pandas as pd
import pytest

import lob
import lob.engines.compiled  # noqa: F401  (registers the @numba engines)
from lob.diagnose import profile as pf
from lob.engines import toggles as tg

SCALE = 0.01  # 10k commands of lobster_replay, 20k of cpp_comprehensive


def test_lineage_profile_has_every_step_its_mechanism_and_its_parent_ratio():
    t = pf.lineage_profile(scale=SCALE, rounds=5)
    chain = tg.chain("numba")
    assert chain[-1] == "v5@numba"
    for w in pf.DEFAULT_WORKLOADS:
        rows = t[t.workload == w]
        assert list(rows.step) == chain
        assert (rows.kernel_ns > 0).all() and (rows.replay_ns >= rows.kernel_ns).all()
        assert (rows.kernel_lo <= rows.kernel_ns).all() and (rows.kernel_ns <= rows.kernel_hi).all()
        root, rest = rows.iloc[0], rows.iloc[1:]
        assert pd.isna(root.parent) and np.isnan(root.vs_parent)
        assert list(rest.parent) == chain[:-1]
        assert rest.vs_parent.notna().all()
        assert set(rest.change) <= set(lob.measure.stats.CHANGE_WORDS)
        assert list(rows.mechanism) == [tg.VERSIONS[s.removesuffix("@numba")]["step"]
                                        for s in chain]
    # v0+pool re-scans the ladder and checks every FOK fully: its child v1 (bitmap) is
    # an order of magnitude faster on the narrow replay, a change no noise can hide
    v1 = t[(t.workload == "lobster_replay") & (t.step == "v1@numba")].iloc[0]
    assert v1.change == "faster" and v1.vs_parent < 0.5


def test_side_by_side_measures_every_known_engine_against_one_base():
    t = pf.side_by_side(workloads=("lobster_replay",), scale=SCALE, rounds=5)
    assert t.attrs["base"] == "v5@numba"
    names = set(t.engine)
    assert set(tg.chain("numba")) <= names
    assert "reference" not in names and "v2" not in names  # no pure-Python engines
    measured = t[t.kernel_ns.notna()]
    assert measured.same_checksum.all()  # every ratio is between engines that did the same work
    base = measured[measured.engine == "v5@numba"].iloc[0]
    assert base.vs_base == 1.0
    slow = measured[measured.engine == "v0+pool@numba"].iloc[0]
    assert slow.vs_base > 2 and slow.change == "slower"


def test_side_by_side_names_an_engine_that_refuses_the_book(monkeypatch):
    from lob.engines.base import EngineSpec

    def refuse(config):
        raise ValueError("picky: takes no band this wide\nsecond line")

    spec = EngineSpec("picky", refuse, "refuses every book", "numba")
    from lob.engines import registry

    real_spec, real_get = lob.engines.engine_spec, registry.get_engine
    monkeypatch.setattr(lob.engines, "engine_spec",
                        lambda name: spec if name == "picky" else real_spec(name))
    monkeypatch.setattr(registry, "get_engine",
                        lambda name, cfg=None: refuse(cfg) if name == "picky"
                        else real_get(name, cfg))
    t = pf.side_by_side(["v4@numba", "picky"], ("lobster_replay",), scale=SCALE, rounds=5)
    row = t[t.engine == "picky"].iloc[0]
    assert row.note == "picky: takes no band this wide"
    assert np.isnan(row.kernel_ns)


def test_command_breakdown_accounts_for_every_timed_command():
    # v5@numba: a kernel that times itself, whose timed replay `lob engines warm` compiles
    t = pf.command_breakdown("v5@numba", "lobster_replay", scale=SCALE, rounds=2)
    wl = lob.workload("lobster_replay", scale=SCALE)
    assert t.commands.sum() == int(wl.commands["timed"].sum())
    assert t.share.sum() == pytest.approx(1.0) and t.time_share.sum() == pytest.approx(1.0)
    kinds = set(t["class"])
    assert {"LIMIT rests untouched", "CANCEL hits", "MARKET trades"} <= kinds
    assert (t.median_ns > 0).all() and (t.untimed_ns_per_op > 0).all()
    assert list(t.time_share) == sorted(t.time_share, reverse=True)


def test_command_breakdown_refuses_an_engine_that_does_not_time_itself():
    with pytest.raises(ValueError, match="does not time itself"):
        pf.command_breakdown("v2", "lobster_replay", scale=0.001)


def test_cpu_clock_is_restored_and_a_bad_clock_is_refused():
    before = time.perf_counter_ns
    pf.measure(["v4@numba"], "lobster_replay", scale=0.001, rounds=1, clock="cpu")
    assert time.perf_counter_ns is before
    with pytest.raises(ValueError, match="clock must be one of"):
        pf.measure(["v4@numba"], "lobster_replay", scale=0.001, rounds=1, clock="tsc")
    with pytest.raises(ValueError, match="rounds must be"):
        pf.measure(["v4@numba"], "lobster_replay", scale=0.001, rounds=0)


def test_the_clock_is_passed_never_swapped_even_by_overlapping_threads():
    """Two measurements overlapping in two threads (issue 44): nothing process-wide changes
    while they run or after, so a third party's time.sleep still measures as it lasts; the
    CPU clock leaves a sleeping replay's kernel out."""
    import threading

    from lob.engines.base import EngineSpec
    from lob.engines.registry import get_engine, register_engine

    real = time.perf_counter_ns
    both_in = threading.Barrier(2, timeout=30)
    seen = []

    class Waits:  # reference, but each timed replay meets the other thread's inside it
        def __init__(self, config):
            self._e = get_engine("reference", config)

        def replay(self, cmds):
            seen.append(time.perf_counter_ns is real)
            if threading.current_thread() is not threading.main_thread():
                both_in.wait()
            time.sleep(0.05)  # off the CPU: a wall clock counts it, the CPU clock not
            return self._e.replay(cmds)

    register_engine(EngineSpec("waits", Waits, "sleeps in its replay"), replace=True)
    got = {}

    def run(k):
        got[k] = pf.measure(["waits"], "mixed_70_20_10", scale=0.001, rounds=1, clock="cpu")

    threads = [threading.Thread(target=run, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert all(seen) and len(seen) == 4 and time.perf_counter_ns is real
    t0 = time.perf_counter_ns()
    time.sleep(0.2)
    assert time.perf_counter_ns() - t0 >= 0.19e9  # the wall clock still measures a sleep
    wl = lob.workload("mixed_70_20_10", scale=0.001)
    for k in got:  # 50 ms asleep per replay: on the CPU clock the whole call is far less
        assert got[k]["waits"]["replay"][0] * len(wl.commands) < 0.04e9


def test_hardware_counters_is_none_or_counts():
    got = pf.hardware_counters()
    assert got is None or (got["cycles"] > 0 and got["instructions"] > 0)


def test_versus_base_is_a_rerunnable_record_of_interleaved_rounds():
    import json

    rep = pf.versus_base(["v4@numba", "v3@numba"], ("lobster_replay", "cpp_comprehensive"),
                         scale=SCALE, rounds=5)
    assert rep["base"] == "v4@numba" and rep["engines"] == ["v4@numba", "v3@numba"]
    assert rep["conditions"]["params"]["rounds"] == 5
    json.loads(json.dumps(rep))  # plain JSON: no numpy scalars, no NaN
    for w in pf.DEFAULT_WORKLOADS:
        got = rep["workloads"][w]
        assert got["commands"] == len(lob.workload(w, scale=SCALE).commands)
        assert got["steal_fraction"] is None or 0 <= got["steal_fraction"] <= 1
        for e in ("v4@numba", "v3@numba"):
            assert len(got["per_round"][e]["kernel"]) == 5
        base, other = got["table"]
        assert base["engine"] == "v4@numba" and base["vs_base"] == 1.0
        assert base["faster_rounds"] == 0  # never faster than itself
        assert other["same_checksum"] is True
        assert 0 <= other["faster_rounds"] <= 5
        k, kb = got["per_round"]["v3@numba"]["kernel"], got["per_round"]["v4@numba"]["kernel"]
        assert other["faster_rounds"] == sum(a < b for a, b in zip(k, kb, strict=True))
        for row in got["table"]:
            assert row["replay_over_kernel_lo"] <= row["replay_over_kernel"] \
                <= row["replay_over_kernel_hi"]
        # the yardsticks: a core probe before every replay and after the last of each round,
        # one stream floor a round, and every figure derived from them recomputed here
        probes = got["probes"]
        assert len(probes) == 5
        for p in probes:
            assert sorted(p["order"]) == ["v3@numba", "v4@numba"]
            assert len(p["width"]) == len(p["core_ghz"]) == 3
        ghz = [np.median(p["core_ghz"]) for p in probes]
        floor = [p["floor_ns"] for p in probes]
        assert got["core_ghz"][0] == pytest.approx(np.median(ghz))
        assert got["width"][0] == pytest.approx(np.median([w for p in probes for w in p["width"]]))
        assert got["floor"]["ns"][0] == pytest.approx(np.median(floor))
        assert got["floor"]["of_base"][0] == pytest.approx(np.median(np.divide(floor, kb)))
        assert 0 < got["floor"]["of_base"][0] < 1  # reading and writing is not all of it
        assert other["kernel_cycles"] == pytest.approx(np.median(np.multiply(k, ghz)))
        assert other["kernel_cycles_lo"] <= other["kernel_cycles"] <= other["kernel_cycles_hi"]
        shared = got["shared"]["v3@numba"]
        assert len(shared) == 5 and got["shared_replays"]["v3@numba"] == sum(shared)
        quiet = [x for x, sh in zip(k, shared, strict=True) if not sh]
        assert other.get("kernel_quiet") == (pytest.approx(np.median(quiet))
                                             if len(quiet) >= pf.QUIET_MIN else None)
        both = [a / b for a, b, s1, s2 in zip(k, kb, shared, got["shared"]["v4@numba"],
                                             strict=True) if not (s1 or s2)]
        assert other["quiet_pairs"] == len(both)
        assert other.get("vs_base_quiet") == (pytest.approx(np.median(both))
                                              if len(both) >= pf.QUIET_MIN else None)
    text = pf.versus_base_text(rep)
    assert "lobster_replay (10,000 commands)" in text and "cpp_comprehensive" in text
    assert "5 interleaved rounds" in text and "v3@numba" in text


def test_versus_base_refuses_an_unknown_name_before_measuring_anything(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("measured before checking the names")

    monkeypatch.setattr(pf, "measure", boom)
    with pytest.raises(ValueError, match="unknown engine 'nosuch'"):
        pf.versus_base(["v4@numba", "nosuch"], scale=SCALE, rounds=5)
    with pytest.raises(ValueError, match="unknown workload 'nosuch'"):
        pf.versus_base(["v4@numba"], ("lobster_replay", "nosuch"), scale=SCALE, rounds=5)
    with pytest.raises(ValueError, match="rounds must be"):
        pf.versus_base(["v4@numba"], scale=SCALE, rounds=0)


def test_versus_base_text_shows_a_refusal_and_a_different_checksum():
    row = {"kernel_ns": 10.0, "kernel_lo": 9.0, "kernel_hi": 11.0, "replay_ns": 11.0,
           "replay_over_kernel": 1.1, "replay_over_kernel_lo": 1.05,
           "replay_over_kernel_hi": 1.2}
    rep = {"base": "a", "clock": "wall", "rounds": 7, "confidence": 0.9,
           "conditions": {"cpu_model": "X", "git_sha": "0123456789abcdef"},
           "workloads": {"w": {"commands": 1000, "steal_fraction": None,
                               "load_avg": [None, None], "table": [
                                   {**row, "engine": "a", "vs_base": 1.0},
                                   {**row, "engine": "b", "vs_base": 1.5, "vs_base_lo": 1.4,
                                    "vs_base_hi": 1.6, "change": "slower", "faster_rounds": 0,
                                    "same_checksum": False},
                                   {"engine": "c", "kernel_ns": None, "note": "band too wide"}]}}}
    text = pf.versus_base_text(rep)
    lines = text.splitlines()
    assert "timed by the wall clock" in text and "steal not recorded" in text
    assert "core clock" not in text and "stream floor" not in text  # a record without them
    w = rep["workloads"]["w"]
    w.update(core_ghz=[3.0, 2.9, 3.1], width=[3.2, 2.2, 3.3], shared_replays={"a": 2, "b": 7})
    w["floor"] = {"ns": [4.0, 3.5, 4.5], "of_base": [0.2, 0.18, 0.22]}
    w["table"][0].update(kernel_cycles=30.0, kernel_cycles_lo=27.0, kernel_cycles_hi=33.0,
                         kernel_quiet=9.5, kernel_quiet_lo=9.1, kernel_quiet_hi=9.9)
    w["table"][1].update(kernel_quiet=None, quiet_pairs=0)  # every replay of b on a shared core
    text = pf.versus_base_text(rep)
    assert ("steal not recorded, core clock 3.00 GHz [2.90..3.10], issue width 3.20 "
            "[2.20..3.30]") in text
    a = next(ln for ln in text.splitlines() if ln.startswith("a "))
    assert a.split()[1:8] == ["10.0", "[9.0..11.0]", "9.5", "[9.1..9.9]", "(5)", "30", "[27..33]"]
    b = next(ln for ln in text.splitlines() if ln.startswith("b "))
    assert b.split()[1:4] == ["10.0", "[9.0..11.0]", "(0)"]
    assert b.split()[-4:] == ["0/7", "-", "(0)", "DIFFERENT"]  # no round both quiet: no ratio
    assert ("34-byte outcome): 4.0 [3.5..4.5] ns/op, 0.20 [0.18..0.22] of a's kernel"
            in text)
    b = next(ln for ln in lines if ln.startswith("b "))
    assert "1.500 [1.400..1.600] slower" in b and "0/7" in b and b.endswith("DIFFERENT")
    c = next(ln for ln in lines if ln.startswith("c "))
    assert c.split(None, 1)[1] == "refused: band too wide"
    assert "narrower probe" not in pf.versus_base_text(rep)  # a record without it
    w["width_follows"] = {"r": 0.16, "n": 42}
    assert ("a's kernel against the narrower probe around it: r = 0.16 over 42 replays (near -1 "
            "where a neighbour") in pf.versus_base_text(rep)


def test_lob_profile_writes_its_record_and_refuses_bad_input_in_one_line(tmp_path, capsys):
    import json

    from lob.cli import main

    out = tmp_path / "prof"
    assert main(["profile", "v4@numba", "v3@numba", "--workload", "lobster_replay",
                 "--rounds", "5", "--top-up", "3", "--scale", str(SCALE), "--out", str(out)]) == 0
    (path,) = out.glob("profile-*.json")
    rep = json.loads(path.read_text())
    assert list(rep["workloads"]) == ["lobster_replay"] and rep["rounds"] == 5
    assert rep["top_up"] == 3 and 5 <= rep["workloads"]["lobster_replay"]["rounds_run"] <= 8
    printed = capsys.readouterr().out
    assert "lobster_replay (10,000 commands" in printed and f"wrote {path}" in printed
    assert main(["profile", "nosuch", "--out", str(tmp_path / "x")]) == 2
    assert "unknown engine 'nosuch'" in capsys.readouterr().err
    afile = tmp_path / "afile"
    afile.write_text("")
    assert main(["profile", "v4@numba", "--out", str(afile)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("lob profile: error: cannot write into") and "\n" == err[-1]
    assert err.count("\n") == 1


def test_core_clock_is_the_chain_operations_over_the_measured_time():
    from lob.diagnose import probes

    ticks = iter([1_000, 4_001_000])  # 4 ms for 2M steps of 6 operations: 3 GHz
    assert probes.core_clock_ghz(2_000_000, now=lambda: next(ticks)) == pytest.approx(3.0)
    # on the real clock: a chain the compiler had folded away would read thousands of GHz
    assert 0.2 < probes.core_clock_ghz(200_000) < 10
    with pytest.raises(ValueError, match="steps must be"):
        probes.core_clock_ghz(0)


def test_core_probe_width_is_the_chains_rate_over_the_clock():
    from lob.diagnose import probes

    # the clock: 2 * 1,000 steps of 6 operations in 4,000 ns (3 GHz); the four chains: 1,000
    # steps of 24 operations in 8,000 ns: 3 operations a ns, 1.00 a cycle
    ticks = iter([0, 4_000, 10_000, 18_000])
    got = probes.core_probe(1_000, now=lambda: next(ticks))
    assert got["core_ghz"] == pytest.approx(3.0) and got["width"] == pytest.approx(1.0)
    real = probes.core_probe(probes.PROBE_STEPS)
    assert 0.5 < real["width"] < 8  # a chain the compiler had folded or serialised would not
    with pytest.raises(ValueError, match="steps must be"):
        probes.core_probe(0)


def test_width_follows_pairs_each_replay_with_the_narrower_probe_around_it():
    from lob.diagnose import probes

    widths = [3.3, 3.2, 2.2, 2.4, 3.4, 2.9]
    rounds = [{"order": ["b", "a"], "width": [3.4, w, 3.4]} for w in widths]  # a is 2nd
    slow = [30 - 5 * w for w in widths]  # slower on a narrower core
    got = probes.width_follows(rounds, "a", slow)
    assert got["n"] == 6 and got["r"] < -0.99
    assert probes.width_follows(rounds, "a", [10.0] * 6) is None  # no spread in the kernel
    assert probes.width_follows(rounds[:4], "a", slow[:4]) is None  # fewer than 5 replays
    steady = [10.0, 10.2, 9.9, 10.1, 10.0, 9.8]
    assert abs(probes.width_follows(rounds, "a", steady)["r"]) < 0.9
    with pytest.raises(ValueError, match="5 kernel times for 6 replays"):
        probes.width_follows(rounds, "a", slow[:5])


def test_shared_replays_marks_a_replay_by_the_probes_around_it():
    from lob.diagnose import probes

    rounds = [{"order": ["a", "b"], "width": [3.3, 3.2, 3.3]},
              {"order": ["b", "a"], "width": [3.3, 2.2, 3.3]},  # shared between b and a
              {"order": ["a", "b"], "width": [3.1, 3.0, 2.7]}]  # 2.7 < 0.85 * 3.3: b shared
    got = probes.shared_replays(rounds)
    assert got["a"].tolist() == [False, True, False]
    assert got["b"].tolist() == [False, True, True]
    assert probes.quiet_rounds(rounds).tolist() == [True, False, False]
    assert probes.quiet_rounds([]).tolist() == []
    # every probe equally narrow: nothing wider to tell a shared core by
    flat = probes.shared_replays([{"order": ["a"], "width": [2.2, 2.2]}])
    assert flat["a"].tolist() == [False]
    assert probes.shared_replays([]) == {}
    with pytest.raises(ValueError, match="one width probe before each replay"):
        probes.shared_replays([{"order": ["a", "b"], "width": [3.0, 3.0]}])


def test_machine_width_remembers_each_streams_widest_and_reads_their_upper_quartile(
        tmp_path, monkeypatch):
    from lob.diagnose import probes

    rec = tmp_path / "rec.json"
    # nothing on record: no reference until WIDTH_RECORD_MIN streams were recorded
    for i, widest in enumerate([3.3, 3.4, 2.5]):
        assert probes.machine_width([2.0, widest], path=rec) is None, i
    assert probes.machine_width([2.6], path=rec) is None  # read before this stream is added
    assert json.loads(rec.read_text()) == {probes._machine(): [3.3, 3.4, 2.5, 2.6]}
    assert probes.machine_width(path=rec) == pytest.approx(np.percentile([3.3, 3.4, 2.5, 2.6],
                                                                         75))
    # the newest WIDTH_RECORD streams only; nonsense widths are not recorded
    for _ in range(probes.WIDTH_RECORD):
        probes.machine_width([2.2, float("nan"), -1.0], path=rec)
    assert probes.machine_width(path=rec) == pytest.approx(2.2)
    # another machine's record is its own; the file keeps the newest WIDTH_MACHINES machines
    monkeypatch.setattr(probes, "_machine", lambda: "elsewhere")
    assert probes.machine_width([3.0], path=rec) is None
    assert len(json.loads(rec.read_text())) == 2
    for i in range(probes.WIDTH_MACHINES + 3):
        monkeypatch.setattr(probes, "_machine", lambda i=i: f"host{i}")
        probes.machine_width([3.0], path=rec)
    kept = list(json.loads(rec.read_text()))
    assert len(kept) == probes.WIDTH_MACHINES and kept[-1] == f"host{probes.WIDTH_MACHINES + 2}"
    monkeypatch.setattr(probes, "_machine", lambda: "elsewhere")
    # a damaged or unwritable record is ignored, never an error
    rec.write_text("{not json")
    assert probes.machine_width([3.0], path=rec) is None
    assert json.loads(rec.read_text()) == {"elsewhere": [3.0]}  # rewritten whole
    (tmp_path / "a-file").write_text("")
    blocked = tmp_path / "a-file" / "rec.json"  # its folder cannot be made
    for _ in range(probes.WIDTH_RECORD_MIN + 1):
        assert probes.machine_width([3.0], path=blocked) is None


def test_a_stream_wholly_on_a_shared_core_is_marked_against_the_machines_quiet_width():
    from lob.diagnose import probes

    flat = [{"order": ["a"], "width": [2.5, 2.6], "machine_width": 3.3},
            {"order": ["a"], "width": [3.2, 3.3], "machine_width": 3.3}]
    assert probes.shared_replays(flat)["a"].tolist() == [True, False]
    # no record: relative to the stream alone (2.6 < 0.85 * 3.3 still marked)
    assert probes.shared_replays([{**r, "machine_width": None} for r in flat])["a"].tolist() \
        == [True, False]
    assert probes.shared_replays(flat[:1])["a"].tolist() == [True]
    assert probes.shared_replays([{**flat[0], "machine_width": None}])["a"].tolist() == [False]


def test_stream_floor_reads_every_command_and_writes_every_outcome():
    from lob.diagnose import probes
    from lob.semantics import OUTCOME_DTYPE

    cmds = lob.workload("lobster_replay", scale=0.001).commands
    out = np.zeros(len(cmds) + 3, dtype=OUTCOME_DTYPE)
    assert probes.stream_floor(cmds, out) > 0
    got = out[: len(cmds)]
    assert (got["status"] == cmds["kind"]).all() and (got["id"] == cmds["id"]).all()
    assert (got["remaining"] == cmds["qty"]).all() and (got["filled"] == cmds["price"]).all()
    assert (got["fills"] == cmds["owner"]).all()
    assert (out[len(cmds):] == np.zeros(3, dtype=OUTCOME_DTYPE)).all()  # nothing past the end
    with pytest.raises(ValueError, match="at least as long"):
        probes.stream_floor(cmds, out[:10])
    with pytest.raises(ValueError, match="COMMAND_DTYPE"):
        probes.stream_floor(out, out)


def _scripted_probes(monkeypatch, widths):
    """core_probe returning the given widths in turn (then 3.3): a core shared, then not."""
    from lob.diagnose import probes

    it = iter(widths)
    monkeypatch.setattr(probes, "core_probe",
                        lambda steps=0, now=None: {"core_ghz": 3.0, "width": next(it, 3.3)})


def test_measure_tops_up_rounds_until_enough_ran_on_a_quiet_core(monkeypatch):
    # one engine, two probes a round: the first four probes narrow, so rounds 1 and 2 ran on
    # a shared core, and rounds 3..7 bring the quiet ones to 5
    _scripted_probes(monkeypatch, [2.0] * 4)
    got = pf.measure(["v4@numba"], "lobster_replay", scale=0.001, rounds=5, top_up=5)
    assert len(got["v4@numba"]["kernel"]) == 7
    assert got["v4@numba"]["shared"] == [True, True, False, False, False, False, False]
    # never quiet: the top-up stops at rounds + top_up
    _scripted_probes(monkeypatch, [3.3] + [2.0] * 100)
    got = pf.measure(["v4@numba"], "lobster_replay", scale=0.001, rounds=5, top_up=2)
    assert len(got["v4@numba"]["kernel"]) == 7 and all(got["v4@numba"]["shared"])
    # the next stream is judged against the machine's record as well: probed wholly at 2.0
    # after streams that reached 3.3, every replay is marked
    from lob.diagnose import probes

    for _ in range(probes.WIDTH_RECORD_MIN):
        probes.machine_width([3.3])
    _scripted_probes(monkeypatch, [2.0] * 100)
    got = pf.measure(["v4@numba"], "lobster_replay", scale=0.001, rounds=5, top_up=1)
    assert len(got["v4@numba"]["kernel"]) == 6 and all(got["v4@numba"]["shared"])
    # no top-up, no probes: the rounds asked for, unmarked
    got = pf.measure(["v4@numba"], "lobster_replay", scale=0.001, rounds=5)
    assert len(got["v4@numba"]["kernel"]) == 5 and "shared" not in got["v4@numba"]
    with pytest.raises(ValueError, match="top_up must be"):
        pf.measure(["v4@numba"], "lobster_replay", scale=0.001, rounds=5, top_up=-1)


def test_comparisons_leave_out_the_rounds_on_a_shared_core():
    # v3 takes twice v4's time on a quiet core; rounds 2 and 5 ran v3 on a shared core (x1.6)
    # and round 7 v4's twin (x1.6): 8 rounds, 6 quiet pairs for v3/v4, 7 for the A/A pair
    v4 = [10.0, 11.0, 9.0, 10.5, 9.5, 10.0, 10.2, 9.8]
    sh3 = [False, True, False, False, True, False, False, False]
    sh_aa = [False] * 6 + [True, False]
    v3 = [2 * x * (1.6 if s else 1.0) for x, s in zip(v4, sh3, strict=True)]
    aa = [x * (1.6 if s else 1.0) for x, s in zip(v4, sh_aa, strict=True)]
    s = {"v4@numba": {"kernel": v4, "replay": v4, "checksum": 1, "shared": [False] * 8},
         "v3@numba": {"kernel": v3, "replay": v3, "checksum": 1, "shared": sh3},
         "v4@numba" + pf.AA: {"kernel": aa, "replay": aa, "checksum": 1, "shared": sh_aa}}
    t = pf.side_by_side(["v4@numba", "v3@numba"], ("w",), base="v4@numba", twin="v4@numba",
                        measured={"w": s})
    v3row = t[t.engine == "v3@numba"].iloc[0]
    assert v3row.vs_base == pytest.approx(2.0) and v3row.quiet_pairs == 6
    assert v3row.quiet_replays == 6 and v3row.kernel_ns == pytest.approx(
        np.median([x for x, sh in zip(v3, sh3, strict=True) if not sh]))
    assert v3row.aa_low == pytest.approx(1.0) and v3row.aa_high == pytest.approx(1.0)
    # the same data taken whole: the shared rounds pull the ratio and widen the band (the
    # robust band: one stray A/A round of eight moves it, but does not set it at its 1.6)
    t = pf.side_by_side(["v4@numba", "v3@numba"], ("w",), base="v4@numba", twin="v4@numba",
                        measured={"w": s}, quiet=False)
    whole = t[t.engine == "v3@numba"].iloc[0]
    assert "quiet_pairs" not in t.columns and 1.05 < whole.aa_high < 1.3
    # fewer than QUIET_MIN quiet pairs: every round, and pairs None
    s["v3@numba"]["shared"] = [True] * 4 + [False] * 4
    t = pf.side_by_side(["v4@numba", "v3@numba"], ("w",), base="v4@numba", measured={"w": s})
    v3row = t[t.engine == "v3@numba"].iloc[0]
    assert pd.isna(v3row.quiet_pairs) and pd.isna(v3row.quiet_replays)
    assert v3row.vs_base == pytest.approx(np.median(np.divide(v3, v4)))

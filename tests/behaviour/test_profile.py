"""lob.measure.profile: the lineage table, the side-by-side table and the per-class breakdown
hold what they say (small streams; the figures themselves are benchmarks, not tested)."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest

import lob
import lob.engines.compiled  # noqa: F401  (registers the @numba engines)
from lob.engines import toggles as tg
from lob.measure import profile as pf

SCALE = 0.01  # 10k commands of lobster_replay, 20k of cpp_comprehensive


def test_lineage_profile_has_every_step_its_mechanism_and_its_parent_ratio():
    t = pf.lineage_profile(scale=SCALE, rounds=5)
    chain = tg.chain("numba")
    assert chain[-1] == "v4@numba"
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
    assert t.attrs["base"] == "v4@numba"
    names = set(t.engine)
    assert set(tg.chain("numba")) <= names
    assert "reference" not in names and "v2" not in names  # no pure-Python engines
    measured = t[t.kernel_ns.notna()]
    assert measured.same_checksum.all()  # every ratio is between engines that did the same work
    base = measured[measured.engine == "v4@numba"].iloc[0]
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
    t = pf.command_breakdown("v4@numba", "lobster_replay", scale=SCALE, rounds=2)
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


def test_hardware_counters_is_none_or_counts():
    got = pf.hardware_counters()
    assert got is None or (got["cycles"] > 0 and got["instructions"] > 0)

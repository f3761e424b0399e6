"""Differential fuzz: every registered engine agrees with ``reference`` outcome by outcome, fill
by fill and checksum by checksum, on seeded random streams of every command kind.

Streams come from a numpy ``Generator`` with fixed seeds (same seed -> same bytes). Each
stream mixes every order type, cancels and modifies of live, dead and never-issued ids,
mass cancels of every scope, and ~5% invalid commands; books stay small (few owners, small
quantities, frequent cancels) so that ``check()`` after every command stays cheap.

A share of every stream (4%; 25% in the ``top`` profile, whose band ends at MAX_PRICE and
whose quantities reach MAX_QTY) carries values at and around the bounds of
:mod:`lob.semantics` and the ends of the field types: quantities and notional amounts just
below, at and above MAX_QTY / MAX_NOTIONAL and at the ends of int64, ids and mass-cancel
price ranges at the ends of int64, prices at the band edges and beyond MAX_PRICE, owners at
the ends of int32, kinds, types and sides at the ends of int8 (:func:`bound_value_rows`
counts them; ``test_fuzz_volume`` states how many per run).

Python engines run command by command through ``execute`` with ``check()`` after each;
engines of other backends replay the stream in a few batches, checked after each.

Any registered engine takes the fuzz: lob's own always, others named in ``$LOB_FUZZ_ENGINES``
(comma-separated, e.g. a foreign engine of ``$LOB_ENGINES_TOML``). Every case is generated
inside what the engine declares (:mod:`lob.workloads.fuzz`: its band, STP modes, order
types, kinds, scopes), so nothing is skipped: a case that cannot run fails, saying why.
Replays are compared outcome by outcome, fill by fill and L2 level by level at checkpoints.

The generator lives in :mod:`lob.workloads.fuzz`; its names are re-exported here for the
other tests that import them.
"""

from __future__ import annotations

import functools
import os
import sys

import numpy as np
import pytest
from conftest import ENGINES, OTHER_ENGINES, l2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lob
from lob.engines import engine_spec
from lob.engines.capabilities import ALL, Capabilities, kind_type_counts
from lob.engines.registry import engine_capabilities
from lob.semantics import (
    MAX_NOTIONAL,
    MAX_PRICE,
    MAX_QTY,
    BookConfig,
    Kind,
    OrderType,
    Reason,
    Status,
    StpMode,
    checksum,
    commands,
)
from lob.workloads import fuzz
from lob.workloads.fuzz import I64_MAX, I64_MIN, PROFILES, gen_stream, gen_stream_marked

__all__ = ["GROUPS", "PROFILES", "assert_same", "case_config", "gen_stream", "gen_stream_marked",
           "reference_run", "run_checked", "stream"]

STREAM_LEN = fuzz.DEFAULT_LEN
SEEDS_PER_CASE = int(os.environ.get("LOB_FUZZ_SEEDS", "6"))
CASES = fuzz.cases(SEEDS_PER_CASE)  # (profile, STP slot, seed); slot = StpMode for lob's own
CASE_IDS = [f"{p}-{StpMode(m).name}-s{s}" for p, m, s in CASES]
CASE_GROUP = 2  # streams per test case: fewer, longer cases keep xdist overhead low
GROUPS = [CASES[i:i + CASE_GROUP] for i in range(0, len(CASES), CASE_GROUP)]
GROUP_IDS = [CASE_IDS[i] for i in range(0, len(CASES), CASE_GROUP)]


@functools.cache
def bound_value_rows(profile: str, stp: StpMode, seed: int) -> np.ndarray:
    """Indices of the commands of a case's stream drawn at the bounds."""
    return fuzz.case(profile, int(stp), seed).bound_rows(STREAM_LEN)


def case_config(profile: str, stp: StpMode) -> BookConfig:
    return fuzz.case(profile, int(stp), 0).config


@functools.cache
def stream(profile: str, stp: StpMode, seed: int) -> np.ndarray:
    return fuzz.case(profile, int(stp), seed).commands(STREAM_LEN)


@functools.cache
def reference_run(profile: str, stp: StpMode, seed: int):
    eng = lob.get_engine("reference", case_config(profile, stp))
    res = eng.replay(stream(profile, stp, seed))
    return res, l2(eng, 1_000_000)


def run_checked(name: str, config: BookConfig, cmds: np.ndarray):
    """(outcomes, fills, final L2) of ``cmds`` through a fresh engine, invariants checked."""
    run = fuzz.replay_checkpoints(lob.get_engine(name, config), cmds, checkpoints=1,
                                  per_op=_per_op(name))
    return run.outcomes, run.fills, run.books[-1][1]


def _per_op(name: str) -> bool:
    """Python engines run command by command with ``check()`` after each."""
    return engine_spec(name).backend == "python"


def assert_same(name, cmds, ref, got) -> None:
    """Outcomes, fills, checksum and final book of two (outcomes, fills, L2) results."""
    runs = [fuzz.Run(o, f, [(len(cmds), book)]) for o, f, book in (ref, got)]
    diff = fuzz.first_difference(cmds, *runs)
    assert diff is None, f"{name}: {diff}"
    assert checksum(got[0], got[1]) == checksum(ref[0], ref[1])


@pytest.mark.parametrize("group", GROUPS, ids=GROUP_IDS)
def test_reference_is_self_consistent(group):
    """The oracle itself: invariants after every op, and execute == replay, bit for bit."""
    for profile, stp, seed in group:
        res, book = reference_run(profile, stp, seed)
        got = run_checked("reference", case_config(profile, stp), stream(profile, stp, seed))
        assert_same("reference (per op)", stream(profile, stp, seed),
                    (res.outcomes, res.fills, book), got)
        assert res.checksum == checksum(got[0], got[1])


# lob's C++ engines (lob.engines.native: built here, or not registered without a compiler)
NATIVE_ENGINES = [e for e in lob.engine_names() if engine_spec(e).backend == "cpp"]
FUZZ_ENGINES = OTHER_ENGINES + NATIVE_ENGINES + [
    n for n in filter(None, os.environ.get("LOB_FUZZ_ENGINES", "").split(","))
    if n not in OTHER_ENGINES + NATIVE_ENGINES]


@functools.cache
def fitted(name: str, profile: str, slot: int, seed: int) -> tuple[fuzz.FuzzCase | None, str]:
    """The case fitted to what ``name`` declares, or (None, why it cannot be)."""
    caps = engine_capabilities(name)
    try:
        c = fuzz.case(profile, slot, seed, caps)
    except ValueError as e:
        return None, f"{profile}-slot{slot}-s{seed}: {e}"
    cmds = c.commands(STREAM_LEN)
    why = caps.config_refusal(name, c.config) or caps.commands_refusal(name, cmds, c.config)
    return (None, f"{c.name}: {why}") if why else (c, "")


@functools.cache
def reference_checkpoints(c: fuzz.FuzzCase) -> fuzz.Run:
    return fuzz.replay_checkpoints(lob.get_engine("reference", c.config),
                                   c.commands(STREAM_LEN))


def check_engine_cases(name: str, group) -> int:
    """Run ``name`` on each case of ``group`` fitted to its declaration and compare with
    ``reference`` (outcomes, fills, checksum, L2 level by level at checkpoints, the batch
    path); a case the fitted generator cannot give it fails, naming why. Returns the cases
    run."""
    refused = []
    ran = 0
    for profile, slot, seed in group:
        c, why = fitted(name, profile, slot, seed)
        if c is None:
            refused.append(why)
            continue
        cmds = c.commands(STREAM_LEN)
        ref = reference_checkpoints(c)
        got = fuzz.replay_checkpoints(lob.get_engine(name, c.config), cmds,
                                      per_op=_per_op(name))
        diff = fuzz.first_difference(cmds, ref, got)
        assert diff is None, f"{name} ({c.name}, band {c.config.min_price}..{c.config.max_price}" \
                             f"): {diff}"
        want = checksum(ref.outcomes, ref.fills)
        assert checksum(got.outcomes, got.fills) == want
        again = lob.get_engine(name, c.config).replay(cmds)  # the whole batch in one call
        assert again.checksum == want, f"{name} ({c.name}): replay checksum differs"
        ran += 1
    if refused:
        pytest.fail(f"{name}: {len(refused)} of {len(group)} fuzz cases could not run within "
                    f"its declared capabilities ({'; '.join(refused)}); the fuzz generates "
                    f"inside a declaration, so this is a declaration no book can satisfy")
    return ran


def _fuzz_params():
    """Every engine x every case group. A pure-Python engine runs command by command with its
    invariants checked after each (~0.5 s a group): `make test` takes every fourth group, and
    CI (`make test-ci`, the `ci` marker) the others, so each CI run still fuzzes every engine on
    every case."""
    python = {n for n in FUZZ_ENGINES if n in lob.engine_names()
              and engine_spec(n).backend == "python"}
    for name in FUZZ_ENGINES:
        for i, (group, gid) in enumerate(zip(GROUPS, GROUP_IDS, strict=True)):
            ci = name in python and i % 4 != 0
            yield pytest.param(name, group, id=f"{name}-{gid}",
                               marks=pytest.mark.ci if ci else ())


@pytest.mark.parametrize("name, group", list(_fuzz_params()))
def test_engine_agrees_with_reference(name, group):
    check_engine_cases(name, group)


def test_streams_are_deterministic_and_varied():
    a = gen_stream(7, 5_000, 100, 111, None)
    assert a.tobytes() == gen_stream(7, 5_000, 100, 111, None).tobytes()
    assert a.tobytes() != gen_stream(8, 5_000, 100, 111, None).tobytes()


def test_fuzz_volume():
    """At least 1M fuzzed commands per CI run (`make test` + `make test-ci`): reference
    self-check + every other engine; per engine, at least 8,000 of them drawn at the bounds
    (~7% of its commands)."""
    per_engine = len(CASES) * STREAM_LEN
    total = per_engine * (1 + len(OTHER_ENGINES))
    at_bounds = sum(len(bound_value_rows(*case)) for case in CASES)
    print(f"fuzz: {per_engine:,} commands per engine, {at_bounds:,} of them at the bounds; "
          f"{len(ENGINES)} engines, {total:,} commands in all")
    if SEEDS_PER_CASE >= 6:  # the CI setting; smaller values are for quick local runs
        assert total >= 1_000_000, (total, ENGINES)
        assert at_bounds >= 8_000, at_bounds


def test_bound_values_cover_every_field_end():
    """The bound-value share reaches each bound on each side, and its commands do things
    (rest, trade, get rejected for each reason) rather than only being rejected."""
    c = np.concatenate([stream("top", m, 0) for m in StpMode]
                       + [stream("narrow", m, 0) for m in StpMode])
    for v in (MAX_QTY - 1, MAX_QTY, MAX_QTY + 1, I64_MAX, I64_MIN):
        assert (c["qty"] == v).any(), v
    for v in (MAX_NOTIONAL, MAX_NOTIONAL + 1):
        assert ((c["qty"] == v) & (c["otype"] == 5)).any(), v
    for v in (I64_MIN, I64_MAX):
        assert ((c["id"] == v) & (c["kind"] == Kind.CANCEL)).any()
        assert ((c["price"] == v) & (c["kind"] == Kind.MASS_CANCEL)).any()
        assert ((c["price_hi"] == v) & (c["kind"] == Kind.MASS_CANCEL)).any()
    assert (c["owner"] == 2**31 - 1).any() and (c["owner"] == -(2**31)).any()
    assert (c["kind"] == 127).any() and (c["kind"] == -128).any()
    outcomes = np.concatenate([reference_run("top", m, 0)[0].outcomes for m in StpMode])
    at = np.concatenate([bound_value_rows("top", m, 0) + i * STREAM_LEN
                         for i, m in enumerate(StpMode)])
    o = outcomes[at]
    reasons = set(o["reason"][o["status"] == Status.REJECTED].tolist())
    assert {Reason.BAD_QTY, Reason.BAD_PRICE, Reason.BAD_OWNER, Reason.BAD_KIND,
            Reason.BAD_TYPE, Reason.BAD_SIDE} <= reasons
    assert (o["status"] == Status.FILLED).sum() > 20
    assert (o["status"] == Status.ACCEPTED).sum() > 50
    assert (o["removed"] > 0).sum() > 10  # mass cancels at the ends of int64 remove orders
    assert (outcomes["filled"] >= MAX_QTY).sum() > 10  # traded sums beyond one bound order


def test_streams_cover_every_outcome():
    """The fuzz reaches every status and reason the spec defines (so it can catch them)."""
    status, reason = set(), set()
    kinds = {int(m): 0 for m in StpMode}
    cancel_found = cancel_missed = modify_found = 0
    for profile, stp, seed in CASES[:: max(1, SEEDS_PER_CASE)]:
        res, _ = reference_run(profile, stp, seed)
        o, cmds = res.outcomes, stream(profile, stp, seed)
        status |= set(o["status"].tolist())
        reason |= set(o["reason"].tolist())
        kinds[int(stp)] += int(o["removed"].sum())
        is_cancel = cmds["kind"] == Kind.CANCEL
        cancel_found += int((is_cancel & (o["status"] == Status.CANCELLED)).sum())
        cancel_missed += int((is_cancel & (o["status"] == Status.NOT_FOUND)).sum())
        modify_found += int(((cmds["kind"] == Kind.MODIFY) & (o["status"] <= Status.CANCELLED))
                            .sum())
    assert status == set(int(s) for s in Status)
    assert reason == set(int(r) for r in Reason) - {int(Reason.POOL_FULL)}
    assert min(cancel_found, cancel_missed, modify_found) > 100
    assert all(kinds.values())


# --- hypothesis: short arbitrary command lists, shrunk to a minimal failing example -------

def _cmd():
    price = st.integers(95, 106)
    owner = st.integers(0, 3)
    return st.one_of(
        st.fixed_dictionaries(dict(kind=st.just(0), otype=st.integers(0, 5),
                                   side=st.integers(0, 1), owner=owner,
                                   price=price, qty=st.integers(0, 6))),
        st.fixed_dictionaries(dict(kind=st.just(0), otype=st.just(5), side=st.integers(0, 1),
                                   owner=owner, qty=st.integers(1, 700))),
        st.fixed_dictionaries(dict(kind=st.just(1), id=st.integers(0, 30))),
        st.fixed_dictionaries(dict(kind=st.just(2), id=st.integers(0, 30), qty=st.integers(0, 6),
                                   price=st.sampled_from([0, 96, 100, 104]))),
        st.fixed_dictionaries(dict(kind=st.just(3), otype=st.integers(0, 4),
                                   side=st.integers(0, 1), owner=owner, price=price,
                                   price_hi=price)),
    )


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(_cmd(), max_size=40), stp=st.sampled_from(list(StpMode)))
def test_hypothesis_command_lists(rows, stp):
    cmds = commands(rows)
    config = BookConfig(96, 105, stp)
    eng = lob.get_engine("reference", config)
    ref = eng.replay(cmds)
    ref_all = (ref.outcomes, ref.fills, l2(eng, 1_000_000))
    for name in ENGINES:
        assert_same(name, cmds, ref_all, run_checked(name, config, cmds))


# --- the generator fitted to a partial declaration ------------------------------------------

SEED_LIKE = Capabilities(frozenset({StpMode.CANCEL_MAKER}),
                         frozenset(OrderType(t) for t in range(4)),
                         frozenset({Kind.SUBMIT, Kind.CANCEL}), frozenset(), 99, 1, 99)


def test_fitted_streams_stay_inside_a_partial_declaration_and_use_all_of_it():
    """A 1..99 engine of one STP mode, four order types, submits and cancels: every case
    is fitted (no refusal), and the streams still reach each declared type, invalid
    commands, and both band ends."""
    seen_types, statuses = set(), set()
    for profile, slot, seed in fuzz.cases(1):
        c = fuzz.case(profile, slot, seed, SEED_LIKE)
        cmds = c.commands(STREAM_LEN)
        assert c.config.stp == StpMode.CANCEL_MAKER
        assert 1 <= c.config.min_price <= c.config.max_price <= 99
        assert SEED_LIKE.config_refusal("e", c.config) is None
        assert SEED_LIKE.commands_refusal("e", cmds, c.config) is None
        assert set(cmds["kind"].tolist()) - {0, 1} <= {4, 5, -1, 127, -128, 2}  # bad kinds
        seen_types |= set(cmds["otype"][cmds["kind"] == 0].tolist())
        statuses |= set(lob.get_engine("reference", c.config).replay(cmds)
                        .outcomes["status"].tolist())
    assert {0, 1, 2, 3} <= seen_types
    assert statuses == {int(s) for s in Status}
    assert fuzz.fit("narrow", SEED_LIKE)[:2] == (88, 99)  # anchored at the highest price
    assert fuzz.fit("words", SEED_LIKE)[:2] == (1, 99)  # crosses the 64-bit word
    assert fuzz.fit("wide", SEED_LIKE).window == 24
    top = fuzz.fit("top", Capabilities(max_band_width=50))
    assert (top.lo, top.hi) == (MAX_PRICE - 49, MAX_PRICE)
    assert fuzz.fit("narrow", ALL) == PROFILES["narrow"]


def test_a_declaration_no_case_fits_fails_the_fuzz(monkeypatch):
    """Nothing is skipped: an engine for which no case can be built fails, saying why."""
    none = Capabilities(stp_modes=frozenset())
    monkeypatch.setattr(sys.modules[__name__], "engine_capabilities", lambda name: none)
    fitted.cache_clear()
    try:
        with pytest.raises(pytest.fail.Exception, match="declares no STP mode"):
            check_engine_cases("reference", GROUPS[0])
    finally:
        fitted.cache_clear()


def test_the_comparison_reads_every_level_at_every_checkpoint():
    cmds = stream("narrow", StpMode.NONE, 0)
    ref = fuzz.replay_checkpoints(lob.get_engine("reference", case_config("narrow", 0)), cmds)
    assert len(ref.books) == fuzz.CHECKPOINTS and ref.books[-1][0] == len(cmds)
    assert fuzz.first_difference(cmds, ref, ref) is None
    at, book = ref.books[3]
    side = "bids" if book["bids"] else "asks"
    wrong = {**book, side: [*book[side][:-1], (book[side][-1][0], -1, book[side][-1][2])]}
    bad = fuzz.Run(ref.outcomes, ref.fills, [*ref.books[:3], (at, wrong), *ref.books[4:]])
    msg = fuzz.first_difference(cmds, ref, bad)
    assert msg.startswith(f"L2 after {at} commands, {side} level {len(book[side]) - 1}")


def test_the_declaration_check_is_one_pass_and_exact():
    """A MODIFY that validation rejects needs no capability, a valid one does; an exact
    price range refuses a band outside it."""
    c = commands([dict(kind=0, otype=0, side=0, owner=1, price=5, qty=1),
                  dict(kind=2, id=1, qty=0)])
    cfg = BookConfig(1, 99, StpMode.CANCEL_MAKER)
    assert SEED_LIKE.commands_refusal("e", c, cfg) is None
    c["qty"][1] = 3
    assert "MODIFY" in SEED_LIKE.commands_refusal("e", c, cfg)
    assert kind_type_counts(c)[2] == 1 and kind_type_counts(c).sum() == 2
    assert "holds prices 1..99 only" in SEED_LIKE.config_refusal(
        "e", BookConfig(2, 100, StpMode.CANCEL_MAKER))
    assert SEED_LIKE.config_refusal("e", BookConfig(2, 98, StpMode.CANCEL_MAKER)) is None

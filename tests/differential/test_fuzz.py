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
engines of other backends replay the whole batch and are checked at the end of the stream.

Any registered engine takes the fuzz: lob's own always, others named in ``$LOB_FUZZ_ENGINES``
(comma-separated, e.g. a foreign engine of ``$LOB_ENGINES_TOML``). An engine runs the cases
its declared capabilities allow (:func:`lob.engines.registry.engine_capabilities`: STP
modes, order types, kinds, scopes, band); the others are skipped with the reason stated.
"""

from __future__ import annotations

import functools
import os

import numpy as np
import pytest
from conftest import ENGINES, OTHER_ENGINES, l2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lob
from lob.engines import engine_spec
from lob.engines.registry import engine_capabilities
from lob.semantics import (
    COMMAND_DTYPE,
    FILL_DTYPE,
    MAX_NOTIONAL,
    MAX_PRICE,
    MAX_QTY,
    OUTCOME_DTYPE,
    BookConfig,
    Kind,
    Outcome,
    Reason,
    Scope,
    Status,
    StpMode,
    checksum,
    commands,
)

# name -> (band lo, band hi, width of the price window orders are drawn from, quantity
# unit, share of commands at the bounds, seeds per STP mode as a fraction of SEEDS_PER_CASE)
PROFILES = {
    "narrow": (100, 111, None, 1, 0.04, 1),  # every price in the band: deep levels
    "words": (40, 230, None, 1, 0.04, 1),  # crosses bitmap word boundaries (64, 128, 192)
    "wide": (1_000, 6_000, 24, 1, 0.04, 1),  # a sparse book over a wide band, moving window
    # the top of the price range, quantities up to MAX_QTY, a quarter of bound values
    "top": (MAX_PRICE - 200, MAX_PRICE, None, MAX_QTY // 8, 0.25, 1 / 3),
}
STREAM_LEN = 2_000
SEEDS_PER_CASE = int(os.environ.get("LOB_FUZZ_SEEDS", "6"))
CASES = [(p, m, s) for p, spec in PROFILES.items() for m in StpMode
         for s in range(max(1, round(SEEDS_PER_CASE * spec[5])))]
CASE_IDS = [f"{p}-{m.name}-s{s}" for p, m, s in CASES]
CASE_GROUP = 2  # streams per test case: fewer, longer cases keep xdist overhead low
GROUPS = [CASES[i:i + CASE_GROUP] for i in range(0, len(CASES), CASE_GROUP)]
GROUP_IDS = [CASE_IDS[i] for i in range(0, len(CASES), CASE_GROUP)]

OTYPE_P = [0.45, 0.10, 0.12, 0.13, 0.10, 0.10]  # LIMIT IOC FOK POST_ONLY MARKET NOTIONAL


def gen_stream(seed: int, n: int, lo: int, hi: int, window: int | None, unit: int = 1,
               extreme: float = 0.0) -> np.ndarray:
    """``n`` fuzz commands for a book with band [lo, hi]; a pure function of its arguments.

    ``unit`` scales quantities (1..8 units); a share ``extreme`` of the commands is then
    replaced by commands at the bounds (:func:`_extreme`).
    """
    return gen_stream_marked(seed, n, lo, hi, window, unit, extreme)[0]


def gen_stream_marked(seed, n, lo, hi, window, unit=1, extreme=0.0):
    """:func:`gen_stream` and the indices of the commands it drew at the bounds."""
    rng = np.random.default_rng([seed, lo, hi, window or 0])
    c = np.zeros(n, COMMAND_DTYPE)
    c["timed"] = True
    u = rng.random(n)
    kind = np.select([u < 0.68, u < 0.82, u < 0.985], [Kind.SUBMIT, Kind.CANCEL, Kind.MODIFY],
                     Kind.MASS_CANCEL)
    c["kind"] = kind
    if window is None:
        base = np.full(n, lo)
        span = hi - lo + 1
    else:  # a window of prices that jumps to a random place every ~300 commands
        starts = rng.integers(lo, hi - window + 2, size=n // 300 + 1)
        base = starts[np.arange(n) // 300]
        span = window
    side = rng.integers(0, 2, n)
    # most buys in the lower part of the window and most sells in the upper part, so that
    # books build some depth; the rest are uniform, and many of those cross
    frac = rng.random(n)
    skew = rng.random(n) < 0.75
    frac = np.where(skew, frac * 0.6 + np.where(side == 1, 0.4, 0.0), frac)
    price = base + (frac * span).astype(np.int64)
    c["price"] = price
    c["side"] = side
    c["owner"] = rng.integers(1, 4, n)  # three owners: self-trades are frequent
    c["qty"] = rng.integers(1, 9, n) * unit
    sub = kind == Kind.SUBMIT
    otype = rng.choice(6, size=n, p=OTYPE_P)
    c["otype"] = np.where(sub, otype, 0)
    mkt = sub & (otype >= 4)
    c["price"][mkt] = rng.integers(-5, hi + 5, int(mkt.sum()))  # ignored for market orders
    notional = sub & (otype == 5)
    c["qty"][notional] = price[notional] * rng.integers(0, 7, int(notional.sum())) * unit + \
        rng.integers(1, price[notional] + 1)
    mod = kind == Kind.MODIFY
    c["price"][mod & (rng.random(n) < 0.4)] = 0  # keep the price
    mass = kind == Kind.MASS_CANCEL
    scope = rng.choice(4, size=n, p=[0.1, 0.3, 0.3, 0.3])
    c["otype"][mass] = scope[mass]
    c["price_hi"] = np.where(mass & (scope == Scope.PRICE_RANGE),
                             price + rng.integers(0, 5, n), 0)

    bad = rng.random(n) < 0.05
    _corrupt(c, np.nonzero(bad)[0], rng, lo, hi)

    # ids: the target of a cancel / modify is mostly a recent id (often still resting),
    # sometimes any earlier id (often dead), sometimes one never issued
    valid_sub = (c["kind"] == Kind.SUBMIT) & ~bad
    issued = np.cumsum(valid_sub) - valid_sub  # ids issued before each command
    pick = rng.random(n)
    recent = issued - rng.integers(0, 10, n)
    anywhere = (rng.random(n) * issued).astype(np.int64) + 1
    never = np.where(rng.random(n) < 0.5, issued + rng.integers(1, 4, n), -rng.integers(0, 3, n))
    target = np.select([pick < 0.6, pick < 0.88], [recent, anywhere], never)
    targeted = np.isin(c["kind"], (Kind.CANCEL, Kind.MODIFY))
    c["id"] = np.where(targeted, target, 0)
    edge = np.nonzero(rng.random(n) < extreme)[0] if extreme else np.zeros(0, np.int64)
    _extreme(c, edge, rng, lo, hi, np.maximum(recent, 1))
    return c, edge


I64_MIN, I64_MAX = -(2**63), 2**63 - 1
ID_ENDS = [I64_MIN, I64_MIN + 1, -1, 2**31 - 1, 2**31, 2**32, 2**62, I64_MAX - 1, I64_MAX]
QTY_EDGES = [MAX_QTY - 1, MAX_QTY, MAX_QTY + 1, 2**62, I64_MAX, I64_MIN, I64_MIN + 1]
NOTIONAL_EDGES = [MAX_NOTIONAL - 1, MAX_NOTIONAL, MAX_NOTIONAL + 1, I64_MAX]
OWNER_ENDS = [2**31 - 1, -(2**31)]
I8_ENDS = [127, -128]


def _price_ends(lo: int, hi: int) -> list[int]:
    return [I64_MIN, I64_MIN + 1, -1, lo - 1, lo, hi, hi + 1, MAX_PRICE, MAX_PRICE + 1,
            I64_MAX - 1, I64_MAX]


def _extreme(c, idx, rng, lo: int, hi: int, recent) -> None:
    """Replace each command at ``idx`` by one carrying values at the bounds (or the ends of
    its field's type); a third of them are still valid (they rest, trade, cancel)."""
    prices = _price_ends(lo, hi)

    def pick(xs):
        return xs[int(rng.integers(0, len(xs)))]

    for i in idx.tolist():
        r = int(rng.integers(0, 9))
        c[i] = np.zeros(1, COMMAND_DTYPE)[0]
        c["timed"][i] = True
        c["owner"][i] = int(rng.integers(1, 4))
        c["side"][i] = int(rng.integers(0, 2))
        in_band = int(rng.integers(lo, hi + 1))
        if r == 0:  # a priced order of a quantity at the bound (valid up to MAX_QTY)
            c["otype"][i], c["price"][i] = int(rng.integers(0, 4)), in_band
            c["qty"][i] = pick(QTY_EDGES[:3] * 3 + QTY_EDGES[3:])
        elif r == 1:  # a market / notional order: ignored price at the ends, big amounts
            c["otype"][i] = int(rng.choice([4, 5]))
            c["price"][i] = pick(prices)
            c["qty"][i] = pick(QTY_EDGES[:3] if c["otype"][i] == 4 else NOTIONAL_EDGES)
        elif r == 2:  # a priced order at or beyond the band's ends and MAX_PRICE
            c["otype"][i], c["price"][i] = int(rng.integers(0, 4)), pick(prices)
            c["qty"][i] = int(rng.integers(1, 9))
        elif r == 3:  # cancel of an id at the ends of int64
            c["kind"][i], c["id"][i] = Kind.CANCEL, pick(ID_ENDS)
        elif r == 4:  # modify: a live-ish or an extreme id, a bound quantity, an end price
            c["kind"][i] = Kind.MODIFY
            c["id"][i] = int(recent[i]) if rng.random() < 0.6 else pick(ID_ENDS)
            c["qty"][i] = pick(QTY_EDGES[:3] + [1])
            c["price"][i] = pick(prices + [0, 0, in_band])
        elif r == 5:  # mass cancel over a price range with ends anywhere in int64
            a, b = pick(prices), pick(prices)
            c["kind"][i], c["otype"][i] = Kind.MASS_CANCEL, Scope.PRICE_RANGE
            c["price"][i], c["price_hi"][i] = (min(a, b), max(a, b)) if rng.random() < 0.9 \
                else (max(a, b), min(a, b))
        elif r == 6:  # owners at the ends of int32 (submit, or mass cancel by owner)
            if rng.random() < 0.5:
                c["otype"][i], c["price"][i], c["qty"][i] = 0, in_band, MAX_QTY
            else:
                c["kind"][i], c["otype"][i] = Kind.MASS_CANCEL, Scope.OWNER
            c["owner"][i] = pick(OWNER_ENDS)
        elif r == 7:  # kind, type, side or scope at the ends of int8
            c["price"][i], c["qty"][i] = in_band, 1
            which = int(rng.integers(0, 4))
            if which == 0:
                c["kind"][i] = pick(I8_ENDS)
            elif which == 1:
                c["otype"][i] = pick(I8_ENDS)
            elif which == 2:
                c["side"][i] = pick(I8_ENDS)
            else:
                c["kind"][i], c["otype"][i] = Kind.MASS_CANCEL, Scope.SIDE
                c["side"][i] = pick(I8_ENDS)
        else:  # a FOK for exactly MAX_QTY (valid: fillable only against a deep book)
            c["otype"][i], c["price"][i], c["qty"][i] = 2, pick([lo, hi, in_band]), MAX_QTY


@functools.cache
def bound_value_rows(profile: str, stp: StpMode, seed: int) -> np.ndarray:
    """Indices of the commands of a case's stream drawn at the bounds (by :func:`_extreme`)."""
    lo, hi, window, unit, extreme, _ = PROFILES[profile]
    return gen_stream_marked(seed * 4 + int(stp), STREAM_LEN, lo, hi, window, unit, extreme)[1]


def _corrupt(c: np.ndarray, idx: np.ndarray, rng: np.random.Generator, lo: int, hi: int) -> None:
    """Make each command at ``idx`` invalid in one of the ways its kind can be."""
    for i in idx.tolist():
        k, r = int(c["kind"][i]), int(rng.integers(0, 6))
        if r == 0:
            c["kind"][i] = int(rng.choice([4, 5, -1]))
        elif k == Kind.SUBMIT:
            if r == 1:
                c["otype"][i] = int(rng.choice([6, 7, -1]))
            elif r == 2:
                c["side"][i] = int(rng.choice([2, -1]))
            elif r == 3:
                c["owner"][i] = int(rng.choice([0, -1]))
            elif r == 4:
                c["qty"][i] = int(rng.choice([0, -3]))
            else:
                c["otype"][i] = int(rng.integers(0, 4))  # a priced type, out of the band
                c["price"][i] = int(rng.choice([lo - 1 - rng.integers(0, 3), hi + 1, 0]))
        elif k in (Kind.CANCEL, Kind.MODIFY):
            c["kind"][i] = Kind.MODIFY  # cancels have no invalid form beyond the kind
            if r % 2:
                c["qty"][i] = int(rng.choice([0, -2]))
            else:
                c["qty"][i] = int(rng.integers(1, 5))
                c["price"][i] = int(rng.choice([lo - 1, hi + 1, -7]))
        else:  # mass cancel
            if r == 1:
                c["otype"][i] = int(rng.choice([4, -1]))
            elif r == 2:
                c["otype"][i], c["side"][i] = Scope.SIDE, 3
            elif r == 3:
                c["otype"][i], c["owner"][i] = Scope.OWNER, 0
            else:
                c["otype"][i] = Scope.PRICE_RANGE
                c["price"][i], c["price_hi"][i] = hi, hi - 1 - int(rng.integers(0, 3))


def case_config(profile: str, stp: StpMode) -> BookConfig:
    lo, hi = PROFILES[profile][:2]
    return BookConfig(lo, hi, stp)


@functools.cache
def stream(profile: str, stp: StpMode, seed: int) -> np.ndarray:
    lo, hi, window, unit, extreme, _ = PROFILES[profile]
    return gen_stream(seed * 4 + int(stp), STREAM_LEN, lo, hi, window, unit, extreme)


@functools.cache
def reference_run(profile: str, stp: StpMode, seed: int):
    eng = lob.get_engine("reference", case_config(profile, stp))
    res = eng.replay(stream(profile, stp, seed))
    return res, l2(eng, 1_000_000)


def run_checked(name: str, config: BookConfig, cmds: np.ndarray):
    """(outcomes, fills, final L2) of ``cmds`` through a fresh engine, invariants checked."""
    eng = lob.get_engine(name, config)
    if engine_spec(name).backend == "python" and hasattr(eng, "check"):
        rows = []
        for row in cmds:
            o = eng.execute(row)
            rows.append((o.status, o.reason, o.id, o.remaining, o.filled, o.fills, o.removed))
            eng.check()
        outcomes = np.array(rows, OUTCOME_DTYPE).reshape(len(cmds))
        fills = np.asarray(eng.fills, FILL_DTYPE)
    else:
        res = eng.replay(cmds)
        if hasattr(eng, "check"):
            eng.check()
        outcomes, fills = res.outcomes, res.fills
    return outcomes, fills, l2(eng, 1_000_000)


def describe(cmds, i, ref_o, got_o) -> str:
    c = {f: int(cmds[i][f]) for f in ("kind", "otype", "side", "owner", "price", "qty", "id",
                                      "price_hi")}
    return (f"first divergence at command {i}: {c}\n"
            f"  reference: {Outcome.from_tuple(tuple(ref_o[i].tolist()))}\n"
            f"  engine:    {Outcome.from_tuple(tuple(got_o[i].tolist()))}")


def assert_same(name, cmds, ref, got) -> None:
    (ref_o, ref_f, ref_l2), (got_o, got_f, got_l2) = ref, got
    assert got_o.shape == ref_o.shape, f"{name}: {len(got_o)} outcomes for {len(cmds)} commands"
    diff = np.nonzero(ref_o != got_o)[0]
    assert diff.size == 0, f"{name}: " + describe(cmds, int(diff[0]), ref_o, got_o)
    n = min(len(ref_f), len(got_f))
    fdiff = np.nonzero(ref_f[:n] != got_f[:n])[0]
    if fdiff.size or len(ref_f) != len(got_f):
        k = int(fdiff[0]) if fdiff.size else n
        i = int(np.searchsorted(np.cumsum(ref_o["fills"]), k, side="right"))
        raise AssertionError(
            f"{name}: fill {k} differs (command {i}): reference "
            f"{ref_f[k].tolist() if k < len(ref_f) else None}, engine "
            f"{got_f[k].tolist() if k < len(got_f) else None}\n" + describe(cmds, i, ref_o, got_o))
    assert checksum(got_o, got_f) == checksum(ref_o, ref_f)
    assert got_l2 == ref_l2, f"{name}: final books differ"


@pytest.mark.parametrize("group", GROUPS, ids=GROUP_IDS)
def test_reference_is_self_consistent(group):
    """The oracle itself: invariants after every op, and execute == replay, bit for bit."""
    for profile, stp, seed in group:
        res, book = reference_run(profile, stp, seed)
        got = run_checked("reference", case_config(profile, stp), stream(profile, stp, seed))
        assert_same("reference (per op)", stream(profile, stp, seed),
                    (res.outcomes, res.fills, book), got)
        assert res.checksum == checksum(got[0], got[1])


FUZZ_ENGINES = OTHER_ENGINES + [
    n for n in filter(None, os.environ.get("LOB_FUZZ_ENGINES", "").split(","))
    if n not in OTHER_ENGINES]


def case_refusal(name: str, profile: str, stp: StpMode, seed: int) -> str | None:
    """Why ``name`` does not take this fuzz case (its declared capabilities), or None."""
    caps = engine_capabilities(name)
    config = case_config(profile, stp)
    return caps.config_refusal(name, config) or \
        caps.commands_refusal(name, stream(profile, stp, seed), config)


@pytest.mark.parametrize("group", GROUPS, ids=GROUP_IDS)
@pytest.mark.parametrize("name", FUZZ_ENGINES)
def test_engine_agrees_with_reference(name, group):
    skipped = []
    for profile, stp, seed in group:
        why = case_refusal(name, profile, stp, seed)
        if why:
            skipped.append(why)
            continue
        res, book = reference_run(profile, stp, seed)
        cmds = stream(profile, stp, seed)
        got = run_checked(name, case_config(profile, stp), cmds)
        assert_same(name, cmds, (res.outcomes, res.fills, book), got)
        again = lob.get_engine(name, case_config(profile, stp)).replay(cmds)  # the batch path
        assert again.checksum == res.checksum, f"{name}: replay checksum differs"
        assert again.counters == res.counters
    if len(skipped) == len(group):
        pytest.skip("; ".join(dict.fromkeys(skipped)))


def test_streams_are_deterministic_and_varied():
    a = gen_stream(7, 5_000, 100, 111, None)
    assert a.tobytes() == gen_stream(7, 5_000, 100, 111, None).tobytes()
    assert a.tobytes() != gen_stream(8, 5_000, 100, 111, None).tobytes()


def test_fuzz_volume():
    """At least 1M fuzzed commands per run: reference self-check + every other engine;
    per engine, at least 8,000 of them drawn at the bounds (~7% of its commands in CI)."""
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

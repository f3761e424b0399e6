"""The C++ seed's streams (its bench.cpp): the generator, and the published counters."""

import numpy as np
import pytest
from conftest import ENGINES

import lob
from lob.engines.registry import engine_spec
from lob.semantics import Kind, OrderType, Side, StpMode
from lob.workloads.cpp_bench import generate
from lob.workloads.rng import libcxx_ints, mt19937_raw

PUBLISHED = dict(filled=356233, partial=71154, accepted=576805, cancelled=801548, rejected=0,
                 notfound=194260, trades=666051, matched_volume=3867171)
REMAINING_COMPREHENSIVE = 15_028_137  # the C++ sink, one pass (60,112,548 over four)
REMAINING_LIMIT_ONLY = 12_371_784  # 37,115,352 over three passes


def _python_stream(n: int, limit_only: bool) -> list[tuple]:
    """An independent, plain-Python reading of the recipe: (kind, otype, side, price, qty,
    owner, id) per command, with the binary-market mapping applied."""
    it = iter(mt19937_raw(99, 12 * n).tolist())

    def draw(a, b):
        r = b - a + 1
        if r == 1:
            return a
        mask = (1 << (r - 1).bit_length()) - 1
        while (u := next(it) & mask) >= r:
            pass
        return a + u

    out, subs = [], 0
    for _ in range(n):
        if draw(0, 9) < 9 or subs == 0:
            t = 0 if limit_only else draw(0, 3)
            yes, p, q, o = draw(0, 1), draw(1, 99), draw(1, 20), draw(1, 4)
            subs += 1
            out.append((0, t, 0 if yes else 1, p if yes else 100 - p, q, o, 0))
        else:
            out.append((1, 0, 0, 0, 0, 0, draw(1, subs)))
    return out


def _rows(cmds) -> list[tuple]:
    f = ["kind", "otype", "side", "price", "qty", "owner", "id"]
    return list(zip(*[cmds[k].tolist() for k in f], strict=True))


def test_first_command_by_hand():
    raw = mt19937_raw(99, 8).tolist()
    # kind: 2887414401 & 15 = 1 (< 9: a submit); type & 3; side & 1; price & 127 (< 99);
    # qty & 31 (< 20), owner & 3 + 1; every draw here is accepted on the first try
    assert libcxx_ints(raw, [(0, 9)]) == [raw[0] & 15] == [1]
    t, yes = raw[1] & 3, raw[2] & 1
    p, q, o = 1 + (raw[3] & 127), 1 + (raw[4] & 31), 1 + (raw[5] & 3)
    c = generate(1, 99, limit_only=False)[0]
    assert (c["kind"], c["otype"]) == (Kind.SUBMIT, t)
    assert (c["side"], c["price"]) == ((Side.BUY, p) if yes else (Side.SELL, 100 - p))
    assert (c["qty"], c["owner"]) == (q, o)


@pytest.mark.parametrize("limit_only", [False, True])
def test_generator_matches_plain_python_recipe(limit_only):
    assert _rows(generate(3000, 99, limit_only)) == _python_stream(3000, limit_only)


def test_buffer_growth_gives_the_same_stream(monkeypatch):
    import lob.workloads.cpp_bench as cb

    expect = generate(20_000, 99, True).tobytes()
    calls = []
    real = cb.mt19937_raw

    def small(seed, n, **kw):  # start from a buffer far too small: it must grow and retry
        calls.append(n)
        return real(seed, min(n, 5_000 * 2 ** len(calls)), **kw)

    monkeypatch.setattr(cb, "mt19937_raw", small)
    assert generate(20_000, 99, True).tobytes() == expect
    assert len(calls) > 1


@pytest.fixture(scope="module")
def cpp_comprehensive():
    return lob.workload("cpp_comprehensive")


def test_prefix_property_and_shape():
    wl = lob.workload("cpp_comprehensive", scale=0.001)
    assert len(wl) == 2000 and wl.n_timed == 2000
    assert wl.config.min_price == 1 and wl.config.max_price == 99
    assert wl.config.stp == StpMode.CANCEL_MAKER
    full = generate(5000, 99, False)
    assert wl.commands.tobytes() == full[:2000].tobytes()
    c = full[full["kind"] == Kind.SUBMIT]
    assert set(np.unique(c["otype"]).tolist()) == {int(t) for t in OrderType if t <= 3}
    lim = lob.workload("cpp_limit_only", n=2000).commands
    assert (lim["otype"][lim["kind"] == Kind.SUBMIT] == OrderType.LIMIT).all()


def _check(run, remaining):
    c = run.counters
    assert {k: c[k] for k in PUBLISHED} == PUBLISHED
    # remaining_sum over every outcome: a cancel reports remaining=0, as the C++ engine does
    assert c["remaining_sum"] == remaining


# The 2M stream in CI on the fast Python versions and the compiled twins. The slow engines run
# it at full size under `make test-extended`: the four pure-Python versions with the `full`
# FOK scan (~100-130 s each on 2 cores), the reference itself (~110 s, +30 s for the
# limit-only stream; together a sixth of CI's test time) and v0+pool@numba (15-30 s: the
# compiled `full` scan that v1@numba, counted in CI, shares). In CI each of them must match,
# outcome for outcome, on the first 10% of the stream, engines that CI checks against the
# published counters over the whole of it (below): the reference is tied to the counters
# through the compiled twins it agrees with, as the differential fuzz ties them everywhere else.
FOK_FULL_PYTHON = {e for e in ENGINES if "@" not in e and e != "reference"
                   and engine_spec(e).toggles.get("fok") == "full"}
FULL_SIZE_ELSEWHERE = FOK_FULL_PYTHON | {"reference", "v0+pool@numba"}
COUNTED = ["v1@numba", "v4@numba"]  # checked at full size in CI, the prefix's yardsticks


# the pure-Python versions with the early-exit scan (~5 s each) run the whole stream in CI's
# second step (`make test-ci`); `make test` ties them to the counted engines on the prefix below
PY_EARLY_EXIT = {e for e in ENGINES if "@" not in e and e not in FULL_SIZE_ELSEWHERE}


@pytest.mark.slow
@pytest.mark.parametrize("engine", [pytest.param(e, marks=pytest.mark.extended)
                                    if e in FULL_SIZE_ELSEWHERE else
                                    pytest.param(e, marks=pytest.mark.ci) if e in PY_EARLY_EXIT
                                    else e for e in ENGINES])
def test_comprehensive_published_counters(engine, cpp_comprehensive):
    _check(lob.replay(engine, cpp_comprehensive), REMAINING_COMPREHENSIVE)


@pytest.fixture(scope="module")
def counted_prefix():
    """The first 10% of cpp_comprehensive and each yardstick's replay of it; the yardsticks
    agree with each other there (their counters over the whole stream are checked above)."""
    wl = lob.workload("cpp_comprehensive", scale=0.1)
    runs = [lob.replay(e, wl) for e in COUNTED]
    for r in runs[1:]:
        np.testing.assert_array_equal(r.outcomes, runs[0].outcomes)
    return wl, runs[0]


def test_yardsticks_are_checked_at_full_size_in_ci():
    assert set(COUNTED) <= set(ENGINES) - FULL_SIZE_ELSEWHERE


@pytest.mark.slow
@pytest.mark.parametrize("engine", sorted(FULL_SIZE_ELSEWHERE))
def test_slow_python_engines_match_the_counted_engines_on_a_prefix(engine, counted_prefix):
    wl, want = counted_prefix
    got = lob.replay(engine, wl)
    np.testing.assert_array_equal(got.outcomes, want.outcomes)
    np.testing.assert_array_equal(got.fills, want.fills)
    assert got.checksum == want.checksum


@pytest.mark.slow
@pytest.mark.parametrize("engine", [pytest.param(e, marks=pytest.mark.extended)
                                    for e in ("reference", "v2")] + ["v2@numba", "v4@numba"])
def test_limit_only_published_remaining(engine):
    wl = lob.workload("cpp_limit_only")
    assert lob.replay(engine, wl).counters["remaining_sum"] == REMAINING_LIMIT_ONLY


# lob's C++ build of the seed's lineage (lob.engines.native; registered where g++ is): v2 at
# full size in CI (its FOK check stops early) and v0 on the limit-only stream (no FOK); the
# `full` FOK scans (v0, v0+pool, v0+bitmap, v1: every crossing order of a deep book per FOK)
# at full size under `make test-extended`, and on the counted prefix in CI.
NATIVE = [e for e in lob.engine_names() if engine_spec(e).backend == "cpp"]
NATIVE_FAST = {"v2@cpp"}


@pytest.mark.slow
@pytest.mark.parametrize("engine", [e if e in NATIVE_FAST else
                                    pytest.param(e, marks=pytest.mark.extended) for e in NATIVE])
def test_native_comprehensive_published_counters(engine, cpp_comprehensive):
    _check(lob.replay(engine, cpp_comprehensive), REMAINING_COMPREHENSIVE)


@pytest.mark.slow
@pytest.mark.parametrize("engine", [e if e in NATIVE_FAST | {"v0@cpp"} else
                                    pytest.param(e, marks=pytest.mark.extended) for e in NATIVE])
def test_native_limit_only_published_remaining(engine):
    wl = lob.workload("cpp_limit_only")
    assert lob.replay(engine, wl).counters["remaining_sum"] == REMAINING_LIMIT_ONLY


@pytest.mark.slow
@pytest.mark.parametrize("engine", NATIVE)
def test_native_engines_match_the_counted_engines_on_a_prefix(engine, counted_prefix):
    wl, want = counted_prefix
    got = lob.replay(engine, wl)
    np.testing.assert_array_equal(got.outcomes, want.outcomes)
    np.testing.assert_array_equal(got.fills, want.fills)

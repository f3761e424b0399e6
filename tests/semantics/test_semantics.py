"""The shared data model: dtypes, id assignment, counters and the checksum (checked against an
independent pure-Python reading of the spec)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import BUY, FOK, IOC, LIMIT, MARKET, NOTIONAL, POST_ONLY, SELL, out

import lob
from lob.semantics import (
    COMMAND_DTYPE,
    FILL_DTYPE,
    OUTCOME_DTYPE,
    BookConfig,
    Kind,
    Outcome,
    Reason,
    Scope,
    Status,
    checksum,
    commands,
    counters,
)

M64 = (1 << 64) - 1


def test_dtypes_have_the_documented_fields():
    assert COMMAND_DTYPE.names == ("kind", "otype", "side", "timed", "owner", "price", "qty",
                                   "id", "price_hi")
    assert OUTCOME_DTYPE.names == ("status", "reason", "id", "remaining", "filled", "fills",
                                   "removed")
    assert FILL_DTYPE.names == ("taker", "maker", "price", "qty")
    for f in ("price", "qty", "id", "price_hi"):
        assert COMMAND_DTYPE[f] == np.int64  # prices and amounts never overflow 32 bits


def test_commands_builder():
    arr = commands([dict(kind=Kind.CANCEL, id=7), dict(price=5, qty=2, owner=1)])
    assert arr.dtype == COMMAND_DTYPE and arr.shape == (2,)
    assert arr["timed"].all()
    assert (arr["kind"].tolist(), arr["id"].tolist(), arr["qty"].tolist()) == ([1, 0], [7, 0],
                                                                               [0, 2])
    with pytest.raises(ValueError, match="bogus"):
        commands([dict(bogus=1)])


def test_every_valid_submit_takes_the_next_id_whatever_happens(engine_name):
    eng = lob.get_engine(engine_name, BookConfig(1, 200))
    got = [eng.submit(1, SELL, LIMIT, 100, 5).id,      # rests
           eng.submit(1, BUY, POST_ONLY, 100, 1).id,   # would cross
           eng.submit(2, BUY, FOK, 100, 9).id,         # unfillable
           eng.submit(2, BUY, IOC, 100, 1).id,         # fills
           eng.submit(2, BUY, MARKET, 0, 1).id,        # fills
           eng.submit(2, BUY, NOTIONAL, 0, 50).id,     # too dear, nothing traded
           eng.submit(0, BUY, LIMIT, 100, 1).id,       # rejected: no id
           eng.cancel(1).id,                           # cancel: echoes the target
           eng.mass_cancel(Scope.ALL).id,              # mass cancel: id 0
           eng.submit(2, BUY, LIMIT, 100, 1).id]
    assert got == [1, 2, 3, 4, 5, 6, 0, 1, 0, 7]


def spec_checksum(outcomes: list[tuple], fills: list[tuple]) -> int:
    """The checksum as the docstring states it, with Python ints: Horner h = h*P + w mod 2**64
    over the outcome words and, separately, the fill words, then mixed with the row count."""
    P = 0x100000001B3

    def horner(words):
        h = 0
        for w in words:
            h = (h * P + (w & M64)) & M64
        return h

    h1 = horner(w for row in outcomes for w in row)
    h2 = horner(w for row in fills for w in row)
    return (h1 * 0x9E3779B97F4A7C15 + h2 + len(outcomes)) & M64


DEMO = [
    dict(kind=Kind.SUBMIT, owner=1, side=SELL, otype=LIMIT, price=101, qty=5),  # id 1 rests
    dict(kind=Kind.SUBMIT, owner=1, side=SELL, otype=LIMIT, price=102, qty=5),  # id 2 rests
    dict(kind=Kind.SUBMIT, owner=2, side=BUY, otype=LIMIT, price=102, qty=7),   # id 3: 5 + 2
    dict(kind=Kind.SUBMIT, owner=2, side=BUY, otype=IOC, price=100, qty=3),     # id 4: nothing
    dict(kind=Kind.SUBMIT, owner=2, side=BUY, otype=LIMIT, price=99, qty=4),    # id 5 rests
    dict(kind=Kind.SUBMIT, owner=0, side=BUY, otype=LIMIT, price=99, qty=4),    # rejected
    dict(kind=Kind.CANCEL, id=5),                                               # remaining 0
    dict(kind=Kind.CANCEL, id=5),                                               # not found
    dict(kind=Kind.SUBMIT, owner=3, side=BUY, otype=MARKET, qty=10),            # id 6: 3 of 10
]


def demo_run(engine_name):
    return lob.get_engine(engine_name).replay(commands(DEMO))


def test_counters_by_hand(engine_name):
    res = demo_run(engine_name)
    assert res.counters == {"filled": 1, "partial": 1, "accepted": 3, "cancelled": 2,
                            "rejected": 1, "notfound": 1, "trades": 3, "matched_volume": 10,
                            "remaining_sum": 5 + 5 + 0 + 3 + 4 + 0 + 0 + 0 + 7}
    assert res.fills.tolist() == [(3, 1, 101, 5), (3, 2, 102, 2), (6, 2, 102, 3)]
    assert [Outcome.from_tuple(tuple(r)) for r in res.outcomes.tolist()][-1] == out(
        Status.PARTIALLY_FILLED, 6, 7, 3, 1)


def test_checksum_matches_the_spec_reading(engine_name):
    res = demo_run(engine_name)
    want = spec_checksum(res.outcomes.tolist(), res.fills.tolist())
    assert res.checksum == want == checksum(res.outcomes, res.fills)


def test_checksum_sees_every_field_and_the_order():
    res = demo_run("reference")
    base = res.checksum
    for f in OUTCOME_DTYPE.names:
        o = res.outcomes.copy()
        o[f][3] += 1
        assert checksum(o, res.fills) != base, f
    for f in FILL_DTYPE.names:
        fl = res.fills.copy()
        fl[f][1] += 1
        assert checksum(res.outcomes, fl) != base, f
    assert checksum(res.outcomes[::-1].copy(), res.fills) != base
    assert checksum(res.outcomes, res.fills[::-1].copy()) != base
    assert checksum(res.outcomes[:-1], res.fills) != base


def test_checksum_of_nothing_and_of_negatives():
    empty_o, empty_f = np.zeros(0, OUTCOME_DTYPE), np.zeros(0, FILL_DTYPE)
    assert checksum(empty_o, empty_f) == spec_checksum([], []) == 0
    o = np.array([(4, 6, 0, 0, 0, 0, 0), (5, 8, -3, 0, 0, 0, 0)], OUTCOME_DTYPE)
    assert checksum(o, empty_f) == spec_checksum(o.tolist(), [])


def test_counters_of_an_empty_replay(engine_name):
    res = lob.get_engine(engine_name).replay(np.zeros(0, COMMAND_DTYPE))
    assert res.counters == dict.fromkeys(res.counters, 0) and len(res.counters) == 9
    assert res.checksum == 0
    assert counters(res.outcomes) == res.counters


def test_replay_equals_command_by_command(engine_name):
    res = demo_run(engine_name)
    eng = lob.get_engine(engine_name)
    got = [eng.execute(r) for r in commands(DEMO)]
    assert [tuple(int(x) for x in vars(o).values()) for o in got] == res.outcomes.tolist()
    assert eng.fills.tolist() == res.fills.tolist()


def test_outcome_repr_names_status_and_reason():
    r = repr(Outcome(Status.CANCELLED, Reason.FOK_UNFILLABLE, 3, 9))
    assert "CANCELLED" in r and "FOK_UNFILLABLE" in r and "remaining=9" in r

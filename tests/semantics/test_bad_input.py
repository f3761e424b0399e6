"""Bad input: REJECTED / NOT_FOUND with the right reason and nothing changed; API misuse raises
a TypeError / ValueError that names the field."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import (
    BUY,
    ENGINES,
    FOK,
    IOC,
    LIMIT,
    MARKET,
    NOTIONAL,
    POST_ONLY,
    SELL,
    book_with,
    fills,
    out,
)
from conftest import state as book_state

import lob
from lob.semantics import COMMAND_DTYPE, BookConfig, Kind, Reason, Scope, Status, commands

BAND = (90, 110)
R = Reason


def rejected(reason: Reason):
    return out(Status.REJECTED, 0, 0, reason=reason)


def sub(owner=1, side=BUY, otype=LIMIT, price=100, qty=1) -> dict:
    return dict(kind=Kind.SUBMIT, owner=owner, side=side, otype=otype, price=price, qty=qty)


# (name, command fields, expected outcome); the first failing check gives the reason
BAD = [
    ("type_6", sub(otype=6), rejected(R.BAD_TYPE)),
    ("type_neg", sub(otype=-1), rejected(R.BAD_TYPE)),
    ("type_before_side", sub(otype=9, side=5), rejected(R.BAD_TYPE)),
    ("side_2", sub(side=2), rejected(R.BAD_SIDE)),
    ("side_neg", sub(side=-1, otype=MARKET), rejected(R.BAD_SIDE)),
    ("side_before_owner", sub(side=3, owner=0), rejected(R.BAD_SIDE)),
    ("owner_0", sub(owner=0), rejected(R.BAD_OWNER)),
    ("owner_neg", sub(owner=-4, otype=IOC), rejected(R.BAD_OWNER)),
    ("owner_before_qty", sub(owner=0, qty=0), rejected(R.BAD_OWNER)),
    ("qty_0", sub(qty=0), rejected(R.BAD_QTY)),
    ("qty_neg", sub(qty=-5, otype=FOK), rejected(R.BAD_QTY)),
    ("qty_before_price", sub(qty=0, price=5000), rejected(R.BAD_QTY)),
    ("market_qty_0", sub(otype=MARKET, qty=0), rejected(R.BAD_QTY)),
    ("notional_amount_0", sub(otype=NOTIONAL, qty=0), rejected(R.BAD_QTY)),
    ("price_below_band", sub(price=89), rejected(R.BAD_PRICE)),
    ("price_above_band", sub(price=111, side=SELL), rejected(R.BAD_PRICE)),
    ("price_0_ioc", sub(price=0, otype=IOC), rejected(R.BAD_PRICE)),
    ("price_fok", sub(price=-100, otype=FOK), rejected(R.BAD_PRICE)),
    ("price_post_only", sub(price=1000, otype=POST_ONLY), rejected(R.BAD_PRICE)),
    ("kind_4", dict(kind=4), rejected(R.BAD_KIND)),
    ("kind_neg", dict(kind=-1, qty=5, price=100, owner=1), rejected(R.BAD_KIND)),
    ("modify_qty_0", dict(kind=Kind.MODIFY, id=1, qty=0), rejected(R.BAD_QTY)),
    ("modify_qty_neg_unknown_id", dict(kind=Kind.MODIFY, id=77, qty=-1), rejected(R.BAD_QTY)),
    ("modify_price_out", dict(kind=Kind.MODIFY, id=1, qty=2, price=111), rejected(R.BAD_PRICE)),
    ("modify_price_neg", dict(kind=Kind.MODIFY, id=1, qty=2, price=-1), rejected(R.BAD_PRICE)),
    ("modify_unknown", dict(kind=Kind.MODIFY, id=77, qty=2),
     out(Status.NOT_FOUND, 77, 0, reason=R.UNKNOWN_ID)),
    ("modify_unknown_new_price", dict(kind=Kind.MODIFY, id=77, qty=2, price=95),
     out(Status.NOT_FOUND, 77, 0, reason=R.UNKNOWN_ID)),
    ("cancel_unknown", dict(kind=Kind.CANCEL, id=77),
     out(Status.NOT_FOUND, 77, 0, reason=R.UNKNOWN_ID)),
    ("cancel_id_0", dict(kind=Kind.CANCEL, id=0), out(Status.NOT_FOUND, 0, 0, reason=R.UNKNOWN_ID)),
    ("scope_4", dict(kind=Kind.MASS_CANCEL, otype=4), rejected(R.BAD_SCOPE)),
    ("scope_neg", dict(kind=Kind.MASS_CANCEL, otype=-1), rejected(R.BAD_SCOPE)),
    ("scope_side_bad", dict(kind=Kind.MASS_CANCEL, otype=Scope.SIDE, side=2), rejected(R.BAD_SIDE)),
    ("scope_owner_bad", dict(kind=Kind.MASS_CANCEL, otype=Scope.OWNER, owner=0),
     rejected(R.BAD_OWNER)),
    ("scope_range_reversed", dict(kind=Kind.MASS_CANCEL, otype=Scope.PRICE_RANGE, price=101,
                                  price_hi=100), rejected(R.BAD_PRICE)),
]


def fresh(engine_name):
    # ids 1, 2 rest; 3 ids used so far (id 3 filled against id 2 partly)
    eng = book_with(engine_name, bids=[(99, 5, 1)], asks=[(101, 5, 2)], band=BAND)
    assert eng.submit(3, BUY, IOC, 101, 2) == out(Status.FILLED, 3, 0, 2, 1)
    return eng


@pytest.mark.parametrize("name, cmd, want", BAD, ids=[b[0] for b in BAD])
def test_bad_command_changes_nothing(engine_name, name, cmd, want):
    eng = fresh(engine_name)
    before, nfills = book_state(eng), len(eng.fills)
    assert eng.execute(cmd) == want
    assert book_state(eng) == before
    assert len(eng.fills) == nfills
    eng.check()
    assert eng.submit(1, BUY, LIMIT, 95, 1) == out(Status.ACCEPTED, 4, 1)  # no id was taken


@pytest.mark.parametrize("name, cmd, want", BAD, ids=[b[0] for b in BAD])
def test_bad_command_in_a_replay(engine_name, name, cmd, want):
    eng = lob.get_engine(engine_name, BookConfig(*BAND))
    good = sub(price=95)
    res = eng.replay(commands([good, cmd, good]))
    got = [tuple(int(x) for x in r) for r in res.outcomes]
    exp = [tuple(int(x) for x in o.__dict__.values()) for o in
           (out(Status.ACCEPTED, 1, 1), want, out(Status.ACCEPTED, 2, 1))]
    assert got == exp


def test_the_same_through_the_typed_api(engine_name):
    eng = fresh(engine_name)
    before = book_state(eng)
    assert eng.submit(0, BUY, LIMIT, 100, 1) == rejected(R.BAD_OWNER)
    assert eng.submit(1, 7, LIMIT, 100, 1) == rejected(R.BAD_SIDE)
    assert eng.submit(1, BUY, 17, 100, 1) == rejected(R.BAD_TYPE)
    assert eng.submit(1, BUY, LIMIT, 100, 0) == rejected(R.BAD_QTY)
    assert eng.submit(1, BUY, LIMIT, 200, 1) == rejected(R.BAD_PRICE)
    assert eng.modify(1, 0) == rejected(R.BAD_QTY)
    assert eng.modify(1, 1, 300) == rejected(R.BAD_PRICE)
    assert eng.modify(50, 1) == out(Status.NOT_FOUND, 50, 0, reason=R.UNKNOWN_ID)
    assert eng.cancel(50) == out(Status.NOT_FOUND, 50, 0, reason=R.UNKNOWN_ID)
    assert eng.mass_cancel(9) == rejected(R.BAD_SCOPE)
    assert eng.mass_cancel(Scope.SIDE, side=4) == rejected(R.BAD_SIDE)
    assert eng.mass_cancel(Scope.OWNER, owner=-2) == rejected(R.BAD_OWNER)
    assert eng.mass_cancel(Scope.PRICE_RANGE, price_lo=105, price_hi=95) == rejected(R.BAD_PRICE)
    assert book_state(eng) == before
    assert eng.submit(1, SELL, LIMIT, 105, 1) == out(Status.ACCEPTED, 4, 1)


# --- BookConfig ---------------------------------------------------------------------------

@pytest.mark.parametrize("stp", [4, -1, "CANCEL_MAKER", None])
def test_unknown_stp_value(stp):
    with pytest.raises(ValueError, match="stp"):
        BookConfig(1, 100, stp)


@pytest.mark.parametrize("kwargs, exc, field", [
    (dict(min_price=0), ValueError, "min_price"),
    (dict(min_price=50, max_price=40), ValueError, "max_price"),
    (dict(min_price="1"), TypeError, "min_price"),
    (dict(max_price=99.5), TypeError, "max_price"),
    (dict(max_price=True), TypeError, "max_price"),
])
def test_bad_band(kwargs, exc, field):
    with pytest.raises(exc, match=field):
        BookConfig(**kwargs)


# --- API misuse: clear errors that name the field, and nothing changes -------------------

MISUSE = [
    ("owner", lambda e: e.submit("1", BUY, LIMIT, 100, 1)),
    ("side", lambda e: e.submit(1, 0.0, LIMIT, 100, 1)),
    ("otype", lambda e: e.submit(1, BUY, "LIMIT", 100, 1)),
    ("price", lambda e: e.submit(1, BUY, LIMIT, None, 1)),
    ("qty", lambda e: e.submit(1, BUY, LIMIT, 100, 1.0)),
    ("qty", lambda e: e.submit(1, BUY, LIMIT, 100, True)),
    ("id", lambda e: e.cancel("1")),
    ("id", lambda e: e.modify(1.0, 2)),
    ("qty", lambda e: e.modify(1, "2")),
    ("price", lambda e: e.modify(1, 2, 100.5)),
    ("scope", lambda e: e.mass_cancel("ALL")),
    ("side", lambda e: e.mass_cancel(Scope.SIDE, side=None)),
    ("owner", lambda e: e.mass_cancel(Scope.OWNER, owner="x")),
    ("price_hi", lambda e: e.mass_cancel(Scope.PRICE_RANGE, price_lo=1, price_hi=2.0)),
    ("qty", lambda e: e.execute({"kind": 0, "qty": 1.5})),
]


@pytest.mark.parametrize("field, call", MISUSE, ids=[f"{m[0]}-{i}" for i, m in enumerate(MISUSE)])
def test_wrong_types_name_the_field(engine_name, field, call):
    eng = fresh(engine_name)
    before = book_state(eng)
    with pytest.raises(TypeError, match=field):
        call(eng)
    assert book_state(eng) == before
    assert eng.submit(1, BUY, LIMIT, 95, 1).id == 4


def test_execute_rejects_unknown_fields_and_non_rows(engine_name):
    eng = fresh(engine_name)
    with pytest.raises(ValueError, match="bogus"):
        eng.execute({"kind": 0, "bogus": 1})
    with pytest.raises(TypeError):
        eng.execute([0, 0, 0, 1, 100, 1])
    wrong = np.zeros(1, dtype=[("kind", "i1"), ("qty", "i8")])[0]
    with pytest.raises(TypeError):
        eng.execute(wrong)
    assert eng.submit(1, BUY, LIMIT, 95, 1).id == 4


@pytest.mark.parametrize("arr, exc, field", [
    (np.zeros(3, dtype=np.int64), TypeError, "COMMAND_DTYPE"),
    ([{"kind": 0}], TypeError, "numpy array"),
    (np.zeros(2, dtype=[("kind", "i1"), ("otype", "i1")]), TypeError, "side"),
    (np.zeros((2, 2), dtype=COMMAND_DTYPE), ValueError, "1-dimensional"),
])
def test_replay_wrong_array(engine_name, arr, exc, field):
    eng = fresh(engine_name)
    with pytest.raises(exc, match=field):
        eng.replay(arr)
    assert eng.submit(1, BUY, LIMIT, 95, 1).id == 4


def test_replay_function_wrong_argument():
    with pytest.raises(TypeError, match="Workload or a command array"):
        lob.replay("reference", [1, 2, 3])


@pytest.mark.parametrize("config", [{"min_price": 1}, (1, 100), "NONE"])
def test_config_must_be_a_book_config(engine_name, config):
    with pytest.raises(TypeError, match="config"):
        lob.get_engine(engine_name, config)


def test_unknown_engine_lists_the_names():
    with pytest.raises(ValueError, match="no-such-engine") as info:
        lob.get_engine("no-such-engine")
    for name in ENGINES:
        assert name in str(info.value)
    with pytest.raises(TypeError, match="engine name"):
        lob.get_engine(3)


def test_fills_untouched_by_rejections(engine_name):
    eng = fresh(engine_name)
    snap = fills(eng)
    for _, cmd, _ in BAD:
        eng.execute(cmd)
    assert fills(eng) == snap
    eng.check()

"""Workloads: each orderbook-rs scenario pinned from the spec, registry, determinism, files."""

import importlib

import numpy as np
import pytest

import lob
from lob.semantics import COMMAND_DTYPE, Kind, OrderType, Scope, StpMode
from lob.workloads import Workload, WorkloadFileError, build, describe, workload_names

A5, C1 = 0xA5A5_A5A5_A5A5_A5A5, 0xC1C1_C1C1_C1C1_C1C1
M64 = (1 << 64) - 1
SUB, CAN, MASS = int(Kind.SUBMIT), int(Kind.CANCEL), int(Kind.MASS_CANCEL)
LIMIT, MARKET, NOTIONAL = int(OrderType.LIMIT), int(OrderType.MARKET), int(OrderType.NOTIONAL)


class XS:
    """A tiny independent xorshift64 (13, 7, 17), written from the orderbook-rs benches' recipe."""

    def __init__(self, seed=A5):
        self.x = seed

    def next(self):
        x = self.x
        x = (x ^ (x << 13)) & M64
        x ^= x >> 7
        x = (x ^ (x << 17)) & M64
        self.x = x
        return x

    def range(self, lo, hi):
        return lo + self.next() % (hi - lo + 1)


def row(kind=SUB, otype=LIMIT, side=0, timed=True, owner=0, price=0, qty=0, id=0, price_hi=0):
    return (kind, otype, side, timed, owner, price, qty, id, price_hi)


def std(r, timed):
    price, qty = r.range(99, 101), r.range(1, 100)
    side = 0 if r.next() % 2 == 0 else 1
    return row(side=side, timed=timed, owner=r.next() % 4 + 1, price=price, qty=qty)


def rows(wl, a, b):
    return wl.commands[a:b].tolist()


def test_registry_names():
    names = workload_names()
    for n in ["add_only", "cancel_only", "aggressive_walk", "notional_walk", "mixed_70_20_10",
              "thin_book_sweep", "mass_cancel_burst", "stp_sweep", "alloc_budget",
              "cpp_comprehensive", "cpp_limit_only", "lobster_replay", "lobster_deep",
              "lobster_sparse", "lobster_bursty"]:
        assert n in names
    assert lob.workload_names() == names
    importlib.import_module("lob.workloads.rng")
    assert lob.workloads.workload_names() == names  # lob.workloads is the package


def test_add_only():
    wl = build("add_only")
    assert (len(wl), wl.n_timed) == (1_200_000, 1_000_000)
    r = XS()
    assert rows(wl, 0, 5) == [std(r, False) for _ in range(5)]
    assert not wl.commands["timed"][:200_000].any() and wl.commands["timed"][200_000:].all()
    assert wl.config.stp == StpMode.NONE and wl.seed == A5


def test_cancel_only():
    wl = build("cancel_only")
    assert (len(wl), wl.n_timed) == (2_000_000, 1_000_000)
    r = XS()
    assert rows(wl, 0, 3) == [std(r, False) for _ in range(3)]
    assert rows(wl, 1_000_000, 1_000_002) == [row(CAN, id=1), row(CAN, id=2)]
    assert rows(wl, 1_999_999, 2_000_000) == [row(CAN, id=1_000_000)]


@pytest.mark.parametrize("name,seed", [("aggressive_walk", A5), ("notional_walk", C1)])
def test_walks(name, seed):
    wl = build(name)
    assert (len(wl), wl.n_timed) == (105_000, 100_000)
    r = XS(seed)
    pre = [row(side=1, timed=False, owner=1, price=100 + i // 100, qty=r.range(1, 10))
           for i in range(5000)]
    assert rows(wl, 0, 5000) == pre
    if name == "aggressive_walk":
        ops = [row(otype=MARKET, owner=2, qty=r.range(5, 20)) for _ in range(3)]
    else:
        ops = [row(otype=NOTIONAL, owner=2, qty=r.range(500, 2000)) for _ in range(3)]
    assert rows(wl, 5000, 5003) == ops


def test_mixed_70_20_10():
    wl = build("mixed_70_20_10")
    assert (len(wl), wl.n_timed) == (1_200_000, 1_000_000)
    r, next_id, expect = XS(), 1, []
    for _ in range(300):
        v = r.next() % 100
        if v < 70:
            expect.append(std(r, False))
            next_id += 1
        elif v < 90:
            expect.append(row(CAN, otype=0, timed=False, id=r.range(1, next_id - 1)))
        else:
            next_id += 1
            qty = r.range(1, 10)
            side = 0 if r.next() % 2 == 0 else 1
            expect.append(row(otype=MARKET, side=side, timed=False, owner=r.next() % 4 + 1,
                              qty=qty))
    assert rows(wl, 0, 300) == expect
    kinds = {(e[0], e[1]) for e in expect}
    assert kinds == {(SUB, LIMIT), (CAN, 0), (SUB, MARKET)}  # the prefix covers all three


def test_thin_book_sweep():
    wl = build("thin_book_sweep")
    assert (len(wl), wl.n_timed) == (320_000, 200_000)
    r, expect = XS(), []
    for i in range(10):
        if i % 5 == 0:
            for _ in range(3):
                p = r.range(99, 101)
                expect.append(row(side=1, timed=False, owner=1, price=p, qty=r.range(1, 5)))
        expect.append(row(otype=MARKET, owner=2, qty=r.range(1, 20)))
    assert rows(wl, 0, len(expect)) == expect


def test_mass_cancel_burst_shape():
    wl = build("mass_cancel_burst", scale=0.01)
    assert (len(wl), wl.n_timed) == (5 * 10_001, 5)
    r = XS()
    assert rows(wl, 0, 4) == [std(r, False) for _ in range(4)]
    c = wl.commands
    mass = np.flatnonzero(c["kind"] == MASS)
    assert mass.tolist() == [10_000 + 10_001 * k for k in range(5)]
    assert (c["otype"][mass] == Scope.ALL).all() and c["timed"][mass].all()
    assert not c["timed"][c["kind"] != MASS].any()
    small = build("mass_cancel_burst", bursts=3, burst_size=2)
    assert small.commands["kind"].tolist() == [SUB, SUB, MASS] * 3


@pytest.mark.slow
def test_mass_cancel_burst_published_count():
    wl = build("mass_cancel_burst")
    assert (len(wl), wl.n_timed) == (5_000_500, 500)


def test_stp_sweep():
    wl = build("stp_sweep")
    assert (len(wl), wl.n_timed) == (200_450, 100_000)
    assert wl.config.stp == StpMode.CANCEL_MAKER
    r, pre = XS(), []
    for level in range(50):
        pre.append(row(side=1, timed=False, owner=1, price=100 + level, qty=r.range(1, 5)))
        pre += [row(side=1, timed=False, owner=2 + k, price=100 + level, qty=r.range(1, 10))
                for k in range(8)]
    assert rows(wl, 0, 450) == pre
    ops = []
    for _ in range(3):
        ops.append(row(side=1, timed=False, owner=1, price=100, qty=1))
        ops.append(row(otype=MARKET, owner=1, qty=r.range(5, 20)))
    assert rows(wl, 450, 456) == ops


def test_alloc_budget():
    wl = build("alloc_budget")
    assert (len(wl), wl.n_timed) == (11_050, 10_000)
    assert rows(wl, 0, 50) == [row(side=1, timed=False, owner=1, price=100, qty=10)] * 50
    assert rows(wl, 50, 57) == [
        row(timed=False, owner=2, price=100, qty=1),  # id 51
        row(timed=False, owner=2, price=101, qty=2),  # id 52
        row(timed=False, owner=2, price=102, qty=3),  # id 53
        row(CAN, timed=False, id=53),
        row(otype=MARKET, side=1, timed=False, owner=2, qty=1),  # id 54
        row(timed=False, owner=2, price=100, qty=6),  # id 55
        row(timed=False, owner=2, price=101, qty=7),
    ]
    assert rows(wl, 1050, 1051) == [row(timed=True, owner=2, price=100, qty=1)]  # j = 1000


def test_scale_and_overrides():
    wl = build("add_only", scale=0.01)
    assert (len(wl), wl.n_timed) == (12_000, 10_000)
    assert build("add_only", warmup=0, measured=7).commands["timed"].tolist() == [True] * 7
    assert len(build("cpp_comprehensive", scale=0.0005)) == 1000
    other = build("add_only", scale=0.01, seed=12345)
    assert other.seed == 12345 and other.commands.tobytes() != wl.commands.tobytes()
    assert wl.params["scale"] == 0.01 and wl.params["seed"] == A5


def test_same_seed_same_bytes():
    for name in workload_names():
        a = build(name, scale=0.002)
        b = build(name, scale=0.002)
        assert a.commands.dtype == COMMAND_DTYPE
        assert a.commands.tobytes() == b.commands.tobytes(), name


@pytest.mark.parametrize("kwargs,exc,match", [
    ({"bogus": 1}, ValueError, "bogus"),
    ({"scale": "big"}, TypeError, "scale"),
    ({"scale": 0}, ValueError, "scale"),
    ({"measured": 1.5}, TypeError, "measured"),
    ({"measured": True}, TypeError, "measured"),
    ({"measured": -1}, ValueError, "measured"),
    ({"seed": -3}, ValueError, "seed"),
])
def test_bad_params(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        build("add_only", **kwargs)


def test_unknown_name_lists_names():
    with pytest.raises(ValueError, match="add_only.*cpp_comprehensive"):
        build("no_such_workload")
    with pytest.raises(TypeError):
        build(3)


def test_save_load_roundtrip(tmp_path):
    wl = build("stp_sweep", scale=0.01)
    p = wl.save(tmp_path / "w")
    assert p.suffix == ".npz"
    back = Workload.load(p)
    assert back.commands.tobytes() == wl.commands.tobytes()
    assert (back.name, back.family, back.seed, back.config, back.params) == (
        wl.name, wl.family, wl.seed, wl.config, wl.params)
    assert back.description == wl.description and back.provenance == wl.provenance


def test_load_truncated(tmp_path):
    p = build("add_only", scale=0.01).save(tmp_path / "w.npz")
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(WorkloadFileError, match="truncated or corrupt"):
        Workload.load(p)


def test_load_foreign_and_wrong_dtype(tmp_path):
    p = tmp_path / "foreign.npz"
    np.savez(p, x=np.arange(3))
    with pytest.raises(WorkloadFileError, match="not a lob workload file"):
        Workload.load(p)
    (tmp_path / "text.npz").write_text("hello")
    with pytest.raises(WorkloadFileError, match="truncated or corrupt"):
        Workload.load(tmp_path / "text.npz")
    wl = build("add_only", scale=0.001)
    good = wl.save(tmp_path / "good.npz")
    with np.load(good) as z:
        meta = z["meta"]
    bad = tmp_path / "dtype.npz"
    np.savez(bad, commands=np.zeros(len(wl), dtype=[("kind", "i4")]), meta=meta)
    with pytest.raises(WorkloadFileError, match="dtype"):
        Workload.load(bad)
    cmds = wl.commands.copy()
    cmds["qty"][0] += 1
    tampered = tmp_path / "tampered.npz"
    np.savez(tampered, commands=cmds, meta=meta)
    with pytest.raises(WorkloadFileError, match="sha256"):
        Workload.load(tampered)
    with pytest.raises(FileNotFoundError):
        Workload.load(tmp_path / "missing.npz")


def test_describe_and_cli(capsys):
    text = describe("aggressive_walk", scale=0.01)
    assert "aggressive_walk" in text and "orderbook-rs" in text and "empties" in text
    from lob.cli import main

    assert main(["workloads", "list"]) == 0
    out = capsys.readouterr().out
    assert all(n in out for n in workload_names())
    assert main(["workloads", "describe", "thin_book_sweep", "--scale", "0.005"]) == 0
    assert "meeting an empty side: " in capsys.readouterr().out
    assert main(["workloads", "describe", "nope"]) == 2


@pytest.mark.parametrize("name", ["lobster_replay", "lobster_deep", "lobster_sparse",
                                  "lobster_bursty"])
def test_lobster_streams_are_valid(name):
    wl = build(name, scale=0.01)
    c = wl.commands
    sub = c["kind"] == SUB
    lim = sub & (c["otype"] == LIMIT)
    lo, hi = wl.config.min_price, wl.config.max_price
    assert ((c["price"][lim] >= lo) & (c["price"][lim] <= hi)).all()
    assert (c["qty"][sub] > 0).all() and (c["owner"][sub] > 0).all()
    ids_before = np.cumsum(sub) - sub  # ids issued before each command
    can = c["kind"] == CAN
    assert can.any() and (c["id"][can] >= 1).all() and (c["id"][can] <= ids_before[can]).all()
    assert len(np.unique(c["id"][can])) == can.sum()  # the sender never cancels an id twice
    pre = wl.params["preload"]
    assert not c["timed"][: round(pre * 0.01)].any() and c["timed"][round(pre * 0.01):].all()


def test_fok_depth_probes_never_fill_and_leave_the_book_alone():
    wl = lob.workload("fok_depth", depth=500, n=50)
    assert len(wl) == 550 and wl.n_timed == 50
    eng = lob.get_engine("reference", wl.config)
    run = eng.replay(wl.commands)
    probes = run.outcomes[500:]
    assert (probes["status"] == lob.Status.CANCELLED).all()
    assert (probes["reason"] == lob.Reason.FOK_UNFILLABLE).all()
    assert sum(q for *_, q in eng.resting()) == int(wl.commands["qty"][:500].sum())

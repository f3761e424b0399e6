"""Real order flow (lob.workloads.bitstamp): the Bitstamp BTC/USD capture converted to lob
commands reproduces every one of the venue's 284 trades fill by fill (taker, maker, price,
quantity) with no other fill, on every engine that holds the band; and the on-demand fetch
fails with one clear line when offline, on a wrong hash and on a corrupt file.

The first test of a session fetches the pinned 2.9 MB wheel into the cache (``$LOB_DATA_DIR``
or ~/.cache/lob) if it is not there; the conversion is computed once per process.
"""

from __future__ import annotations

import dataclasses
import hashlib
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import ENGINES

from lob.engines import engine_spec
from lob.semantics import Kind, OrderType, Status
from lob.workloads import bitstamp, build, fetch
from lob.workloads.fetch import OB_ANALYTICS, DataFetchError

ROOT = Path(__file__).resolve().parents[2]
FULL = (1, 0)  # the full price range: reference only
NARROW = (70_000, 90_000)  # for the scan-from-the-edge engine (v0+pool@numba): 20k ticks
SLOW_AT_DEFAULT = {"v0+pool@numba"}  # re-scans from the band edge on every match step


@pytest.fixture(scope="session")
def wheel() -> Path:
    """The verified cached wheel (downloaded once if missing)."""
    return fetch.ensure(OB_ANALYTICS)


# --- the venue's trades, fill by fill ------------------------------------------------------

def test_full_range_on_reference(wheel):
    assert bitstamp.band_for("reference") == FULL
    assert bitstamp.band_for("v2@numba") == bitstamp.BAND  # 484M ticks: over its 1 GiB budget
    conv = bitstamp.conversion(*FULL)
    assert conv.config.max_price == 483_980_000  # the highest price in the data
    assert conv.counts["dropped_outside_band"] == 0
    r = bitstamp.validate("reference", FULL)
    assert r["ok"] and r["fills"] == r["trades"] == r["matched"] == 284, r


def _case(e: str):
    """The compiled twins run in a fraction of a second; the pure-Python lineage takes 1-5 s
    an engine and the scan twin ~10 s even on the narrow band: marked slow (still in the
    default run; `-m 'not slow'` skips them locally)."""
    fast = engine_spec(e).backend == "numba" and e not in SLOW_AT_DEFAULT
    return pytest.param(e, marks=() if fast else pytest.mark.slow)


@pytest.mark.parametrize("engine", [_case(e) for e in ENGINES if e != "reference"])
def test_every_engine_reproduces_every_trade(wheel, engine):
    """Default band (40k..160k) on every lob engine; the scan-from-the-edge numba twin on a
    narrower band (it re-scans up to 120k ticks per match step at the default: ~60 s)."""
    band = NARROW if engine in SLOW_AT_DEFAULT else bitstamp.BAND
    r = bitstamp.validate(engine, band)
    assert r["ok"] and r["fills"] == 284 and r["extra"] == r["missing"] == 0, r


def _gcc_build(tmp: Path) -> Path:
    cc = shutil.which("gcc")
    if cc is None:
        pytest.skip("gcc not found: the example C engine (examples/c_engine) cannot be built")
    from lob.engines.foreign import HEADER

    out = tmp / "liblob_c_book.so"
    cmd = [cc, "-O2", "-std=c11", "-fwrapv", "-fPIC", "-shared", f"-I{HEADER.parent}",
           str(ROOT / "examples" / "c_engine" / "lob_book.c"), "-o", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return out


def test_c_book_example_engine(wheel, tmp_path):
    from lob.engines.foreign import open_engine

    conv = bitstamp.conversion(*bitstamp.BAND)
    eng = open_engine(_gcc_build(tmp_path), conv.config, "c_book")
    got = eng.replay(conv.commands).fills
    want = conv.expected_fills
    assert len(want) == 284 and got.tolist() == want.tolist()


def test_band_cut_drops_far_orders_and_their_cancels(wheel):
    full, cut = bitstamp.conversion(*FULL), bitstamp.conversion(*NARROW)
    c = cut.counts
    assert c["dropped_outside_band"] > 0 and c["deletes_of_dropped_orders"] > 0
    assert c["dropped_orders"] == (c["dropped_outside_band"] + c["dropped_above_max_qty"]
                                   + c["snapshot_dropped_price_below_1"]
                                   + c["notional_without_trades_dropped"])
    assert 0 < c["dropped_share_pct"] == round(100 * c["dropped_orders"]
                                               / c["created_orders"], 3)
    cmds = cut.commands
    sub = cmds["kind"] == int(Kind.SUBMIT)
    priced = sub & np.isin(cmds["otype"], [int(OrderType.LIMIT), int(OrderType.POST_ONLY)])
    assert cmds["price"][priced].min() >= NARROW[0] and cmds["price"][priced].max() <= NARROW[1]
    assert (len(full.commands) - len(cmds)
            == c["dropped_outside_band"] + c["deletes_of_dropped_orders"])
    # every cancel left targets an order resting at that point: the dropped ones went too
    out = bitstamp.replay_band("reference", NARROW).outcomes
    can = cmds["kind"] == int(Kind.CANCEL)
    assert (out["status"][can] == int(Status.CANCELLED)).all()
    assert not (out["status"] == int(Status.REJECTED)).any()


def test_conversion_counts_and_timing(wheel):
    conv = bitstamp.conversion(*bitstamp.BAND)
    c, cmds = conv.counts, conv.commands
    assert c["events"] == 314_057 and c["trades_venue"] == 284
    for k in ("post_only_refused_but_kept_by_venue", "fill_deletes_still_resting_in_lob",
              "changed_without_trade", "trades_of_dropped_orders"):
        assert c[k] == 0, k
    assert set(c) == set(bitstamp.RULES)  # every count documented
    kinds = {int(OrderType.LIMIT): "limit_takers", int(OrderType.MARKET): "market_sells",
             int(OrderType.NOTIONAL): "notional_buys", int(OrderType.POST_ONLY): "post_only"}
    timed = cmds["timed"]
    for ot, key in kinds.items():
        n = int(np.count_nonzero(timed & (cmds["kind"] == 0) & (cmds["otype"] == ot)))
        assert n == c[key] + (c["market_buys"] if key == "market_sells" else 0), key
    assert int(np.count_nonzero(timed & (cmds["kind"] == int(Kind.CANCEL)))) == c["cancels"]
    assert len(cmds) == c["commands"] and int(timed.sum()) == c["timed_commands"]
    # the snapshot is an untimed pre-load in front; the stale cancels are the only other
    # untimed commands
    untimed_sub = ~timed & (cmds["kind"] == int(Kind.SUBMIT))
    n_pre = int(untimed_sub.sum())
    assert untimed_sub[:n_pre].all() and timed[n_pre]
    assert n_pre <= c["snapshot_orders"] - c["snapshot_dropped_price_below_1"]
    assert int(np.count_nonzero(~timed & (cmds["kind"] == int(Kind.CANCEL)))) == c[
        "stale_snapshot_cancelled"] > 0
    # venue times in ms: non-decreasing over the timed stream, 0 at its start
    ms = conv.arrival_ms
    assert len(ms) == len(cmds) and ms[timed][0] == 0 and (np.diff(ms[timed]) >= 0).all()
    assert ms[timed][-1] == c["span_ms"]
    refused = bitstamp.replay_band("reference", bitstamp.BAND).outcomes["reason"]
    assert int(np.count_nonzero(refused == 11)) == c["post_only_refused"]  # WOULD_CROSS


def test_workload_registry_prefix_and_arrivals(wheel):
    wl = build("bitstamp_btcusd")
    assert wl.family == "real" and wl.config.min_price == bitstamp.BAND[0]
    half = build("bitstamp_btcusd", scale=0.5)
    assert len(half) < len(wl) and (half.commands == wl.commands[:len(half)]).all()
    v = bitstamp.validate("v2", wl=half)
    assert v["ok"] and 0 < v["trades"] < 284
    ms = bitstamp.arrival_ms(half)
    assert len(ms) == len(half)
    due = bitstamp.due_offsets_ns(half, speedup=10)
    assert due[-1] == ms[-1] * 100_000 and (np.diff(due[half.commands["timed"]]) >= 0).all()
    with pytest.raises(ValueError, match="speedup"):
        bitstamp.due_offsets_ns(half, 0)
    with pytest.raises(ValueError, match="scale must be <= 1"):
        build("bitstamp_btcusd", scale=2)
    with pytest.raises(ValueError, match="max_price"):
        build("bitstamp_btcusd", min_price=100_000, max_price=90_000)


def test_validation_can_fail(wheel):
    """Every priced order as LIMIT (no post-only refusals): crossing quotes trade, so the
    check reports extra fills."""
    conv = bitstamp.conversion(*bitstamp.BAND)
    wl = build("bitstamp_btcusd")
    wl.commands = wl.commands.copy()
    po = wl.commands["otype"] == int(OrderType.POST_ONLY)
    wl.commands["otype"][po] = int(OrderType.LIMIT)
    r = bitstamp.validate("v2@numba", wl=wl)
    assert not r["ok"] and r["extra"] > 0
    assert len(conv.expected_fills) == 284


def test_describe_states_source_rules_and_validation(wheel, capsys):
    from lob.cli import main

    assert main(["workloads", "describe", "bitstamp_btcusd", "--no-diagnostics"]) == 0
    out = capsys.readouterr().out
    for s in ("Bitstamp", "GPL-2.0-or-later", "2026-05-02", "314,057", "POST_ONLY",
              "inferred", "ms", "stale_snapshot_cancelled", "dropped_share_pct",
              "284 of 284 real trades reproduced fill by fill, 0 extra fills"):
        assert s in out, s
    assert main(["data", "status"]) == 0
    assert "ok" in capsys.readouterr().out


# --- the fetch's failure modes (fast: no network, a fake cache) -----------------------------

def _one_line(e: Exception) -> str:
    msg = str(e)
    assert "\n" not in msg and OB_ANALYTICS.requirement in msg, msg
    return msg


def test_offline_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(fetch.ENV, str(tmp_path))

    def offline(cmd, **kw):
        return subprocess.CompletedProcess(cmd, 1, "", (
            "WARNING: Retrying ... NewConnectionError: Failed to establish a new connection\n"
            "ERROR: Could not find a version that satisfies the requirement ob-analytics==0.1.0"
            "\nERROR: No matching distribution found for ob-analytics==0.1.0\n"))

    monkeypatch.setattr(fetch.subprocess, "run", offline)
    with pytest.raises(DataFetchError) as e:
        fetch.fetch(log=lambda s: None)
    msg = _one_line(e.value)
    assert "offline" in msg and OB_ANALYTICS.command in msg and "No matching" in msg
    assert not list(tmp_path.iterdir())  # nothing half-written left behind
    with pytest.raises(DataFetchError, match="lob data fetch"):
        fetch.ensure(download=False)
    from lob.cli import main

    assert main(["data", "fetch"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("lob data fetch: cannot download")


def test_wrong_hash_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(fetch.ENV, str(tmp_path))
    (tmp_path / OB_ANALYTICS.filename).write_bytes(b"not the wheel")
    with pytest.raises(DataFetchError) as e:
        fetch.ensure()
    assert "sha256" in _one_line(e.value) and "not the pinned" in str(e.value)

    def other_file(cmd, **kw):  # the index hands back something else
        Path(cmd[cmd.index("-d") + 1], OB_ANALYTICS.filename).write_bytes(b"evil")
        return subprocess.CompletedProcess(cmd, 0, "Looking in indexes: x\n", "")

    monkeypatch.setattr(fetch.subprocess, "run", other_file)
    with pytest.raises(DataFetchError, match="not the pinned"):
        fetch.fetch(force=True, log=lambda s: None)
    from lob.cli import main

    assert main(["data", "status"]) == 0
    assert "BAD" in capsys.readouterr().out


def test_corrupt_file_is_one_line(wheel, tmp_path, monkeypatch):
    """A truncated wheel whose hash is pinned (so only the zip check can catch it)."""
    monkeypatch.setenv(fetch.ENV, str(tmp_path))
    data = wheel.read_bytes()[: OB_ANALYTICS.size // 2]
    bad = tmp_path / OB_ANALYTICS.filename
    bad.write_bytes(data)
    ds = dataclasses.replace(OB_ANALYTICS, sha256=hashlib.sha256(data).hexdigest())
    with pytest.raises(DataFetchError) as e:
        fetch.ensure(ds)
    assert "corrupt or truncated" in _one_line(e.value)
    # a member flipped inside an otherwise whole zip: its CRC fails
    whole = bytearray(wheel.read_bytes())
    whole[len(whole) // 3] ^= 0xFF
    bad.write_bytes(bytes(whole))
    ds = dataclasses.replace(OB_ANALYTICS, sha256=hashlib.sha256(whole).hexdigest())
    with pytest.raises(DataFetchError, match="corrupt or truncated"):
        fetch.ensure(ds)


# --- the studies take the real stream by name ----------------------------------------------

REAL_SMALL = 0.02  # about 4,000 timed commands after the 6.5k-order pre-load
FAST = ("v2@numba", "v3@numba")


def test_tail_analysis_takes_the_real_stream(wheel, tmp_path):
    """Its regime, seed and shape views take a stream the seed did not publish."""
    from lob.studies import tail_analysis as ta

    scen = ["add_only", "bitstamp_btcusd"]
    ta.check_parameters(scen, "bitstamp_btcusd", 1, {"bitstamp_btcusd": REAL_SMALL})
    reg = ta.measure_regime(FAST[0], scen, 0.002, {"bitstamp_btcusd": REAL_SMALL}, 1, tmp_path)
    row = next(r for r in reg["rows"] if r["scenario"] == "bitstamp_btcusd")
    assert row["count"] == build("bitstamp_btcusd", scale=REAL_SMALL).n_timed
    assert row["cancel_hit_pct"] == 100.0  # every cancel of the converted stream hits
    assert (tmp_path / f"{FAST[0]}__bitstamp_btcusd.hgrm").exists()
    assert [r["scenario"] for r in ta.seed_table(scen).rows] == ["add_only"]
    assert [a.get_title() for a in ta.plot_tail_shape(reg).axes[:2]] == scen
    po = ta.measure_sources("v3", "bitstamp_btcusd", REAL_SMALL)
    assert ta.sources_table(po, "bitstamp_btcusd", "v3").rows


def test_evolution_stress_takes_the_real_stream(wheel, tmp_path):
    from lob.studies import evolution_stress as es

    wls = ["lobster_replay", "bitstamp_btcusd"]
    over = {"bitstamp_btcusd": REAL_SMALL}
    es.check_parameters(wls, over, ["v2+sorted", "v2"])
    perf = es.measure_throughput(list(FAST), wls, 0.002, over, 1)
    assert {r["workload"] for r in perf["rows"]} == set(wls)
    assert perf["shape"]["bitstamp_btcusd"]["cancel_hit_pct"] == 100.0
    lat = es.measure_latency(FAST[0], wls, 0.002, over, tmp_path)
    assert "bitstamp_btcusd" in es.latency_table(lat).table_markdown()


def test_fok_scan_bottleneck_takes_the_real_stream(wheel, tmp_path):
    from lob.studies import fok_scan_bottleneck as fok

    wl = build("bitstamp_btcusd", scale=REAL_SMALL)
    comp = fok.measure_comprehensive(["v1@numba", *FAST], wl, 1, FAST[-1])
    assert comp["commands"] == len(wl) and comp["diag"]["fok_pct"] == 0.0  # no FOK in it
    fok.comprehensive_table(comp, ["v1@numba", *FAST])
    lat = fok.measure_latency([FAST[0]], wl, tmp_path)
    assert lat["rows"][0]["count"] == wl.n_timed
    assert (tmp_path / f"{FAST[0]}__bitstamp_btcusd.hgrm").exists()


def test_real_flow_study_on_the_real_stream(wheel):
    """The study's diagnostics of the real stream: the venue's trades reproduced, ms rates."""
    from lob.studies import real_flow as rf

    wl = build("bitstamp_btcusd", scale=REAL_SMALL)
    d = rf.diagnose_stream(wl, FAST[0])
    assert d["validated"] and d["trades_reproduced"] == d["venue_trades"] > 0
    ms = bitstamp.arrival_ms(wl)
    t = wl.commands["timed"].astype(bool)
    assert d["commands_per_s"] == pytest.approx(t.sum() / ((ms[t].max() - ms[t].min()) / 1e3))
    assert d["life_median_ms"] is not None and d["cancel_hit_pct"] == 100.0
    t = rf.conversion_table()
    assert t.value("trades_venue", "value") == 284 and "ms of the venue's clock" in t.text


def test_open_loop_rows_follow_the_venue_clock(wheel):
    """Each pace's row: the prefix that fits the time allowed, due at the venue's ms / speed-up
    after the pre-load (a fake pipeline returns the due times it was given)."""
    from lob.studies import real_flow as rf

    seen = {}

    def run(engine, wl, due):
        seen[len(seen)] = (len(wl), due.copy())
        return SimpleNamespace(latency_ns=np.full(wl.n_timed, 1000), due_ns=due,
                               done_ns=due + 1000, timed=wl.commands["timed"])

    ol = rf.measure_open_loop("v2@numba", REAL_SMALL, [1.0, 1000.0], 2.0, run=run)
    assert [r["pace"] for r in ol["rows"]] == ["1x", "1000x", "all at once"]
    full = build("bitstamp_btcusd", scale=REAL_SMALL)
    n1, due1 = seen[0]
    assert n1 < len(full) and ol["rows"][0]["venue_s"] <= 2.0  # 1x: the first 2 venue seconds
    assert seen[1][0] == seen[2][0] == len(full)  # 1000x and the capacity row: all of it
    pre = int(np.argmax(full.commands["timed"]))
    ms = bitstamp.arrival_ms(full)[:n1]
    assert np.array_equal(due1[pre:], ms[pre:] * 1_000_000 + rf.PRELOAD_NS)
    assert not due1[:pre].any() and not (seen[2][1][pre:] - rf.PRELOAD_NS).any()
    # the compiled transport for a compiled engine (the seed's pipeline), named in the table
    assert ol["transport"] == "compiled" and "compiled transport" in rf.open_loop_table(ol).name
    assert rf.measure_open_loop("v3", REAL_SMALL, [1.0], 2.0, run=run)["transport"] == "python"


# --- issue 44: lob data keeps its one-line errors ------------------------------------------

def test_lob_data_says_one_line_for_a_folder_a_read_only_cache_and_a_vanished_wheel(
        tmp_path, monkeypatch, capsys):
    import errno

    from lob.cli import main

    monkeypatch.setenv(fetch.ENV, str(tmp_path))
    (tmp_path / OB_ANALYTICS.filename).mkdir()  # a folder where the wheel goes
    assert main(["data", "status"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "BAD" in out[0] and "a folder sits at its path" in out[0]
    assert main(["data", "fetch"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "a folder sits at its path" in err[0], err
    assert main(["data", "clear"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is a folder" in err[0]
    assert (tmp_path / OB_ANALYTICS.filename).is_dir()
    (tmp_path / OB_ANALYTICS.filename).rmdir()

    def read_only(*a, **k):  # as a read-only cache answers (root ignores chmod, so injected)
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(fetch.tempfile, "TemporaryDirectory", read_only)
    assert main(["data", "fetch"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot save" in err[0] and "permission denied" in err[0], err
    monkeypatch.undo()
    # the wheel disappears between its check and its reading
    monkeypatch.setenv(fetch.ENV, str(tmp_path))
    gone = tmp_path / OB_ANALYTICS.filename
    with pytest.raises(DataFetchError, match="it is gone") as e:
        fetch.read_member(gone, OB_ANALYTICS.members[0])
    assert "\n" not in str(e.value)
    with pytest.raises(DataFetchError, match="it is gone"):
        fetch._verify(OB_ANALYTICS, gone)

"""Your own data (lob.workloads.imported): LOBSTER, ITCH 5.0 and DBN MBO files the tests write
(feedfiles.py) import as named workloads; every execution in them is reproduced fill by fill
(taker, maker, price, quantity) by every engine; LOBSTER's orderbook file is matched level by
level, from a book that began before the file; bad and truncated files are refused with one
line naming the byte offset or row and the field, and leave nothing in the cache."""

from __future__ import annotations

import json

import feedfiles as ff
import numpy as np
import pytest
from conftest import ENGINES

import lob
from lob.cli import main
from lob.workloads import _SPECS, workload_names
from lob.workloads.feed import FeedError
from lob.workloads.imported import expected_fills, import_file, imported_dir, validate

CASES = ("lobster", "lobster_nobook", "itch", "dbn")


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("LOB_CACHE", str(tmp_path_factory.mktemp("cache")))
    yield tmp_path_factory.mktemp("files")
    mp.undo()
    _SPECS.clear()  # the registry forgets this cache's workloads


@pytest.fixture(scope="module")
def imported(cache) -> dict:
    m, b = ff.write_lobster(cache)
    out = {"lobster": import_file("lobster", m, book=str(b), name="t_lobster"),
           "lobster_nobook": import_file("lobster", m, name="t_lobster_nobook"),
           "itch": import_file("itch", ff.write_itch(cache / "day.itch"), symbol="LOBT",
                               name="t_itch"),
           "dbn": import_file("dbn", ff.write_dbn(cache / "day.dbn"), symbol="42",
                              name="t_dbn")}
    return out


def counts(wl) -> dict:
    return json.loads(wl.provenance)["counts"]


@pytest.mark.parametrize("case", CASES)
def test_every_execution_is_one_expected_fill(imported, case):
    wl = imported[case]
    c = counts(wl)
    assert c["executions"] == ff.STORY_FILLS == len(expected_fills(wl.name))
    assert c["executions_out_of_priority"] == 0 and c["events_on_unknown_orders"] == 0
    assert wl.name in workload_names()
    again = lob.workload(wl.name)
    assert np.array_equal(again.commands, wl.commands) and again.family == "imported"
    assert len(lob.workload(wl.name, scale=0.5)) < len(wl)


@pytest.mark.parametrize("engine", ENGINES)
def test_engines_reproduce_the_venue_fills(imported, engine):
    for case in CASES:
        v = validate(imported[case].name, engine)
        assert v["ok"] and v["matched"] == ff.STORY_FILLS and v["extra"] == 0, (case, v)


def test_the_awkward_cases_are_counted(imported):
    c = {k: counts(w) for k, w in imported.items()}
    assert c["lobster"]["hidden_executions"] == c["itch"]["hidden_executions"] == 1
    assert c["lobster"]["halts"] == c["itch"]["halts"] == 2
    assert c["itch"]["replaces"] == 1 and c["itch"]["cross_trades"] == 1
    assert c["dbn"]["modifies"] == 1 and c["dbn"]["cancels_after_fill_absorbed"] == 4
    assert c["dbn"]["snapshot_records"] == 2 and c["dbn"]["timestamps_decreasing"] == 1
    assert c["lobster"]["partial_cancels"] == c["itch"]["partial_cancels"] == 1
    # the replace moved the order: a CANCEL then a new LIMIT (ITCH); a MODIFY (DBN)
    kinds = imported["itch"].commands["kind"].tolist()
    assert kinds.count(1) == 2  # the replace's cancel and the delete
    # the DBN snapshot records are untimed
    assert imported["dbn"].commands["timed"][:2].tolist() == [False, False]
    assert c["lobster"]["book_checks"] == c["lobster"]["events"]
    assert c["lobster"]["book_mismatches"] == 0


def test_lobster_book_from_before_the_file(cache):
    msgs, books = ff.lobster_rows()
    cut = 5  # the file starts after the first adds and an execution: orders of unknown ids
    m, b = ff.write_lobster(cache, "LOBP", rows=(msgs[cut:], books[cut:]))
    wl = import_file("lobster", m, book=str(b), name="t_preload")
    c = counts(wl)
    assert c["preload_orders"] == 3 and c["book_mismatches"] == 0
    assert c["executions_of_preload_orders"] == 2 and c["events_on_unknown_orders"] == 0
    assert not wl.commands["timed"][:3].any()
    for engine in ("reference", "v5@numba"):
        assert validate("t_preload", engine)["ok"]


def test_lobster_book_that_differs_is_counted(cache):
    msgs, books = ff.lobster_rows()
    books = [list(r) for r in books]
    books[3][1] += 1  # the venue says 71 at the first ask after event 3
    m, b = ff.write_lobster(cache, "LOBD", rows=(msgs, books))
    conv = json.loads(import_file("lobster", m, book=str(b), name="t_differs").provenance)
    assert conv["counts"]["book_mismatches"] == 1 and conv["first_book_mismatch_event"] == 3


def test_symbol_filter_and_window(cache):
    path = ff.write_itch(cache / "two.itch")
    a = counts(import_file("itch", path, symbol="LOBT", name="t_f1"))
    b = counts(import_file("itch", ff.write_itch(cache / "one.itch", other=False),
                           symbol="LOBT", name="t_f2"))
    assert a == b  # the other stock's orders change nothing
    o = counts(import_file("itch", path, symbol="OTHR", name="t_f3"))
    assert o["adds"] == len(ff.STORY) and o["executions"] == 0
    w = import_file("itch", path, symbol="LOBT", name="t_f4", t_from="09:30:00.000004",
                    t_to="09:30:00.000009")
    assert counts(w)["executions"] == 2  # events 0..8: the window ends before the 3rd fill
    assert w.commands["timed"].sum() < len(w)  # the first four events build the book untimed
    with pytest.raises(FeedError, match="no stock directory"):
        import_file("itch", path, symbol="NONE", name="t_f5")
    with pytest.raises(FeedError, match="not LOBT"):
        m, _ = ff.write_lobster(cache, "ZZZZ", book=False)
        import_file("lobster", m, symbol="LOBT", name="t_f6")


def _cli_error(capsys, *argv) -> str:
    assert main(["data", "import", *map(str, argv)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def _left(name: str) -> list[str]:
    return [p.name for p in imported_dir().glob(f"{name}*")]


def test_bad_files_refused_in_one_line(cache, capsys):
    m, b = ff.write_lobster(cache, "LOBB")
    text = m.read_text()
    m.write_text(text[:-9])  # a truncated last row
    err = _cli_error(capsys, "lobster", m, "--name", "bad1")
    assert f"row {len(text.splitlines())}" in err and ("field" in err or "fields" in err)
    m.write_text(text.replace(",4,", ",9,", 1))  # an unknown event type
    assert "row 5, field type" in _cli_error(capsys, "lobster", m, "--name", "bad1")
    m.write_text(text)
    b.write_text("".join(b.read_text().splitlines(keepends=True)[:-1]))
    assert "truncated" in _cli_error(capsys, "lobster", m, "--book", b, "--name", "bad1")
    raw = ff.write_itch(cache / "t.itch").read_bytes()
    (cache / "t.itch").write_bytes(raw[:-7])
    err = _cli_error(capsys, "itch", cache / "t.itch", "--symbol", "LOBT", "--name", "bad2")
    assert f"byte offset {len(raw) - 42}" in err and "truncated" in err
    bad = bytearray(raw)
    bad[2 + 12 + 2] = ord("z")  # the second message's type
    (cache / "t.itch").write_bytes(bytes(bad))
    err = _cli_error(capsys, "itch", cache / "t.itch", "--symbol", "LOBT", "--name", "bad2")
    assert "byte offset 14, field length/type" in err
    raw = ff.write_dbn(cache / "t.dbn").read_bytes()
    (cache / "t.dbn").write_bytes(raw[:-20])
    err = _cli_error(capsys, "dbn", cache / "t.dbn", "--name", "bad3", "--symbol", "42")
    assert f"byte offset {len(raw) - 56}, field length" in err and "truncated" in err
    (cache / "t.dbn").write_bytes(raw[:100])
    assert "header" in _cli_error(capsys, "dbn", cache / "t.dbn", "--name", "bad3")
    assert not _left("bad") and "bad1" not in workload_names()


def test_cli_import_then_describe(cache, capsys):
    path = ff.write_itch(cache / "cli.itch")
    assert main(["data", "import", "itch", str(path), "--symbol", "LOBT", "--name",
                 "t_cli"]) == 0
    out = capsys.readouterr().out
    assert "imported t_cli" in out and "4 executions" in out
    assert main(["workloads", "describe", "t_cli", "--no-diagnostics"]) == 0
    out = capsys.readouterr().out
    assert "4 of 4 executions reproduced fill by fill" in out and "sha256" in out
    assert main(["data", "remove", "t_cli"]) == 0 and "t_cli" not in workload_names()


# --- issue 44 round 3: `lob data import` attacked as a hostile user would ----------------

def test_names_paths_times_and_flags_a_hostile_user_gives(cache, capsys, tmp_path):
    path = ff.write_itch(cache / "h.itch")
    for name in ("my.tmp1", "x.fills"):  # lob's own file names there: the workload would
        err = _cli_error(capsys, "itch", path, "--symbol", "LOBT", "--name", name)
        assert "may not end in '.fills' or hold '.tmp'" in err  # import, then never list
    victim = tmp_path / "keep.npz"
    victim.write_bytes(b"not lob's")
    rel = "../" * 12 + str(victim)[1:-4]
    assert main(["data", "remove", rel]) == 2 and victim.exists()  # a name, not a path
    assert "workload name" in capsys.readouterr().err
    for bad in ("25:99", "12:60", "23:59:60"):
        err = _cli_error(capsys, "itch", path, "--symbol", "LOBT", "--name", "hx", "--from",
                         bad)
        assert "not a time of day" in err
    err = _cli_error(capsys, "itch", path, "--symbol", "LOBT", "--name", "hx", "--book",
                     "/etc/hostname")
    assert "--book is LOBSTER's orderbook file" in err
    assert "hx" not in workload_names()


def test_fills_of_another_import_of_the_name_are_refused(cache, monkeypatch):
    """A kill between the two renames (or two imports of one name racing) leaves one
    import's workload beside another's expected fills: refused, never validated against."""
    import os

    from lob.workloads import imported as I

    m, b = ff.write_lobster(cache, "LOBP")
    import_file("lobster", m, name="t_pair")
    real = os.replace
    calls = []

    def killed_between(src, dst):  # the second import dies after its fills are in place
        calls.append(dst)
        if str(dst).endswith("t_pair.npz"):
            raise KeyboardInterrupt
        return real(src, dst)

    monkeypatch.setattr(I.os, "replace", killed_between)
    (cache / "other").mkdir()
    other, _ = ff.write_lobster(cache / "other", "LOBP", book=False,
                                rows=[r[:-2] for r in ff.lobster_rows()])  # another stream
    with pytest.raises(KeyboardInterrupt):
        import_file("lobster", other, name="t_pair")
    monkeypatch.undo()
    with pytest.raises(FeedError, match="belong to another import of that name"):
        expected_fills("t_pair")
    import_file("lobster", m, name="t_pair")  # imported again: whole
    assert len(expected_fills("t_pair"))


def test_a_replace_at_the_same_price_loses_priority(cache):
    """ITCH U at an unchanged price sends the order to the back of its level: the order that
    was behind it is executed first, and lob's fills say so (maker by maker)."""
    P = ff.P
    story = [("add", 0, 21, 100 * P, 10, 0), ("add", 0, 22, 100 * P, 10, 0),
             ("replace", 0, 21, 100 * P, 10, 23),  # same price and size: priority lost
             ("exec", 0, 22, 100 * P, 10, 0), ("exec", 0, 23, 100 * P, 10, 0)]
    path = cache / "prio.itch"
    path.write_bytes(b"".join(ff.itch_messages(story, other=False)))
    wl = import_file("itch", path, symbol="LOBT", name="t_prio")
    c = counts(wl)
    assert c["executions"] == 2 and c["executions_out_of_priority"] == 0
    want = expected_fills("t_prio")
    assert want["maker"].tolist() == [2, 3]  # 22 (lob id 2) first, then 23 (the replace)
    for engine in ("reference", "v5@numba"):
        assert validate("t_prio", engine)["ok"]


def test_dbn_zstd_as_databento_delivers_it(cache, capsys):
    """A .dbn.zst (compressed by databento-dbn's own Transcoder) imports as the plain file
    does; one cut inside a record is refused in one line naming the offset."""
    import io

    import databento_dbn as dbn

    def zst(raw: bytes) -> bytes:
        buf = io.BytesIO()
        t = dbn.Transcoder(buf, dbn.Encoding.DBN, dbn.Compression.ZSTD)
        t.write(raw)
        t.flush()
        return buf.getvalue()

    raw = ff.write_dbn(cache / "z.dbn").read_bytes()
    (cache / "z.dbn.zst").write_bytes(zst(raw))
    a = import_file("dbn", cache / "z.dbn", symbol="42", name="t_plain")
    b = import_file("dbn", cache / "z.dbn.zst", symbol="42", name="t_zst")
    assert np.array_equal(a.commands, b.commands) and validate("t_zst")["ok"]
    big = ff.write_dbn(cache / "big.dbn", recs=ff.dbn_records() * 2000, other=False)
    z = zst(big.read_bytes())
    (cache / "cut.dbn.zst").write_bytes(z[:len(z) * 2 // 3])
    err = _cli_error(capsys, "dbn", cache / "cut.dbn.zst", "--name", "t_cut")
    assert "of the decompressed stream" in err and "truncated" in err
    assert not _left("t_cut")


def test_streaming_in_tiny_chunks_changes_nothing(cache, monkeypatch):
    """Read and converted a few rows / events at a time (the grid and the band laid out
    again as prices arrive, slots and the id table grown and reused), each format gives
    the commands, fills and counts of one whole pass."""
    from lob.workloads import feed, formats

    m, b = ff.write_lobster(cache, "LOBS")
    itch = ff.write_itch(cache / "s.itch")
    dbn = ff.write_dbn(cache / "s.dbn")
    runs = {"lobster": dict(fmt="lobster", path=m, book=str(b)),
            "itch": dict(fmt="itch", path=itch, symbol="LOBT"),
            "dbn": dict(fmt="dbn", path=dbn, symbol="42")}
    whole = {k: import_file(name=f"t_w_{k}", **kw) for k, kw in runs.items()}
    monkeypatch.setattr(formats, "BLOCK_BYTES", 40)  # a row, a message, a record a block
    monkeypatch.setattr(formats, "CONVERT_ROWS", 2)
    monkeypatch.setattr(feed, "SUB", 1)
    for k, kw in runs.items():
        part = import_file(name=f"t_p_{k}", **kw)
        assert np.array_equal(part.commands, whole[k].commands), k
        assert np.array_equal(expected_fills(part.name), expected_fills(whole[k].name)), k
        assert counts(part) == counts(whole[k]), k
    assert counts(whole["lobster"])["book_checks"] == len(ff.lobster_rows()[0])


@pytest.mark.parametrize("off_by", [0, 1])
def test_dbn_snapshot_after_a_clear_is_compared_with_the_rebuilt_book(cache, off_by):
    """A DBN clear (R) followed by F_SNAPSHOT adds restates the venue's book: lob compares
    the book they build with its own before the clear, level by level, and counts a
    mismatch when the venue's says other than lob's."""
    import databento_dbn as dbn

    A, S = dbn.Action, dbn.F_SNAPSHOT
    recs = ff.dbn_records(ff.STORY[:4])  # bids 100.00: 100 + 50; asks 100.05: 70, 100.06: 30
    t = 1_767_605_500 * 10**9
    recs.append(ff.dbn_record(A.CLEAR, 0, 0, 0, 0, t, S))
    for k, (_, s, oid, px, q, _) in enumerate(ff.STORY[:4]):
        recs.append(ff.dbn_record(A.ADD, s, oid, px, q + (off_by if k == 2 else 0), t, S))
    recs.append(ff.dbn_record(A.ADD, 0, 99, 99 * ff.P, 5, t + 1, dbn.F_LAST))
    path = ff.write_dbn(cache / f"snap{off_by}.dbn", recs=recs, other=False)
    c = counts(import_file("dbn", path, name=f"t_snap{off_by}"))
    assert c["clears"] == 1 and c["book_checks"] == 1 and c["book_mismatches"] == off_by


def test_dbn_trades_without_fill_records_are_executions(cache):
    """A feed that states a trade (T, the aggressor) and then the maker's cancel (C), with no
    fill record, gives the same executions, fill by fill, as one with F records; a trade
    print against hidden liquidity (no cancel follows in its event) stays a print."""
    path = ff.write_dbn(cache / "nofill.dbn", recs=ff.dbn_records(fills=False), other=False)
    wl = import_file("dbn", path, name="t_nofill")
    c = counts(wl)
    assert c["executions"] == c["executions_from_trade_prints"] == ff.STORY_FILLS
    assert c["cancels_after_fill_absorbed"] == 0 and c["trade_prints"] == ff.STORY_FILLS + 1
    with_f = import_file("dbn", ff.write_dbn(cache / "f.dbn", other=False), name="t_withf")
    assert counts(with_f)["executions_from_trade_prints"] == 0
    assert np.array_equal(expected_fills("t_nofill"), expected_fills("t_withf"))
    for engine in ("reference", "v5@numba"):
        assert validate("t_nofill", engine)["ok"]


def test_dbn_trade_without_aggressor_side_invents_no_fill(cache, capsys):
    """A DBN trade with side N (no aggressor: an uncross, two resting orders matched, an
    off-book print) then a cancel at its price: no taker is synthesised, the cancel stays a
    cancel, both are counted; the same trade with the seller as aggressor is an execution.
    An add with side N is refused in one line naming its byte offset and the field."""
    import databento_dbn as dbn

    A = dbn.Action
    t = 1_767_605_400 * 10**9

    def file(side: int, name: str):
        recs = ff.dbn_records(ff.STORY[:4])  # bids 100.00: 100 (id 11) + 50; asks 100.05...
        recs += [ff.dbn_record(A.TRADE, side, 0, 100 * ff.P, 40, t + 10, 0),
                 ff.dbn_record(A.CANCEL, 0, 11, 100 * ff.P, 40, t + 10, dbn.F_LAST)]
        return import_file("dbn", ff.write_dbn(cache / name, recs=recs, other=False),
                           name=name.replace(".", "_"))

    c = counts(none := file(2, "noside.dbn"))
    assert c["trade_prints_without_side"] == 1 and c["cancels_after_trades_without_side"] == 1
    assert c["executions"] == c["executions_from_trade_prints"] == 0
    assert c["partial_cancels"] == 1 and len(expected_fills(none.name)) == 0
    sold = counts(file(1, "sold.dbn"))
    assert sold["executions_from_trade_prints"] == 1 and sold["trade_prints_without_side"] == 0
    for engine in ("reference", "v5@numba"):
        assert validate(none.name, engine)["ok"]
    recs = ff.dbn_records(ff.STORY[:2]) + [ff.dbn_record(A.ADD, 2, 31, 100 * ff.P, 5, t, 0)]
    path = ff.write_dbn(cache / "addn.dbn", recs=recs, other=False)
    head = len(path.read_bytes()) - 3 * 56
    err = _cli_error(capsys, "dbn", path, "--name", "t_addn")
    assert f"byte offset {head + 2 * 56}, field side: 'N' on an add" in err
    assert not _left("t_addn")

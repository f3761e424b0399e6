"""`lob fuzz` with shrinking (lob.engines.shrink): a bug planted in a copy of the example C
engine (examples/c_engine: its FOK availability counts the taker's own orders under
CANCEL_MAKER) is found on a workload's stream and shrunk to a reproducer of a few commands
that diverges the same way; the reproducer file replays through `lob replay --commands` and
loads in a test; the shrinker keeps cancel targets when it removes submits."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import lob
from lob.cli import main
from lob.engines.foreign import foreign_specs
from lob.engines.shrink import (
    DEAD_ID,
    _Stream,
    divergence,
    load_reproducer,
    save_reproducer,
    shrink,
    table,
)
from lob.semantics import BookConfig, StpMode, commands

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "c_engine"
HEADER = ROOT / "lob" / "engines" / "foreign"
GOOD = "    if (b->stp == STP_CANCEL_MAKER) continue;"
PLANTED = "    if (b->stp == STP_CANCEL_MAKER) { total += n->qty; continue; }  /* planted */"


def _build(src: Path, out: Path, name: str, folder: Path) -> str:
    cc = shutil.which("gcc")
    if cc is None:
        pytest.skip("gcc not found: the example C engine cannot be built")
    r = subprocess.run([cc, "-O2", "-std=c11", "-fwrapv", "-fPIC", "-shared", f"-I{HEADER}",
                        str(src), "-o", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    toml = folder / f"{name}.toml"
    toml.write_text(f'name = "{name}"\npath = "{out.name}"\ndescription = "test copy"\n')
    if name not in lob.engine_names():
        for spec in foreign_specs(toml):
            lob.register_engine(spec)
    return name


@pytest.fixture(scope="module")
def engines(tmp_path_factory) -> tuple[str, str]:
    """(the example engine, its copy with the planted bug), both built here."""
    d = tmp_path_factory.mktemp("shrink")
    text = (EXAMPLE / "lob_book.c").read_text()
    assert text.count(GOOD.strip()) == 1  # the line the bug is planted in
    bad = d / "planted.c"
    bad.write_text(text.replace(GOOD.strip(), PLANTED.strip()))
    return (_build(EXAMPLE / "lob_book.c", d / "liblob_ok.so", "c_shrink_ok", d),
            _build(bad, d / "liblob_planted.so", "c_shrink_planted", d))


def test_planted_bug_found_and_shrunk(engines, tmp_path):
    ok, planted = engines
    wl = lob.workload("cpp_comprehensive", scale=0.01)  # 20,000 commands, CANCEL_MAKER
    assert divergence("reference", ok, wl.config, wl.commands) is None
    first = divergence("reference", planted, wl.config, wl.commands)
    assert first is not None and first.kind[:2] == ("outcome", "SUBMIT FOK")
    s = shrink("reference", planted, wl.config, wl.commands, first=first, time_limit=30)
    assert len(s.commands) <= 4 and s.divergence.kind == first.kind
    # the reproducer is the bug: an own resting order, then an own FOK against it
    own = s.commands["owner"]
    assert s.commands["otype"][-1] == 2 and own[-1] in own[:-1].tolist()
    assert divergence("reference", ok, wl.config, s.commands) is None
    txt = table(s.commands, ("reference", planted), wl.config)
    assert txt.splitlines()[-1].endswith("<") and "FOK_UNFILLABLE" in txt
    path = save_reproducer(tmp_path / "r.json", s, ("reference", planted), wl.config)
    eng, config, cmds, doc = load_reproducer(path)  # what a regression test does
    assert eng == ["reference", planted] and config == wl.config
    assert np.array_equal(cmds, s.commands)
    assert divergence(*eng, config, cmds).kind == tuple(
        tuple(k) if isinstance(k, list) else k for k in doc["kind"])


def test_cli_fuzz_then_replay(engines, tmp_path, capsys):
    ok, planted = engines
    out = tmp_path / "repro.json"
    assert main(["fuzz", "--engines", f"reference,{planted}", "--workload",
                 "cpp_comprehensive", "--scale", "0.005", "--out", str(out)]) == 1
    text = capsys.readouterr().out
    assert "shrunk to" in text and out.exists()
    assert main(["replay", "--commands", str(out)]) == 1
    assert "diverge" in capsys.readouterr().out
    assert main(["replay", "--commands", str(out), "--engines", f"reference,{ok}"]) == 0
    assert "agree" in capsys.readouterr().out
    assert main(["fuzz", "--engines", f"reference,{ok}", "--workload", "cpp_comprehensive",
                 "--scale", "0.002"]) == 0
    assert "agree" in capsys.readouterr().out
    # lob's fuzz streams, drawn inside the engines' declarations, each STP slot in turn
    assert main(["fuzz", "--engines", f"reference,{planted}", "--profile", "narrow",
                 "--commands", "5000", "--out", str(tmp_path / "p.json")]) == 1
    assert "narrow-CANCEL_MAKER" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert main(["replay", "--commands", str(bad)]) == 2
    assert "not a lob reproducer" in capsys.readouterr().err


def test_removing_a_submit_keeps_the_cancels_targets():
    config = BookConfig(1, 100, StpMode.NONE)
    def sub(price):
        return {"kind": 0, "otype": 0, "side": 0, "owner": 1, "price": price, "qty": 5}
    # the 2nd submit is rejected (price 0): it takes no id
    c = commands([sub(10), sub(0), sub(11), sub(12), {"kind": 1, "id": 3},
                  {"kind": 1, "id": 1}, {"kind": 1, "id": 77}])
    st = _Stream(config, c)
    got = st.build(np.array([2, 3, 4, 5, 6]))  # the first submit removed
    assert got["id"][2:].tolist() == [2, DEAD_ID, 77]  # id 3 (3rd submit) is now 2
    assert st.build(np.arange(7))["id"].tolist() == c["id"].tolist()


def test_agreeing_engines_have_nothing_to_shrink():
    wl = lob.workload("cpp_comprehensive", scale=0.001)
    with pytest.raises(ValueError, match="agree"):
        shrink("reference", "v3", wl.config, wl.commands)


# --- the seed's engine with the two bugs the real one has (issue 43 point 8) ---------------

NATIVE_SRC = ROOT / "lob" / "engines" / "native" / "s001_book.cpp"
BUGS = {  # name -> (the line as lob writes it, the bug planted in its place)
    "s001_fok32": ("    int64_t total = 0;", "    int32_t total = 0;  // a 32-bit FOK sum"),
    "s001_level32": ("        int64_t qty = 0, count = 0;",
                     "        int32_t qty = 0; int64_t count = 0;  // a 32-bit level sum"),
}


@pytest.fixture(scope="module")
def seed_copies(tmp_path_factory) -> dict[str, str]:
    """v1@cpp's source (pool, bitmask, full FOK scan) with each bug planted, built here."""
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("g++ not found: the seed's engine cannot be built")
    d = tmp_path_factory.mktemp("s001")
    text = NATIVE_SRC.read_text()
    for name, (good, bad) in BUGS.items():
        assert text.count(good + "\n") == 1, good
        src = d / f"{name}.cpp"
        src.write_text(text.replace(good + "\n", bad + "\n"))
        lib = d / f"lib{name}.so"
        r = subprocess.run([cxx, "-std=c++17", "-O2", "-fPIC", "-shared", f"-I{HEADER}",
                            "-DLOB_LEVELS_POOL=1", "-DLOB_BEST_BITMASK=1", "-DLOB_FOK_EARLY=0",
                            str(src), "-o", str(lib)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        toml = d / f"{name}.toml"
        toml.write_text(f'name = "{name}"\npath = "{lib.name}"\ndescription = "planted"\n')
        if name not in lob.engine_names():
            for spec in foreign_specs(toml):
                lob.register_engine(spec)
    return {n: n for n in BUGS}


@pytest.mark.parametrize("bug,kind,most", [("s001_fok32", "outcome", 5),
                                           ("s001_level32", "book", 4)])
def test_seed_engine_bugs_found_within_its_declaration(seed_copies, bug, kind, most, tmp_path,
                                                       capsys):
    """The copies declare what the seed's engine runs (band 1..99, CANCEL_MAKER only, no
    MODIFY): lob fuzz draws the `top` profile (quantities up to MAX_QTY) inside that, finds
    each bug and shrinks it to a few commands."""
    out = tmp_path / f"{bug}.json"
    assert main(["fuzz", "--engines", f"reference,{bug}", "--profile", "top", "--commands",
                 "20000", "--out", str(out)]) == 1
    capsys.readouterr()
    eng, config, cmds, doc = load_reproducer(out)
    assert config.stp == StpMode.CANCEL_MAKER and 1 <= config.min_price <= config.max_price <= 99
    assert len(cmds) <= most and doc["kind"][0] == kind
    assert (cmds["qty"] > 2**28).any()  # it takes quantities whose sum passes 2**31
    d = divergence("reference", bug, config, cmds)
    assert d is not None and d.kind[0] == kind


# --- issue 44 round 3: `lob fuzz` / `lob replay` attacked as a hostile user would -------

def test_bad_flags_and_files_are_one_line_before_anything_runs(tmp_path, capsys):
    base = ["fuzz", "--engines", "v2,v3", "--profile", "narrow"]
    for extra, msg in ((["--commands", "0"], "--commands must be at least 1"),
                       (["--commands", "-5"], "--commands must be at least 1"),
                       (["--seed", "-1"], "--seed must be >= 0"),
                       (["--time-limit", "nan"], "--time-limit must be"),
                       (["--time-limit", "-1"], "--time-limit must be"),
                       (["--out", str(tmp_path)], "the reproducer's file name"),
                       (["--out", str(tmp_path / "no" / "r.json")], "in a folder that exists")):
        assert main([*base, *extra]) == 2, extra
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and msg in err[0], (extra, err)
    (tmp_path / "list.json").write_text("[]")
    (tmp_path / "rows.json").write_text('{"format": "lob-reproducer", "engines": ["v2"], '
                                        '"config": {}, "commands": [1, 2]}')
    for f in ("list.json", "rows.json"):
        assert main(["replay", "--commands", str(tmp_path / f)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "not a lob reproducer" in err[0], err

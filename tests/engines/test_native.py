"""lob's C++ engines (lob.engines.native): the build into the cache, the registered lineage,
what they declare, and how they answer what they cannot run. Their agreement with
``reference`` is the differential fuzz's (tests/differential/test_fuzz.py, fitted to their
declaration); the published counters are tests/differential/test_cpp_counters.py's."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import lob
from lob.engines import native, registry
from lob.engines.capabilities import Unsupported
from lob.engines.foreign.library import UNSUPPORTED, load
from lob.semantics import COMMAND_DTYPE, BookConfig, Kind, OrderType, Reason, Status, StpMode

pytestmark = pytest.mark.skipif(native.unavailable() is not None and not all(
    n.library.is_file() for n in native.NATIVE.values()), reason="no C++ compiler here")

S001 = ["v0@cpp", "v0+pool@cpp", "v0+bitmap@cpp", "v1@cpp", "v2@cpp"]
CFG = BookConfig(1, 99, StpMode.CANCEL_MAKER)


def test_the_seed_001_lineage_is_registered_one_toggle_per_step():
    for name in S001:
        spec = registry.engine_spec(name)
        assert spec.backend == "cpp" and spec.source == native.SOURCE
        n = native.native(name)
        if spec.parent is None:
            assert spec.toggles == {"levels": "list", "best": "scan", "fok": "full"}
            continue
        parent = native.native(spec.parent)
        changed = [k for k in spec.toggles if spec.toggles[k] != parent.toggles[k]]
        defines = [d for d, p in zip(n.defines, parent.defines, strict=True) if d != p]
        assert len(changed) == 1 and len(defines) == 1, name
    assert registry.engine_spec("v1@cpp").parent == "v0+pool@cpp"
    assert registry.engine_spec("v2@cpp").parent == "v1@cpp"


def test_each_engine_declares_the_seeds_semantics():
    for name in S001:
        caps = registry.engine_capabilities(name)
        assert caps.stp_modes == {StpMode.CANCEL_MAKER}
        assert caps.order_types == {OrderType.LIMIT, OrderType.IOC, OrderType.FOK,
                                    OrderType.POST_ONLY}
        assert caps.kinds == {Kind.SUBMIT, Kind.CANCEL} and not caps.scopes
        assert caps.price_range == (1, 99) and caps.max_band_width == 99
    with pytest.raises(Unsupported, match="holds prices 1..99 only"):
        lob.get_engine("v2@cpp", BookConfig(2, 100, StpMode.CANCEL_MAKER))
    with pytest.raises(Unsupported, match="STP mode NONE"):
        lob.get_engine("v2@cpp", BookConfig(1, 99))
    eng = lob.get_engine("v2@cpp", BookConfig(10, 20, StpMode.CANCEL_MAKER))  # a band inside
    assert eng.submit(1, 0, OrderType.LIMIT, 9, 1).reason == Reason.BAD_PRICE
    assert eng.submit(1, 0, OrderType.LIMIT, 20, 1).status == Status.ACCEPTED


def test_an_invalid_command_is_rejected_and_a_valid_unsupported_one_is_refused():
    eng = lob.get_engine("v0@cpp", CFG)
    o = eng.modify(1, 0, 0)  # a MODIFY of quantity 0: validation rejects it, as everywhere
    assert (o.status, o.reason) == (Status.REJECTED, Reason.BAD_QTY)
    with pytest.raises(Unsupported, match="does not support MODIFY"):
        eng.modify(1, 3, 0)
    # the library itself stops before such a command with LOB_UNSUPPORTED and says why
    lib = load(native.build("v0@cpp"))
    c = np.zeros(2, COMMAND_DTYPE)
    c[0] = (0, 0, 0, 1, 1, 50, 5, 0, 0)
    c[1] = (2, 0, 0, 1, 1, 0, 3, 1, 0)
    out = np.zeros(2, lob.semantics.OUTCOME_DTYPE)
    fills = np.zeros(4, lob.semantics.FILL_DTYPE)
    done, nf = ctypes.c_int64(), ctypes.c_int64()
    h = lib.create(ctypes.byref(_config(CFG)), None, 0)
    try:
        rc = lib.replay(h, c.ctypes.data, 2, out.ctypes.data, fills.ctypes.data, 4,
                        ctypes.byref(done), ctypes.byref(nf))
        assert (rc, done.value) == (UNSUPPORTED, 1)
        assert "MODIFY is not part of this engine" in lib.error_message(h)
    finally:
        lib.destroy(h)


def _config(cfg):
    from lob.engines.foreign.library import Config

    return Config(cfg.min_price, cfg.max_price, int(cfg.stp), 0)


def test_the_build_is_keyed_by_source_header_and_flags(monkeypatch):
    n = native.native("v2@cpp")
    other = native.native("v1@cpp")
    assert n.key() != other.key() and n.library.parent != other.library.parent
    before = n.key()
    monkeypatch.setattr(native, "CXXFLAGS", (*native.CXXFLAGS, "-march=native"))
    assert n.key() != before  # a changed flag is another build, never the stale one


def test_a_build_lands_atomically_in_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LOB_CACHE", str(tmp_path))
    lib = native.build("v0+bitmap@cpp")
    assert lib.is_file() and str(lib).startswith(str(tmp_path))
    assert not list(lib.parent.glob(".part-*"))  # the temporary file was renamed, not left
    assert native.build("v0+bitmap@cpp") == lib  # built once
    assert load(lib).caps == registry.engine_capabilities("v0+bitmap@cpp")


def test_a_library_replaced_in_the_cache_is_rebuilt_and_a_bad_cache_is_one_line(
        tmp_path, monkeypatch):
    """Issue 44 round 3 (the native engines attacked): the cache holds what lob's build
    wrote, checked by its sha256 before use; a cache that cannot be written says so."""
    monkeypatch.setenv("LOB_CACHE", str(tmp_path))
    lib = native.build("v0+bitmap@cpp")
    good = lib.read_bytes()
    lib.unlink()
    lib.write_bytes(good[: len(good) // 2])  # damaged (or another file) under its name
    assert native.build("v0+bitmap@cpp") == lib and lib.read_bytes() == good  # rebuilt
    (tmp_path / "afile").write_text("x")
    monkeypatch.setenv("LOB_CACHE", str(tmp_path / "afile"))  # a file, not a folder
    with pytest.raises(native.BuildUnavailable, match="cannot build native engine 'v2@cpp' "
                                                      r"into .*point \$LOB_CACHE"):
        native.build("v2@cpp")


def test_without_a_compiler_the_engines_are_listed_as_not_built(tmp_path, monkeypatch):
    from lob.cli.engines import engines_table

    monkeypatch.setenv("LOB_CACHE", str(tmp_path))  # nothing built there
    monkeypatch.setenv("CXX", "no-such-compiler-here")
    try:
        registry.refresh()
        assert not set(S001) & set(lob.engine_names())
        assert set(native.unbuilt()) == set(native.NATIVE)  # every family, none built
        with pytest.raises(ValueError, match="not built: no C\\+\\+ compiler: "
                                             "'no-such-compiler-here' not found"):
            lob.get_engine("v2@cpp", CFG)
        line = [x for x in engines_table() if x.startswith("not built (lob's C++")]
        assert len(line) == 1 and "v0@cpp" in line[0] and "install g++" in line[0]
        with pytest.raises(native.BuildUnavailable, match="no C\\+\\+ compiler"):
            native.build("v2@cpp")
    finally:
        monkeypatch.undo()
        registry.refresh()
    assert set(S001) <= set(lob.engine_names())


@pytest.mark.parametrize("name", S001)
def test_engine_clock_and_invariant_check(name):
    """The engine times itself (lob_replay_timed), and lob_check finds a broken book
    healthy after a stream that rests, trades, cancels and self-trade-cancels."""
    from lob.workloads import fuzz

    c = fuzz.case("words", 1, 0, registry.engine_capabilities(name))
    eng = lob.get_engine(name, c.config)
    assert eng.clock == "engine"
    res, durs = eng.replay_timed(c.commands(3_000))
    assert len(durs) == 3_000 and (durs >= 0).all()
    assert res.outcomes["removed"].sum() > 0 and len(res.fills) > 0
    eng.check()
    assert len(eng.resting()) == sum(lv[2] for side in eng.snapshot(100).values()
                                     for lv in side)

"""Foreign engines (lob_engine.h): the example C engine against ``reference``, the C++ seed's
published counters, every load error with the message a user sees, the overflow guard, and
the notebooks by name.

The example engine (examples/c_engine) and a few deliberately broken variants of it are
built with gcc into a temporary folder; without gcc these tests skip, saying so.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import test_fuzz
from test_cpp_counters import PUBLISHED, REMAINING_COMPREHENSIVE
from test_fuzz import GROUPS, PROFILES, assert_same, gen_stream

import lob
import lob.engines.foreign.adapters
from lob.engines import registry
from lob.engines.capabilities import Unsupported
from lob.engines.foreign import (
    ABI_VERSION,
    ENV,
    HEADER,
    ForeignEngine,
    ForeignEngineError,
    HarnessForeignEngine,
    TimedForeignEngine,
    foreign_specs,
    open_engine,
)
from lob.engines.foreign.library import EXPECTED_SIZES
from lob.semantics import (
    FILL_DTYPE,
    OUTCOME_DTYPE,
    BookConfig,
    Kind,
    OrderType,
    Scope,
    Status,
    StpMode,
    checksum,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "c_engine"
NAME = "c_book_test"  # registered by the fixture (the example's own TOML says "c_book")
FUZZ_LEN = 17_000  # per (profile, STP mode): 4 x 4 x 17,000 = 272,000 commands


def _gcc() -> str:
    cc = shutil.which("gcc")
    if cc is None:
        pytest.skip("gcc not found: the example C engine (examples/c_engine) cannot be built")
    return cc


def _build(out: Path, sources: list[Path], *flags: str) -> Path:
    cmd = [_gcc(), "-O2", "-std=c11", "-fwrapv", "-fPIC", "-shared", f"-I{HEADER.parent}",
           f"-I{EXAMPLE}", *flags, *map(str, sources), "-o", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stderr}"
    return out


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("foreign")


@pytest.fixture(scope="module")
def c_lib(build_dir) -> Path:
    return _build(build_dir / "liblob_c_book.so", [EXAMPLE / "lob_book.c"])


@pytest.fixture(scope="module")
def toml(c_lib, build_dir) -> Path:
    """A TOML naming the built engine; registered once in this process."""
    p = build_dir / "engines.toml"
    p.write_text(f'name = "{NAME}"\npath = "{c_lib.name}"\n'
                 f'description = "the example C engine, built by the tests"\n')
    if NAME not in lob.engine_names():
        for spec in foreign_specs(p):
            lob.register_engine(spec)
    return p


# --- the engine against the reference ------------------------------------------------------

@pytest.mark.parametrize("stp", list(StpMode), ids=[m.name for m in StpMode])
def test_differential_fuzz_against_reference(toml, stp):
    """272,000 fuzz commands in all (this test x 4 STP modes, test_fuzz's profiles with their
    bound-value share): every command kind, order type, mass-cancel scope, invalid command;
    outcomes, fills, checksum and final book agree."""
    for profile, (lo, hi, window, unit, extreme, _) in PROFILES.items():
        cmds = gen_stream(1000 + int(stp), FUZZ_LEN, lo, hi, window, unit, extreme)
        config = BookConfig(lo, hi, stp)
        ref = lob.get_engine("reference", config)
        r = ref.replay(cmds)
        eng = lob.get_engine(NAME, config)
        got = eng.replay(cmds)
        eng.check()
        assert_same(f"{NAME} ({profile})", cmds, (r.outcomes, r.fills, ref.snapshot(10**6)),
                    (got.outcomes, got.fills, eng.snapshot(10**6)))
        assert eng.resting() == ref.resting()
        # the stream reached what it claims to cover
        kinds = set(cmds["kind"].tolist())
        assert {int(k) for k in Kind} <= kinds
        assert {int(t) for t in OrderType} <= set(cmds["otype"][cmds["kind"] == 0].tolist())
        assert {int(s) for s in Scope} <= set(cmds["otype"][cmds["kind"] == 3].tolist())
        assert (r.outcomes["status"] == Status.REJECTED).any()


def test_per_command_path_and_replay_into_agree_with_replay(toml):
    lo, hi, window = PROFILES["narrow"][:3]
    cmds = gen_stream(77, 3_000, lo, hi, window)
    config = BookConfig(lo, hi, StpMode.CANCEL_BOTH)
    ref = lob.get_engine("reference", config).replay(cmds)
    one = lob.get_engine(NAME, config)
    rows = []
    for i, row in enumerate(cmds):
        rows.append(tuple(one.execute(row).__dict__.values()))
        if i % 10 == 0:
            one.check()  # the library's own invariant check (lob_check)
    assert np.array_equal(np.array(rows, OUTCOME_DTYPE), ref.outcomes)
    assert np.array_equal(one.fills, ref.fills)
    one.check()
    # replay_into: the book carries over between calls, fills come back per call
    eng = lob.get_engine(NAME, config)
    outs = np.zeros(len(cmds), OUTCOME_DTYPE)
    got_fills = []
    for a in range(0, len(cmds), 1000):
        buf = np.zeros(len(ref.fills), FILL_DTYPE)
        k = eng.replay_into(cmds[a:a + 1000], outs[a:], buf)
        got_fills.append(buf[:k])
    assert checksum(outs, np.concatenate(got_fills)) == ref.checksum
    with pytest.raises(ValueError, match="fills do not fit"):
        lob.get_engine(NAME, config).replay_into(cmds, outs, np.zeros(1, FILL_DTYPE))


def test_engine_protocol_and_engine_clock(toml):
    eng = lob.get_engine(NAME, BookConfig(1, 99))
    from lob.engines.base import Engine

    assert isinstance(eng, Engine) and isinstance(eng, TimedForeignEngine)
    assert eng.clock == "engine" and eng.name == NAME
    wl = lob.workload("cpp_comprehensive", scale=0.01)
    res, durs = lob.get_engine(NAME, wl.config).replay_timed(wl.commands)
    assert res.checksum == lob.replay("reference", wl).checksum
    assert len(durs) == wl.n_timed and (durs > 0).all()
    from lob.measure.latency import capture_latency

    cap = capture_latency(lob.get_engine(NAME, wl.config), wl.commands)
    assert cap.method == "engine-clock" and cap.replay.checksum == res.checksum
    c = eng.clock_overhead(1000)
    assert 0 <= c["min_ns"] <= c["median_ns"]
    assert eng.submit(1, 0, 0, 50, 5).status == Status.ACCEPTED
    assert eng.snapshot(5) == {"bids": [(50, 5, 1)], "asks": []}
    assert eng.resting() == [(1, 1, 0, 50, 5)]
    assert eng.submit(2, 1, 4, 0, 2).filled == 2 and eng.fills.tolist() == [(2, 1, 50, 2)]
    eng.clear_fills()
    assert len(eng.fills) == 0


def test_need_fill_space_protocol(c_lib):
    """The raw ABI: with no fill space left the engine stops before a command that could
    trade, says how far it got, and resumes from there."""
    import ctypes

    from lob.engines.foreign.library import NEED_FILL_SPACE, OK, Config, load
    from lob.semantics import commands

    lib = load(c_lib)
    book = lib.create(ctypes.byref(Config(1, 99, 0, 0)), None, 0)
    try:
        cmds = commands([dict(kind=0, otype=0, side=1, owner=1, price=50, qty=3),
                         dict(kind=1, id=99),  # cannot trade: runs without fill space
                         dict(kind=0, otype=1, side=0, owner=2, price=60, qty=2)])
        outs = np.zeros(3, OUTCOME_DTYPE)
        fills = np.zeros(1, FILL_DTYPE)
        done, k = ctypes.c_int64(-1), ctypes.c_int64(-1)
        args = (ctypes.byref(done), ctypes.byref(k))
        c0, o0, f0 = cmds.ctypes.data, outs.ctypes.data, fills.ctypes.data
        # the first submit finds an empty book, so needs no fill space
        assert lib.replay(book, c0, 3, o0, f0, 0, *args) == NEED_FILL_SPACE
        assert (done.value, k.value) == (2, 0)
        assert outs["status"].tolist()[:2] == [Status.ACCEPTED, Status.NOT_FOUND]
        assert lib.replay(book, c0 + 2 * cmds.itemsize, 1, o0 + 2 * outs.itemsize, f0, 1,
                          *args) == OK
        assert (done.value, k.value) == (1, 1)
        assert fills.tolist() == [(2, 1, 50, 2)] and outs[2]["status"] == Status.FILLED
    finally:
        lib.destroy(book)


def test_published_cpp_counters_full_size(toml):
    """The C++ seed's comprehensive stream, 2,000,000 commands: its published counters."""
    run = lob.replay(NAME, lob.workload("cpp_comprehensive"))
    c = run.counters
    assert {k: c[k] for k in PUBLISHED} == PUBLISHED
    assert c["remaining_sum"] == REMAINING_COMPREHENSIVE


# --- registration ------------------------------------------------------------------------

def test_toml_specs_and_env(toml, c_lib, tmp_path, monkeypatch):
    (spec,) = foreign_specs(toml)
    assert spec.name == NAME and spec.backend == "foreign" and "built by the tests" in \
        spec.description
    assert spec.factory(BookConfig(1, 10)).snapshot() == {"bids": [], "asks": []}
    multi = tmp_path / "two.toml"
    multi.write_text(f'[[engine]]\nname = "x1"\npath = "{c_lib}"\n'
                     f'[[engine]]\nname = "x2"\npath = "{c_lib}"\ndescription = "d"\n')
    assert [s.name for s in foreign_specs(multi)] == ["x1", "x2"]
    monkeypatch.setenv(ENV, str(multi))
    try:  # the registry collects $LOB_ENGINES_TOML's engines as members
        assert {"x1", "x2"} <= set(registry.refresh())
        assert registry.engine_spec("x1").source == "two.toml (foreign)"  # not lob's own
        assert lob.get_engine("x2", BookConfig(1, 5)).submit(1, 0, 0, 3, 1).status == 2
    finally:
        monkeypatch.delenv(ENV)
        assert "x1" not in registry.refresh() and NAME in lob.engine_names()
    ex = foreign_specs(EXAMPLE / "engine.toml")[0]  # the example's TOML resolves its path
    assert ex.name == "c_book" and "liblob_c_book.so" in ex.description


def test_bad_toml(tmp_path):
    with pytest.raises(ForeignEngineError, match="does not exist"):
        foreign_specs(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text('description = "no name"\n')
    with pytest.raises(ForeignEngineError, match="expected `name`"):
        foreign_specs(bad)
    bad.write_text('name = "a@b"\npath = "x.so"\n')
    with pytest.raises(ForeignEngineError, match="may not contain '@'"):
        foreign_specs(bad)


# --- load errors: what a user sees ---------------------------------------------------------

def test_missing_library_file(tmp_path):
    toml = tmp_path / "e.toml"
    toml.write_text('name = "ghost"\npath = "build/libghost.so"\n')
    (spec,) = foreign_specs(toml)  # listing works; building the engine says what is wrong
    with pytest.raises(ForeignEngineError) as e:
        spec.factory(BookConfig())
    assert str(e.value) == (
        f"foreign engine 'ghost': library file {tmp_path / 'build' / 'libghost.so'} does not "
        "exist (build it first, e.g. `make -C examples/c_engine` for the example engine, or "
        "fix `path` in its TOML)")


def test_not_a_library(tmp_path):
    p = tmp_path / "libtext.so"
    p.write_text("not an ELF file")
    with pytest.raises(ForeignEngineError, match="is not a loadable shared library"):
        open_engine(p)


# A wrapper around the example engine: -D flags rename one of its functions and put a
# broken one in its place (or leave the symbol missing).
WRAPPER = r"""
#define lob_abi_version real_abi_version
#define lob_struct_size real_struct_size
#define lob_replay real_replay
#ifdef HIDE_SNAPSHOT
#define lob_snapshot hidden_snapshot
#endif
#ifdef HIDE_TIMED
#define lob_replay_timed hidden_replay_timed
#define lob_clock_samples hidden_clock_samples
#endif
#define lob_capabilities real_capabilities
#include "lob_book.c"
#undef lob_abi_version
#undef lob_struct_size
#undef lob_replay
#undef lob_capabilities
int32_t lob_capabilities(lob_caps *out) {
    int32_t rc = real_capabilities(out);
#ifdef CAPS_ANY_BAND
    out->max_band_width = 0;
#endif
#ifdef CAPS_PARTIAL
    out->stp_modes = LOB_CAP_BIT(LOB_STP_NONE);
    out->kinds &= ~LOB_CAP_BIT(LOB_MODIFY);
    out->order_types &= ~LOB_CAP_BIT(LOB_NOTIONAL);
    out->scopes &= ~LOB_CAP_BIT(LOB_SCOPE_OWNER);
#endif
    return rc;
}
#ifndef ABI
#define ABI LOB_ABI_VERSION
#endif
uint32_t lob_abi_version(void) { return ABI; }
int64_t lob_struct_size(int32_t w) {
#ifdef BAD_STRUCT
    if (w == BAD_STRUCT) return real_struct_size(w) + 8;
#endif
    return real_struct_size(w);
}
int32_t lob_replay(lob_book *b, const lob_command *c, int64_t n, lob_outcome *o, lob_fill *f,
                   int64_t cap, int64_t *done, int64_t *nf) {
#ifdef REFUSE_MODIFY_UP /* one command at a time: stop before a modify up */
    int64_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        int32_t k = c[i].kind == LOB_MODIFY ? lookup(b, c[i].id) : -1;
        if (k >= 0 && c[i].qty > b->pool[k].qty) {
            *done = i;
            *nf = total;
            snprintf(b->err, sizeof b->err, "modify up is not supported");
            return LOB_UNSUPPORTED;
        }
        int64_t d1, f1;
        int32_t rc = real_replay(b, c + i, 1, o + i, f + total, cap - total, &d1, &f1);
        total += f1;
        if (rc != LOB_OK) { *done = i + d1; *nf = total; return rc; }
    }
    *done = n;
    *nf = total;
    return LOB_OK;
#endif
    int32_t rc = real_replay(b, c, n, o, f, cap, done, nf);
#ifdef OVERFLOW_FILLS
    memset(&f[cap], 0x11, sizeof(lob_fill)); /* one fill past the end */
#endif
#ifdef OVERFLOW_OUTCOMES
    memset(&o[n], 0x22, 3); /* three bytes past the last outcome */
#endif
    return rc;
}
"""


@pytest.fixture(scope="module")
def broken(build_dir):
    src = build_dir / "broken.c"
    src.write_text(WRAPPER)

    def make(tag: str, *flags: str) -> Path:
        return _build(build_dir / f"lib{tag}.so", [src], *flags)

    return make


def test_wrapper_unbroken_still_works(broken):
    eng = open_engine(broken("plain"), BookConfig(1, 99))
    assert eng.submit(1, 0, 0, 10, 1).status == Status.ACCEPTED


def test_engine_without_its_own_clock_is_timed_by_the_harness(broken):
    from lob.measure.latency import capture_latency

    wl = lob.workload("cpp_comprehensive", scale=0.001)
    eng = open_engine(broken("untimed", "-DHIDE_TIMED"), wl.config)
    assert isinstance(eng, HarnessForeignEngine) and eng.clock == "harness"
    assert eng.clock_overhead() is None and not hasattr(eng, "replay_timed")
    cap = capture_latency(eng, wl.commands)
    assert cap.method != "engine-clock" and len(cap.durations_ns) == wl.n_timed
    assert cap.replay.checksum == lob.replay("reference", wl).checksum
    timed = capture_latency(lob.get_engine("reference", wl.config), wl.commands)
    assert timed.replay.checksum == cap.replay.checksum


def test_missing_symbol(broken):
    lib = broken("nosnap", "-DHIDE_SNAPSHOT")
    with pytest.raises(ForeignEngineError) as e:
        open_engine(lib)
    assert str(e.value) == (
        f"foreign engine 'libnosnap.so': {lib} does not export lob_snapshot (required by "
        "lob_engine.h: lob_abi_version, lob_struct_size, lob_capabilities, lob_create, "
        "lob_destroy, lob_replay, lob_snapshot); declare them extern \"C\" and not static")


def test_abi_version_mismatch(broken):
    lib = broken("abi", f"-DABI={ABI_VERSION + 1}")
    with pytest.raises(ForeignEngineError) as e:
        open_engine(lib, name="old")
    assert str(e.value) == (
        f"foreign engine 'old': {lib} was built for lob engine ABI version {ABI_VERSION + 1}, "
        f"this lob speaks version {ABI_VERSION}; rebuild it against "
        "lob/engines/foreign/lob_engine.h of this lob (version 2 added lob_capabilities, "
        "lob_create's error message and LOB_UNSUPPORTED)")


def test_struct_size_mismatch(broken):
    lib = broken("size", "-DBAD_STRUCT=1")  # LOB_STRUCT_OUTCOME
    with pytest.raises(ForeignEngineError) as e:
        open_engine(lib, name="unpacked")
    size = EXPECTED_SIZES["lob_outcome"][1]
    assert str(e.value) == (
        f"foreign engine 'unpacked': record layout mismatch in {lib}: lob_outcome is "
        f"{size + 8} bytes in the library, {size} in lob (the records must be packed, in "
        "lob_engine.h's field order: #pragma pack(push, 1))")


@pytest.mark.parametrize("what", ["fills", "outcomes"])
def test_writing_past_a_buffer_is_caught(broken, what):
    eng = open_engine(broken(f"over_{what}", f"-DOVERFLOW_{what.upper()}"), BookConfig(1, 99),
                      name="sloppy")
    with pytest.raises(ForeignEngineError) as e:
        eng.replay(lob.workload("cpp_comprehensive", scale=0.001).commands)
    buf = "fill" if what == "fills" else "outcome"
    assert str(e.value).startswith(
        f"foreign engine 'sloppy' wrote past the end of the {buf} buffer (")
    assert "the guard region after it was overwritten from byte 0 on). The engine is broken" \
        in str(e.value)


def test_refused_config(toml, broken):
    """A config outside the declared capabilities is refused before lob_create, naming
    what; one lob_create refuses itself carries the engine's own message."""
    with pytest.raises(Unsupported) as e:
        lob.get_engine(NAME, BookConfig(1, 10**9))  # wider than its 2**26 levels
    assert str(e.value) == (f"engine {NAME!r} accepts bands up to 67,108,864 prices wide; "
                            "1..1,000,000,000 is 1,000,000,000")
    lax = open_engine(broken("anyband", "-DCAPS_ANY_BAND"), BookConfig(1, 5), name="lax")
    assert lax.max_band_width is None
    with pytest.raises(ForeignEngineError) as e:
        open_engine(lax._lib.path, BookConfig(1, 10**9), name="lax")
    assert str(e.value) == (
        "foreign engine 'lax' refused the book config {'min_price': 1, 'max_price': "
        "1000000000, 'stp': 'NONE'}: band wider than 2^26 prices (this engine keeps an array "
        "of levels over the band) (lob_create returned NULL)")


def test_declared_capabilities_refuse_up_front(broken, tmp_path):
    """An engine declaring less than lob's semantics: configs and command arrays outside
    it are refused before any call, naming what and where; the registry reads the
    declaration without building a book."""
    lib = broken("partial", "-DCAPS_PARTIAL")
    toml = tmp_path / "p.toml"
    toml.write_text(f'name = "partial"\npath = "{lib}"\n')
    (spec,) = foreign_specs(toml)
    caps = spec.factory.capabilities()
    assert caps.stp_modes == {StpMode.NONE} and Kind.MODIFY not in caps.kinds
    assert caps.summary() == ("no stp CANCEL_MAKER, stp CANCEL_TAKER, stp CANCEL_BOTH, MODIFY, "
                              "NOTIONAL, scope OWNER")
    with pytest.raises(Unsupported) as e:
        spec.factory(BookConfig(1, 99, StpMode.CANCEL_MAKER))
    assert str(e.value) == ("engine 'partial' does not support STP mode CANCEL_MAKER (it "
                            "declares: NONE); use a config with stp=NONE or another engine")
    eng = spec.factory(BookConfig(1, 99))
    cmds = lob.semantics.commands([dict(kind=0, otype=0, side=0, owner=1, price=5, qty=2),
                                   dict(kind=2, id=1, qty=0),  # rejected by validation: fine
                                   dict(kind=2, id=1, qty=1)])
    with pytest.raises(Unsupported) as e:
        eng.replay(cmds)
    assert str(e.value) == ("engine 'partial' does not support MODIFY (declared by the engine); "
                            "these commands use them 1 times, first at command 2")
    assert eng.replay(cmds[:2]).outcomes["status"].tolist() == [Status.ACCEPTED,
                                                                 Status.REJECTED]
    with pytest.raises(Unsupported, match="does not support mass cancels of scope OWNER"):
        eng.execute(lob.semantics.commands([dict(kind=3, otype=2, owner=1)])[0])


def test_unsupported_at_run_time_names_the_command(broken):
    """LOB_UNSUPPORTED: the engine stops before a command it cannot execute and says why
    (lob_last_error); lob raises naming the command, not an unknown code."""
    eng = open_engine(broken("noup", "-DREFUSE_MODIFY_UP"), BookConfig(1, 99), name="noup")
    cmds = lob.semantics.commands([dict(kind=0, otype=0, side=0, owner=1, price=5, qty=2),
                                   dict(kind=2, id=1, qty=1),
                                   dict(kind=2, id=1, qty=4)])
    with pytest.raises(Unsupported) as e:
        eng.replay(cmds)
    assert str(e.value) == ("foreign engine 'noup' cannot execute command 2 (MODIFY id=1 qty=4 "
                            "price=0): modify up is not supported (LOB_UNSUPPORTED)")


def test_header_compiles_as_cpp(build_dir):
    """C++ engines include the same header: extern "C", packed records of lob's sizes."""
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("g++ not found")
    src = build_dir / "sizes.cpp"
    src.write_text('#include "lob_engine.h"\n'
                   'static_assert(sizeof(lob_command) == 40 && sizeof(lob_outcome) == 34 &&\n'
                   '              sizeof(lob_fill) == 32, "packed records");\n'
                   'extern "C" uint32_t lob_abi_version(void) { return LOB_ABI_VERSION; }\n')
    r = subprocess.run([cxx, "-std=c++17", "-fsyntax-only", f"-I{HEADER.parent}", str(src)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_broken_env_toml_warns_and_lists_only_the_adapters(tmp_path, monkeypatch):
    from lob.engines import foreign

    monkeypatch.setenv(ENV, str(tmp_path / "missing.toml"))
    from lob.engines.foreign.adapters import unbuilt

    with pytest.warns(RuntimeWarning, match="LOB_ENGINES_TOML ignored: foreign engine list"):
        assert [s.name for s in foreign.ENGINES] == [n for n in ["orderly_chaos"]
                                                      if n not in unbuilt()]


def test_header_and_loader_agree():
    from lob.semantics import MAX_NOTIONAL, MAX_PRICE, MAX_QTY

    text = HEADER.read_text()
    assert f"#define LOB_ABI_VERSION {ABI_VERSION}\n" in text
    for name, v in (("QTY", MAX_QTY), ("NOTIONAL", MAX_NOTIONAL), ("PRICE", MAX_PRICE)):
        assert f"#define LOB_MAX_{name} {v}LL" in text
    for name, (_, size) in EXPECTED_SIZES.items():
        if name != "lob_config":
            assert f"}} {name};" in text and f"{size} bytes" in text, name
    from lob.semantics import Reason

    for prefix, enum in (("LOB_REASON_", Reason), ("LOB_STP_", StpMode), ("LOB_", Status),
                         ("LOB_", OrderType), ("LOB_SCOPE_", Scope), ("LOB_", Kind)):
        for m in enum:  # the header's enums are lob.semantics' values
            assert f"{prefix}{m.name} = {int(m)}" in text, (prefix, m)
    assert ForeignEngine.__doc__


# --- a third-party engine: orderly-chaos 0.2.0 behind lob's shim ------------------------------

OC = "orderly_chaos"


@pytest.fixture(scope="module")
def oc() -> str:
    """The adapter, built from the sdist pip fetches (cached in ~/.cache/lob after the first
    build); no g++ or no package index: skip, saying which."""
    from lob.engines.foreign.adapters import BuildUnavailable, build

    try:
        build(OC)
    except BuildUnavailable as e:
        pytest.skip(f"adapter {OC} not built: {e}")
    return OC


NONE_GROUPS = [g for g in GROUPS if all(stp == StpMode.NONE for _, stp, _ in g)]


@pytest.mark.parametrize("group", NONE_GROUPS,
                         ids=[f"{g[0][0]}-s{g[0][2]}" for g in NONE_GROUPS])
def test_orderly_chaos_takes_the_differential_fuzz(oc, group):
    """test_fuzz's cases within what the engine declares (STP NONE: every profile, the
    bound-value share included), through the very test lob's own engines take."""
    test_fuzz.test_engine_agrees_with_reference(oc, group)


@pytest.mark.parametrize("profile", list(PROFILES))
def test_orderly_chaos_long_fuzz_streams(oc, profile):
    """17,000 commands per profile (STP NONE): outcomes, fills, checksum, final book, every
    resting order with its owner in priority order, orderly-chaos's own invariant check."""
    lo, hi, window, unit, extreme, _ = PROFILES[profile]
    cmds = gen_stream(2000, FUZZ_LEN, lo, hi, window, unit, extreme)
    config = BookConfig(lo, hi)
    ref = lob.get_engine("reference", config)
    r = ref.replay(cmds)
    eng = lob.get_engine(oc, config)
    got = eng.replay(cmds)  # lob_check runs after the replay
    assert_same(f"{oc} ({profile})", cmds, (r.outcomes, r.fills, ref.snapshot(10**6)),
                (got.outcomes, got.fills, eng.snapshot(10**6)))
    assert eng.resting() == ref.resting()
    sub = cmds["otype"][(cmds["kind"] == 0) & (r.outcomes["status"] != Status.REJECTED)]
    assert {int(t) for t in OrderType} <= set(sub.tolist())


def _modify_heavy(seed: int, n: int, lo: int, hi: int) -> np.ndarray:
    """A stream whose cancels and modifies mostly find their order (the fuzz's rarely do
    under STP NONE, where books trade away): modify down, up, to the same values and to
    another price, between submits of every type and mass cancels."""
    rng = np.random.default_rng(seed)
    rows, issued = [], 0
    for _ in range(n):
        u = rng.random()
        if u < 0.5 or issued == 0:
            t = int(rng.choice(6, p=[0.6, 0.08, 0.08, 0.12, 0.06, 0.06]))
            qty = int(rng.integers(1, 9)) if t != 5 else int(rng.integers(1, 8 * hi))
            rows.append(dict(kind=0, otype=t, side=int(rng.integers(0, 2)),
                             owner=int(rng.integers(1, 4)), price=int(rng.integers(lo, hi + 1)),
                             qty=qty))
            issued += 1
        elif u < 0.85:
            rows.append(dict(kind=2, id=issued - int(rng.integers(0, 12)),
                             qty=int(rng.integers(1, 12)),
                             price=0 if rng.random() < 0.5 else int(rng.integers(lo, hi + 1))))
        elif u < 0.97:
            rows.append(dict(kind=1, id=issued - int(rng.integers(0, 12))))
        else:
            scope = int(rng.integers(1, 4))
            p = int(rng.integers(lo, hi + 1))
            rows.append(dict(kind=3, otype=scope, side=int(rng.integers(0, 2)),
                             owner=int(rng.integers(1, 4)), price=p, price_hi=p + 2))
    return lob.semantics.commands(rows)


def test_orderly_chaos_modify_paths(oc):
    """Modify emulated as reduce (keeps priority), cancel + re-add (to the tail) or cancel +
    limit at the new price (may trade): same outcomes, fills and queue order as reference."""
    cmds = _modify_heavy(5, 20_000, 100, 112)
    config = BookConfig(100, 112)
    ref = lob.get_engine("reference", config)
    r = ref.replay(cmds)
    eng = lob.get_engine(oc, config)
    got = eng.replay(cmds)
    assert_same(oc, cmds, (r.outcomes, r.fills, ref.snapshot(100)),
                (got.outcomes, got.fills, eng.snapshot(100)))
    assert eng.resting() == ref.resting()
    mod = r.outcomes[cmds["kind"] == Kind.MODIFY]
    assert (mod["status"] == Status.ACCEPTED).sum() > 1_000  # found and rested
    assert (mod["fills"] > 0).sum() > 100  # re-entries that traded
    assert (r.outcomes["removed"][cmds["kind"] == Kind.MASS_CANCEL] > 0).sum() > 200


def test_orderly_chaos_refuses_what_it_cannot_do(oc):
    """STP modes other than NONE: refused at creation, one line naming why; a workload that
    needs one (the C++ seed's streams run with CANCEL_MAKER) is refused the same way."""
    from lob.engines.registry import engine_capabilities

    caps = engine_capabilities(oc)
    assert caps.stp_modes == {StpMode.NONE} and caps.max_band_width is None
    assert caps.summary() == "no stp CANCEL_MAKER, stp CANCEL_TAKER, stp CANCEL_BOTH"
    for m in list(StpMode)[1:]:
        with pytest.raises(Unsupported) as e:
            lob.get_engine(oc, BookConfig(1, 99, m))
        assert str(e.value) == (f"engine 'orderly_chaos' does not support STP mode {m.name} "
                                "(it declares: NONE); use a config with stp=NONE or another "
                                "engine")
    with pytest.raises(Unsupported, match="does not support STP mode CANCEL_MAKER"):
        lob.replay(oc, lob.workload("cpp_comprehensive", scale=0.001))
    # lob_create says the same itself when asked directly (past lob's own check)
    import ctypes

    from lob.engines.foreign.library import Config, load

    lib = load(lob.engines.foreign.adapters.adapter(oc).library)
    err = ctypes.create_string_buffer(256)
    assert not lib.create(ctypes.byref(Config(1, 99, 1, 0)), err, len(err))
    assert err.value.decode() == ("STP mode CANCEL_MAKER is not supported: orderly-chaos keeps "
                                  "no owners, so it cannot prevent self-trades (only NONE)")


def test_orderly_chaos_seed_streams_under_stp_none(oc):
    """The C++ seed's comprehensive stream (its config's STP set to NONE, which the engine
    declares) and the lobster replay: same outcomes, fills and checksum as reference;
    lob.replay and lob.bench take it by name."""
    import dataclasses

    wl = lob.workload("cpp_comprehensive", scale=0.05)
    wl = dataclasses.replace(wl, config=BookConfig(wl.config.min_price, wl.config.max_price))
    ref = lob.replay("reference", wl)
    run = lob.replay(oc, wl)
    assert run.checksum == ref.checksum and run.counters == ref.counters
    lo = lob.workload("lobster_replay", scale=0.01)
    assert lob.replay(oc, lo).checksum == lob.replay("reference", lo).checksum
    res = lob.bench(oc, lo, repeat=1)
    assert res is not None


@pytest.mark.ci  # CI runs it after `make test` (make test-ci)
def test_orderly_chaos_full_cpp_stream_under_stp_none(oc, toml):
    """The C++ seed's full 2,000,000-command stream with STP NONE: orderly_chaos agrees with
    the example C engine (itself checked against reference above) fill for fill."""
    from lob.studies.engines_beside import declared_workload

    wl, note = declared_workload(oc, lob.workload("cpp_comprehensive"))
    assert wl.config.stp == StpMode.NONE and "CANCEL_MAKER -> NONE" in note
    a, b = lob.replay(oc, wl), lob.replay(NAME, wl)
    assert a.checksum == b.checksum and a.counters == b.counters
    assert a.counters != lob.replay(NAME, lob.workload("cpp_comprehensive")).counters


def test_measure_beside_runs_interleaved(oc):
    """studies.engines_beside: every engine on every workload in each round, ratios with
    intervals, per-type medians, the shim's counters, the STP change stated."""
    from lob.studies.engines_beside import measure_beside, report

    r = measure_beside(oc, ("c_book",), ("cpp_comprehensive", "lobster_replay"),
                       scale=0.002, rounds=5)
    assert r["notes"] == ["cpp_comprehensive: STP CANCEL_MAKER -> NONE for every engine "
                          "(orderly_chaos declares NONE only)"]
    for w in r["workloads"].values():
        for e in (oc, "c_book"):
            assert len(w["engines"][e]["ns_per_op"]["all"]) == 5
            assert 0 < w["engines"][e]["p50"]["median"] <= w["engines"][e]["p99"]["median"]
        ratio = w["ratios"]["c_book"]["p50"]
        assert ratio["n"] == 5 and ratio["ci"] is not None
        # the A/A control: the engine measured twice per round, each call made against it
        assert w["aa"]["p50"]["n"] == 5 and w["aa"]["p50"]["low"] <= 1 <= w["aa"]["p50"]["high"]
        assert ratio["call"] in ("faster", "slower", "within noise", "inconclusive")
        assert f"{oc} (A/A)" not in w["engines"]
        assert w["per_type"][oc]["LIMIT"]["n"] > 0
        assert w["shim_stats"]["walks"] >= 0
    assert r["workloads"]["cpp_comprehensive"]["shim_stats"]["walks"] > 0  # IOC/FOK emulated
    assert "| orderly_chaos / other |" in report(r)


def test_lob_engines_lists_band_and_gaps_from_the_declaration(oc, toml):
    """`lob engines`: the band column and what an engine lacks come from lob_capabilities
    (no book is built for a foreign engine); `lob engines build` builds adapters."""
    from lob.cli import main
    from lob.cli.engines import engines_table

    rows = {r.split()[0]: r for r in engines_table()[1:-1]}
    assert " any " in rows[OC] and rows[OC].endswith(
        "[from orderly-chaos 0.2.0 (adapter)] [no stp CANCEL_MAKER, stp CANCEL_TAKER, "
        "stp CANCEL_BOTH]")
    assert "<=67.1M ticks" in rows[NAME] and "[no " not in rows[NAME]
    assert main(["engines", "build", OC]) == 0


def test_shim_cost_against_native_calls(oc):
    """studies.engines_beside.shim_cost: the same LIMIT / MARKET / CANCEL stream through lob's
    ABI and straight into orderly-chaos's C API trades alike; per-type ratios with intervals."""
    from lob.studies.engines_beside import shim_cost, shim_cost_report

    r = shim_cost(oc, "lobster_replay", scale=0.005, rounds=5)
    assert r["same_book"] and r["trades"]["shim"] > 0
    assert {"LIMIT", "CANCEL", "all native"} <= set(r["types"])
    for row in r["types"].values():
        assert row["work"]["shim"] > 0 and row["work"]["native"] > 0
        assert row["work"]["ratio"]["ci"] is not None
    assert "| all native |" in shim_cost_report(r)


def test_orderly_chaos_build_is_cached_and_keeps_the_licence(oc):
    from lob.engines.foreign.adapters import adapter, build

    a = adapter(oc)
    assert build(oc) == a.library and a.library.is_file()
    lic = (a.build_dir / "licenses" / "LICENSE").read_text()
    assert "MIT License" in lic and "Meet Mendapara" in lic
    assert (a.build_dir / "licenses" / "THIRD_PARTY_NOTICES.md").is_file()
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if tracked.returncode == 0:  # nothing of orderly-chaos is in the repository
        assert not [f for f in tracked.stdout.split() if "limit_order_book" in f or
                    f.endswith("orderly_chaos.h")]


@pytest.mark.ci  # CI runs it after `make test` (make test-ci): a pip build that must fail
def test_adapter_build_without_compiler_or_index_says_so(tmp_path, monkeypatch, capsys):
    """One clear line, never a failure deep inside: no compiler, no package index."""
    from lob.cli import main
    from lob.engines.foreign.adapters import BuildUnavailable, build

    monkeypatch.setenv("LOB_CACHE", str(tmp_path))
    monkeypatch.setenv("CXX", "no-such-compiler-xyz")
    with pytest.raises(BuildUnavailable) as e:
        build(OC)
    assert str(e.value) == "no C++ compiler: 'no-such-compiler-xyz' not found (install g++ or " \
                           "set CXX)"
    assert main(["engines", "build", OC]) == 2
    assert capsys.readouterr().err == ("orderly_chaos: skipped: no C++ compiler: "
                                       "'no-such-compiler-xyz' not found (install g++ or set "
                                       "CXX)\n")
    if shutil.which("g++") is None:
        return
    monkeypatch.delenv("CXX")
    for k, v in {"PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_RETRIES": "0",
                 "PIP_TIMEOUT": "2", "PIP_FIND_LINKS": "", "PIP_NO_CACHE_DIR": "1"}.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(BuildUnavailable) as e:
        build(OC)
    assert str(e.value).startswith("cannot fetch orderly-chaos==0.2.0: pip could not download "
                                   "it (offline or no package index?): ERROR: ")
    assert "\n" not in str(e.value) and "put the pinned sdist" in str(e.value)
    hint = ("engine 'orderly_chaos' is not built yet: run `lob engines build orderly_chaos` "
            "(fetches orderly-chaos 0.2.0 from PyPI with pip and compiles lob's shim with g++)")
    from lob.engines import registry

    try:  # the registry follows $LOB_CACHE: not built in this one, so not registered, and
        # the name says how to build it
        assert OC not in lob.engine_names()
        with pytest.raises(ValueError) as e:
            lob.get_engine(OC)
        assert str(e.value) == hint
        from lob.cli.engines import engines_table

        assert ("not built yet (third-party engines behind a shim): orderly_chaos; build with "
                "`lob engines build NAME`") in engines_table()
        from lob.engines.foreign.adapters import ADAPTERS

        lib = ADAPTERS[OC].library  # built here after all (a stand-in file, never loaded) ...
        lib.parent.mkdir(parents=True, exist_ok=True)
        lib.write_bytes(b"")
        registry.engine_spec(OC)  # a lookup of an adapter built since collecting collects again
        assert OC in lob.engine_names()
        lib.unlink()  # ... and gone again once registered: the same one line
        with pytest.raises(ForeignEngineError) as e:
            lob.get_engine(OC)
        assert str(e.value) == hint
    finally:
        monkeypatch.undo()
        registry.refresh()
    assert OC in lob.engine_names()


# --- the studies, by name, in a fresh process (a notebook's kernel is one) ----------------------

_STUDY = {
    "tail_analysis": (
        "from lob.studies import tail_analysis as ta; "
        "v = ta.measure_versions([name], ['add_only', 'mixed_70_20_10'], 0.001, 1, False, out); "
        "print(json.dumps(v['rows']))"),
    "fok_scan_bottleneck": (
        "import lob; from lob.studies import fok_scan_bottleneck as fs; "
        "wl = lob.workload('cpp_comprehensive', scale=0.002); "
        "c = fs.measure_comprehensive(['v0', 'v1', 'v2', name], wl, 1, 'v2'); "
        "lat = fs.measure_latency([name], wl, out); "
        "print(json.dumps([{'engine': e, 'ns': n} for e, n in c['ns_op'].items()] "
        "+ lat['rows']))"),
}


@pytest.mark.slow
@pytest.mark.parametrize("study", sorted(_STUDY))
def test_studies_run_the_engine_by_name(toml, study, tmp_path):
    """A fresh interpreter, as a notebook's kernel is, finds the TOML engine through
    $LOB_ENGINES_TOML and the study measures it like lob's own (the notebooks themselves run
    once, under nbval, with their default engines)."""
    code = f"import json, sys; name, out = sys.argv[1], sys.argv[2]; {_STUDY[study]}"
    env = dict(os.environ, **{ENV: str(toml)})
    r = subprocess.run([sys.executable, "-c", code, NAME, str(tmp_path)], env=env,
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = json.loads(r.stdout.strip().splitlines()[-1])
    assert any(NAME in map(str, x.values()) for x in rows), "C engine missing from the rows"
    assert list(tmp_path.glob(f"{NAME}*.hgrm")), "no latency histogram of the C engine"


# --- the figure (a benchmark, not a test: `make bench` runs it) ------------------------------

@pytest.mark.bench
def test_bench_c_engine_beside_v2_numba(toml):
    """ns/op of the example C engine and v2@numba on the full C++ comprehensive stream: replay
    time inside the library / kernel calls, min and median of 5 rounds interleaved across
    the two engines, same process; writes artifacts/bench/foreign/report.json."""
    from lob.measure.conditions import run_conditions

    wl = lob.workload("cpp_comprehensive")
    names = [NAME, "v2@numba"]
    sums = {lob.get_engine(n, wl.config).replay(wl.commands).checksum for n in names}  # warm
    assert len(sums) == 1, "the engines disagree on the full stream"
    runs = {n: [] for n in names}
    for _ in range(5):
        for n in names:
            runs[n].append(lob.get_engine(n, wl.config).replay(wl.commands).elapsed_ns
                           / len(wl.commands))
    rows = {n: {"min": min(v), "median": float(np.median(v)), "all": [round(x, 1) for x in v]}
            for n, v in runs.items()}
    lat = {}
    for n in names:
        _, d = lob.get_engine(n, wl.config).replay_timed(wl.commands)
        lat[n] = {f"p{q:g}": float(np.percentile(d, q)) for q in (50, 99, 99.9)}
    report = {"workload": "cpp_comprehensive", "commands": len(wl.commands), "ns_per_op": rows,
              "ratio_min": rows["v2@numba"]["min"] / rows[NAME]["min"],
              "ratio_median": rows["v2@numba"]["median"] / rows[NAME]["median"],
              "engine_clock_latency_ns": lat, "conditions": run_conditions()}
    out = ROOT / "artifacts" / "bench" / "foreign"
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report, indent=1, default=str))
    c = report["conditions"]
    print(f"\ncpp_comprehensive, {len(wl.commands):,} commands, 5 interleaved rounds")
    for n, r in rows.items():
        print(f"  {n:12s} min {r['min']:6.1f}  median {r['median']:6.1f} ns/op  {r['all']}"
              f"  latency {lat[n]}")
    print(f"  v2@numba / {NAME}: {report['ratio_min']:.2f}x (min), "
          f"{report['ratio_median']:.2f}x (median)")
    print(f"  {c['cpu_model']}, {c['cpu_count']} cpus, load {c['load_avg']}")


PIP_BUILD_DEPS_OFFLINE = """\
  error: subprocess-exited-with-error

  x pip subprocess to install build dependencies did not run successfully.
  | exit code: 1
  +-> [3 lines of output]
      Looking in links: /tmp/fl
      ERROR: Could not find a version that satisfies the requirement setuptools>=77 (from versions: none)
      ERROR: No matching distribution found for setuptools>=77
      [end of output]

  note: This error originates from a subprocess, and is likely not a problem with pip.
error: subprocess-exited-with-error

note: This error originates from a subprocess, and is likely not a problem with pip.
"""  # noqa: E501  (what pip printed here, reaching the sdist but not its build backend)


def test_an_offline_build_names_the_missing_build_dependency_and_the_workaround(
        tmp_path, monkeypatch):
    """Issue 44: not pip's boilerplate, but its cause, and that the pinned sdist placed in the
    cache makes the build work offline."""
    from lob.engines.foreign import adapters as A

    monkeypatch.setenv("LOB_CACHE", str(tmp_path))
    monkeypatch.setattr(A.subprocess, "run", lambda cmd, **kw: subprocess.CompletedProcess(
        cmd, 1, "", PIP_BUILD_DEPS_OFFLINE))
    with pytest.raises(A.BuildUnavailable) as e:
        A._sdist(A.adapter(OC), lambda m: None)
    msg = str(e.value)
    assert "\n" not in msg and "originates from a subprocess" not in msg
    assert msg.startswith("cannot fetch orderly-chaos==0.2.0: pip reached the sdist but could "
                          "not get its build dependency setuptools>=77 (offline, or no "
                          "package index holds it)")
    assert (f"put the pinned sdist orderly_chaos-0.2.0.tar.gz (sha256 "
            f"{A.adapter(OC).sha256}) into {tmp_path / 'sdists'}") in msg

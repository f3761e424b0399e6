"""Foreign engines that misbehave (issue 26): each misbehaviour ends in one clear message that
names the engine (and the command), never a hang, a mute crash, a silent wrong answer or an
out-of-memory kill.

The hostile engines are lob's example C engine (examples/c_engine) with a wrapper around its
replay calls that breaks one thing, chosen by a -D flag. A crash, a hang or Ctrl-C is tried in
a child process, so this test process never runs a broken engine's endless loop or fault.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

import lob
from lob.engines import registry
from lob.engines.foreign import ENV, ForeignEngineError, open_engine
from lob.engines.foreign.engine import command_text
from lob.engines.foreign.library import HEADER

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "c_engine"

HOSTILE = r"""
#define lob_replay real_replay
#define lob_replay_timed real_replay_timed
#define lob_create real_create
#define lob_destroy real_destroy
#define lob_last_error real_last_error
#include "lob_book.c"
#undef lob_replay
#undef lob_replay_timed
#undef lob_create
#undef lob_destroy
#undef lob_last_error
#include <stdlib.h>
#include <string.h>

lob_book *lob_create(const lob_config *cfg, char *err, int64_t err_cap) {
#ifdef CREATE_OVERFLOW /* 100 bytes past the message buffer: inside its guard */
    memset(err, 'x', (size_t)err_cap + 100);
#endif
#ifdef CREATE_FAR_OVERFLOW /* 8 KiB past it: beyond the guard */
    memset(err, 'x', (size_t)err_cap + 8192);
#endif
    return real_create(cfg, err, err_cap);
}

void lob_destroy(lob_book *b) {
#ifdef DESTROY_SEGV
    *(volatile int *)(uintptr_t)16 = 1;
#endif
    real_destroy(b);
}

int64_t lob_last_error(const lob_book *b, char *msg, int64_t cap) {
#ifdef LASTERR_OVERFLOW
    (void)b;
    memset(msg, 'y', (size_t)cap + 100);
    return cap + 100;
#else
    return real_last_error(b, msg, cap);
#endif
}

static void misbehave(lob_fill *f, int64_t cap, lob_outcome *o, int64_t *done, int64_t *nf) {
    (void)f; (void)cap; (void)o; (void)done; (void)nf;
#ifdef BAD_STATUS
    if (*done > 3) o[3].status = 42;
#endif
#ifdef BAD_COUNT
    if (*done > 3) o[3].fills += 1;
#endif
#ifdef NEG_QTY
    if (*nf > 0) f[0].qty = -5;
#endif
#ifdef BAD_ID
    if (*nf > 0) f[0].maker = -7;
#endif
#ifdef FAR_OVERFLOW /* 6.4 KB past the end of the fills: beyond a 4 KiB canary */
    memset(&f[cap + 200], 0x11, 4096);
#endif
#ifdef SEGV
    *(volatile int *)(uintptr_t)16 = 1; /* an unmapped page (not NULL: gcc drops that) */
#endif
#ifdef ABORT
    abort();
#endif
#ifdef EXIT3
    exit(3);
#endif
#ifdef LASTERR_OVERFLOW
    *done = 0;
#endif
#ifdef LOOP
    volatile int forever = 1;
    while (forever) {}
#endif
}

int32_t lob_replay(lob_book *b, const lob_command *c, int64_t n, lob_outcome *o, lob_fill *f,
                   int64_t cap, int64_t *done, int64_t *nf) {
#ifdef NEED_SPACE /* asks for more room forever, never making progress */
    (void)b; (void)c; (void)n; (void)o; (void)f; (void)cap;
    *done = 0; *nf = 0;
    return LOB_NEED_FILL_SPACE;
#endif
    int32_t rc = real_replay(b, c, n, o, f, cap, done, nf);
    misbehave(f, cap, o, done, nf);
#ifdef LASTERR_OVERFLOW
    *nf = 0;
    return LOB_ERR_ENGINE;
#endif
    return rc;
}

int32_t lob_replay_timed(lob_book *b, const lob_command *c, int64_t n, lob_outcome *o,
                         lob_fill *f, int64_t cap, int64_t *done, int64_t *nf, int64_t *ns) {
    int32_t rc = real_replay_timed(b, c, n, o, f, cap, done, nf, ns);
    misbehave(f, cap, o, done, nf);
#ifdef LASTERR_OVERFLOW
    *nf = 0;
    return LOB_ERR_ENGINE;
#endif
    return rc;
}
"""


def _gcc() -> str:
    import shutil

    cc = shutil.which("gcc")
    if cc is None:
        pytest.skip("gcc not found: the hostile C engines cannot be built")
    return cc


def _compile(out: Path, *flags: str) -> Path:
    src = out.parent / "hostile.c"
    src.write_text(HOSTILE)
    cmd = [_gcc(), "-O1", "-std=c11", "-fwrapv", "-fPIC", "-shared", f"-I{HEADER.parent}",
           f"-I{EXAMPLE}", *flags, str(src), "-o", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    d = tmp_path_factory.mktemp("hostile")
    made: dict[str, Path] = {}

    def make(flag: str) -> Path:
        if flag not in made:
            made[flag] = _compile(d / f"lib{flag.lower()}.so", f"-D{flag}" if flag else "-DX")
        return made[flag]

    return make


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LOB_CACHE", str(tmp_path / "cache"))


def _toml(tmp_path: Path, name: str, lib: Path) -> Path:
    t = tmp_path / f"{name}.toml"
    t.write_text(f'name = "{name}"\npath = "{lib}"\n')
    return t


WL = lob.workload("cpp_comprehensive", scale=0.001)
FIRST, FOURTH = command_text(WL.commands[0]), command_text(WL.commands[3])


# Ctrl-C as at a terminal: a test run started from a background shell (`make test &`)
# hands its children SIGINT ignored, and Python keeps an inherited SIG_IGN
_SIGINT = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n"


def _child(code: str, env: dict | None = None, timeout: float = 60, **kw):
    """Run python ``code`` in a child with this checkout's lob; returns the Popen."""
    e = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.Popen([sys.executable, "-c", _SIGINT + textwrap.dedent(code)], env=e,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def _bench(tmp_path, lib: Path, name: str = "hostile", tmp: Path | None = None,
           **kw) -> subprocess.Popen:
    env = {ENV: str(_toml(tmp_path, name, lib)), "LOB_CACHE": str(tmp_path / "cache"),
           **({"TMPDIR": str(tmp)} if tmp else {})}
    code = f"""
        import sys
        from lob.cli import main
        sys.exit(main(["bench", "--engine", "{name}", "--workload", "cpp_comprehensive",
                       "--scale", "0.001", "--repeat", "1", "--no-progress",
                       "--out", "{tmp_path / 'out'}"]))
    """
    return _child(code, env, **kw)


# --- 7: a library rebuilt in place is reloaded ------------------------------------------------

def test_a_library_rebuilt_in_place_runs_its_new_code(hostile, tmp_path):
    lib = tmp_path / "libsame.so"
    _compile(lib, "-DX")
    assert open_engine(lib, WL.config, "same").replay(WL.commands).checksum == \
        lob.replay("reference", WL).checksum
    _compile(lib, "-DBAD_STATUS")  # gcc rewrites the same file (same inode)
    with pytest.raises(ForeignEngineError, match="status 42"):
        open_engine(lib, WL.config, "same").replay(WL.commands)


# --- 8: outputs are checked before anything is kept --------------------------------------------

@pytest.mark.parametrize("flag,what", [
    ("BAD_STATUS", f"command 3 ({FOURTH}): status 42 is not a lob Status (0..5)"),
    ("BAD_COUNT", "its outcomes count"),
    ("NEG_QTY", "a fill of qty -5"),
    ("BAD_ID", "a fill with maker id -7"),
])
def test_impossible_outputs_are_refused_naming_engine_and_command(hostile, flag, what):
    eng = open_engine(hostile(flag), WL.config, "liar")
    with pytest.raises(ForeignEngineError) as e:
        eng.replay(WL.commands)
    msg = str(e.value)
    assert msg.startswith("foreign engine 'liar' returned an impossible result for command")
    assert what in msg and msg.endswith("nothing of this replay is kept") and "\n" not in msg


def test_a_sound_engine_passes_every_check(hostile):
    eng = open_engine(hostile(""), WL.config, "sound")
    res = eng.replay(WL.commands)
    assert res.checksum == lob.replay("reference", WL).checksum and len(res.fills) > 0


# --- 9: run id and summary name the library ---------------------------------------------------

def test_run_id_and_summary_change_with_the_library(hostile, tmp_path, monkeypatch):
    from lob.experiments.job import RunRecord, _write_summary
    from lob.experiments.runner import plan

    lib = tmp_path / "libv.so"
    _compile(lib, "-DX")
    monkeypatch.setenv(ENV, str(_toml(tmp_path, "rebuilt", lib)))
    registry.refresh()
    try:
        (job1,) = plan(["fok_scan_bottleneck"], "quick", {"counters_engine": "rebuilt"},
                       tmp_path / "art")
        _compile(lib, "-DBAD_STATUS")
        (job2,) = plan(["fok_scan_bottleneck"], "quick", {"counters_engine": "rebuilt"},
                       tmp_path / "art")
        assert job1.run_id != job2.run_id  # the rerun is not skipped as "already complete"
        out = tmp_path / "run"
        out.mkdir()
        rec = RunRecord(experiment=job2.experiment, run_id=job2.run_id, preset="quick",
                        params=job2.params, status="complete", run_dir=str(out))
        _write_summary(job2, rec, out)
        import hashlib
        import json

        s = json.loads((out / "summary.json").read_text())
        assert s["run"]["foreign_libraries"] == {"rebuilt": {
            "path": str(lib.resolve()), "sha256": hashlib.sha256(lib.read_bytes()).hexdigest()}}
        (plain,) = plan(["fok_scan_bottleneck"], "quick", {}, tmp_path / "art")
        assert "foreign_libraries" not in plain.params
    finally:
        monkeypatch.delenv(ENV)
        registry.refresh()


# --- 10: a name clash between sources is refused naming both ---------------------------------

def test_a_toml_engine_named_reference_does_not_break_lob(hostile, tmp_path, monkeypatch):
    monkeypatch.setenv(ENV, str(_toml(tmp_path, "reference", hostile(""))))
    try:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            names = registry.refresh()
        assert "reference" in names and "v2" in names
        assert registry.engine_spec("reference").source == "lob"
        msgs = [str(x.message) for x in w]
        assert "engine 'reference' from reference.toml (foreign) is not registered: lob's own " \
               "engine has that name; rename it there" in msgs
    finally:
        monkeypatch.delenv(ENV)
        registry.refresh()


def test_a_toml_engine_and_a_package_engine_of_one_name_are_both_refused(hostile, tmp_path,
                                                                         monkeypatch):
    from lob.engines.base import EngineSpec

    class Dist:
        name = "enginepkg"

    class EP:
        name, value, dist = "dup", "enginepkg:ENGINES", Dist()

        def load(self):
            return [EngineSpec("dup", lambda config=None: None, "the package's dup")]

    monkeypatch.setattr(registry, "entry_points", lambda group: [EP()])
    monkeypatch.setenv(ENV, str(_toml(tmp_path, "dup", hostile(""))))
    try:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            names = registry.refresh()
        assert "dup" not in names and "reference" in names
        msg = ("engine 'dup' is defined twice, by dup.toml (foreign) and by enginepkg "
               "(enginepkg:ENGINES); neither is registered: rename one of them")
        assert msg in [str(x.message) for x in w]
        with pytest.raises(ValueError) as e:
            lob.get_engine("dup")
        assert str(e.value) == msg
    finally:
        monkeypatch.undo()
        registry.refresh()


# --- 12: a hang is bounded, Ctrl-C is honoured ------------------------------------------------

def test_an_endless_engine_call_times_out(hostile):
    p = _child(f"""
        import lob
        from lob.engines.foreign import open_engine
        wl = lob.workload("cpp_comprehensive", scale=0.001)
        open_engine({str(hostile("LOOP"))!r}, wl.config, "spinner").replay(wl.commands)
    """, {"LOB_FOREIGN_TIMEOUT_S": "1"})
    try:
        out, err = p.communicate(timeout=60)
    finally:
        p.kill()
    assert p.returncode == 124, err
    assert err.strip().splitlines() == [
        f"lob: foreign engine 'spinner' did not return from lob_replay (commands 0.. of this "
        f"call: {FIRST}) within 1 s ($LOB_FOREIGN_TIMEOUT_S); a C call cannot be stopped, so "
        f"the process was ended"]


def _wait_inside_the_engine(tmp: Path, p: subprocess.Popen, deadline_s: float = 120) -> None:
    """Wait until the child of ``lob bench`` is inside the engine's ``lob_replay*``: its crash
    marker (under ``tmp``, the child's TMPDIR) says so. A fixed sleep raced the imports and the
    workload on a loaded machine."""
    from lob.engines.foreign import crash

    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        assert p.poll() is None, p.communicate()[1]
        for marker in tmp.glob("lob-crash-*/marker"):
            info = crash.read(marker)
            if info is not None and info["state"] == crash.IN_CALL \
                    and info["call"].startswith("lob_replay"):
                time.sleep(0.2)  # well inside the spin
                return
        time.sleep(0.05)
    raise AssertionError(f"the engine's lob_replay was not reached in {deadline_s} s")


@pytest.mark.ci  # make test-ci: a SIGINT after a wait
def test_ctrl_c_stops_lob_bench_inside_an_endless_engine(hostile, tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    p = _bench(tmp_path, hostile("LOOP"), start_new_session=True, tmp=tmp)
    try:
        _wait_inside_the_engine(tmp, p)
        os.killpg(p.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
        out, err = p.communicate(timeout=30)
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert p.returncode == 130, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "lob: interrupted: foreign engine 'hostile' did not return from lob_replay"), err
    assert lines[0].endswith("within 2 s of Ctrl-C; a C call cannot be stopped, so the process "
                             "was ended")


def test_ctrl_c_during_a_sound_call_is_an_ordinary_keyboard_interrupt(hostile):
    """The watchdog ends the process only for a call that does not return: a Ctrl-C that
    lands in a call which returns is Python's KeyboardInterrupt, the process goes on."""
    p = _child(f"""
        import os, signal, threading
        import lob
        from lob.engines.foreign import open_engine
        wl = lob.workload("cpp_comprehensive", scale=0.2)
        eng = open_engine({str(hostile(""))!r}, wl.config, "sound")
        threading.Timer(0.02, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        try:
            for _ in range(50):
                eng = open_engine({str(hostile(""))!r}, wl.config, "sound")
                eng.replay(wl.commands)
            print("no interrupt")
        except KeyboardInterrupt:
            print("KeyboardInterrupt, still alive")
    """)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert out.strip() == "KeyboardInterrupt, still alive"


# --- 13: bounded fill space -------------------------------------------------------------------

def test_endless_requests_for_fill_space_are_refused(hostile):
    # in a child with 6 GiB of address space: the old code's doubling to 64 GiB must not
    # take the machine down when this test is run against it
    p = _child(f"""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))
        import lob
        from lob.engines.foreign import open_engine
        wl = lob.workload("cpp_comprehensive", scale=0.001)
        open_engine({str(hostile("NEED_SPACE"))!r}, wl.config, "greedy").replay(wl.commands)
    """)
    out, err = p.communicate(timeout=120)
    last = err.strip().splitlines()[-1]
    assert last.startswith("lob.engines.foreign.library.ForeignEngineError: foreign engine "
                           f"'greedy' asked for more fill space (LOB_NEED_FILL_SPACE) before "
                           f"command 0 ({FIRST}) with room for 1024 fills"), err[-2000:]
    assert "more than the 0 orders that can rest on its book" in last


# --- 14 and 18: crashes and far writes are named ---------------------------------------------

@pytest.mark.parametrize("flag,how", [("SEGV", "SIGSEGV (segmentation fault)"),
                                      ("ABORT", "SIGABRT (Aborted)"),
                                      ("EXIT3", "exit status 3"),
                                      ("FAR_OVERFLOW", "SIGSEGV (segmentation fault)")])
def test_lob_bench_names_the_engine_that_crashed(hostile, tmp_path, flag, how):
    p = _bench(tmp_path, hostile(flag))
    out, err = p.communicate(timeout=120)
    assert p.returncode == 1, (p.returncode, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"lob: foreign engine 'hostile' crashed the process ({how}) "
                               f"inside lob_replay_timed at command 0 (a call of "), err
    assert lines[0].endswith(f"there): {FIRST}. The engine is broken, not lob; no result of "
                             f"this run was kept") and not list(tmp_path.glob("out/*.json"))


def test_lob_bench_prints_one_line_for_a_misbehaving_engine(hostile, tmp_path):
    p = _bench(tmp_path, hostile("BAD_STATUS"))
    out, err = p.communicate(timeout=120)
    assert p.returncode == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    assert lines[0].startswith("lob bench: error: foreign engine 'hostile' returned an "
                               f"impossible result for command 3 ({FOURTH}): status 42")


def test_a_dead_kernel_is_explained_by_the_crash_marker(hostile, tmp_path, monkeypatch):
    from lob.engines.foreign import crash
    from lob.experiments.job import describe_error

    monkeypatch.setenv(crash.ENV, "")  # restored (unset) after the test
    path = crash.arm(tmp_path)  # what the runner does before starting a notebook's kernel
    p = _child(f"""
        import lob
        from lob.engines.foreign import open_engine
        wl = lob.workload("cpp_comprehensive", scale=0.001)
        open_engine({str(hostile("SEGV"))!r}, wl.config, "crashy").replay(wl.commands)
    """)
    p.communicate(timeout=120)
    assert p.returncode == -signal.SIGSEGV

    class DeadKernelError(RuntimeError):  # papermill's, when the kernel process is gone
        pass

    text, _ = describe_error(DeadKernelError("Kernel died"))
    assert text.startswith("ForeignEngineCrash: foreign engine 'crashy' crashed the process "
                           "(Segmentation fault; DeadKernelError) inside lob_replay at command "
                           "0 (a call of"), text
    assert crash.read(path)["engine"] == "crashy"
    text, _ = describe_error(ValueError("an error of the notebook"))  # not a dead kernel
    assert text == "ValueError: an error of the notebook"


def test_output_buffers_are_fenced(hostile):
    """The pages after a buffer's 4 KiB canary cannot be written: a far write faults at once
    (and is then named, above) instead of landing in other memory."""
    from lob.engines.foreign.library import FENCE_BYTES, GuardedArray
    from lob.semantics import FILL_DTYPE

    g = GuardedArray(FILL_DTYPE, 10)
    end = g.addr + 10 * FILL_DTYPE.itemsize + 4096
    assert end % 4096 == 0 and FENCE_BYTES >= 1 << 20
    p = _child("""
        import ctypes
        from lob.engines.foreign.library import GuardedArray
        from lob.semantics import FILL_DTYPE
        g = GuardedArray(FILL_DTYPE, 10)
        ctypes.memset(g.addr + 10 * FILL_DTYPE.itemsize + 4096, 0, 1)
        print("wrote")
    """)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == -signal.SIGSEGV and "wrote" not in out
    g.raw[:] = 0  # the region itself stays usable
    assert np.all(g.arr["qty"] == 0)


def test_run_conditions_unchanged_for_sound_engines(hostile):
    """The watchdog thread and the checks keep results exact: replay, replay_timed and the
    per-command path of a sound engine agree with reference."""
    eng = open_engine(hostile(""), WL.config, "sound")
    ref = lob.replay("reference", WL)
    res, durs = eng.replay_timed(WL.commands)
    assert res.checksum == ref.checksum and len(durs) == WL.n_timed
    one = open_engine(hostile(""), WL.config, "sound")
    for row in WL.commands[:500]:
        one.step(*(row[f] for f in ("kind", "otype", "side", "owner", "price", "qty", "id",
                                    "price_hi")))
    assert len(one.fills) and np.array_equal(one.fills, ref.fills[: len(one.fills)])


def test_the_watchdog_can_be_turned_off_for_a_measurement(hostile, monkeypatch):
    monkeypatch.setenv("LOB_FOREIGN_TIMEOUT_S", "0")
    eng = open_engine(hostile(""), WL.config, "direct")
    assert eng.timeout is None
    assert eng.replay(WL.commands).checksum == lob.replay("reference", WL).checksum
    monkeypatch.setenv("LOB_FOREIGN_TIMEOUT_S", "-1")
    with pytest.raises(ValueError, match=r"LOB_FOREIGN_TIMEOUT_S must be >= 0 \(0: no watchdog"):
        open_engine(hostile(""), WL.config, "direct")


def test_a_kernel_ended_by_the_watchdog_is_explained(hostile, tmp_path, monkeypatch):
    from lob.engines.foreign import crash
    from lob.experiments.job import describe_error

    monkeypatch.setenv(crash.ENV, "")
    crash.arm(tmp_path)
    p = _child(f"""
        import lob
        from lob.engines.foreign import open_engine
        wl = lob.workload("cpp_comprehensive", scale=0.001)
        open_engine({str(hostile("LOOP"))!r}, wl.config, "spinner").replay(wl.commands)
    """, {"LOB_FOREIGN_TIMEOUT_S": "1"})
    p.communicate(timeout=60)
    assert p.returncode == 124

    class DeadKernelError(RuntimeError):
        pass

    text, _ = describe_error(DeadKernelError("Kernel died"))
    assert text.startswith("ForeignEngineCrash: foreign engine 'spinner' did not return "
                           "within its timeout ($LOB_FOREIGN_TIMEOUT_S) from lob_replay at "
                           "command 0"), text


# --- issue 44: the ABI's message buffers are guarded -------------------------------------------

def test_an_overrun_message_buffer_is_refused_not_a_silent_corruption(hostile):
    with pytest.raises(ForeignEngineError, match="'over' wrote past the end of the "
                                                 "lob_create message buffer"):
        open_engine(hostile("CREATE_OVERFLOW"), WL.config, "over")
    eng = open_engine(hostile("LASTERR_OVERFLOW"), WL.config, "over")
    with pytest.raises(ForeignEngineError, match="lob_last_error message buffer"):
        eng.replay(WL.commands)


@pytest.mark.parametrize("flag,call", [("CREATE_FAR_OVERFLOW", "lob_create"),
                                       ("DESTROY_SEGV", "lob_destroy")])
def test_lob_bench_names_a_crash_in_any_library_call(hostile, tmp_path, flag, call):
    """A write far past a message buffer meets the fence (SIGSEGV inside lob_create); a crash
    in lob_destroy is named too: one line and exit code 1, never 139 or 245."""
    p = _bench(tmp_path, hostile(flag))
    out, err = p.communicate(timeout=120)
    assert p.returncode == 1, (p.returncode, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("lob: foreign engine 'hostile' crashed the process (SIGSEGV "
                               f"(segmentation fault)) inside {call}"), err


def test_a_child_killed_outside_any_marked_call_is_said_in_one_line(monkeypatch, capsys):
    from lob.engines.foreign import crash

    real = subprocess.Popen  # a child that dies of SIGSEGV before any foreign call
    monkeypatch.setattr(crash.subprocess, "Popen", lambda argv, env: real(
        ["/bin/sh", "-c", "kill -SEGV $$"], env=env))
    assert crash.run_child(["bench"]) == 1
    assert "died of SIGSEGV (segmentation fault) outside any foreign engine call" in \
        capsys.readouterr().err


# --- issue 44: library identity is the bytes that ran --------------------------------------------

def _sha(path: Path) -> str:
    import hashlib

    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _fresh_load(path, label):
    from lob.engines.foreign import library as L

    L._LOADED.clear()  # as a new process would: nothing loaded yet
    return L.load(path, label)


def test_the_hash_is_of_the_bytes_copied(hostile, tmp_path, monkeypatch):
    """An atomic `mv` of another build between reading and copying the file: the copy is
    filed (and recorded) under the hash of what was copied, never of what was read first."""
    from lob.engines.foreign import library as L

    a = tmp_path / "liba.so"
    _compile(a, "-DX")
    b = hostile("BAD_STATUS")
    real = L.shutil.copyfile
    monkeypatch.setattr(L.shutil, "copyfile", lambda src, dst: real(b, dst))  # the swap
    lib = _fresh_load(a, "raced")
    assert lib.sha256 == _sha(b) == _sha(lib.loaded_from)
    assert lib.loaded_from.parent.name == _sha(b)[:24]


def test_a_cached_copy_altered_in_the_cache_is_replaced_not_loaded(hostile, tmp_path):
    a = tmp_path / "liba.so"
    _compile(a, "-DX")
    lib = _fresh_load(a, "cached")
    copy = lib.loaded_from
    copy.unlink()
    copy.write_bytes(hostile("BAD_STATUS").read_bytes())  # another build under a's hash
    with pytest.warns(RuntimeWarning, match="no longer holds the bytes its name says"):
        lib = _fresh_load(a, "cached")
    assert _sha(lib.loaded_from) == _sha(a) == lib.sha256
    res = open_engine(a, WL.config, "cached").replay(WL.commands)
    assert res.checksum == lob.replay("reference", WL).checksum


def test_a_file_that_is_no_library_leaves_no_copy_behind(tmp_path):
    from lob.engines.foreign import library as L

    junk = tmp_path / "libjunk.so"
    junk.write_bytes(b"\x00not an ELF file" * 4096)
    with pytest.raises(ForeignEngineError, match="not a loadable shared library"):
        _fresh_load(junk, "junk")
    assert not [p for p in (L.cache_dir() / "loaded").rglob("*") if p.is_file()]


def test_loaded_copies_are_pruned(hostile, tmp_path):
    from lob.engines.foreign import library as L

    root = L.cache_dir() / "loaded"
    old = time.time() - 30 * 86400
    for i in range(L.KEEP_LOADED + 5):
        d = root / f"{i:024x}"
        d.mkdir(parents=True)
        (d / "lib.so").write_bytes(b"old")
        os.utime(d, (old + i, old + i))
    a = tmp_path / "liba.so"
    _compile(a, "-DX")
    lib = _fresh_load(a, "pruner")
    left = sorted(p.name for p in root.iterdir())
    assert len(left) == L.KEEP_LOADED + 1 and lib.loaded_from.parent.name in left
    assert f"{0:024x}" not in left  # the oldest went first


def test_lob_bench_json_records_the_library_and_refuses_a_change(hostile, tmp_path,
                                                                 monkeypatch):
    import importlib
    import json

    B = importlib.import_module("lob.measure.bench")

    lib = tmp_path / "libbench.so"
    _compile(lib, "-DX")
    monkeypatch.setenv(ENV, str(_toml(tmp_path, "benched", lib)))
    registry.refresh()
    try:
        res = B.bench("benched", WL, repeat=1, throughput=False, diagnostics=False,
                      out=tmp_path / "out")
        (saved,) = (tmp_path / "out").glob("*.json")
        rec = json.loads(saved.read_text())
        assert rec["conditions"]["library"] == {"path": str(lib.resolve()),
                                                "sha256": _sha(lib)}
        assert res.conditions["library"]["sha256"] == _sha(lib)
        real = B.capture_latency

        def rebuilt_after_first(eng, cmds):  # the library is rebuilt while the bench runs
            out = real(eng, cmds)
            _compile(lib, "-DNEG_QTY")
            return out

        monkeypatch.setattr(B, "capture_latency", rebuilt_after_first)
        with pytest.raises(RuntimeError, match="its library changed during the bench"):
            B.bench("benched", WL, repeat=2, throughput=False, diagnostics=False)
    finally:
        monkeypatch.delenv(ENV)
        registry.refresh()


def test_a_library_replaced_during_a_run_fails_the_run(hostile, tmp_path, monkeypatch):
    import json

    from lob.engines.foreign.library import PIN_ENV
    from lob.experiments import run_batch
    from lob.experiments.job import execute_notebook

    lib = tmp_path / "librun.so"
    _compile(lib, "-DX")
    first = _sha(lib)
    monkeypatch.setenv(ENV, str(_toml(tmp_path, "swapped", lib)))
    registry.refresh()
    try:
        def rebuilt_mid_run(job):  # a notebook during which the library is rebuilt
            out = Path(job.run_dir)
            (out / "summary.json").write_text(json.dumps({"tables": {}, "conclusion": "x"}))
            _compile(lib, "-DNEG_QTY")

        art = tmp_path / "art"
        assert run_batch(["fok_scan_bottleneck"], "quick", {"counters_engine": "swapped"},
                         art, execute=rebuilt_mid_run, progress=False) == 1
        (line,) = [json.loads(x) for x in (art / "manifest.jsonl").read_text().splitlines()]
        assert line["status"] == "failed" and "changed during the run" in line["error"]
        assert not list(art.glob("fok_scan_bottleneck/*/COMPLETE"))
        # the kernel is told which bytes it may load; a different file is refused
        seen = {}
        monkeypatch.setattr("lob.experiments.job._papermill",
                            lambda pm, job, out: seen.update(pin=os.environ[PIN_ENV]))
        from lob.experiments.runner import plan

        (job,) = plan(["fok_scan_bottleneck"], "quick", {"counters_engine": "swapped"}, art)
        execute_notebook(job)
        assert json.loads(seen["pin"]) == {str(lib.resolve()): _sha(lib)}
        assert PIN_ENV not in os.environ
        monkeypatch.setenv(PIN_ENV, json.dumps({str(lib.resolve()): first}))
        with pytest.raises(ForeignEngineError, match="changed during the run"):
            _fresh_load(lib, "swapped")
    finally:
        monkeypatch.delenv(ENV)
        registry.refresh()

"""The compiled transport and the persistent sessions: order and no loss over wrap-around with
random batch sizes, back-pressure, a killed or stopped peer raising in the caller, a dead
parent ending both children, a slow engine not declared hung, no /dev/shm leftovers after a
killed run, and the pipeline's outcomes equal to a plain replay's on both transports.

One compiled session (a module fixture) serves most tests, so numba loads once; the kernels
come from numba's on-disk cache after the first run.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import lob
from lob.pipeline import PipelineError, PipelineSession
from lob.pipeline.ring import SHM_DIR, SpscRing, _pid_alive, clean_stale
from lob.pipeline.run import warmup_commands
from lob.semantics import COMMAND_DTYPE, OUTCOME_DTYPE, BookConfig
from lob.system import realtime_allowed

CFG = BookConfig(1, 99)
NO_DUE = np.zeros(0, np.int64)  # send_row paced by its rate (no recorded due times)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cmds():
    c = warmup_commands(CFG, 4000, seed=21)
    c["timed"][:10] = False
    return c


@pytest.fixture(scope="module")
def want(cmds):
    return lob.get_engine("reference", CFG).replay(cmds).outcomes


@pytest.fixture(scope="module", params=["command/fields", "chunk/fields", "command/line",
                                        "chunk/line"])
def session(request):
    mode, layout = request.param.split("/")
    with PipelineSession("v2@numba", transport="compiled", config=CFG, ring_capacity=7,
                         mode=mode, layout=layout) as s:
        yield s  # 7 slots: not a power of two, a wrap every few commands


# --- the two loops in one process: exact ring behaviour ------------------------------------

def _loops():
    from lob.pipeline import compiled as pc

    return pc


def _ring(cap, layout):
    """A ring of ``cap`` slots in ``layout`` and the compiled loops' slot arguments."""
    from lob.pipeline.rows import compiled_slots, slot_fields

    ring = SpscRing.create(cap, slot_fields(layout))
    return ring, compiled_slots(ring.slots, layout)


@pytest.mark.parametrize("layout", ["fields", "line"])
@pytest.mark.parametrize("take", [1, 4])
def test_in_process_order_and_no_loss_with_random_batches(cmds, want, take, layout):
    """``take`` 1: each command run and stamped alone (mode "command"); 4: up to 4 queued
    commands per kernel call, one stamp each call (mode "chunk"); in both ring layouts."""
    pc = _loops()
    from lob.engines.compiled.clock import kernel_clock_overhead  # noqa: F401 (loads numba)

    ring, slots = _ring(5, layout)
    scratch = np.zeros(take if layout == "line" else 0, COMMAND_DTYPE)
    try:
        raw = ring.raw
        n = len(cmds)
        out, done, due = np.zeros(n, OUTCOME_DTYPE), np.zeros(n, np.int64), np.zeros(n, np.int64)
        eng = lob.get_engine("v2@numba", CFG)
        state = eng.kernel_state()
        durs = np.zeros(0, np.int64)
        rng = np.random.default_rng(4)
        k = pos = 0
        far = 10**15
        while pos < n:
            raw[2 * 8] = raw[3 * 8] = time.perf_counter_ns() + far  # beats: never stale here
            room = 5 - (k - pos)
            if k < n and room and rng.random() < 0.6:
                m = int(min(rng.integers(1, 6), room, n - k))
                k2, st, _ = pc.send_row(raw, cmds, NO_DUE, *slots, k, k + m, 1000, 3.0,
                                        int(rng.integers(1, 6)), 10**7, far, far, 0, 0, 0)
                assert (k2, st) == (k + m, pc.OK)
                k = k2
            elif pos < k:
                upto = pos + int(rng.integers(1, k - pos + 1))
                while True:
                    pos, st = pc.engine_row(raw, *slots, scratch, out, done, due, pos, upto,
                                            take, state, durs, 10**7, far, far, 0, 0, 0)
                    if st < pc.GROW:
                        break
                    state = eng.kernel_state(st - pc.GROW)
                assert (pos, st) == (upto, pc.OK)
        assert (due == 1000 + (np.arange(n) * 3.0).astype(np.int64)).all()  # order, no loss
        assert (out == want).all()
        assert ring.head == ring.tail == n and (np.diff(done) >= 0).all()
        shared = int((np.diff(done) == 0).sum())  # commands published with the one before
        assert (shared > 0) if take > 1 else (shared == 0), shared
    finally:
        ring.close()


@pytest.mark.parametrize("layout", ["fields", "line"])
def test_full_ring_is_back_pressure_not_overwrite(cmds, layout):
    pc = _loops()
    ring, slots = _ring(4, layout)

    def slot_cmds():  # the commands the slots hold, in either layout
        return (ring.slots["line"]["cmd"] if layout == "line" else ring.slots["cmd"]).copy()

    try:
        raw = ring.raw
        raw[3 * 8] = time.perf_counter_ns() + 10**15  # a live consumer that never takes
        k, st, _ = pc.send_row(raw, cmds, NO_DUE, *slots, 0, 4, 0, 0.0, 1, 10**6, 10**15,
                               10**15, 0, 0, 10**5)
        assert (k, st) == (4, pc.OK)
        before = slot_cmds()
        t0 = time.monotonic()
        k, st, _ = pc.send_row(raw, cmds, NO_DUE, *slots, 4, 6, 0, 0.0, 1, 10**6, 10**15,
                               200_000_000, 0, 0, 10**5)  # spins 100 us, then yields between checks
        assert (k, st) == (4, pc.TIMEOUT) and 0.15 < time.monotonic() - t0 < 3
        assert ring.head == 4 and (slot_cmds() == before).all()  # nothing overwritten
        raw[1 * 8] = 2  # the consumer frees two slots: exactly two more fit
        k, st, _ = pc.send_row(raw, cmds, NO_DUE, *slots, 4, 6, 0, 0.0, 2, 10**6, 10**15,
                               10**15, 0, 0, 10**5)
        assert (k, st) == (6, pc.OK) and ring.head == 6
        assert (slot_cmds()[[0, 1]] == cmds[[4, 5]]).all()  # wrapped into the freed slots
        if layout == "line":  # each slot's sequence word: the count published with it
            assert list(ring.slots["line"]["seq"]) == [5, 6, 3, 4]
    finally:
        ring.close()


# --- through the processes ----------------------------------------------------------------

@pytest.mark.parametrize("batch", [1, 3, 7])
def test_order_no_loss_and_outcomes_over_wraparound(session, cmds, want, batch):
    r = session.run(cmds, rate=4e6, batch=batch, warmup=100)  # dues distinct, sender behind
    start = int(r.due_ns[0])
    assert (r.due_ns == start + (np.arange(r.n) * 250.0).astype(np.int64)).all()
    assert (r.outcomes == want).all()
    last = np.minimum((np.arange(r.n) // batch) * batch + batch - 1, r.n - 1)
    assert (r.done_ns >= r.due_ns[last]).all()  # a batch goes out when its last is due
    assert r.transport == "compiled" and len(r.latency_ns) == r.n - 100


def test_rows_reset_the_book_and_reuse_the_processes(session, cmds, want):
    pids = session.pids
    a = session.run(cmds, rate=math.inf, batch=7)
    b = session.run(cmds[:500], rate=math.inf, batch=2)
    assert session.pids == pids and all(_pid_alive(p) for p in pids.values())
    assert (a.outcomes == want).all()
    assert (b.outcomes == lob.get_engine("reference", CFG).replay(cmds[:500]).outcomes).all()
    # unpaced, the ring is always full: mode chunk publishes several commands per stamp,
    # mode command each on its own
    stamps = len(np.unique(a.done_ns))
    assert (a.mode, a.layout) == (session.mode, session.layout)
    assert (stamps < a.n) if session.mode == "chunk" else (stamps == a.n), (stamps, a.n)


@pytest.mark.parametrize("transport,engine,mode,layout", [
    ("python", "v2", "chunk", "fields"), ("python", "v2", "command", "fields"),
    ("compiled", "v2@numba", "command", "fields"), ("compiled", "v2@numba", "chunk", "fields"),
    ("compiled", "v2@numba", "command", "line"), ("compiled", "v2@numba", "chunk", "line"),
    ("compiled", "v5@numba", "command", "line"), ("compiled", "v4@numba", "chunk", "fields")])
def test_outcomes_equal_a_plain_replay_on_both_transports(transport, engine, mode, layout):
    wl = lob.workload("cpp_comprehensive", scale=0.002)
    ref = lob.get_engine("reference", wl.config).replay(wl.commands).outcomes
    with PipelineSession(engine, transport=transport, config=wl.config, mode=mode,
                         layout=layout) as s:
        for rate, batch in ((math.inf, 64), (2e5, 1)):
            r = s.run(wl.commands, rate=rate, batch=batch)
            assert (r.outcomes == ref).all(), (transport, rate, batch)


def test_any_compiled_engine_runs_in_the_pipeline():
    """The packed layout (v4, v5) runs in the compiled transport as the pool layout does: the
    engine loop reaches either kernel through the engine's kernel_state()."""
    from lob.pipeline import run_pipeline

    wl = lob.workload("cpp_comprehensive", scale=0.002)
    ref = lob.get_engine("reference", wl.config).replay(wl.commands).outcomes
    r = run_pipeline("v5@numba", wl.commands, rate=math.inf, transport="compiled",
                     config=wl.config)
    assert (r.outcomes == ref).all()


def test_each_transport_defaults_to_its_engine_loop_and_layout():
    from lob.pipeline.session import default_layout, default_mode

    # compiled: each command published on its own (seed 003's capacity definition); python:
    # a chunk per call (a Python call per command costs µs)
    assert default_mode("compiled") == "command" and default_mode("python") == "chunk"
    assert default_layout("compiled") == "line" and default_layout("python") == "fields"
    with pytest.raises(ValueError, match="layout 'line' is the compiled transport's"):
        PipelineSession("v2", transport="python", layout="line")
    with pytest.raises(ValueError, match="layout must be one of"):
        PipelineSession("v2@numba", transport="compiled", layout="rows")


def test_compiled_transport_names_what_it_needs():
    with pytest.raises(ValueError, match="compiled engines only"):
        PipelineSession("v2", transport="compiled")
    with pytest.raises(ValueError, match="transport must be one of"):
        PipelineSession("v2", transport="rust")


def _fail_mid_row(transport, engine, sig, role, **kw):
    """Start a ~5 s paced row, signal one child after 0.5 s; (error, seconds after signal)."""
    c = warmup_commands(CFG, 5000, seed=2)
    s = PipelineSession(engine, transport=transport, config=CFG, **kw)
    pid = s.pids[role]
    when = {}

    def hit():
        when["t"] = time.monotonic()
        when["shm"] = [s.ring.spec.name, s._rows.shm.name]
        os.kill(pid, sig)

    timer = threading.Timer(0.5, hit)
    timer.start()
    try:
        with pytest.raises(PipelineError) as err:
            s.run(c, rate=1000, batch=1)
        return str(err.value), time.monotonic() - when["t"], s, when["shm"]
    finally:
        timer.cancel()
        if sig == signal.SIGSTOP:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        s.close()


@pytest.mark.parametrize("transport,engine", [
    ("compiled", "v2@numba"),
    pytest.param("python", "v2", marks=pytest.mark.ci)])  # a watchdog wait: CI (make test-ci)
def test_killed_engine_raises_in_the_caller_quickly(transport, engine):
    msg, dt, s, shm = _fail_mid_row(transport, engine, signal.SIGKILL, "engine")
    assert "engine process" in msg and "died" in msg and dt < 10
    assert s.closed and not any(p.is_alive() for p in s._procs.values())
    assert not set(shm) & set(os.listdir(SHM_DIR))  # the failed session unlinked its blocks


@pytest.mark.parametrize("transport,engine", [
    ("compiled", "v2@numba"),
    pytest.param("python", "v2", marks=pytest.mark.ci)])  # a watchdog wait: CI (make test-ci)
def test_stopped_sender_raises_in_the_caller_quickly(transport, engine):
    msg, dt, s, _ = _fail_mid_row(transport, engine, signal.SIGSTOP, "sender", liveness_s=0.5)
    assert ("no heartbeat" in msg or "silent" in msg) and dt < 10, msg
    assert not any(p.is_alive() for p in s._procs.values())


@pytest.mark.parametrize("transport,engine,n,batch,ring,mode,layout", [
    ("compiled", "v0+pool@numba", 1200, 16, 32, "command", "fields"),
    ("compiled", "v0+pool@numba", 1600, 16, 512, "chunk", "fields"),
    ("compiled", "v0+pool@numba", 1600, 16, 512, "chunk", "line"),
    pytest.param("python", "v0", 131072, 32768, 65536, "chunk", "fields",
                 marks=pytest.mark.ci)])  # ~10 s of a pure-Python engine: CI (make test-ci)
def test_slow_engine_is_not_declared_hung(transport, engine, n, batch, ring, mode, layout):
    """An engine busy far longer than the liveness interval without ever waiting (a 1M-tick
    band, an empty ask side scanned from its edge by every IOC: 1-3 ms per command compiled,
    chunks of up to 64k commands in Python) while the sender waits for room, checking it.
    The compiled chunk mode would take up to 512 queued commands (0.5-1.5 s) in one call if it did
    not shorten its calls after a slow one."""
    wide = BookConfig(1, 1_000_000)
    c = np.zeros(n, COMMAND_DTYPE)
    c["otype"], c["owner"], c["price"], c["qty"], c["timed"] = 1, 1, 1, 1, True
    with PipelineSession(engine, transport=transport, config=wide, ring_capacity=ring,
                         mode=mode, layout=layout, liveness_s=0.3) as s:
        t0 = time.monotonic()
        r = s.run(c, rate=math.inf, batch=batch)
        busy = time.monotonic() - t0
    assert busy > 3 * 0.3, f"the engine was not slow enough to test anything ({busy:.2f} s)"
    assert (r.outcomes["status"] == int(lob.semantics.Status.CANCELLED)).all()


_ORPHAN = textwrap.dedent("""
    import json, os, sys, time
    from lob.pipeline import PipelineSession
    from lob.pipeline.run import warmup_commands
    from lob.semantics import BookConfig
    if __name__ == "__main__":
        cfg = BookConfig(1, 99)
        s = PipelineSession(sys.argv[1], transport=sys.argv[2], config=cfg)
        print(json.dumps({"parent": os.getpid(), **s.pids}), flush=True)
        s.run(warmup_commands(cfg, 100_000), rate=2000)  # ~50 s: killed long before
""")


def _start_orphan(tmp_path, engine, transport):
    script = tmp_path / "orphan.py"
    script.write_text(_ORPHAN)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.Popen([sys.executable, str(script), engine, transport], env=env,
                         stdout=subprocess.PIPE, text=True, start_new_session=True)
    pids = json.loads(p.stdout.readline())
    time.sleep(0.5)  # the row is running
    return p, pids


def _gone_within(pids, seconds: float) -> bool:
    t1 = time.monotonic() + seconds
    while time.monotonic() < t1:
        if not any(_pid_alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("transport,engine", [
    ("compiled", "v2@numba"),
    pytest.param("python", "v2", marks=pytest.mark.ci)])  # a watchdog wait: CI (make test-ci)
def test_dead_parent_ends_both_children(tmp_path, transport, engine):
    p, pids = _start_orphan(tmp_path, engine, transport)
    try:
        os.kill(pids["parent"], signal.SIGKILL)
        p.wait(10)
        assert _gone_within([pids["engine"], pids["sender"]], 10), pids
    finally:
        for pid in (pids["engine"], pids["sender"]):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_no_shm_leftovers_after_a_killed_process_group(tmp_path):
    p, pids = _start_orphan(tmp_path, "v2@numba", "compiled")
    os.killpg(p.pid, signal.SIGKILL)  # the whole group: parent, children, resource tracker
    p.wait(10)
    assert _gone_within([pids["engine"], pids["sender"]], 10)
    prefix = f"lob_{pids['parent']}_"
    clean_stale()  # what the next session's start does
    assert not [n for n in os.listdir(SHM_DIR) if n.startswith(prefix)]


def test_clean_stale_spares_live_owners(tmp_path):
    for name in (f"lob_{os.getpid()}_abcd_rows", "lob_999999999_abcd_ring", "other_1_x"):
        (tmp_path / name).write_bytes(b"")
    removed = clean_stale(str(tmp_path))
    assert removed == ["lob_999999999_abcd_ring"]
    assert sorted(os.listdir(tmp_path)) == sorted([f"lob_{os.getpid()}_abcd_rows", "other_1_x"])


@pytest.mark.ci  # make test-ci: NUMBA_BOUNDSCHECK builds of both loops
def test_under_numba_boundscheck(tmp_path):
    """The compiled loops (and the kernel they call) with bounds checks on, in a subprocess
    with the bounds-checked builds' own numba cache (conftest.boundscheck_cache)."""
    code = textwrap.dedent("""
        import math
        import lob
        from lob.pipeline import PipelineSession
        from lob.pipeline.run import warmup_commands
        from lob.semantics import BookConfig
        if __name__ == "__main__":
            cfg = BookConfig(1, 99)
            c = warmup_commands(cfg, 3000, seed=8)
            ref = lob.get_engine("reference", cfg).replay(c).outcomes
            for mode, layout in (("command", "fields"), ("chunk", "fields"),
                                 ("command", "line"), ("chunk", "line")):
                with PipelineSession("v2@numba", transport="compiled", config=cfg, mode=mode,
                                     layout=layout, ring_capacity=5, start_timeout_s=900) as s:
                    for rate, b in ((math.inf, 5), (1e6, 1)):
                        assert (s.run(c, rate=rate, batch=b).outcomes == ref).all()
            print("ok")
    """)
    script = tmp_path / "bc.py"
    script.write_text(code)
    from conftest import boundscheck_cache

    env = dict(os.environ, NUMBA_BOUNDSCHECK="1", NUMBA_CACHE_DIR=boundscheck_cache(),
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                       timeout=1200)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr



@pytest.mark.skipif(not realtime_allowed(), reason="this process may not use SCHED_FIFO")
def test_realtime_rows_run_under_sched_fifo_and_nothing_else_does(cmds, want):
    with PipelineSession("v2@numba", transport="compiled", config=CFG, realtime=True) as s:
        r = s.run(cmds, rate=2e6, batch=1)
        pids = s.pids
        # back to the ordinary policy between rows (warming and idling are not real-time)
        assert all(os.sched_getscheduler(p) == os.SCHED_OTHER for p in pids.values())
    assert r.realtime and (r.outcomes == want).all()
    assert r.extra["engine"]["sched_fifo"] and r.extra["sender"]["sched_fifo"]
    assert os.sched_getscheduler(0) == os.SCHED_OTHER  # the check left the parent as it was


def test_realtime_without_the_right_is_refused_up_front(monkeypatch):
    from lob import system

    def deny(*a):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(system.os, "sched_setscheduler", deny)
    with pytest.raises(PermissionError, match="needs the right to use SCHED_FIFO"):
        PipelineSession("v2@numba", transport="compiled", realtime=True)


@pytest.mark.skipif(not realtime_allowed(), reason="this process may not use SCHED_FIFO")
def test_realtime_rows_longer_than_the_real_time_budget_are_refused(cmds, want, monkeypatch):
    from lob import system

    with PipelineSession("v2@numba", transport="compiled", config=CFG, realtime=True) as s:
        monkeypatch.setattr(system, "realtime_budget_s", lambda: 0.01)
        with pytest.raises(ValueError, match="real-time budget"):
            s.run(cmds, rate=100_000)  # 4,000 commands: 0.04 s
        monkeypatch.undo()
        assert (s.run(cmds, rate=4e6).outcomes == want).all()  # refused, not broken

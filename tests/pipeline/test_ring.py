"""The shared-memory SPSC ring: order and no loss over wrap-around, back-pressure, shutdown,
and a killed, hung or aborting peer making the other side fail within a bounded time."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time

import numpy as np
import pytest

from lob.pipeline.ring import PeerError, RingTimeout, SpscRing

CTX = mp.get_context("fork")  # children reuse the imported test module; spawn is covered in
# tests/pipeline/test_pipeline.py through run_pipeline
FIELDS = {"seq": np.int64, "tag": np.int32}


@pytest.fixture
def ring():
    r = SpscRing.create(7, FIELDS)  # not a power of two: the modulo path, frequent wraps
    yield r
    r.close()


def _batch(start: int, n: int) -> dict:
    seq = np.arange(start, start + n, dtype=np.int64)
    return {"seq": seq, "tag": (seq * 7 % 1000).astype(np.int32)}


def test_in_process_order_and_no_loss_with_random_batches(ring):
    rng = np.random.default_rng(3)
    prod, cons = ring.producer(), ring.consumer()
    sent = got = 0
    seen = []
    while got < 2000:
        if sent < 2000 and rng.random() < 0.5:
            n = int(min(rng.integers(1, 8), prod.free(), 2000 - sent))
            if n:
                prod.publish(**_batch(sent, n))
                sent += n
        else:
            first, rec = cons.take(int(rng.integers(1, 8)), block=False)
            assert first == got
            seen.append(rec["seq"])
            got += len(rec["seq"])
            assert (rec["tag"] == rec["seq"] * 7 % 1000).all()
    assert (np.concatenate(seen) == np.arange(2000)).all()
    assert ring.head == ring.tail == 2000


def _producer_child(spec, total: int, seed: int) -> None:
    r = SpscRing.attach(spec)
    prod = r.producer(timeout_s=20)
    rng = np.random.default_rng(seed)
    k = 0
    while k < total:
        n = int(min(rng.integers(1, r.capacity + 1), total - k))
        prod.publish(**_batch(k, n))
        k += n
    prod.close()
    r.close()


def test_cross_process_order_and_no_loss_over_wraparound(ring):
    total = 20_000
    p = CTX.Process(target=_producer_child, args=(ring.spec, total, 11))
    p.start()
    cons = ring.consumer(timeout_s=20)
    rng = np.random.default_rng(12)
    parts, expect = [], 0
    while True:
        first, rec = cons.take(int(rng.integers(1, 10)))
        if len(rec["seq"]) == 0:
            break
        assert first == expect
        expect += len(rec["seq"])
        parts.append(rec["seq"])
    p.join(10)
    assert p.exitcode == 0
    seq = np.concatenate(parts)
    assert len(seq) == total and (seq == np.arange(total)).all()  # ~2,900 wraps, nothing lost
    assert cons.closed


def test_full_ring_is_back_pressure_not_overwrite(ring):
    prod, cons = ring.producer(timeout_s=0.3), ring.consumer()
    prod.publish(**_batch(0, 7))
    before = ring.slots["seq"].copy()
    t0 = time.monotonic()
    with pytest.raises(RingTimeout, match="room for 1 records"):
        prod.publish(**_batch(7, 1))
    assert 0.25 < time.monotonic() - t0 < 3
    assert ring.head == 7 and (ring.slots["seq"] == before).all()
    first, rec = cons.take(3)
    assert first == 0 and list(rec["seq"]) == [0, 1, 2]
    prod.publish(**_batch(7, 3))  # room again: wraps into the freed slots
    assert list(cons.take()[1]["seq"]) == [3, 4, 5, 6]
    assert list(cons.take()[1]["seq"]) == [7, 8, 9]


def test_bad_arguments_name_the_problem(ring):
    with pytest.raises(ValueError, match="exceeds the ring capacity 7"):
        ring.producer().publish(**_batch(0, 8))
    with pytest.raises(ValueError, match="capacity must be >= 1"):
        SpscRing.create(0, FIELDS)
    with pytest.raises(TypeError, match="capacity must be an int"):
        SpscRing.create(2.5, FIELDS)


def test_close_ends_the_stream_after_draining(ring):
    prod, cons = ring.producer(), ring.consumer(timeout_s=1)
    prod.publish(**_batch(0, 2))
    prod.close()
    assert not cons.closed
    assert len(cons.take()[1]["seq"]) == 2
    assert len(cons.take()[1]["seq"]) == 0 and cons.closed


def _idle_consumer_child(spec) -> None:
    r = SpscRing.attach(spec)
    cons = r.consumer(timeout_s=60, liveness_s=60)
    cons.take(1)  # takes one record, then waits (beating) for records that never come
    cons.take(1)
    time.sleep(60)


def _idle_producer_child(spec) -> None:
    r = SpscRing.attach(spec)
    prod = r.producer(timeout_s=60, liveness_s=60)
    prod.publish(**_batch(0, 3))
    while True:  # a paced sender between batches: alive, beating, not publishing
        prod.beat()
        time.sleep(0.01)


def _start(target, spec):
    p = CTX.Process(target=target, args=(spec,), daemon=True)
    p.start()
    return p


def test_killed_consumer_stops_a_blocked_producer_quickly(ring):
    p = _start(_idle_consumer_child, ring.spec)
    prod = ring.producer(timeout_s=30, liveness_s=30)  # only the dead-pid check can fire
    prod.wait_for_peer(10)
    try:
        prod.publish(**_batch(0, 7))
        time.sleep(0.2)
        prod.publish(**_batch(7, 1))  # the child took one record: room for exactly one
        os.kill(p.pid, signal.SIGKILL)
        t0 = time.monotonic()
        with pytest.raises(PeerError, match=rf"consumer \(pid {p.pid}\) died"):
            for k in range(8, 100):
                prod.publish(**_batch(k, 7))
        assert time.monotonic() - t0 < 5
    finally:
        p.kill()
        p.join(5)


def test_killed_producer_stops_a_waiting_consumer_quickly(ring):
    p = _start(_idle_producer_child, ring.spec)
    cons = ring.consumer(timeout_s=30, liveness_s=30)
    try:
        cons.wait_for_peer(10)
        assert list(cons.take()[1]["seq"]) == [0, 1, 2]
        os.kill(p.pid, signal.SIGKILL)
        t0 = time.monotonic()
        with pytest.raises(PeerError, match=rf"producer \(pid {p.pid}\) died"):
            cons.take()
        assert time.monotonic() - t0 < 5
    finally:
        p.kill()
        p.join(5)


def test_stopped_consumer_is_caught_by_its_stale_heartbeat(ring):
    p = _start(_idle_consumer_child, ring.spec)
    prod = ring.producer(timeout_s=30, liveness_s=0.5)
    try:
        prod.wait_for_peer(10)
        prod.publish(**_batch(0, 7))
        time.sleep(0.2)
        os.kill(p.pid, signal.SIGSTOP)  # alive, not a zombie, but no longer beating
        t0 = time.monotonic()
        with pytest.raises(PeerError, match="no heartbeat from the consumer"):
            for k in range(7, 100):
                prod.publish(**_batch(k, 7))
        assert time.monotonic() - t0 < 5
    finally:
        p.kill()
        os.kill(p.pid, signal.SIGCONT)
        p.join(5)


def test_abort_flag_stops_the_peer(ring):
    prod, cons = ring.producer(), ring.consumer(timeout_s=5)
    prod.abort()
    t0 = time.monotonic()
    with pytest.raises(PeerError, match="the producer aborted"):
        cons.take()
    assert time.monotonic() - t0 < 1

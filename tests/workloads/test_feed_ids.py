"""The converter's table of venue ids (lob.workloads.feed): open addressing whose deletes
shift the probe chain back instead of leaving tombstones; checked against a dict through
thousands of random inserts and deletes in a small, crowded table."""

from __future__ import annotations

import numpy as np

from lob.workloads.feed import EMPTY_KEY, N_REGS, R_HLIVE, _delete, _find, _insert


def test_every_live_id_is_found_and_no_gone_one_after_random_deletes():
    rng = np.random.default_rng(7)
    hk, hv = np.full(256, EMPTY_KEY, np.int64), np.zeros(256, np.int32)
    regs = np.zeros(N_REGS, np.int64)
    live: dict[int, int] = {}
    gone: set[int] = set()
    for step in range(20_000):
        if len(live) < 120 and (not live or rng.random() < 0.55):
            key = int(rng.integers(-(2**62), 2**62))
            if key in live:
                continue
            _insert(hk, hv, regs, key, step % 1000)
            live[key] = step % 1000
            gone.discard(key)
        else:
            key = list(live)[int(rng.integers(len(live)))]
            _delete(hk, hv, regs, key)
            del live[key]
            gone.add(key)
        if step % 500 == 0:
            assert all(_find(hk, hv, k) == v for k, v in live.items())
            assert all(_find(hk, hv, k) == -1 for k in list(gone)[:200])
    assert regs[R_HLIVE] == len(live) == int(np.count_nonzero(hk != EMPTY_KEY))

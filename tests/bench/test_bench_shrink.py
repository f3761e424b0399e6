"""Shrinking speed (issue 43): a benchmark, not a test - ``make bench``.

The example C engine with a planted bug (its FOK availability counts the taker's own orders
under CANCEL_MAKER; tests/differential/test_shrink.py plants it) against ``reference`` on a
1M-command stream (cpp_comprehensive at scale 0.5): the time to find the divergence (two
whole replays), then the time to shrink it and the reproducer's length. Target: at most 10
commands in under 30 s from the divergence. Figures vary with the machine's load.
"""

from __future__ import annotations

import time

import pytest
from test_shrink import engines  # noqa: F401  (the fixture that builds both copies)

import lob
from lob.engines.shrink import divergence, shrink

pytestmark = pytest.mark.bench


def _run(a, b, wl, cmds) -> tuple:
    t = time.perf_counter()
    first = divergence(a, b, wl.config, cmds)
    found = time.perf_counter() - t
    s = shrink(a, b, wl.config, cmds, first=first, time_limit=30)
    print(f"{a} vs {b}, {len(cmds):,} commands: divergence at command {first.at:,} found in "
          f"{found:.1f} s; shrunk to {len(s.commands)} commands in {s.seconds:.2f} s "
          f"({s.tests} replays of both)")
    return s


def test_shrink_speed(engines):  # noqa: F811
    ok, planted = engines
    wl = lob.workload("cpp_comprehensive", scale=0.5)
    print()
    s = _run("reference", planted, wl, wl.commands)  # the bug shows early in this stream
    assert len(s.commands) <= 10 and s.seconds < 30
    # late: the FOKs of the first 99% belong to an owner that never rests (the bug cannot
    # show), so the shrinker starts from ~990,000 commands (two C engines: fast replays)
    c = wl.commands.copy()
    late = int(len(c) * 0.99)
    fok = (c["kind"] == 0) & (c["otype"] == 2)
    c["owner"][:late][fok[:late]] = 1000
    s = _run(ok, planted, wl, c)
    assert len(s.commands) <= 10 and s.seconds < 30

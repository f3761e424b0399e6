"""lob.measure.rounds: the one interleaved-rounds loop (order, continuation, probes, early
stop, extra rounds) and the clock it is passed."""

import time

import pytest

from lob.measure.rounds import clock_of, interleaved_rounds, timed_replay


def test_rounds_rotate_and_a_continued_series_keeps_rotating():
    ran = []
    assert interleaved_rounds("abc", lambda n, k: ran.append((k, n)), 2) is None
    assert ran == [(0, "a"), (0, "b"), (0, "c"), (1, "b"), (1, "c"), (1, "a")]
    ran.clear()
    interleaved_rounds("abc", lambda n, k: ran.append((k, n)), 1, first=2)
    assert ran == [(2, "c"), (2, "a"), (2, "b")]


def test_probes_bracket_every_run_and_reach_the_round_end():
    seen, ticks = [], iter(range(100))
    interleaved_rounds("ab", lambda n, k: None, 2, probe=lambda: next(ticks),
                       after=lambda order, probed: seen.append((order, probed)))
    assert seen == [(["a", "b"], [0, 1, 2]), (["b", "a"], [3, 4, 5])]


def test_a_value_from_run_or_after_stops_the_rounds():
    ran = []

    def run(n, k):
        ran.append(n)
        return "failed" if (k, n) == (1, "a") else None

    assert interleaved_rounds("ab", run, 5) == "failed"
    assert ran == ["a", "b", "b", "a"]
    assert interleaved_rounds("ab", lambda n, k: None, 5,
                              after=lambda o, p: "differs" if o[0] == "b" else None) == "differs"


def test_extra_rounds_run_only_while_not_enough():
    ran = []
    interleaved_rounds("a", lambda n, k: ran.append(k), 2, extra=5,
                       enough=lambda: len(ran) >= 4)
    assert ran == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="rounds and extra must be >= 0"):
        interleaved_rounds("a", lambda n, k: None, -1)


def test_the_clock_is_named_and_passed_not_swapped():
    assert clock_of("cpu") is time.thread_time_ns and clock_of("wall") is time.perf_counter_ns
    with pytest.raises(ValueError, match="clock must be one of"):
        clock_of("sundial")

    class Run:
        elapsed_ns = 50

    ticks = iter([0, 400])  # the call took 400 on the clock passed
    run, kernel, call = timed_replay(Run, lambda: next(ticks))
    assert call == 400 and 0 <= kernel <= 400 and time.perf_counter_ns is clock_of("wall")

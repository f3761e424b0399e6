"""lob.diagnose.hotspots: the refusals, and (where perf can sample) a real profile of a
compiled kernel (the mapping of samples to lines: tests/engines/test_hotspot_lines.py)."""

import pytest

from lob import cli
from lob.diagnose import hotspots as hs


def test_without_perf_every_entry_point_says_why(monkeypatch, capsys):
    monkeypatch.setattr(hs.shutil, "which", lambda name: None)
    assert "perf is not installed" in hs.available()
    with pytest.raises(RuntimeError, match="perf is not installed"):
        hs.hotspots("v5@numba", "lobster_replay", scale=0.01)
    assert cli.main(["hotspots", "v5@numba", "--scale", "0.01"]) == 2
    assert "perf is not installed" in capsys.readouterr().err


def test_bad_arguments_are_refused_before_anything_runs(monkeypatch):
    ran = []
    monkeypatch.setattr(hs, "available", lambda: ran.append(1))
    with pytest.raises(ValueError, match="python engine"):
        hs.hotspots("v2", "lobster_replay", scale=0.01)
    for bad in (0, float("nan"), float("inf"), hs.MAX_SECONDS + 1):
        with pytest.raises(ValueError, match="seconds must be above 0 and at most 600"):
            hs.hotspots("v5@numba", "lobster_replay", seconds=bad)
    with pytest.raises(ValueError, match="unknown engine"):
        hs.hotspots("no-such-engine", "lobster_replay")
    with pytest.raises(ValueError, match="unknown workload"):
        hs.hotspots("v5@numba", "no-such-workload")
    with pytest.raises(ValueError, match="scale of 'lobster_replay' must be"):
        hs.hotspots("v5@numba", "lobster_replay", scale=0)
    assert ran == []


@pytest.mark.extended  # ~30 s: a compile with debug info, then replays under perf
@pytest.mark.skipif(hs.available() is not None, reason=f"hotspots: {hs.available()}")
def test_a_compiled_kernel_is_sampled_line_by_line():
    from lob.engines.registry import get_engine
    from lob.workloads import build

    h = hs.hotspots("v5@numba", "lobster_replay", scale=0.05, seconds=0.5, top=40)
    wl = build("lobster_replay", scale=0.05)
    # the debug-info build replays to the same checksum as the cached one
    assert h["checksum"] == get_engine("v5@numba", wl.config).replay(wl.commands).checksum
    assert 0 < h["kernel_samples"] < h["samples"] and h["reps"] > 1
    assert "kernel_v4.run" in h["functions"]
    shares = [r["share"] for r in h["lines"]]
    assert shares == sorted(shares, reverse=True) and 0 < sum(shares) <= 1.0 + 1e-9
    # the lines are the kernel's source, inlined helpers named as themselves
    assert all(r["where"].startswith("kernel_v4.py:") or r["where"] == "(no line)"
               for r in h["lines"])
    assert {"run", "rest", "drop"} <= {r["function"] for r in h["lines"]}
    top = h["lines"][0]  # its instructions: sampled, at most six, none more than the line
    assert 0 < len(top["instructions"]) <= 6 and all(
        0 < i["samples"] <= top["samples"] for i in top["instructions"])

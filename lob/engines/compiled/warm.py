"""Compile the numba kernels into their on-disk cache ahead of a batch, on every core at once.

Every kernel is ``cache=True``, so a kernel is compiled once per checkout and loaded from
``__pycache__`` afterwards; on a fresh clone the first experiment that touches a kernel pays its
compile while the machine's other core idles (the default batch runs its notebooks one at a
time). :func:`warm` compiles the groups below in parallel worker processes, each replaying a
short stream untimed and timed (the two specialisations the experiments use), so the batch
starts on a warm cache. It changes no result: a later compile or cache load gives the same
machine code.
"""

from __future__ import annotations

import time
from concurrent.futures import ProcessPoolExecutor

__all__ = ["GROUPS", "warm"]

# one group per compiled kernel module: the engines that share its code compile it once
GROUPS: dict[str, tuple[str, ...]] = {
    "kernel": ("v2@numba",),  # lob.engines.compiled.kernel (v0+pool, v1, v2, v3)
    "kernel_v4": ("v4@numba",),
}


def _compile(group: str) -> tuple[str, float]:
    """Replay a short stream with each engine of ``group``, untimed and timed; the seconds."""
    import lob
    from lob.pipeline.run import warmup_commands
    from lob.semantics import BookConfig

    t0 = time.perf_counter()
    cfg = BookConfig(1, 99)
    cmds = warmup_commands(cfg, 2000, seed=7)
    for name in GROUPS[group]:
        eng = lob.get_engine(name, cfg)
        eng.replay(cmds)
        lob.get_engine(name, cfg).replay_timed(cmds)
    return group, time.perf_counter() - t0


def warm(groups=None, jobs: int = 2) -> dict[str, float]:
    """Compile ``groups`` (default: all of :data:`GROUPS`) in ``jobs`` processes; returns the
    seconds each took. ValueError on an unknown group or ``jobs`` < 1."""
    groups = list(GROUPS) if groups is None else list(groups)
    bad = [g for g in groups if g not in GROUPS]
    if bad:
        raise ValueError(f"unknown kernel group(s) {bad}; known: {list(GROUPS)}")
    if not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be an integer >= 1, got {jobs!r}")
    if jobs == 1:
        return dict(_compile(g) for g in groups)
    with ProcessPoolExecutor(max_workers=min(jobs, len(groups))) as ex:
        return dict(ex.map(_compile, groups))

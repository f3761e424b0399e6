"""``lob.bench``: latency percentiles, throughput, allocations and run conditions of one
engine on one workload, as one :class:`BenchResult` that prints, serialises and saves.

Order of work: every parameter is checked first (unknown engine or workload, bad repeat,
unwritable output folder raise before anything runs); then the workload is built, the clock
calibrated, the closed-loop latency captured on a fresh engine, the throughput replays run
(fresh engine each), and optionally allocations counted. The checksum of every replay must
agree (a determinism check that costs nothing), and must be reference's, counters included
(one reference replay, which the diagnostics reuse): an engine that breaks the matching
rules is refused, not measured. A foreign engine's library is recorded by the hash of the
bytes loaded (``conditions["library"]``); a library that changes during the bench is refused.
"""

from __future__ import annotations

import gc
import os
from contextlib import contextmanager

import numpy as np

from lob.measure import alloc as _alloc
from lob.measure.clock import calibrate
from lob.measure.hgrm import encode
from lob.measure.latency import capture_latency, histogram_from
from lob.measure.results import (
    BenchResult,
    LatencyRun,
    throughput_summary,
    writable_folder,
)


@contextmanager
def _gc_state(enabled: bool):
    was = gc.isenabled()
    if enabled:
        gc.enable()
    else:
        gc.collect()
        gc.disable()
    try:
        yield
    finally:
        (gc.enable if was else gc.disable)()


def _resolve_workload(workload, scale, seed):
    """(thunk building the workload, its name); checks the name without building it."""
    if isinstance(workload, str):
        from lob.workloads import spec

        spec(workload)  # unknown name -> ValueError listing the names
        params = {"scale": scale} if seed is None else {"scale": scale, "seed": seed}

        def build():
            from lob.workloads import build as build_workload

            return build_workload(workload, **params)

        return build, workload
    if not (hasattr(workload, "commands") and hasattr(workload, "config")):
        raise TypeError("workload must be a workload name or a Workload (.commands, .config), "
                        f"got {type(workload).__name__}")
    return (lambda: workload), getattr(workload, "name", "workload")


def _result(engine: str, wl, wl_name: str, clock) -> BenchResult:
    """An empty result for ``engine`` on the built workload ``wl``."""
    cmds = wl.commands
    return BenchResult(engine, wl_name, int(len(cmds)), int(np.count_nonzero(cmds["timed"])),
                       clock, {}, 0, {},
                       workload_meta={"name": getattr(wl, "name", wl_name),
                                      "family": getattr(wl, "family", None),
                                      "seed": getattr(wl, "seed", None),
                                      "params": getattr(wl, "params", {}),
                                      "config": wl.config.to_dict(),
                                      "description": getattr(wl, "description", "")})


class _Fresh:
    """Fresh engines of one name; a foreign one's library recorded by the bytes loaded
    (``libs``: sha256 -> identity), and refused if it changes between two of them."""

    def __init__(self, engine: str, config):
        self.engine, self.config = engine, config
        self.libs: dict[str, dict] = {}

    def __call__(self):
        from lob.engines.registry import get_engine

        eng = get_engine(self.engine, self.config)
        lib = getattr(eng, "library", None)  # a foreign engine's: {"path", "sha256"}
        if lib is not None:
            self.libs[lib["sha256"]] = lib
            if len(self.libs) > 1:
                raise RuntimeError(
                    f"{self.engine}: its library changed during the bench (sha256 "
                    f"{', '.join(h[:16] + '...' for h in self.libs)}); one bench measures "
                    f"one build: rerun it once the library stays put")
        return eng


def _measure(res: BenchResult, fresh: _Fresh, cmds, repeat: int, *, latency: bool,
             throughput: bool, alloc: bool, gc: bool, tick) -> set:
    """The measured regions, into ``res``: latency captures, throughput replays,
    allocations; returns the checksums the replays gave."""
    from lob.measure.conditions import machine, machine_key

    sums = set()
    with _gc_state(gc):
        if latency:
            where = machine_key(machine())
            for _ in range(repeat):
                cap = capture_latency(fresh(), cmds)
                h, clamped = histogram_from(cap.durations_ns)
                res.add_run(LatencyRun(encode(h), cap.method, clamped, where,
                                       cap.replay.checksum))
                if cap.calibration is not None:  # the engine's own clock timed the ops
                    res.clock = cap.calibration
                sums.add(cap.replay.checksum)
                res.counters = cap.replay.counters
                tick("latency")
        if throughput:
            ns = []
            for _ in range(repeat):
                r = fresh().replay(cmds)
                ns.append(r.elapsed_ns / max(1, len(cmds)))
                sums.add(r.checksum)
                res.counters = r.counters
                tick("throughput")
            res.throughput = throughput_summary(ns, gc, len(cmds))
        if alloc:
            counts = _alloc.count_allocations(fresh(), cmds)
            tick("alloc count")
            trace = _alloc.trace_allocations(fresh(), cmds)
            tick("tracemalloc")
            # a native counter never sees the harness: its share is 0 by construction
            harness = 0.0 if counts.method != _alloc.PYTHON_METHOD else \
                _alloc.harness_allocations().allocs_per_op
            res.alloc = {"counts": counts.to_dict(), "trace": trace,
                         "harness_allocs_per_op": harness, "method": counts.method}
    return sums


def _refuse_disagreement(res: BenchResult, ref, engine: str, wl_name: str) -> None:
    """The engine is measured only if it did what reference does (checksum and counters):
    an engine that breaks the matching rules is not "fast"."""
    if ref.checksum == res.checksum and dict(ref.counters) == dict(res.counters):
        return
    theirs, mine = dict(ref.counters), dict(res.counters)
    diff = ", ".join(f"{k} {mine.get(k)} vs {theirs.get(k)}" for k in sorted(
        set(theirs) | set(mine)) if mine.get(k) != theirs.get(k))
    raise RuntimeError(
        f"{engine} disagrees with reference on {wl_name} (checksum {res.checksum} vs "
        f"{ref.checksum}" + (f"; {diff}" if diff else "") + "): an engine that breaks "
        "the matching rules is not measured (nothing saved)")


def _progress(progress: bool, steps: int, desc: str):
    """(tick(what), close()) of a progress bar, or of nothing."""
    if not progress:
        return (lambda what: None), (lambda: None)
    from tqdm import tqdm

    bar = tqdm(total=steps, desc=desc, unit="step", leave=False)

    def tick(what: str) -> None:
        bar.set_postfix_str(what)
        bar.update(1)

    return tick, bar.close


def bench(engine: str, workload, repeat: int = 5, *, latency: bool = True,
          throughput: bool = True, alloc: bool = False, gc: bool = True,
          progress: bool = False, scale: float = 1.0, seed: int | None = None,
          diagnostics: bool = True, out: str | os.PathLike | None = None) -> BenchResult:
    """Measure ``engine`` on ``workload`` (a Workload or a name built with ``scale``/``seed``).

    ``repeat`` latency captures (runs, merged into one histogram) and ``repeat`` throughput
    replays, each on a fresh engine; ``gc`` False disables the cyclic collector during every
    measured region (recorded in the result); ``alloc`` adds total
    allocation counts and tracemalloc attribution; ``diagnostics`` adds the workload
    diagnostics (a reference replay); ``out`` saves .hgrm + JSON there.
    """
    from lob.engines.registry import engine_spec, get_engine
    from lob.measure.conditions import cpu_times, run_conditions, steal_fraction
    from lob.workloads.diagnostics import diagnose

    if not isinstance(engine, str):
        raise TypeError(f"engine must be an engine name (str), got {type(engine).__name__}")
    engine_spec(engine)  # unknown -> ValueError listing the names
    if isinstance(repeat, bool) or not isinstance(repeat, (int, np.integer)) or repeat <= 0:
        raise ValueError(f"repeat must be a positive int, got {repeat!r}")
    if not (latency or throughput or alloc):
        raise ValueError("nothing to measure: latency, throughput and alloc are all off")
    build, wl_name = _resolve_workload(workload, scale, seed)
    if out is not None:
        writable_folder(out)

    steps = (2 + repeat * (int(latency) + int(throughput)) + 2 * int(alloc)
             + int(diagnostics))
    tick, close = _progress(progress, steps, f"{engine} {wl_name}")
    try:
        wl = build()
        cmds = wl.commands
        tick("workload")
        clock = calibrate()
        tick("clock")
        res = _result(engine, wl, wl_name, clock)
        fresh = _Fresh(engine, wl.config)
        before = {"cpu_time": cpu_times()}
        sums = _measure(res, fresh, cmds, repeat, latency=latency, throughput=throughput,
                        alloc=alloc, gc=gc, tick=tick)
        if len(sums) > 1:
            raise RuntimeError(f"{engine} is not deterministic on {wl_name}: replays gave "
                               f"{len(sums)} different checksums")
        res.checksum = sums.pop() if sums else 0
        res.conditions = run_conditions(seed=getattr(wl, "seed", None),
                                        params=getattr(wl, "params", None))
        res.conditions["gc_enabled"] = bool(gc)  # the state during the measured regions
        if fresh.libs:  # which build ran: the hash of the bytes loaded
            res.conditions["library"] = next(iter(fresh.libs.values()))
        res.conditions["steal_fraction"] = steal_fraction(before, res.conditions)
        ref = (get_engine("reference", wl.config).replay(cmds)
               if latency or throughput or diagnostics else None)
        if latency or throughput:
            _refuse_disagreement(res, ref, engine, wl_name)
        if diagnostics:
            res.diagnostics = diagnose(wl, run=ref)
            tick("diagnostics")
    finally:
        close()
    if out is not None:
        res.save(out)
    return res

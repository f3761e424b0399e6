"""``lob.bench``: latency percentiles, throughput, allocations and run conditions of one
engine on one workload, as one :class:`BenchResult` that prints, serialises and saves.

Order of work: every parameter is checked first (unknown engine or workload, bad repeat,
unwritable output folder raise before anything runs); then the workload is built, the clock
calibrated, the closed-loop latency captured on a fresh engine, the throughput replays run
(fresh engine each), and optionally allocations counted. The checksum of every replay must
agree (a determinism check that costs nothing).
"""

from __future__ import annotations

import gc
import os
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from lob.measure import alloc as _alloc
from lob.measure.clock import ClockCalibration, calibrate
from lob.measure.hgrm import decode, encode, merge, write_hgrm
from lob.measure.latency import LatencyStats, capture_latency, histogram_from
from lob.measure.results import write_result


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


def _check_out(out) -> Path:
    p = Path(out)
    try:
        p.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".lob-write-test", dir=p)
        os.close(fd)
        os.unlink(tmp)
    except OSError as e:
        raise PermissionError(f"output folder {str(p)!r} is not writable: {e}") from None
    return p


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


@dataclass
class LatencyRun:
    """One closed-loop latency capture on a fresh engine (a *run*, in pyperf's terms)."""

    encoded: str  # the run's HDR histogram (lossless, mergeable)
    method: str  # native-tsc | native-loop | python-loop | engine-clock
    clamped: int
    machine: str  # machine_key of the machine that captured it
    checksum: int

    @property
    def histogram(self):
        return decode(self.encoded)

    @property
    def count(self) -> int:
        return int(self.histogram.get_total_count())

    def to_dict(self) -> dict:
        return {"encoded": self.encoded, "method": self.method, "clamped": self.clamped,
                "machine": self.machine, "checksum": str(self.checksum), "count": self.count}

    @classmethod
    def from_dict(cls, d: dict) -> LatencyRun:
        return cls(d["encoded"], d["method"], int(d["clamped"]), d["machine"],
                   int(d["checksum"]))


class MixedRunsError(ValueError):
    """Runs of different engines, workloads, outcomes or machines were about to be merged."""


@dataclass
class BenchResult:
    """Everything one bench measured, with the conditions it ran under (a *benchmark*, in
    pyperf's terms): its latency ``runs`` (one capture each) merged into one histogram, and
    the throughput replays. Runs are only merged when they come from one machine, one engine,
    one workload and agree on the checksum (:meth:`add_run`, :meth:`merge`)."""

    engine: str
    workload: str
    n_commands: int
    n_timed: int
    clock: ClockCalibration
    conditions: dict
    checksum: int
    counters: dict
    workload_meta: dict = field(default_factory=dict)
    runs: list[LatencyRun] = field(default_factory=list)
    throughput: dict | None = None
    alloc: dict | None = None
    diagnostics: dict | None = None

    # --- runs ----------------------------------------------------------------------------
    def add_run(self, run: LatencyRun) -> None:
        """Add one capture; MixedRunsError if it comes from another machine or stream."""
        if self.runs:
            first = self.runs[0]
            if run.machine != first.machine:
                raise MixedRunsError(f"{self.engine} on {self.workload}: a run from machine "
                                     f"{run.machine!r} cannot join runs from {first.machine!r}")
            if run.checksum != first.checksum:
                raise MixedRunsError(f"{self.engine} on {self.workload}: runs disagree on the "
                                     f"checksum ({run.checksum} vs {first.checksum})")
        self.runs.append(run)

    @classmethod
    def merge(cls, results) -> BenchResult:
        """One result holding the runs (and throughput replays) of ``results``: the same
        engine and workload on one machine (MixedRunsError otherwise)."""
        results = list(results)
        if not results:
            raise ValueError("nothing to merge")
        head = results[0]
        out = cls.from_dict(head.to_dict())
        for r in results[1:]:
            if (r.engine, r.workload, r.n_commands) != (head.engine, head.workload,
                                                       head.n_commands):
                raise MixedRunsError(f"cannot merge {r.engine} on {r.workload} into "
                                     f"{head.engine} on {head.workload}")
            if r.conditions.get("machine") != head.conditions.get("machine"):
                raise MixedRunsError(f"cannot merge results from machines "
                                     f"{r.conditions.get('machine')!r} and "
                                     f"{head.conditions.get('machine')!r}")
            for run in r.runs:
                out.add_run(run)
            if r.throughput is not None:
                if out.throughput is None:
                    out.throughput = dict(r.throughput)
                else:
                    out.throughput = _throughput(out.throughput["runs_ns_per_op"]
                                                 + r.throughput["runs_ns_per_op"],
                                                 out.throughput["gc_enabled"],
                                                 out.throughput["ops"])
        return out

    @property
    def histogram(self):
        """The latency histogram of every run merged (lossless: ``hgrm.merge``)."""
        return merge([r.encoded for r in self.runs]) if self.runs else None

    @property
    def latency(self) -> LatencyStats | None:
        if not self.runs:
            return None
        return LatencyStats.of(self.histogram, sum(r.clamped for r in self.runs))

    @property
    def latency_encoded(self) -> str | None:
        return encode(self.histogram) if self.runs else None

    @property
    def capture_method(self) -> str | None:
        return ",".join(dict.fromkeys(r.method for r in self.runs)) if self.runs else None

    def table(self) -> str:
        gc_on = self.conditions.get("gc_enabled")
        lines = [f"{self.engine} on {self.workload}: {self.n_commands:,} commands, "
                 f"{self.n_timed:,} timed; gc {'on' if gc_on else 'off'}"]
        if self.latency is not None:
            lines += ["All values in nanoseconds. Closed-loop service time "
                      f"({self.capture_method}), {len(self.runs)} run(s) merged.",
                      "| Quantile | Latency (ns) |", "|---|---|"]
            lines += [f"| {k} | {v} |" for k, v in self.latency.rows()]
            lines.append(self.clock.line())
        if self.throughput is not None:
            t = self.throughput
            lines.append(f"throughput: {t['min_ns_per_op']:.1f} / {t['median_ns_per_op']:.1f} / "
                         f"{t['max_ns_per_op']:.1f} ns/op (min/median/max of {t['repeat']}), "
                         f"{t['mops_best']:.3f} M ops/s best, gc "
                         f"{'on' if t['gc_enabled'] else 'off'}")
        if self.alloc is not None:
            c = self.alloc.get("counts")
            if c:
                lines.append(f"allocations: {c['allocs_per_op']:.2f} allocs/op, "
                             f"{c['bytes_per_op']:.0f} B/op, {c['frees_per_op']:.2f} frees/op "
                             f"over {c['ops']:,} ops (harness alone "
                             f"{self.alloc['harness_allocs_per_op']:.2f} allocs/op)")
            tr = self.alloc.get("trace")
            if tr:
                top = tr["top_sites"][0]["site"] if tr["top_sites"] else "-"
                lines.append(f"tracemalloc: net {tr['net_bytes']:,} B, "
                             f"peak {tr['peak_bytes']:,} B; top site {top}")
        c = self.conditions
        lines.append(f"conditions: {c.get('cpu_model')}, {c.get('cpu_count')} cores "
                     f"(affinity {c.get('affinity')}), load {c.get('load_avg')}, {c.get('os')}, "
                     f"Python {c.get('python')}, lob {c.get('lob_version')} "
                     f"{(c.get('git_sha') or '?')[:10]}{'+dirty' if c.get('git_dirty') else ''}, "
                     f"{c.get('date_utc')}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        lat = None
        if self.runs:
            lat = {**self.latency.to_dict(), "encoded": self.latency_encoded, "unit": "ns",
                   "capture": self.capture_method, "coordinated_omission_corrected": False,
                   "runs": len(self.runs),
                   "histogram": {"lowest": 1, "highest": 1_000_000_000, "significant_figures": 3}}
        return {"kind": "bench", "engine": self.engine, "workload": self.workload,
                "n_commands": self.n_commands, "n_timed": self.n_timed,
                "clock": self.clock.to_dict(), "conditions": self.conditions,
                "checksum": str(self.checksum), "counters": self.counters,
                "workload_meta": self.workload_meta, "latency": lat,
                "runs": [r.to_dict() for r in self.runs],
                "throughput": self.throughput, "alloc": self.alloc,
                "diagnostics": self.diagnostics}

    @classmethod
    def from_dict(cls, d: dict) -> BenchResult:
        """A result back from :meth:`to_dict` (or its saved JSON)."""
        return cls(d["engine"], d["workload"], int(d["n_commands"]), int(d["n_timed"]),
                   ClockCalibration.from_dict(d["clock"]), dict(d["conditions"]),
                   int(d["checksum"]), dict(d["counters"]), dict(d.get("workload_meta") or {}),
                   [LatencyRun.from_dict(r) for r in d.get("runs") or []],
                   d.get("throughput"), d.get("alloc"), d.get("diagnostics"))

    def save(self, out: str | os.PathLike) -> dict[str, Path]:
        """Write ``<engine>__<workload>.hgrm`` and ``.json`` into ``out``; returns the paths."""
        folder = _check_out(out)
        stem = f"{self.engine}__{self.workload}".replace("/", "_")
        paths = {}
        if self.latency_encoded:
            paths["hgrm"] = write_hgrm(self.histogram, folder / f"{stem}.hgrm")
        paths["json"] = write_result(self.to_dict(), folder / f"{stem}.json")
        return paths


def _throughput(ns: list[float], gc_enabled: bool, ops: int) -> dict:
    return {"repeat": len(ns), "min_ns_per_op": min(ns),
            "median_ns_per_op": float(np.median(ns)), "max_ns_per_op": max(ns),
            "mops_best": 1e3 / min(ns), "mops_median": 1e3 / float(np.median(ns)),
            "runs_ns_per_op": list(ns), "gc_enabled": bool(gc_enabled), "ops": int(ops)}


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
    from lob.measure.conditions import machine, machine_key, run_conditions
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
        _check_out(out)

    steps = (2 + repeat * (int(latency) + int(throughput)) + 2 * int(alloc)
             + int(diagnostics))
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=steps, desc=f"{engine} {wl_name}", unit="step", leave=False)

    def tick(what: str) -> None:
        if bar is not None:
            bar.set_postfix_str(what)
            bar.update(1)

    try:
        wl = build()
        cmds = wl.commands
        tick("workload")
        clock = calibrate()
        tick("clock")
        res = BenchResult(engine, wl_name, int(len(cmds)), int(np.count_nonzero(cmds["timed"])),
                          clock, {}, 0, {},
                          workload_meta={"name": getattr(wl, "name", wl_name),
                                         "family": getattr(wl, "family", None),
                                         "seed": getattr(wl, "seed", None),
                                         "params": getattr(wl, "params", {}),
                                         "config": wl.config.to_dict(),
                                         "description": getattr(wl, "description", "")})
        sums = set()
        with _gc_state(gc):
            if latency:
                where = machine_key(machine())
                for _ in range(repeat):
                    cap = capture_latency(get_engine(engine, wl.config), cmds)
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
                    r = get_engine(engine, wl.config).replay(cmds)
                    ns.append(r.elapsed_ns / max(1, len(cmds)))
                    sums.add(r.checksum)
                    res.counters = r.counters
                    tick("throughput")
                res.throughput = _throughput(ns, gc, len(cmds))
            if alloc:
                counts = _alloc.count_allocations(get_engine(engine, wl.config), cmds)
                tick("alloc count")
                trace = _alloc.trace_allocations(get_engine(engine, wl.config), cmds)
                tick("tracemalloc")
                res.alloc = {"counts": counts.to_dict(), "trace": trace,
                             "harness_allocs_per_op": _alloc.harness_allocations().allocs_per_op,
                             "method": "PyMem_SetAllocator counting hook (RAW+MEM+OBJ)"}
        if len(sums) > 1:
            raise RuntimeError(f"{engine} is not deterministic on {wl_name}: replays gave "
                               f"{len(sums)} different checksums")
        res.checksum = sums.pop() if sums else 0
        res.conditions = run_conditions(seed=getattr(wl, "seed", None),
                                        params=getattr(wl, "params", None))
        res.conditions["gc_enabled"] = bool(gc)  # the state during the measured regions
        if diagnostics:
            res.diagnostics = diagnose(wl)
            tick("diagnostics")
    finally:
        if bar is not None:
            bar.close()
    if out is not None:
        res.save(out)
    return res

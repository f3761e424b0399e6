"""The result model and its files: :class:`BenchResult` (one engine on one workload: its
latency runs merged losslessly, its throughput replays, allocations, run conditions) and the
versioned JSON records it is saved as, one file per run, written atomically, read into pandas.

A record is a dict with ``schema_version`` (:data:`SCHEMA_VERSION`), ``kind``, the run
``conditions`` (:mod:`lob.measure.conditions`) and the measured figures. Files are written
with sorted keys through a temporary file and ``os.replace``, so a reader never sees half a
file. :func:`load_results` refuses to put results from different machines in one frame
unless asked (``allow_mixed=True``).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from lob.measure.clock import ClockCalibration
from lob.measure.conditions import machine_key
from lob.measure.hgrm import decode, encode, merge, write_hgrm
from lob.measure.latency import LatencyStats

SCHEMA_VERSION = 1


class MixedMachinesError(ValueError):
    """Results from different machines were about to be merged silently."""


def _clean(o):
    """JSON-safe copy: numpy scalars to Python, non-finite floats to None."""
    if isinstance(o, dict):
        return {str(k): _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    if type(o).__name__ == "DataFrame":
        return _clean(o.to_dict(orient="list"))
    if type(o).__name__ in ("Series", "ndarray"):
        return _clean(o.tolist())
    if hasattr(o, "item") and callable(o.item) and getattr(o, "ndim", 1) == 0:
        o = o.item()
    if isinstance(o, float) and not math.isfinite(o):
        return None
    return o


def write_json_atomic(obj: dict, path: str | os.PathLike) -> Path:
    """Write ``obj`` as sorted-key JSON through a temporary file and ``os.replace``."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(_clean(obj), f, sort_keys=True, indent=1)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def write_result(record: dict, path: str | os.PathLike) -> Path:
    """Write one result record (``schema_version`` is set here)."""
    if "conditions" not in record:
        raise ValueError("a result record must carry its run 'conditions'")
    return write_json_atomic({**record, "schema_version": SCHEMA_VERSION}, path)


def read_result(path: str | os.PathLike) -> dict:
    """Read one record, checking its schema version."""
    rec = json.loads(Path(path).read_text())
    v = rec.get("schema_version") if isinstance(rec, dict) else None
    if v != SCHEMA_VERSION:
        raise ValueError(f"{path}: schema_version {v!r} is not {SCHEMA_VERSION} "
                         "(not a lob result, or from another lob version)")
    return rec


def _flatten(d: dict, prefix: str = "", out: dict | None = None) -> dict:
    out = {} if out is None else out
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and k not in ("packages", "params"):
            _flatten(v, key + ".", out)
        else:
            out[key] = v
    return out


_SKIP = ("latency.encoded", "diagnostics", "runs")


def load_results(folder: str | os.PathLike, *, allow_mixed: bool = False, pattern: str = "*.json"):
    """Every result record under ``folder`` (recursively) as a pandas DataFrame, one row each.

    Nested fields are flattened with dots (``latency.p99``, ``throughput.min_ns_per_op``,
    ``conditions.cpu_model``); encoded histograms are left out (read them with
    :func:`read_result`). Raises :class:`MixedMachinesError` when the records come from more
    than one machine and ``allow_mixed`` is false.
    """
    import pandas as pd

    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"results folder {folder} does not exist")
    rows, machines = [], {}
    for p in sorted(folder.rglob(pattern)):
        try:
            rec = read_result(p)
        except (ValueError, json.JSONDecodeError):
            continue  # not a lob result file (manifests, notebooks' own JSON)
        key = machine_key(rec["conditions"])
        machines.setdefault(key, p)
        flat = {k: v for k, v in _flatten(rec).items() if not k.startswith(_SKIP)}
        flat["path"] = str(p)
        flat["machine"] = key
        rows.append(flat)
    if len(machines) > 1 and not allow_mixed:
        listing = "; ".join(f"{k} (e.g. {p})" for k, p in machines.items())
        raise MixedMachinesError(f"results from {len(machines)} machines in {folder}: {listing}. "
                                 "Pass allow_mixed=True to load them together.")
    return pd.DataFrame(rows)


# --- the result of lob.bench -------------------------------------------------------------

def writable_folder(out) -> Path:
    """``out`` as a folder that exists and takes a file; PermissionError naming it otherwise."""
    p = Path(out)
    try:
        p.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".lob-write-test", dir=p)
        os.close(fd)
        os.unlink(tmp)
    except OSError as e:
        raise PermissionError(f"output folder {str(p)!r} is not writable: {e}") from None
    return p


def throughput_summary(ns: list[float], gc_enabled: bool, ops: int) -> dict:
    """Min / median / max ns per op and M ops/s of the throughput replays (one value each)."""
    return {"repeat": len(ns), "min_ns_per_op": min(ns),
            "median_ns_per_op": float(np.median(ns)), "max_ns_per_op": max(ns),
            "mops_best": 1e3 / min(ns), "mops_median": 1e3 / float(np.median(ns)),
            "runs_ns_per_op": list(ns), "gc_enabled": bool(gc_enabled), "ops": int(ops)}



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
                    out.throughput = throughput_summary(out.throughput["runs_ns_per_op"]
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
                     f"(affinity {c.get('affinity')}), load {c.get('load_avg')}"
                     + (f", steal {c['steal_fraction']:.1%} during the measurement"
                        if c.get("steal_fraction") is not None else "")
                     + f", {c.get('os')}, "
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
        folder = writable_folder(out)
        stem = f"{self.engine}__{self.workload}".replace("/", "_")
        paths = {}
        if self.latency_encoded:
            paths["hgrm"] = write_hgrm(self.histogram, folder / f"{stem}.hgrm")
        paths["json"] = write_result(self.to_dict(), folder / f"{stem}.json")
        return paths

"""The driver side of a batch: plan the jobs, skip complete runs, hand the rest to an
executor (:mod:`lob.experiments.executors`) and append each manifest line.

:func:`run_batch` validates every job before the first one runs; each job is run by
:func:`lob.experiments.job.run_job` wherever the executor sends it, and the driver records
it (:func:`record`): a ``complete`` line only when it sees the run's marker. The layout of
the artifacts is described in :mod:`lob.experiments.job`.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import asdict, replace
from pathlib import Path

from lob.engines.registry import foreign_libraries_key
from lob.experiments.executors import open_executor
from lob.experiments.job import (
    MANIFEST,
    MARKER,
    Job,
    RunInterrupted,
    RunRecord,
    default_artifacts,
    is_complete,
    restore_swaps,
    run_id,
)
from lob.experiments.lock import artifacts_lock
from lob.experiments.registry import Experiment, batch_names, get_experiment

# parameters whose values name engines / workloads, and numbers with a range
_ENGINE_KEYS = ("engine", "engines", "counters_engine", "fok_engines")
_WORKLOAD_KEYS = ("workload", "workloads", "scenarios", "tail_scenario")
_AT_LEAST_1 = ("repeat", "runs", "max_runs", "inner", "steps", "n_boot", "top", "batches")


def _names_engines(key: str) -> bool:
    return key in _ENGINE_KEYS or key.endswith(("_engine", "_engines"))


def _is_scale(key: str) -> bool:
    return key in ("scale", "scales") or key.endswith(("_scale", "_scales"))


def check_values(experiment: str, params: dict) -> None:
    """Check what the notebook would only find out after its kernel started: engine and
    workload names are registered (every ``*_engine`` key too), scales are in (0, 100] and
    fit in memory for the workloads they apply to (:func:`lob.workloads.check_scale`),
    counts are >= 1, fractions are > 0, every number is finite, inside dicts and lists too
    (``scale_overrides: {workload: scale}``: a registered workload and a valid scale).
    Raises ``ValueError`` with a one-line message."""
    from lob.engines import engine_names
    from lob.workloads import check_scale, workload_names

    def bad(key, why):
        raise ValueError(f"{experiment}: parameter {key!r} {why}")

    def numbers(key, value):  # every number inside value, with where it sits
        if isinstance(value, dict):
            for k, v in value.items():
                yield from numbers(f"{key}.{k}", v)
        elif isinstance(value, list | tuple):
            for i, v in enumerate(value):
                yield from numbers(f"{key}[{i}]", v)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            yield key, value

    named = [v for k in _WORKLOAD_KEYS for v in (params.get(k) if isinstance(
        params.get(k), list | tuple) else [params.get(k)]) if isinstance(v, str) and v]
    for key, value in params.items():
        values = value if isinstance(value, list | tuple) else [value]
        if _names_engines(key) and params.get("repo", "lob") == "lob":  # else another repo's
            from lob.engines.foreign.adapters import not_built_hint

            known = engine_names()
            for v in values:
                if v in known or (v == "" and key == "engine"):
                    continue
                if not_built_hint(v) is not None:  # a known adapter, not built on this
                    continue  # machine: the notebook runs without it and says so in a line
                bad(key, f"names unknown engine {v!r}; engines: {', '.join(known)}")
        if key in ("start", "end"):  # the ends of a walk along the lineage (bisection)
            from lob.engines.toggles import CHAIN

            if value not in CHAIN:
                bad(key, f"must be a version on the lineage chain {', '.join(CHAIN)}; "
                         f"got {value!r}")
        if key in _WORKLOAD_KEYS:
            known = workload_names()
            for v in values:
                if v not in known:
                    bad(key, f"names unknown workload {v!r}; workloads: {', '.join(known)}")
        if key == "scale_overrides" and isinstance(value, dict):
            known = workload_names()
            for w, v in value.items():
                if w not in known:
                    bad(key, f"names unknown workload {w!r}; workloads: {', '.join(known)}")
                try:
                    check_scale(w, v)
                except ValueError as e:
                    bad(f"{key}.{w}", str(e))
        for where, v in numbers(key, value):
            if isinstance(v, float) and not math.isfinite(v):
                bad(where, f"must be a finite number, got {v}")
            if _is_scale(key):
                if not 0 < v <= 100:
                    bad(where, f"must be in (0, 100] (1.0 = the published size), got {v}")
                # the workloads it applies to: those named, else any (the largest decides)
                for w in named or workload_names():
                    try:
                        check_scale(w, v)
                    except ValueError as e:
                        bad(where, str(e))
            if key in _AT_LEAST_1 and v < 1:
                bad(where, f"must be at least 1, got {v}")
            if key == "fractions" and v <= 0:
                bad(where, f"must hold fractions > 0, got {v}")
            if key == "confidence" and not 0 < v < 1:
                bad(where, f"must be in (0, 1), got {v}")
        if key in _WORKLOAD_KEYS + _ENGINE_KEYS + _AT_LEAST_1 and isinstance(value, list) \
                and not value:
            bad(key, "is an empty list")
    _study_check(experiment, params)


def _study_check(experiment: str, params: dict) -> None:
    """The study's own up-front check of its parameters: its module
    (``lob.studies.<experiment>``) declares a parameters dataclass
    (:class:`lob.studies.study.Shape`), built here from the run's parameters: what its notebook
    would refuse only after its kernel started is refused here, in one line."""
    import importlib
    import importlib.util

    from lob.studies.shape import check_study_parameters

    name = f"lob.studies.{experiment}"
    try:
        found = importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        found = False
    module = importlib.import_module(name) if found else None
    if module is not None and hasattr(module, "SHAPE"):
        try:
            check_study_parameters(module, params)
        except ValueError as e:
            raise ValueError(f"{experiment}: {e}") from None


def plan(names: Iterable[str], preset: str = "default", overrides: dict | None = None,
         artifacts: Path | str | None = None) -> list[Job]:
    """The jobs of a batch, every one validated before anything runs (bad input: ValueError)."""
    art = Path(artifacts or default_artifacts()).resolve()
    jobs: dict[str, Job] = {}  # by run dir: a name given twice is one run, not two racing
    for name in names:
        exp: Experiment = get_experiment(name)
        for params in exp.param_sets(preset, overrides):  # a grid: one job per point
            check_values(name, params)
            libs = foreign_libraries_key(params)
            rid = run_id(name, preset, {**params, **libs})
            jobs.setdefault(str(art / name / rid), Job(
                experiment=name, notebook=str(exp.notebook), preset=preset, params=params,
                run_id=rid, run_dir=str(art / name / rid), artifacts=str(art),
                timeout=exp.timeout, timing=exp.timing,
                libraries=libs.get("foreign_libraries", {})))
    return list(jobs.values())


# manifest lines that could not be written (a full disk), per artifacts folder: written
# before the next line, and printed at the end of the batch if they never could be
_PENDING: dict[str, list[str]] = {}


def _append_manifest(artifacts: Path, rec: RunRecord) -> None:
    """Append the run's line (and any earlier line that could not be written). On an
    OSError the file is cut back to its last whole line and the lines are kept pending."""
    pending = _PENDING.setdefault(str(artifacts), [])
    pending.append(json.dumps(asdict(rec), sort_keys=True) + "\n")
    err = _write_lines(artifacts / MANIFEST, pending)
    if err is None:
        pending.clear()
    else:
        print(f"could not write {artifacts / MANIFEST} ({err}); {len(pending)} manifest "
              "line(s) kept to write later", file=sys.stderr)


def _write_lines(path: Path, lines: list[str]) -> str | None:
    """Append whole lines in one write (lines of concurrent writers never interleave); on an
    OSError cut the file back to its size before (no half line) and return the error."""
    try:
        size = path.stat().st_size
    except OSError:
        size = 0
    try:
        with open(path, "a") as f:
            f.write("".join(lines))
        return None
    except OSError as e:
        try:
            if path.exists():
                os.truncate(path, size)
        except OSError:
            pass
        return e.strerror or str(e)


def _flush_manifest(artifacts: Path) -> int:
    """Lines still pending at the end of a batch: printed whole to stderr (so nothing is
    lost) and counted."""
    pending = _PENDING.get(str(artifacts), [])
    if pending and _write_lines(artifacts / MANIFEST, pending) is None:  # one more try
        pending.clear()
    pending = _PENDING.pop(str(artifacts), [])
    if pending:
        print(f"{len(pending)} line(s) of {artifacts / MANIFEST} could not be written; "
              "here they are, to append by hand:", file=sys.stderr)
        sys.stderr.write("".join(pending))
    return len(pending)


def record(job: Job, rec: RunRecord) -> RunRecord:
    """Driver side: append the run's manifest line (a skipped run has none).

    A run reported complete whose marker the driver cannot see is logged ``failed``: the
    workers wrote somewhere else (the artifacts must be on a filesystem they all share).
    """
    if rec.status == "skipped":
        return rec
    if rec.status == "complete" and not is_complete(Path(job.run_dir)):
        rec.status = "failed"
        rec.error = (f"the run reported complete on {rec.host or '?'} but the driver finds no "
                     f"{MARKER} in {job.run_dir}: is the artifacts directory on a filesystem "
                     "shared by the driver and every worker?")
    _append_manifest(Path(job.artifacts), rec)
    return rec


def run_batch(names: Iterable[str] | None = None, preset: str = "default",
              overrides: dict | None = None, artifacts: Path | str | None = None, *,
              force: bool = False, execute: Callable[[Job], None] | None = None,
              executor: str = "local", scheduler: str | None = None,
              workers: int | None = None, concurrent_timing: bool = False,
              progress: bool = True, lock_wait: float = 0.0) -> int:
    """Run experiments (the default batch when ``names`` is None) at a preset; exit code 0
    if all complete.

    Every job is validated before the first one runs, and complete runs are skipped here.
    ``executor``: ``"local"`` (one after another in this process) or ``"dask"`` (one task per
    run on the Dask scheduler at ``scheduler``, else on a local cluster of ``workers``
    processes; timing runs never overlap on a host unless ``concurrent_timing``; see
    :mod:`lob.experiments.executors`). ``execute`` replaces papermill (tests use it).

    The batch holds the artifacts folder's lock (:mod:`lob.experiments.lock`) throughout;
    if another batch holds it, this one waits up to ``lock_wait`` seconds, then raises
    :class:`~lob.experiments.lock.ArtifactsLocked` naming the holder, having touched nothing.
    """
    from tqdm.auto import tqdm

    jobs = plan(batch_names() if names is None else list(names), preset, overrides,
                artifacts)
    if not jobs:
        raise ValueError("no experiments to run")
    art = Path(jobs[0].artifacts)
    try:
        art.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise ValueError(f"--out {art} is a file, not an artifacts directory") from None
    with artifacts_lock(art, lock_wait) as held:  # for the whole batch
        # first of all: a --force swap killed between its renames is put back
        restore_swaps(art, lambda msg: print(msg, file=sys.stderr))
        jobs = [replace(j, lock_token=held.token) for j in jobs]
        return _drive(jobs, art, preset, force, execute, executor, scheduler, workers,
                      concurrent_timing, progress, tqdm)


def _drive(jobs: list[Job], art: Path, preset: str, force: bool, execute, executor: str,
           scheduler: str | None, workers: int | None, concurrent_timing: bool,
           progress: bool, tqdm) -> int:
    """The batch under its lock: skip complete runs, run the rest, record each."""
    say = print if progress else (lambda *a, **k: None)
    todo = [j for j in jobs if force or not is_complete(Path(j.run_dir))]
    for j in jobs:
        if j not in todo:
            say(f"already complete: {j.run_dir} (use --force to rerun)", file=sys.stderr)
    bar = None
    failed = []
    try:
        with open_executor(executor, scheduler=scheduler, workers=workers,
                           concurrent_timing=concurrent_timing) as runs:
            bar = tqdm(total=len(todo), desc=f"experiments ({preset})", unit="run",
                       disable=not progress or not todo)
            try:
                for job, rec in runs(todo, execute, force):
                    record(job, rec)
                    if rec.status == "failed":
                        failed.append(rec)
                        bar.write(f"FAILED {rec.experiment} {rec.run_id} ({rec.run_dir}):\n"
                                  f"{rec.error[-800:]}")
                    elif progress:
                        bar.write(f"{rec.status}: {rec.run_dir} ({rec.wall_s:.0f} s)",
                                  file=sys.stderr)
                    bar.set_postfix_str(f"{rec.experiment}: {rec.status} {rec.wall_s:.0f}s")
                    bar.update(1)
            except RunInterrupted as e:  # local: the run that was going on is logged
                record(next(j for j in todo if j.run_dir == e.record.run_dir), e.record)
                raise
    finally:
        if bar is not None:
            bar.close()
        lost = _flush_manifest(art)
        _refresh_index(art, say)
    if lost:
        return 1
    if failed:
        print(f"{len(failed)} of {len(jobs)} runs failed: "
              + ", ".join(f"{r.experiment}/{r.run_id}" for r in failed), file=sys.stderr)
    return 1 if failed else 0


def _refresh_index(art: Path, say) -> None:
    """Rewrite ``index.md`` after a batch; a report problem never fails the batch."""
    from lob.experiments.report import write_index

    try:
        say(f"index of the complete runs: {write_index(art)}", file=sys.stderr)
    except Exception as e:  # the runs are recorded; the index is only a view of them
        print(f"could not refresh {art / 'index.md'}: {e}", file=sys.stderr)

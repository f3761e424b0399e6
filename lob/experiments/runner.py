"""The driver side of a batch: plan the jobs, skip complete runs, hand the rest to an
executor (:mod:`lob.experiments.executors`) and append each manifest line.

:func:`run_batch` validates every job before the first one runs; each job is run by
:func:`lob.experiments.job.run_job` wherever the executor sends it, and the driver records
it (:func:`record`): a ``complete`` line only when it sees the run's marker. The layout of
the artifacts is described in :mod:`lob.experiments.job`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from dataclasses import asdict, replace
from pathlib import Path

from lob.experiments.executors import open_executor
from lob.experiments.job import (
    MANIFEST,
    MARKER,
    Job,
    RunInterrupted,
    RunRecord,
    default_artifacts,
    is_complete,
    run_id,
)
from lob.experiments.lock import artifacts_lock
from lob.experiments.registry import Experiment, experiment_names, get_experiment


def plan(names: Iterable[str], preset: str = "default", overrides: dict | None = None,
         artifacts: Path | str | None = None) -> list[Job]:
    """The jobs of a batch, every one validated before anything runs (bad input: ValueError)."""
    art = Path(artifacts or default_artifacts()).resolve()
    jobs: dict[str, Job] = {}  # by run dir: a name given twice is one run, not two racing
    for name in names:
        exp: Experiment = get_experiment(name)
        for params in exp.param_sets(preset, overrides):  # a grid: one job per point
            rid = run_id(name, preset, params)
            jobs.setdefault(str(art / name / rid), Job(
                experiment=name, notebook=str(exp.notebook), preset=preset, params=params,
                run_id=rid, run_dir=str(art / name / rid), artifacts=str(art),
                timeout=exp.timeout, timing=exp.timing))
    return list(jobs.values())


def _append_manifest(artifacts: Path, rec: RunRecord) -> None:
    line = json.dumps(asdict(rec), sort_keys=True) + "\n"
    # one write of one line in append mode: lines never interleave
    with open(artifacts / MANIFEST, "a") as f:
        f.write(line)


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
    """Run experiments (all when ``names`` is None) at a preset; exit code 0 if all complete.

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

    jobs = plan(experiment_names() if names is None else list(names), preset, overrides,
                artifacts)
    if not jobs:
        raise ValueError("no experiments to run")
    with artifacts_lock(jobs[0].artifacts, lock_wait) as held:  # for the whole batch
        jobs = [replace(j, lock_token=held.token) for j in jobs]
        return _drive(jobs, preset, force, execute, executor, scheduler, workers,
                      concurrent_timing, progress, tqdm)


def _drive(jobs: list[Job], preset: str, force: bool, execute, executor: str,
           scheduler: str | None, workers: int | None, concurrent_timing: bool,
           progress: bool, tqdm) -> int:
    """The batch under its lock: skip complete runs, run the rest, record each."""
    todo = [j for j in jobs if force or not is_complete(Path(j.run_dir))]
    bar = tqdm(total=len(jobs), initial=len(jobs) - len(todo), desc=f"experiments ({preset})",
               unit="run", disable=not progress)
    failed = []
    try:
        with open_executor(executor, scheduler=scheduler, workers=workers,
                           concurrent_timing=concurrent_timing) as runs:
            try:
                for job, rec in runs(todo, execute, force):
                    record(job, rec)
                    bar.set_postfix_str(f"{rec.experiment}: {rec.status} {rec.wall_s:.0f}s")
                    bar.update(1)
                    if rec.status == "failed":
                        failed.append(rec)
                        bar.write(f"FAILED {rec.experiment} {rec.run_id} ({rec.run_dir}):\n"
                                  f"{rec.error[-800:]}")
            except RunInterrupted as e:  # local: the run that was going on is logged
                record(next(j for j in todo if j.run_dir == e.record.run_dir), e.record)
                raise
    finally:
        bar.close()
    if failed:
        print(f"{len(failed)} of {len(jobs)} runs failed: "
              + ", ".join(f"{r.experiment}/{r.run_id}" for r in failed), file=sys.stderr)
    return 1 if failed else 0

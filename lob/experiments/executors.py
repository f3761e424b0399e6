"""Where the runs of a batch execute: ``local`` (one after another, in this process) or
``dask`` (one task per run on a ``distributed`` cluster).

An executor is opened as a context manager that yields ``runs(jobs, execute, force)``, an
iterator of ``(job, RunRecord)`` in completion order; the driver (``run_batch``) records
each. Both executors call the same :func:`~lob.experiments.job.run_job`, so the run
folders are the same; only where and when they are written differs.

Dask specifics:

* Timing honesty. A timing run (every experiment unless its YAML says ``timing: false``)
  asks for the worker resource ``timing: 1``, and each host offers one unit: the lob-started
  cluster gives it to one of its workers; on an existing cluster, start exactly one worker
  per host with ``--resources timing=1`` (checked before anything is submitted). So two
  latency measurements never share a host. ``concurrent_timing`` drops the restriction
  (runs are then recorded ``timing_exclusive: false``).
* Failures. A failed notebook is a ``failed`` record, not a task error, so it is not
  retried. A task error outside the notebook (e.g. the filesystem) is retried once
  (``retries=1``); a run whose worker dies is rescheduled once (the lob-started scheduler
  has ``allowed-failures: 1``), then reported ``failed`` with ``KilledWorker``.
"""

from __future__ import annotations

import logging
import os
import sys
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from lob.experiments.job import Job, RunRecord, run_job

Runs = Callable[[list[Job], Callable | None, bool], Iterator[tuple[Job, RunRecord]]]
EXECUTORS = ("local", "dask")
TIMING = "timing"  # the worker resource a timing run needs one unit of


def _local_runs(jobs: list[Job], execute: Callable | None, force: bool
                ) -> Iterator[tuple[Job, RunRecord]]:
    for job in jobs:
        yield job, run_job(job, execute, force)


@contextmanager
def open_executor(name: str = "local", *, scheduler: str | None = None,
                  workers: int | None = None, concurrent_timing: bool = False
                  ) -> Iterator[Runs]:
    """The executor ``name`` ready to run jobs; a lob-started cluster is closed on exit."""
    if name not in EXECUTORS:
        raise ValueError(f"unknown executor {name!r}; executors: {', '.join(EXECUTORS)}")
    if name == "local":
        if scheduler or workers or concurrent_timing:
            raise ValueError("--scheduler, --workers and --concurrent-timing need "
                             "--executor dask")
        yield _local_runs
        return
    if scheduler and workers:
        raise ValueError("--workers sizes the cluster lob starts; with --scheduler the "
                         "cluster is yours (start its workers with `dask worker`)")
    if workers is not None and workers < 1:
        raise ValueError(f"--workers must be at least 1, got {workers}")
    with _client(scheduler, workers or os.cpu_count() or 1) as client:
        def runs(jobs: list[Job], execute: Callable | None, force: bool
                 ) -> Iterator[tuple[Job, RunRecord]]:
            return _dask_runs(client, jobs, execute, force, concurrent_timing)

        yield runs


@contextmanager
def _client(scheduler: str | None, workers: int):
    import dask
    from distributed import Client, Nanny, Scheduler, SpecCluster

    if scheduler:
        try:
            client = Client(scheduler, timeout="15s")
        except (OSError, TimeoutError, ValueError, TypeError) as e:
            why = " ".join(str(e).split()) or type(e).__name__
            raise ValueError(f"cannot reach the Dask scheduler at {scheduler!r} "
                             f"(is it running? start one with `dask scheduler`): {why}"
                             ) from None
        with client:
            print(f"dask: scheduler {scheduler}, dashboard {client.dashboard_link}",
                  file=sys.stderr)
            yield client
        return
    # processes with one thread each: notebooks run side by side without sharing a GIL;
    # one worker of the host holds the single `timing` unit
    spec = {i: {"cls": Nanny, "options": {"nthreads": 1, "host": "127.0.0.1",
                                           "silence_logs": logging.ERROR,
                                           "resources": {TIMING: 1} if i == 0 else {}}}
            for i in range(workers)}
    with dask.config.set({"distributed.scheduler.allowed-failures": 1}):
        cluster = SpecCluster(workers=spec, scheduler={
            "cls": Scheduler, "options": {"host": "127.0.0.1", "dashboard_address": ":0"}},
            silence_logs=logging.ERROR)
    with cluster, Client(cluster) as client:
        client.wait_for_workers(workers, timeout="60s")
        print(f"dask: local cluster of {workers} worker processes, dashboard "
              f"{client.dashboard_link}", file=sys.stderr)
        yield client


def check_timing_workers(workers: dict[str, dict]) -> None:
    """Refuse a cluster on which timing runs could not run, or could overlap on a host.

    ``workers``: the scheduler's worker table (address -> info with ``host`` and
    ``resources``), as in ``Client.scheduler_info()["workers"]``.
    """
    per_host = Counter()
    for info in workers.values():
        per_host[info.get("host", "?")] += (info.get("resources") or {}).get(TIMING, 0)
    if not any(per_host.values()):
        raise ValueError("no Dask worker offers the 'timing' resource, so timing runs could "
                         "never start: start one worker per host with `--resources timing=1` "
                         "(or pass --concurrent-timing)")
    crowded = {h: n for h, n in per_host.items() if n > 1}
    if crowded:
        raise ValueError(f"hosts {crowded} offer more than one 'timing' unit, so their timing "
                         "runs would overlap: give `--resources timing=1` to one worker per "
                         "host (or pass --concurrent-timing)")


def _task(job: Job, execute: Callable | None, force: bool, exclusive: bool) -> RunRecord:
    return run_job(job, execute, force, executor="dask", timing_exclusive=exclusive)


def _dask_runs(client, jobs: list[Job], execute: Callable | None, force: bool,
               concurrent_timing: bool) -> Iterator[tuple[Job, RunRecord]]:
    from distributed import as_completed

    if not jobs:
        return
    if not concurrent_timing and any(j.timing for j in jobs):
        check_timing_workers(client.scheduler_info(n_workers=-1)["workers"])
    futures = {}
    for job in jobs:
        exclusive = job.timing and not concurrent_timing
        fut = client.submit(_task, job, execute, force, exclusive, pure=False, retries=1,
                            key=f"lob-{job.experiment}-{job.run_id}-{uuid.uuid4().hex[:8]}",
                            resources={TIMING: 1} if exclusive else None)
        futures[fut] = job
    try:
        for fut in as_completed(futures):
            job = futures[fut]
            try:
                rec = fut.result()
            except Exception as e:  # lost its worker twice (KilledWorker), or never ran
                rec = RunRecord(experiment=job.experiment, run_id=job.run_id,
                                preset=job.preset, params=job.params, status="failed",
                                run_dir=job.run_dir, executor="dask",
                                timing_exclusive=job.timing and not concurrent_timing,
                                error=f"{type(e).__name__}: {str(e)[-2000:]}")
            yield job, rec
    finally:  # Ctrl-C or an error in the driver: stop what is still queued or running
        client.cancel([f for f in futures if not f.done()])

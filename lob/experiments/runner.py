"""Batch runner: papermill execution, the artifact layout, the manifest, resume after a kill.

Layout, one directory per run::

    artifacts/<experiment>/<run_id>/
        <experiment>.ipynb     the executed notebook
        *.hgrm, *.json, *.png  what the notebook wrote (it gets the directory as ``out_dir``)
        summary.json           the notebook's results + the runner's record and run conditions
        COMPLETE               the marker, written last: a run without it is partial
    artifacts/manifest.jsonl   one line per executed run (params, git sha, status, wall time)

``run_id`` is derived from (experiment, preset, params), so a re-run after an interruption
finds the finished runs (marker present) and skips them, and removes and redoes a partial one.

Two sides, whatever the executor (:mod:`lob.experiments.executors`): :func:`run_job` runs
one :class:`Job` from start to marker wherever it is sent (a picklable top-level function
that never touches the manifest); the driver, :func:`run_batch`, plans, skips complete runs,
hands the rest to the executor and appends each manifest line itself (:func:`record`), a
``complete`` one only when it sees the run's marker. ``execute`` (default
:func:`execute_notebook`) is the step that runs the notebook itself.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from lob.experiments.registry import (
    Experiment,
    experiment_names,
    get_experiment,
    repo_root,
)

MARKER = "COMPLETE"
SUMMARY = "summary.json"
MANIFEST = "manifest.jsonl"
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Job:
    """One (experiment, preset, params) run and where it goes."""

    experiment: str
    notebook: str
    preset: str
    params: dict
    run_id: str
    run_dir: str
    artifacts: str
    timeout: int | None = None
    timing: bool = True  # a latency run: never beside another timing run on its host


@dataclass
class RunRecord:
    """What one job did: the manifest line (``extra``: the notebook's error cell, if any)."""

    experiment: str
    run_id: str
    preset: str
    params: dict
    status: str  # complete | failed | interrupted | skipped
    wall_s: float = 0.0
    git_sha: str = ""
    started: str = ""
    error: str = ""
    run_dir: str = ""
    executor: str = "local"  # local | dask
    host: str = ""  # hostname of the process that ran the notebook
    timing_exclusive: bool = True  # no other timing run shared the host meanwhile
    extra: dict = field(default_factory=dict)


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during a run; carries the run's record so the driver can log it."""

    def __init__(self, rec: RunRecord):
        super().__init__("KeyboardInterrupt")
        self.record = rec


def default_artifacts() -> Path:
    """``artifacts/`` of the checkout (``LOB_ARTIFACTS`` overrides)."""
    return Path(os.environ.get("LOB_ARTIFACTS") or repo_root() / "artifacts")


def run_id(experiment: str, preset: str, params: dict) -> str:
    """Deterministic id: the preset name plus a hash of (experiment, preset, params)."""
    key = json.dumps({"e": experiment, "p": preset, "params": params}, sort_keys=True)
    return f"{preset}-{hashlib.sha256(key.encode()).hexdigest()[:10]}"


def is_complete(run_dir: Path) -> bool:
    return (Path(run_dir) / MARKER).exists()


def git_sha() -> str:
    """HEAD of the checkout, with ``+dirty`` when the work tree has changes ("" outside git)."""
    try:
        root = repo_root()
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=root, capture_output=True, text=True).stdout.strip()
        return sha + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return ""


def run_conditions() -> dict:
    """Run conditions from ``lob.measure.conditions`` when present, else a minimal set."""
    try:
        from lob.measure.conditions import run_conditions as measured
    except ImportError:
        measured = None
    if measured is not None:
        return measured()
    import platform

    return {"source": "lob.experiments fallback", "host": platform.node(),
            "platform": platform.platform(), "machine": platform.machine(),
            "cpu_count": os.cpu_count(), "python": sys.version.split()[0],
            "executable": sys.executable, "git_sha": git_sha(),
            "date": datetime.now(UTC).isoformat(timespec="seconds")}


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


def _kernel_env() -> None:
    # the kernel must import the same lob as this process, installed or not
    src = str(Path(__file__).resolve().parents[2])
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if src not in parts:
        os.environ["PYTHONPATH"] = os.pathsep.join([src, *parts])


def execute_notebook(job: Job) -> None:
    """Run the job's notebook with papermill into its run dir (the default ``execute``)."""
    import papermill as pm

    _kernel_env()
    out = Path(job.run_dir)
    # kernel "python3" resolves to this interpreter: jupyter_client swaps a spec's "python"
    # for sys.executable, and the venv's own kernelspec comes first on its jupyter path
    pm.execute_notebook(job.notebook, str(out / f"{job.experiment}.ipynb"),
                        parameters={**job.params, "out_dir": str(out)},
                        kernel_name="python3", progress_bar=False, log_output=False,
                        cwd=str(Path(job.notebook).parent), execution_timeout=job.timeout)


def _append_manifest(artifacts: Path, rec: RunRecord) -> None:
    line = json.dumps(asdict(rec), sort_keys=True) + "\n"
    # one write of one line in append mode: lines never interleave
    with open(artifacts / MANIFEST, "a") as f:
        f.write(line)


def _finalize(job: Job, rec: RunRecord) -> None:
    out = Path(job.run_dir)
    path = out / SUMMARY
    summary = json.loads(path.read_text()) if path.exists() else {}
    summary["schema_version"] = SCHEMA_VERSION
    summary["run"] = {k: v for k, v in asdict(rec).items()
                      if k not in ("status", "error", "extra")}
    summary["run"]["notebook"] = f"{job.experiment}.ipynb"
    cond = summary.setdefault("conditions", run_conditions())
    if isinstance(cond, dict):  # where it ran is a condition of the measurement
        cond.update(executor=rec.executor, worker_host=rec.host,
                    timing_exclusive=rec.timing_exclusive)
    summary["files"] = sorted(p.name for p in out.iterdir() if p.name != MARKER)
    tmp = out / (SUMMARY + ".tmp")
    tmp.write_text(json.dumps(summary, indent=1, default=str))  # tables keep column order
    tmp.replace(path)
    (out / MARKER).write_text(rec.git_sha + "\n")  # last: the run is complete only now


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def describe_error(exc: BaseException) -> tuple[str, dict]:
    """The error text for the manifest, and details: a notebook error names its cell."""
    ename = getattr(exc, "ename", None)
    if ename is None:  # not papermill's PapermillExecutionError
        return f"{type(exc).__name__}: {str(exc)[-2000:]}", {}
    cell, count = getattr(exc, "cell_index", None), getattr(exc, "exec_count", None)
    tb = _ANSI.sub("", "\n".join(getattr(exc, "traceback", None) or []))
    head = f"{ename}: {exc.evalue} (notebook cell {cell}, In [{count}])"
    return f"{head}\n{tb[-1500:]}", {"ename": ename, "evalue": str(exc.evalue),
                                     "cell_index": cell, "exec_count": count}


def _clear(path: Path, wait_s: float = 10.0) -> None:
    """Remove a run dir; retry while a killed run's orphaned kernel still writes into it."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            shutil.rmtree(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def run_job(job: Job, execute: Callable[[Job], None] | None = None, force: bool = False, *,
            executor: str = "local", timing_exclusive: bool = True) -> RunRecord:
    """Run one job to its marker: skip it if complete, else clear any partial dir and run.

    Writes only the run dir, never the manifest (the driver does: :func:`record`). A failed
    notebook gives a ``failed`` record; Ctrl-C raises :class:`RunInterrupted`. ``executor``
    and ``timing_exclusive`` describe where it runs, for the record and the conditions.
    """
    out = Path(job.run_dir)
    rec = RunRecord(experiment=job.experiment, run_id=job.run_id, preset=job.preset,
                    params=job.params, status="skipped", run_dir=str(out), executor=executor,
                    host=socket.gethostname(), timing_exclusive=timing_exclusive)
    if is_complete(out) and not force:
        return rec
    if out.exists():
        _clear(out)  # a partial (or forced) run: never build on its leftovers
    out.mkdir(parents=True)
    rec.git_sha = git_sha()
    rec.started = datetime.now(UTC).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    try:
        (execute or execute_notebook)(job)
        rec.status = "complete"
    except KeyboardInterrupt as e:
        rec.status, rec.error = "interrupted", "KeyboardInterrupt"
        rec.wall_s = round(time.perf_counter() - t0, 3)
        raise RunInterrupted(rec) from e
    except Exception as e:  # a failed notebook must not stop the batch
        rec.status = "failed"
        rec.error, rec.extra = describe_error(e)
    rec.wall_s = round(time.perf_counter() - t0, 3)
    if rec.status == "complete":
        _finalize(job, rec)
    return rec


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
              progress: bool = True) -> int:
    """Run experiments (all when ``names`` is None) at a preset; exit code 0 if all complete.

    Every job is validated before the first one runs, and complete runs are skipped here.
    ``executor``: ``"local"`` (one after another in this process) or ``"dask"`` (one task per
    run on the Dask scheduler at ``scheduler``, else on a local cluster of ``workers``
    processes; timing runs never overlap on a host unless ``concurrent_timing``; see
    :mod:`lob.experiments.executors`). ``execute`` replaces papermill (tests use it).
    """
    from tqdm.auto import tqdm

    from lob.experiments.executors import open_executor

    jobs = plan(experiment_names() if names is None else list(names), preset, overrides,
                artifacts)
    if not jobs:
        raise ValueError("no experiments to run")
    Path(jobs[0].artifacts).mkdir(parents=True, exist_ok=True)
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

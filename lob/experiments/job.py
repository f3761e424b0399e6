"""The job side of a batch: one run from start to its ``COMPLETE`` marker, and the layout.

Layout, one directory per run::

    artifacts/<experiment>/<run_id>/
        <experiment>.ipynb     the executed notebook
        *.hgrm, *.json, *.png  what the notebook wrote (it gets the directory as ``out_dir``)
        summary.json           the notebook's results + the runner's record and run conditions
        COMPLETE               the marker, written last: a run without it is partial
    artifacts/manifest.jsonl   one line per executed run (params, git sha, status, wall time)

``run_id`` is derived from (experiment, preset, params), so a re-run after an interruption
finds the finished runs (marker present) and skips them, and removes and redoes a partial one.

:func:`run_job` runs one :class:`Job` wherever an executor sends it (a picklable top-level
function that never touches the manifest); ``execute`` (default :func:`execute_notebook`) is
the step that runs the notebook itself. The driver side (plan, manifest, executors) is
:mod:`lob.experiments.runner`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from lob.engines.foreign import crash
from lob.engines.registry import foreign_libraries_key
from lob.measure.conditions import run_conditions
from lob.paths import artifacts_dir, repo_root

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
    lock_token: str = ""  # the batch's hold on the artifacts lock (lob.experiments.lock)
    libraries: dict = field(default_factory=dict)  # foreign libraries at plan time, by hash


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


default_artifacts = artifacts_dir  # the runner's name for it


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


def _kernel_env() -> None:
    # the kernel starts in notebooks/: a relative path in the environment would name another
    # file there, so every path is made absolute against this process's folder first
    from lob.paths import absolute_env

    absolute_env()
    # the kernel must import the same lob as this process, installed or not
    src = str(Path(__file__).resolve().parents[2])
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if src not in parts:
        os.environ["PYTHONPATH"] = os.pathsep.join([src, *parts])


def _with_kernelspec(path: str):
    """The notebook with the kernelspec metadata JupyterLab will find for kernel "python3":
    a differing ``display_name`` makes Lab mark the executed notebook modified on opening."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    try:
        from jupyter_client.kernelspec import get_kernel_spec

        spec = get_kernel_spec("python3")
        nb.metadata["kernelspec"] = {"display_name": spec.display_name,
                                     "language": spec.language, "name": "python3"}
    except Exception:  # no such kernelspec here: papermill reports that itself
        pass
    return nb


def execute_notebook(job: Job) -> None:
    """Run the job's notebook with papermill into its run dir (the default ``execute``)."""
    import papermill as pm

    _kernel_env()
    out = Path(job.run_dir)
    # the kernel marks foreign engine calls, so a crash in one is named (crash.explain); the
    # marker is armed for this kernel only: left set, it would follow this process into later
    # work (a `lob bench` started from here would think a batch is watching it)
    from lob.engines.foreign.library import PIN_ENV

    prev = {k: os.environ.get(k) for k in (crash.ENV, PIN_ENV)}
    crash.arm()
    # the kernel may load only the libraries the run was planned with (their bytes)
    os.environ[PIN_ENV] = json.dumps({i["path"]: i["sha256"] for i in job.libraries.values()
                                      if i.get("sha256")})
    try:
        _papermill(pm, job, out)
    except Exception as e:
        told = crash.explain(e)
        if told is e:
            raise
        raise told from e
    finally:
        for k, v in prev.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _papermill(pm, job: Job, out: Path) -> None:
    # kernel "python3" resolves to this interpreter: jupyter_client swaps a spec's "python"
    # for sys.executable, and the venv's own kernelspec comes first on its jupyter path
    pm.execute_notebook(_with_kernelspec(job.notebook), str(out / f"{job.experiment}.ipynb"),
                        parameters={**job.params, "out_dir": str(out)},
                        kernel_name="python3", log_output=False,
                        cwd=str(Path(job.notebook).parent), execution_timeout=job.timeout,
                        # per-cell progress once a run has taken a few seconds, on a terminal
                        progress_bar={"desc": f"  {job.experiment}", "delay": 3.0,
                                      "leave": False, "disable": None},
                        # the kernel's "running over TCP without encryption" warning: the
                        # kernel listens on loopback only, for this one process
                        extra_arguments=["--IPKernelApp.log_level=ERROR"])


def _finalize(job: Job, rec: RunRecord, out: Path | None = None) -> None:
    """Write ``summary.json`` (through a ``.tmp`` file) and the marker into ``out`` (the
    run dir by default). On an OSError (a full disk) the ``.tmp`` file is removed and the
    error raised: the run has no marker, so it is partial."""
    out = Path(out or job.run_dir)
    try:
        _write_summary(job, rec, out)
    except OSError:
        (out / (SUMMARY + ".tmp")).unlink(missing_ok=True)
        raise


def _write_summary(job: Job, rec: RunRecord, out: Path) -> None:
    path = out / SUMMARY
    summary = json.loads(path.read_text()) if path.exists() else {}
    summary["schema_version"] = SCHEMA_VERSION
    summary["run"] = {k: v for k, v in asdict(rec).items()
                      if k not in ("status", "error", "extra")}
    summary["run"]["notebook"] = f"{job.experiment}.ipynb"
    if job.libraries:  # which library ran, by hash: the one the run was planned with
        summary["run"]["foreign_libraries"] = job.libraries
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
    exc = crash.explain(exc)  # a dead kernel: which foreign engine, signal and command
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
    from lob.experiments.lock import ArtifactsLocked, artifacts_lock, check_token

    if not job.lock_token:  # not sent by a batch: hold the folder's lock for this run
        with artifacts_lock(job.artifacts) as held:
            restore_swaps(job.artifacts)
            return run_job(replace(job, lock_token=held.token), execute, force,
                           executor=executor, timing_exclusive=timing_exclusive)
    out = Path(job.run_dir)
    rec = RunRecord(experiment=job.experiment, run_id=job.run_id, preset=job.preset,
                    params=job.params, status="skipped", run_dir=str(out), executor=executor,
                    host=socket.gethostname(), timing_exclusive=timing_exclusive)
    if is_complete(out) and not force:
        return rec
    try:  # only the batch holding the folder may delete or write a run in it
        check_token(job.artifacts, job.lock_token)
    except ArtifactsLocked as e:
        rec.status, rec.error = "failed", str(e)
        return rec
    # a forced rerun of a complete run goes into a scratch folder and replaces the recorded
    # run only once it is complete: if it fails (or is interrupted) the old run stays
    replacing = is_complete(out)
    work = _scratch(job) if replacing else out
    if work.exists():
        _clear(work)  # a partial run (or an old scratch): never build on its leftovers
    try:
        work.mkdir(parents=True)
    except OSError as e:
        rec.status, rec.error = "failed", f"cannot create {work}: {e}"
        return rec
    rec.git_sha = git_sha()
    rec.started = datetime.now(UTC).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    try:
        (execute or execute_notebook)(replace(job, run_dir=str(work)))
        rec.status = "complete"
    except KeyboardInterrupt as e:
        rec.status, rec.error = "interrupted", "KeyboardInterrupt"
        rec.wall_s = round(time.perf_counter() - t0, 3)
        if replacing:
            _clear(work)
        raise RunInterrupted(rec) from e
    except Exception as e:  # a failed notebook must not stop the batch
        rec.status = "failed"
        rec.error, rec.extra = describe_error(e)
    rec.wall_s = round(time.perf_counter() - t0, 3)
    if rec.status == "complete" and (why := library_changed(job)):
        rec.status, rec.error = "failed", why
    if rec.status == "complete":
        try:
            _finalize(job, rec, work)
            if replacing:
                _swap(work, out)
        except OSError as e:  # a full disk: this run failed, the batch goes on
            rec.status, rec.error = "failed", f"finalizing {work}: {type(e).__name__}: {e}"
    if replacing and work.exists():
        _clear(work)
    return rec


SCRATCH = ".scratch"  # forced reruns are built here (outside the layout the report reads)
RERUNS_SCRATCH = "reruns"  # lob report --reruns builds in .scratch/reruns/new


def library_changed(job: Job) -> str:
    """Why the run mixes builds ("" if it does not): a foreign library it names is no longer
    the file it was planned with (its run id and record name that one)."""
    now = foreign_libraries_key(job.params).get("foreign_libraries", {})
    changed = [f"{n} ({i['path']}: sha256 {str(i['sha256'])[:16]}... at the start, "
               f"{str(now.get(n, {}).get('sha256'))[:16]}... at the end)"
               for n, i in job.libraries.items() if now.get(n) != i]
    if not changed:
        return ""
    return (f"foreign librar{'y' if len(changed) == 1 else 'ies'} changed during the run: "
            f"{'; '.join(changed)}; its figures would mix two builds, so it is not recorded")


def _scratch(job: Job) -> Path:
    """Where a forced rerun is built: outside the ``<experiment>/<run_id>`` layout, so that
    the report never lists it."""
    return Path(job.artifacts) / SCRATCH / job.experiment / job.run_id


def _swap(new: Path, out: Path) -> None:
    """Put the complete run ``new`` in place of the complete run ``out`` (two renames on one
    filesystem; the old run is deleted only after the new one is in place). Killed between
    the renames, ``out`` is missing and its ``.old`` sits beside ``new``:
    :func:`restore_swaps` puts it back before anything else touches the folder."""
    old = new.with_name(new.name + ".old")
    if old.exists():
        if not out.exists():  # a swap killed between its renames: the recorded run is there
            old.rename(out)
        else:
            _clear(old)
    out.rename(old)
    try:
        new.rename(out)
    except OSError:
        old.rename(out)  # put the recorded run back
        raise
    _clear(old)


def restore_swaps(artifacts: Path | str, say=None) -> list[Path]:
    """Undo every swap of ``artifacts`` killed between its two renames (call it under the
    folder's lock, before anything else): a ``.scratch/<experiment>/<run_id>.old`` whose run
    folder is missing goes back in place; one whose run folder is there is a leftover of a
    swap that finished (deleted). Returns the run folders restored."""
    art = Path(artifacts)
    say = say or (lambda msg: None)
    restored = []
    for old in sorted(art.glob(f"{SCRATCH}/*/*.old")):
        out = art / old.parent.name / old.name[: -len(".old")]
        if old.parent.name == RERUNS_SCRATCH:  # lob report --reruns' own swap
            out = art / "reruns"
        try:
            if not out.exists():
                old.rename(out)
                restored.append(out)
                say(f"restored {out} from {old} (a replacement killed between its renames)")
            else:
                _clear(old)
        except OSError as e:
            say(f"could not restore {out} from {old}: {e}")
    return restored


def write_atomic(path: Path | str, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file of this writer's own beside it,
    renamed over ``path`` only once it is whole: a reader (or a full disk) never sees a half
    file, and concurrent writers never share a temporary file. On an OSError the temporary
    file is removed and the error raised; ``path`` is untouched."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path

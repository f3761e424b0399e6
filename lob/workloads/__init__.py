"""Workloads: the seeds' command streams rebuilt exactly, plus lob's own lobster-style streams.

>>> from lob.workloads import build, workload_names
>>> wl = build("cpp_comprehensive", scale=0.01)
>>> len(wl), wl.n_timed, wl.config

Families: ``orderbook_rs`` (seed 000, :mod:`lob.workloads.orderbook_rs`), ``cpp``
(seed 001, :mod:`lob.workloads.cpp_bench`), ``lobster`` (lob's designs after seed 003,
:mod:`lob.workloads.lobster`). Each family module exposes ``WORKLOADS``: name ->
``dict(build, defaults, description, provenance)``; ``build(scale=, seed=, **defaults)``
returns ``(commands, BookConfig)``. Family ``imported``: the files users brought with
``lob data import`` (:mod:`lob.workloads.imported`, read from lob's cache).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from lob.semantics import COMMAND_DTYPE, BookConfig

__all__ = ["Workload", "WorkloadFileError", "WorkloadFileMissing", "build", "describe",
           "workload_names", "spec", "check_scale", "memory_estimate", "MAX_SCALE"]

FORMAT = "lob-workload"
SCHEMA_VERSION = 1
_FAMILIES = (("orderbook_rs", "lob.workloads.orderbook_rs"), ("cpp", "lob.workloads.cpp_bench"),
             ("lobster", "lob.workloads.lobster"), ("real", "lob.workloads.bitstamp"),
             ("imported", "lob.workloads.imported"))


class WorkloadFileError(ValueError):
    """A workload file that is missing, unreadable, truncated, foreign, of another schema or
    inconsistent (every way :meth:`Workload.load` can fail)."""


class WorkloadFileMissing(WorkloadFileError, FileNotFoundError):
    """No file at the path given (also a FileNotFoundError, for callers that expect one)."""


@dataclass(eq=False)
class Workload:
    """A command stream with its book config and where it comes from.

    ``commands`` is a 1-d :data:`~lob.semantics.COMMAND_DTYPE` array; rows with
    ``timed == False`` are pre-loads, warmups and refills that latency capture skips.
    """

    name: str
    family: str
    commands: np.ndarray
    config: BookConfig
    seed: int
    params: dict = field(default_factory=dict)
    description: str = ""
    provenance: str = ""

    def __len__(self) -> int:
        return len(self.commands)

    @property
    def n_timed(self) -> int:
        return int(np.count_nonzero(self.commands["timed"]))

    def __repr__(self) -> str:
        return (f"Workload({self.name!r}, family={self.family!r}, commands={len(self)}, "
                f"timed={self.n_timed}, seed={self.seed:#x}, config={self.config})")

    def _meta(self) -> dict:
        return {"format": FORMAT, "schema_version": SCHEMA_VERSION, "name": self.name,
                "family": self.family, "seed": int(self.seed), "params": self.params,
                "config": self.config.to_dict(), "description": self.description,
                "provenance": self.provenance, "n_commands": len(self.commands),
                "sha256": hashlib.sha256(self.commands.tobytes()).hexdigest()}

    def save(self, path: str | Path) -> Path:
        """Write one ``.npz`` file (commands + JSON metadata with a content hash)."""
        path = Path(path)
        if path.suffix != ".npz":
            path = path.with_suffix(path.suffix + ".npz")
        meta = json.dumps(self._meta(), sort_keys=True)
        with open(path, "wb") as f:
            np.savez(f, commands=self.commands, meta=np.array(meta))
        return path

    @classmethod
    def load(cls, path: str | Path) -> Workload:
        """Read a file written by :meth:`save`; anything else raises :class:`WorkloadFileError`."""
        path = Path(path)
        try:
            z = np.load(path, allow_pickle=False)
        except FileNotFoundError as e:
            raise WorkloadFileMissing(f"{path}: no such workload file") from e
        except Exception as e:  # a directory, a pickle, text, a truncated header, ...
            raise WorkloadFileError(
                f"{path}: not a readable lob workload file (truncated or corrupt?): "
                f"{type(e).__name__}: {e}") from e
        if not isinstance(z, np.lib.npyio.NpzFile):
            raise WorkloadFileError(
                f"{path}: a single numpy array ({getattr(z, 'dtype', type(z).__name__)}), not "
                "a lob workload file (the .npz that Workload.save writes)")
        try:
            with z:
                keys = set(z.files)
                if keys != {"commands", "meta"}:
                    raise WorkloadFileError(
                        f"{path}: not a lob workload file (arrays {sorted(keys)}, "
                        "expected ['commands', 'meta'])")
                meta_s = str(z["meta"][()])
                cmds = z["commands"]
        except WorkloadFileError:
            raise
        except Exception as e:  # corrupt members: BadZipFile, zlib.error, EOFError, ...
            raise WorkloadFileError(
                f"{path}: not a readable lob workload file (truncated or corrupt?): "
                f"{type(e).__name__}: {e}") from e
        try:
            meta = json.loads(meta_s)
        except json.JSONDecodeError as e:
            raise WorkloadFileError(f"{path}: metadata is not valid JSON: {e}") from e
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise WorkloadFileError(f"{path}: metadata does not say format {FORMAT!r}")
        if meta.get("schema_version") != SCHEMA_VERSION:
            raise WorkloadFileError(f"{path}: schema_version {meta.get('schema_version')!r}, "
                                    f"this lob reads {SCHEMA_VERSION}")
        if cmds.dtype != COMMAND_DTYPE:
            raise WorkloadFileError(f"{path}: commands have dtype {cmds.dtype}, expected "
                                    f"lob.semantics.COMMAND_DTYPE {COMMAND_DTYPE}")
        if cmds.ndim != 1 or len(cmds) != meta.get("n_commands"):
            raise WorkloadFileError(f"{path}: commands have shape {cmds.shape}, metadata says "
                                    f"{meta.get('n_commands')} commands")
        if hashlib.sha256(cmds.tobytes()).hexdigest() != meta.get("sha256"):
            raise WorkloadFileError(f"{path}: commands do not match their sha256 (corrupt file)")
        try:
            config = BookConfig.from_dict(meta["config"])
            return cls(meta["name"], meta["family"], cmds, config, int(meta["seed"]),
                       dict(meta["params"]), meta["description"], meta["provenance"])
        except (KeyError, TypeError, ValueError) as e:
            raise WorkloadFileError(f"{path}: bad metadata field: {e!r}") from e


# --- registry ------------------------------------------------------------------------------

_SPECS: dict[str, dict] = {}


def _specs() -> dict[str, dict]:
    if not _SPECS:
        import importlib

        for family, module in _FAMILIES:
            for name, s in importlib.import_module(module).WORKLOADS.items():
                _SPECS[name] = dict(s, family=family)
    return _SPECS


def workload_names() -> list[str]:
    """Every registered workload name."""
    return list(_specs())


def spec(name: str) -> dict:
    """The registry entry of a workload (defaults, description, provenance, family)."""
    specs = _specs()
    if name not in specs:
        raise ValueError(f"unknown workload {name!r}; workloads: {', '.join(specs)}")
    return specs[name]


def _check_params(name: str, defaults: dict, params: dict) -> dict:
    allowed = {"scale": 1.0, **defaults}
    out = dict(allowed)
    for k, v in params.items():
        if k not in allowed:
            raise ValueError(f"unknown parameter {k!r} for workload {name!r}; "
                             f"parameters: {', '.join(allowed)}")
        want = type(allowed[k])
        if isinstance(v, bool) or not isinstance(v, (int, np.integer, float, np.floating)):
            raise TypeError(f"parameter {k!r} of {name!r} must be a number, got "
                            f"{type(v).__name__} ({v!r})")
        if want is int and not isinstance(v, (int, np.integer)):
            raise TypeError(f"parameter {k!r} of {name!r} must be an int, got {v!r}")
        out[k] = want(v)
    if not 0 < out["scale"] <= 100:
        raise ValueError(f"parameter 'scale' must be in (0, 100], got {out['scale']}")
    for k, v in out.items():
        if k != "seed" and v < 0:
            raise ValueError(f"parameter {k!r} of {name!r} must be >= 0, got {v}")
    if not 0 <= out["seed"] < 2**64:
        raise ValueError(f"parameter 'seed' must be in [0, 2**64), got {out['seed']}")
    return out


# --- how large a scale fits ----------------------------------------------------------------

MAX_SCALE = 100.0  # no workload is built larger, whatever the memory
# Memory a run needs per command, all told: building cpp_comprehensive at scale 1 (2 M
# commands) peaks at ~162 B a command (ru_maxrss; the generator's temporaries beside the
# 40-byte rows), and the replay adds its outputs and the book. At scale 100 (200 M commands)
# a notebook ended as "Kernel died" on a 24 GiB machine.
BYTES_PER_COMMAND = 200
_PROBE_SCALE = 0.01
_COUNTS: dict[str, int] = {}


def _commands_per_probe(name: str) -> int | None:
    """Commands of ``name`` at scale 0.01 (built once, cached); None for a recorded stream
    (its size does not grow with scale) or one that cannot be built here."""
    if name not in _COUNTS:
        if spec(name)["family"] in ("real", "imported"):
            return None
        try:
            _COUNTS[name] = len(build(name, scale=_PROBE_SCALE))
        except Exception:  # e.g. data not fetched: build() says so itself, later
            return None
    return _COUNTS[name]


def memory_estimate(name: str, scale: float) -> int | None:
    """Bytes a run of workload ``name`` at ``scale`` needs, estimated: its commands (a linear
    extrapolation from scale 0.01, which overestimates the fixed pre-loads) times
    :data:`BYTES_PER_COMMAND`. None when the size does not grow with scale."""
    n = _commands_per_probe(name)
    return None if n is None else int(n * scale / _PROBE_SCALE * BYTES_PER_COMMAND)


def available_memory() -> int | None:
    """Bytes the machine can give a new process now (``MemAvailable``), None if unknown."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        import os

        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_scale(name: str, scale) -> None:
    """Raise ``ValueError`` (one line) unless workload ``name`` at ``scale`` is in
    (0, :data:`MAX_SCALE`] and its :func:`memory_estimate` fits in the memory available now.
    Scales up to 1 (the published sizes) are not estimated: they fit any machine lob runs
    on. The experiments runner calls this before any kernel starts."""
    spec(name)
    if isinstance(scale, bool) or not isinstance(scale, (int, float, np.integer, np.floating)) \
            or not 0 < scale <= MAX_SCALE:
        raise ValueError(f"scale of {name!r} must be a number in (0, {MAX_SCALE:g}], got "
                         f"{scale!r}")
    if scale <= 1:
        return
    need, have = memory_estimate(name, float(scale)), available_memory()
    if need is not None and have is not None and need > have:
        fits = int(have / need * scale * 100) / 100
        raise ValueError(f"workload {name!r} at scale {scale:g} needs about "
                         f"{need / 2**30:.1f} GiB ({need // BYTES_PER_COMMAND:,} commands x "
                         f"~{BYTES_PER_COMMAND} B), more than the {have / 2**30:.1f} GiB "
                         f"available; at most scale ~{fits:g} here")


def build(name: str, **params) -> Workload:
    """Build a workload: ``scale`` (1.0 = published size), ``seed`` and its own parameters.
    A scale whose memory need exceeds what is available is refused first
    (:func:`check_scale`)."""
    if not isinstance(name, str):
        raise TypeError(f"workload name must be a str, got {type(name).__name__}")
    s = spec(name)
    p = _check_params(name, s["defaults"], params)
    check_scale(name, p["scale"])
    cmds, config = s["build"](**p)
    return Workload(name, s["family"], cmds, config, p["seed"], p, s["description"],
                    s["provenance"])


def describe(name: str, *, sample_every: int | None = None, **params) -> str:
    """Parameters, provenance and a diagnostics summary of a workload, as text."""
    from lob.workloads.diagnostics import diagnose, summary_text

    wl = build(name, **params)
    head = [f"{wl.name}  ({wl.family})", f"  {wl.description}", f"  provenance: {wl.provenance}",
            f"  params: {wl.params}", f"  config: {wl.config}",
            f"  commands: {len(wl):,} ({wl.n_timed:,} timed)"]
    extra = spec(name).get("describe")  # a family's own notes (e.g. a real stream's conversion)
    if extra is not None:
        head.append(extra(wl))
    return "\n".join(head) + "\n" + summary_text(diagnose(wl, sample_every=sample_every))

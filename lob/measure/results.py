"""Versioned result records: one JSON file per run, written atomically, read into pandas.

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
from pathlib import Path

from lob.measure.conditions import machine_key

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

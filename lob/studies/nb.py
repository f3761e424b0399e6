"""Helpers the notebooks call to leave their record in the run directory.

``out_dir`` is the notebook's run folder. The runner sets it to a fresh
``artifacts/<experiment>/<run_id>/``; a notebook run any other way (opened in JupyterLab
from ``notebooks/`` or from an executed run, nbval, papermill by hand) never touches a
recorded run: :func:`run_dir` gives it a new ``artifacts/<experiment>/interactive-<time>/``
unless ``out_dir`` names a folder that is not complete. ``summary.json`` holds the
notebook's tables (records), its computed conclusion and the names of its key table and
plot; the runner adds the run record and conditions.
"""

from __future__ import annotations

import json
import shlex
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd


MARKER = "COMPLETE"  # lob.experiments.job.MARKER (not imported: notebooks import this lightly)


def _interactive_dir(parent: Path) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    parent.mkdir(parents=True, exist_ok=True)
    for i in range(1000):  # two runs in one second get -1, -2, ...
        p = parent / (f"interactive-{stamp}" + (f"-{i}" if i else ""))
        try:
            p.mkdir()
            return p
        except FileExistsError:
            continue
    raise FileExistsError(f"no free interactive-{stamp}-N folder in {parent}")


def _rerun_hint(run: Path, experiment: str) -> str:
    try:
        meta = json.loads((run / "summary.json").read_text()).get("run") or {}
    except (OSError, ValueError):
        meta = {}
    params = [f"-p {shlex.quote(k + '=' + json.dumps(v, separators=(',', ':')))}"
              for k, v in (meta.get("params") or {}).items()]
    preset = meta.get("preset") or run.name.split("-")[0]
    return " ".join(["lob experiments run", experiment, "--preset", preset, *params, "--force"])


def run_dir(out_dir: str, experiment: str, artifacts: str | Path | None = None) -> Path:
    """The folder this run writes into; a complete (recorded) run is never written again.

    * ``out_dir`` empty: a new ``<artifacts>/<experiment>/interactive-<UTC time>/``
      (``artifacts``: default ``artifacts/`` of the checkout, ``LOB_ARTIFACTS`` overrides).
    * ``out_dir`` a folder without the ``COMPLETE`` marker (the runner's fresh run folder,
      or your own): that folder.
    * ``out_dir`` a complete run (an executed notebook opened from ``artifacts/`` keeps its
      run folder in its parameters): refused; a note says how to rerun the recorded run and
      a new ``interactive-<time>/`` beside it is used instead.
    """
    if out_dir:
        p = Path(out_dir).expanduser()
        if p.exists() and not p.is_dir():
            raise NotADirectoryError(f"out_dir {p} is a file, not a run folder")
        if not (p / MARKER).exists():
            p.mkdir(parents=True, exist_ok=True)
            return p
        fresh = _interactive_dir(p.parent)
        print(f"{p} holds a complete recorded run: it is never rewritten. This run writes to "
              f"{fresh} instead. To redo the recorded run: {_rerun_hint(p, experiment)}",
              file=sys.stderr)
        return fresh
    if artifacts is None:
        from lob.paths import artifacts_dir

        artifacts = artifacts_dir()
    fresh = _interactive_dir(Path(artifacts) / experiment)
    print(f"interactive run: writing to {fresh}", file=sys.stderr)
    return fresh


def save_figure(fig, out: Path, name: str) -> str:
    """Save a matplotlib figure as ``<name>.png`` in ``out``; returns the file name."""
    fname = f"{name}.png"
    fig.savefig(Path(out) / fname, dpi=110, bbox_inches="tight")
    return fname


def write_summary(out: Path, *, tables: dict, conclusion: str, key_table: str,
                  plots: list[str], **extra) -> Path:
    """Write ``summary.json``: tables as lists of records (DataFrames are converted)."""
    recs = {}
    for name, t in tables.items():
        if hasattr(t, "to_json"):  # a DataFrame: keep a meaningful index as columns
            if type(t.index).__name__ != "RangeIndex":
                t = t.reset_index()
            t = json.loads(t.to_json(orient="records"))
        recs[name] = t
    if key_table not in recs:
        raise ValueError(f"key_table {key_table!r} is not one of {sorted(recs)}")
    path = Path(out) / "summary.json"
    path.write_text(json.dumps({"tables": recs, "conclusion": conclusion,
                                "key_table": key_table, "plots": plots, **extra},
                               indent=1, default=str))  # keep column order
    return path


# --- readers of lob.bench results, shaped for tables ---------------------------------------

def bench_row(res) -> dict:
    """A BenchResult as one flat row: percentiles (ns), throughput ns/op, allocs/op."""
    d = res.to_dict() if hasattr(res, "to_dict") else dict(res)
    lat = d.get("latency") or {}
    thr = d.get("throughput") or {}
    counts = (d.get("alloc") or {}).get("counts") or {}
    return {"p50": lat.get("p50"), "p90": lat.get("p90"), "p99": lat.get("p99"),
            "p99.9": lat.get("p99_9"), "p99.99": lat.get("p99_99"), "max": lat.get("max"),
            "mean": lat.get("mean"), "count": lat.get("count"),
            "ns_op_min": thr.get("min_ns_per_op"), "ns_op_median": thr.get("median_ns_per_op"),
            "allocs_per_op": counts.get("allocs_per_op"),
            "bytes_per_op": counts.get("bytes_per_op"),
            "clock_overhead_ns": (d.get("clock") or {}).get("overhead_median_ns")}


def per_op_latency(engine: str, wl) -> pd.DataFrame:
    """Closed-loop latency of every timed op with what it did: fills, levels walked, depth."""
    import numpy as np
    import pandas as pd

    from lob.engines.registry import get_engine
    from lob.measure.latency import capture_latency
    from lob.workloads.diagnostics import diagnose

    cap = capture_latency(get_engine(engine, wl.config), wl.commands)
    cmds = wl.commands
    timed = np.flatnonzero(cmds["timed"])
    outs = cap.replay.outcomes
    fills = cap.replay.fills
    # levels walked: distinct maker prices per taker id
    lv = pd.DataFrame(fills).groupby("taker")["price"].nunique() if len(fills) else pd.Series()
    ids = outs["id"][timed]
    series = diagnose(wl)["series"]
    depth = np.interp(timed, series["op"], series["resting"])
    return pd.DataFrame({"op": timed, "kind": cmds["kind"][timed], "otype": cmds["otype"][timed],
                         "latency_ns": cap.durations_ns[:len(timed)],
                         "fills": outs["fills"][timed], "removed": outs["removed"][timed],
                         "levels": lv.reindex(ids).fillna(0).to_numpy().astype(int),
                         "depth": depth})


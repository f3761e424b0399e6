"""``lob compare A B``: two sets of results side by side, metric by metric, with the noise.

A and B are each a result JSON, a folder of them (a run folder, searched recursively) or an
experiment run id (``artifacts/<experiment>/<run_id>/``). For every (engine, workload) pair
found on both sides and every metric both sides carry (ns/op, p50, p99, p99.9, allocs/op),
the table gives both medians, the ratio B/A, a bootstrap confidence interval of that ratio
from the repeat-level values, and a verdict in the manner of pyperf's ``compare_to``:
the one change call of :func:`lob.measure.stats.change` (``faster`` / ``slower`` / ``within
noise`` / ``inconclusive``). When a side holds fewer values than an interval of the stated
coverage needs (one latency capture, one allocation count, two repeats) there is no interval
and the verdict is ``inconclusive`` rather than an invented one.

Repeat-level values: each throughput replay of a bench result (``runs_ns_per_op``), each
latency run's own percentiles when the result keeps its runs (``runs[i].encoded``), and
otherwise one value per result file for the figures a result holds once (its merged latency
percentiles, its allocation count). Several result files of the same pair on one side are
pooled.

The interval covers the noise between the repeats of each side, not the drift between the
two sessions: results measured at different times can differ beyond it (two back-to-back
``lob bench`` runs of the same code on a loaded 2-core machine gave ns/op x0.80, CI
0.65-0.93). ``threshold`` adds a margin; ``lob bisect`` interleaves the candidates instead.

Results from different machines (:func:`lob.measure.conditions.machine_key`: hostname,
CPU model, core count and OS) are refused unless ``allow_mixed``: a ratio across machines
measures the machines. Results of one (engine, workload) made with different workload
parameters (scale, seed, ...) or records of different ``schema_version`` are refused unless
``allow_different`` (then listed under the table): a ratio across scales measures the scales.
Results of one (engine, workload) whose replays disagree (checksum or counters: what the
engine did) are always refused (:class:`ResultsDisagreeError`): an engine that never rests
an order is not "faster" than one that trades.
Files that are not readable results (a truncated JSON, a run's summary.json) are dropped and
listed; pairs and metrics found on one side only are listed, and ``--fail-above`` fails on
them and on unreadable files (a gate passes only on what it saw). All metrics here are
costs, so a ratio above 1 is ``slower`` (worse).

>>> from lob.measure.compare import compare
>>> c = compare("artifacts/bench-before", "artifacts/bench-after")
>>> print(c.markdown()); c.plot("compare.png")
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from lob.measure.conditions import machine_key
from lob.measure.results import SCHEMA_VERSION, MixedMachinesError
from lob.measure.stats import change, ratio_interval
from lob.paths import artifacts_dir

# metric key -> label; every one is a cost (lower is better)
METRICS = {"ns_per_op": "ns/op", "p50": "p50", "p99": "p99", "p99_9": "p99.9",
           "allocs_per_op": "allocs/op"}
_ALIASES = {**{k: k for k in METRICS}, **{v: k for k, v in METRICS.items()},
            "ns/op": "ns_per_op", "p99.9": "p99_9", "allocs": "allocs_per_op"}


def metric_key(name: str) -> str:
    """The canonical key of a metric name (``ns/op`` -> ``ns_per_op``, ``p99.9`` -> ``p99_9``)."""
    try:
        return _ALIASES[name]
    except KeyError:
        raise ValueError(f"unknown metric {name!r}; metrics: {', '.join(METRICS.values())}"
                         ) from None


# --- reading the two sides --------------------------------------------------------------

def resolve(spec: str | os.PathLike) -> list[Path]:
    """The result JSON files of one side: a file, a folder (recursively) or a run id."""
    p = Path(spec)
    if p.is_file():
        return [p]
    if not p.is_dir():  # an experiment run id: artifacts/<experiment>/<run_id>/
        art = artifacts_dir()
        hits = sorted(d for d in art.glob(f"*/{spec}") if d.is_dir()) if art.is_dir() else []
        if len(hits) > 1:
            raise ValueError(f"run id {spec!r} names {len(hits)} runs: "
                             + ", ".join(str(h) for h in hits))
        if not hits:
            raise FileNotFoundError(f"{spec!r} is neither a result file, a folder nor a run id "
                                    f"under {art}")
        p = hits[0]
    return sorted(f for f in p.rglob("*.json") if f.is_file())


def _records(files: list[Path]) -> tuple[list[tuple[Path, dict]], list[tuple[Path, str]]]:
    """The lob result records among ``files``, and the files dropped with the reason: an
    unreadable one (``unreadable: ...``: truncated, not JSON) or a JSON that is not a
    result (``not a result``: e.g. a run's summary.json)."""
    out, dropped = [], []
    for f in files:
        try:
            rec = json.loads(f.read_text())
        except (OSError, ValueError) as e:
            dropped.append((f, f"unreadable: {type(e).__name__}: {e}"))
            continue
        if isinstance(rec, dict) and rec.get("engine") and rec.get("workload") \
                and isinstance(rec.get("conditions"), dict):
            out.append((f, rec))
        else:
            dropped.append((f, "not a result (no engine, workload and conditions)"))
    return out, dropped


def workload_identity(rec: dict) -> str:
    """What makes two results of one (engine, workload) comparable: the workload's
    parameters (scale, its own) and seed, as recorded (run conditions, else the workload
    metadata), as a short text (``"?"`` when the record does not say)."""
    cond = rec.get("conditions") or {}
    meta = rec.get("workload_meta") or {}
    params = cond.get("params", meta.get("params"))
    seed = cond.get("seed", meta.get("seed"))
    if params is None and seed is None:
        return "?"
    params = {k: v for k, v in (params or {}).items() if k != "seed"}
    return ", ".join([f"{k}={params[k]}" for k in sorted(params)] + [f"seed={seed}"])


def output_identity(rec: dict) -> str | None:
    """What the engine did on the workload, as the record says it: the replay's checksum and
    counters (trades, fills, ...) as a short text; None when the record keeps neither."""
    checksum, counters = rec.get("checksum"), rec.get("counters")
    if checksum is None and not counters:
        return None
    parts = [f"checksum {checksum}"] if checksum is not None else []
    if isinstance(counters, dict) and counters:
        parts.append(", ".join(f"{k}={counters[k]}" for k in sorted(counters)))
    return "; ".join(parts)


def _num(x):
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) \
        and math.isfinite(x) else None


def metric_values(rec: dict) -> dict[str, list[float]]:
    """Repeat-level values of each metric one result record carries."""
    out: dict[str, list[float]] = {}
    runs = rec.get("runs")  # a run/benchmark record: one latency capture per run
    if isinstance(runs, list) and runs and all(isinstance(r, dict) for r in runs):
        for r in runs:
            if r.get("encoded"):  # the run's own histogram: its percentiles
                from lob.measure.hgrm import decode

                h = decode(r["encoded"])
                if h.get_total_count():
                    for k, q in (("p50", 50.0), ("p99", 99.0), ("p99_9", 99.9)):
                        out.setdefault(k, []).append(float(h.get_value_at_percentile(q)))
            for k in METRICS:
                v = _num(r.get(k))
                if v is not None:
                    out.setdefault(k, []).append(v)
    thr = rec.get("throughput") or {}
    if "ns_per_op" not in out:
        vals = [_num(v) for v in thr.get("runs_ns_per_op") or []]
        vals = [v for v in vals if v is not None]
        if not vals and _num(thr.get("min_ns_per_op")) is not None:
            vals = [float(thr["min_ns_per_op"])]
        if vals:
            out["ns_per_op"] = vals
    lat = rec.get("latency") or {}
    for k in ("p50", "p99", "p99_9"):
        v = _num(lat.get(k))
        if k not in out and v is not None:
            out[k] = [v]
    counts = (rec.get("alloc") or {}).get("counts") or {}
    v = _num(counts.get("allocs_per_op"))
    if "allocs_per_op" not in out and v is not None:
        out["allocs_per_op"] = [v]
    return out


@dataclass
class Side:
    """One side of a comparison: its values per (engine, workload) and metric."""

    spec: str
    files: list[Path]
    values: dict[tuple[str, str], dict[str, list[float]]] = field(default_factory=dict)
    machines: set = field(default_factory=set)
    dropped: list[tuple[Path, str]] = field(default_factory=list)  # (file, why)
    workloads: dict[tuple[str, str], set] = field(default_factory=dict)  # pair -> identities
    schemas: set = field(default_factory=set)  # schema_version of every record
    outputs: dict[tuple[str, str, str], set] = field(default_factory=dict)  # what it did

    @property
    def unreadable(self) -> list[tuple[Path, str]]:
        return [(f, why) for f, why in self.dropped if why.startswith("unreadable")]


def load_side(spec) -> Side:
    files = resolve(spec)
    recs, dropped = _records(files)
    if not recs:
        raise ValueError(f"{spec}: no lob result JSON found (looked at {len(files)} files"
                         + (f"; dropped: {_dropped_text(dropped)}" if dropped else "") + ")")
    side = Side(str(spec), [f for f, _ in recs], dropped=dropped)
    for _, rec in recs:
        side.machines.add(machine_key(rec["conditions"]))
        side.schemas.add(rec.get("schema_version"))
        key = (str(rec["engine"]), str(rec["workload"]))
        side.workloads.setdefault(key, set()).add(workload_identity(rec))
        if (out := output_identity(rec)) is not None:  # per workload identity: another
            side.outputs.setdefault((*key, workload_identity(rec)), set()).add(out)  # seed
            # or scale may do other work; that difference is --allow-different's
        pair = side.values.setdefault(key, {})
        for k, vals in metric_values(rec).items():
            pair.setdefault(k, []).extend(vals)
    return side


def _dropped_text(dropped: list[tuple[Path, str]], limit: int = 5) -> str:
    shown = "; ".join(f"{f.name} ({why[:120]})" for f, why in dropped[:limit])
    return shown + (f"; and {len(dropped) - limit} more" if len(dropped) > limit else "")


class ResultsDisagreeError(ValueError):
    """The two sides' replays of one (engine, workload) did different things (checksums or
    counters differ): never compared, whatever is allowed."""


class MixedWorkloadsError(ValueError):
    """Results of different workload parameters, seeds or schema versions were about to be
    compared silently."""


@dataclass
class Comparison:
    """The rows of a comparison (a DataFrame) and what it was made from."""

    a: Side
    b: Side
    rows: object  # pandas.DataFrame
    threshold: float
    confidence: float
    mixed: bool
    unseen: list[str] = field(default_factory=list)  # what one side has and the other not
    different: list[str] = field(default_factory=list)  # allowed differences, said

    def markdown(self) -> str:
        lines = [f"A: {self.a.spec} ({len(self.a.files)} results)  ",
                 f"B: {self.b.spec} ({len(self.b.files)} results)  ",
                 f"ratio = median B / median A; {self.confidence:.0%} bootstrap interval over "
                 f"repeat-level values; a change is called when the interval clears "
                 f"1 +/- {self.threshold:.0%}" + ("; MIXED MACHINES" if self.mixed else ""), "",
                 "| engine | workload | metric | A | B | ratio | CI | n A/B | verdict |",
                 "|---|---|---|---:|---:|---:|---|---|---|"]
        for r in self.rows.itertuples():
            ci = "-" if r.ci_low is None or (isinstance(r.ci_low, float)
                                             and math.isnan(r.ci_low)) \
                else f"{r.ci_low:.3f}-{r.ci_high:.3f}"
            lines.append(f"| {r.engine} | {r.workload} | {METRICS[r.metric]} | {r.a:.4g} | "
                         f"{r.b:.4g} | {r.ratio:.3f} | {ci} | {r.n_a}/{r.n_b} | {r.verdict} |")
        counts = self.rows.verdict.value_counts().to_dict() if len(self.rows) else {}
        lines += ["", "summary: " + (", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
                                     or "nothing in common")]
        for side, name in ((self.a, "A"), (self.b, "B")):
            if side.dropped:
                lines.append(f"dropped from {name}: {len(side.dropped)} file(s): "
                             + _dropped_text(side.dropped))
        if self.unseen:
            lines.append(f"not compared (on one side only): {'; '.join(self.unseen)}")
        if self.different:
            lines.append(f"DIFFERENT (allowed): {'; '.join(self.different)}")
        return "\n".join(lines)

    def over(self, ratio: float, verdicts=("slower",)):
        """Rows worse than ``ratio`` (B/A) whose verdict is in ``verdicts`` (by default only
        ``slower``: a change beyond noise; a single value cannot show that, as in pyperf)."""
        r = self.rows
        return r[(r.ratio > ratio) & r.verdict.isin(list(verdicts))]

    def plot(self, path: str | os.PathLike) -> Path:
        """A forest plot of the ratios with their intervals (PNG)."""
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt

        r = self.rows
        n = max(1, len(r))
        fig, ax = plt.subplots(figsize=(8, 1.2 + 0.35 * n))
        colors = {"slower": "tab:red", "faster": "tab:green", "within noise": "grey",
                  "inconclusive": "tab:orange"}
        for i, row in enumerate(r.itertuples()):
            c = colors[row.verdict]
            if row.ci_low is not None and not (isinstance(row.ci_low, float)
                                               and math.isnan(row.ci_low)):
                ax.plot([row.ci_low, row.ci_high], [i, i], color=c, lw=2)
            ax.plot([row.ratio], [i], "o", color=c)
        ax.axvline(1, color="k", lw=0.8)
        if self.threshold:
            for x in (1 - self.threshold, 1 + self.threshold):
                ax.axvline(x, color="k", lw=0.5, ls=":")
        ax.set_yticks(range(len(r)), [f"{e} / {w} / {METRICS[m]}" for e, w, m in
                                      zip(r.engine, r.workload, r.metric, strict=True)])
        ax.invert_yaxis()
        xs = [x for x in (*r.ratio, *r.ci_low, *r.ci_high) if x and x == x]
        if xs and max(xs) / min(xs) > 4:
            ax.set_xscale("log")
        else:
            ax.ticklabel_format(axis="x", useOffset=False)
        ax.set_xlabel(f"ratio B/A with its {self.confidence:.0%} bootstrap interval")
        ax.set_title(f"{Path(self.b.spec).name} vs {Path(self.a.spec).name}: red slower, "
                     "green faster, grey within noise, orange inconclusive", fontsize=9)
        fig.tight_layout()
        path = Path(path)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return path


def compare(a, b, *, metrics=None, allow_mixed: bool = False, allow_different: bool = False,
            threshold: float = 0.05, confidence: float = 0.95, n_boot: int = 2000,
            seed: int = 1) -> Comparison:
    """Compare result sets ``a`` (before) and ``b`` (after); see the module docstring.

    Raises :class:`~lob.measure.results.MixedMachinesError` when the two sides (or the files
    within a side) come from different machines and ``allow_mixed`` is false, and
    :class:`MixedWorkloadsError` when the results of one (engine, workload) were made with
    different workload parameters or seeds, or the records have different schema versions,
    and ``allow_different`` is false (allowed, the differences are listed in the table).
    Files that are not readable results are dropped and listed (:attr:`Side.dropped`);
    pairs and metrics found on one side only are listed in :attr:`Comparison.unseen`.
    """
    import pandas as pd

    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    if threshold < 0:
        raise ValueError(f"threshold must be >= 0, got {threshold!r}")
    keys = [metric_key(m) for m in metrics] if metrics else list(METRICS)
    sa, sb = load_side(a), load_side(b)
    machines = sa.machines | sb.machines
    if len(machines) > 1 and not allow_mixed:
        listing = "; ".join(sorted(machines))
        raise MixedMachinesError(f"results from {len(machines)} machines ({listing}); a "
                                 "ratio across machines measures the machines. Pass "
                                 "--allow-mixed (allow_mixed=True) to compare anyway.")
    different = []
    schemas = sa.schemas | sb.schemas
    if len(schemas) > 1:
        different.append("schema versions " + ", ".join(sorted(map(str, schemas))))
    elif schemas != {SCHEMA_VERSION}:
        different.append(f"schema version {next(iter(schemas))} (this lob reads "
                         f"{SCHEMA_VERSION})")
    for pair in sorted(set(sa.workloads) & set(sb.workloads)):
        ids = sa.workloads[pair] | sb.workloads[pair]
        if len(ids) > 1:
            different.append(f"{pair[0]}/{pair[1]}: A {' | '.join(sorted(sa.workloads[pair]))}"
                             f" vs B {' | '.join(sorted(sb.workloads[pair]))}")
    disagree = []  # one workload, different answers: a ratio would compare different work
    for key in sorted(set(sa.outputs) | set(sb.outputs)):
        outs = sa.outputs.get(key, set()) | sb.outputs.get(key, set())
        if len(outs) > 1:
            a, b = (" | ".join(sorted(s.outputs.get(key, {"?"}))) for s in (sa, sb))
            disagree.append(f"{key[0]}/{key[1]}: A {a} vs B {b}")
    if disagree:
        raise ResultsDisagreeError(
            "the results disagree on what was done (the replays' checksums or counters "
            "differ), so their timings measure different work: " + "; ".join(disagree)
            + ". An engine that does less is not faster: make the engines agree with "
            "`reference` first.")
    if different and not allow_different:
        raise MixedWorkloadsError(
            "results that measure different things: " + "; ".join(different)
            + ". Pass --allow-different (allow_different=True) to compare anyway.")
    unseen = [f"{e}/{w} only in {name}"
              for name, mine, other in (("A", sa, sb), ("B", sb, sa))
              for e, w in sorted(set(mine.values) - set(other.values))]
    rows = []
    for pair in sorted(set(sa.values) & set(sb.values)):
        va, vb = sa.values[pair], sb.values[pair]
        for k in keys:
            if k not in va or k not in vb:
                if k in va or k in vb or metrics:
                    where = "A" if k in va else "B" if k in vb else "neither side"
                    unseen.append(f"{pair[0]}/{pair[1]}/{METRICS[k]} "
                                  + (f"only in {where}" if where != "neither side"
                                     else "on neither side"))
                continue
            ratio, lo, hi = ratio_interval(va[k], vb[k], n_boot=n_boot,
                                           confidence=confidence, seed=seed)
            rows.append({"engine": pair[0], "workload": pair[1], "metric": k,
                         "a": float(np.median(va[k])), "b": float(np.median(vb[k])),
                         "ratio": ratio, "ci_low": lo, "ci_high": hi, "n_a": len(va[k]),
                         "n_b": len(vb[k]), "verdict": change(lo, hi, threshold)})
    cols = ["engine", "workload", "metric", "a", "b", "ratio", "ci_low", "ci_high", "n_a",
            "n_b", "verdict"]
    return Comparison(sa, sb, pd.DataFrame(rows, columns=cols), threshold, confidence,
                      len(machines) > 1, unseen, different)

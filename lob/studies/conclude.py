"""Tables a reader can trust, and conclusions whose every number comes from the table.

Percentile hygiene
    A percentile q is shown only when the sample count supports it: at least ``10 / (1 - q)``
    samples (p50: 20, p90: 100, p99: 1,000, p99.9: 10,000, p99.99: 100,000). Below that the
    cell holds a marker ``"n<100000"`` (the count it would need), never a number. Warm-up
    samples are dropped and counted (:func:`drop_warmup`); every latency table has a
    ``count`` column and is shown beside the cost of one read of the clock that produced it
    (:func:`clock_line`).

Conclusions
    :class:`Conclusion` holds one formatted table (every cell a string made by :func:`fmt`)
    and sentences built from its cells: :meth:`Conclusion.cell` returns the cell's text, so a
    sentence can only quote what the table shows. :meth:`Conclusion.record` is what a notebook
    stores in ``summary.json`` (``conclusions``: the table, its machine, the text), and
    :func:`check_record` is the test the quick-preset outputs go through: numbers quoted that
    the table does not show, percentiles shown from too few samples, absolute figures of two
    machines in one table.

Machines
    A table's absolute figures come from one machine. A seed's figures sit in a column whose
    name says so (``seed_column``: ``"p50 ns (seed 000, Apple M4 Max)"``); a table holding such
    a column holds no absolute lob figure, only labels, counts and ratios (declared in
    ``kinds``).

Run conditions and latency captures (:class:`RunConditions`, :func:`capture`,
:func:`save_hgrm`) live in :mod:`lob.studies.capture`.

The builders at the bottom (:func:`capacity_bound`, :func:`conclude_extremes`,
:func:`conclude_ratio`, ...) are the reusable sentences; they are unit-tested with synthetic
tables in ``tests/studies/test_conclude.py``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from lob.measure.stats import CLOCK_FLOOR_TICKS, marker, min_count, supported

# --- percentile hygiene ---------------------------------------------------------------------

PCT_COLUMN = re.compile(r"^(?:lat_|latency_|service_)?p(\d+(?:[._]\d+)?)$")
MARKER = re.compile(r"^n<\d+$")


def pct_of(column: str) -> float | None:
    """The percentile a column name stands for (``p99.9``, ``p99_9``, ``lat_p99``), or None."""
    m = PCT_COLUMN.match(column)
    return float(m.group(1).replace("_", ".")) if m else None


def drop_warmup(samples: Sequence, warmup: int) -> tuple[np.ndarray, int]:
    """The samples after the first ``warmup`` ones, and how many were dropped."""
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    a = np.asarray(samples)
    n = min(int(warmup), len(a))
    return a[n:], n


def percentile_row(samples: Sequence, qs: Iterable[float] = (50, 90, 99, 99.9, 99.99), *,
                   warmup: int = 0) -> dict:
    """``count``, ``warmup_dropped``, each supported percentile (else its marker), min, max."""
    kept, dropped = drop_warmup(samples, warmup)
    row: dict = {"count": len(kept), "warmup_dropped": dropped}
    for q in qs:
        name = f"p{q:g}"
        if not len(kept) or not supported(q, len(kept)):
            row[name] = marker(q)
        else:
            row[name] = float(np.percentile(kept, q, method="inverted_cdf"))
    row["min"] = float(kept.min()) if len(kept) else None
    row["max"] = float(kept.max()) if len(kept) else None
    return row


def suppress(records, count: str = "count"):
    """Replace every percentile the row's ``count`` cannot support by its marker.

    ``records``: a pandas DataFrame or a list of dicts (returned in the same form). Percentile
    columns are found by name (:func:`pct_of`); the count column must exist.
    """
    frame = hasattr(records, "to_dict")
    rows = records.to_dict("records") if frame else [dict(r) for r in records]
    cols = list(records.columns) if frame else list(dict.fromkeys(k for r in rows for k in r))
    pcts = {c: pct_of(str(c)) for c in cols if pct_of(str(c)) is not None}
    if pcts and count not in cols:
        raise ValueError(f"a table with percentile columns {sorted(pcts)} needs a {count!r} "
                         "column")
    for r in rows:
        for c, q in pcts.items():
            if not supported(q, r.get(count)) and not _is_marker(r.get(c)):
                r[c] = marker(q)
    if frame:
        import pandas as pd

        return pd.DataFrame(rows, columns=cols, index=records.index)
    return rows


def clock_line(clock: dict | None) -> str:
    """One line for under a latency table: which clock, what one read costs (not subtracted)."""
    if not clock:
        return "Clock: not reported by this engine."
    src = clock.get("source", "?")
    med = clock.get("overhead_median_ns", clock.get("median_ns"))
    lo = clock.get("overhead_min_ns", clock.get("min_ns"))
    res = clock.get("resolution_ns")
    parts = [f"Clock {src}: one read costs {fmt(med)} ns (median"]
    parts.append(f", min {fmt(lo)} ns)" if lo is not None else ")")
    grid = clock.get("grid_ns")
    if res is not None and "grid_ns" not in clock:
        parts.append(f", nominal resolution {fmt(res)} ns")
    line = "".join(parts) + "; included in every sample, never subtracted."
    both = clock.get("clocks") or {}
    if both:
        line += " In-kernel clocks here: " + "; ".join(
            f"{name} a read {fmt(c.get('read_ns'))} ns, resolution {c.get('resolution_ns'):.3g} ns"
            for name, c in both.items()) + "."
    if "grid_ns" not in clock:
        return line + " Its grid was not measured from these samples."
    if grid is None:
        return line + (f" No clock grid shows in the {fmt(clock.get('grid_n'))} durations "
                       "(measured from the samples): they are continuous to the ns.")
    floor = grid * CLOCK_FLOOR_TICKS
    if clock.get("grid_share") is None:  # the clock's known resolution, not fitted
        return line + (f" Each duration is known to {grid:.3g} ns ({clock.get('grid_what')}): "
                       f"a percentile under {CLOCK_FLOOR_TICKS} ticks ({fmt(floor)} ns) is "
                       "known to a tick, 10% or worse, and no ratio of one is judged.")
    nominal = f" (the clock's nominal resolution: {fmt(res)} ns)" if res is not None else ""
    return line + (f" The durations fall on a {grid:.3g} ns grid ({clock['grid_share']:.0%} of "
                   f"{fmt(clock.get('grid_n'))}, measured from the samples){nominal}: a "
                   f"percentile under {CLOCK_FLOOR_TICKS} ticks ({fmt(floor)} ns) is known to a "
                   "tick, 10% or worse, and no ratio of one is judged.")


# --- formatting -----------------------------------------------------------------------------

def _isnan(v) -> bool:
    return isinstance(v, float) and math.isnan(v)


def _is_marker(v) -> bool:
    return isinstance(v, str) and bool(MARKER.match(v))


def fmt(v) -> str:
    """The one number format of tables and conclusions: ints with separators, floats to about
    three significant figures (0.58, 1.87, 13.1, 1,208), None/NaN as ``-``."""
    if v is None or _isnan(v):
        return "-"
    if isinstance(v, bool | np.bool_):
        return "yes" if v else "no"
    if isinstance(v, int | np.integer):
        return f"{int(v):,}"
    if isinstance(v, float | np.floating):
        v = float(v)
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        a = abs(v)
        if a >= 100 or v == int(v) and a >= 10:
            return f"{round(v):,}"
        if a >= 10:
            return f"{v:.1f}"
        if a >= 1:
            return f"{v:.2f}"
        if a == 0:
            return "0"
        return f"{v:.2g}" if a < 0.01 else f"{v:.2f}"
    return str(v)


def seed_column(metric: str, seed: str, machine: str) -> str:
    """The name of a column holding a seed's figure: it names the seed's machine."""
    return f"{metric} ({seed}, {machine})"


NUMBER = re.compile(r"(?<![A-Za-z_@.\d])-?\d[\d,]*(?:\.\d+)?(?=x\b|%|[^\w]|$)")


def numbers_in(text: str) -> set[str]:
    """The numbers a text quotes, normalised (separators dropped); ``v2``, ``p99`` are names."""
    out = set()
    for m in NUMBER.finditer(text):
        s = m.group(0).replace(",", "").rstrip(".")
        if s not in ("", "-"):
            out.add(s.lstrip("-"))
    return out


def markdown(rows: list[dict], columns: list[str] | None = None) -> str:
    """Formatted records as a Markdown table (cells through :func:`fmt`)."""
    if not rows:
        return "_(empty table)_"
    cols = columns or list(dict.fromkeys(k for r in rows for k in r))
    lines = ["| " + " | ".join(str(c) for c in cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(fmt(r.get(c)).replace("|", "\\|") for c in cols) + " |")
    return "\n".join(lines)


# --- conclusions ----------------------------------------------------------------------------

THIS_MACHINE = "this machine"
KINDS = ("label", "count", "ratio", "absolute", "seed")


@dataclass
class Conclusion:
    """One table (formatted) and the sentences drawn from it.

    ``rows``: the table as records (a DataFrame is converted; a meaningful index becomes a
    column). ``key``: the column that names a row (``cell(row_label, column)``). ``kinds``:
    column -> ``label | count | ratio | absolute | seed``; numeric columns default to
    ``absolute``, a column named by :func:`seed_column` to ``seed``. ``machine``: where the
    absolute figures were measured.
    """

    name: str
    rows: list[dict]
    key: str | Sequence[str] | None = None
    kinds: dict[str, str] = field(default_factory=dict)
    machine: str = THIS_MACHINE
    note: str = ""  # one line shown under the table (e.g. the clock's cost per read)
    sentences: list[str] = field(default_factory=list)

    def __post_init__(self):
        if hasattr(self.rows, "to_dict"):
            df = self.rows
            if type(df.index).__name__ != "RangeIndex":
                df = df.reset_index()
            self.rows = df.to_dict("records")
        self.rows = suppress([dict(r) for r in self.rows]) if self._has_pcts() else \
            [dict(r) for r in self.rows]
        self.columns = list(dict.fromkeys(k for r in self.rows for k in r))
        for c in self.columns:
            if c not in self.kinds:
                self.kinds[c] = ("seed" if "(seed" in str(c) else
                                 "count" if str(c) in ("count", "n", "samples") else
                                 "label" if all(isinstance(r.get(c), str | None | bool)
                                                for r in self.rows) else "absolute")
        bad = {c: k for c, k in self.kinds.items() if k not in KINDS}
        if bad:
            raise ValueError(f"unknown column kinds {bad}; kinds: {KINDS}")

    def _has_pcts(self) -> bool:
        return any(pct_of(str(k)) is not None for r in self.rows for k in r)

    # cells
    def _row(self, label) -> dict:
        keys = [self.key] if isinstance(self.key, str) else list(self.key or [])
        if not keys:
            return self.rows[int(label)]
        want = label if isinstance(label, tuple) else (label,)
        for r in self.rows:
            if tuple(r.get(k) for k in keys) == tuple(want):
                return r
        raise KeyError(f"{self.name}: no row {label!r} (key {self.key!r})")

    def cell(self, label, column: str) -> str:
        """The cell's text exactly as the table shows it."""
        if column not in self.columns:
            raise KeyError(f"{self.name}: no column {column!r}")
        return fmt(self._row(label).get(column))

    def value(self, label, column: str):
        """The cell's raw value (for choosing a branch; quote it with :meth:`cell`)."""
        return self._row(label).get(column)

    def say(self, sentence: str) -> Conclusion:
        self.sentences.append(sentence.strip())
        return self

    @property
    def text(self) -> str:
        return " ".join(self.sentences)

    def table_markdown(self) -> str:
        return markdown(self.rows, self.columns)

    def markdown(self) -> str:
        """The table, the note under it, then the conclusion."""
        parts = [f"**{self.name}** ({self.machine})", "", self.table_markdown()]
        if self.note:
            parts += ["", self.note]
        if self.sentences:
            parts += ["", self.text]
        return "\n".join(parts)

    def plain_rows(self) -> list[dict]:
        """The rows with plain Python values (numpy scalars unwrapped, NaN as None): the
        table a notebook stores in ``summary["tables"]`` (markers stay markers)."""
        def plain(v):
            v = v.item() if isinstance(v, np.generic) else v
            return None if _isnan(v) else v
        return [{c: plain(r.get(c)) for c in self.columns} for r in self.rows]

    def record(self) -> dict:
        """What ``summary.json`` keeps (``conclusions``), checked by :func:`check_record`."""
        return {"table": self.name, "machine": self.machine, "kinds": dict(self.kinds),
                "columns": self.columns, "rows": [{c: fmt(r.get(c)) for c in self.columns}
                                                  for r in self.rows],
                "note": self.note, "text": self.text}

    def display(self):  # pragma: no cover - notebook helper
        from IPython.display import Markdown, display

        display(Markdown(self.markdown()))
        return self

    def check(self) -> list[str]:
        return check_record(self.record())


def summary_tables(conclusions: Iterable[Conclusion]) -> dict[str, list[dict]]:
    """``summary["tables"]``: each conclusion's table by name, with plain values."""
    return {c.name: c.plain_rows() for c in conclusions}


def check_record(rec: dict) -> list[str]:
    """Problems of one stored conclusion: [] when it is clean.

    * a number in the text that no cell, header or label of the table (or the note under
      it, e.g. the clock's cost per read) shows;
    * a percentile cell holding a number although the row's ``count`` is below what it needs;
    * a percentile column without a ``count`` column;
    * absolute figures of more than one machine (a seed column beside an absolute lob column).
    """
    problems = []
    rows, cols, kinds = rec["rows"], rec["columns"], rec.get("kinds", {})
    shown = _shown(rec)
    extra = numbers_in(rec.get("text", "")) - shown
    if extra:
        problems.append(f"{rec['table']}: the text quotes {sorted(extra)}, which the table "
                        "does not show")
    pcts = {c: pct_of(str(c)) for c in cols if pct_of(str(c)) is not None}
    if pcts and "count" not in cols:
        problems.append(f"{rec['table']}: percentile columns {sorted(pcts)} without a count")
    elif pcts:
        for r in rows:
            n = _parse_int(r.get("count"))
            for c, q in pcts.items():
                v = r.get(c, "-")
                if v not in ("-", "") and not _is_marker(v) and (n is None or n < min_count(q)):
                    problems.append(f"{rec['table']}: {c} = {v} from {r.get('count')} samples "
                                    f"(needs {min_count(q):,})")
    seed_cols = [c for c in cols if kinds.get(c) == "seed"]
    machines = {c.split(",", 1)[-1].rstrip(")").strip() for c in seed_cols}
    if any(kinds.get(c) == "absolute" for c in cols):
        machines.add(rec.get("machine", THIS_MACHINE))
    if len(machines) > 1:
        problems.append(f"{rec['table']}: absolute figures of {len(machines)} machines in one "
                        f"table ({sorted(machines)})")
    return problems


def _shown(rec: dict) -> set[str]:
    """Every number a stored table shows: headers, cells, machine, the note under it."""
    return numbers_in(" ".join(str(c) for c in rec["columns"]) + " " + rec.get("machine", "")
                      + " " + " ".join(v for r in rec["rows"] for v in r.values()) + " "
                      + rec.get("note", ""))


def _parse_int(s) -> int | None:
    try:
        return int(str(s).replace(",", ""))
    except ValueError:
        return None


def check_summary(summary: dict) -> list[str]:
    """Every stored conclusion of a ``summary.json`` checked, plus its top-level conclusion:
    each of its numbers must come from one of the stored tables."""
    recs = summary.get("conclusions") or []
    problems = [p for r in recs for p in check_record(r)]
    top = summary.get("conclusion", "")
    if recs and top:
        shown = set()
        for r in recs:
            shown |= _shown(r)
        extra = numbers_in(top) - shown
        if extra:
            problems.append(f"conclusion quotes {sorted(extra)}, which no table shows")
    return problems


# --- builders -------------------------------------------------------------------------------

def capacity_bound(capacity: float, ns_per_op: float | Sequence[float]) -> dict:
    """An upper bound on throughput that can never sit below the measured ``capacity``.

    ``ns_per_op``: the closed-loop cost per command of the engine path (one figure or the
    repeats; the fastest is used, since any repeat's rate was reached). Its rate
    ``1e9 / ns_per_op`` bounds capacity only if it is at least the capacity; when it is lower,
    the service-time run was slowed by something the pipeline run did not see (a noisy
    neighbour, a cold path), so the estimate is no bound: the bound is then the measured
    capacity itself and ``source`` says so. Returns ``bound``, ``estimate``, ``source``
    (``"closed-loop"`` | ``"measured capacity"``) and ``headroom`` (bound / capacity).
    """
    runs = [float(x) for x in np.atleast_1d(ns_per_op)]
    if not runs or min(runs) <= 0 or any(math.isnan(x) for x in runs):
        raise ValueError(f"ns_per_op must be positive, got {ns_per_op!r}")
    if not capacity > 0:
        raise ValueError(f"capacity must be positive, got {capacity!r}")
    estimate = 1e9 / min(runs)
    if estimate >= capacity:
        return {"bound": estimate, "estimate": estimate, "source": "closed-loop",
                "headroom": estimate / capacity}
    return {"bound": float(capacity), "estimate": estimate, "source": "measured capacity",
            "headroom": 1.0}


def conclude_capacity(c: Conclusion, *, label: str = "batch", capacity: str = "capacity",
                      bound: str = "bound", source: str = "bound_source") -> Conclusion:
    """Per row: capacity, the bound, and whether the closed-loop estimate held as a bound."""
    keys = [r[label] for r in c.rows]
    for k in keys:
        s = (f"At {label} {c.cell(k, label)} the pipeline kept up with "
             f"{c.cell(k, capacity)} commands/s; ")
        if c.value(k, source) == "closed-loop":
            s += (f"the engine alone, closed loop, bounds it at {c.cell(k, bound)}/s.")
        else:
            s += ("the closed-loop estimate came out below that (it was slowed by something "
                  "the pipeline run did not see), so the bound shown is the measured capacity.")
        c.say(s)
    return c


def conclude_extremes(c: Conclusion, column: str, *, what: str = "", lower_is: str = "lowest",
                      higher_is: str = "highest") -> Conclusion:
    """The rows with the lowest and the highest value of ``column`` (markers skipped)."""
    vals = [(r[column], r) for r in c.rows if isinstance(r.get(column), int | float)
            and not _isnan(r.get(column))]
    what = what or column
    if not vals:
        return c.say(f"No row has a {what} to compare.")
    lo = min(vals, key=lambda t: t[0])[1]
    hi = max(vals, key=lambda t: t[0])[1]
    lab = _label(c)
    if lo is hi:
        return c.say(f"Only {lab(lo)} has a {what}: {fmt(lo[column])}.")
    return c.say(f"The {lower_is} {what} is {lab(lo)}'s ({fmt(lo[column])}); the {higher_is} "
                 f"is {lab(hi)}'s ({fmt(hi[column])}).")


def conclude_ratio(c: Conclusion, label, column: str, *, what: str, pivot: float = 1.0,
                   above: str = "higher", below: str = "lower", band: float = 0.0) -> Conclusion:
    """One ratio cell in words: above / below / within ``band`` of ``pivot``."""
    v = c.value(label, column)
    if v is None or _isnan(v) or _is_marker(v):
        return c.say(f"{what}: not measured.")
    if abs(v / pivot - 1) <= band:
        return c.say(f"{what} is {c.cell(label, column)}, no change beyond the noise band.")
    return c.say(f"{what} is {c.cell(label, column)}, {above if v > pivot else below}.")


def conclude_suppressed(c: Conclusion) -> Conclusion:
    """Name the rows whose tail percentiles are hidden for want of samples."""
    hidden = []
    for r in c.rows:
        cols = [k for k, v in r.items() if pct_of(str(k)) is not None and _is_marker(v)]
        if cols:
            hidden.append(f"{_label(c)(r)} ({', '.join(cols)})")
    if hidden:
        c.say("Percentiles hidden for want of samples: " + "; ".join(hidden) + ".")
    return c


def _label(c: Conclusion):
    keys = [c.key] if isinstance(c.key, str) else list(c.key or [])

    def lab(r: dict) -> str:
        return " / ".join(fmt(r.get(k)) for k in keys) if keys else "row"
    return lab


# run conditions and latency capture live in lob.studies.capture; these names stay here
# for the notebooks and modules that import them from conclude
from lob.studies.capture import (  # noqa: E402,F401
    RunConditions,
    capture,
    conditions_markdown,
    save_hgrm,
)

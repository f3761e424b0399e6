"""The two persistence forms of a latency histogram: ``.hgrm`` text and encoded blobs.

``.hgrm`` is HdrHistogram's percentile-distribution table (``Value Percentile TotalCount
1/(1-Percentile)`` rows, then the ``#[Mean ...]``, ``#[Max ...]``, ``#[Buckets ...]``
footer) that HdrHistogram plotters read. **Values are in nanoseconds** (unit scaling ratio 1).
The standard rows come from ``HdrHistogram.output_percentile_distribution``; lob adds one row
at each reported percentile (50, 90, 99, 99.9, 99.99) so that the file alone gives the exact
figures of the table (rows stay in increasing percentile order, so plotters are unaffected).

The encoded form (``HdrHistogram.encode()``, V2, base64 + zlib) is lossless and mergeable:
store it in result JSON, :func:`decode` it and ``add`` histograms of several runs.
"""

from __future__ import annotations

import io
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from hdrh.histogram import HdrHistogram

from lob.measure.latency import PERCENTILES

UNIT = "ns"


def _value_row(h: HdrHistogram, q: float) -> tuple[int, int]:
    """(value, cumulative count) at percentile ``q`` with ``get_value_at_percentile`` rules."""
    counts = np.ctypeslib.as_array(h.counts)
    cum = np.cumsum(counts, dtype=np.int64)
    target = h.get_target_count_at_percentile(q)
    idx = int(np.searchsorted(cum, target))
    return int(h.get_value_at_percentile(q)), int(cum[idx])


def hgrm_text(h: HdrHistogram, extra_percentiles=PERCENTILES) -> str:
    """The .hgrm text of ``h`` (ns), with exact rows at ``extra_percentiles``."""
    buf = io.BytesIO()
    h.output_percentile_distribution(buf, 1)
    lines = buf.getvalue().decode().splitlines()
    if h.get_total_count() == 0:
        return "\n".join(lines) + "\n"
    head, table, foot = lines[:2], [], []
    for ln in lines[2:]:
        (foot if ln.startswith("#") else table).append(ln)
    sf = h.significant_figures
    rows = [(float(ln.split()[1]), ln) for ln in table if ln.strip()]
    have = {p for p, _ in rows}
    for q in extra_percentiles:
        p = q / 100
        if p in have or p >= 1.0:
            continue
        v, c = _value_row(h, q)
        rows.append((p, f"{v:12.{sf}f} {p:2.12f} {c:10d} {1 / (1 - p):14.2f}"))
    rows.sort(key=lambda r: r[0])  # stable: the library's own row comes first on ties
    return "\n".join(head + [ln for _, ln in rows] + foot) + "\n"


def write_hgrm(h: HdrHistogram, path: str | os.PathLike) -> Path:
    """Write ``h`` as a .hgrm file (atomically); returns the path."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
    with os.fdopen(fd, "w") as f:
        f.write(hgrm_text(h))
    os.replace(tmp, path)
    return path


@dataclass
class Hgrm:
    """A parsed .hgrm file: rows of (value, percentile in 0..1, total count) and the footer."""

    values: np.ndarray
    percentiles: np.ndarray
    total_counts: np.ndarray
    mean: float
    stddev: float
    max: float
    total_count: int

    def frame(self):
        """The rows as a pandas DataFrame: value_ns, percentile (0..1), count, inv
        (``1/(1-percentile)``, the x axis of an HDR plot; inf at 100%)."""
        import pandas as pd

        with np.errstate(divide="ignore"):
            inv = 1 / (1 - self.percentiles)
        return pd.DataFrame({"value_ns": self.values, "percentile": self.percentiles,
                             "count": self.total_counts, "inv": inv})

    def value_at_percentile(self, q: float) -> float:
        """Value at percentile ``q`` (0..100): the first row at or above it."""
        p = q / 100
        i = int(np.searchsorted(self.percentiles, p - 1e-12))
        return float(self.values[min(i, len(self.values) - 1)])


_FOOT = re.compile(r"#\[(\w+)\s*=\s*([-\d.e+]+),\s*(\w+)\s*=\s*([-\d.e+]+)\]")


def parse_hgrm(text: str) -> Hgrm:
    """Parse .hgrm text (as written by :func:`hgrm_text` or any HdrHistogram tool)."""
    vals, pcts, cnts, foot = [], [], [], {}
    for ln in text.splitlines():
        s = ln.strip()
        if not s or s.startswith("Value"):
            continue
        if s.startswith("#"):
            for m in _FOOT.finditer(s):
                foot[m.group(1)] = float(m.group(2))
                foot[m.group(3)] = float(m.group(4))
            continue
        parts = s.split()
        try:
            v, p, c = float(parts[0]), float(parts[1]), int(parts[2])
        except (ValueError, IndexError):
            raise ValueError(f"not a .hgrm percentile distribution: bad row {s[:60]!r}") from None
        vals.append(v)
        pcts.append(p)
        cnts.append(c)
    if not vals and "TotalCount" not in foot:
        raise ValueError("not a .hgrm percentile distribution (no rows, no footer)")
    return Hgrm(np.array(vals), np.array(pcts), np.array(cnts, dtype=np.int64),
                foot.get("Mean", 0.0), foot.get("StdDeviation", 0.0), foot.get("Max", 0.0),
                int(foot.get("TotalCount", 0)))


def read_hgrm(path: str | os.PathLike) -> Hgrm:
    """Read a .hgrm file."""
    return parse_hgrm(Path(path).read_text())


def encode(h: HdrHistogram) -> str:
    """The lossless encoded histogram (V2 base64 text) for result JSON."""
    return h.encode().decode("ascii")


def decode(blob: str) -> HdrHistogram:
    """A histogram back from :func:`encode` output."""
    return HdrHistogram.decode(blob.encode("ascii") if isinstance(blob, str) else blob)


def merge(blobs) -> HdrHistogram:
    """One histogram holding every encoded histogram in ``blobs`` (lossless)."""
    from lob.measure.latency import new_histogram

    h = new_histogram()
    for b in blobs:
        h.add(decode(b))
    return h

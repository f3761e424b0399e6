"""Measurement you can trust: clock calibration, closed- and open-loop per-op latency in HDR
histograms, .hgrm files, throughput, allocation counts, run conditions and result records.

>>> import lob
>>> res = lob.bench("v0", "mixed_70_20_10", scale=0.01, repeat=3)
>>> print(res.table()); res.save("artifacts/bench")
"""

from lob.measure.bench import bench
from lob.measure.clock import ClockCalibration, calibrate
from lob.measure.latency import LatencyStats, capture_latency, histogram_from, open_loop
from lob.measure.results import (
    BenchResult,
    LatencyRun,
    MixedMachinesError,
    MixedRunsError,
    load_results,
)

__all__ = ["BenchResult", "ClockCalibration", "Hiccups", "LatencyRun", "LatencyStats",
           "MixedMachinesError", "MixedRunsError", "bench", "calibrate", "capture_latency",
           "floor_latency", "histogram_from", "load_results", "open_loop", "record_hiccups"]

_HICCUP = ("Hiccups", "floor_latency", "record_hiccups")


def __getattr__(name: str):
    """The machine-pause recorder loads on first use (it compiles with numba)."""
    if name in _HICCUP:
        from lob.measure import hiccup

        return getattr(hiccup, name)
    raise AttributeError(f"module 'lob.measure' has no attribute {name!r}")

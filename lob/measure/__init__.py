"""Measurement you can trust: clock calibration, closed- and open-loop per-op latency in HDR
histograms, .hgrm files, throughput, allocation counts, run conditions, result records and
interleaved rounds. The machine's own pauses and the kernel profilers are in
:mod:`lob.diagnose`, a layer above.

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

__all__ = ["BenchResult", "ClockCalibration", "LatencyRun", "LatencyStats", "MixedMachinesError",
           "MixedRunsError", "bench", "calibrate", "capture_latency", "histogram_from",
           "load_results", "open_loop"]

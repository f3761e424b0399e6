"""Per-op latency capture: closed-loop service time and open-loop latency, into HDR histograms.

Closed loop (:func:`capture_latency`): commands are turned into plain tuples before timing;
the loop reads the clock, runs one op, reads the clock, stores the difference into a
preallocated int64 buffer -- only for commands whose ``timed`` flag is set (the others run
unclocked). The loop runs in C when the native helper builds (capture cost ~4x lower than a
Python loop); the samples are then added to an HDR histogram in bulk (:func:`histogram_from`),
never one ``record_value`` per op. A mass cancel is one command, hence one sample.

Only the :class:`~lob.engines.base.Engine` protocol is used: a ``clock="harness"`` engine is
timed around ``step``; a ``clock="engine"`` engine (the compiled backend) times itself in
``replay_timed`` and reports the cost of its clock with ``clock_overhead()``.

Open loop (:func:`open_loop`): timed commands are due at ``start + j / rate``; each starts
at ``max(now, due)`` and its latency is ``completion - due``, so queueing behind slow ops is
counted (no coordinated omission). The per-op service time is kept beside it.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import numpy as np
from hdrh.histogram import HdrHistogram

from lob.engines.base import ReplayResult, command_tuples
from lob.semantics import OUTCOME_DTYPE, as_commands

LOWEST_NS = 1
HIGHEST_NS = 1_000_000_000
SIG_FIGS = 3
PERCENTILES = (50.0, 90.0, 99.0, 99.9, 99.99)


def new_histogram() -> HdrHistogram:
    """An empty histogram: 1 ns .. 1 s, 3 significant figures, values in ns."""
    return HdrHistogram(LOWEST_NS, HIGHEST_NS, SIG_FIGS)


def histogram_from(samples, hist: HdrHistogram | None = None) -> tuple[HdrHistogram, int]:
    """Add int ns samples to a histogram in bulk; returns (histogram, number clamped to 1 s).

    The bucket index of every sample is computed with numpy exactly as
    ``HdrHistogram._counts_index_for`` does, counted with ``bincount`` and added straight
    into the histogram's counts array; total, min and max are set the way ``record_value``
    sets them, so every query equals per-value ``record_value`` on the same samples.
    """
    h = new_histogram() if hist is None else hist
    v = np.asarray(samples, dtype=np.int64)
    if v.size == 0:
        return h, 0
    if v.min() < 0:
        raise ValueError("latency samples must be >= 0 ns")
    over = v > HIGHEST_NS
    clamped = int(over.sum())
    if clamped:
        v = np.where(over, HIGHEST_NS, v)
    # bit_length(v | mask) via frexp: exact for integers below 2**53
    _, bits = np.frexp((v | h.sub_bucket_mask).astype(np.float64))
    bucket = bits.astype(np.int64) - h.unit_magnitude - (h.sub_bucket_half_count_magnitude + 1)
    sub = v >> (bucket + h.unit_magnitude)
    idx = ((bucket + 1) << h.sub_bucket_half_count_magnitude) + sub - h.sub_bucket_half_count
    counts = np.ctypeslib.as_array(h.counts)
    counts += np.bincount(idx, minlength=h.counts_len).astype(counts.dtype)
    h.total_count += int(v.size)
    h.min_value = min(h.min_value, int(v.min()))
    h.max_value = max(h.max_value, int(v.max()))
    return h, clamped


@dataclass(frozen=True)
class LatencyStats:
    """Percentiles (ns) of one histogram, as in seed 000's tables."""

    count: int
    min: int
    p50: int
    p90: int
    p99: int
    p99_9: int
    p99_99: int
    max: int
    mean: float
    clamped: int = 0

    @classmethod
    def of(cls, h: HdrHistogram, clamped: int = 0) -> LatencyStats:
        if h.get_total_count() == 0:
            return cls(0, 0, 0, 0, 0, 0, 0, 0, 0.0, clamped)
        p = h.get_percentile_to_value_dict(list(PERCENTILES))
        return cls(int(h.get_total_count()), int(h.get_min_value()), *(int(p[q]) for q in
                   PERCENTILES), int(h.get_max_value()), float(h.get_mean_value()), clamped)

    def to_dict(self) -> dict:
        return asdict(self)

    def rows(self) -> list[tuple[str, str]]:
        r = [("p50", self.p50), ("p90", self.p90), ("p99", self.p99), ("p99.9", self.p99_9),
             ("p99.99", self.p99_99), ("max", self.max), ("min", self.min)]
        out = [(k, f"{v:,}".replace(",", " ")) for k, v in r]
        out += [("mean", f"{self.mean:,.1f}".replace(",", " ")), ("count", f"{self.count:,}")]
        if self.clamped:
            out.append(("clamped at 1 s", f"{self.clamped:,}"))
        return out


@dataclass
class Capture:
    """Raw result of one closed-loop capture."""

    durations_ns: np.ndarray
    replay: ReplayResult | None
    method: str  # "native-loop" | "python-loop" | "engine-clock"
    calibration: object = None  # ClockCalibration of the engine's own clock, if it has one


def _python_timed_loop(ex, rows, timed, buf, outs) -> int:
    clk = time.perf_counter_ns
    k = 0
    for i, r in enumerate(rows):
        if timed[i]:
            t0 = clk()
            o = ex(*r)
            t1 = clk()
            buf[k] = t1 - t0
            k += 1
        else:
            o = ex(*r)
        outs[i] = o
    return k


def _native_timed(m, ex, rows, timed: bytes, buf: np.ndarray, outs) -> tuple[int, str]:
    """The C capture loop, on the TSC when usable (ticks converted to ns in ``buf``)."""
    from lob.measure.clock import tsc_rate, tsc_usable

    if not tsc_usable():
        return m.timed_loop(ex, rows, timed, buf, outs), "native-loop"
    p0 = m.tsc_pair()
    k = m.timed_loop(ex, rows, timed, buf, outs, True)
    rate = tsc_rate(p0, m.tsc_pair())
    buf[:k] = np.rint(buf[:k] * rate).astype(np.int64)
    return k, "native-tsc"


def engine_calibration(engine):
    """The engine's own clock as a ClockCalibration (None for a harness-clock engine)."""
    from lob.measure.clock import ClockCalibration

    o = engine.clock_overhead()
    if o is None:
        return None
    return ClockCalibration(str(o.get("source", engine.name)), float(o["min_ns"]),
                            float(o["median_ns"]), float(o.get("p99_ns", o["median_ns"])),
                            float(o.get("resolution_ns", 1.0)), int(o.get("samples", 0)),
                            o.get("clocks"))


def capture_latency(engine, commands: np.ndarray, *, use_native: bool = True) -> Capture:
    """Closed-loop per-op durations (ns) of the timed commands, replayed through ``engine``.

    ``engine`` must be fresh. The outcomes are kept, so the capture's checksum can be
    compared with a plain replay's.
    """
    from lob.measure._native import native

    cmds = as_commands(commands)
    if engine.clock == "engine":
        res, d = engine.replay_timed(cmds)
        return Capture(np.asarray(d, dtype=np.int64), res, "engine-clock",
                       engine_calibration(engine))
    if engine.clock != "harness":
        raise ValueError(f"engine {engine.name!r} has clock={engine.clock!r}; "
                         "expected 'harness' or 'engine'")
    rows = command_tuples(cmds)
    timed = cmds["timed"].astype(np.uint8)
    buf = np.zeros(int(timed.sum()), dtype=np.int64)
    outs: list = [None] * len(rows)
    engine.clear_fills()
    m = native() if use_native else None
    if m is not None:
        k, method = _native_timed(m, engine.step, rows, timed.tobytes(), buf, outs)
    else:
        k = _python_timed_loop(engine.step, rows, timed.tolist(), buf, outs)
        method = "python-loop"
    res = ReplayResult(engine.name, np.array(outs, dtype=OUTCOME_DTYPE).reshape(len(rows)),
                       engine.fills, int(buf[:k].sum()), engine)
    return Capture(buf[:k], res, method)


def capture_cost(n: int = 200_000, *, use_native: bool = True) -> dict:
    """Cost per sample of the capture loop: a no-op engine run timed minus run untimed (ns).

    A difference of two mins over interleaved rounds: on a noisy machine it can come out
    near zero or slightly negative; ``noop_sample_median_ns`` (each sample's own reading
    around a no-op) is the direct figure.
    """
    from lob.measure._native import native

    class _Noop:
        name = "noop"
        fills = np.zeros(0)

        def step(self, kind, otype, side, owner, price, qty, oid, price_hi):
            return (0, 0, 0, 0, 0, 0, 0)

    ex = _Noop().step
    rows = [(0, 0, 0, 1, 100, 1, 0, 0)] * n
    buf = np.zeros(n, dtype=np.int64)
    m = native() if use_native else None
    loop = ((lambda f, r, t, b, o: _native_timed(m, f, r, t, b, o)[0]) if m is not None else
            lambda f, r, t, b, o: _python_timed_loop(f, r, list(t), b, o))
    runs = {0: [], 1: []}
    flags = {f: bytes([f]) * n for f in runs}
    for _ in range(5):  # interleaved, so a noisy stretch of a shared machine hits both alike
        for flag, t in flags.items():
            outs = [None] * n
            a = time.perf_counter_ns()
            loop(ex, rows, t, buf, outs)
            runs[flag].append(time.perf_counter_ns() - a)
    best = {flag: min(r) / n for flag, r in runs.items()}
    from lob.measure.clock import tsc_usable

    method = ("native-tsc" if tsc_usable() else "native-loop") if m is not None else "python-loop"
    return {"method": method,
            "untimed_ns_per_op": best[0], "capture_ns_per_sample": best[1] - best[0],
            "noop_sample_median_ns": float(np.median(buf))}


# --- open loop ---------------------------------------------------------------------------

@dataclass(frozen=True)
class OpenLoopResult:
    """Open-loop latency at one offered rate, with the service time measured in the same run."""

    offered_rate: float  # ops/s
    achieved_rate: float  # timed ops / (last completion - start)
    latency: LatencyStats  # completion - scheduled arrival
    service: LatencyStats  # completion - actual start (the closed-loop figure)
    behind_at_end_ns: int  # last completion - last due
    saturated: bool  # offered rate above what the engine sustained
    encoded: str  # encoded latency histogram

    def to_dict(self) -> dict:
        d = asdict(self)
        d["latency"], d["service"] = self.latency.to_dict(), self.service.to_dict()
        return d


def _python_open_loop(ex, rows, timed, period, lat, svc):
    clk = time.perf_counter_ns
    k = start = due = end = 0
    for i, r in enumerate(rows):
        if timed[i]:
            if k == 0:
                start = clk()
            due = start + k * period
            t0 = clk()
            while t0 < due:
                t0 = clk()
            ex(*r)
            end = clk()
            lat[k] = end - due
            svc[k] = end - t0
            k += 1
        else:
            ex(*r)
    return k, start, due, end


def open_loop(engine, commands: np.ndarray, rate: float, *, use_native: bool = True
              ) -> OpenLoopResult:
    """Replay ``commands`` through a fresh ``engine`` with timed ops arriving at ``rate``/s.

    Untimed commands (pre-loads, refills) run unscheduled when reached; their time delays the
    timed ops behind them, as any other traffic on the engine would. Saturation: the engine
    completed the timed ops at under 95% of the offered rate.
    """
    from lob.measure._native import native

    if not rate or rate <= 0:
        raise ValueError(f"rate must be > 0 ops/s, got {rate}")
    if engine.clock != "harness":
        raise ValueError(f"open-loop capture times step() from the harness; engine "
                         f"{engine.name!r} has clock={engine.clock!r}")
    cmds = as_commands(commands)
    rows = command_tuples(cmds)
    timed = cmds["timed"].astype(np.uint8)
    n = int(timed.sum())
    if n == 0:
        raise ValueError("the command stream has no timed commands")
    lat = np.zeros(n, dtype=np.int64)
    svc = np.zeros(n, dtype=np.int64)
    period = max(1, round(1e9 / rate))
    m = native() if use_native else None
    if m is not None:
        k, start, last_due, end = m.open_loop(engine.step, rows, timed.tobytes(), period, lat, svc)
    else:
        k, start, last_due, end = _python_open_loop(engine.step, rows, timed.tolist(), period,
                                                    lat, svc)
    hl, cl = histogram_from(lat[:k])
    hs, cs = histogram_from(svc[:k])
    achieved = k / max(1, end - start) * 1e9
    return OpenLoopResult(float(rate), achieved, LatencyStats.of(hl, cl), LatencyStats.of(hs, cs),
                          int(end - last_due), bool(achieved < 0.95 * rate), hl.encode().decode())

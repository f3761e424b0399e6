"""What a notebook shows about how its figures were taken: the run conditions at its top
(:class:`RunConditions`, filled in with the load after the run at its end), one closed-loop
latency capture with the clock that timed it (:func:`capture`), and its .hgrm file
(:func:`save_hgrm`)."""

from __future__ import annotations

import numpy as np

# --- run conditions at the top of a notebook -------------------------------------------------

def conditions_markdown(before: dict, after: dict | None = None) -> str:
    """Run conditions in a few lines: CPU, cores, load before / after, the hypervisor's steal
    during the run, versions, GC state."""
    pk = before.get("packages") or {}

    def load(c):
        la = (c or {}).get("load_avg")
        return " / ".join(f"{x:.2f}" for x in la) if la else "?"

    from lob.measure.conditions import steal_fraction

    sha = (before.get("git_sha") or "?")[:12] + ("+dirty" if before.get("git_dirty") else "")
    steal = steal_fraction(before, after) if after else None
    lines = [
        "**Run conditions**",
        "",
        f"- machine: {before.get('cpu_model', '?')}, {before.get('cpu_count', '?')} logical "
        f"CPUs (affinity {before.get('affinity')}), {before.get('os', '?')}",
        f"- load average (1 / 5 / 15 min): before {load(before)}; after "
        + (load(after) if after else "(the run is still going)"),
        "- CPU time taken by the hypervisor for other guests (steal) during the run: "
        + ("(the run is still going)" if not after else
           "not recorded (no /proc/stat)" if steal is None else
           f"{steal:.1%} of all CPUs' time"),
        f"- Python {before.get('python', '?')}, numpy {pk.get('numpy', '?')}, numba "
        f"{pk.get('numba', '?')}, lob {before.get('lob_version', '?')} at {sha}",
        f"- Python's cyclic GC: {'on' if before.get('gc_enabled') else 'off'} at the start "
        "(each table says when a measurement turned it off)",
        f"- started {before.get('date_utc', '?')}"
        + (f", finished {after.get('date_utc', '?')}" if after else ""),
    ]
    return "\n".join(lines)


class RunConditions:
    """Shows the run conditions at the top of a notebook and fills in the "after" at the end.

    ``start()`` in the first cell displays them (an updatable display); ``finish()`` in the
    last cell updates that display with the load after the run and returns the dict a notebook
    stores as ``summary["conditions"]`` (the conditions at the end plus ``load_avg_before``).
    """

    def __init__(self):
        from lob.measure.conditions import run_conditions

        self._now = run_conditions
        self.before = run_conditions()
        self.after: dict | None = None
        self._handle = None

    @classmethod
    def start(cls) -> RunConditions:
        self = cls()
        try:
            from IPython.display import Markdown, display

            self._handle = display(Markdown(conditions_markdown(self.before)), display_id=True)
        except ImportError:  # pragma: no cover - outside IPython
            print(conditions_markdown(self.before))
        return self

    def finish(self) -> dict:
        self.after = self._now()
        md = conditions_markdown(self.before, self.after)
        if self._handle is not None:
            from IPython.display import Markdown

            self._handle.update(Markdown(md))
        from lob.measure.conditions import steal_fraction

        return {**self.after, "load_avg_before": self.before.get("load_avg"),
                "load_avg_after": self.after.get("load_avg"),
                "steal_fraction": steal_fraction(self.before, self.after),
                "gc_enabled_at_start": self.before.get("gc_enabled"),
                "date_utc_start": self.before.get("date_utc")}


# --- one latency capture, with its clock --------------------------------------------------------

def capture(engine: str, wl, *, gc_enabled: bool = True, grid: bool = True) -> dict:
    """Closed-loop per-op latency of ``engine`` on workload ``wl`` (a fresh engine), the replay
    it came from and the clock that timed it: ``durations`` (ns, one per timed command),
    ``replay`` (outcomes, fills), ``method``, ``clock`` (the engine's own clock for a compiled
    engine, else the harness clock's calibration), ``gc_enabled``, ``untimed`` (pre-load and
    warm-up commands, run but not timed). ``grid``: measure the grid the durations fall on
    (:func:`with_grid`, ~1-2 s on a million durations); False where the caller never reads
    it (a repeated capture whose clock is the first one's)."""
    import gc

    from lob.engines.registry import get_engine
    from lob.measure.clock import calibrate
    from lob.measure.latency import capture_latency

    eng = get_engine(engine, wl.config)
    was = gc.isenabled()
    if not gc_enabled:
        gc.collect()
        gc.disable()
    try:
        cap = capture_latency(eng, wl.commands)
    finally:
        (gc.enable if was else gc.disable)()
    cal = cap.calibration
    if cal is None:
        clock = calibrate().to_dict()
    else:
        clock = cal.to_dict() if hasattr(cal, "to_dict") else dict(cal)
    n_timed = int(np.count_nonzero(wl.commands["timed"]))
    durations = np.asarray(cap.durations_ns, dtype=np.int64)
    if grid:
        clock = with_grid(clock, durations)
    return {"durations": durations, "replay": cap.replay,
            "method": cap.method, "clock": clock, "gc_enabled": gc_enabled,
            "untimed": int(len(wl.commands) - n_timed)}


def with_grid(clock: dict, durations) -> dict:
    """``clock`` with the tick its durations are known to (:func:`lob.measure.stats.clock_tick`):
    the clock's known resolution where lob knows the clock (the cycle counter), else the grid
    they really fall on, measured from the samples (the nominal resolution a clock reports is
    not what the samples show: CLOCK_MONOTONIC on another clocksource says 1 ns where its
    values fell on a ~10 ns grid). ``grid_ns`` (None when no grid fits), ``grid_share``
    (None for a known tick), ``grid_n`` and ``grid_what`` (how the tick was found)."""
    from lob.measure.stats import clock_tick

    d = np.asarray(durations)
    # only durations under 4,096 ns: a percentile can be under 10 ticks of the coarsest grid
    # clock_grid looks for (500 ns) only below 5,000 ns, and its search grows with the largest
    # value given (a pure-Python tail of milliseconds took gigabytes: the OOM killer)
    d = d[(d > 0) & (d < 4096)]
    if not len(d):
        return dict(clock)
    g = clock_tick(d, clock=clock)
    return {**clock, "grid_ns": g["tick_ns"], "grid_share": g["share_on_grid"],
            "grid_n": int(g["n"]), "grid_what": g["what"]}


def save_hgrm(durations, path) -> str:
    """Write the samples as an .hgrm percentile file (HDR, 1 ns .. 1 s, 3 figures)."""
    from pathlib import Path

    from lob.measure.hgrm import write_hgrm
    from lob.measure.latency import histogram_from

    h, _ = histogram_from(durations)
    write_hgrm(h, Path(path))
    return Path(path).name

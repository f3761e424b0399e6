"""What every experiment's notebook does at its start and its end, in one place (the shape
every study module declares is :mod:`lob.studies.shape`).

A notebook opens with ``s = Study.start(out_dir, "<experiment>", engines=[...])`` (run
conditions shown, the run folder chosen, engine names checked against the registry) and
closes with ``s.finish(key_table=..., plots=...)`` (the claims' verdict table, the run
conditions after, ``summary.json`` written, the conclusion printed). In between it calls its
study module, which returns :class:`~lob.studies.conclude.Conclusion` tables the notebook
displays and hands to ``s.add``.

:func:`interleaved_throughput` is the one throughput procedure of the studies: fresh-engine
replays, the engines rotated round by round (:func:`lob.measure.rounds.interleaved_rounds`),
so a noisy stretch of the machine hits them alike, after one untimed warm-up replay of each engine.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from lob.studies.shape import at_least_one, at_least_zero, need, one_of

# the parameter rules (lob.studies.shape) stay importable from here, where the studies used them
__all__ = ["WARMUP_COMMANDS", "check_engines", "interleaved_throughput", "need", "one_of",
           "at_least_one", "at_least_zero", "Study"]


def check_engines(names: Iterable[str]) -> None:
    """Raise one clear ValueError naming the unknown engines and the registered ones."""
    from lob.engines.registry import engine_names

    known = engine_names()
    unknown = sorted({n for n in names if n not in known})
    if unknown:
        raise ValueError(f"unknown engine{'s' if len(unknown) > 1 else ''} "
                         f"{', '.join(map(repr, unknown))}; engines: {', '.join(known)}")


WARMUP_COMMANDS = 2_000  # the stream's first commands, replayed once per engine, untimed


def _prefix(wl, k: int):
    """``wl`` cut to its first ``k`` commands (a Workload, any object with ``commands``, or a
    bare command array)."""
    if hasattr(wl, "commands"):
        cut = copy.copy(wl)
        cut.commands = wl.commands[:k]
        return cut
    return wl[:k]


def interleaved_throughput(engines: Sequence[str], wl, repeat: int, *,
                           replay=None, warmup: int = WARMUP_COMMANDS, top_up: int = 0,
                           probe=None, clock: str = "wall") -> dict[str, dict]:
    """engine -> {"ns_per_op": [one value per round], "last": the last replay's run}.

    Each round replays every engine once on a fresh engine, in the round's rotated order.
    Before the first round every engine replays the stream's first ``warmup`` commands once,
    untimed: a compiled engine's first call loads (or compiles) its kernel and a foreign one
    loads its library, a one-time cost that would otherwise land in the first round's figure
    of whichever engine first used that code (and widen its A/A band: the run is in
    docs/decisions/throughput-warmup.md). ``replay`` (default :func:`lob.replay`) is
    injectable for tests. ``clock``: ``"wall"`` (the engine's own timer) or ``"cpu"`` (the
    measuring thread's CPU clock), passed to the timing and the probes
    (:func:`lob.measure.rounds.timed_replay`), never swapped in process-wide.

    ``top_up``: the core is probed around every replay
    (:func:`lob.diagnose.probes.core_probe`, or ``probe()`` returning its dict) and up to
    ``top_up`` rounds more are run while fewer than ``repeat`` rounds had every replay on a
    quiet core (:func:`lob.diagnose.probes.shared_replays`: none shared with another hardware
    thread, which slows a kernel by up to half here; judged against the stream's widest
    probe and this machine's remembered quiet width). When ``repeat`` such rounds were found,
    only they are kept; else every round run is. Each engine's entry then also holds
    ``rounds_run`` and ``rounds_kept``. The choice rests on probes taken outside the timed
    replays, never on the figures themselves."""
    from lob.measure.rounds import clock_of, interleaved_rounds, timed_replay

    at_least_one(repeat, "repeat")
    if top_up < 0:
        raise ValueError(f"top_up must be >= 0, got {top_up}")
    now = clock_of(clock)
    if replay is None:
        from lob.engines.registry import replay
    n = len(wl.commands)
    if warmup > 0:
        head = _prefix(wl, min(warmup, n))
        for e in engines:
            replay(e, head)
    probes: list[dict] | None = None
    if top_up:
        from lob.diagnose import probes as pr

        probes = []
        quiet_ref = pr.machine_width()  # this machine's quiet width, from earlier streams
        if probe is None:
            def probe():  # on the clock the replays are timed by
                return pr.core_probe(pr.PROBE_STEPS, now=now)
    out: dict[str, dict] = {e: {"ns_per_op": [], "last": None} for e in engines}

    def one(e, _):
        run, kernel, _ = timed_replay(lambda: replay(e, wl), now)
        out[e]["ns_per_op"].append(kernel / n)
        out[e]["last"] = run

    def probed(order, seen):
        probes.append({"order": list(order), "width": [p["width"] for p in seen],
                       "machine_width": quiet_ref})

    interleaved_rounds(list(engines), one, repeat, extra=top_up,
                       enough=lambda: pr.quiet_rounds(probes).sum() >= repeat,
                       probe=probe if probes is not None else None,
                       after=probed if probes is not None else None)
    if probes is not None:
        pr.machine_width([w for p in probes for w in p["width"]])  # on record
        keep = pr.quiet_rounds(probes)
        ran = len(probes)
        if keep.sum() >= repeat:
            for e in engines:
                out[e]["ns_per_op"] = [x for x, k in zip(out[e]["ns_per_op"], keep,
                                                         strict=True) if k]
        for e in engines:
            out[e]["rounds_run"] = ran
            out[e]["rounds_kept"] = len(out[e]["ns_per_op"])
    return out



@dataclass
class Study:
    """One notebook run: its folder, run conditions, tables and claim measurements."""

    experiment: str
    out: Path
    run: object  # conclude.RunConditions
    conclusions: list = field(default_factory=list)
    measured: dict = field(default_factory=dict)
    plots: list = field(default_factory=list)

    @classmethod
    def start(cls, out_dir: str, experiment: str, *, engines: Iterable[str] = ()) -> Study:
        from lob.studies import nb
        from lob.studies.capture import RunConditions

        check_engines(engines)
        return cls(experiment, nb.run_dir(out_dir, experiment), RunConditions.start())

    def add(self, *conclusions):
        """Keep conclusions for the summary; returns the last one (for display)."""
        self.conclusions.extend(c for c in conclusions if c is not None)
        return conclusions[-1] if conclusions else None

    def claim(self, claim_id: str, measurement: dict | None) -> None:
        """Record lob's measurement of one seed claim (None: not measured this run)."""
        if measurement is not None:
            self.measured[claim_id] = measurement

    def save_figure(self, fig, name: str) -> str:
        from lob.studies import nb

        path = nb.save_figure(fig, self.out, name)
        self.plots.append(path)
        return path

    def finish(self, *, key_table: str, only_measured: bool = False, **extra) -> str:
        """Verdict table of the experiment's claims, summary.json, the conclusion text."""
        from lob.studies import nb
        from lob.studies.claims import for_experiment, verdict_table
        from lob.studies.conclude import summary_tables

        cond = self.run.finish()
        if for_experiment(self.experiment):
            vt = verdict_table(self.measured, self.experiment,
                               machine=cond.get("cpu_model", ""), only_measured=only_measured)
            if vt.rows:  # a run that measured none of its claims shows no empty table
                vt.display()
                self.conclusions.append(vt)
        conclusion = " ".join(c.text for c in self.conclusions if c.text)
        nb.write_summary(self.out, tables=summary_tables(self.conclusions),
                         conclusion=conclusion, key_table=key_table, plots=self.plots,
                         conclusions=[c.record() for c in self.conclusions],
                         claims=self.measured, conditions=cond, **extra)
        print(conclusion)
        return conclusion

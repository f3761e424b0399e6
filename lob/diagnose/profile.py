"""Where the nanoseconds go: the compiled lineage step by step, every engine side by side, and
one engine's time per kind of command.

Four functions; the first three return a table (a ``pandas.DataFrame``) a notebook or a report
can print as it is, the last a JSON-able record:

* :func:`lineage_profile`: each step of a backend's lineage (``v0+pool@numba`` .. ``v4@numba``)
  on each workload: the kernel's ns/op and the whole ``replay`` call's ns/op with intervals,
  the step's mechanism (its one-line description in :mod:`lob.engines.toggles`) and what it
  bought: the ratio to its parent, per workload, with an interval and the change call of
  :mod:`lob.measure.stats`;
* :func:`side_by_side`: every engine the workbench knows that is not pure Python (the
  compiled lineage, engines behind the C ABI such as ``c_book``, installed ones), measured
  on the same streams in one run, as ratios to one base engine with intervals; each engine's
  checksum is compared with the base's, so a ratio is never between engines that did
  different work;
* :func:`command_breakdown`: one engine's in-kernel time per class of command (a LIMIT that
  rests, a LIMIT that trades, a cancel that hits, one that misses, a FOK that is unfillable,
  ...): each class's share of the commands and of the time, with the clock's own cost
  beside it. It is the fallback for hardware counters: :func:`hardware_counters` says
  whether ``perf stat`` can count cycles here (on a VM without a virtual PMU it cannot);
* :func:`versus_base` (``lob profile``): a speed claim as a record anyone can rerun: named
  engines on named streams in interleaved rounds, the :func:`side_by_side` figures plus the
  interval of replay/kernel and the rounds each engine won against the base, every round's
  figures, and the run conditions with the steal and load around each stream, beside the
  yardsticks taken in the same rounds (:mod:`lob.diagnose.probes`): the core's clock, which
  turns each kernel's ns/op into cycles/op, its issue width, which marks the replays that
  ran on a core shared with another hardware thread, and the stream's floor (reading the
  commands and writing the outcomes with no book), which no engine can beat;
  :func:`versus_base_text` prints it.

Measurement: rounds are interleaved by :func:`lob.measure.rounds.interleaved_rounds` (every engine
takes every position equally often); every engine is warmed first with one untimed replay
of the whole stream (the kernel compiled or loaded, the pre-mapped buffers of the compiled
book in place); each round builds a fresh engine and replays the whole stream. The *kernel*
figure is the engine's own timer around its compiled call(s) (``ReplayResult.elapsed_ns``);
the *replay* figure is the whole ``get_engine`` + ``replay`` call, setup, allocation and
result wrapping included. ``clock="cpu"`` (the default) reads the measuring thread's CPU
clock (``CLOCK_THREAD_CPUTIME_ID``, passed explicitly: :mod:`lob.measure.rounds`;
nothing process-wide is swapped): time the thread spends preempted by other processes is not
counted, which on a shared 2-core machine at a load above 2 is most of what a wall clock
would measure. The engine's own timer reads the wall clock; its kernel figure is carried onto
the CPU clock as the kernel's share of the call (kernel wall time / call wall time) of the
call's CPU time. ``clock="wall"`` uses the wall clock unchanged.

A/A control: ``twin=`` measures one engine a second time in every round as if it were another
engine (key ``name + AA``); :func:`aa_control` turns the pairs into
:func:`lob.measure.stats.aa_band`, and with a twin :func:`lineage_profile` and
:func:`side_by_side` add the band and the call against it (``aa_low``, ``aa_high``,
``call``: :func:`lob.measure.stats.change_beyond_aa`) beside their threshold call. Both take
``measured=`` (one :func:`measure` per workload, shared by the two tables).
"""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pandas as pd

from lob.measure import stats
from lob.measure.rounds import clock_of, interleaved_rounds, timed_replay

DEFAULT_WORKLOADS = ("lobster_replay", "cpp_comprehensive")
AA = " (A/A)"  # the key of an engine's second measurement in the same rounds (``twin``)

__all__ = ["AA", "DEFAULT_WORKLOADS", "aa_control", "command_breakdown", "hardware_counters",
           "lineage_profile", "measure", "side_by_side", "versus_base", "versus_base_text"]


def _workload(workload, scale: float):
    from lob.workloads import build as build_workload

    return build_workload(workload, scale=scale) if isinstance(workload, str) else workload


def measure(engines: list[str], workload, *, scale: float = 1.0, rounds: int = 7,
            clock: str = "cpu", twin: str | None = None,
            probes: list | None = None, top_up: int = 0) -> dict[str, dict]:
    """Interleaved replays of one workload by each engine.

    ``workload``: a registered name (built at ``scale``) or a built workload. Returns
    ``{engine: {"kernel": [ns/op per round], "replay": [ns/op per round], "checksum": int}}``,
    or ``{engine: {"refused": message}}`` for an engine that refuses the workload's book
    (a band or STP mode it does not take). ``twin``: an engine measured once more in every
    round, under the key ``twin + AA``, as if it were another engine (the A/A control).
    ``probes``: a list that receives one dict a round, ``{"order", "core_ghz", "width",
    "machine_width", "floor_ns"}``: the round's engines in the order they ran, the core's
    clock and issue width (:func:`lob.diagnose.probes.core_probe`) before each replay and
    after the last (``len(order) + 1`` of each: replay ``j`` ran between probes ``j`` and
    ``j + 1``), this machine's remembered quiet width
    (:func:`lob.diagnose.probes.machine_width`, None before it has a record), and
    :func:`lob.diagnose.probes.stream_floor` on the same stream after the round, all timed by
    the same clock as the engines. With probes, each engine's entry also holds ``"shared"``:
    per round, whether its replay ran on a core shared with another hardware thread
    (:func:`lob.diagnose.probes.shared_replays`).

    ``top_up``: up to this many rounds more (probed, whether or not ``probes`` is given),
    run only while fewer than ``rounds`` rounds had every replay on a quiet core: on a host
    whose neighbours come and go, the comparisons of :func:`lineage_profile` and
    :func:`side_by_side` can then use quiet rounds only (:data:`QUIET_MIN` at least).
    """
    from lob.engines.registry import get_engine

    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    wl = _workload(workload, scale)
    cmds, cfg = wl.commands, wl.config
    n = max(1, len(cmds))
    out: dict[str, dict] = {}
    live = []
    if twin is not None and twin not in engines:
        raise ValueError(f"twin {twin!r} is not one of the engines measured")
    for name in [*engines, *([twin + AA] if twin else [])]:
        try:
            res = get_engine(name.removesuffix(AA), cfg).replay(cmds)  # warm-up, untimed
        except (ValueError, TypeError, NotImplementedError) as e:
            out[name] = {"refused": str(e).splitlines()[0]}
            continue
        out[name] = {"kernel": [], "replay": [], "checksum": res.checksum}
        del res
        live.append(name)
    if top_up < 0:
        raise ValueError(f"top_up must be >= 0, got {top_up}")
    if top_up and probes is None:
        probes = []
    if probes is not None:
        from lob.diagnose import probes as pr
        from lob.engines.compiled import _buffers
        from lob.semantics import OUTCOME_DTYPE

        scratch = _buffers.take_array(len(cmds), OUTCOME_DTYPE)
        first = len(probes)  # the caller's list may hold other streams' rounds
        quiet_ref = pr.machine_width()  # this machine's quiet width, from earlier streams
    now = clock_of(clock)  # passed to every timing below, never swapped in

    def one(name, _):
        _, kernel, call = timed_replay(
            lambda: get_engine(name.removesuffix(AA), cfg).replay(cmds), now)
        out[name]["kernel"].append(kernel / n)
        out[name]["replay"].append(call / n)

    def probed(order, cores):
        probes.append({"order": list(order),
                       "core_ghz": [c["core_ghz"] for c in cores],
                       "width": [c["width"] for c in cores],
                       "machine_width": quiet_ref,
                       "floor_ns": pr.stream_floor(cmds, scratch, now=now)})

    interleaved_rounds(
        live, one, rounds, extra=top_up,
        enough=lambda: pr.quiet_rounds(probes[first:]).sum() >= rounds,
        probe=None if probes is None else (lambda: pr.core_probe(pr.PROBE_STEPS, now=now)),
        after=None if probes is None else probed)
    if probes is not None:
        pr.machine_width([w for p in probes[first:] for w in p["width"]])  # on record
    if probes is not None and live:
        for name, flags in pr.shared_replays(probes[first:]).items():
            out[name]["shared"] = flags.tolist()
    return out


QUIET_MIN = 5  # quiet rounds a comparison needs before it leaves the shared ones out


def _quiet_mask(s: dict, *names: str) -> tuple[np.ndarray | None, int | None]:
    """The rounds in which every one of ``names`` ran on a quiet core, when :func:`measure`
    marked them and there are :data:`QUIET_MIN` such rounds at least: (mask, how many);
    else (None, None): use every round."""
    if not names or any("shared" not in s.get(n, {}) for n in names):
        return None, None
    mask = ~np.any(np.vstack([np.asarray(s[n]["shared"], dtype=bool) for n in names]), axis=0)
    k = int(mask.sum())
    return (mask, k) if k >= QUIET_MIN else (None, None)


def _rounds_of(xs, mask):
    xs = np.asarray(xs, dtype=float)
    return xs if mask is None else xs[mask]


def _median(xs, confidence):
    mi = stats.median_interval(xs, confidence, of="rounds")
    lo, hi = mi["ci"] if mi["ci"] else (np.nan, np.nan)
    return mi["median"], lo, hi


def _versus(a: list[float], b: list[float], confidence: float, threshold: float) -> dict:
    """Per-round ratios a/b (interleaved rounds pair up) with their interval and call."""
    r = stats.change_of_ratios(np.asarray(a) / np.asarray(b), threshold=threshold,
                               confidence=confidence, of="interleaved rounds")
    lo, hi = r["ci"] if r["ci"] else (np.nan, np.nan)
    return {"ratio": r["median"], "ratio_lo": lo, "ratio_hi": hi, "change": r["change"]}


def aa_control(s: dict, twin: str, *, quiet: bool = True) -> dict:
    """The A/A band (:func:`lob.measure.stats.aa_band`) of one :func:`measure` result: the
    per-round kernel ratios of ``twin``'s second measurement over its first (``"low"`` and
    ``"high"`` None when either was refused or fewer than 5 rounds ran); with ``quiet``, over
    the rounds where both ran on a quiet core when :func:`measure` marked them and there are
    :data:`QUIET_MIN` at least."""
    a, b = s.get(twin, {}), s.get(twin + AA, {})
    if "kernel" not in a or "kernel" not in b:
        return {"low": None, "high": None, "n": 0, "what": f"no A/A control: {twin} not measured"}
    mask, _ = _quiet_mask(s, twin, twin + AA) if quiet else (None, None)
    return stats.aa_band(_rounds_of(b["kernel"], mask) / _rounds_of(a["kernel"], mask))


def _aa_columns(v: dict, band: dict | None) -> dict:
    """``aa_low``, ``aa_high`` and ``call`` (the ratio's interval against the band)."""
    if band is None:
        return {}
    return {"aa_low": band["low"], "aa_high": band["high"],
            "call": stats.change_beyond_aa(v["ratio_lo"], v["ratio_hi"], band)}


def _measured(w, scale, names, rounds, clock, twin, measured):
    """(workload name, its :func:`measure` result): ``measured[name]`` when given."""
    if measured is not None and isinstance(w, str):
        return w, measured[w]
    wl = _workload(w, scale)
    wname = w if isinstance(w, str) else getattr(wl, "name", "workload")
    return wname, measure(names, wl, rounds=rounds, clock=clock, twin=twin)


def _time_columns(s: dict, name: str, confidence: float, quiet: bool = False) -> dict:
    """Kernel and replay ns/op of ``s[name]`` (medians, intervals); with ``quiet``, over its
    replays on a quiet core when there are :data:`QUIET_MIN` of them (``quiet_replays``)."""
    mask, k_used = _quiet_mask(s, name) if quiet else (None, None)
    kern, rep = _rounds_of(s[name]["kernel"], mask), _rounds_of(s[name]["replay"], mask)
    k, klo, khi = _median(kern, confidence)
    c, clo, chi = _median(rep, confidence)
    call = np.median(rep / kern)
    return {"kernel_ns": k, "kernel_lo": klo, "kernel_hi": khi, "replay_ns": c,
            "replay_lo": clo, "replay_hi": chi, "replay_over_kernel": float(call),
            **({"quiet_replays": k_used} if quiet else {})}


def _versus_in(s: dict, a: str, b: str, confidence: float, threshold: float,
               quiet: bool) -> dict:
    """:func:`_versus` of ``a``'s kernel over ``b``'s; with ``quiet``, over the rounds where both
    ran on a quiet core when there are :data:`QUIET_MIN` of them (``quiet_pairs``; None:
    every round was used)."""
    mask, k = _quiet_mask(s, a, b) if quiet else (None, None)
    v = _versus(_rounds_of(s[a]["kernel"], mask), _rounds_of(s[b]["kernel"], mask),
                confidence, threshold)
    return {**v, "quiet_pairs": k} if quiet else v


def lineage_profile(backend: str = "numba", workloads=DEFAULT_WORKLOADS, *,
                    scale: float = 1.0, rounds: int = 7, clock: str = "cpu",
                    confidence: float = 0.9, threshold: float = 0.03,
                    versions: list[str] | None = None, twin: str | None = None,
                    measured: dict | None = None, quiet: bool = True) -> pd.DataFrame:
    """Each lineage step of ``backend`` on each workload, one row per (step, workload).

    Columns: ``step``, ``parent``, ``mechanism`` (the step's description), ``workload``,
    ``kernel_ns`` with ``kernel_lo``/``kernel_hi`` (median ns/op over the rounds and its
    ``confidence`` sign-test interval), ``replay_ns`` likewise for the whole call,
    ``replay_over_kernel`` (median per-round ratio), and what the step bought on that
    workload: ``vs_parent`` (median per-round ratio step/parent of kernel time, < 1 is
    faster), ``vs_parent_lo``/``vs_parent_hi`` and ``change`` (``faster``, ``slower``,
    ``within noise`` beyond ``threshold``, or ``inconclusive``). ``versions`` defaults to
    the backend's bisection chain (:func:`lob.engines.toggles.chain`). ``twin``: one step
    measured twice (the A/A control); then ``aa_low``/``aa_high`` (its band on that workload)
    and ``call`` (``vs_parent``'s interval against the band) too. ``measured``: workload
    name -> :func:`measure` result to use instead of measuring (with the twin in it).

    ``quiet``: where :func:`measure` marked the replays that ran on a core shared with
    another hardware thread (``probes`` or ``top_up``), each median leaves the engine's shared
    replays out and each ratio and the A/A band the rounds where either side's was shared,
    when :data:`QUIET_MIN` quiet ones remain (``quiet_replays``, ``quiet_pairs``: how many
    were used; None: every round was).
    """
    from lob.engines import toggles as tg

    chain = versions if versions is not None else tg.chain(backend)
    rows = []
    for w in workloads:
        wname, s = _measured(w, scale, chain, rounds, clock, twin, measured)
        band = aa_control(s, twin, quiet=quiet) if twin else None
        for name in chain:
            parent, mechanism = tg.measured_step(name, chain, backend)
            row = {"step": name, "parent": parent, "mechanism": mechanism, "workload": wname}
            if "refused" in s[name]:
                rows.append({**row, "note": s[name]["refused"]})
                continue
            row.update(_time_columns(s, name, confidence, quiet))
            if parent in s and "kernel" in s[parent]:
                v = _versus_in(s, name, parent, confidence, threshold, quiet)
                row.update({"vs_parent": v["ratio"], "vs_parent_lo": v["ratio_lo"],
                            "vs_parent_hi": v["ratio_hi"], "change": v["change"],
                            **({"quiet_pairs": v["quiet_pairs"]} if quiet else {}),
                            **_aa_columns(v, band)})
            rows.append(row)
    return pd.DataFrame(rows)


def _known_engines(include_python: bool) -> list[str]:
    from lob.engines import engine_spec
    from lob.engines.registry import engine_names

    names = []
    for name in engine_names():
        spec = engine_spec(name)
        if name == "reference" or (spec.backend == "python" and not include_python):
            continue
        names.append(name)
    return names


def side_by_side(engines: list[str] | None = None, workloads=DEFAULT_WORKLOADS, *,
                 base: str | None = None, scale: float = 1.0, rounds: int = 7,
                 clock: str = "cpu", confidence: float = 0.9, threshold: float = 0.03,
                 include_python: bool = False, twin: str | None = None,
                 measured: dict | None = None, quiet: bool = True) -> pd.DataFrame:
    """Every engine on the same streams in one run, as ratios to ``base``.

    ``engines`` defaults to every registered engine except ``reference`` and, unless
    ``include_python``, the pure-Python ones (100x slower: a full-size replay takes
    minutes). ``base`` defaults to the newest step of the compiled chain. One row per
    (engine, workload): ``engine``, ``backend``, ``workload``, the kernel and replay
    ns/op with intervals (as :func:`lineage_profile`), ``vs_base`` (median per-round
    ratio engine/base of kernel time, > 1 is slower than the base) with its interval and
    ``change`` call, and ``same_checksum`` (the engine's checksum equals the base's). An
    engine that refuses the workload's book has a ``note`` and no figures. ``twin``,
    ``measured`` and ``quiet`` as in :func:`lineage_profile` (the band and the call of
    ``vs_base``).
    """
    from lob.engines import engine_spec
    from lob.engines import toggles as tg

    names = list(engines) if engines is not None else _known_engines(include_python)
    if base is None:
        base = tg.chain("numba")[-1]
    if base not in names:
        names.insert(0, base)
    rows = []
    for w in workloads:
        wname, s = _measured(w, scale, names, rounds, clock, twin, measured)
        band = aa_control(s, twin, quiet=quiet) if twin else None
        if "refused" in s[base]:
            raise ValueError(f"the base engine {base!r} refuses {wname}: {s[base]['refused']}")
        for name in names:
            row = {"engine": name, "backend": engine_spec(name).backend, "workload": wname}
            if "refused" in s[name]:
                rows.append({**row, "note": s[name]["refused"]})
                continue
            row.update(_time_columns(s, name, confidence, quiet))
            v = _versus_in(s, name, base, confidence, threshold, quiet)
            row.update({"vs_base": v["ratio"], "vs_base_lo": v["ratio_lo"],
                        "vs_base_hi": v["ratio_hi"], "change": v["change"],
                        **({"quiet_pairs": v["quiet_pairs"]} if quiet else {}),
                        "same_checksum": s[name]["checksum"] == s[base]["checksum"],
                        **_aa_columns(v, band)})
            rows.append(row)
    out = pd.DataFrame(rows)
    out.attrs["base"] = base
    return out


def versus_base(engines: list[str], workloads=DEFAULT_WORKLOADS, *, base: str | None = None,
                scale: float = 1.0, rounds: int = 21, clock: str = "cpu",
                confidence: float = 0.9, threshold: float = 0.03, top_up: int = 0) -> dict:
    """A speed claim as a record anyone can rerun: ``engines`` on each workload in
    interleaved rounds (:func:`measure`), every figure with its interval, the ratios to
    ``base`` (default: the first engine) and the run conditions around each workload.

    ``top_up``: up to that many rounds more on a stream while fewer than ``rounds`` had
    every replay on a quiet core (:func:`measure`); the main columns take every round run,
    the quiet ones the quiet rounds.

    Returns a JSON-able dict: ``engines``, ``base``, ``clock``, ``rounds``, ``top_up``, ``scale``,
    ``conditions`` (:func:`lob.measure.conditions.run_conditions` before the first workload)
    and per workload (``workloads[name]``): ``commands``, ``rounds_run``, ``steal_fraction`` and
    ``load_avg`` during its rounds, ``table`` (one record per engine: the
    :func:`side_by_side` columns, plus ``replay_over_kernel_lo``/``_hi``, the interval of
    the per-round ratio of the whole call to the kernel, and ``faster_rounds``, the rounds
    in which the engine's kernel beat the base's, and ``kernel_cycles`` with ``_lo``/``_hi``:
    the per-round kernel ns/op times that round's core clock; ``kernel_quiet`` with
    ``_lo``/``_hi``: the median over the engine's replays not on a shared core, and
    ``vs_base_quiet`` with ``_lo``/``_hi`` and ``change_quiet``: the ratio to the base over the
    ``quiet_pairs`` rounds where neither replay was on a shared core, each absent with fewer
    than :data:`QUIET_MIN` such replays or rounds, as in :func:`side_by_side`), ``core_ghz``
    (each round's median probe) and ``width`` (every probe: the core's
    issue width), ``shared_replays`` (per engine, its replays on a core shared with another
    hardware thread, :func:`lob.diagnose.probes.shared_replays`) and ``floor``
    (``ns``: the stream's floor in ns/op, ``of_base``: its per-round share of the base's
    kernel time), each as [median, low, high] (:mod:`lob.diagnose.probes`), ``per_round``
    (each engine's kernel and replay ns/op, round by round, for a later reader's own
    statistics), ``width_follows`` (:func:`lob.diagnose.probes.width_follows` of the base:
    whether its kernel follows the width probe on this host at all), ``probes``
    (:func:`measure`'s, round by round) and ``shared`` (per engine,
    whether each of its replays ran on a shared core).
    """
    from lob.diagnose import probes as pr
    from lob.engines.registry import engine_spec
    from lob.measure.conditions import run_conditions, steal_fraction
    from lob.workloads import check_scale

    names = list(dict.fromkeys(engines))
    if not names:
        raise ValueError("name at least one engine")
    base = names[0] if base is None else base
    if base not in names:
        names.insert(0, base)
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    if top_up < 0:
        raise ValueError(f"top_up must be >= 0, got {top_up}")
    for name in names:  # every name and stream checked before anything is measured
        engine_spec(name)
    for w in workloads:
        if isinstance(w, str):
            check_scale(w, scale)
    first = run_conditions(params={"engines": names, "base": base, "rounds": rounds,
                                   "top_up": top_up, "scale": scale, "clock": clock})
    out = {"engines": names, "base": base, "clock": clock, "rounds": rounds, "top_up": top_up,
           "scale": scale,
           "confidence": confidence, "threshold": threshold, "conditions": first,
           "workloads": {}}
    for w in workloads:
        wl = _workload(w, scale)
        wname = w if isinstance(w, str) else getattr(wl, "name", "workload")
        before = run_conditions()
        probes: list[dict] = []
        s = measure(names, wl, rounds=rounds, clock=clock, probes=probes, top_up=top_up)
        after = run_conditions()
        ghz = np.array([np.median(p["core_ghz"]) for p in probes])
        floor = np.array([p["floor_ns"] for p in probes])
        width = np.array([w for p in probes for w in p["width"]])
        shared = {k: np.asarray(v["shared"], dtype=bool) for k, v in s.items() if "shared" in v}
        table = side_by_side(names, (wname,), base=base, confidence=confidence,
                             threshold=threshold, measured={wname: s}, quiet=False)
        calm = {r["engine"]: r for r in side_by_side(
            names, (wname,), base=base, confidence=confidence, threshold=threshold,
            measured={wname: s}, quiet=True).to_dict("records")}
        records = []
        for row in table.to_dict("records"):
            e = s[row["engine"]]
            if "kernel" in e:
                r = np.asarray(e["replay"]) / np.asarray(e["kernel"])
                mi = stats.median_interval(r, confidence, of="rounds")
                row["replay_over_kernel_lo"], row["replay_over_kernel_hi"] = (
                    mi["ci"] if mi["ci"] else (None, None))
                row["faster_rounds"] = int(np.sum(np.asarray(e["kernel"])
                                                  < np.asarray(s[base]["kernel"])))
                row["kernel_cycles"], row["kernel_cycles_lo"], row["kernel_cycles_hi"] = \
                    _median(np.asarray(e["kernel"]) * ghz, confidence)
                q = calm[row["engine"]]  # the same figures over the quiet rounds, if enough
                row["quiet_pairs"] = int(np.sum(~shared[row["engine"]] & ~shared[base]))
                if _given(q.get("quiet_replays")):
                    row.update(kernel_quiet=q["kernel_ns"], kernel_quiet_lo=q["kernel_lo"],
                               kernel_quiet_hi=q["kernel_hi"])
                if _given(q.get("quiet_pairs")):
                    row.update(vs_base_quiet=q["vs_base"], vs_base_quiet_lo=q["vs_base_lo"],
                               vs_base_quiet_hi=q["vs_base_hi"], change_quiet=q["change"])
            records.append({k: (None if isinstance(v, float) and np.isnan(v) else
                                v.item() if isinstance(v, np.generic) else v)
                            for k, v in row.items()})
        out["workloads"][wname] = {
            "commands": len(wl.commands), "rounds_run": len(probes),
            "steal_fraction": steal_fraction(before, after),
            "load_avg": [before.get("load_avg"), after.get("load_avg")], "table": records,
            "core_ghz": _summary(ghz, confidence), "width": _summary(width, confidence),
            "shared_replays": {k: int(v.sum()) for k, v in shared.items()},
            "machine_width": next((p.get("machine_width") for p in probes), None),
            "width_follows": (pr.width_follows(probes, base, s[base]["kernel"])
                              if "kernel" in s[base] else None),
            "floor": {"ns": _summary(floor, confidence),
                      "of_base": (_summary(floor / np.asarray(s[base]["kernel"]), confidence)
                                  if "kernel" in s[base] else None)},
            "per_round": {k: {"kernel": v["kernel"], "replay": v["replay"]}
                          for k, v in s.items() if "kernel" in v},
            "probes": probes, "shared": {k: v.tolist() for k, v in shared.items()}}
    return out


def _given(x) -> bool:
    """Not None and not NaN (a DataFrame turns a missing count into NaN)."""
    return x is not None and x == x


def _summary(xs, confidence: float) -> list:
    """[median, low, high] of ``xs`` as plain floats (low and high None without an
    interval)."""
    m, lo, hi = _median(xs, confidence)
    return [float(m), *((None, None) if np.isnan(lo) else (float(lo), float(hi)))]


def _interval(lo, hi, fmt: str) -> str:
    return "" if lo is None else f" [{lo:{fmt}}..{hi:{fmt}}]"


def versus_base_text(rep: dict) -> str:
    """:func:`versus_base`'s record as a plain-text table per workload, with its conditions."""
    from lob.diagnose.probes import SHARED_BELOW

    c = rep["conditions"]
    pk = c.get("packages") or {}
    clock = ("the measuring thread's CPU clock" if rep["clock"] == "cpu" else "the wall clock")
    pct = round(rep["confidence"] * 100)
    lines = [f"{c.get('cpu_model', '?')}, {c.get('cpu_count', '?')} CPUs, Python "
             f"{c.get('python', '?')}, numba {pk.get('numba', '?')}, lob at "
             f"{(c.get('git_sha') or '?')[:12]}{'+dirty' if c.get('git_dirty') else ''}, "
             f"{c.get('date_utc', '?')}",
             f"{rep['rounds']} interleaved rounds"
             + (f" (up to {rep['rounds'] + rep['top_up']} while fewer than {rep['rounds']} ran "
                f"every replay on a quiet core)" if rep.get("top_up") else "")
             + f", each a fresh engine replaying the whole stream, timed by {clock}; medians "
             f"with {pct}% sign-test intervals; ratios per round to {rep['base']} (> 1: slower "
             f"than it)"]
    for wname, w in rep["workloads"].items():
        steal = w["steal_fraction"]
        la = [x[0] if x else None for x in w["load_avg"]]
        ghz = w.get("core_ghz")
        ran = w.get("rounds_run", rep["rounds"])
        lines += ["", f"{wname} ({w['commands']:,} commands"
                  + ("" if ran == rep["rounds"] else f", {ran} rounds") + "): load "
                  + " -> ".join("?" if x is None else f"{x:.2f}" for x in la)
                  + ", steal " + ("not recorded" if steal is None else f"{steal:.1%}")
                  + ("" if ghz is None else f", core clock {ghz[0]:.2f} GHz"
                     + _interval(ghz[1], ghz[2], ".2f"))
                  + ("" if w.get("width") is None else
                     f", issue width {w['width'][0]:.2f}" + _interval(w["width"][1],
                                                                     w["width"][2], ".2f"))
                  + ("" if w.get("machine_width") is None else
                     f" (this machine's quiet width on record: {w['machine_width']:.2f})")
                  + ("" if not w.get("width_follows") else
                     f"; {rep['base']}'s kernel against the narrower probe around it: r = "
                     f"{w['width_follows']['r']:.2f} over {w['width_follows']['n']} replays "
                     "(near -1 where a neighbour on the core slows the kernel, as the marks "
                     "assume; near 0, the quiet-core columns leave out replays that were no "
                     "slower)")]
        head = ("engine", "kernel ns/op", "quiet core (replays)", "cycles/op", "replay ns/op",
                "replay/kernel", "vs base", "faster rounds", "vs base, both quiet (rounds)",
                "checksum")
        shared = w.get("shared_replays") or {}
        rows = [head]
        for r in w["table"]:
            if r.get("kernel_ns") is None:
                rows.append((r["engine"], f"refused: {r.get('note')}", *[""] * (len(head) - 2)))
                continue
            isbase = r["engine"] == rep["base"]
            cyc, quiet = r.get("kernel_cycles"), r.get("kernel_quiet")
            rows.append((
                r["engine"],
                f"{r['kernel_ns']:.1f}" + _interval(r["kernel_lo"], r["kernel_hi"], ".1f"),
                ("" if quiet is None else f"{quiet:.1f}" + _interval(
                    r.get("kernel_quiet_lo"), r.get("kernel_quiet_hi"), ".1f"))
                + ("" if r["engine"] not in shared else
                   f" ({ran - shared[r['engine']]})"),
                "" if cyc is None else f"{cyc:.0f}" + _interval(
                    r.get("kernel_cycles_lo"), r.get("kernel_cycles_hi"), ".0f"),
                f"{r['replay_ns']:.1f}",
                f"{r['replay_over_kernel']:.3f}" + _interval(
                    r.get("replay_over_kernel_lo"), r.get("replay_over_kernel_hi"), ".3f"),
                "base" if isbase else f"{r['vs_base']:.3f}" + _interval(
                    r["vs_base_lo"], r["vs_base_hi"], ".3f") + f" {r['change']}",
                "" if isbase else f"{r['faster_rounds']}/{ran}",
                "" if isbase or "quiet_pairs" not in r else
                ("-" if r.get("vs_base_quiet") is None else
                 f"{r['vs_base_quiet']:.3f}" + _interval(r.get("vs_base_quiet_lo"),
                                                         r.get("vs_base_quiet_hi"), ".3f")
                 + f" {r['change_quiet']}") + f" ({r['quiet_pairs']})",
                "base" if isbase else "same" if r["same_checksum"] else "DIFFERENT"))
        widths = [max(len(x[i]) for x in rows) for i in range(len(head))]
        lines += ["  ".join(x[i].ljust(widths[i]) for i in range(len(head))).rstrip()
                  for x in rows]
        fl = w.get("floor")
        if fl is not None:
            share = fl.get("of_base")
            lines.append(
                f"stream floor (no book: read each 40-byte command, write its 34-byte outcome): "
                f"{fl['ns'][0]:.1f}" + _interval(fl["ns"][1], fl["ns"][2], ".1f") + " ns/op"
                + ("" if share is None else f", {share[0]:.2f}"
                   + _interval(share[1], share[2], ".2f") + f" of {rep['base']}'s kernel"))
    if any(w.get("width") for w in rep["workloads"].values()):
        lines += ["", "core clock: dependent one-cycle operations (an xorshift chain) retired "
                  "per ns, by the same clock, probed before and after every replay; cycles/op = "
                  "kernel ns/op x the round's median clock. Issue width: operations a cycle of "
                  "four independent chains, in the same probes; a replay where either probe "
                  f"fell below {SHARED_BELOW:.2f} of the stream's widest, or of this "
                  "machine's quiet width on record (the upper quartile of the widest probe of "
                  "its last streams) when wider, ran on a core shared with another "
                  "hardware thread (another program, or on a VM another guest), where a kernel "
                  "slows by up to half with a steady clock; quiet core: the kernel's median over "
                  "the other replays (how many in brackets); both quiet: the ratio to the base "
                  "over the rounds where neither replay was on a shared core (how many in "
                  f"brackets); each given from {QUIET_MIN} replays or rounds. On a machine "
                  "with no record yet, quiet is relative to the stream's widest probe alone: "
                  "when every replay of such a stream ran on a shared core, its widest is "
                  "narrow too and none is marked."]
    return "\n".join(lines)


def _command_classes(cmds: np.ndarray, outcomes: np.ndarray) -> np.ndarray:
    """A class label per command, from its kind and type and what it did."""
    from lob.semantics import Kind, OrderType, Status

    kind, otype, st = cmds["kind"], cmds["otype"], outcomes["status"]
    traded = outcomes["fills"] > 0
    lab = np.full(len(cmds), "other", dtype=object)
    sub = kind == Kind.SUBMIT
    rej = st == Status.REJECTED
    for t in OrderType:
        m = sub & (otype == t) & ~rej
        name = t.name
        if t in (OrderType.LIMIT, OrderType.POST_ONLY):
            lab[m & traded] = f"{name} trades"
            lab[m & ~traded & (st == Status.ACCEPTED)] = f"{name} rests untouched"
            lab[m & ~traded & (st != Status.ACCEPTED)] = f"{name} refused by the book"
        elif t == OrderType.FOK:
            lab[m & traded] = "FOK fills"
            lab[m & ~traded] = "FOK unfillable"
        else:
            lab[m & traded] = f"{name} trades"
            lab[m & ~traded] = f"{name} finds nothing"
    can = kind == Kind.CANCEL
    lab[can & (st == Status.CANCELLED)] = "CANCEL hits"
    lab[can & (st != Status.CANCELLED)] = "CANCEL misses"
    lab[(kind == Kind.MODIFY) & ~rej] = "MODIFY"
    lab[(kind == Kind.MASS_CANCEL) & ~rej] = "MASS_CANCEL"
    lab[rej] = "rejected"
    return lab


def command_breakdown(engine: str, workload, *, scale: float = 1.0, rounds: int = 3,
                      clock: str = "cpu") -> pd.DataFrame:
    """``engine``'s in-kernel time per class of command on ``workload``.

    The engine must time itself (``clock == "engine"``: the compiled engines read
    ``clock_gettime`` around each timed command inside the kernel). Over ``rounds`` timed
    replays on fresh engines each command keeps its lowest duration (a preemption or an
    interrupt inflates one round, rarely all). One row per class: ``commands``, ``share``
    of the timed commands, ``median_ns`` and ``p90_ns`` of the class's durations (the
    clock's own cost included; ``clock_ns`` is one read's median, read in the same
    process), ``time_share`` (the class's share of the summed durations), and
    ``untimed_ns_per_op``: the same stream's kernel ns/op without the clock reads, the
    figure the shares divide (read with ``clock``, as :func:`measure` does). The in-kernel
    clock's resolution on a VM is ~10 ns, so a class's median says more than its single
    values.
    """
    from lob.engines.registry import get_engine

    wl = _workload(workload, scale)
    cmds, cfg = wl.commands, wl.config
    eng = get_engine(engine, cfg)
    if getattr(eng, "clock", None) != "engine":
        raise ValueError(f"{engine!r} does not time itself inside a replay "
                         f"(clock={getattr(eng, 'clock', None)!r}); use lob.bench for it")
    timed = cmds["timed"]
    best = None
    untimed = []
    res = None
    for _ in range(max(1, rounds)):
        res, d = get_engine(engine, cfg).replay_timed(cmds)
        best = d if best is None else np.minimum(best, d)
        plain, kernel, _ = timed_replay(lambda: get_engine(engine, cfg).replay(cmds),
                                        clock_of(clock))
        untimed.append(kernel / max(1, len(cmds)))
        del plain
    labels = _command_classes(cmds, res.outcomes)[timed]
    clock = eng.clock_overhead()["median_ns"]
    total = float(best.sum()) or 1.0
    rows = []
    for lab in sorted(set(labels)):
        d = best[labels == lab]
        rows.append({"class": lab, "commands": int(d.size), "share": d.size / len(best),
                     "median_ns": float(np.median(d)), "p90_ns": float(np.percentile(d, 90)),
                     "time_share": float(d.sum()) / total})
    out = pd.DataFrame(rows).sort_values("time_share", ascending=False, ignore_index=True)
    out.attrs.update({"engine": engine, "clock_ns": clock,
                      "untimed_ns_per_op": float(np.median(untimed))})
    out["clock_ns"] = clock
    out["untimed_ns_per_op"] = float(np.median(untimed))
    return out


def hardware_counters() -> dict | None:
    """What ``perf stat`` counts here: ``{"cycles": n, "instructions": n}`` for a trivial
    command, or None when perf is missing or the machine exposes no hardware counters (a VM
    without a virtual PMU reports ``<not supported>``), in which case
    :func:`command_breakdown` is the way to see where time goes."""
    perf = shutil.which("perf")
    if perf is None:
        return None
    try:
        r = subprocess.run([perf, "stat", "-x,", "-e", "cycles,instructions", "true"],
                           capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    got = {}
    for line in r.stderr.splitlines():
        parts = line.split(",")
        if len(parts) > 2 and parts[2] in ("cycles", "instructions"):
            try:
                got[parts[2]] = int(parts[0])
            except ValueError:
                return None  # "<not supported>" or "<not counted>"
    return got if len(got) == 2 else None

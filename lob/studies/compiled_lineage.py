"""The compiled lineage step by step, and every engine side by side: the study behind
``notebooks/compiled_lineage.ipynb`` (split out of :mod:`lob.studies.evolution_stress`).

Every engine the workbench knows that is not pure Python (:func:`side_engines`: lob's compiled
lineage ``v0+pool@numba`` .. ``v5@numba``, the example C engine, any engine behind the C ABI
built here) replays each of :data:`LINEAGE_WORKLOADS` in one interleaved measurement per stream
(:func:`measure_lineage`, by :mod:`lob.diagnose.profile`: the kernel's ns/op on the thread's CPU
clock), the newest step measured twice (the A/A control). From it: each step's mechanism
(:func:`steps_table`), its gain over its parent per stream against the A/A band
(:func:`lineage_table`), v3 -> v4 as its single steps beside the whole step, all from that one
measurement (:func:`v4_steps_table`), the newest step's time split into the stream's floor and
what the book adds, in cycles as well (:func:`floor_table`, the yardsticks of
:mod:`lob.diagnose.probes`), every engine beside the newest step (:func:`side_table`) and, where
a step is slower than its parent, the classes of commands that took the added time
(:func:`explain_slower`). Where the machine has the tools: callgrind's counts per command
(:func:`measure_counts`) and perf's hottest source lines of the newest step
(:func:`measure_hotspots`).

Procedures return plain data (lists of records, dicts), so the builders are unit-tested on
synthetic data (``tests/studies/test_study_compiled_lineage.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np

from lob.diagnose.profile import QUIET_MIN
from lob.studies import conclude as K
from lob.studies.evolution_stress import CONFIDENCE, MIN_ROUNDS
from lob.studies.shape import Parameters as _Parameters
from lob.studies.shape import Shape, at_least_one, at_least_zero

__all__ = ["LINEAGE_WORKLOADS", "BREAKDOWN_ROUNDS", "V4_BUNDLE", "Parameters", "side_engines",
           "measure_lineage", "steps_table", "lineage_table", "v4_steps_table", "floor_table",
           "side_table", "measure_counts", "counts_table", "measure_hotspots",
           "hotspots_table", "explain_slower", "slower_table", "claims", "SHAPE"]

LINEAGE_WORKLOADS = ("lobster_replay", "cpp_comprehensive")  # no FOK / FOK-heavy: v2, v3 act
BREAKDOWN_ROUNDS = 3  # command_breakdown's rounds (each command keeps its lowest duration)
V4_BUNDLE = ("v3@numba", "v4@numba")  # the step lobster's v4 layout took at once, now in steps


@dataclass(frozen=True)
class Parameters(_Parameters):
    """The notebook's parameters this study checks (names and defaults as in its cell)."""

    lineage_scale: float = 0.002
    repeat: int = 3
    callgrind_scale: float = 0.0
    hotspots_seconds: float = 0.0

    def check(self) -> None:
        if isinstance(self.lineage_scale, bool) or not isinstance(self.lineage_scale,
                                                                  int | float) \
                or not self.lineage_scale > 0:
            raise ValueError(f"lineage_scale must be > 0, got {self.lineage_scale!r}")
        at_least_one(self.repeat, "repeat")
        at_least_zero(self.callgrind_scale, "callgrind_scale")
        at_least_zero(self.hotspots_seconds, "hotspots_seconds")


def side_engines(*, say=print, c_book=None) -> list[str]:
    """Every engine the workbench knows that is not pure Python, lineage first: lob's
    compiled lineage (:func:`lob.engines.toggles.chain`), then the engines behind the C ABI
    and any other registered one. The example C engine is built first (``c_book``: gcc into
    the cache); an engine that cannot be built or is not built here gets one line to ``say``
    and is left out."""
    from lob.engines import toggles as tg
    from lob.engines.registry import engine_names, engine_spec
    from lob.studies import declared

    if c_book is None:
        from lob.studies.engines_beside import c_book
    try:
        c_book()
    except Exception as e:  # no C compiler, no checkout: one line, then without it
        say(f"c_book is not built here ({e}); the side-by-side goes on without it")
    chain = tg.chain("numba")
    rest = [n for n in engine_names() if n != "reference" and n not in chain
            and engine_spec(n).backend not in ("python", "cpp")]  # cpp: fok_scan_bottleneck
    return declared.built_only([*chain, *rest], say=say)


def measure_lineage(engines: Sequence[str], scale: float, repeat: int, *,
                    workloads: Sequence[str] = LINEAGE_WORKLOADS, measure=None) -> dict:
    """``engines`` (:func:`side_engines`) on each stream at ``scale``, interleaved in
    ``max(repeat, MIN_ROUNDS)`` rounds, the newest compiled step measured twice (the A/A
    control): :func:`lob.diagnose.profile.measure` once per stream, read by
    :func:`~lob.diagnose.profile.lineage_profile` (each step's kernel ns/op, its mechanism, its
    ratio to its parent) and :func:`~lob.diagnose.profile.side_by_side` (every engine over that
    base). While fewer than that many rounds ran every replay on a quiet core (no other
    hardware thread sharing it), up to as many rounds more are run, and the comparisons use
    the quiet rounds when there are enough (``quiet_pairs``, ``quiet_replays`` in the rows;
    :func:`lob.diagnose.profile.lineage_profile`). The yardsticks of
    :mod:`lob.diagnose.probes` are taken in the same rounds: per
    stream, ``floor[w]`` holds, round by round, the core's clock (the round's median probe)
    and the stream's floor (``core_ghz``, ``floor_ns``), the base's kernel ns/op
    (``base_ns``) and whether its replay ran on a core shared with another hardware thread
    (``base_shared``).
    Returns ``{"lineage": [rows], "side": [rows], "floor": {w: ...}, "base", "rounds",
    "scale", "workloads", "v4_whole": [rows]}`` (rows: the profile's columns, an engine
    refusing a stream with a ``note``; ``v4_whole``: v4 over v3 per stream, from the same
    rounds, when both ran)."""
    from lob.diagnose import profile as pf
    from lob.diagnose.probes import shared_replays
    from lob.engines import toggles as tg

    measure = measure or pf.measure
    chain = [e for e in tg.chain("numba") if e in engines]
    base = chain[-1]
    at_least_one(repeat, "repeat")
    rounds = max(repeat, MIN_ROUNDS)
    got, floor = {}, {}
    for w in workloads:
        probes: list[dict] = []
        got[w] = measure(list(engines), w, scale=scale, rounds=rounds, twin=base, probes=probes,
                         top_up=rounds)
        floor[w] = {"core_ghz": [float(np.median(p["core_ghz"])) for p in probes],
                    "floor_ns": [p["floor_ns"] for p in probes],
                    "base_ns": list(got[w][base].get("kernel", [])),
                    "base_shared": shared_replays(probes).get(base, np.zeros(0)).tolist()}
    lin = pf.lineage_profile(workloads=list(workloads), versions=chain, twin=base,
                             measured=got)
    side = pf.side_by_side(list(engines), list(workloads), base=base, twin=base, measured=got)
    whole = []
    if all(e in chain for e in V4_BUNDLE):  # v4 over v3 in the same rounds as its steps
        whole = [r for r in _records(pf.lineage_profile(
            workloads=list(workloads), versions=list(V4_BUNDLE), twin=base, measured=got))
            if r["step"] == V4_BUNDLE[1]]
    ran = {w: len(got[w][base].get("kernel", [])) for w in workloads}
    return {"lineage": _records(lin), "side": _records(side), "floor": floor, "base": base,
            "rounds": rounds, "ran": ran, "scale": scale, "workloads": list(workloads),
            "v4_whole": whole}


def _records(df) -> list[dict]:
    """A profile DataFrame as plain records (NaN as None)."""
    return [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
            for r in df.to_dict("records")]


def _inverse(x):
    return None if x is None else 1 / x


def _gain_row(r: dict, ratio: str) -> dict:
    """A profile row's cost ratio (``ratio``: step / parent, or engine / base) as a
    throughput ratio (higher is faster), with its interval and the A/A band inverted alike."""
    return {"gain": _inverse(r.get(ratio)), "gain_lo": _inverse(r.get(f"{ratio}_hi")),
            "gain_hi": _inverse(r.get(f"{ratio}_lo")), "call": r.get("call"),
            "aa_low": _inverse(r.get("aa_high")), "aa_high": _inverse(r.get("aa_low"))}


GAIN_KINDS = {"gain": "ratio", "gain_lo": "ratio", "gain_hi": "ratio", "call": "label",
              "aa_low": "ratio", "aa_high": "ratio"}


def steps_table(lin: dict) -> K.Conclusion:
    """Each compiled step, its parent and its mechanism (one line of
    :mod:`lob.engines.toggles`)."""
    rows = list({r["step"]: {"step": r["step"], "parent": r["parent"],
                             "mechanism": r["mechanism"]} for r in lin["lineage"]}.values())
    return K.Conclusion("lineage steps", rows, key="step",
                        kinds={"step": "label", "parent": "label", "mechanism": "label"})


QUIET_KINDS = {"rounds": "count", "pairs": "count"}
QUIET_NOTE = ("medians, gains and A/A bands leave out the replays that ran on a core shared "
              "with another hardware thread when at least 5 rounds remain; pairs: the rounds "
              "a gain used then ('-': every round, too few were quiet)")


def _quiet_columns(lin: dict, r: dict) -> dict:
    """``rounds`` (those the stream ran) and ``pairs`` (the quiet rounds a ratio used, if
    any) of a profile row."""
    ran = (lin.get("ran") or {}).get(r["workload"])
    pairs = r.get("quiet_pairs")
    pairs = None if pairs is None or pairs != pairs else int(pairs)  # NaN: every round used
    return {"rounds": ran, "pairs": pairs} if ran is not None else {}


def _rounds_note(lin: dict) -> str:
    n = lin["rounds"]
    if not lin.get("ran"):
        return f"{n} interleaved rounds"
    return (f"{n} interleaved rounds, up to {2 * n} while fewer than {n} had every replay on a "
            f"quiet core (rounds: how many ran)")


def lineage_table(lin: dict) -> K.Conclusion:
    """Per stream and step: the kernel's ns/op (median of the rounds, interval), the step's
    gain over its parent (throughput ratio: the median of the per-round ratios, interval), the
    A/A band of the stream and the call against it. Sentences: per stream, the steps faster
    beyond the band, those slower, and those not told apart from noise."""
    rows = []
    for r in lin["lineage"]:
        row = {"workload": r["workload"], "step": r["step"], "parent": r["parent"],
               "kernel_ns": r.get("kernel_ns"), "kernel_lo": r.get("kernel_lo"),
               "kernel_hi": r.get("kernel_hi")}
        rows.append({**row, **(_gain_row(r, "vs_parent") if r["parent"] else {}),
                     **_quiet_columns(lin, r)})
    t = K.Conclusion("lineage", rows, key=["workload", "step"],
                     kinds={"step": "label", "parent": "label", **GAIN_KINDS, **QUIET_KINDS},
                     note=f"{_rounds_note(lin)}, fresh engine each, on the "
                          f"thread's CPU clock; kernel_ns: in-kernel ns/op (median, "
                          f"kernel_lo-kernel_hi its interval); gain: the parent's kernel time "
                          f"over the step's (median of the per-round ratios, gain_lo-gain_hi); "
                          f"aa_low-aa_high: {lin['base']} measured twice in the same rounds; "
                          f"call: the gain's interval against that band; {QUIET_NOTE}; "
                          f"streams at {K.fmt(lin['scale'])} of their published sizes")
    for w in lin["workloads"]:
        steps = [r for r in t.rows if r["workload"] == w and r.get("gain") is not None]
        by = {c: [r for r in steps if r["call"] == c] for c in
              ("faster", "slower", "within noise", "inconclusive")}
        parts = [f"{c}: " + ", ".join(
            f"{r['step']} {t.cell((w, r['step']), 'gain')}x {r['parent']} "
            f"({t.cell((w, r['step']), 'gain_lo')}-{t.cell((w, r['step']), 'gain_hi')})"
            for r in rs) for c, rs in by.items() if rs]
        if steps:
            band = steps[0]["step"]
            t.say(f"On {w} (A/A band {t.cell((w, band), 'aa_low')}-"
                  f"{t.cell((w, band), 'aa_high')}), each step over its parent: "
                  + "; ".join(parts) + ".")
    return t


def _v4_path() -> list[str]:
    """The registered steps from v3 to v4 (compiled), in order."""
    from lob.engines import toggles as tg

    parents = tg.backend_versions("numba")
    path = [V4_BUNDLE[1]]
    while parents.get(path[0]) not in (None, V4_BUNDLE[0]):
        path.insert(0, parents[path[0]])
    return path


def v4_steps_table(lin: dict) -> K.Conclusion:
    """v3 -> v4 per stream: each single step's gain over its parent (the very rows of
    :func:`lineage_table`) and the whole step, v4 over v3, measured in the same rounds
    (``lin["v4_whole"]``): one measurement, so each figure reads the same in both tables.
    Sentences: per stream, the whole step and its parts."""
    path = _v4_path()
    rows = []
    for w in lin["workloads"]:
        parts = [r for r in lin["lineage"] if r["workload"] == w and r["step"] in path
                 and r.get("parent")]
        whole = [r for r in lin.get("v4_whole") or [] if r["workload"] == w
                 and not any((x["parent"], x["step"]) == (r["parent"], r["step"]) for x in parts)]
        for r in [*parts, *whole]:
            kind = "whole" if r in whole else "single"
            rows.append({"workload": w, "step": r["step"], "parent": r["parent"], "kind": kind,
                         **_gain_row(r, "vs_parent")})
    t = K.Conclusion("v3 -> v4 in steps", rows, key=["workload", "parent", "step"],
                     kinds={"step": "label", "parent": "label", "kind": "label", **GAIN_KINDS},
                     note="single: one registered step over its parent (the lineage table's "
                          "row); whole: v4 over v3 in the same rounds; gain: the parent's "
                          "kernel time over the step's (median of the per-round ratios, "
                          "gain_lo-gain_hi), call against the stream's A/A band")
    for w in lin["workloads"]:
        mine = [r for r in t.rows if r["workload"] == w]
        whole = [r for r in mine if r["kind"] == "whole"]
        if not whole:
            continue
        k = (w, whole[0]["parent"], whole[0]["step"])
        t.say(f"On {w}, v4 over v3 is {t.cell(k, 'gain')}x ({t.cell(k, 'gain_lo')}-"
              f"{t.cell(k, 'gain_hi')}, {whole[0]['call']}); its steps: " + ", ".join(
                  f"{r['step']} {t.cell((w, r['parent'], r['step']), 'gain')}x "
                  f"({r['call']})" for r in mine if r["kind"] == "single") + ".")
    return t


def floor_table(lin: dict) -> K.Conclusion:
    """Where the newest step's nanoseconds go, per stream: the stream's floor (reading every
    command and writing every outcome with no book, :func:`lob.diagnose.probes.stream_floor`)
    in ns/op and as a share of the base's kernel time (median of the per-round ratios, with
    its interval): a floor no engine replaying the stream can beat; what the book adds over
    it (kernel minus floor, round by round), and the core's clock in those rounds with
    the base's kernel in cycles per command. Sentences: per stream, how much of the base's
    time is the stream and how much is the book."""
    from lob.diagnose.probes import SHARED_BELOW
    from lob.measure import stats

    base = lin["base"]

    def mid(xs):
        mi = stats.median_interval(np.asarray(xs, dtype=float), CONFIDENCE, of="rounds")
        return (mi["median"], *(mi["ci"] or (None, None)))

    rows = []
    for w in lin["workloads"]:
        f = (lin.get("floor") or {}).get(w)
        if not f or not f["floor_ns"] or len(f["base_ns"]) != len(f["floor_ns"]):
            continue  # an old record, or the base refused the stream
        fl, b = np.asarray(f["floor_ns"], dtype=float), np.asarray(f["base_ns"], dtype=float)
        ghz = np.asarray(f["core_ghz"], dtype=float)
        shared = np.asarray(f.get("base_shared") or [False] * len(b), dtype=bool)
        floor_ns, floor_lo, floor_hi = mid(fl)
        share, share_lo, share_hi = mid(fl / b)
        book, book_lo, book_hi = mid(b - fl)
        rows.append({"workload": w, f"{base} ns/op": float(np.median(b)),
                     "floor_ns": floor_ns, "floor_lo": floor_lo, "floor_hi": floor_hi,
                     "share": share, "share_lo": share_lo, "share_hi": share_hi,
                     "book_ns": book, "book_lo": book_lo, "book_hi": book_hi,
                     "core_ghz": float(np.median(ghz)),
                     f"{base} cycles/op": float(np.median(b * ghz)),
                     "shared": int(shared.sum()), "rounds": len(b),
                     "quiet_ns": (float(np.median(b[~shared])) if (~shared).sum() >= QUIET_MIN
                                  else None)})
    t = K.Conclusion("the stream's floor", rows, key="workload",
                     kinds={"share": "ratio", "share_lo": "ratio", "share_hi": "ratio",
                            "shared": "count", "rounds": "count"},
                     note=f"floor: a compiled loop that reads every command (40 bytes) and "
                          f"writes its outcome (34 bytes) with no book, timed in each round "
                          f"(median, floor_lo-floor_hi); share: floor "
                          f"over {base}'s kernel time in the same round (median, interval); "
                          f"book_ns: {base}'s kernel minus the floor, round by round; core_ghz: "
                          f"dependent one-cycle operations (an xorshift chain) per ns, probed "
                          f"around every replay (each round's median); cycles/op: {base}'s "
                          f"kernel ns/op times that round's clock; rounds: how many ran; "
                          f"shared: {base}'s replays on a core shared with another "
                          f"hardware thread (the issue width probed before or after it below "
                          f"{SHARED_BELOW} of the stream's widest or of this machine's quiet "
                          f"width on record, whichever is wider), quiet_ns: its median over "
                          f"the others, given from {QUIET_MIN} of them")
    for r in t.rows:
        w = r["workload"]
        t.say(f"On {w}, reading the commands and writing the outcomes takes "
              f"{t.cell(w, 'floor_ns')} ns/op ({t.cell(w, 'floor_lo')}-{t.cell(w, 'floor_hi')}), "
              f"{t.cell(w, 'share')} ({t.cell(w, 'share_lo')}-{t.cell(w, 'share_hi')}) of "
              f"{base}'s kernel time: no engine replaying this stream can take less; what the "
              f"book adds over it is {t.cell(w, 'book_ns')} ns/op ({t.cell(w, 'book_lo')}-"
              f"{t.cell(w, 'book_hi')}), and the whole kernel takes "
              f"{t.cell(w, f'{base} cycles/op')} cycles a command at the "
              f"{t.cell(w, 'core_ghz')} GHz the core ran at."
              + ("" if not r["shared"] else
                 f" {t.cell(w, 'shared')} of its {t.cell(w, 'rounds')} replays ran on a core "
                 f"shared with another hardware thread, where a kernel slows by up to half"
                 + (" (too few others for a median of them)" if r["quiet_ns"] is None else
                    f"; its median over the others is {t.cell(w, 'quiet_ns')} ns/op") + "."))
    return t


def side_table(lin: dict) -> K.Conclusion:
    """Every engine on each stream: kernel ns/op with its interval and its throughput over
    the base (the newest compiled step; median of the per-round ratios, interval), the A/A
    band and the call; an engine refusing a stream is named with its reason."""
    base = lin["base"]
    rows = []
    for r in lin["side"]:
        row = {"workload": r["workload"], "engine": r["engine"], "backend": r["backend"],
               "kernel_ns": r.get("kernel_ns"), "kernel_lo": r.get("kernel_lo"),
               "kernel_hi": r.get("kernel_hi")}
        if r.get("note"):
            rows.append(row)
            continue
        g = _gain_row(r, "vs_base")
        rows.append({**row, f"vs_{base}": g["gain"], "lo": g["gain_lo"], "hi": g["gain_hi"],
                     "aa_low": g["aa_low"], "aa_high": g["aa_high"], "call": g["call"],
                     "same_work": r["same_checksum"], **_quiet_columns(lin, r)})
    t = K.Conclusion("side by side", rows, key=["workload", "engine"],
                     kinds={"engine": "label", "backend": "label", f"vs_{base}": "ratio",
                            "lo": "ratio", "hi": "ratio", "aa_low": "ratio",
                            "aa_high": "ratio", "call": "label", "same_work": "label",
                            **QUIET_KINDS},
                     note=f"vs_{base}: the engine's throughput over {base}'s (in-kernel, "
                          f"median of the per-round ratios of {_rounds_note(lin)}, lo-hi its "
                          f"interval); aa_low-aa_high: {base} measured twice; same_work: the "
                          f"same checksum as {base}; {QUIET_NOTE}")
    for w in lin["workloads"]:
        mine = [r for r in t.rows if r["workload"] == w and r["engine"] != base
                and r.get("call")]
        by = {c: [r["engine"] for r in mine if r["call"] == c]
              for c in ("faster", "slower", "within noise", "inconclusive")}
        if mine:
            t.say(f"On {w}, against {base} (A/A band {t.cell((w, base), 'aa_low')}-"
                  f"{t.cell((w, base), 'aa_high')}): " + "; ".join(
                      f"{c}: " + ", ".join(f"{e} {t.cell((w, e), f'vs_{base}')}x" for e in es)
                      for c, es in by.items() if es) + ".")
    for r in lin["side"]:
        if r.get("note"):
            t.say(f"Not run: {r['engine']} on {r['workload']} ({r['note']}).")
    return t


def _why_not(amount: float, name: str, injected, available) -> str | None:
    """Why a section that runs an outside tool measures nothing: its parameter ``name`` is 0,
    or (when no stand-in was ``injected``) the tool says it cannot run here; else None."""
    if amount <= 0:
        return f"{name} is 0"
    return available() if injected is None else None


def measure_counts(engines: Sequence[str], scale: float, *,
                   workloads: Sequence[str] = LINEAGE_WORKLOADS, counts=None) -> dict:
    """Callgrind's instructions, branches, mispredicts and cache misses per command of each
    engine's replay (:func:`lob.diagnose.callgrind.counts`, the newest compiled step as the
    base) on each stream at ``scale``; exact and repeatable, so no rounds. ``scale`` 0 counts
    nothing. Returns ``{"rows": [...], "base", "scale", "workloads", "skipped"}``:
    ``skipped`` is why nothing was counted (``scale`` 0, or valgrind not installed here),
    else None."""
    from lob.diagnose import callgrind as cg
    from lob.engines import toggles as tg
    from lob.studies.engines_beside import c_book_toml

    chain = [e for e in tg.chain("numba") if e in engines]
    base = chain[-1] if chain else (list(engines) or [None])[0]
    got = {"rows": [], "base": base, "scale": scale, "workloads": list(workloads),
           "skipped": _why_not(scale, "callgrind_scale", counts, cg.available)}
    if got["skipped"]:
        return got
    counts = counts or partial(cg.counts, tomls=[c_book_toml()] if "c_book" in engines else [])
    order = [base, *[e for e in engines if e != base]]
    for w in workloads:
        got["rows"] += _records(counts(order, w, scale=scale, base=base))
    return got


COUNT_COLUMNS = ("instructions", "loads", "stores", "branches", "mispredicts", "d1_misses",
                 "ll_misses")


def _targets(rows: list[dict]) -> str:
    """`` (name)`` of the CPU(s) the counted code was compiled for, or nothing."""
    names = sorted({r["target"] for r in rows if r.get("target")})
    return f" ({', '.join(names)})" if names else ""


def counts_table(cnt: dict) -> K.Conclusion:
    """Per stream and engine: callgrind's counts per command, and against the base (the
    newest compiled step) and against the engine's lineage parent, the ratio of instructions
    and of mispredicts (exact: a ratio of counts, not of noisy times). Sentences: per stream,
    the base's counts, each lineage step's instructions over its parent's, and every other
    engine's over the base's; an engine that did other work (another checksum) gets no
    ratio."""
    from lob.engines import toggles as tg

    parents = tg.backend_versions("numba")
    base = cnt["base"]
    by = {(r["workload"], r["engine"]): r for r in cnt["rows"]}
    rows = []
    for r in cnt["rows"]:
        row = {"workload": r["workload"], "engine": r["engine"]}
        if r.get("note"):
            rows.append(row)
            continue
        row.update({c: r[c] for c in COUNT_COLUMNS})
        if r["same_work"]:
            row[f"instr_vs_{base}"] = r["instructions_vs_base"]
            row[f"mispred_vs_{base}"] = r["mispredicts_vs_base"]
            par = by.get((r["workload"], tg.measured_step(
                r["engine"], {e for (_, e) in by}, "numba")[0] if r["engine"] in parents else None))
            if par is not None and par["same_work"]:
                row["instr_vs_parent"] = r["instructions"] / par["instructions"]
        rows.append(row)
    t = K.Conclusion("callgrind counts", rows, key=["workload", "engine"],
                     kinds={"engine": "label", f"instr_vs_{base}": "ratio",
                            f"mispred_vs_{base}": "ratio", "instr_vs_parent": "ratio"},
                     note=f"per command of one replay (valgrind's callgrind: exact counts on a "
                          f"simulated CPU, of code compiled for the CPU valgrind presents"
                          f"{_targets(cnt['rows'])}; mispredicts by its simple predictor, "
                          f"d1/ll misses by its cache model without prefetch; no time); "
                          f"streams at {K.fmt(cnt['scale'])} of their published sizes")
    if cnt["skipped"]:
        t.say(f"Not counted: {cnt['skipped']} (lob callgrind, valgrind's callgrind, counts "
              f"instructions per command where the machine has no hardware counters).")
        return t
    for w in cnt["workloads"]:
        if (w, base) not in by:
            continue
        k = (w, base)
        steps = [e for e in tg.chain("numba") if (w, e) in by
                 and t.value((w, e), "instr_vs_parent") is not None]  # in lineage order
        others = [e for (ww, e) in by if ww == w and e != base and e not in parents
                  and not by[(ww, e)].get("note")]
        s = (f"On {w}, {base} executes {t.cell(k, 'instructions')} instructions a command "
             f"({t.cell(k, 'branches')} branches, {t.cell(k, 'mispredicts')} simulated "
             f"mispredicts, {t.cell(k, 'd1_misses')} L1 misses)")
        if steps:
            s += "; each step's instructions over its parent's: " + ", ".join(
                f"{e} {t.cell((w, e), 'instr_vs_parent')}x" for e in steps)
        if others:
            s += f"; over {base}'s: " + ", ".join(
                f"{e} {t.cell((w, e), f'instr_vs_{base}')}x"
                if by[(w, e)]["same_work"] else f"{e} (other work: no ratio)"
                for e in others)
        t.say(s + ".")
    for r in cnt["rows"]:
        if r.get("note"):
            t.say(f"Not run: {r['engine']} on {r['workload']} ({r['note']}).")
    return t


def measure_hotspots(engines: Sequence[str], seconds: float, *,
                     workloads: Sequence[str] = LINEAGE_WORKLOADS, top: int = 12,
                     sample=None) -> dict:
    """Where the newest compiled step among ``engines`` spends its kernel time, source line by
    source line (:func:`lob.diagnose.hotspots.hotspots`: perf's cpu-clock samples while fresh
    engines replay each stream at its published size for ``seconds`` of kernel time, mapped
    through a debug-info build's line table). ``seconds`` 0 samples nothing. Returns
    ``{"engine", "seconds", "workloads", "rows": [{"workload", "rank", "share_pct", "line",
    "function", "code"}], "runs": {workload: {"commands", "reps", "samples",
    "kernel_samples", "ns_per_op"}}, "skipped"}``: ``skipped`` is why nothing was sampled
    (``seconds`` 0, no compiled step, or perf cannot sample here), else None."""
    from lob.diagnose import hotspots as hs
    from lob.engines import toggles as tg

    chain = [e for e in tg.chain("numba") if e in engines]
    got = {"engine": chain[-1] if chain else None, "seconds": seconds,
           "workloads": list(workloads), "rows": [], "runs": {},
           "skipped": _why_not(seconds, "hotspots_seconds", sample, hs.available) if chain
           else "no compiled step of the lineage among the engines"}
    if got["skipped"]:
        return got
    sample = sample or hs.hotspots
    for w in workloads:
        h = sample(got["engine"], w, seconds=seconds, top=top)
        got["runs"][w] = {k: h[k] for k in ("commands", "reps", "samples", "kernel_samples",
                                            "ns_per_op")}
        got["rows"] += [{"workload": w, "rank": k, "share_pct": 100 * r["share"],
                         "line": r["where"], "function": r["function"], "code": r["code"]}
                        for k, r in enumerate(h["lines"], 1)]
    return got


def hotspots_table(hot: dict) -> K.Conclusion:
    """The newest step's most sampled source lines per stream, with the share of its kernel's
    samples each holds; sentences name each stream's three heaviest lines."""
    runs = hot["runs"]
    note = ("share_pct: percent of the kernel's perf samples (cpu-clock) on the line, while "
            f"fresh engines replayed each stream at its published size for {hot['seconds']:g} s "
            "of kernel time; a sample names the instruction after the one the core waited "
            "on, so a line carries the cost of the missed load just before it (sometimes on "
            "the line above) and of a mispredicted branch that resumes on it: where time "
            "is spent, not always what could be removed; the sampled kernel is a debug-info "
            "build")
    if runs:
        note += " (" + "; ".join(
            f"{w}: {r['reps']} replays, {r['kernel_samples']:,} samples in the kernel, "
            f"{r['ns_per_op']:.1f} ns/op under sampling" for w, r in runs.items()) + ")"
    t = K.Conclusion(f"hotspots ({hot['engine']})" if hot["engine"] else "hotspots",
                     hot["rows"], key=["workload", "rank"],
                     kinds={"rank": "count", "share_pct": "ratio", "workload": "label",
                            "line": "label", "function": "label", "code": "label"}, note=note)
    if hot["skipped"]:
        t.say(f"Not sampled: {hot['skipped']} (lob hotspots, perf's cpu-clock samples mapped "
              f"to source lines).")
        return t
    for w in hot["workloads"]:
        ranks = [r["rank"] for r in hot["rows"] if r["workload"] == w][:3]
        if not ranks:
            continue
        parts = [f"{t.cell((w, k), 'line')} in {t.cell((w, k), 'function')} "
                 f"({t.cell((w, k), 'share_pct')}% of its samples)" for k in ranks]
        t.say(f"On {w}, {hot['engine']}'s kernel spends the most sampled time on "
              + ", then ".join(parts) + ".")
    return t


def _times_itself(engine: str) -> bool:
    from lob.engines.registry import get_engine

    return getattr(get_engine(engine), "clock", None) == "engine"


def explain_slower(lin: dict, *, breakdown=None, times_itself=None) -> list[dict]:
    """For each step slower than its parent beyond the A/A band on a stream: both engines'
    in-kernel time per class of command (:func:`lob.diagnose.profile.command_breakdown`, at
    the row's ``scale``, else the lineage's), each class's part of the stream's kernel ns/op
    (its share of the timed time x the untimed ns/op; the parts sum to the ns/op), and the
    class whose part grew the most. Rows ``{"workload", "step", "parent", "class", "share"
    (of the commands), "step_part", "parent_part" (ns/op), "added_ns_per_op", "step_median",
    "parent_median"}``; a step whose classes add no time gets ``class`` None (the data does
    not say where), and one of two engines that do not time each command inside their replay
    (the pure-Python ones) ``class`` None and ``untimed`` True (nothing to split)."""
    from lob.diagnose import profile as pf

    breakdown = breakdown or pf.command_breakdown
    times_itself = times_itself or _times_itself
    out = []
    for r in lin["lineage"]:
        if r.get("call") != "slower":
            continue
        w = r["workload"]
        if not (times_itself(r["step"]) and times_itself(r["parent"])):
            out.append({"workload": w, "step": r["step"], "parent": r["parent"],
                        "class": None, "untimed": True})
            continue
        sc = r.get("scale", lin["scale"])
        a = _records(breakdown(r["step"], w, scale=sc, rounds=BREAKDOWN_ROUNDS))
        b = {x["class"]: x for x in _records(
            breakdown(r["parent"], w, scale=sc, rounds=BREAKDOWN_ROUNDS))}
        best = None
        for x in a:
            y = b.get(x["class"])
            if y is None:
                continue
            sp = x["time_share"] * x["untimed_ns_per_op"]
            pp = y["time_share"] * y["untimed_ns_per_op"]
            if sp - pp > 0 and (best is None or sp - pp > best["added_ns_per_op"]):
                best = {"class": x["class"], "share": x["share"], "step_part": sp,
                        "parent_part": pp, "added_ns_per_op": sp - pp,
                        "step_median": x["median_ns"], "parent_median": y["median_ns"]}
        out.append({"workload": w, "step": r["step"], "parent": r["parent"],
                    **(best or {"class": None})})
    return out


def slower_table(rows: list[dict], name: str = "slower steps") -> K.Conclusion:
    """The steps slower than their parent beyond the A/A band, and where the added time went
    (the class of command whose part of the stream's kernel ns/op grew the most)."""
    t = K.Conclusion(name, [{k: v for k, v in r.items() if k != "untimed"} for r in rows],
                     key=["workload", "step"],
                     kinds={"step": "label", "parent": "label", "class": "label",
                            "share": "ratio"},
                     note="step_part / parent_part: the class's part of the stream's kernel "
                          "ns/op (its share of the in-kernel time x the untimed ns/op); "
                          "added_ns_per_op: their difference; *_median: one command's median "
                          "in-kernel ns (the clock read included)")
    if not rows:
        t.say("No step is slower than its parent beyond the A/A band on any stream.")
    for r in rows:
        k = (r["workload"], r["step"])
        if r.get("untimed"):
            t.say(f"On {r['workload']}, {r['step']} is slower than {r['parent']}; where, "
                  f"the data cannot say: these engines do not time each command inside "
                  f"their replay, so there is no per-class split.")
        elif r["class"] is None:
            t.say(f"On {r['workload']}, {r['step']} is slower than {r['parent']}, and no class "
                  f"of command shows where: every class's part of the ns/op is the same or "
                  f"lower.")
        else:
            t.say(f"On {r['workload']}, {r['step']} is slower than {r['parent']}; the most "
                  f"added time is in {r['class']} ({t.cell(k, 'share')} of the commands): "
                  f"{t.cell(k, 'step_part')} ns of each op against {t.cell(k, 'parent_part')} "
                  f"ns.")
    return t


def claims(*_args) -> dict[str, dict]:
    """No seed claim rests on this study (the seeds publish no compiled lineage of lob's):
    its tables are lob's own attribution, so it records no claim measurement."""
    return {}


SHAPE = Shape(parameters=Parameters,
              measure=(side_engines, measure_lineage, explain_slower, measure_counts,
                       measure_hotspots),
              tables=(steps_table, lineage_table, v4_steps_table, floor_table, side_table,
                      slower_table, counts_table, hotspots_table),
              claims=claims)

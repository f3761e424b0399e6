"""Judging: lob's measurement of a claim, the verdict on it, and the tables of verdicts.

``experiments/claims.yaml`` defines every claim (the seed's figure, metric, workload, size and
machine, the lob experiment that measures its analog, the regime diagnostics the measurement
must satisfy, a tolerance). A notebook stores its measurement of a claim in
``summary.json`` under ``claims.<id>`` (:func:`measurement` builds the record); the report
reads them back (:func:`lob.studies.claims.collecting.collect`) and judges each (:func:`judge`):

* ``reproduced``: the same direction (side of the claim's pivot) and within the stated
  relative tolerance of the seed's figure (exact claims: every counter equal);
* ``direction only``: the same side, another magnitude; the verdict names both figures and
  the measured explanation the notebook recorded (``explain``);
* ``inconclusive``: lob's figure comes with a noise interval (``ci``, e.g. over interleaved
  repeats: :func:`lob.measure.stats.median_interval`) that straddles an edge of the
  tolerance band, so noise alone could flip ``reproduced`` and ``direction only``; the
  verdict names the interval and the edge;
* ``not reproduced``: the other side of the pivot (the whole noise interval), outside a band
  or above a ceiling; a noise interval that contains the pivot is ``inconclusive`` (no
  direction either way) unless it also excludes the seed's whole tolerance band (the seed's
  effect is then ruled out: ``not reproduced``);
* ``not comparable``: a regime check failed (the verdict names the diagnostic, its value and
  what the seed's regime was); an ``absolute`` claim is always this (diagnostic ``machine``):
  absolute figures of different machines are never compared;
* ``not comparable: different mechanism``: the claim credits a mechanism (``mechanism:`` in
  claims.yaml: ``fok_early_exit``, ``bitmap_best_price``, ``release_upgrade``, ...) that
  lob's measured step does not have (the step's mechanisms come from its engines' toggles,
  ``lob_step``, or the measurement's ``mechanisms``): a figure from another cause is not the
  seed's finding, whatever its size;
* ``not comparable: at the clock floor``: only where the clock's ticks decide nothing. A
  percentile is the interval its ticks allow (:func:`lob.measure.stats.tick_interval`: +-1
  tick, a one-tick p50 "at most two ticks"); the seed's figure, a ratio of two of its
  percentiles, is the interval they allow (``Claim.seed_bounds``; a percentile from fewer
  samples than it needs only bounded by its neighbours, e.g. p50 <= p99 <= max), and lob's
  interval is widened by what its own tick allows (``clock``: the clock's known resolution
  or the grid measured from the samples, :func:`lob.measure.stats.clock_tick`). The claim
  is judged on those intervals: ``reproduced`` when lob's lies inside the tolerance band
  whatever the seed's true figure, ``direction only`` when outside it whatever that figure,
  ``inconclusive`` between (or when the seed's ticks leave its magnitude wider than the
  tolerance). It is ``not comparable: at
  the clock floor`` when the seed's interval holds the pivot (its direction is not known),
  when lob's ticks alone take its interval across the pivot, or for a seed figure of another
  form with a percentile under :data:`lob.measure.stats.CLOCK_FLOOR_TICKS` ticks;
* ``inconclusive: single point``: a ratio or direction claim whose lob figure has no noise
  interval: one measurement can neither reproduce nor refute a figure;
* ``not measured``: no run recorded the claim.

A measurement may hold ``parts`` (e.g. one per transport variant, each with its own value and
interval): each part is judged on its own and the claim takes their common verdict, or
``inconclusive`` (naming each part's) when they disagree.

Every verdict's reason ends with the engine the seed measured and what lob's engine has or
lacks of its design (``seed_engine`` / ``lob_engine_lacks``), when claims.yaml says.

A measurement with an A/A control (``aa``: the same engine measured twice in the same
interleaving, :func:`lob.measure.stats.aa_band`) is judged against it once: a claim about a
change (pivot 1) whose interval reaches into the A/A band is ``inconclusive``; lob's interval
is then judged against the pivot and the tolerance edges as it stands (never widened by the
band as well: that would count the noise twice). An A/A band wider than
:data:`lob.measure.stats.MAX_AA_SPREAD` gives ``not measurable on this machine``, naming the
spread: identical code moves more than the figure could tell, and more repeats would not
settle it.

A ratio claim with a noise interval is judged on the whole interval, never on the point
alone: inside the tolerance band ``reproduced``, entirely outside it ``direction only`` (or
``not reproduced`` on the other side of the pivot), across an edge ``inconclusive``. Without
an interval (one measurement) it is ``inconclusive: single point``.

Verdicts compare a ratio measured on one machine with the seed's ratio on its machine; a
seed's figure is shown only in a cell that names its machine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from lob.measure.stats import (
    CLOCK_FLOOR_TICKS,
    aa_unmeasurable,
    at_clock_floor,
    change_beyond_aa,
    min_count,
    quantile_of,
    quantised_factor,
    supported,
)
from lob.studies.claims.model import _UNSET, Claim, _equal, _show, for_experiment
from lob.studies.conclude import fmt

MIN_RUNS = 5  # a figure judged against a seed's comes from at least this many independent runs
VERDICTS = ("reproduced", "direction only", "inconclusive", "inconclusive: single point",
            "not reproduced", "not comparable", "not comparable: different mechanism",
            "not comparable: at the clock floor", "not measurable on this machine",
            "not measured", "sanity check: holds", "sanity check: fails")
SANITY = ("sanity check: holds", "sanity check: fails")  # counted apart from the verdicts

# Mechanisms whose point is memory: an allocator or a cache. A pure-Python engine allocates an
# object per node and walks pointers whatever its design, so its ratio of such a step is the
# interpreter's, not the seed's mechanism (as an allocation counter that is not the seed's
# kind is not compared).
MEMORY_MECHANISMS = ("node_pool", "packed_layout", "per_order_heap_allocation")


def measurement(value, *, diagnostics: dict | None = None, explain: dict | None = None,
                detail: str = "", ci: tuple[float, float] | None = None,
                ci_what: str = "", mechanisms: list[str] | tuple[str, ...] | None = None,
                clock: dict | None = None, parts: dict[str, dict] | None = None,
                aa: dict | None = None, runs: int | None = None,
                backend: str | None = None) -> dict:
    """The record a notebook stores under ``summary["claims"][id]``.

    ``value``: lob's figure in the claim's metric (a ratio, or a dict of counters);
    ``diagnostics``: the regime diagnostics (``count``, ``market_empty_pct``, ...);
    ``explain``: measured figures that explain a different magnitude (label -> number);
    ``detail``: what was divided by what, in words (no absolute figures: the row it lands
    in also shows the seed's); ``ci``: a noise interval of ``value`` (a ratio claim is then
    judged on the whole interval); ``ci_what``: what that interval is, in words (e.g.
    ``"93.8% interval of the median of 5 repeats"``), or without ``ci`` why there is none;
    ``mechanisms``: the mechanisms the measured lob step has (overrides claims.yaml's
    ``lob_step`` / ``lob_mechanisms``); ``clock``: ``{"tick_ns": lob's tick, known or measured
    from the samples (:func:`lob.measure.stats.clock_tick`), "percentiles": {name: ns}}`` (the
    percentiles entering ``value``), for the clock-floor check; ``parts``: name ->
    measurement record, one per variant judged on its own (e.g. per transport); ``aa``: the
    experiment's A/A control, :func:`lob.measure.stats.aa_band` of the ratios of the same
    engine measured twice in the same interleaving (a claim about a change, pivot 1, is then
    called only when lob's whole interval lies beyond that band); ``runs``: how many
    independent runs (fresh captures, interleaved) the figure comes from; ``backend``:
    ``"python"`` or ``"compiled"``, the engines' backend (else read from claims.yaml's
    ``engine``: a lineage name without ``@`` is pure Python).
    """
    def plain(v):
        if hasattr(v, "item"):
            return v.item()
        if isinstance(v, dict):
            return {str(k): plain(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [plain(x) for x in v]
        return v

    rec = {"value": plain(value), "diagnostics": plain(diagnostics or {}),
           "explain": plain(explain or {}), "detail": detail}
    if ci is not None:
        lo, hi = (float(x) for x in ci)
        if lo > hi:
            raise ValueError(f"ci must be (low, high), got {ci!r}")
        rec["ci"] = [lo, hi]
    if ci_what:  # without a ci: why there is none (e.g. too few repeats)
        rec["ci_what"] = str(ci_what)
    if mechanisms is not None:
        rec["mechanisms"] = [str(x) for x in mechanisms]
    if clock is not None:
        if "tick_ns" not in clock:
            raise ValueError(f"clock needs tick_ns, got {clock!r}")
        rec["clock"] = plain(clock)
    if parts:
        rec["parts"] = {str(k): dict(x) for k, x in parts.items()}
    if aa is not None:
        if "low" not in aa or "high" not in aa:
            raise ValueError(f"aa needs low and high (stats.aa_band), got {aa!r}")
        rec["aa"] = plain({k: aa.get(k) for k in ("low", "high", "n", "what")})
    if runs is not None:
        if int(runs) < 1:
            raise ValueError(f"runs must be >= 1, got {runs!r}")
        rec["runs"] = int(runs)
    if backend is not None:
        if backend not in ("python", "compiled"):
            raise ValueError(f"backend must be 'python' or 'compiled', got {backend!r}")
        rec["backend"] = backend
    return rec


def clock_record(durations, percentiles: dict[str, float], *, clock: dict | None = None) -> dict:
    """The ``clock`` entry of a :func:`measurement`: lob's clock tick (the known resolution of
    ``clock``, the record of the clock that timed the durations, where lob knows it: the cycle
    counter; else measured from the durations themselves: :func:`lob.measure.stats.clock_tick`)
    and the percentiles (ns) that enter the claim's figure, for the clock-floor check.
    ``durations``: the recorded durations (ns) or an HDR histogram (its recorded values, each
    at the low end of its bucket, with their counts)."""
    from lob.measure.stats import clock_tick

    if hasattr(durations, "get_recorded_iterator"):
        vals, counts = [], []
        for it in durations.get_recorded_iterator():
            vals.append(durations.get_lowest_equivalent_value(it.value_iterated_to))
            counts.append(it.count_added_in_this_iter_step)
        g = clock_tick(vals, counts, clock=clock)
    else:
        g = clock_tick(durations, clock=clock)
    return {"tick_ns": g["tick_ns"], "share_on_grid": g["share_on_grid"], "what": g["what"],
            "percentiles": {str(k): float(v) for k, v in percentiles.items()}}


@dataclass
class Verdict:
    claim: Claim
    verdict: str
    lob_figure: str
    regime: str
    reason: str
    link: str = ""
    machine: str = ""  # the machine lob measured on
    explain: dict = field(default_factory=dict)

    def row(self) -> dict:
        c = self.claim
        return {"claim": f"{c.id}: {c.finding}", "seed figure (machine)": c.seed_figure,
                "lob figure (this machine)": self.lob_figure, "regime check": self.regime,
                "verdict": self.verdict, "why": self.reason,
                "notebook": f"[{c.experiment}]({self.link})" if self.link else c.experiment}


def _side(x: float, pivot: float) -> int:
    return (x > pivot) - (x < pivot)


def _fine(x: float) -> str:
    """An interval end or a tolerance edge: four significant figures, so an interval that
    straddles an edge never reads as if it did not (1.588-1.62 against 1.59)."""
    return fmt(x) if abs(x) >= 100 else f"{x:.4g}"


def _ci(m: dict) -> tuple[float, float] | None:
    ci = m.get("ci")
    return (float(ci[0]), float(ci[1])) if ci else None


def _interval_note(c: Claim, m: dict) -> str:
    """What the lob figure cell says of its noise interval (ratio and direction claims, the
    kinds whose verdict uses one): the interval and what it is, or that none was available."""
    if c.kind not in ("ratio", "direction"):
        return ""
    ci = _ci(m)
    what = m.get("ci_what") or ""
    if ci is None:
        why = what.removeprefix("no interval: ")
        return f" [no interval available{': ' + why if why else ''}]"
    aa = m.get("aa") or {}
    band = (f"; A/A control {_fine(aa['low'])}-{_fine(aa['high'])} ({aa.get('n')} ratios)"
            if aa.get("low") is not None else "")
    return (f" [{_fine(ci[0])}-{_fine(ci[1])}{': ' + what if what else ': noise interval'}"
            f"{band}]")


def _explain(m: dict) -> str:
    ex = m.get("explain") or {}
    return "; ".join(f"{k}: {_show(v)}" for k, v in ex.items())


def judge(claim: Claim, m: dict | None, *, link: str = "", machine: str = "") -> Verdict:
    """The verdict on ``claim`` given lob's measurement record (None: not measured). A claim
    lob's method guarantees (``sanity_check`` in claims.yaml) reads ``sanity check: holds``
    where it would read ``reproduced`` and ``sanity check: fails`` where it would read ``not
    reproduced`` or ``direction only`` (a guaranteed claim that fails says the method is
    broken), naming why the method guarantees it; tallies count it apart. A ``not
    comparable`` reason closes with the claim's ``comparable_if`` (what would make it
    comparable), when claims.yaml gives one."""
    v = _judge(claim, m, link=link, machine=machine)
    if claim.comparable_if and v.verdict.startswith("not comparable"):
        v = replace(v, reason=f"{v.reason.rstrip('.')}. Comparable if: {claim.comparable_if}.")
    if not claim.sanity_check:
        return v
    to = {"reproduced": "sanity check: holds", "not reproduced": "sanity check: fails",
          "direction only": "sanity check: fails"}.get(v.verdict)
    if to is None:
        return v
    return replace(v, verdict=to, reason=f"{v.reason}. A sanity check, not a finding: "
                                         f"{claim.sanity_check}")


def _judge(claim: Claim, m: dict | None, *, link: str = "", machine: str = "") -> Verdict:
    if m is None:
        return Verdict(claim, "not measured", "-", "-",
                       f"no complete run of {claim.experiment} recorded {claim.id}", link,
                       machine)
    diags = m.get("diagnostics") or {}
    v = m.get("value")
    detail = f" ({m['detail']})" if m.get("detail") else ""
    if claim.kind == "exact":
        lob_fig = f"{len(v) if isinstance(v, dict) else 0} counters{detail}"
    elif claim.kind == "absolute":
        lob_fig = "in the notebook (absolute)"
    else:
        lob_fig = f"{_show(v)}{_interval_note(claim, m)}{detail}"
    fails = [f for r in claim.regime if (f := r.failure(diags))]
    if claim.seed_bounds is None and (why := _seed_samples_failure(claim)):
        fails.append(why)  # a figure the seed's neighbouring percentiles cannot bound
    if claim.kind == "absolute":
        fails.insert(0, f"machine: the seed's figure is from {claim.machine}, lob's from "
                        f"{machine or 'this machine'}; absolute figures of two machines are "
                        "never compared")
    if fails:
        return Verdict(claim, "not comparable", lob_fig if v is not None else "-",
                       "FAILED: " + "; ".join(fails), fails[0], link, machine,
                       m.get("explain") or {})
    parts = m.get("parts") or {}
    if v is None and not parts:
        return Verdict(claim, "not measured", "-", "-",
                       f"{claim.experiment} recorded no figure for {claim.id}", link, machine)
    regime = ("ok: " + "; ".join(r.passed(diags) for r in claim.regime)) if claim.regime \
        else "none needed"
    ex = m.get("explain") or {}
    engines = _engines(claim)
    why = _mechanism_failure(claim, m)
    if why:
        floor = _floor_failure(claim, m)  # said too: either one alone rules the figure out
        also = f"; it is also at the clock floor: {floor}" if floor else ""
        return Verdict(claim, "not comparable: different mechanism", lob_fig, regime,
                       why + also + engines, link, machine, ex)
    why = _floor_failure(claim, m)
    if why:
        return Verdict(claim, "not comparable: at the clock floor", lob_fig, regime,
                       why + engines, link, machine, ex)
    if parts:
        verdict, reason, lob_fig = _judge_parts(claim, parts)
        return Verdict(claim, verdict, lob_fig, regime, reason + engines, link, machine, ex)
    why = aa_unmeasurable(m.get("aa"))
    if why and claim.kind in ("ratio", "direction"):
        return Verdict(claim, "not measurable on this machine", lob_fig, regime,
                       why + engines, link, machine, ex)
    few = m.get("runs") is not None and m["runs"] < MIN_RUNS
    if claim.kind in ("ratio", "direction") and (_ci(m) is None or few) and _number(v):
        seed = fmt(claim.value) if claim.kind == "ratio" else claim.direction
        what = (f"{m['runs']} independent run(s), fewer than {MIN_RUNS}" if few else
                "one measurement without a noise interval")
        return Verdict(claim, "inconclusive: single point", lob_fig, regime,
                       f"lob {_show(v)} vs seed {seed}: {what} can neither reproduce nor "
                       "refute the seed's figure" + engines, link, machine, ex)
    verdict, reason = _compare(claim, v, m)
    return Verdict(claim, verdict, lob_fig, regime, reason + engines, link, machine, ex)


def _number(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and not math.isnan(v)


def _engines(c: Claim) -> str:
    """The reason's closing words: the seed's engine and what lob's has or lacks of it."""
    out = [f'the seed credits {tag}: "{q}"' for tag, q in c.mechanism_quotes]
    if c.seed_engine:
        out.append(f"seed engine: {c.seed_engine}")
    if c.lob_engine_lacks:
        out.append(f"lob's engine: {c.lob_engine_lacks}")
    return (". " + "; ".join(out)) if out else ""


def _mechanism_failure(c: Claim, m: dict) -> str | None:
    """None when the claim credits no mechanism or lob's step has one it credits, else why.
    A pure-Python measurement of a step the seed credits to an allocator or a cache
    (:data:`MEMORY_MECHANISMS`) is not the seed's mechanism whatever its toggles say."""
    if not c.mechanism:
        return None
    memory = [x for x in c.mechanism if x in MEMORY_MECHANISMS]
    if memory and _backend(c, m) == "python":
        return (f"the seed credits {' and '.join(c.mechanism)}; lob measured it on pure-Python "
                f"engines, where {', '.join(memory)} is not the seed's mechanism (the "
                "interpreter allocates an object per node and walks pointers whatever the "
                "design): a pure-Python ratio of an allocator or cache step is flagged as not "
                "the seed's, as an allocation counter of another kind is")
    have = m.get("mechanisms")
    have = tuple(have) if have is not None else c.lob_mechanisms
    if have and set(have) & set(c.mechanism):
        return None
    want = " or ".join(c.mechanism)
    got = ", ".join(have) if have else "none of them" if have is not None else "not declared"
    return (f"the seed credits {want}; what lob measured (engine or step) has {got}: a "
            "figure from another cause is not the seed's finding")


def _backend(c: Claim, m: dict) -> str:
    """``python`` or ``compiled``: the measurement's ``backend``, else claims.yaml's
    ``engine`` (lineage names such as ``v0, v1`` without a backend suffix are pure Python)."""
    if m.get("backend"):
        return str(m["backend"])
    from lob.engines.toggles import VERSIONS

    names = [x.strip() for x in c.engine.replace("->", ",").split(",") if x.strip()]
    pure = names and all("@" not in x and x in VERSIONS for x in names)
    return "python" if pure else "compiled"


def _seed_samples_failure(c: Claim) -> str | None:
    """None unless the seed's percentiles come from fewer samples than they need (the same
    rule as lob's own tables: :func:`lob.measure.stats.supported`), else which."""
    if c.seed_samples is None:
        return None
    short = [(name, min_count(float(name[1:]))) for name, _ in c.seed_percentiles
             if name.startswith("p") and not supported(float(name[1:]), c.seed_samples)]
    if not short:
        return None
    need = ", ".join(f"a {name} needs {fmt(n)}" for name, n in short)
    return (f"seed samples: the seed's {', '.join(n for n, _ in short)} come(s) from "
            f"{fmt(c.seed_samples)} samples ({need}): a percentile from fewer samples than it "
            "needs is not compared, the seed's no more than lob's")


def _floor_failure(c: Claim, m: dict) -> str | None:
    """None unless the clock's ticks leave the figure's direction undecided, else why.

    The seed's side: a ratio of two of its percentiles is the interval its ticks allow
    (``Claim.seed_bounds``); only when that interval holds the pivot does it decide nothing.
    A seed figure of another form (no bounds) is still ruled out when a percentile in it is
    under CLOCK_FLOOR_TICKS ticks. lob's side: its interval widened by its own ticks
    (:func:`_lob_quantised`) holding the pivot when its noise interval alone does not."""
    out = []
    if c.seed_bounds is not None:
        lo, hi = c.seed_bounds
        if c.pivot is not None and lo <= c.pivot <= hi:
            out.append(f"the seed's {fmt(c.value)} is known only to {_fine(lo)}-{_fine(hi)} "
                       f"({c.seed_bounds_what}), which holds the pivot {fmt(c.pivot)}: its "
                       "direction is not known")
    else:
        for name, ns in c.seed_percentiles:
            if at_clock_floor(ns, c.seed_tick_ns):
                out.append(f"the seed's {name} {fmt(ns)} ns is {ns / c.seed_tick_ns:.1f} ticks "
                           f"of its {c.seed_tick_ns:.4g} ns timer (< {CLOCK_FLOOR_TICKS} ticks: "
                           "known to a tick, 10% or worse, in a figure no interval bounds)")
    ci = _ci(m)
    q = _lob_quantised(c, m)
    if q and ci and c.pivot is not None and not ci[0] <= c.pivot <= ci[1]:
        lo, hi, what = q
        if lo <= c.pivot <= hi:
            out.append(f"lob's interval {_fine(ci[0])}-{_fine(ci[1])} becomes {_fine(lo)}-"
                       f"{_fine(hi)} at its clock's ticks ({what}), which holds the pivot "
                       f"{fmt(c.pivot)}")
    return "; ".join(out) or None


def _lob_quantised(c: Claim, m: dict) -> tuple[float, float, str] | None:
    """lob's noise interval widened by what its clock's ticks allow its percentiles
    (:func:`lob.measure.stats.quantised_factor`: a different error from the noise, not
    counted in it), and how; None without a clock record with a tick and percentiles."""
    clock = m.get("clock") or {}
    tick, pcts = clock.get("tick_ns"), {k: v for k, v in (clock.get("percentiles") or {}).items()
                                        if v is not None}
    ci = _ci(m)
    if not tick or not pcts or not ci:
        return None
    ratio = clock.get("ratio")
    if ratio is None and len(pcts) == 2:  # p99 and p50: a higher percentile over a lower one
        try:
            qs = {k: quantile_of(k) for k in pcts}
        except ValueError:
            qs = {}
        if len(set(qs.values())) == 2:
            ratio = sorted(qs, key=qs.get, reverse=True)
    flo, fhi = quantised_factor(pcts, tick, ratio)
    shown = ", ".join(f"{k} {fmt(v)} ns" for k, v in pcts.items())
    return ci[0] * flo, ci[1] * fhi, f"{shown} +-1 tick of {tick:.4g} ns"


def _judge_parts(c: Claim, parts: dict[str, dict]) -> tuple[str, str, str]:
    """Each part judged on its own (regime and mechanism are the whole measurement's); their
    common verdict, or ``inconclusive`` naming each part's when they disagree."""
    bare = replace(c, seed_engine="", lob_engine_lacks="")  # the engines are said once
    vs = {k: judge(bare, {**p, "diagnostics": p.get("diagnostics") or {}, "parts": None})
          for k, p in parts.items()}
    fig = "; ".join(f"{k}: {v.lob_figure}" for k, v in vs.items())
    each = "; ".join(f"{k}: {v.verdict} ({v.reason})" for k, v in vs.items())
    kinds = {v.verdict for v in vs.values()}
    if len(kinds) == 1:
        return kinds.pop(), f"every part alike: {each}", fig
    return "inconclusive", f"the parts disagree: {each}", fig


def _compare(c: Claim, v, m: dict) -> tuple[str, str]:
    if c.kind == "exact":
        if not isinstance(v, dict):
            return "not reproduced", "lob recorded no counters"
        diff = [k for k in c.value if not _equal(v.get(k, _UNSET) if k in v else None,
                                                 c.value[k])]
        if diff:
            return "not reproduced", "counters differ: " + ", ".join(
                f"{k} lob {_show(v.get(k))} vs seed {_show(c.value[k])}" for k in diff)
        return "reproduced", f"all {len(c.value)} counters equal"
    if not isinstance(v, int | float) or isinstance(v, bool) or math.isnan(v):
        return "not reproduced", f"lob's figure is not a number: {v!r}"
    v = float(v)
    if c.kind == "ceiling":
        ok = v < c.value
        return ("reproduced" if ok else "not reproduced",
                f"lob {fmt(v)} {'<' if ok else '>='} the ceiling {fmt(c.value)}")
    if c.kind == "band":
        lo, hi = c.value
        ok = lo <= v <= hi
        return ("reproduced" if ok else "not reproduced",
                f"lob {fmt(v)} {'inside' if ok else 'outside'} {fmt(lo)}-{fmt(hi)}")
    ci = _ci(m)
    pivot = c.pivot
    aa = m.get("aa") or {}
    if pivot == 1 and ci and aa.get("low") is not None \
            and change_beyond_aa(ci[0], ci[1], aa) not in ("faster", "slower"):
        # a change claim: identical code measured twice moves this much, so a difference
        # that reaches into that band is not told apart from noise
        return "inconclusive", (f"lob {fmt(v)}, interval {_fine(ci[0])}-{_fine(ci[1])}, "
                                f"reaches into the A/A control's band {_fine(aa['low'])}-"
                                f"{_fine(aa['high'])} (the same engine measured twice in the "
                                "same interleaving): not told apart from noise")
    q = _lob_quantised(c, m) if c.kind == "ratio" else None
    ticked = ""
    if q:  # lob's own ticks: its interval is what they allow around the noise interval
        ticked = (f" (its noise interval {_fine(ci[0])}-{_fine(ci[1])} taken to "
                  f"{_fine(q[0])}-{_fine(q[1])} at its clock's ticks: {q[2]})")
        ci = q[:2]
    lo_e, hi_e = _edges(c)[1] if c.kind == "ratio" else (None, None)
    if pivot is not None and ci and ci[0] <= pivot <= ci[1]:
        # both directions inside the noise: inconclusive (a rerun could land on either side)
        # unless the interval also rules out the seed's whole tolerance band
        why = (f"lob {fmt(v)}, but its interval {_fine(ci[0])}-{_fine(ci[1])} "
               f"contains {fmt(pivot)}: no direction either way")
        if c.kind == "ratio" and (ci[1] < lo_e or ci[0] > hi_e):
            return "not reproduced", (why + f", and it excludes the seed's band "
                                      f"{_fine(lo_e)}-{_fine(hi_e)}: the seed's effect "
                                      "is ruled out" + ticked)
        return "inconclusive", why + ticked
    if c.kind == "direction":
        want = 1 if c.direction == "up" else -1
        ok = _side(v, pivot) == want
        return ("reproduced" if ok else "not reproduced",
                f"lob {fmt(v)} is {'above' if v > pivot else 'at or below'} {fmt(pivot)}"
                f" (seed: {c.direction})")
    # ratio: judged on the whole interval (a point alone is a single point)
    if ci is None:
        return "inconclusive: single point", f"lob {fmt(v)}: no noise interval"
    verdict, why = _compare_interval(c, v, ci, m)
    return verdict, why + ticked


def _edges(c: Claim) -> tuple[tuple[float, float], tuple[float, float]]:
    """The tolerance band around the seed's figure, twice: ``strict`` (inside it whatever
    value the seed's ticks allow its figure, :attr:`Claim.seed_bounds`; empty, low > high,
    when those allow more than the tolerance) and ``loose`` (inside it for some value they
    allow). Without bounds both are ``value * (1 +- tolerance)``."""
    lo, hi = c.seed_bounds or (c.value, c.value)
    t = c.tolerance
    return (hi * (1 - t), lo * (1 + t)), (lo * (1 - t), hi * (1 + t))


def _compare_interval(c: Claim, v: float, ci: tuple[float, float], m: dict) -> tuple[str, str]:
    """A ratio claim judged on lob's whole interval (which does not contain the pivot:
    :func:`_compare` has ruled that out) against the seed's figure, itself an interval when
    its clock's ticks leave it one (:func:`_edges`): inside the tolerance band whatever the
    seed's true figure ``reproduced``; outside it whatever that figure ``direction only``
    (``not reproduced`` on the other side of the pivot or for a magnitude-only claim); else
    ``inconclusive``, naming the edge, or saying that the seed's ticks leave its magnitude
    wider than the tolerance."""
    lo, hi = ci
    (s_lo, s_hi), (l_lo, l_hi) = _edges(c)
    eps = 1e-12 * c.value
    shown = f"{_fine(lo)}-{_fine(hi)}"
    seed = fmt(c.value)
    if c.seed_bounds is not None and c.seed_bounds[0] != c.seed_bounds[1]:
        seed += f" (known to {_fine(c.seed_bounds[0])}-{_fine(c.seed_bounds[1])})"
    band = (f"{_fine(s_lo)}-{_fine(s_hi)}" if s_lo <= s_hi
            else f"at most {_fine(l_lo)}-{_fine(l_hi)}")
    why = (f"lob {fmt(v)}, interval {shown}, vs seed {seed}: tolerance +-"
           f"{c.tolerance:.0%} is {band}")
    if c.pivot is not None and _side((lo + hi) / 2, c.pivot) != _side(c.value, c.pivot):
        return "not reproduced", why + f"; the interval is on the other side of {fmt(c.pivot)}"
    if s_lo <= s_hi and s_lo - eps <= lo and hi <= s_hi + eps:
        return "reproduced", why + "; the whole interval is inside"
    if hi < l_lo - eps or lo > l_hi + eps:
        if c.pivot is None:
            return "not reproduced", why + "; the whole interval is outside"
        ex = _explain(m)
        return "direction only", (why + "; the whole interval is outside"
                                  + (f"; measured: {ex}" if ex else ""))
    if s_lo > s_hi:
        return "inconclusive", (why + "; the seed's clock ticks leave its figure wider than "
                                "the tolerance, so its magnitude cannot be told (the direction "
                                "agrees); a finer timer on the seed's side would settle it")
    edges = (s_lo, s_hi)
    cut = [e for e in edges if lo - eps <= e <= hi + eps]
    edge = (f"the tolerance edge {_fine(cut[0])}" if len(cut) == 1 else
            f"both tolerance edges {_fine(edges[0])} and {_fine(edges[1])}")
    if c.seed_bounds is not None and c.seed_bounds[0] != c.seed_bounds[1] and not cut:
        edge = f"the edges the seed's ticks leave ({_fine(l_lo)}-{_fine(s_lo)} or " \
               f"{_fine(s_hi)}-{_fine(l_hi)})"
    return "inconclusive", (f"interval {shown} straddles {edge} (seed {seed} +-"
                            f"{c.tolerance:.0%}; lob {fmt(v)}): noise alone could flip the "
                            "verdict; more repeats or a quieter machine would settle it")


def reproduction_markdown(vs: list[Verdict]) -> str:
    """The reproduction table (Markdown) with a tally line above it."""
    from lob.studies.conclude import markdown

    found = [v for v in vs if v.verdict not in SANITY]
    checks = [v for v in vs if v.verdict in SANITY]
    tally = {k: sum(v.verdict == k for v in found) for k in VERDICTS}
    machines = sorted({v.machine for v in vs if v.machine})
    sane = ("; sanity checks (guaranteed by lob's method, counted apart): "
            + ", ".join(f"{sum(v.verdict == k for v in checks)} "
                        f"{k.removeprefix('sanity check: ')}" for k in SANITY
                        if any(v.verdict == k for v in checks))) if checks else ""
    head = (f"{len(found)} claims: " + ", ".join(f"{n} {k}" for k, n in tally.items() if n)
            + sane + (f". lob figures measured on {', '.join(machines)}." if machines else "."))
    return head + "\n\n" + markdown([v.row() for v in vs])


def verdict_table(measured: dict[str, dict], experiment: str, machine: str = "", *,
                  only_measured: bool = False):
    """The notebook's own view of its claims: a :class:`~lob.studies.conclude.Conclusion`
    (every cell text; seed figures name their machine; lob's are ratios or counts) whose
    sentences list the claims by verdict. ``only_measured``: leave out the experiment's
    claims this run did not measure (a grid run measures some of them)."""
    from lob.studies.conclude import Conclusion

    rows, by = [], {}
    for c in for_experiment(experiment):
        if only_measured and c.id not in measured:
            continue
        v = judge(c, measured.get(c.id), machine=machine)
        rows.append({"claim": c.id, "finding": c.finding,
                     "seed figure (its machine)": c.seed_figure,
                     "lob figure (this machine)": v.lob_figure, "regime check": v.regime,
                     "verdict": v.verdict, "why": v.reason})
        by.setdefault(v.verdict, []).append(c.id)
    con = Conclusion("claims", rows, key="claim", kinds={k: "label" for k in rows[0]} if rows
                     else {}, machine=machine or "this machine")
    for k in VERDICTS:
        if k in by:
            con.say(f"{k.capitalize()}: {', '.join(by[k])}.")
    return con

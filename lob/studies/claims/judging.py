"""The seeds' headline findings as claims, and verdicts computed from what lob measured.

``experiments/claims.yaml`` defines every claim (the seed's figure, metric, workload, size and
machine, the lob experiment that measures its analog, the regime diagnostics the measurement
must satisfy, a tolerance). A notebook stores its measurement of a claim in
``summary.json`` under ``claims.<id>`` (:func:`measurement` builds the record); the report
reads them back (:func:`collect`) and judges each (:func:`judge`):

* ``reproduced``: the same direction (side of the claim's pivot) and within the stated
  relative tolerance of the seed's figure (exact claims: every counter equal);
* ``direction only``: the same side, another magnitude; the verdict names both figures and
  the measured explanation the notebook recorded (``explain``);
* ``inconclusive``: lob's figure comes with a noise interval (``ci``, e.g. over interleaved
  repeats: :func:`median_interval`) that straddles an edge of the tolerance band, so noise
  alone could flip ``reproduced`` and ``direction only``; the verdict names the interval and
  the edge;
* ``not reproduced``: the other side of the pivot, outside a band or above a ceiling, or a
  direction lob's noise interval cannot tell;
* ``not comparable``: a regime check failed (the verdict names the diagnostic, its value and
  what the seed's regime was); an ``absolute`` claim is always this (diagnostic ``machine``):
  absolute figures of different machines are never compared;
* ``not measured``: no run recorded the claim.

A ratio claim with a noise interval is judged on the whole interval, never on the point
alone: inside the tolerance band ``reproduced``, entirely outside it ``direction only`` (or
``not reproduced`` on the other side of the pivot), across an edge ``inconclusive``. Without
an interval (one measurement) the point is judged as it stands and the lob figure says that no
interval was available.

Verdicts compare a ratio measured on one machine with the seed's ratio on its machine; a
seed's figure is shown only in a cell that names its machine.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from lob.measure.stats import median_interval
from lob.studies.conclude import fmt

VERDICTS = ("reproduced", "direction only", "inconclusive", "not reproduced", "not comparable",
            "not measured")
KINDS = ("ratio", "direction", "exact", "ceiling", "band", "absolute")
FIELDS = {"id", "seed", "finding", "machine", "metric", "workload", "size", "experiment",
          "engine", "kind", "value", "detail", "pivot", "tolerance", "direction", "regime",
          "caveat"}
REQUIRED = ("id", "seed", "finding", "machine", "metric", "workload", "size", "experiment",
            "kind", "detail")
_UNSET = object()


def claims_path() -> Path:
    from lob.experiments.registry import experiments_dir

    return experiments_dir() / "claims.yaml"


@dataclass(frozen=True)
class RegimeCheck:
    """One diagnostic the lob measurement must satisfy for the claim to be comparable."""

    diagnostic: str
    min: float | None = None
    max: float | None = None
    equals: object = _UNSET
    seed: str = ""  # the seed's regime, in words

    def want(self) -> str:
        parts = []
        if self.equals is not _UNSET:
            parts.append(f"= {_show(self.equals)}")
        if self.min is not None:
            parts.append(f">= {fmt(self.min)}")
        if self.max is not None:
            parts.append(f"<= {fmt(self.max)}")
        return " and ".join(parts)

    def failure(self, diagnostics: dict) -> str | None:
        """None when satisfied, else why not (naming the diagnostic)."""
        if self.diagnostic not in diagnostics or diagnostics[self.diagnostic] is None:
            return f"{self.diagnostic} not measured (needs {self.want()})"
        v = diagnostics[self.diagnostic]
        ok = True
        if self.equals is not _UNSET:
            ok = _equal(v, self.equals)
        if ok and (self.min is not None or self.max is not None):
            if not isinstance(v, int | float) or isinstance(v, bool) or math.isnan(v):
                ok = False
            else:
                ok = (self.min is None or v >= self.min) and (self.max is None or v <= self.max)
        if ok:
            return None
        seed = f"; seed: {self.seed}" if self.seed else ""
        return f"{self.diagnostic} = {_show(v)} (needs {self.want()}{seed})"

    def passed(self, diagnostics: dict) -> str:
        v = _show(diagnostics.get(self.diagnostic))
        if self.equals is not _UNSET and self.min is None and self.max is None:
            return f"{self.diagnostic} = {v}"
        return f"{self.diagnostic} {v} {self.want().removeprefix(f'= {_show(self.equals)} and ')}"


def _equal(a, b) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b or (isinstance(a, bool) and isinstance(b, bool) and a == b)
    if isinstance(a, int | float) and isinstance(b, int | float):
        return float(a) == float(b)
    return str(a) == str(b)


def _show(v) -> str:
    return fmt(v) if not isinstance(v, str) else v


@dataclass(frozen=True)
class Claim:
    """One headline finding of a seed (see ``experiments/claims.yaml`` for the fields)."""

    id: str
    seed: str
    finding: str
    machine: str  # the seed's machine, by name
    metric: str
    workload: str
    size: str
    experiment: str
    kind: str
    detail: str
    engine: str = ""
    value: object = None
    pivot: float | None = 1.0
    tolerance: float | None = None
    direction: str | None = None
    regime: tuple[RegimeCheck, ...] = ()
    caveat: str = ""

    @property
    def seed_figure(self) -> str:
        """The seed's figure, in a cell that names its machine."""
        if self.kind == "exact":
            return f"{len(self.value)} counters ({self.detail}) [{self.machine}]"
        if self.kind == "direction":
            return f"{self.direction} ({self.detail}) [{self.machine}]"
        if self.kind == "band":
            lo, hi = self.value
            return f"{fmt(lo)}-{fmt(hi)} ({self.detail}) [{self.machine}]"
        if self.kind == "ceiling":
            return f"< {fmt(self.value)} ({self.detail}) [{self.machine}]"
        return f"{fmt(self.value)} ({self.detail}) [{self.machine}]"


def _claim(d: dict, machines: dict, where: str) -> Claim:
    unknown = set(d) - FIELDS
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}")
    missing = [k for k in REQUIRED if k not in d]
    if missing:
        raise ValueError(f"{where}: missing keys {missing}")
    if d["machine"] not in machines:
        raise ValueError(f"{where}: machine {d['machine']!r} is not one of {sorted(machines)}")
    kind = d["kind"]
    if kind not in KINDS:
        raise ValueError(f"{where}: kind {kind!r} is not one of {KINDS}")
    value, pivot, tol = d.get("value"), d.get("pivot", 1.0), d.get("tolerance")
    if kind == "ratio":
        if not isinstance(value, int | float) or value <= 0:
            raise ValueError(f"{where}: a ratio claim needs a positive value, got {value!r}")
        if tol is None or tol < 0:
            raise ValueError(f"{where}: a ratio claim needs a tolerance >= 0")
        if pivot is not None and value == pivot:
            raise ValueError(f"{where}: the value sits on the pivot: no direction; use "
                             "pivot: null for a magnitude-only claim")
    elif kind == "direction":
        if d.get("direction") not in ("up", "down") or pivot is None:
            raise ValueError(f"{where}: a direction claim needs direction: up|down and a pivot")
    elif kind == "exact":
        if not isinstance(value, dict) or not value:
            raise ValueError(f"{where}: an exact claim needs a dict of counters")
    elif kind == "ceiling":
        if not isinstance(value, int | float):
            raise ValueError(f"{where}: a ceiling claim needs a number")
    elif kind == "band":
        if not (isinstance(value, list) and len(value) == 2 and value[0] <= value[1]):
            raise ValueError(f"{where}: a band claim needs [low, high]")
    regime = []
    for r in d.get("regime") or []:
        bad = set(r) - {"diagnostic", "min", "max", "equals", "seed"}
        if bad or "diagnostic" not in r or not ({"min", "max", "equals"} & set(r)):
            raise ValueError(f"{where}: a regime check needs a diagnostic and min/max/equals, "
                             f"got {r!r}")
        regime.append(RegimeCheck(r["diagnostic"], r.get("min"), r.get("max"),
                                  r.get("equals", _UNSET), str(r.get("seed", ""))))
    return Claim(id=str(d["id"]), seed=str(d["seed"]), finding=str(d["finding"]),
                 machine=machines[d["machine"]], metric=str(d["metric"]),
                 workload=str(d["workload"]), size=str(d["size"]),
                 experiment=str(d["experiment"]), kind=kind, detail=str(d["detail"]),
                 engine=str(d.get("engine", "")), value=value, pivot=pivot, tolerance=tol,
                 direction=d.get("direction"), regime=tuple(regime),
                 caveat=str(d.get("caveat", "")))


def load(path: Path | str | None = None) -> list[Claim]:
    """Every claim of ``claims.yaml``, validated (bad definitions: ``ValueError``)."""
    path = Path(path or claims_path())
    data = yaml.safe_load(path.read_text()) or {}
    machines = data.get("machines") or {}
    out, seen = [], set()
    for i, d in enumerate(data.get("claims") or []):
        c = _claim(d, machines, f"{path.name}: claim {d.get('id', i)!r}")
        if c.id in seen:
            raise ValueError(f"{path.name}: claim id {c.id!r} defined twice")
        seen.add(c.id)
        out.append(c)
    if not out:
        raise ValueError(f"{path}: no claims")
    return out


def get(claim_id: str, path: Path | str | None = None) -> Claim:
    for c in load(path):
        if c.id == claim_id:
            return c
    raise KeyError(f"no claim {claim_id!r}")


# --- measurements -----------------------------------------------------------------------

def measurement(value, *, diagnostics: dict | None = None, explain: dict | None = None,
                detail: str = "", ci: tuple[float, float] | None = None,
                ci_what: str = "") -> dict:
    """The record a notebook stores under ``summary["claims"][id]``.

    ``value``: lob's figure in the claim's metric (a ratio, or a dict of counters);
    ``diagnostics``: the regime diagnostics (``count``, ``market_empty_pct``, ...);
    ``explain``: measured figures that explain a different magnitude (label -> number);
    ``detail``: what was divided by what, in words (no absolute figures: the row it lands
    in also shows the seed's); ``ci``: a noise interval of ``value`` (a ratio claim is then
    judged on the whole interval); ``ci_what``: what that interval is, in words (e.g.
    ``"93.8% interval of the median of 5 repeats"``), or without ``ci`` why there is none.
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
    return rec


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
    return f" [{_fine(ci[0])}-{_fine(ci[1])}{': ' + what if what else ': noise interval'}]"


def _explain(m: dict) -> str:
    ex = m.get("explain") or {}
    return "; ".join(f"{k}: {_show(v)}" for k, v in ex.items())


def judge(claim: Claim, m: dict | None, *, link: str = "", machine: str = "") -> Verdict:
    """The verdict on ``claim`` given lob's measurement record (None: not measured)."""
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
    if claim.kind == "absolute":
        fails.insert(0, f"machine: the seed's figure is from {claim.machine}, lob's from "
                        f"{machine or 'this machine'}; absolute figures of two machines are "
                        "never compared")
    if fails:
        return Verdict(claim, "not comparable", lob_fig if v is not None else "-",
                       "FAILED: " + "; ".join(fails), fails[0], link, machine,
                       m.get("explain") or {})
    if v is None:
        return Verdict(claim, "not measured", "-", "-",
                       f"{claim.experiment} recorded no figure for {claim.id}", link, machine)
    regime = ("ok: " + "; ".join(r.passed(diags) for r in claim.regime)) if claim.regime \
        else "none needed"
    verdict, reason = _compare(claim, v, m)
    return Verdict(claim, verdict, lob_fig, regime, reason, link, machine,
                   m.get("explain") or {})


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
    if pivot is not None and ci and ci[0] <= pivot <= ci[1]:
        return "not reproduced", (f"lob {fmt(v)}, but its noise interval {fmt(ci[0])}-"
                                  f"{fmt(ci[1])} contains {fmt(pivot)}: no direction")
    if c.kind == "direction":
        want = 1 if c.direction == "up" else -1
        ok = _side(v, pivot) == want
        return ("reproduced" if ok else "not reproduced",
                f"lob {fmt(v)} is {'above' if v > pivot else 'at or below'} {fmt(pivot)}"
                f" (seed: {c.direction})")
    # ratio
    if ci is not None:
        return _compare_interval(c, v, ci, m)
    rel = v / c.value
    within = abs(rel - 1) <= c.tolerance + 1e-12
    why = (f"lob {fmt(v)} vs seed {fmt(c.value)}: {fmt(rel)}x the seed's "
           f"(tolerance +-{c.tolerance:.0%})")
    if pivot is None:
        return ("reproduced" if within else "not reproduced"), why
    if _side(v, pivot) != _side(c.value, pivot):
        return "not reproduced", why + f"; the other side of {fmt(pivot)}"
    if within:
        return "reproduced", why
    ex = _explain(m)
    return "direction only", why + (f"; measured: {ex}" if ex else "")


def _compare_interval(c: Claim, v: float, ci: tuple[float, float], m: dict) -> tuple[str, str]:
    """A ratio claim judged on lob's whole noise interval (which does not contain the pivot:
    :func:`_compare` has ruled that out): inside the tolerance band ``reproduced``, entirely
    outside it ``direction only`` (``not reproduced`` on the other side of the pivot or for a
    magnitude-only claim), across an edge ``inconclusive``."""
    lo, hi = ci
    edges = (c.value * (1 - c.tolerance), c.value * (1 + c.tolerance))
    eps = 1e-12 * c.value
    shown = f"{_fine(lo)}-{_fine(hi)}"
    why = (f"lob {fmt(v)}, interval {shown}, vs seed {fmt(c.value)}: tolerance +-"
           f"{c.tolerance:.0%} is {_fine(edges[0])}-{_fine(edges[1])}")
    if c.pivot is not None and _side((lo + hi) / 2, c.pivot) != _side(c.value, c.pivot):
        return "not reproduced", why + f"; the interval is on the other side of {fmt(c.pivot)}"
    if edges[0] - eps <= lo and hi <= edges[1] + eps:
        return "reproduced", why + "; the whole interval is inside"
    if hi < edges[0] - eps or lo > edges[1] + eps:
        if c.pivot is None:
            return "not reproduced", why + "; the whole interval is outside"
        ex = _explain(m)
        return "direction only", (why + "; the whole interval is outside"
                                  + (f"; measured: {ex}" if ex else ""))
    cut = [e for e in edges if lo - eps <= e <= hi + eps]
    edge = (f"the tolerance edge {_fine(cut[0])}" if len(cut) == 1 else
            f"both tolerance edges {_fine(edges[0])} and {_fine(edges[1])}")
    return "inconclusive", (f"interval {shown} straddles {edge} (seed {fmt(c.value)} +-"
                            f"{c.tolerance:.0%}; lob {fmt(v)}): noise alone could flip the "
                            "verdict; more repeats or a quieter machine would settle it")


# --- the reproduction table ---------------------------------------------------------------

def collect(artifacts: Path | str) -> dict[str, tuple[dict, Path, dict]]:
    """Claim id -> (measurement, run dir, conditions) from the latest complete runs.

    For each experiment the newest complete run sets the preset; every complete run of that
    preset (a grid has several) contributes its claims, newer runs winning.
    """
    root = Path(artifacts)
    by_exp: dict[str, list[tuple[float, Path]]] = {}
    for marker in root.glob("*/*/COMPLETE"):
        by_exp.setdefault(marker.parent.parent.name, []).append(
            (marker.stat().st_mtime, marker.parent))
    out: dict[str, tuple[dict, Path, dict]] = {}
    for runs in by_exp.values():
        runs.sort()
        preset = runs[-1][1].name.split("-")[0]
        for _, run in runs:
            if run.name.split("-")[0] != preset:
                continue
            try:
                s = json.loads((run / "summary.json").read_text())
            except (OSError, ValueError):
                continue
            found = dict(s.get("claims") or {})
            if run.parent.name == "pipeline_latency":  # derive what its notebook did not record
                cond = s.get("conditions") or {}
                for cid, m in pipeline_claims(s.get("tables") or {},
                                              cond.get("cpu_count")).items():
                    found.setdefault(cid, m)
            for cid, m in found.items():
                out[cid] = (m, run, s.get("conditions") or {})
    return out


def pipeline_claims(tables: dict, cpu_count: int | None = None) -> dict[str, dict]:
    """Seed 003's pipeline claims measured from the pipeline notebook's tables.

    ``tables["capacity"]``: rows with ``batch`` and ``capacity`` (or ``capacity_compiled``);
    ``tables["sweep"]``: rows with ``batch``, ``pinning`` (pinned | unpinned), ``fraction``
    (offered rate over capacity), ``saturated``, ``lat_p99`` and optionally ``transport``
    (only the compiled transport's rows are used when there are any); ``tables["tail_runs"]``
    (optional): the notebook's repeated batch-1 runs (``fraction``, ``pinning``, ``run``,
    ``p99``, and ``variant`` (or ``mode``) when it compares transport variants: a round is
    then one variant's), used for the pinning claim instead of the sweep's rows when present.
    Gives
    ``s003_pipeline_capacity`` (batch 1), ``s003_pipeline_saturation`` (share of unpinned
    rows offered above capacity that saturate) and ``s003_pinning`` (the median over rounds
    and rates below capacity of p99 pinned / p99 unpinned, with its interval from 5 ratios
    on); a claim whose rows are missing is left out.
    """

    out: dict[str, dict] = {}
    cap = [r for r in tables.get("capacity") or [] if r.get("batch") == 1]
    key = next((k for k in ("capacity", "capacity_compiled") if cap and cap[0].get(k)), None)
    if key:
        out["s003_pipeline_capacity"] = measurement(cap[0][key],
                                                    detail=f"{key}, commands/s at batch 1")
    sweep = tables.get("sweep") or []
    if any(r.get("transport") == "compiled" for r in sweep):  # the seed's is compiled code
        sweep = [r for r in sweep if r.get("transport") == "compiled"]
    above = [r for r in sweep if r.get("pinning", "unpinned") == "unpinned"
             and (r.get("fraction") or 0) > 1]
    if above:
        share = sum(bool(r.get("saturated")) for r in above) / len(above)
        out["s003_pipeline_saturation"] = measurement(
            share, diagnostics={"count": len(above)},
            detail=f"{sum(bool(r.get('saturated')) for r in above)} of {len(above)} rows "
                   "above capacity saturated")
    # p99 pinned / unpinned within each round (a round runs both pinnings at one rate): the
    # tail section's repeated batch-1 runs when recorded, else the sweep's batch-1 rows (the
    # k-th row of a rate and pinning in round k); the median of the per-round ratios, with
    # its interval once there are 5 or more
    def p99_of(v):
        return isinstance(v, int | float) and v == v and v > 0

    runs = [(r.get("fraction"), r.get("pinning") or "unpinned",
             (r.get("variant", r.get("mode")), r.get("run")), r["p99"])
            for r in tables.get("tail_runs") or [] if p99_of(r.get("p99"))]
    if not runs:
        seen: dict = {}
        for r in sweep:
            if r.get("batch") == 1 and p99_of(r.get("lat_p99")):
                key = (r.get("fraction"), r.get("pinning") or "unpinned")
                seen[key] = seen.get(key, 0) + 1
                runs.append((*key, seen[key], r["lat_p99"]))
    rounds: dict = {}
    counts: dict = {}
    for f, pin, k, p99 in runs:
        if (f or 0) < 1:
            rounds.setdefault((f, k), {})[pin] = p99
            counts[(f, pin)] = counts.get((f, pin), 0) + 1
    per_round = [x["pinned"] / x["unpinned"] for x in rounds.values()
                 if "pinned" in x and "unpinned" in x]
    if per_round:
        rates = {f for f, _ in counts if (f, "pinned") in counts and (f, "unpinned") in counts}
        repeats = min(counts[(f, p)] for f in rates for p in ("pinned", "unpinned"))
        mi = median_interval(per_round, of="per-round ratios")
        out["s003_pinning"] = measurement(
            mi["median"], diagnostics={"cpu_count": cpu_count, "repeats": repeats},
            explain={"rate points": len(rates)}, ci=mi["ci"], ci_what=mi["what"],
            detail=f"median of {len(per_round)} per-round ratios of p99 pinned / unpinned, "
                   f"batch 1, {repeats} run(s) each")
    return out


def verdicts(artifacts: Path | str, claims: list[Claim] | None = None) -> list[Verdict]:
    """One verdict per claim, from what the runs in ``artifacts`` recorded."""
    root = Path(artifacts)
    found = collect(root)
    out = []
    for c in claims or load():
        if c.id in found:
            m, run, cond = found[c.id]
            rel = run.relative_to(root)
            out.append(judge(c, m, link=f"{rel}/{c.experiment}.ipynb",
                             machine=cond.get("cpu_model", "")))
        else:
            out.append(judge(c, None))
    return out


def reproduction_markdown(vs: list[Verdict]) -> str:
    """The reproduction table (Markdown) with a tally line above it."""
    from lob.studies.conclude import markdown

    tally = {k: sum(v.verdict == k for v in vs) for k in VERDICTS}
    machines = sorted({v.machine for v in vs if v.machine})
    head = (f"{len(vs)} claims: " + ", ".join(f"{n} {k}" for k, n in tally.items() if n)
            + (f". lob figures measured on {', '.join(machines)}." if machines else "."))
    return head + "\n\n" + markdown([v.row() for v in vs])


# --- regime diagnostics from any engine's outcomes ------------------------------------------

def resting_series(commands, outcomes, fills):
    """Orders resting just before and just after each command (numpy int64 arrays).

    A limit or post-only that rested adds one; a maker filled to zero, a self-trade cancel, a
    cancel or a mass cancel takes its orders away; modifies are not followed.
    """
    import numpy as np

    from lob.semantics import Kind, OrderType, Status

    k, ot, st = commands["kind"], commands["otype"], outcomes["status"]
    sub = k == int(Kind.SUBMIT)
    rests = (sub & np.isin(ot, (int(OrderType.LIMIT), int(OrderType.POST_ONLY)))
             & np.isin(st, (int(Status.ACCEPTED), int(Status.PARTIALLY_FILLED))))
    delta = rests.astype(np.int64) - outcomes["removed"].astype(np.int64)
    n = len(commands)
    if len(fills):
        ids = outcomes["id"]
        top = int(max(ids.max(), fills["maker"].max(), fills["taker"].max())) + 1
        idx_of = np.full(top, -1, dtype=np.int64)
        idx_of[ids[sub & (ids > 0)]] = np.flatnonzero(sub & (ids > 0))
        rest_qty = np.zeros(top, dtype=np.int64)
        rest_qty[ids[rests]] = outcomes["remaining"][rests]
        order = np.argsort(fills["maker"], kind="stable")  # each maker's fills in time order
        mk, q = fills["maker"][order], fills["qty"][order].astype(np.int64)
        starts = np.r_[0, np.flatnonzero(np.diff(mk)) + 1]
        cs = np.cumsum(q)
        base = np.r_[0, cs[starts[1:] - 1]]
        cum = cs - np.repeat(base, np.diff(np.r_[starts, len(mk)]))
        gone = cum == rest_qty[mk]
        delta -= np.bincount(idx_of[fills["taker"][order][gone]], minlength=n)
    after = np.cumsum(delta)
    return after - delta, after


def levels_walked(commands, outcomes, fills):
    """Distinct price levels each command traded at (numpy int64, one per command)."""
    import numpy as np

    from lob.semantics import Kind

    n = len(commands)
    out = np.zeros(n, dtype=np.int64)
    if not len(fills):
        return out
    sub = commands["kind"] == int(Kind.SUBMIT)
    ids = outcomes["id"]
    top = int(max(ids.max(), fills["taker"].max())) + 1
    idx_of = np.full(top, -1, dtype=np.int64)
    idx_of[ids[sub & (ids > 0)]] = np.flatnonzero(sub & (ids > 0))
    pairs = np.unique(np.stack([fills["taker"], fills["price"]], axis=1), axis=0)
    np.add.at(out, idx_of[pairs[:, 0]], 1)
    return out


def stream_diagnostics(commands, outcomes, fills) -> dict:
    """Regime diagnostics of a replay, from its commands, outcomes and fills (any engine, so
    a compiled replay of a seed-sized stream gives them in seconds).

    * ``commands`` / ``count``: stream length and timed ops;
    * ``resting_mean`` / ``resting_max`` / ``resting_end``: orders resting after each
      command (a limit or post-only that rested adds one; a maker filled to zero, a
      self-trade cancel, a cancel or a mass cancel takes its orders away; modifies are not
      followed);
    * ``market_empty_pct``: timed market / notional orders that traded nothing, removed
      nothing and were cancelled for want of liquidity, i.e. met an empty side (a notional
      amount below the best price counts too);
    * ``cancel_hit_pct``: timed cancels that found their order;
    * ``resting_before_mass_cancel_mean``; ``fok_pct``: FOK share of timed submits.

    Same definitions as :func:`lob.workloads.diagnostics.diagnose`, which replays on the
    reference engine one op at a time (a test checks they agree).
    """
    import numpy as np

    from lob.semantics import Kind, OrderType, Reason, Status

    k, t, ot = commands["kind"], commands["timed"].astype(bool), commands["otype"]
    st, nf = outcomes["status"], outcomes["fills"]
    rm = outcomes["removed"]
    sub = k == int(Kind.SUBMIT)
    before, after = resting_series(commands, outcomes, fills)
    n = len(commands)
    mkt = sub & t & np.isin(ot, (int(OrderType.MARKET), int(OrderType.NOTIONAL)))
    empty = mkt & (nf == 0) & (rm == 0) & (outcomes["reason"] == int(Reason.NO_LIQUIDITY))
    can = t & (k == int(Kind.CANCEL))
    hit = can & (st == int(Status.CANCELLED))
    mass = k == int(Kind.MASS_CANCEL)
    tsub = sub & t

    def pct(a, b):
        return round(100.0 * int(a.sum()) / int(b.sum()), 2) if b.any() else None

    return {"commands": int(n), "count": int(t.sum()),
            "resting_mean": float(after.mean()) if n else 0.0,
            "resting_max": int(after.max()) if n else 0,
            "resting_end": int(after[-1]) if n else 0,
            "market_empty_pct": pct(empty, mkt), "cancel_hit_pct": pct(hit, can),
            "resting_before_mass_cancel_mean": (float(before[mass].mean()) if mass.any()
                                                else None),
            "fok_pct": pct(tsub & (ot == int(OrderType.FOK)), tsub)}


# --- in a notebook ----------------------------------------------------------------------------

def for_experiment(experiment: str) -> list[Claim]:
    """The claims an experiment measures."""
    return [c for c in load() if c.experiment == experiment]


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

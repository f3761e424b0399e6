"""The seeds' claims: the model (:class:`Claim`, :class:`RegimeCheck`) and loading
``experiments/claims.yaml``.

``claims.yaml`` is the one home of every seed figure lob shows. Its ``published`` section holds
the seeds' published tables (seed 000's percentiles and three-point bisection, seed 001's
counters, ns/op and latency, seed 003's throughput per version, ...), typed once;
:mod:`lob.studies.published` is a thin reader of it, and each claim takes its figures from
it instead of typing them again:

* ``figures: seed000/percentiles/add_only`` names the claim's table (a path into
  ``published``);
* ``value`` may be ``{ratio: [a, b]}`` (figure a / figure b), ``{ref: a}`` (a figure or a
  whole table: counters, a band; ``with: {name: b}`` adds figures to a table),
  ``{less_pct: a}`` (1 - a / 100) or ``{largest_log_step_share: a}`` (the share of a walk's
  log change carried by its largest step, over a list of points);
* ``finding``, ``detail`` and ``caveat`` may cite ``{a}`` (a figure, shown with
  :func:`~lob.studies.conclude.fmt`) and ``{value}`` (the claim's value).

A path is looked up under ``figures`` first, then from the top of ``published``; its parts
are keys, or indices into a list.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from lob.studies.conclude import fmt

KINDS = ("ratio", "direction", "exact", "ceiling", "band", "absolute")
FIELDS = {"id", "seed", "finding", "machine", "metric", "workload", "size", "experiment",
          "engine", "kind", "value", "detail", "pivot", "tolerance", "direction", "regime",
          "caveat", "figures", "mechanism", "lob_step", "lob_mechanisms", "seed_engine",
          "lob_engine_lacks", "seed_percentiles", "seed_samples", "sanity_check",
          "comparable_if"}
REQUIRED = ("id", "seed", "finding", "machine", "metric", "workload", "size", "experiment",
            "kind", "detail")
_UNSET = object()


def claims_path() -> Path:
    from lob.paths import experiments_dir

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
    # the mechanism(s) the seed credits for its figure (a claim about a specific change, or
    # the design it blames for a tail); empty: no mechanism (a shape lob's engine can show)
    mechanism: tuple[str, ...] = ()
    # (mechanism, the seed's sentence it rests on, quoted), when claims.yaml gives
    # ``mechanism: {tag: "sentence"}``
    mechanism_quotes: tuple[tuple[str, str], ...] = ()
    # the mechanisms lob's measured step has (from its engines' toggles, ``lob_step: a -> b``,
    # or typed as ``lob_mechanisms``); None: not declared (a measurement's ``mechanisms``
    # then decides)
    lob_mechanisms: tuple[str, ...] | None = None
    seed_engine: str = ""  # the engine the seed measured, in words
    lob_engine_lacks: str = ""  # what lob's engine has or lacks of the seed's design
    # the seed's percentiles (ns) that enter the claim's figure, and the seed's timer tick
    seed_percentiles: tuple[tuple[str, float], ...] = ()
    seed_tick_ns: float | None = None
    # how many samples the seed's percentiles come from, when published (a percentile from
    # fewer than it needs, lob.measure.stats.min_count, is not compared: the seed's either)
    seed_samples: int | None = None
    # the seed's figure as the interval its percentiles' ticks (and, from too few samples,
    # their neighbours) allow: a ratio claim of two seed percentiles, else None
    seed_bounds: tuple[float, float] | None = None
    seed_bounds_what: str = ""
    # why lob's method guarantees the claim (empty: it can fail): a sanity check, counted
    # apart from the verdicts
    sanity_check: str = ""
    # a claim that cannot be compared as measured: what would make it comparable, one line
    comparable_if: str = ""

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


_REF = re.compile(r"\{([A-Za-z0-9_./-]+)\}")
_VALUE_OPS = ("ratio", "ref", "less_pct", "largest_log_step_share")


def figure(published: dict, path: str, base: str = "", where: str = "claims.yaml"):
    """The published figure (or table) at ``path`` (``seed000/percentiles/add_only/p50``),
    looked up under ``base`` first; ``ValueError`` naming the path when there is none."""
    for full in ([f"{base}/{path}"] if base else []) + [path]:
        node, ok = published, True
        for part in full.split("/"):
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                ok = False
                break
        if ok:
            return node
    raise ValueError(f"{where}: no published figure {path!r}"
                     + (f" (under {base!r} or at the top)" if base else ""))


def _value(v, published: dict, base: str, where: str):
    """A claim's ``value``: as typed, or computed from the published figures."""
    if not isinstance(v, dict) or len(set(v) & set(_VALUE_OPS)) != 1:
        return v
    (op, arg), = ((k, x) for k, x in v.items() if k in _VALUE_OPS)
    if op == "ref" and "with" in v:  # a table plus named figures: {ref: a, with: {k: b}}
        return {**figure(published, arg, base, where),
                **{k: figure(published, x, base, where) for k, x in v["with"].items()}}
    if op == "ratio":
        a, b = (figure(published, x, base, where) for x in arg)
        return float(a) / float(b)
    x = figure(published, arg, base, where)
    if op == "less_pct":
        return 1.0 - float(x) / 100.0
    if op == "largest_log_step_share":
        pts = [float(p) for p in x if p is not None]
        steps = [abs(math.log(b / a)) for a, b in zip(pts, pts[1:], strict=False)]
        return max(steps) / sum(steps)
    return list(x) if isinstance(x, tuple) else x


def show_figure(x) -> str:
    """A published figure as the seed typed it: ints with separators (1,208), other numbers
    to six significant figures (18.23, 43.6), a pair as a range (15-19)."""
    if isinstance(x, list | tuple):
        return "-".join(show_figure(v) for v in x)
    if isinstance(x, float) and x.is_integer():
        x = int(x)
    if isinstance(x, int) and not isinstance(x, bool):
        return f"{x:,}"
    return f"{x:,g}" if isinstance(x, float) else str(x)


def _text(s, published: dict, base: str, value, where: str) -> str:
    """``s`` with every ``{path}`` replaced by the published figure (:func:`show_figure`),
    ``{value}`` by the claim's value (:func:`~lob.studies.conclude.fmt`)."""
    def one(m):
        key = m.group(1)
        return fmt(value) if key == "value" else show_figure(figure(published, key, base, where))

    return _REF.sub(one, str(s))


def _claim(d: dict, machines: dict, where: str, published: dict | None = None) -> Claim:
    published = published or {}
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
    base = str(d.get("figures") or "")
    value, pivot, tol = (_value(d.get("value"), published, base, where), d.get("pivot", 1.0),
                         d.get("tolerance"))
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
                                  r.get("equals", _UNSET),
                                  _text(r.get("seed", ""), published, base, value, where)))

    def text(k):
        return _text(d.get(k, ""), published, base, value, where)

    def names(k):
        x = d.get(k)
        return tuple(str(v) for v in ([x] if isinstance(x, str) else x or []))

    mech = d.get("mechanism")
    quotes = ()
    if isinstance(mech, dict):  # tag -> the seed's sentence it rests on
        if not all(isinstance(q, str) and q.strip() for q in mech.values()):
            raise ValueError(f"{where}: each mechanism of a mapping quotes the seed's sentence "
                             f"it rests on (a non-empty string), got {mech!r}")
        quotes = tuple((str(k), str(q).strip()) for k, q in mech.items())
        d = {**d, "mechanism": list(mech)}
    lob_mech = None
    if "lob_step" in d and "lob_mechanisms" in d:
        raise ValueError(f"{where}: give lob_step or lob_mechanisms, not both")
    if "lob_step" in d:
        lob_mech = step_mechanisms(d["lob_step"])
    elif "lob_mechanisms" in d:
        lob_mech = names("lob_mechanisms")
    pcts = []
    for path in d.get("seed_percentiles") or []:
        x = figure(published, str(path), base, where)
        if not isinstance(x, int | float):
            raise ValueError(f"{where}: seed_percentiles {path!r} is not a figure: {x!r}")
        pcts.append((str(path), float(x)))
    tick = (published.get(str(d["seed"])) or {}).get("timer_tick_ns")
    if pcts and tick is None:
        raise ValueError(f"{where}: seed_percentiles given but published.{d['seed']} has no "
                         "timer_tick_ns")
    samples = None
    if d.get("seed_samples") is not None:  # a number, or a path into published
        x = d["seed_samples"]
        x = figure(published, x, base, where) if isinstance(x, str) else x
        if not isinstance(x, int) or isinstance(x, bool) or x < 1:
            raise ValueError(f"{where}: seed_samples must be a count >= 1, got {x!r}")
        samples = x

    bounds, bounds_what = _seed_bounds(d.get("value"), pcts, published, base, where,
                                       float(tick) if tick is not None else None, samples)
    return Claim(id=str(d["id"]), seed=str(d["seed"]), finding=text("finding"),
                 machine=machines[d["machine"]], metric=str(d["metric"]),
                 workload=str(d["workload"]), size=str(d["size"]),
                 experiment=str(d["experiment"]), kind=kind, detail=text("detail"),
                 engine=str(d.get("engine", "")), value=value, pivot=pivot, tolerance=tol,
                 direction=d.get("direction"), regime=tuple(regime),
                 caveat=text("caveat"), mechanism=names("mechanism"), mechanism_quotes=quotes,
                 lob_mechanisms=lob_mech,
                 seed_engine=text("seed_engine"), lob_engine_lacks=text("lob_engine_lacks"),
                 seed_percentiles=tuple(pcts),
                 seed_tick_ns=float(tick) if tick is not None else None, seed_samples=samples,
                 seed_bounds=bounds, seed_bounds_what=bounds_what,
                 sanity_check=text("sanity_check"), comparable_if=text("comparable_if"))


def _seed_bounds(v, pcts, published: dict, base: str, where: str, tick: float | None,
                 samples: int | None) -> tuple[tuple[float, float] | None, str]:
    """A ``{ratio: [a, b]}`` value of two of the claim's ``seed_percentiles``: the interval
    the seed's figure can have (:func:`lob.measure.stats.percentile_bounds` of each, within
    its own published table, and :func:`~lob.measure.stats.ratio_bounds`; two percentiles of
    one table give a ratio of at least 1), and how it was bounded; else (None, "")."""
    from lob.measure.stats import percentile_bounds, quantile_of, ratio_bounds

    if not (isinstance(v, dict) and "ratio" in v) or not pcts:
        return None, ""
    names = [str(x) for x in v["ratio"]]
    if not set(names) <= {n for n, _ in pcts}:
        return None, ""
    ends = []
    for path in names:
        parent, _, name = path.rpartition("/")
        table = figure(published, parent, base, where) if parent else figure(
            published, base, "", where)
        try:
            quantile_of(name)
        except ValueError:
            return None, ""
        ends.append((parent, name, percentile_bounds(table, name, tick_ns=tick,
                                                     samples=samples)))
    (pa, na, a), (pb, nb, b) = ends
    ordered = pa == pb and quantile_of(na) >= quantile_of(nb)
    lo, hi = ratio_bounds(a[:2], b[:2], ordered=ordered)
    return (lo, hi), f"{a[2]}; {b[2]}" + ("; a higher percentile over a lower one is >= 1"
                                          if ordered else "")


# the mechanism each toggle value brings (lob.engines.toggles' vocabulary, and the toggles of
# the C++ engine of orderbook-rs's mechanisms in lob.engines.native)
TOGGLE_MECHANISMS = {("levels", "pool"): "node_pool", ("levels", "packed"): "packed_layout",
                     ("best", "bitmap"): "bitmap_best_price", ("best", "sorted"): "sorted_levels",
                     ("best", "tracked"): "tracked_best_price",
                     ("fok", "early_exit"): "fok_early_exit", ("fok", "level_sums"): "level_sums",
                     ("orders", "heap"): "per_order_heap_allocation",
                     ("levels", "skiplist"): "skip_list_levels",
                     ("level_objects", "refcounted"): "refcounted_level_objects",
                     ("index", "sharded"): "sharded_locked_index"}


def engine_mechanisms(toggles: dict) -> tuple[str, ...]:
    """The mechanisms a registered engine has, from its toggles (:data:`TOGGLE_MECHANISMS`;
    a toggle value with no mechanism, a plain default, brings none)."""
    return tuple(m for t, v in toggles.items() if (m := TOGGLE_MECHANISMS.get((t, v))))


def step_mechanisms(step: str) -> tuple[str, ...]:
    """The mechanisms lob's lineage step ``"a -> b"`` (version names, backend suffix allowed:
    ``v0+pool@numba -> v1@numba``; lob's C++ engines by their registered names, ``v0@cpp ->
    v1@cpp``) changes, from :mod:`lob.engines.toggles` (or the native engines' toggles,
    :mod:`lob.engines.native`): one per toggle whose value differs, named by
    :data:`TOGGLE_MECHANISMS` (``fok_early_exit``, ...)."""
    from lob.engines.native import NATIVE
    from lob.engines.toggles import VERSIONS

    names = [p.strip() for p in str(step).split("->")]
    native = len(names) == 2 and all(p in NATIVE for p in names)
    parts = names if native else [p.split("@")[0] for p in names]
    mixed = not native and any(p in NATIVE for p in names)  # a C++ engine and another
    if len(parts) != 2 or mixed or not (native or all(p in VERSIONS for p in parts)):
        raise ValueError(f"lob_step must be 'a -> b' of lineage versions ({', '.join(VERSIONS)})"
                         f" or of lob's C++ engines ({', '.join(NATIVE)}), got {step!r}")
    a, b = (NATIVE[p].toggles if native else VERSIONS[p] for p in parts)
    out = []
    for t in dict.fromkeys([*a, *b]):
        if t in ("parent", "step"):
            continue
        if a.get(t) != b.get(t):
            out.append(TOGGLE_MECHANISMS.get((t, b.get(t)), f"{t}_{b.get(t)}"))
    return tuple(out)


def read(path: Path | str | None = None) -> dict:
    """``claims.yaml`` as plain data (sources, machines, published, claims)."""
    path = Path(path or claims_path())
    try:
        return yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ValueError(f"{path}: not valid YAML ({e})") from None


def published(path: Path | str | None = None) -> dict:
    """The seeds' published figures (``claims.yaml``'s ``published`` section), the one place
    they are typed: seed -> table -> figures."""
    return read(path).get("published") or {}


def load(path: Path | str | None = None) -> list[Claim]:
    """Every claim of ``claims.yaml``, validated (bad definitions: ``ValueError``)."""
    path = Path(path or claims_path())
    data = read(path)
    machines = data.get("machines") or {}
    figs = data.get("published") or {}
    out, seen = [], set()
    for i, d in enumerate(data.get("claims") or []):
        c = _claim(d, machines, f"{path.name}: claim {d.get('id', i)!r}", figs)
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


def for_experiment(experiment: str) -> list[Claim]:
    """The claims an experiment measures."""
    return [c for c in load() if c.experiment == experiment]

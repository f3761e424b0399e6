"""Allocation profile (seed 000): the study behind ``notebooks/alloc_profile.ipynb``.

orderbook-rs counts every heap allocation with a counting wrapper around Rust's global
allocator. lob has two counters. A Python or numba engine is counted with a hook on CPython's
three allocator domains (RAW + MEM + OBJ): every Python object and buffer the interpreter
allocates while the engine runs, except what free lists serve and what compiled numba code
allocates through its own runtime; that is not the seed's count, so a claim judged on such an
engine is ``not comparable`` on the ``alloc_counter`` diagnostic. A native engine of
``lob.engines.native`` counts its own code's malloc / free / new / delete calls
(:mod:`lob.engines.foreign.counting`): the seed's definition (:data:`NATIVE_COUNTER`), so the
claims are judged on one (``claim_engine``: orderbook-rs's mechanisms in C++). The seed's
figures sit in their own table (:func:`seed_table`); :func:`allocations_table` compares the
engines (each row names its counter) and :func:`sites_table` says where the Python bytes go.

:func:`measure_allocations` takes the notebook's parameters and returns plain records, so the
tables, the plot and the claims are unit-tested on synthetic data
(``tests/studies/test_study_alloc_profile.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from lob.measure.alloc import NATIVE_METHOD
from lob.studies import conclude as K
from lob.studies.shape import Parameters as _Parameters
from lob.studies.shape import Shape

__all__ = ["Parameters", "SHAPE",
           "COUNTER", "NATIVE_COUNTER", "CLAIM_COLUMN", "POOL_STEP", "check_parameters",
           "measure_allocations", "allocations_table", "seed_table", "beside_seed_table",
           "plot_allocations",
           "sites_table", "claims"]

COUNTER = "CPython allocator hook (PyMem RAW+MEM+OBJ)"  # the claims' alloc_counter diagnostic
NATIVE_COUNTER = "every heap allocation"  # a native engine's own counter: the seed's definition
CLAIM_COLUMN = {"allocs / op": "allocs_per_op", "bytes allocated / op": "bytes_per_op"}
POOL_STEP = ("v0", "v0+pool")  # the lineage's node-pool step, named when both are profiled
SEED_ALLOC_CLAIMS = ("s000_allocs_mixed", "s000_alloc_budget")  # the seed table's two streams


def check_parameters(engines: Sequence[str], workloads: Sequence[str], claim_engine: str,
                     top: int) -> None:
    """One clear ValueError for parameters that do not fit together (engine names are
    checked by ``Study.start``)."""
    from lob.studies.shape import at_least_one, need, one_of

    need(engines, "engines", "version to profile")
    need(workloads, "workloads", "stream")
    one_of(claim_engine, engines, "claim_engine", "engines")
    at_least_one(top, "top")


@dataclass(frozen=True)
class Parameters(_Parameters):
    """The notebook's parameters this study checks (names and defaults as in its cell)."""

    engines: Sequence[str] = ("v0", "v0+pool", "v1", "v2", "v3")
    workloads: Sequence[str] = ("mixed_70_20_10", "alloc_budget")
    claim_engine: str = "v3"
    top: int = 8

    def check(self) -> None:
        check_parameters(self.engines, self.workloads, self.claim_engine, self.top)


def _site(path: str) -> str:
    """A tracemalloc site relative to the package (``engines/base.py:301``)."""
    return path.rsplit("/lob/", 1)[-1]


def measure_allocations(engines: Sequence[str], workloads: Sequence[str], scale: float,
                        top: int, out: str | Path | None, *, bench: Callable | None = None,
                        workload: Callable | None = None,
                        capture: Callable | None = None) -> dict:
    """Allocation counts and tracemalloc's top sites of every engine on every workload
    (``lob.bench(..., alloc=True)``, its JSON saved into ``out``), and one latency
    histogram per workload of the last engine for the record (``<engine>__<workload>.hgrm``).

    Returns ``{"rows": [{"workload", "engine", "counter" ("native": the engine library's own
    counter; "CPython hook"), "ops", "allocs_per_op", "bytes_per_op", "frees_per_op",
    "harness_allocs_per_op"}], "sites": [{"workload", "engine", "rank",
    "site", "kib", "blocks"}]}``. ``bench``, ``workload`` and ``capture`` are injectable."""
    if bench is None:
        from lob.measure import bench
    if workload is None:
        from lob.workloads import build

        def workload(name, scale):
            return build(name, scale=scale)
    capture = capture or K.capture
    wls = {w: workload(w, scale) for w in workloads}  # all built before any count
    rows, sites = [], []
    for w, wl in wls.items():
        for e in engines:
            res = bench(e, wl, repeat=1, latency=False, throughput=False, alloc=True,
                        diagnostics=False)
            if out is not None:
                res.save(out)
            c = res.alloc["counts"]
            native = res.alloc.get("method") == NATIVE_METHOD
            rows.append({"workload": w, "engine": e,
                         "counter": "native" if native else "CPython hook", "ops": c["ops"],
                         "allocs_per_op": c["allocs_per_op"], "bytes_per_op": c["bytes_per_op"],
                         "frees_per_op": c["frees_per_op"],
                         "harness_allocs_per_op": res.alloc["harness_allocs_per_op"]})
            for rank, site in enumerate(res.alloc["trace"]["top_sites"][:top]):
                sites.append({"workload": w, "engine": e, "rank": rank,
                              "site": _site(site["site"]), "kib": site["size_diff"] / 1024,
                              "blocks": site["count_diff"]})
        if out is not None:
            K.save_hgrm(capture(engines[-1], wl)["durations"],
                        Path(out) / f"{engines[-1]}__{w}.hgrm")
    return {"rows": rows, "sites": sites}


def allocations_table(rows: Sequence[dict]) -> K.Conclusion:
    """allocs/op, bytes/op, frees/op per (workload, engine), the harness's own allocs/op, and
    each engine's allocs/op over the first engine's on the same workload (``vs_first``).
    Says, on the first workload, which engine allocates least and most, and what the node
    pool step (v0 -> v0+pool) does when both are profiled."""
    first: dict[str, float] = {}
    recs = []
    for r in rows:
        base = first.setdefault(r["workload"], r["allocs_per_op"])
        recs.append({**r, "vs_first": r["allocs_per_op"] / base if base else None})
    t = K.Conclusion("allocations", recs, key=["workload", "engine"],
                     kinds={"counter": "label", "ops": "count", "allocs_per_op": "ratio",
                            "bytes_per_op": "ratio", "frees_per_op": "ratio",
                            "harness_allocs_per_op": "ratio", "vs_first": "ratio"},
                     note="allocs/op counts every allocator call that returned memory (malloc, "
                          "calloc, realloc; operator new for a native engine) over the "
                          f"measured window. counter: `CPython hook` ({COUNTER}; the harness "
                          "column is the loop alone, on a no-op engine, reported, not "
                          "subtracted) or `native` (the engine library's own calls, the "
                          "seed's definition; it never sees the harness).")
    w0 = t.rows[0]["workload"]
    mine = [r for r in t.rows if r["workload"] == w0]
    lo = min(mine, key=lambda r: r["allocs_per_op"])
    hi = max(mine, key=lambda r: r["allocs_per_op"])
    if len(mine) == 1:
        t.say(f"On {w0}, only {lo['engine']} was profiled: "
              f"{t.cell((w0, lo['engine']), 'allocs_per_op')} allocs/op, "
              f"{t.cell((w0, lo['engine']), 'bytes_per_op')} B/op.")
    else:
        t.say(f"On {w0}, {lo['engine']} allocates least "
              f"({t.cell((w0, lo['engine']), 'allocs_per_op')} allocs/op, "
              f"{t.cell((w0, lo['engine']), 'bytes_per_op')} B/op) and {hi['engine']} most "
              f"({t.cell((w0, hi['engine']), 'allocs_per_op')}).")
    a, b = POOL_STEP
    if mine[0]["engine"] == a and any(r["engine"] == b for r in mine):
        t.say(f"The node pool step ({a} -> {b}) takes allocs/op to "
              f"{t.cell((w0, b), 'vs_first')}x {a}'s.")
    return t


def seed_table(*, alloc: dict | None = None, machine: str | None = None,
               workloads: Sequence[str] | None = None) -> K.Conclusion:
    """Seed 000's counts in their own table (its machine, its counter): allocs/op and bytes/op
    on its mixed stream, the asserted ceiling on its alloc-budget stream. Defaults come from
    :data:`lob.studies.published.SEED000_ALLOC` and ``claims.yaml``."""
    if alloc is None:
        from lob.studies.published import SEED000_ALLOC as alloc
    if machine is None or workloads is None:
        from lob.studies.claims import get

        machine = machine or get(SEED_ALLOC_CLAIMS[0]).machine
        workloads = workloads or [get(c).workload for c in SEED_ALLOC_CLAIMS]
    mixed, budget = workloads
    rows = [{"workload": mixed, "allocs_per_op": float(alloc["allocs_per_op"]),
             "bytes_per_op": float(alloc["bytes_per_op"]), "asserted_ceiling": None},
            {"workload": budget, "allocs_per_op": None, "bytes_per_op": None,
             "asserted_ceiling": float(alloc["budget_ceiling_allocs_per_op"])}]
    return K.Conclusion(f"seed 000 ({machine}, Rust global-allocator counter)", rows,
                        key="workload", machine=f"{machine} (seed 000)",
                        kinds={"allocs_per_op": "ratio", "bytes_per_op": "ratio",
                               "asserted_ceiling": "ratio"})


def beside_seed_table(rows: Sequence[dict], claim_engine: str, *,
                      alloc: dict | None = None, machine: str | None = None) -> K.Conclusion:
    """``claim_engine``'s allocs/op and bytes/op on the seed's mixed stream beside the seed's
    own (its machine, its GlobalAlloc counter), and which counter counted lob's: the seed's
    definition only when ``native``. Says how many times fewer (or more) allocations lob's
    engine makes per op."""
    if alloc is None:
        from lob.studies.published import SEED000_ALLOC as alloc
    if machine is None:
        from lob.studies.claims import get

        machine = get(SEED_ALLOC_CLAIMS[0]).machine
    from lob.studies.claims import get

    mixed = get(SEED_ALLOC_CLAIMS[0]).workload
    a_seed = K.seed_column("allocs_per_op", "seed 000", machine)
    b_seed = K.seed_column("bytes_per_op", "seed 000", machine)
    recs = [{"workload": r["workload"], "engine": r["engine"], "counter": r.get("counter", ""),
             "allocs_per_op": r["allocs_per_op"], a_seed: float(alloc["allocs_per_op"]),
             "bytes_per_op": r["bytes_per_op"], b_seed: float(alloc["bytes_per_op"])}
            for r in rows if r["engine"] == claim_engine and r["workload"] == mixed]
    t = K.Conclusion(f"{claim_engine} beside seed 000's counts", recs, key="engine",
                     kinds={"counter": "label", "allocs_per_op": "ratio",
                            "bytes_per_op": "ratio"},
                     note="lob's figures on this machine's run of the seed's stream; the seed's "
                          "from its own run (an allocation count does not depend on the "
                          "machine, its counter does).")
    if not recs:
        return t.say(f"{claim_engine} was not profiled on {mixed}.")
    r = recs[0]
    if r["counter"] != "native":
        return t.say(f"{claim_engine} was counted by the CPython hook, not the seed's "
                     "definition: its figures are not the seed's count.")
    if r["allocs_per_op"] > 0:
        t.say(f"{claim_engine} makes {t.cell(claim_engine, 'allocs_per_op')} allocations per "
              f"op against the seed's {t.cell(claim_engine, a_seed)}, and requests "
              f"{t.cell(claim_engine, 'bytes_per_op')} B per op against "
              f"{t.cell(claim_engine, b_seed)}, counted the same way.")
    return t


def plot_allocations(rows: Sequence[dict]):
    """allocs/op and bytes/op per engine (bars), one series per workload. Returns the Figure."""
    from lob.studies import plots as lp

    df = pd.DataFrame(list(rows))
    engines = list(dict.fromkeys(df.engine))
    fig, axes = lp.subplots(1, 2, panel=(5.2, 3.6))
    for ax, col in zip(axes, ["allocs_per_op", "bytes_per_op"], strict=True):
        lp.bars(ax, df.pivot(index="engine", columns="workload", values=col).loc[engines],
                ylabel=col, title=f"{col.replace('_', ' ')} (lob)")
    lp.legend_outside(fig, title="workload")
    fig.suptitle(f"allocator calls counted by the {COUNTER}")
    bad = lp.overlaps(fig)
    if bad:
        raise AssertionError(f"overlapping texts in the allocations plot: {bad}")
    return fig


def sites_table(sites: Sequence[dict], top: int) -> K.Conclusion:
    """tracemalloc's ``top`` sites by net KiB, summed over versions and workloads; names the
    largest (or says none was traced)."""
    agg: dict[str, dict] = {}
    for r in sites:
        a = agg.setdefault(r["site"], {"site": r["site"], "kib": 0.0, "blocks": 0})
        a["kib"] += r["kib"]
        a["blocks"] += r["blocks"]
    rows = sorted(agg.values(), key=lambda r: -r["kib"])[:top]
    t = K.Conclusion("tracemalloc sites (all versions, both workloads)", rows, key="site",
                     kinds={"site": "label", "kib": "ratio", "blocks": "count"})
    if not rows:
        return t.say("No allocation site was traced.")
    s = rows[0]["site"]
    return t.say(f"The largest allocation site is {s} ({t.cell(s, 'kib')} KiB net).")


def claims(rows: Sequence[dict], claim_engine: str) -> dict[str, dict]:
    """The experiment's claims (``claims.yaml``) -> ``claim_engine``'s figure on the claim's
    workload, in the claim's metric, with the counter as its regime diagnostic; a claim whose
    workload was not profiled is left out (not measured)."""
    from lob.studies.claims import for_experiment, measurement

    out = {}
    for c in for_experiment("alloc_profile"):
        col = CLAIM_COLUMN[c.metric]
        r = [r for r in rows if r["workload"] == c.workload and r["engine"] == claim_engine]
        if r:
            native = r[0].get("counter") == "native"
            out[c.id] = measurement(
                r[0][col], diagnostics={"alloc_counter": NATIVE_COUNTER if native else COUNTER},
                detail=f"{claim_engine}, {col.replace('_per_op', '/op')}"
                       + (" (the engine library's own counter)" if native else ""))
    return out


SHAPE = Shape(parameters=Parameters, measure=(measure_allocations,),
              tables=(allocations_table, seed_table, beside_seed_table, sites_table),
              claims=claims, plots=(plot_allocations,))

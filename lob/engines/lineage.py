"""Named versions of the ladder engine: each step of the lineage changes exactly one toggle.

The C++ seed's v1 bundled two changes (node pool and bitmap best price), so lob adds the
two single-step intermediates ``v0+pool`` and ``v0+bitmap``; ``v3`` is the seed's own next
target (per-level quantity sums for the FOK check). Every version exists on the pure-Python
backend under its plain name and on the numba backend as ``<name>@numba``.
"""

from __future__ import annotations

# name -> toggles + the one-line description of the step from its parent
VERSIONS: dict[str, dict] = {
    "v0": dict(levels="deque", best="scan", fok="full", parent=None,
               step="baseline: per-level queues, linear best-price scan per match step, "
                    "FOK scans every crossing order (C++ seed v0)"),
    "v0+pool": dict(levels="pool", best="scan", fok="full", parent="v0",
                    step="levels in a preallocated index-linked node pool with a free list"),
    "v0+bitmap": dict(levels="deque", best="bitmap", fok="full", parent="v0",
                      step="best price from a non-empty-level bitmap instead of a scan"),
    "v1": dict(levels="pool", best="bitmap", fok="full", parent="v0+pool",
               step="pool + bitmap together (C++ seed v1)"),
    "v2": dict(levels="pool", best="bitmap", fok="early_exit", parent="v1",
               step="FOK check stops once enough quantity is found (C++ seed v2)"),
    "v3": dict(levels="pool", best="bitmap", fok="level_sums", parent="v2",
               step="FOK check from per-level quantity sums minus own-owner quantity"),
}

# the order bisection walks: each version is one toggle away from the previous one
CHAIN = ["v0", "v0+pool", "v1", "v2", "v3"]


def toggles(name: str) -> dict:
    """The three toggles (levels, best, fok) of a named version."""
    base = name.removesuffix("@numba")
    if base not in VERSIONS:
        raise ValueError(f"unknown version {name!r}; versions: {', '.join(VERSIONS)}")
    v = VERSIONS[base]
    return {k: v[k] for k in ("levels", "best", "fok")}


def all_toggle_combinations() -> list[dict]:
    """Every (levels, best, fok) combination of the ladder engine, as toggle dicts."""
    from itertools import product

    from lob.engines.ladder import TOGGLES

    return [dict(levels=lv, best=b, fok=f)
            for lv, b, f in product(TOGGLES["levels"], TOGGLES["best"], TOGGLES["fok"])]


def _register_python_versions() -> None:
    from functools import partial

    from lob.engines.base import register
    from lob.engines.ladder import LadderEngine

    for name in VERSIONS:
        t = toggles(name)
        register(name, partial(LadderEngine, **t), description=VERSIONS[name]["step"],
                 toggles=t)


_register_python_versions()

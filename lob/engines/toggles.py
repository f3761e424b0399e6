"""The one toggle vocabulary: toggle names, the values each backend implements, the lineage.

A lineage version is a named set of toggles (``levels``, ``best``, ``fok``, ``stream``,
``loop``, ``select``, ``ownsums``); each
step from its parent changes exactly one toggle. The pure-Python ladder implements every value; the
numba backend implements only the node pool for ``levels`` (a per-level deque has no
compiled form cheaper than the pool), so it registers only the versions whose toggles it
really runs (:func:`backend_versions`), and refuses the others (:func:`check`).

The C++ seed's v1 bundled two changes (node pool and bitmap best price), so lob adds the
two single-step intermediates ``v0+pool`` and ``v0+bitmap``; ``v3`` is the seed's own next
target (per-level quantity sums for the FOK check); ``v4`` (numba only) is the second
compiled kernel, :mod:`lob.engines.compiled.kernel_v4` (lobster's v4 layout), reached from
``v3`` in four single steps: ``v3+packed`` (``levels="packed"``: the kernel's layout, every
command through its full body), ``v3+packed+hot`` (``loop="hot"``: the inner loop),
``v3+packed+hot+select`` (``select="select"``) and ``v4`` (``ownsums="stp"``); the
``loop``, ``select`` and ``stream`` switches are compile-time specialisations of that kernel;
``v5`` (``stream="prefetch"``, numba only) is that kernel with the command and outcome
streams prefetched in software (a compile-time switch of the same kernel). ``v2+tracked``
(``best="tracked"``, numba only, off the bisection chain) is v2 with the best price cached and
rescanned only when its level empties and no per-level index: lob's reading of lobster's
array-indexed ladder, the baseline its bitmap step is judged against.
"""

from __future__ import annotations

NAMES = ("levels", "best", "fok", "stream", "loop", "select", "ownsums")

# backend -> toggle -> the values it implements (the first is the backend's default)
VALUES: dict[str, dict[str, tuple[str, ...]]] = {
    "python": {"levels": ("deque", "pool"), "best": ("scan", "bitmap", "sorted"),
               "fok": ("full", "early_exit", "level_sums"), "stream": ("plain",),
               "loop": ("single",), "select": ("branch",), "ownsums": ("always",)},
    "numba": {"levels": ("pool", "packed"), "best": ("scan", "bitmap", "tracked"),
              "fok": ("full", "early_exit", "level_sums"), "stream": ("plain", "prefetch"),
              "loop": ("single", "hot"), "select": ("branch", "select"),
              "ownsums": ("always", "stp")},
}

# name -> toggles, parent and the one-line description of the step from the parent
VERSIONS: dict[str, dict] = {
    "v0": dict(levels="deque", best="scan", fok="full", stream="plain", parent=None,
               step="baseline: per-level queues, linear best-price scan per match step, "
                    "FOK scans every crossing order (C++ seed v0)"),
    "v0+pool": dict(levels="pool", best="scan", fok="full", stream="plain", parent="v0",
                    step="levels in a preallocated index-linked node pool with a free list"),
    "v0+bitmap": dict(levels="deque", best="bitmap", fok="full", stream="plain", parent="v0",
                      step="best price from a non-empty-level bitmap instead of a scan"),
    "v1": dict(levels="pool", best="bitmap", fok="full", stream="plain", parent="v0+pool",
               step="pool + bitmap together (C++ seed v1)"),
    "v2": dict(levels="pool", best="bitmap", fok="early_exit", stream="plain", parent="v1",
               step="FOK check stops once enough quantity is found (C++ seed v2)"),
    "v3": dict(levels="pool", best="bitmap", fok="level_sums", stream="plain", parent="v2",
               step="FOK check from per-level quantity sums minus own-owner quantity"),
    "v2+tracked": dict(levels="pool", best="tracked", fok="early_exit", stream="plain",
                       parent="v2",
                       step="best price cached and rescanned (a linear walk of the ladder) only "
                            "when its level empties, with no per-level index: lob's reading of "
                            "lobster's array-indexed ladder (its v4), the baseline of the bitmap "
                            "step (numba only)"),
    "v3+packed": dict(levels="packed", best="bitmap", fok="level_sums", stream="plain",
                      parent="v3",
                      step="the second compiled kernel (kernel_v4), every command through its "
                           "full body: 32-byte order records with int32 links, 16-byte level "
                           "rows without an order count, the book's scalars in registers across "
                           "a kernel call, unsigned indexing, no clock code when untimed (one "
                           "step: see kernel_v4) (numba only)"),
    "v3+packed+hot": dict(levels="packed", best="bitmap", fok="level_sums", stream="plain",
                          loop="hot", parent="v3+packed",
                          step="cancels and the orders that cross nothing, are refused for "
                               "crossing or are filled whole by one maker run in an inner loop "
                               "of their own (numba only)"),
    "v3+packed+hot+select": dict(levels="packed", best="bitmap", fok="level_sums",
                                 stream="plain", loop="hot", select="select",
                                 parent="v3+packed+hot",
                                 step="in that inner loop, the opposite best and the cross test "
                                      "are selects, not branches on the side (numba only)"),
    "v4": dict(levels="packed", best="bitmap", fok="level_sums", stream="plain", loop="hot",
               select="select", ownsums="stp", parent="v3+packed+hot+select",
               step="per-owner level sums kept only when the STP mode reads them (with "
                    "StpMode.NONE a FOK check never subtracts own quantity) (numba only)"),
    "v5": dict(levels="packed", best="bitmap", fok="level_sums", stream="prefetch", loop="hot",
               select="select", ownsums="stp", parent="v4",
               step="the command and outcome streams prefetched in software, 64 records ahead "
                    "of the command in hand (numba only)"),
}

# a toggle a version leaves out has its first (plain) value: the v0..v3 kernel runs every
# command through one body, branches on the side, keeps per-owner sums whenever level sums
DEFAULTS = {"stream": "plain", "loop": "single", "select": "branch", "ownsums": "always"}
for _v in VERSIONS.values():
    for _k, _d in DEFAULTS.items():
        _v.setdefault(_k, _d)

# the order bisection walks: each version is one toggle away from the previous one
CHAIN = ["v0", "v0+pool", "v1", "v2", "v3", "v3+packed", "v3+packed+hot", "v3+packed+hot+select",
         "v4", "v5"]

# registered-name suffix of each backend's versions
SUFFIX = {"python": "", "numba": "@numba"}


def check(backend: str, **toggles: str) -> dict:
    """``toggles`` if ``backend`` implements every value, else ValueError naming what it has."""
    if backend not in VALUES:
        raise ValueError(f"unknown backend {backend!r}; backends: {', '.join(VALUES)}")
    have = VALUES[backend]
    for name, value in toggles.items():
        if name not in have:
            raise ValueError(f"unknown toggle {name!r}; toggles: {', '.join(NAMES)}")
        if value not in have[name]:
            raise ValueError(f"the {backend} backend implements {name} = "
                             f"{' | '.join(have[name])}, not {value!r}")
    return dict(toggles)


def version_toggles(name: str) -> dict:
    """The toggles (levels, best, fok) of a named version (``v2`` or ``v2@numba``)."""
    base = name
    for suffix in SUFFIX.values():
        if suffix and name.endswith(suffix):
            base = name.removesuffix(suffix)
    if base not in VERSIONS:
        raise ValueError(f"unknown version {name!r}; versions: {', '.join(VERSIONS)}")
    v = VERSIONS[base]
    return {k: v[k] for k in NAMES}


def implements(backend: str, toggles: dict) -> bool:
    have = VALUES[backend]  # a toggle left out has the backend's first value (stream: plain)
    return all(toggles.get(k, have[k][0]) in have[k] for k in NAMES)


def backend_versions(backend: str) -> dict[str, str | None]:
    """The versions ``backend`` really runs: registered name -> registered parent name.

    A version whose toggles the backend does not implement is left out; a kept version's
    parent is its nearest kept ancestor (None for the backend's root).
    """
    suffix = SUFFIX[backend]
    out: dict[str, str | None] = {}
    for name, v in VERSIONS.items():
        if not implements(backend, version_toggles(name)):
            continue
        parent = v["parent"]
        while parent is not None and not implements(backend, version_toggles(parent)):
            parent = VERSIONS[parent]["parent"]
        out[name + suffix] = None if parent is None else parent + suffix
    return out


def measured_step(name: str, among, backend: str = "numba") -> tuple[str | None, str]:
    """``name``'s nearest registered ancestor among the engines ``among`` (a measured part of
    the lineage; None when none is), and the steps from it to ``name`` in words (the step
    descriptions of every version between, joined): a lineage measured without some
    intermediate versions still compares each version with the one it grew from."""
    parents = backend_versions(backend)
    suffix = SUFFIX[backend]
    steps = [VERSIONS[name.removesuffix(suffix)]["step"]]
    p = parents.get(name)
    while p is not None and p not in among:
        steps.insert(0, VERSIONS[p.removesuffix(suffix)]["step"])
        p = parents.get(p)
    return p, "; then ".join(steps)


def chain(backend: str = "python") -> list[str]:
    """The bisection chain on ``backend``: the :data:`CHAIN` versions it registers, in order."""
    have = backend_versions(backend)
    return [v + SUFFIX[backend] for v in CHAIN if v + SUFFIX[backend] in have]


def all_combinations(backend: str = "python") -> list[dict]:
    """Every (levels, best, fok) combination ``backend`` implements, as toggle dicts."""
    from itertools import product

    have = VALUES[backend]
    return [dict(zip(NAMES, combo, strict=True)) for combo in product(*(have[k] for k in NAMES))]

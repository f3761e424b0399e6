"""The numba backend: compiled twins ``<version>@numba`` of the lineage versions it implements.

Importing this package only lists its engines (``ENGINES``); numba itself is imported, and the
kernels loaded from numba's on-disk cache (or compiled, the first time), when the first
compiled engine is built. Design notes (the runs behind the inlining:
docs/decisions/pool-kernel-inlining.md):

* ``v4@numba`` (``levels="packed"``) runs its own kernel, :mod:`.kernel_v4` (packed 32-byte
  order records, the book's scalars in registers; see :mod:`.engine_v4`), and ``v5@numba``
  (``stream="prefetch"``) that kernel's specialisation that prefetches the command and
  outcome streams; the other versions share the first kernel. Both layouts share one core:
  the scalar cells (:mod:`.state`), the bitmap (:mod:`.bitmap`), the validation and outcome
  code (:mod:`.ops`, inlined), the engine base (:class:`.engine.KernelEngine`: growth,
  replay, a pool of pre-mapped replay buffers, step, views) and the invariant messages
  (:mod:`.check`); :mod:`.entry` runs either kernel from compiled code (the pipeline);
* one kernel (:mod:`.kernel`) serves every version v0+pool..v3: the toggles are constants in
  the state array, and the branches on them are loop-invariant (perfectly predicted), so they are
  not specialised at compile time - a specialisation per version would multiply the
  compile time by six for no measured gain;
* the hot path (submit, match, the FOK check, cancel, the bitmap walks) is inlined into the
  replay loop at numba IR level (``inline="always"``): a non-inlined numba call passes every
  array as ~7 scalars and forces every value back to memory, and code loaded from numba's
  cache ran slower than freshly compiled code while calls crossed cached libraries; one
  function removes both effects. The price is compile time (once per machine: typing the
  inlined whole is most of it), so rare paths (modify, mass cancel) stay real calls, and
  ``match`` has one inlined copy, which a re-priced modify shares (a second copy nearly
  doubled the compile time for a few percent of speed);
* ``ids``: a live-id bitset (``"bitset"``, default) answers a cancel of an id that no longer
  rests without touching the 16 MB id index; ``"array"`` keeps the index alone (a backend
  layout choice, not a lineage step; kept so its effect can be measured);
* ``levels``: the compiled book is the index-linked node pool (``pool``: 64-byte int64
  rows; ``packed``: 32-byte records, v4), and only that: a per-level deque has no compiled
  form cheaper than the pool. So only the versions with ``levels="pool"`` or ``"packed"``
  are registered (``v0+pool@numba``, the backend's root, then ``v1``, ``v2``, ``v3``,
  ``v4``, ``v5``), and ``CompiledEngine(levels="deque")`` raises ValueError
  (:mod:`lob.engines.toggles`);
* ``best``: ``scan`` re-scans the ladder from the band edge at every match step;
  ``bitmap`` keeps a two-level bitmap (words + summary word level, :mod:`.bitmap`) and a
  cached best; ``tracked`` (``v2+tracked@numba``) caches the best and rescans the ladder
  from it only when its level empties, with no per-level index (lob's reading of lobster's
  array-indexed ladder: the baseline of lobster's bitmap step);
* ``fok``: ``full`` | ``early_exit`` | ``level_sums`` (per-level totals plus per-level
  per-owner sums for owners 1..4095 that got one of up to 16 slots; other owners' own
  quantity is found by walking the level);
* the pool, fill buffer and id index grow (doubling) between kernel calls; with
  ``grow=False`` a LIMIT/POST_ONLY submit finding the pool full is REJECTED / POOL_FULL.
"""

from __future__ import annotations

from lob.engines import toggles as tg
from lob.engines.base import EngineSpec


def _factory(version: str):
    def make(config):
        from lob.engines.compiled._band import check

        t = tg.version_toggles(version)
        check(t["best"], t["fok"], config)  # a band too wide: refused before numba loads
        if t["levels"] == "packed":
            from lob.engines.compiled.engine_v4 import PackedEngine

            return PackedEngine(config, **t)
        from lob.engines.compiled.engine import CompiledEngine

        return CompiledEngine(config, **t)

    return make


def _spec(name: str, parent: str | None) -> EngineSpec:
    t = tg.version_toggles(name)
    base = name.removesuffix(tg.SUFFIX["numba"])
    step = tg.VERSIONS[base]["step"] if parent else (
        f"compiled root: {base} ({', '.join(f'{k}={v}' for k, v in t.items())})")
    return EngineSpec(name, _factory(base), f"numba twin of {base}: {step}", "numba", t, parent)


ENGINES = [_spec(name, parent) for name, parent in tg.backend_versions("numba").items()]


# two processes, side by side: the pool kernel's group (~40 s of one core, cold) then one of
# v4's kernel's specialisations, so that both finish together (v4's kernel alone has five,
# ~90 s of one core). numba writes a function's cache index with no lock (read, add an entry,
# write back), so two processes that compile one function at once could both claim the same
# data file: each warm process holds a lock around numba's cache saves (_lock_cache_saves),
# and no engine is in two groups (the same specialisation compiled twice)
WARM_GROUPS = (("v2@numba", "v3+packed+hot@numba"),
               ("v4@numba", "v5@numba", "v3+packed@numba"))
# the engines whose timed replay is warmed too: a timed replay is a specialisation of its own
# (the clock code; ~20-45 s of one core each, cold), so only where the default batch or a
# notebook's quick preset captures latency on a compiled engine: the pool kernel's (v2@numba's,
# which v0+pool..v3 share: fok_scan_bottleneck, bisection) and v5@numba's (evolution_stress's
# latency view). Every other version's timed replay (v4's and
# the v3 -> v4 sub-steps', four of v4's kernel's specialisations) compiles where it is first
# used; v3+packed+hot+select's untimed replay is v4's specialisation (ownsums is a runtime flag)
WARM_TIMED = ("v2@numba", "v5@numba")


def warm(groups=WARM_GROUPS, timed=WARM_TIMED) -> dict[tuple[str, ...], float]:
    """Compile (or load from numba's on-disk cache) the specialisations the engines of each
    group run (untimed replay and invariant check; the timed replay too for the engines in
    ``timed``), one process per group, side by side; returns the seconds each group took.
    A cold cache costs ~1-2 minutes of one core per kernel; run before work that starts many
    processes at once (nbval's workers, the test workers, a batch), so that none of them
    compiles, or races another to the cache."""
    import subprocess
    import sys
    import time

    t0 = time.perf_counter()
    procs = [(tuple(g), subprocess.Popen(
        [sys.executable, "-c", "import sys; from lob.engines.compiled import _warm_here; "
                               "_warm_here(sys.argv[2:], sys.argv[1].split(','))",
         ",".join(n for n in timed if n in g), *g],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)) for g in groups]
    took, failed = {}, []
    for g, p in procs:
        _, err = p.communicate()
        took[g] = time.perf_counter() - t0
        if p.returncode:
            failed.append(f"{', '.join(g)}: exit {p.returncode}: "
                          + (err.strip().splitlines() or ["no output"])[-1])
    if failed:
        raise RuntimeError("; ".join(failed))
    return took


def _lock_cache_saves() -> None:
    """Make numba's cache saves in this process take an exclusive lock on a file beside the
    function's index (``<index>.lock``) and read the index again under it: two warm processes
    compiling specialisations of one function then add their entries one after the other,
    each under its own data file name, instead of both taking the first free name."""
    import fcntl

    from numba.core import caching

    save = caching.IndexDataCacheFile.save
    if getattr(save, "locked", False):
        return

    def locked(self, key, data):
        with open(f"{self._index_path}.lock", "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)  # released when f closes
            save(self, key, data)

    locked.locked = True
    caching.IndexDataCacheFile.save = locked


def _warm_here(names, timed=()) -> None:
    import numpy as np

    from lob.semantics import COMMAND_DTYPE, BookConfig

    _lock_cache_saves()
    suffix = tg.SUFFIX["numba"]
    for name in names:
        if name not in tg.backend_versions("numba"):
            raise ValueError(f"unknown engine {name!r}: the compiled engines are "
                             f"{', '.join(tg.backend_versions('numba'))}")
        eng = _factory(name.removesuffix(suffix))(BookConfig(1, 10))
        eng.replay(np.zeros(1, dtype=COMMAND_DTYPE))
        if name in timed:
            eng.replay_timed(np.zeros(1, dtype=COMMAND_DTYPE))
        eng.check()


def kernel_clock_overhead(samples: int = 100_000) -> dict[str, float]:
    """Cost of the in-kernel clock (back-to-back reads inside compiled code), in ns."""
    from lob.engines.compiled.clock import kernel_clock_overhead as _overhead

    return _overhead(samples)


__all__ = ["ENGINES", "WARM_GROUPS", "WARM_TIMED", "kernel_clock_overhead", "warm"]

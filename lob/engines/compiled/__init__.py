"""The numba backend: compiled twins ``<version>@numba`` of the lineage versions it implements.

Importing this package only lists its engines (``ENGINES``); numba itself is imported, and the
kernels loaded from numba's on-disk cache (or compiled, ~30-60 s the first time), when the
first compiled engine is built. Design notes:

* ``v4@numba`` (``levels="packed"``) runs its own kernel, :mod:`.kernel_v4` (packed 32-byte
  order records, the book's scalars in registers, a pool of pre-mapped replay buffers; see
  :mod:`.engine_v4`), and ``v5@numba`` (``stream="prefetch"``) that kernel's specialisation
  that prefetches the command and outcome streams; the other versions share the first kernel;
* one kernel (:mod:`.kernel`) serves every version v0+pool..v3: the toggles are constants in
  the state array, and the branches on them are loop-invariant (perfectly predicted), so they are
  not specialised at compile time - a specialisation per version would multiply the
  compile time by six for no measured gain;
* the hot path (submit, match, the FOK check, cancel, the bitmap walks) is inlined into the
  replay loop at numba IR level (``inline="always"``): a non-inlined numba call passes every
  array as ~7 scalars and forces every value back to memory, and code loaded from numba's
  cache was measured 30-40% slower than freshly compiled code while calls crossed cached
  libraries; one function removes both effects. The price is compile time (~45 s, once per
  machine: typing the inlined whole is most of it), so rare paths (modify, mass cancel) stay
  real calls, and ``match`` has one inlined copy, which a re-priced modify shares (its own
  copy cost another ~50 s; sharing it cost lobster_replay 3-6% on v3@numba, 15 interleaved
  rounds);
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
  ``bitmap`` keeps a two-level bitmap (words + summary word level) and a cached best;
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


def kernel_clock_overhead(samples: int = 100_000) -> dict[str, float]:
    """Cost of the in-kernel clock (back-to-back reads inside compiled code), in ns."""
    from lob.engines.compiled.clock import kernel_clock_overhead as _overhead

    return _overhead(samples)


__all__ = ["ENGINES", "kernel_clock_overhead"]

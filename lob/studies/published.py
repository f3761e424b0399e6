"""The seeds' published figures, as data (NOT measured by lob): shown beside lob's numbers.

A thin reader: every figure is typed once, in ``experiments/claims.yaml``'s ``published``
section, which the seeds' claims also take their values from
(:mod:`lob.studies.claims.model`); the names below are views of it, read on first use.

Sources: seed 000 (orderbook-rs HDR suite, Apple M4 Max, Rust, closed-loop, ns), seed 001
(the C++ binary-market engine, Apple M2 Pro, clang -O3), seed 003 (lobster, Apple M5).
Public sources: orderbook-rs, the C++ engine's repository, lobster's project page.
Different machines and languages: compare shapes and ratios, never absolute values.

* ``SOURCE``: seed -> where its figures come from, in words;
* ``SEED000_PERCENTILES``: scenario -> quantile -> ns; ``SEED000_SAMPLES``: scenario -> the
  samples those percentiles come from; ``SEED000_BISECTION``: scenario ->
  p50 (ns) at 0.11.0, the post-upgrade midpoint and 0.12.0 (None: not published);
  ``SEED000_ALLOC``: allocations and bytes per op, the historical band, the asserted ceiling;
* ``SEED001_COUNTERS`` (one pass of the comprehensive stream),
  ``SEED001_LIMIT_ONLY_REMAINING_SUM``, ``SEED001_NS_PER_OP`` (workload -> version -> ns/op),
  ``SEED001_LATENCY`` (version -> quantile -> ns);
* ``SEED003_MOPS`` (version -> M ops/s), ``SEED003_BITMAP_NARROW_COST_PCT``.
"""

from __future__ import annotations

from functools import cache

# name -> path into claims.yaml's `published` section
_PATHS = {
    "SEED000_PERCENTILES": "seed000/percentiles",
    "SEED000_BISECTION": "seed000/bisection_p50",
    "SEED000_SAMPLES": "seed000/samples",
    "SEED000_ALLOC": "seed000/alloc",
    "SEED001_COUNTERS": "seed001/counters",
    "SEED001_LIMIT_ONLY_REMAINING_SUM": "seed001/limit_only_remaining_sum",
    "SEED001_NS_PER_OP": "seed001/ns_per_op",
    "SEED001_LATENCY": "seed001/latency",
    "SEED003_MOPS": "seed003/mops",
    "SEED003_BITMAP_NARROW_COST_PCT": "seed003/bitmap_narrow_cost_pct",
}

__all__ = ["figures"]  # and SOURCE plus the names of _PATHS, read on first use


@cache
def figures() -> dict:
    """claims.yaml's ``published`` section (seed -> table -> figures), read once."""
    from lob.studies.claims.model import published

    return published()


def __getattr__(name: str):
    if name == "SOURCE":
        return {seed: t.get("source", "") for seed, t in figures().items()}
    if name in _PATHS:
        from lob.studies.claims.model import figure

        return figure(figures(), _PATHS[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

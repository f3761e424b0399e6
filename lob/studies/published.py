"""The seeds' published figures, as data (NOT measured by lob): shown beside lob's numbers.

Sources: seed 000 (orderbook-rs HDR suite, Apple M4 Max, Rust, closed-loop, ns), seed 001
(the C++ binary-market engine, Apple M2 Pro, clang -O3), seed 003 (lobster, Apple M5).
Public sources: orderbook-rs, the C++ engine's repository, lobster's project page.
Different machines and languages: compare shapes and ratios, never absolute values.
"""

from __future__ import annotations

SOURCE = {"seed000": "orderbook-rs 0.12.0 HDR benches, Apple M4 Max, ns (closed loop)",
          "seed001": "C++ binary-market engine bench.cpp, Apple M2 Pro, clang -O3",
          "seed003": "lobster replay, Apple M5, 1M commands, seed 42"}

# seed 000: per scenario, quantile -> ns
SEED000_PERCENTILES: dict[str, dict[str, int]] = {
    "add_only": {"p50": 917, "p99": 62_847, "p99.9": 97_727, "p99.99": 130_495, "max": 195_583},
    "cancel_only": {"p50": 41, "p99": 19_007, "p99.9": 24_047, "p99.99": 27_055,
                    "max": 834_559},
    "aggressive_walk": {"p50": 42, "p99": 3_335, "p99.9": 6_795, "p99.99": 8_839,
                        "max": 18_671},
    "notional_walk": {"p50": 42, "p99": 2_543, "p99.9": 4_959, "p99.99": 6_919, "max": 18_463},
    "mixed_70_20_10": {"p50": 833, "p99": 31_679, "p99.9": 52_031, "p99.99": 72_063,
                       "max": 128_511},
    "thin_book_sweep": {"p50": 42, "p99": 4_543, "p99.9": 5_667, "p99.99": 12_751,
                        "max": 26_335},
    "mass_cancel_burst": {"p50": 32_591, "p99": 42_271, "p99.9": 54_463, "p99.99": 54_463,
                          "max": 54_463},
    "stp_sweep": {"p50": 1_208, "p99": 4_835, "p99.9": 5_543, "p99.99": 9_503, "max": 21_551},
}
# seed 000's three-point bisection of p50 (ns): 0.11.0 -> post-upgrade midpoint -> 0.12.0
SEED000_BISECTION = {"mixed_70_20_10": (792, 833, 833), "stp_sweep": (291, 1_208, 1_208)}
SEED000_ALLOC = {"allocs_per_op": 18.23, "bytes_per_op": 6_173, "band": (15, 19),
                 "budget_ceiling_allocs_per_op": 10}

# seed 001: outcome counters of one pass of the comprehensive stream (identical v0/v1/v2)
SEED001_COUNTERS = {"filled": 356_233, "partial": 71_154, "accepted": 576_805,
                    "cancelled": 801_548, "rejected": 0, "notfound": 194_260,
                    "trades": 666_051, "matched_volume": 3_867_171,
                    "remaining_sum": 15_028_137}
SEED001_LIMIT_ONLY_REMAINING_SUM = 12_371_784
# ns/op (throughput) and latency percentiles (ns)
SEED001_NS_PER_OP = {"cpp_limit_only": {"v0": 162.1, "v1": 76.6},
                     "cpp_comprehensive": {"v0": 793.9, "v1": 765.1, "v2": 58.6}}
SEED001_LATENCY = {"v0": {"p50": 42, "p90": 167, "p99": 20_300, "p99.9": 123_000},
                   "v1": {"p50": 42, "p90": 150, "p99": 20_000, "p99.9": 120_000},
                   "v2": {"p50": 42, "p90": 125, "p99": 292, "p99.9": 800}}

# seed 003: replay throughput (M ops/s) per lobster version; bitmap cost on narrow ~4%
SEED003_MOPS = {"v1": 21.8, "v1.1": 28.0, "v2": 32.5, "v3": 48.0, "v4": 98.7, "v5": 96.5}
SEED003_BITMAP_NARROW_COST_PCT = 4.0

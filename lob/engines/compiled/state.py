"""The scalar state and constants both compiled layouts keep in their int64 array ``S`` (the
pool layout's ``G`` begins with it): one set of cell indices, so that the shared engine base,
the shared helpers of :mod:`lob.engines.compiled.ops`, the invariant checks and the pipeline
read either layout's state the same way."""

from __future__ import annotations

# scalar state S[0:16]: next id, free-list head, fill count, cached best levels (-1: empty),
# live orders, conservation totals (quantity in, traded, removed), owner slots handed out,
# durations written; SEQN (the pool layout's order sequence) last
NEXT_ID, FREE, NFILL, BEST0, BEST1, NLIVE, QIN, QTRADED, QREMOVED, NSLOTS, NDUR, SEQN = range(12)
# constants S[16:32]: the band, the STP mode, the toggles and the table shapes
(LO, HI, WIDTH, STP, FOK_MODE, K, FIXED, NW0, NW1, OSLOT_SIZE, OWNSUMS, BEST_MODE, OS_OFF,
 OSLOT_OFF, IDS) = range(16, 31)
S_SIZE = 32

BEST_SCAN, BEST_BITMAP, BEST_TRACKED = 0, 1, 2
FOK_FULL, FOK_EARLY_EXIT, FOK_LEVEL_SUMS = 0, 1, 2
IDS_ARRAY, IDS_BITSET = 0, 1

# toggle value -> the kernels' constant (the values are lob.engines.toggles.VALUES["numba"])
BEST = {"scan": BEST_SCAN, "bitmap": BEST_BITMAP, "tracked": BEST_TRACKED}
FOK = {"full": FOK_FULL, "early_exit": FOK_EARLY_EXIT, "level_sums": FOK_LEVEL_SUMS}

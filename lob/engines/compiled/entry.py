"""One entry point into either compiled kernel for compiled code that runs it itself (the
pipeline's engine loop): :func:`run_state` runs commands on the state tuple an engine's
``kernel_state()`` returns, whichever layout it is. It is a numba ``overload``: the layout
is chosen from the tuple's type at compile time, so the call costs nothing at run time.
"""

from __future__ import annotations

import numpy as np
from numba.extending import overload

from lob.engines.compiled import kernel as kn
from lob.engines.compiled import kernel_v4 as k4
from lob.engines.compiled.clock import MONOTONIC
from lob.engines.compiled.state import NFILL

# the length of each layout's kernel_state() tuple
POOL_STATE = 6  # (F, N, IDX, LV, B, G)
PACKED_STATE = 11  # (F, ND, L, IDX, LV, B, OS, S, ahead, hot, sel)


def run_state(cmds, out, state, durs):
    """Run ``cmds`` (from the first) into ``out`` on the book ``state`` with the fill record
    discarded first; returns ``(commands run, DONE or what to grow)``, as the kernels'
    ``run`` does. ``durs`` is an empty int64 array (untimed; an array, not a constant, so
    that the pool kernel's specialisation is the one ``replay`` compiled). Callable from
    numba code only."""
    raise TypeError("run_state is callable from numba-compiled code only")


@overload(run_state, jit_options={"cache": True})
def _run_state(cmds, out, state, durs):
    n = len(getattr(state, "types", ()))
    if n == POOL_STATE:
        def pool(cmds, out, state, durs):
            F, N, IDX, LV, B, G = state
            G[NFILL] = 0
            # MONOTONIC or 0, typed int64 (replay's compiled kernel): the pipeline's latencies
            # are against CLOCK_MONOTONIC due times, so never the TSC
            timed = np.int64(MONOTONIC) if durs.size > 0 else np.int64(0)
            return kn.run(cmds, np.int64(0), out, F, N, IDX, LV, B, G, timed, durs)
        return pool
    if n == PACKED_STATE:
        def packed(cmds, out, state, durs):
            F, ND, L, IDX, LV, B, OS, S, ahead, hot, sel = state
            S[NFILL] = 0
            return k4.run(cmds, np.int64(0), out, F, ND, L, IDX, LV, B, OS, S, np.int64(0),
                          None, ahead, hot, sel)
        return packed
    return None


"""Pipeline latency: a paced sender, a shared-memory SPSC ring and an engine process.

Latency is counted from the moment each command was due to the moment its outcome was
published, so queueing behind a busy engine is part of the number (issue 7).

Modules, bottom up: ``ring`` (the shared-memory ring), ``atomics`` and ``compiled`` (the
numba loops), ``run`` (one row's record, :class:`PipelineRun`, and the engine step runners),
``rows`` (the row block's memory layout and the ring's slot layouts), ``transports`` (one
object per transport: ``"python"``, Python loops over the ring, any engine; ``"compiled"``,
numba loops, compiled engines), ``variants`` (the vocabulary: transports, modes, layouts,
variant names, and the session's option checks), ``workers`` (the two child processes),
``session`` (:class:`PipelineSession`, one sender/engine pair alive across the rows of a
sweep, and :func:`run_pipeline`), ``sweep`` (capacity, sweeps, result files). The OS helpers
(pinning, ``SCHED_FIFO``) are :mod:`lob.system`'s.
"""

from lob.pipeline.ring import Consumer, PeerError, Producer, RingError, RingTimeout, SpscRing
from lob.pipeline.run import PipelineError, PipelineRun
from lob.pipeline.session import TRANSPORTS, PipelineSession, run_pipeline

__all__ = ["Consumer", "PeerError", "PipelineError", "PipelineRun", "PipelineSession", "Producer",
           "RingError", "RingTimeout", "SpscRing", "TRANSPORTS", "run_pipeline"]

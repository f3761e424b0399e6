"""Pipeline latency: a paced sender, a shared-memory SPSC ring and an engine process.

Latency is counted from the moment each command was due to the moment its outcome was
published, so queueing behind a busy engine is part of the number (issue 7).
Two transports carry the commands: ``"python"`` (Python loops over the ring, any engine) and
``"compiled"`` (numba loops, compiled engines; :mod:`lob.pipeline.compiled`); a
:class:`PipelineSession` keeps one sender/engine pair alive across the rows of a sweep.
"""

from lob.pipeline.ring import Consumer, PeerError, Producer, RingError, RingTimeout, SpscRing
from lob.pipeline.run import PipelineError, PipelineRun
from lob.pipeline.session import TRANSPORTS, PipelineSession, run_pipeline

__all__ = ["Consumer", "PeerError", "PipelineError", "PipelineRun", "PipelineSession", "Producer",
           "RingError", "RingTimeout", "SpscRing", "TRANSPORTS", "run_pipeline"]

"""Pipeline latency: a paced sender, a shared-memory SPSC ring and an engine process.

Latency is counted from the moment each command was due to the moment its outcome was
published, so queueing behind a busy engine is part of the number (issue 7).
"""

from lob.pipeline.ring import Consumer, PeerError, Producer, RingError, RingTimeout, SpscRing
from lob.pipeline.run import PipelineError, PipelineRun, run_pipeline

__all__ = ["Consumer", "PeerError", "PipelineError", "PipelineRun", "Producer", "RingError",
           "RingTimeout", "SpscRing", "run_pipeline"]

"""lob: a research workbench for limit-order-book matching engines.

>>> import lob
>>> wl = lob.workload("cpp_comprehensive", scale=0.01)
>>> run = lob.replay("v2", wl)
>>> run.counters, run.checksum
>>> lob.engine_names(), lob.workload_names()

``lob.engines`` and ``lob.workloads`` are the subpackages (``import lob.engines.reference``
leaves them modules); the listings are :func:`engine_names` and :func:`workload_names`.
"""

from __future__ import annotations

from lob._version import __version__
from lob.engines.base import EngineSpec, ReplayResult
from lob.engines.registry import engine_names, get_engine, register_engine
from lob.semantics import BookConfig, Kind, OrderType, Outcome, Reason, Scope, Side, Status, StpMode


def workload_names() -> list[str]:
    """Names of every registered workload."""
    from lob.workloads import workload_names

    return workload_names()


def workload(name: str, **params):
    """Build a workload by name (``scale=``, ``seed=`` and workload-specific parameters)."""
    from lob.workloads import build

    return build(name, **params)


def replay(engine: str, wl) -> ReplayResult:
    """Replay a workload (or a bare command array) through a fresh engine."""
    from lob.engines.registry import replay as _replay

    return _replay(engine, wl)


def bench(engine: str, wl, **kwargs):
    """Latency percentiles, throughput and run conditions of one engine on one workload."""
    from lob.measure import bench as _bench

    return _bench(engine, wl, **kwargs)


__all__ = ["BookConfig", "EngineSpec", "Kind", "OrderType", "Outcome", "Reason", "ReplayResult",
           "Scope", "Side", "Status", "StpMode", "bench", "engine_names", "get_engine",
           "register_engine", "replay", "workload", "workload_names", "__version__"]

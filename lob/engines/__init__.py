"""Engines: the reference oracle, the toggle-built ladder and its lineage, the compiled backend,
and engines from other installed packages (entry-point group ``lob.engines``)."""

from lob.engines.base import Engine, ReplayResult
from lob.engines.driver import PyEngine
from lob.engines.registry import (
    EngineSpec,
    engine_names,
    engine_spec,
    get_engine,
    register_engine,
)

__all__ = ["Engine", "EngineSpec", "PyEngine", "ReplayResult", "engine_names", "engine_spec",
           "get_engine", "register_engine"]

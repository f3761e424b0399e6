"""Engines: the reference oracle, the toggle-built ladder and its lineage, the compiled backend."""

from lob.engines.base import (
    Engine,
    EngineInfo,
    PyEngine,
    ReplayResult,
    engine_info,
    engine_names,
    get_engine,
    register,
)

__all__ = ["Engine", "EngineInfo", "PyEngine", "ReplayResult", "engine_info", "engine_names",
           "get_engine", "register"]

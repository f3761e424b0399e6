"""The engine registry: built-in member modules, installed packages, interactive additions.

A member never imports this module. Each built-in member module (:data:`MEMBERS`) exports
``ENGINES``, a list of :class:`EngineSpec`; another installed package declares an entry point
in the group ``lob.engines`` (:data:`ENTRY_POINT_GROUP`) that loads to an ``EngineSpec`` or a
list of them, for example in its ``pyproject.toml``::

    [project.entry-points."lob.engines"]
    my_engine = "my_package:ENGINES"

Entry points are read from the installed distributions' metadata, so a papermill kernel
sees them by name like built-in engines. :func:`register_engine` adds one in this process
only (a notebook's own engine). Everything is collected on first use, never at import.
"""

from __future__ import annotations

import importlib
import os
import warnings
from importlib.metadata import entry_points

from lob.engines.base import EngineSpec
from lob.semantics import BookConfig

ENTRY_POINT_GROUP = "lob.engines"
# built-in members, in listing order; each exports ENGINES (a list of EngineSpec);
# lob.engines.native: lob's C++ engines (built into the cache on first use);
# lob.engines.foreign lists the foreign engines named in $LOB_ENGINES_TOML
MEMBERS = ("lob.engines.reference", "lob.engines.ladder", "lob.engines.compiled",
           "lob.engines.native", "lob.engines.foreign")


_REGISTRY: dict[str, EngineSpec] = {}
_loaded = False
# the $LOB_CACHE the registry was collected under: the adapters and lob's native engines that
# are registered are the ones built in that cache, so another cache is collected again
_loaded_for: str | None = None


def _add(reg: dict[str, EngineSpec], spec, source: str) -> None:
    if not isinstance(spec, EngineSpec):
        raise TypeError(f"{source}: expected a lob.engines.registry.EngineSpec, got "
                        f"{type(spec).__name__}")
    if spec.name in reg:
        raise ValueError(f"engine {spec.name!r} from {source} is already registered "
                         f"(by {reg[spec.name].source})")
    if spec.source != source:
        spec = EngineSpec(spec.name, spec.factory, spec.description, spec.backend,
                          dict(spec.toggles), spec.parent, source)
    reg[spec.name] = spec


def _specs(obj) -> list:
    return [obj] if isinstance(obj, EngineSpec) else list(obj)


def _load() -> dict[str, EngineSpec]:
    global _loaded, _loaded_for
    cache = os.environ.get("LOB_CACHE")
    if _loaded and cache == _loaded_for:
        return _REGISTRY
    if _loaded:  # collected under another cache: collect again, keeping interactive ones
        _forget_collected()
    _loaded_for = cache
    found: list[tuple[EngineSpec, str]] = []
    for mod in MEMBERS:
        for spec in importlib.import_module(mod).ENGINES:
            found.append((spec, spec.source))  # "lob"; a foreign engine names its TOML
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(ep, "dist", None)
        source = f"{dist.name if dist is not None else '?'} ({ep.value})"
        try:
            specs = _specs(ep.load())
            for spec in specs:
                if not isinstance(spec, EngineSpec):
                    raise TypeError(f"{source}: expected a lob.engines.registry.EngineSpec, "
                                    f"got {type(spec).__name__}")
            found.extend((spec, source) for spec in specs)
        except Exception as e:  # a broken plugin must not make lob unusable
            warnings.warn(f"lob.engines entry point {ep.name!r} from {source} skipped: "
                          f"{type(e).__name__}: {e}", RuntimeWarning, stacklevel=2)
    reg: dict[str, EngineSpec] = {}
    _CLASHES.clear()
    for name, group in _by_name(found).items():
        if len(group) == 1:
            _add(reg, *group[0])
            continue
        own = [g for g in group if g[1] == "lob"]
        others = [src for _, src in group if src != "lob"]
        if len(own) == 1:  # lob's engine stays; the other definition is refused
            _add(reg, *own[0])
            msg = (f"engine {name!r} from {' and from '.join(others)} is not registered: lob's "
                   f"own engine has that name; rename it there")
        else:
            msg = _CLASHES[name] = (f"engine {name!r} is defined twice, by "
                                    f"{' and by '.join(src for _, src in group)}; neither "
                                    f"is registered: rename one of them")
        warnings.warn(msg, RuntimeWarning, stacklevel=2)
    for spec in _REGISTRY.values():  # interactive registrations made before this load
        _add(reg, spec, "interactive")
    _REGISTRY.clear()
    _REGISTRY.update(reg)
    _loaded = True
    return _REGISTRY


# names defined by two sources other than lob (neither registered): name -> the message
_CLASHES: dict[str, str] = {}


def _by_name(found: list[tuple[EngineSpec, str]]) -> dict[str, list[tuple[EngineSpec, str]]]:
    groups: dict[str, list[tuple[EngineSpec, str]]] = {}
    for spec, source in found:
        groups.setdefault(spec.name, []).append((spec, source))
    return groups


def refresh() -> list[str]:
    """Collect the engines again (after ``pip install`` of an engine package in this
    process); interactive registrations are kept. Returns the names."""
    importlib.invalidate_caches()
    _forget_collected()
    return list(_load())


def _forget_collected() -> None:
    """Drop every collected engine (interactive registrations are kept) so that the next
    lookup collects them again."""
    global _loaded
    kept = {n: s for n, s in _REGISTRY.items() if s.source == "interactive"}
    _REGISTRY.clear()
    _REGISTRY.update(kept)
    _loaded = False


def register_engine(spec: EngineSpec, *, replace: bool = False) -> EngineSpec:
    """Register ``spec`` in this process (an engine defined in a notebook); returns it.

    Raises ValueError if the name is taken, unless ``replace`` (then only an interactive
    registration may be replaced, never a built-in or installed engine).
    """
    reg = _load()
    old = reg.get(getattr(spec, "name", None))
    if old is not None and replace and old.source == "interactive":
        del reg[old.name]
    _add(reg, spec, "interactive")
    return reg[spec.name]


def engine_names() -> list[str]:
    """Names of every registered engine (built-in, installed, interactive)."""
    return list(_load())


def engine_spec(name: str) -> EngineSpec:
    """The spec of a registered engine; an unknown name raises ValueError listing them."""
    if not isinstance(name, str):
        raise TypeError(f"engine name must be a str, got {type(name).__name__}")
    reg = _load()
    try:
        return reg[name]
    except KeyError:
        from lob.engines.foreign.adapters import ADAPTERS, not_built_hint

        if name in ADAPTERS and not_built_hint(name) is None:  # built since collected
            refresh()
            if name in reg:
                return reg[name]
        from lob.engines.native import not_built_hint as native_hint

        # an adapter not built yet, a native engine without a compiler, a clash
        hint = not_built_hint(name) or native_hint(name) or _CLASHES.get(name)
        raise ValueError(hint or
                         f"unknown engine {name!r}; registered engines: {', '.join(reg)}") from None


def get_engine(name: str, config: BookConfig | None = None):
    """A fresh engine by registered name; an unknown name raises ValueError listing them."""
    spec = engine_spec(name)
    if config is None:
        config = BookConfig()
    if not isinstance(config, BookConfig):
        raise TypeError(f"config must be a lob.BookConfig, got {type(config).__name__}")
    eng = spec.factory(config)
    eng.name = name
    return eng


def engine_capabilities(name: str):
    """What a registered engine declares it supports (:class:`lob.engines.capabilities.
    Capabilities`), read without building a book: a factory's ``capabilities()`` (foreign
    engines: ``lob_capabilities``), else all of lob's semantics."""
    from lob.engines.capabilities import ALL

    f = getattr(engine_spec(name).factory, "capabilities", None)
    return ALL if f is None else f()


def foreign_libraries(values) -> dict[str, dict]:
    """``{engine: {"path", "sha256"}}`` for every registered engine named anywhere in
    ``values`` (a dict, list or str, e.g. an experiment's parameters) whose factory says
    which library file it runs (foreign engines), read without loading it: what a run id
    and a summary record, so that a rebuilt library is a different run. ``{}`` if none."""
    names: set[str] = set()

    def walk(v):
        if isinstance(v, str):
            names.add(v)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list | tuple):
            for x in v:
                walk(x)

    walk(values)
    reg = _load()
    out = {}
    for n in sorted(names & set(reg)):
        f = getattr(reg[n].factory, "library", None)
        if f is not None:
            out[n] = f()
    return out


def foreign_libraries_key(params) -> dict:
    """``{"foreign_libraries": ...}`` for the foreign engines ``params`` names, ``{}`` when it
    names none (so the run ids of every other run stay as they were)."""
    libs = foreign_libraries(params)
    return {"foreign_libraries": libs} if libs else {}


__all__ = ["ENTRY_POINT_GROUP", "MEMBERS", "EngineSpec", "engine_capabilities", "engine_names",
           "engine_spec", "foreign_libraries", "foreign_libraries_key", "get_engine", "refresh",
           "register_engine"]


def replay(engine: str, wl):
    """Replay a workload (or a bare command array) through a fresh engine (``lob.replay``)."""
    from lob.semantics import COMMAND_DTYPE

    if hasattr(wl, "commands") and hasattr(wl, "config"):
        return get_engine(engine, wl.config).replay(wl.commands)
    if getattr(wl, "dtype", None) == COMMAND_DTYPE:
        return get_engine(engine).replay(wl)
    raise TypeError(f"replay takes a Workload or a command array, got {type(wl).__name__}")

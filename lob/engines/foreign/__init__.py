"""Foreign engines: a C, C++ or Rust book in a shared library, measured like lob's own.

The library implements the small C ABI of ``lob_engine.h`` (next to this file): create a
book from a config, replay a command array into preallocated outcome and fill arrays,
optionally a timed replay reading the engine's own clock, snapshot, destroy. lob loads it
with ``ctypes`` (see :mod:`.library` for why, and for the load-time checks) and wraps it in
:class:`ForeignEngine`, which satisfies the ``Engine`` interface, so notebooks, ``lob
bench``, ``lob compare`` and the differential fuzz take it unchanged.

A foreign engine gets its name from a small TOML file::

    name = "c_book"
    path = "build/liblob_c_book.so"   # relative to the TOML file
    description = "example C engine"

(or several ``[[engine]]`` tables with those keys). This module is a registry member: its
``ENGINES`` are the engines of the files listed in ``$LOB_ENGINES_TOML``
(``os.pathsep``-separated; read when the registry collects, so a papermill kernel started
with the variable sees them by name). Or register them in one process with
``for s in foreign_specs(path): lob.register_engine(s)``, or publish ``foreign_specs(path)``
from an installed package's ``lob.engines`` entry point. The library is loaded when the
engine is first built, so a listed engine whose ``.so`` is missing fails then, with a
:class:`ForeignEngineError` saying so.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from lob.engines.base import EngineSpec
from lob.engines.foreign.engine import (
    ForeignEngine,
    HarnessForeignEngine,
    TimedForeignEngine,
    open_engine,
)
from lob.engines.foreign.library import (
    ABI_VERSION,
    HEADER,
    ForeignEngineError,
    Library,
    identity,
    load,
)
from lob.semantics import BookConfig

ENV = "LOB_ENGINES_TOML"
BACKEND = "foreign"


def _factory(name: str, path: Path):
    def make(config: BookConfig | None = None) -> ForeignEngine:
        return open_engine(path, config, name)

    make.__qualname__ = f"foreign_engine[{name}]"
    make.capabilities = lambda: load(path, name).caps  # read without building a book
    make.library = lambda: identity(path)  # path and content hash, without loading it
    return make


def foreign_specs(path: str | os.PathLike) -> list[EngineSpec]:
    """The engines a TOML file describes (``name``, ``path``, ``description``)."""
    toml = Path(path)
    try:
        data = tomllib.loads(toml.read_text())
    except FileNotFoundError:
        raise ForeignEngineError(f"foreign engine list {toml} does not exist "
                                 f"(check ${ENV} or the path given)") from None
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ForeignEngineError(f"cannot read foreign engine list {toml}: {e}") from None
    entries = data.get("engine", [data] if "name" in data else [])
    if not isinstance(entries, list) or not entries:
        raise ForeignEngineError(f"{toml}: expected `name`, `path`, `description` keys or "
                                 f"[[engine]] tables with them")
    specs = []
    for e in entries:
        missing = [k for k in ("name", "path") if not isinstance(e.get(k), str) or not e[k]]
        if missing:
            raise ForeignEngineError(f"{toml}: an engine entry lacks {', '.join(missing)}")
        if "@" in e["name"]:
            raise ForeignEngineError(f"{toml}: engine name {e['name']!r} may not contain '@' "
                                     f"(reserved for backend twins like v2@numba)")
        lib = (toml.parent / e["path"]).resolve() if not Path(e["path"]).is_absolute() \
            else Path(e["path"])
        desc = str(e.get("description", "")) or f"foreign engine from {lib.name}"
        specs.append(EngineSpec(e["name"], _factory(e["name"], lib), f"{desc} [{lib.name}]",
                                backend=BACKEND, source=f"{toml.name} (foreign)"))
    return specs


def env_specs() -> list[EngineSpec]:
    """Engines from every TOML listed in ``$LOB_ENGINES_TOML`` (none when it is unset)."""
    specs = []
    for p in filter(None, os.environ.get(ENV, "").split(os.pathsep)):
        specs.extend(foreign_specs(p))
    return specs


def _env_engines() -> list[EngineSpec]:
    """``ENGINES`` of this member module: the adapters of third-party engines (built or
    not, :mod:`.adapters`), then the TOML engines; a broken ``$LOB_ENGINES_TOML`` warns,
    never breaks the listing of every other engine."""
    import warnings

    from lob.engines.foreign.adapters import specs

    try:
        return specs() + env_specs()
    except ForeignEngineError as e:
        warnings.warn(f"${ENV} ignored: {e}", RuntimeWarning, stacklevel=3)
        return specs()


def __getattr__(name: str):
    if name == "ENGINES":  # read when the registry collects its members
        return _env_engines()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ABI_VERSION", "ENV", "HEADER", "EngineSpec", "ForeignEngine", "ForeignEngineError",
           "HarnessForeignEngine", "Library", "TimedForeignEngine", "env_specs", "foreign_specs",
           "load", "open_engine"]

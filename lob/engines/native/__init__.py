"""lob's own native engines: C++ sources in this folder, built with g++ -O3 into lob's cache
on first use and driven through lob's C ABI (``lob_engine.h``) like any foreign engine.

An engine here is a row of :data:`NATIVE`: a registered name, a source file of this folder,
the ``-D`` defines it is compiled with, its parent (the registered engine it is one step
from), its toggles (the mechanism each define selects) and a description. A family of
variants is one source with compile-time toggles, so each registered step changes exactly
one define, hence one toggle. The first family is seed 001's lineage (``s001_book.cpp``,
the C++ binary-market engine written by lob from the seed's description of its design):

==================  =====================================  ================
name                toggles (levels, best, fok)            parent
==================  =====================================  ================
``v0@cpp``          list, scan, full                       -
``v0+pool@cpp``     pool, scan, full                       ``v0@cpp``
``v0+bitmap@cpp``   list, bitmap, full                     ``v0@cpp``
``v1@cpp``          pool, bitmap, full                     ``v0+pool@cpp``
``v2@cpp``          pool, bitmap, early_exit               ``v1@cpp``
==================  =====================================  ================

The second family is orderbook-rs's mechanisms (seed 000, ``s000_book.cpp``): full lob
semantics (every order type, modify, mass cancel of every scope, every STP mode) on a plain
base, with one toggle per mechanism the seed credits for its tails and allocations. The chain
adds one at a time, so a table can say which one makes a tail:

================================  ==============================================  ===========
name                              toggles (orders, levels, level_objects, index)  parent
================================  ==============================================  ===========
``ladder@cpp``                    pool, ladder, inline, flat                      -
``ladder+heap@cpp``               heap, ladder, inline, flat                      the above
``skiplist+heap@cpp``             heap, skiplist, inline, flat                    the above
``skiplist+heap+levelobj@cpp``    heap, skiplist, refcounted, flat                the above
``orderbook_rs@cpp``              heap, skiplist, refcounted, sharded             the above
================================  ==============================================  ===========

Every native library is linked with lob's allocation counter
(:mod:`lob.engines.foreign.counting`): it counts its own code's malloc / free / new / delete
calls, which :func:`lob.measure.alloc.count_allocations` reads (the seed's definition).

Building: :func:`build` compiles one engine into ``<cache>/native/<name>-<key>/`` where the
key hashes the source, ``lob_engine.h``'s declarations and the flags and defines (a changed
source, header or flag is a new folder: never a stale library), writing to a temporary file
and renaming it into place (a concurrent build never sees half a file). ``lob engines
warm`` builds them all. Without a C++ compiler the engines are not registered; ``lob
engines`` lists them as not built with the one-line reason, and asking for one by name says
it (:func:`not_built_hint`).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from lob.engines.base import EngineSpec
from lob.engines.foreign import counting
from lob.engines.foreign.adapters import BuildError, BuildUnavailable, compiler
from lob.engines.foreign.library import HEADER, cache_dir, header_declarations, identity, load

HERE = Path(__file__).resolve().parent
CXXFLAGS = ("-std=c++17", "-O3", "-DNDEBUG", "-fPIC", "-shared")
BACKEND = "cpp"
SOURCE = "lob.engines.native"  # the registry's source of these engines (not lob's full set)


@dataclass(frozen=True, eq=False)
class Native:
    """One native engine: a source of this folder compiled with ``defines``."""

    name: str
    source: str  # file name in this folder
    defines: tuple[tuple[str, int], ...]
    parent: str | None
    toggles: dict = field(default_factory=dict)
    description: str = ""

    @property
    def path(self) -> Path:
        return HERE / self.source

    def flags(self) -> list[str]:
        return [*CXXFLAGS, *(f"-D{k}={v}" for k, v in self.defines)]

    def key(self) -> str:
        """Hash of the source, the header's declarations, the allocation counter's source
        and the flags (the counter's link flags included)."""
        h = hashlib.sha256()
        h.update(self.path.read_bytes())
        h.update(header_declarations().encode())
        h.update(counting.SOURCE.read_bytes())
        h.update(" ".join([*self.flags(), *counting.WRAPPED]).encode())
        return h.hexdigest()[:12]

    @property
    def library(self) -> Path:
        stem = self.name.replace("@", "_").replace("+", "_")
        return cache_dir() / "native" / f"{stem}-{self.key()}" / f"liblob_{stem}.so"


def _s001(name: str, levels: str, best: str, fok: str, parent: str | None,
          step: str) -> Native:
    defines = (("LOB_LEVELS_POOL", int(levels == "pool")),
               ("LOB_BEST_BITMASK", int(best == "bitmap")),
               ("LOB_FOK_EARLY", int(fok == "early_exit")))
    return Native(name, "s001_book.cpp", defines, parent,
                  {"levels": levels, "best": best, "fok": fok}, f"C++ seed-001 lineage: {step}")


# toggle name -> the values the s001 family implements (its first value: v0's)
S001_TOGGLES = {"levels": ("list", "pool"), "best": ("scan", "bitmap"),
                "fok": ("full", "early_exit")}

# toggle name -> (its -D define, the values the s000 family implements: the base's first)
S000_TOGGLES = {"orders": ("LOB_HEAP_ORDERS", ("pool", "heap")),
                "levels": ("LOB_SKIPLIST", ("ladder", "skiplist")),
                "level_objects": ("LOB_LEVEL_OBJECTS", ("inline", "refcounted")),
                "index": ("LOB_SHARDED_INDEX", ("flat", "sharded"))}


def _s000(name: str, parent: str | None, step: str, **toggles: str) -> Native:
    defines = tuple((d, vals.index(toggles[t])) for t, (d, vals) in S000_TOGGLES.items())
    return Native(name, "s000_book.cpp", defines, parent, dict(toggles),
                  f"orderbook-rs's mechanisms in C++: {step}")

NATIVE: dict[str, Native] = {n.name: n for n in (
    _s001("v0@cpp", "list", "scan", "full", None,
          "v0: per side an array of 100 std::list<Order> (a heap node per order), an "
          "unordered_map cancel index, best price by a linear scan at each match step, FOK "
          "availability summing every crossing order"),
    _s001("v0+pool@cpp", "pool", "scan", "full", "v0@cpp",
          "v0 with its levels in a pre-allocated node pool (int32 links, a free list)"),
    _s001("v0+bitmap@cpp", "list", "bitmap", "full", "v0@cpp",
          "v0 with the best price from a two-word non-empty-level bitmask (clz / ctz)"),
    _s001("v1@cpp", "pool", "bitmap", "full", "v0+pool@cpp",
          "v1 = pool + bitmask (the seed's v1)"),
    _s001("v2@cpp", "pool", "bitmap", "early_exit", "v1@cpp",
          "v2 = v1 + the FOK availability scan stopping once it reaches the FOK's quantity"),
    _s000("ladder@cpp", None,
          "the plain base: an array ladder of levels over the band (best index cached), "
          "orders in a node pool, a flat array id index",
          orders="pool", levels="ladder", level_objects="inline", index="flat"),
    _s000("ladder+heap@cpp", "ladder@cpp",
          "+ one heap allocation per order (new on rest, delete on fill or cancel)",
          orders="heap", levels="ladder", level_objects="inline", index="flat"),
    _s000("skiplist+heap@cpp", "ladder+heap@cpp",
          "+ price levels in a skip list of pointers (SkipMap) instead of the ladder",
          orders="heap", levels="skiplist", level_objects="inline", index="flat"),
    _s000("skiplist+heap+levelobj@cpp", "skiplist+heap@cpp",
          "+ level objects allocated when a level appears and freed when it empties, "
          "reference-counted (Arc<PriceLevel>)",
          orders="heap", levels="skiplist", level_objects="refcounted", index="flat"),
    _s000("orderbook_rs@cpp", "skiplist+heap+levelobj@cpp",
          "+ the order index in 64 shards of open-addressing maps, a lock per shard (DashMap): "
          "all four of orderbook-rs's mechanisms",
          orders="heap", levels="skiplist", level_objects="refcounted", index="sharded"),
)}


def native(name: str) -> Native:
    try:
        return NATIVE[name]
    except KeyError:
        raise ValueError(f"no native engine named {name!r}; native engines: "
                         f"{', '.join(NATIVE)}") from None


def build(name: str, *, force: bool = False) -> Path:
    """The library of native engine ``name``, compiled first if it is not in the cache.
    :class:`BuildUnavailable` without a compiler; a failed compile raises
    :class:`BuildError` with the compiler's first errors."""
    n = native(name)
    lib = n.library
    if lib.is_file() and not force and _as_built(lib):
        return lib
    cxx = compiler()
    try:
        lib.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=lib.parent, prefix=".part-", suffix=".so")
    except OSError as e:  # LOB_CACHE a file, read-only, full
        raise BuildUnavailable(f"cannot build native engine {name!r} into {lib.parent} "
                               f"({e.strerror or e}): point $LOB_CACHE at a writable folder"
                               ) from None
    os.close(fd)
    try:
        cmd = [cxx, *n.flags(), f"-I{HEADER.parent}", str(n.path), *counting.link_args(),
               "-o", tmp]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            first = "\n".join(r.stderr.splitlines()[:15])
            raise BuildError(f"compiling native engine {name!r} failed:\n"
                                     f"{' '.join(cmd)}\n{first}")
        _record(Path(tmp), lib)
        os.replace(tmp, lib)  # atomic: a concurrent build never sees half a file
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return lib


def _record(built: Path, lib: Path) -> None:
    """What this build wrote (its sha256), beside the library: :func:`_as_built` checks it."""
    from lob.paths import file_sha256

    lib.with_name(lib.name + ".sha256").write_text(file_sha256(built) + "\n")


def _as_built(lib: Path) -> bool:
    """The cached library is the file lob's build wrote (a library replaced or damaged in the
    cache is rebuilt, never loaded); a library built before the record existed is trusted."""
    from lob.paths import file_sha256

    rec = lib.with_name(lib.name + ".sha256")
    try:
        st = lib.stat()
        key = (str(lib), st.st_ino, st.st_size, st.st_mtime_ns)
        if key in _VERIFIED:  # checked already, unchanged since
            return True
        want = rec.read_text().strip()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        ok = file_sha256(lib) == want
    except OSError:
        return False
    if ok:
        _VERIFIED.add(key)
    return ok


_VERIFIED: set = set()


def build_all(force: bool = False) -> dict[str, Path]:
    """Every native engine built (``lob engines warm``); :class:`BuildUnavailable` without
    a compiler."""
    return {name: build(name, force=force) for name in NATIVE}


def unavailable() -> str | None:
    """Why native engines that are not built yet cannot be built here, else None."""
    try:
        compiler()
        return None
    except BuildUnavailable as e:
        return str(e)


def not_built_hint(name: str) -> str | None:
    """The one line to say when ``name`` is a native engine that cannot be built, else None."""
    if name not in NATIVE or NATIVE[name].library.is_file():
        return None
    why = unavailable()
    return None if why is None else (f"engine {name!r} is lob's C++ build and is not built: "
                                     f"{why}")


def unbuilt() -> list[str]:
    """Native engines neither built nor buildable here (so not registered)."""
    why = unavailable()
    return [] if why is None else [n for n, e in NATIVE.items() if not e.library.is_file()]


def _factory(n: Native):
    def make(config=None):
        from lob.engines.foreign.engine import open_engine

        return open_engine(build(n.name), config, n.name)

    make.__qualname__ = f"native[{n.name}]"
    make.capabilities = lambda: load(build(n.name), n.name).caps
    make.library = lambda: identity(n.library)
    return make


def specs() -> list[EngineSpec]:
    """One registered engine per native engine that is built or can be built here."""
    missing = set(unbuilt())
    return [EngineSpec(n.name, _factory(n), n.description, backend=BACKEND,
                       toggles=dict(n.toggles), parent=n.parent, source=SOURCE)
            for n in NATIVE.values() if n.name not in missing]


def __getattr__(name: str):
    if name == "ENGINES":  # read when the registry collects its members
        return specs()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["BACKEND", "CXXFLAGS", "NATIVE", "S000_TOGGLES", "S001_TOGGLES", "BuildError",
           "BuildUnavailable", "Native", "build", "build_all", "native", "not_built_hint",
           "specs", "unavailable", "unbuilt"]

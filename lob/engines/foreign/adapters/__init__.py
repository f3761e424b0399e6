"""Engines lob did not write, driven through lob's C ABI by a shim kept here.

An adapter is a shim source file in this folder (``<name>.cpp``, implementing
``lob_engine.h`` over the engine's own API) plus where the engine comes from. Nothing of
the third-party engine is in lob's repository: :func:`build` fetches its source
distribution with pip (``pip download --no-deps --no-binary :all: pkg==version``, checked
against a pinned SHA-256) into lob's cache folder, compiles the shim against its headers
and keeps its LICENSE and notices beside the library::

    lob engines build orderly_chaos        # or: python -m lob.engines.foreign.adapters

The engine is registered once built (``lob engines`` then lists it; before, it names the
adapters not built yet, and ``lob.get_engine`` of one says the one command to run). A
missing C++ compiler or an unreachable package index raises :class:`BuildUnavailable` (one
line; the tests skip on it), a failed compile :class:`BuildError` with the compiler's first
errors.

The cache folder is ``$LOB_CACHE`` or ``~/.cache/lob``; each build sits in a folder named by
the engine, its version and a hash of the shim, ``lob_engine.h`` and the flags, so a changed
shim or ABI is rebuilt, never loaded stale.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from lob.engines.base import EngineSpec
from lob.engines.foreign.library import (
    HEADER,
    ForeignEngineError,
    cache_dir,
    header_declarations,
    identity,
    load,
)

HERE = Path(__file__).resolve().parent
CXXFLAGS = ("-std=c++17", "-O2", "-fPIC", "-shared")


class BuildUnavailable(ForeignEngineError):
    """The build cannot run here: no C++ compiler, or the package index is unreachable."""


class BuildError(ForeignEngineError):
    """The build ran and failed (download checksum, extraction or compilation)."""


@dataclass(frozen=True)
class Adapter:
    """A third-party engine behind a shim of this folder."""

    name: str  # the registered engine name
    package: str  # on PyPI
    version: str
    sha256: str  # of the sdist
    description: str
    includes: tuple[str, ...]  # include dirs inside the sdist
    licenses: tuple[str, ...]  # files of the sdist kept beside the library

    @property
    def shim(self) -> Path:
        return HERE / f"{self.name}.cpp"

    @property
    def sdist_name(self) -> str:
        return f"{self.package.replace('-', '_')}-{self.version}"

    def key(self) -> str:
        """Hash of the shim, the header's declarations (comments and spacing left out: a
        documentation edit does not rebuild) and the flags."""
        h = hashlib.sha256()
        h.update(self.shim.read_bytes())
        h.update(header_declarations().encode())
        h.update(" ".join(CXXFLAGS).encode())
        return h.hexdigest()[:12]

    @property
    def build_dir(self) -> Path:
        return cache_dir() / "engines" / f"{self.name}-{self.version}-{self.key()}"

    @property
    def library(self) -> Path:
        return self.build_dir / f"liblob_{self.name}.so"


ADAPTERS = {
    "orderly_chaos": Adapter(
        name="orderly_chaos", package="orderly-chaos", version="0.2.0",
        sha256="1be36c35cad840ad7fcde7ea21b97a7c319e8af9e9a23d9277c9661b32795ba9",
        description="orderly-chaos 0.2.0 (PyPI, MIT): a C++ price-time book (std::map levels, "
                    "unordered_map ids) through its C API; lob's order types emulated in a "
                    "shim; STP NONE only",
        includes=("include", "src", "third_party/robin_map/include"),
        licenses=("LICENSE", "THIRD_PARTY_NOTICES.md", "third_party/robin_map/LICENSE")),
}


def adapter(name: str) -> Adapter:
    try:
        return ADAPTERS[name]
    except KeyError:
        raise ValueError(f"no adapter named {name!r}; adapters: {', '.join(ADAPTERS)}") from None


def compiler() -> str:
    """The C++ compiler (``$CXX`` or g++), or :class:`BuildUnavailable` saying it is missing."""
    cxx = os.environ.get("CXX") or "g++"
    path = shutil.which(cxx)
    if path is None:
        raise BuildUnavailable(f"no C++ compiler: {cxx!r} not found (install g++ or set CXX)")
    return path


def _pip_cause(text: str) -> str:
    """The cause in pip's output, not its boilerplate: a build dependency it could not get
    (pip prepares an sdist's metadata, which installs the build backend first), else the
    first ERROR line."""
    missing = re.findall(r"No matching distribution found for (\S+)", text)
    if "install build dependencies" in text:
        dep = f" {missing[0]}" if missing else ""
        return (f"pip reached the sdist but could not get its build dependency{dep} "
                "(offline, or no package index holds it), which pip installs to read the "
                "sdist's metadata")
    errors = [x.strip() for x in text.splitlines() if x.strip().startswith("ERROR:")]
    lines = [x.strip() for x in text.splitlines() if x.strip()]
    last = errors[-1] if errors else lines[-1] if lines else "pip failed"
    return f"pip could not download it (offline or no package index?): {last}"


def _sdist(a: Adapter, log) -> Path:
    """The verified sdist in the cache, downloaded with pip when missing."""
    dest = cache_dir() / "sdists"
    path = dest / f"{a.sdist_name}.tar.gz"
    if path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == a.sha256:
        return path
    dest.mkdir(parents=True, exist_ok=True)
    log(f"fetching {a.package}=={a.version} (sdist) with pip")
    with tempfile.TemporaryDirectory(dir=dest) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
               "--disable-pip-version-check", "-q", "-d", tmp, f"{a.package}=={a.version}"]
        workaround = (f"; to build offline, put the pinned sdist {a.sdist_name}.tar.gz "
                      f"(sha256 {a.sha256}) into {dest} (fetched where the index is "
                      f"reachable: pip download --no-deps --no-binary :all: "
                      f"{a.package}=={a.version}) and run the build again")
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            raise BuildUnavailable(f"cannot fetch {a.package}=={a.version}: pip download took "
                                   f"over 300 s (package index unreachable?)"
                                   + workaround) from None
        got = list(Path(tmp).glob(f"{a.sdist_name}.tar.gz"))
        if r.returncode != 0 or not got:
            raise BuildUnavailable(f"cannot fetch {a.package}=={a.version}: "
                                   f"{_pip_cause(r.stdout + chr(10) + r.stderr)}" + workaround)
        digest = hashlib.sha256(got[0].read_bytes()).hexdigest()
        if digest != a.sha256:
            raise BuildError(f"{got[0].name} from the package index has SHA-256 {digest}, "
                             f"expected {a.sha256}: not the release this adapter was written for")
        os.replace(got[0], path)
    return path


def build(name: str = "orderly_chaos", *, force: bool = False, log=None) -> Path:
    """Build adapter ``name`` (fetching its sdist if needed); returns the library path.

    Raises :class:`BuildUnavailable` (no compiler, no package index) or :class:`BuildError`.
    """
    a = adapter(name)
    log = log or (lambda msg: None)
    lib = a.library
    if lib.is_file() and not force:
        return lib
    cxx = compiler()
    sdist = _sdist(a, log)
    out = a.build_dir
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out) as tmp:
        try:
            with tarfile.open(sdist) as tar:
                tar.extractall(tmp, filter="data")
        except (tarfile.TarError, OSError) as e:
            raise BuildError(f"cannot extract {sdist}: {e}") from None
        src = Path(tmp) / a.sdist_name
        lic = out / "licenses"
        lic.mkdir(exist_ok=True)
        for f in a.licenses:  # the MIT terms travel with the built library
            shutil.copyfile(src / f, lic / f.replace("/", "_"))
        tmp_lib = Path(tmp) / lib.name
        cmd = [cxx, *CXXFLAGS, f"-I{HEADER.parent}", *(f"-I{src / d}" for d in a.includes),
               str(a.shim), "-o", str(tmp_lib)]
        log(f"compiling {a.shim.name} against {a.sdist_name}")
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            first = "\n".join(r.stderr.splitlines()[:15])
            raise BuildError(f"compiling adapter {name!r} failed:\n{' '.join(cmd)}\n{first}")
        os.replace(tmp_lib, lib)  # atomic: a concurrent build never sees half a file
    log(f"built {lib}")
    return lib  # the registry finds it on the next lookup of its name


def _factory(a: Adapter):
    def make(config=None):
        from lob.engines.foreign.engine import open_engine

        return open_engine(_built(a), config, a.name)

    make.__qualname__ = f"adapter[{a.name}]"
    make.capabilities = lambda: load(_built(a), a.name).caps
    make.library = lambda: identity(a.library)
    return make


def _built(a: Adapter) -> Path:
    hint = not_built_hint(a.name)
    if hint:
        raise ForeignEngineError(hint)
    return a.library


def specs() -> list[EngineSpec]:
    """One registered engine per built adapter."""
    return [EngineSpec(a.name, _factory(a), a.description, backend="foreign",
                       source=f"{a.package} {a.version} (adapter)")
            for a in ADAPTERS.values() if a.library.is_file()]


def unbuilt() -> list[str]:
    """Adapters not built yet (so not registered)."""
    return [a.name for a in ADAPTERS.values() if not a.library.is_file()]


def not_built_hint(name: str) -> str | None:
    """The one line to say when ``name`` is an adapter that is not built, else None."""
    a = ADAPTERS.get(name)
    if a is None or a.library.is_file():
        return None
    return (f"engine {name!r} is not built yet: run `lob engines build {name}` (fetches "
            f"{a.package} {a.version} from PyPI with pip and compiles lob's shim with g++)")


SHIM_STATS = ("walks", "depth_pages", "depth_levels", "market_pieces", "readds", "reduces",
              "live_scanned", "compactions")


def shim_stats(eng) -> dict | None:
    """The shim's counters (``oc_shim_stats``, outside the ABI) of an engine built from an
    adapter that exports them, else None."""
    import ctypes

    lib = getattr(eng, "_lib", None)
    if lib is None or not hasattr(lib._dll, "oc_shim_stats"):
        return None
    f = lib._dll.oc_shim_stats
    f.restype, f.argtypes = ctypes.c_int64, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    buf = (ctypes.c_int64 * len(SHIM_STATS))()
    n = f(eng._handle, buf, len(SHIM_STATS))
    return dict(zip(SHIM_STATS, list(buf)[:n], strict=False))


def native_replay(name: str):
    """``run(cmds, durations) -> trades``: the adapter's native driver (``oc_raw_replay``,
    outside the ABI): the same commands straight to the wrapped engine's own API, each
    duration (ns) written into ``durations`` (int64, one per command)."""
    import ctypes

    lib = load(adapter(name).library, name)
    raw = lib._dll.oc_raw_replay
    raw.restype = ctypes.c_int64
    raw.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p]

    def run(cmds, durations) -> int:
        k = ctypes.c_int64()
        return int(raw(cmds.ctypes.data, len(cmds), durations.ctypes.data, ctypes.byref(k)))

    return run


__all__ = ["ADAPTERS", "SHIM_STATS", "Adapter", "BuildError", "BuildUnavailable", "adapter",
           "compiler",
           "build", "cache_dir", "native_replay", "not_built_hint", "shim_stats", "specs",
           "unbuilt"]

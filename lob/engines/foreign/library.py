"""Loading a foreign engine library (``lob_engine.h``) with ``ctypes``, and guarded buffers.

Why ctypes and not cffi: ctypes is in the standard library and needs no build step (cffi's
fast mode compiles a module per library, its ABI mode is ctypes with a C parser on top);
the ABI is six functions over flat arrays, so numpy arrays go across as plain pointers and
each call replays a whole batch: the per-call cost of ctypes (~1 us) never sits inside a
timed region, since the engine times itself with its own clock (``lob_replay_timed``).

Every check happens at load time and fails with :class:`ForeignEngineError`, a message
that names the library and says what to do: missing file, not a loadable library, missing
symbol, ABI version mismatch, record size mismatch. Output buffers carry a guard region
filled with a canary pattern, verified after every call (:class:`GuardedArray`).
"""

from __future__ import annotations

import ctypes
import mmap
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from lob.engines.foreign.counting import NativeAllocCounter
from lob.paths import file_sha256
from lob.semantics import COMMAND_DTYPE, FILL_DTYPE, MAX_PRICE, OUTCOME_DTYPE

ABI_VERSION = 2  # must equal LOB_ABI_VERSION in lob_engine.h
HEADER = Path(__file__).with_name("lob_engine.h")

LEVEL_DTYPE = np.dtype([("price", "i8"), ("qty", "i8"), ("count", "i8")])
ORDER_DTYPE = np.dtype([("id", "i8"), ("owner", "i8"), ("side", "i8"), ("price", "i8"),
                        ("qty", "i8")])

OK, NEED_FILL_SPACE, UNSUPPORTED = 0, 1, 2
ERRORS = {-1: "LOB_ERR_ARG (a NULL pointer or negative count)",
          -2: "LOB_ERR_NOMEM (the engine could not grow its memory)",
          -3: "LOB_ERR_ENGINE (the wrapped engine failed)"}

(STRUCT_COMMAND, STRUCT_OUTCOME, STRUCT_FILL, STRUCT_LEVEL, STRUCT_CONFIG, STRUCT_ORDER,
 STRUCT_CAPS) = range(7)


class ForeignEngineError(RuntimeError):
    """A foreign engine library cannot be used, or misbehaved during a call."""


class Config(ctypes.Structure):
    _fields_ = [("min_price", ctypes.c_int64), ("max_price", ctypes.c_int64),
                ("stp", ctypes.c_int32), ("reserved", ctypes.c_int32)]


class Caps(ctypes.Structure):
    _fields_ = [("stp_modes", ctypes.c_uint32), ("order_types", ctypes.c_uint32),
                ("kinds", ctypes.c_uint32), ("scopes", ctypes.c_uint32),
                ("max_band_width", ctypes.c_int64), ("reserved", ctypes.c_int64 * 4)]


EXPECTED_SIZES = {  # record -> (LOB_STRUCT_* constant, size lob uses)
    "lob_command": (STRUCT_COMMAND, COMMAND_DTYPE.itemsize),
    "lob_outcome": (STRUCT_OUTCOME, OUTCOME_DTYPE.itemsize),
    "lob_fill": (STRUCT_FILL, FILL_DTYPE.itemsize),
    "lob_level": (STRUCT_LEVEL, LEVEL_DTYPE.itemsize),
    "lob_config": (STRUCT_CONFIG, ctypes.sizeof(Config)),
    "lob_order": (STRUCT_ORDER, ORDER_DTYPE.itemsize),
    "lob_caps": (STRUCT_CAPS, ctypes.sizeof(Caps)),
}

_p, _i32, _i64 = ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64
_REPLAY_ARGS = [_p, _p, _i64, _p, _p, _i64, _p, _p]
REQUIRED = {
    "lob_abi_version": (ctypes.c_uint32, []),
    "lob_struct_size": (_i64, [_i32]),
    "lob_capabilities": (_i32, [_p]),
    "lob_create": (_p, [_p, _p, _i64]),  # message buffers: guarded (message_buffer)
    "lob_destroy": (None, [_p]),
    "lob_replay": (_i32, _REPLAY_ARGS),
    "lob_snapshot": (_i64, [_p, _i32, _i64, _p]),
}
OPTIONAL = {
    "lob_replay_timed": (_i32, [*_REPLAY_ARGS, _p]),
    "lob_clock_samples": (None, [_p, _i64]),
    "lob_check": (_i32, [_p, _p, _i64]),
    "lob_resting": (_i64, [_p, _p, _i64]),
    "lob_last_error": (_i64, [_p, _p, _i64]),
}


def cache_dir() -> Path:
    """lob's cache (:func:`lob.paths.cache_dir`: ``$LOB_CACHE``, else ``~/.cache/lob``)."""
    from lob.paths import cache_dir as lob_cache

    return lob_cache()




def header_declarations() -> str:
    """``lob_engine.h`` without comments and with spacing folded: what a library built
    against it depends on (a documentation edit of the header rebuilds nothing)."""
    import re

    code = re.sub(r"/\*.*?\*/|//[^\n]*", "", HEADER.read_text(), flags=re.S)
    return " ".join(code.split())


def identity(path: str | os.PathLike) -> dict:
    """``{"path": absolute path, "sha256": content hash or None if missing}`` of a library
    file, without loading it."""
    p = Path(path).resolve()
    try:
        return {"path": str(p), "sha256": file_sha256(p)}
    except OSError:
        return {"path": str(p), "sha256": None}


PIN_ENV = "LOB_FOREIGN_PINNED"  # JSON {absolute path: sha256}: the libraries a run may load
KEEP_LOADED = 32  # copies kept in $LOB_CACHE/loaded/ beyond those used in the last week
_WEEK_S = 7 * 86400


def pinned() -> dict[str, str]:
    """The libraries this process may load, by path (``$LOB_FOREIGN_PINNED``, set by the
    experiment runner for a notebook's kernel): ``{}`` when unset."""
    import json

    try:
        pins = json.loads(os.environ.get(PIN_ENV) or "{}")
    except ValueError:
        return {}
    return pins if isinstance(pins, dict) else {}


def _content_copy(path: Path, label: str) -> tuple[Path, str]:
    """A copy of ``path`` named by the hash of the bytes copied (``(copy, sha256)``).

    The bytes are read once: copied to a temporary file, and the copy is hashed (a file
    swapped while it is read can never be filed under another file's hash). An existing
    copy of that hash is reused only once its own bytes hash to its name; one that does not
    (a copy altered in the cache) is replaced, with a warning. Loading the copy, not
    ``path``, is what makes a library rebuilt in place load as the new code: the dynamic
    loader returns the mapping it already has for a path (or inode) it has opened, so
    ``dlopen`` of a rewritten file in the same process would run the old code."""
    import warnings

    root = cache_dir() / "loaded"
    root.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=root, prefix=".part-")
    os.close(fd)
    try:
        shutil.copyfile(path, tmp)
        digest = file_sha256(tmp)
        d = root / digest[:24]
        dest = d / path.name
        if dest.is_file():
            if file_sha256(dest) == digest:
                os.utime(d)  # in use: kept by the pruning
                return dest, digest
            warnings.warn(f"foreign engine {label!r}: the cached copy {dest} no longer holds "
                          f"the bytes its name says (sha256 {digest[:16]}...); replaced by a "
                          f"fresh copy of {path}", RuntimeWarning, stacklevel=3)
        d.mkdir(exist_ok=True)
        os.replace(tmp, dest)
        os.utime(d)
        _prune(root, keep=d)
        return dest, digest
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _drop_copy(dest: Path) -> None:
    """Remove a copy that did not load (not a library): nothing is kept for it."""
    shutil.rmtree(dest.parent, ignore_errors=True)


def _prune(root: Path, keep: Path) -> None:
    """Keep ``loaded/`` small: of the copies not used in the last week, all but the newest
    :data:`KEEP_LOADED` go (a process that has one loaded keeps its mapping)."""
    import time

    try:
        dirs = sorted((p for p in root.iterdir() if p.is_dir() and p != keep),
                      key=lambda p: p.stat().st_mtime, reverse=True)
    except OSError:
        return
    old = time.time() - _WEEK_S
    for p in dirs[KEEP_LOADED:]:
        try:
            if p.stat().st_mtime < old:
                shutil.rmtree(p, ignore_errors=True)
        except OSError:
            pass


class Library:
    """A loaded, checked foreign engine library: its functions as ctypes callables.

    ``path`` is the file named by the user; ``sha256`` the hash of the bytes that run (the
    library is loaded from a copy named by that hash, verified before it is loaded). Under
    ``$LOB_FOREIGN_PINNED`` (a run's kernel) a file whose bytes differ from the pin is
    refused: a library replaced during a run never joins it."""

    def __init__(self, path: str | os.PathLike, label: str | None = None):
        path = Path(path)
        self.path = path
        self.label = label or path.name
        if not path.is_file():
            raise ForeignEngineError(
                f"foreign engine {self.label!r}: library file {path} does not exist "
                f"(build it first, e.g. `make -C examples/c_engine` for the example engine, "
                f"or fix `path` in its TOML)")
        try:
            self.loaded_from, self.sha256 = _content_copy(path, self.label)
        except OSError as e:
            raise ForeignEngineError(
                f"foreign engine {self.label!r}: cannot copy {path} into lob's cache "
                f"({e})") from None
        want = pinned().get(str(path.resolve()))
        if want is not None and want != self.sha256:
            raise ForeignEngineError(
                f"foreign engine {self.label!r}: {path} changed during the run (sha256 "
                f"{want[:16]}... when the run started, {self.sha256[:16]}... now); a run "
                f"measures one build: rerun it once the library stays put")
        try:
            self._dll = ctypes.CDLL(str(self.loaded_from))
        except OSError as e:
            _drop_copy(self.loaded_from)
            raise ForeignEngineError(
                f"foreign engine {self.label!r}: {path} is not a loadable shared library "
                f"({e})") from None
        if hasattr(self._dll, "lob_abi_version"):  # an older build: say so before anything
            f = self._dll.lob_abi_version
            f.restype, f.argtypes = ctypes.c_uint32, []
            self._check_version(int(f()))
        missing = [s for s in REQUIRED if not hasattr(self._dll, s)]
        if missing:
            raise ForeignEngineError(
                f"foreign engine {self.label!r}: {path} does not export "
                f"{', '.join(missing)} (required by lob_engine.h: {', '.join(REQUIRED)}); "
                f"declare them extern \"C\" and not static")
        for sym, (res, args) in {**REQUIRED, **OPTIONAL}.items():
            if hasattr(self._dll, sym):
                f = getattr(self._dll, sym)
                f.restype, f.argtypes = res, args
                setattr(self, sym[4:], f)
            else:
                setattr(self, sym[4:], None)
        self.alloc_counter = NativeAllocCounter.of(self._dll)  # None unless linked in
        bad = []
        for name, (which, size) in EXPECTED_SIZES.items():
            theirs = int(self.struct_size(which))
            if theirs != size:
                bad.append(f"{name} is {theirs} bytes in the library, {size} in lob")
        if bad:
            raise ForeignEngineError(
                f"foreign engine {self.label!r}: record layout mismatch in {path}: "
                f"{'; '.join(bad)} (the records must be packed, in lob_engine.h's field "
                f"order: #pragma pack(push, 1))")

        caps = Caps()
        if self.capabilities(ctypes.byref(caps)) != 0:
            raise ForeignEngineError(f"foreign engine {self.label!r}: lob_capabilities "
                                     f"failed in {path}")
        lo, hi = int(caps.reserved[0]), int(caps.reserved[1])  # the band's price range
        bad = ("no SUBMIT" if not caps.kinds & 1 else
               "a negative max_band_width" if caps.max_band_width < 0 else
               f"an impossible price range {lo}..{hi} (reserved[0..1]: 0 or 1 <= lowest <= "
               f"highest <= {MAX_PRICE:,})"
               if lo < 0 or hi < 0 or hi > MAX_PRICE or (lo and hi and lo > hi) else None)
        if bad:
            raise ForeignEngineError(
                f"foreign engine {self.label!r}: lob_capabilities of {path} declares {bad}")
        from lob.engines.capabilities import Capabilities

        self.caps = Capabilities.from_bits(caps.stp_modes, caps.order_types, caps.kinds,
                                           caps.scopes, caps.max_band_width, lo, hi)

    def _check_version(self, got: int) -> None:
        if got != ABI_VERSION:
            raise ForeignEngineError(
                f"foreign engine {self.label!r}: {self.path} was built for lob engine ABI "
                f"version {got}, this lob speaks version {ABI_VERSION}; rebuild it against "
                f"lob/engines/foreign/lob_engine.h of this lob (version 2 added "
                f"lob_capabilities, lob_create's error message and LOB_UNSUPPORTED)")

    @property
    def identity(self) -> dict:
        """Which library this is: ``{"path": ..., "sha256": ...}`` (for run ids, summaries);
        the hash is of the bytes loaded."""
        return {"path": str(self.path.resolve()), "sha256": self.sha256}

    @property
    def timed(self) -> bool:
        return self.replay_timed is not None

    def error_message(self, handle) -> str:
        """The book's last error message (``lob_last_error``), or "" without one."""
        if self.last_error is None or not handle:
            return ""
        from lob.engines.foreign import crash

        buf = message_buffer(1024)
        m = crash.enter(self.label, "lob_last_error", 0, 0)
        self.last_error(handle, buf.addr, buf.cap)
        crash.leave(m)
        return message_text(buf, self.label, "lob_last_error message")


_LOADED: dict[tuple[str, int, int, int], Library] = {}


def load(path: str | os.PathLike, label: str | None = None) -> Library:
    """The checked library at ``path``: loaded again whenever the file changed (its size,
    inode or mtime in ns, then its content hash), from a copy named by that hash."""
    p = Path(path)
    try:
        st = p.stat()
        key = (str(p.resolve()), st.st_ino, st.st_size, st.st_mtime_ns)
    except OSError:
        return Library(p, label)  # raises the missing-file error
    lib = _LOADED.get(key)
    if lib is None:
        lib = _LOADED[key] = Library(p, label)
    return lib


# --- guarded output buffers ---------------------------------------------------------------

CANARY = np.frombuffer(b"\xa5\x5a\xc3\x3c\x0f\xf0\x96\x69", dtype=np.uint8)
GUARD_BYTES = 4096
GUARD = np.resize(CANARY, GUARD_BYTES)
_GUARD_BYTES_STR = GUARD.tobytes()
FENCE_BYTES = 64 << 20  # inaccessible address space after the canary (no memory used)
_PAGE = mmap.PAGESIZE
try:
    _libc = ctypes.CDLL(None, use_errno=True)
    _mprotect = _libc.mprotect
    _mprotect.argtypes, _mprotect.restype = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int], \
        ctypes.c_int
except (OSError, AttributeError):  # not a POSIX libc: canary only
    _mprotect = None


class GuardedArray:
    """A numpy record array of ``cap`` rows followed by a canary-filled guard region, then
    (on POSIX) a fence of ``FENCE_BYTES`` of address space that cannot be written.

    ``check(what)`` verifies the canary after a foreign call: a write up to 4 KiB past
    ``cap`` rows raises :class:`ForeignEngineError`. A longer run of writes past the end
    reaches the fence and stops the engine with SIGSEGV at the first byte, before it can
    touch any other memory (reported as a crash of that engine, see :mod:`.crash`), instead
    of corrupting the heap silently.
    """

    def __init__(self, dtype: np.dtype, cap: int):
        self.dtype = np.dtype(dtype)
        self.cap = int(cap)
        nbytes = self.cap * self.dtype.itemsize
        used = nbytes + GUARD_BYTES
        if _mprotect is None:
            self.raw = np.empty(used, dtype=np.uint8)
        else:  # end the canary on a page boundary, the fence right after it
            pad = -used % _PAGE
            self._map = mmap.mmap(-1, pad + used + FENCE_BYTES,  # private: huge pages
                                  flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            if used >= 4 << 20 and hasattr(mmap, "MADV_HUGEPAGE"):
                self._map.madvise(mmap.MADV_HUGEPAGE, 0, pad + used)
            base = ctypes.addressof(ctypes.c_char.from_buffer(self._map))
            if _mprotect(base + pad + used, FENCE_BYTES, 0) != 0:  # PROT_NONE
                raise OSError(ctypes.get_errno(), "mprotect of the guard fence failed")
            self.raw = np.frombuffer(self._map, dtype=np.uint8, count=used, offset=pad)
        self.raw[:nbytes] = 0  # touch the pages here, not inside a timed call
        self.raw[nbytes:] = GUARD
        self.arr = self.raw[:nbytes].view(self.dtype)
        self.addr = self.raw.ctypes.data

    def ptr(self, row: int = 0) -> int:
        return self.addr + row * self.dtype.itemsize

    def check(self, label: str, what: str) -> None:
        g = self.raw[self.cap * self.dtype.itemsize:]
        if g.tobytes() != _GUARD_BYTES_STR:
            first = int(np.flatnonzero(g != GUARD)[0])
            raise ForeignEngineError(
                f"foreign engine {label!r} wrote past the end of the {what} buffer "
                f"({self.cap} records of {self.dtype.itemsize} bytes; the guard region after "
                f"it was overwritten from byte {first} on). The engine is broken: it must "
                f"never write beyond the capacity it is given; this process's memory may be "
                f"corrupted, restart it")

    def grown(self, cap: int, keep: int) -> GuardedArray:
        new = GuardedArray(self.dtype, cap)
        new.arr[:keep] = self.arr[:keep]
        return new


def message_buffer(size: int) -> GuardedArray:
    """A guarded buffer of ``size`` bytes for a message the engine writes (``lob_create``'s
    error, ``lob_check``'s, ``lob_last_error``'s): guarded like the fill buffers."""
    return GuardedArray(np.dtype(np.uint8), size)


def message_text(buf: GuardedArray, label: str, what: str) -> str:
    """The message an engine wrote into ``buf`` (up to its first NUL, or all of it), once
    the guard after it is checked (:class:`ForeignEngineError` if it was overrun)."""
    buf.check(label, what)
    raw = buf.arr.tobytes()
    return raw.split(b"\0", 1)[0].decode(errors="replace").strip()

"""The allocation counter of a native engine library (``alloc_count.c``, next to this file).

A library lob builds links ``alloc_count.c`` in with :func:`link_args`: every call its own
code makes to a C or C++ allocation function (:data:`WRAPPED`: malloc, calloc, realloc,
free, aligned_alloc, posix_memalign, every ``operator new`` / ``delete``) goes through a
counting wrapper first. The library then exports ``lob_alloc_reset`` and ``lob_alloc_read``
(outside the engine ABI); :class:`NativeAllocCounter` drives them, and
:func:`lob.measure.alloc.count_allocations` uses it instead of CPython's allocator hook
whenever the engine has one (``ForeignEngine.allocation_counter()``), so a native engine's
allocs/op and bytes/op are counted the way orderbook-rs's counting ``GlobalAlloc`` wrapper
counts: every allocation and free of the engine's code, and the bytes requested.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

SOURCE = Path(__file__).with_name("alloc_count.c")

# every C and C++ (Itanium ABI, 64-bit size_t) allocation symbol the counter wraps
WRAPPED = (
    "malloc", "calloc", "realloc", "free", "aligned_alloc", "posix_memalign",
    "_Znwm", "_Znam", "_ZnwmRKSt9nothrow_t", "_ZnamRKSt9nothrow_t",
    "_ZnwmSt11align_val_t", "_ZnamSt11align_val_t",
    "_ZnwmSt11align_val_tRKSt9nothrow_t", "_ZnamSt11align_val_tRKSt9nothrow_t",
    "_ZdlPv", "_ZdaPv", "_ZdlPvm", "_ZdaPvm", "_ZdlPvRKSt9nothrow_t", "_ZdaPvRKSt9nothrow_t",
    "_ZdlPvSt11align_val_t", "_ZdaPvSt11align_val_t",
    "_ZdlPvmSt11align_val_t", "_ZdaPvmSt11align_val_t",
    "_ZdlPvSt11align_val_tRKSt9nothrow_t", "_ZdaPvSt11align_val_tRKSt9nothrow_t",
)

SYMBOLS = {"lob_alloc_reset": (None, [ctypes.c_int32]),
           "lob_alloc_read": (None, [ctypes.c_void_p])}


def link_args() -> list[str]:
    """What to add to a g++ command that builds a shared library so that it counts its own
    allocations: the counter's source and one ``--wrap`` per allocation symbol."""
    return [str(SOURCE), *(f"-Wl,--wrap={s}" for s in WRAPPED)]


class NativeAllocCounter:
    """``start()`` zeroes the library's counters and turns counting on; ``stop()`` returns
    ``(allocs, reallocs, frees, bytes_alloc)`` since ``start()`` and turns it off."""

    def __init__(self, reset, read):
        self._reset, self._read = reset, read

    @classmethod
    def of(cls, dll) -> NativeAllocCounter | None:
        """The counter of a loaded ``ctypes.CDLL``, or None if it does not export one."""
        if not all(hasattr(dll, s) for s in SYMBOLS):
            return None
        fns = []
        for s, (res, args) in SYMBOLS.items():
            f = getattr(dll, s)
            f.restype, f.argtypes = res, args
            fns.append(f)
        return cls(*fns)

    def start(self) -> None:
        self._reset(1)

    def stop(self) -> tuple[int, int, int, int]:
        out = (ctypes.c_int64 * 4)()
        self._read(out)
        self._reset(0)
        return tuple(int(x) for x in out)

"""Recycled, pre-mapped memory for the large per-replay arrays of the v4 compiled book.

A fresh numpy array of tens of megabytes is a fresh mapping: each of its pages is faulted in
(and zeroed by the OS) at its first write. On this VM class a page fault costs ~3 us, so the
outcome array (34 bytes a command), the fill buffer and the id index of a 2M-command replay
cost ~0.1 s of faults, as much as the kernel itself. :func:`take` hands out views of buffers
that were mapped once and are reused as soon as nothing refers to them any more (every
view of a numpy array holds a reference to its base, so a buffer is free exactly when the
pool's own reference is the only one left): a replay whose earlier result was dropped
reuses that result's memory, already mapped.

Contents of a taken buffer are undefined (the caller writes every byte it reads). Buffers
below :data:`MIN_BYTES` are plain fresh arrays. At most :data:`KEEP_BYTES` of unused
buffers are kept; beyond that the largest unused ones are released to the OS.
"""

from __future__ import annotations

import sys
import threading

import numpy as np

MIN_BYTES = 1 << 20  # smaller arrays: a fresh, mapped array each time
KEEP_BYTES = 1 << 29  # unused pooled memory kept for reuse, at most
_PAGE = 4096

_pool: list[np.ndarray] = []  # uint8 buffers, every page mapped
_lock = threading.Lock()


def _mapped(nbytes: int) -> np.ndarray:
    buf = np.empty(nbytes, dtype=np.uint8)
    buf[::_PAGE] = 0  # one write per page maps it now, not inside a timed kernel
    return buf


def _unused(buf: np.ndarray) -> bool:
    # references when nothing else holds it: the pool list, the caller's loop variable,
    # this parameter and getrefcount's argument (every caller iterates over _pool)
    return sys.getrefcount(buf) <= 4


def take(nbytes: int) -> np.ndarray:
    """A uint8 array of ``nbytes`` whose pages are mapped; its contents are undefined."""
    if nbytes < MIN_BYTES:
        return _mapped(max(nbytes, 0))
    with _lock:
        best = None
        for buf in _pool:
            if buf.size >= nbytes and buf.size <= 4 * nbytes and _unused(buf) and (
                    best is None or buf.size < best.size):
                best = buf
        if best is not None:
            return best[:nbytes]
        step = 1 << max(12, nbytes.bit_length() - 3)  # sizes in steps of 1/8 to 1/4 of
        size = -(-nbytes // step) * step  # the request: reusable, not much to map in vain
        spare = sorted((b for b in _pool if _unused(b)), key=lambda b: -b.size)
        kept = sum(b.size for b in spare)
        for b in spare:
            if kept + size <= KEEP_BYTES:
                break
            _pool.remove(b)
            kept -= b.size
        del spare
        buf = _mapped(size)
        _pool.append(buf)
        return buf[:nbytes]


def take_array(shape, dtype) -> np.ndarray:
    """:func:`take` viewed as a C-contiguous array of ``shape`` and ``dtype`` (undefined
    contents)."""
    dtype = np.dtype(dtype)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    n = int(np.prod(shape)) if shape else 1
    return take(n * dtype.itemsize).view(dtype).reshape(shape)


def pooled_bytes() -> tuple[int, int]:
    """(bytes held by the pool, bytes of them in use), for tests and diagnostics."""
    with _lock:
        used = sum(b.size for b in _pool if not _unused(b))
        return sum(b.size for b in _pool), used


def zeros(shape, dtype) -> np.ndarray:
    """``np.zeros`` with every page mapped now. np.zeros of a large array is a fresh lazy
    mapping, so its pages would be faulted in (and zeroed) by the kernel's first write to
    each: inside the timed replay, and scaling with the array, not with the work (the
    per-owner level_sums table, up to 16 MB written nowhere at creation, cost a fresh
    engine milliseconds of page faults that way)."""
    return mapped(np.zeros(shape, dtype=dtype))


def mapped(a: np.ndarray) -> np.ndarray:
    """Map every page of the zeroed, contiguous ``a`` now: one write per page (the OS zeroes
    the rest), so no page fault is left for the kernel."""
    a.reshape(-1).view(np.uint8)[::_PAGE] = 0
    return a

"""Small numba intrinsics for the compiled transport: acquire loads, release stores, a CPU
pause hint and three libc calls (``getppid``, ``sched_yield``, ``kill``).

``load_acquire(a, i)`` / ``store_release(a, i, v)`` emit LLVM ``load atomic ... acquire`` /
``store atomic ... release`` on an aligned int64 array element. On x86-64 they compile to
plain ``mov``s (TSO already gives that order) but they still forbid the *compiler* from
hoisting a load out of a spin loop or sinking the slot writes below the publishing store; on
a weakly ordered CPU (ARM, POWER) LLVM adds the barriers the protocol needs (``ldar`` /
``stlr`` on AArch64). Only one process writes each control word, so no read-modify-write is
needed anywhere.

``cpu_pause()`` is ``pause`` on x86 (``yield`` on AArch64, nothing elsewhere): it tells the
core a spin-wait is running (less power, no memory-order mis-speculation on exit, and the
sibling hyper-thread gets the pipeline).

Like :func:`lob.engines.compiled.clock.monotonic_ns`, the libc calls are declared as external
symbols resolved at load time, so functions using them can be cached by numba.
"""

from __future__ import annotations

import platform

from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["load_acquire", "store_release", "cpu_pause", "getppid", "pid_alive", "sched_yield"]

_MACHINE = platform.machine().lower()


def _int64_array(a):
    return isinstance(a, types.Array) and a.dtype == types.int64


def _atomic_codegen(access, ordering):
    """Lowering of one atomic ``access`` (``"load"``: ``a[i]``, ``"store"``: ``a[i] = v``) of
    an int64 array element with LLVM memory ``ordering``."""

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        arr = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aryty, arr, [args[1]])
        if access == "load":
            return builder.load_atomic(ptr, ordering, 8)
        val = context.cast(builder, args[2], signature.args[2], types.int64)
        builder.store_atomic(val, ptr, ordering, 8)
        return context.get_dummy_value()

    return codegen


@intrinsic
def load_acquire(typingctx, a, i):
    """``a[i]`` (int64 array) read with acquire semantics."""
    if _int64_array(a):
        return types.int64(a, types.intp), _atomic_codegen("load", "acquire")
    return None


@intrinsic
def store_release(typingctx, a, i, v):
    """``a[i] = v`` (int64 array) written with release semantics."""
    if _int64_array(a):
        return types.void(a, types.intp, types.int64), _atomic_codegen("store", "release")
    return None


@intrinsic
def cpu_pause(typingctx):
    """A spin-wait hint: ``pause`` (x86), ``yield`` (AArch64), else nothing."""
    sig = types.void()

    def codegen(context, builder, signature, args):
        # LLVM's target intrinsics (numba's JIT has no inline-asm parser)
        if _MACHINE in ("x86_64", "amd64", "i686", "i386"):
            fn = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.VoidType(), []), "llvm.x86.sse2.pause")
            builder.call(fn, [])
        elif _MACHINE in ("aarch64", "arm64"):
            i32 = ir.IntType(32)
            fn = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.VoidType(), [i32]), "llvm.aarch64.hint")
            builder.call(fn, [i32(1)])  # hint #1 = yield
        return context.get_dummy_value()

    return sig, codegen


def _libc_codegen(name):
    """Lowering of a call to libc ``int name(int, ...)``: the int64 arguments cut to C ints,
    the result widened to int64 (or dropped where the signature returns nothing)."""

    def codegen(context, builder, signature, args):
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(i32, [i32] * len(args))
        fn = cgutils.get_or_insert_function(builder.module, fnty, name)
        r = builder.call(fn, [builder.trunc(a, i32) for a in args])
        if signature.return_type == types.void:
            return context.get_dummy_value()
        return builder.sext(r, ir.IntType(64))

    return codegen


@intrinsic
def getppid(typingctx):
    """libc ``getppid()``: 1 (or a subreaper's pid) once the parent has died."""
    return types.int64(), _libc_codegen("getppid")


@intrinsic
def sched_yield(typingctx):
    """libc ``sched_yield()``: let another runnable task have this CPU (returns at once when
    there is none)."""
    return types.void(), _libc_codegen("sched_yield")


@intrinsic
def _kill(typingctx, pid, sig):
    """libc ``kill(pid, sig)``: 0, or -1 (with errno set) when it fails."""
    return types.int64(types.int64, types.int64), _libc_codegen("kill")


@njit(cache=True)
def pid_alive(pid):
    """False once ``kill(pid, 0)`` fails (the process is gone and reaped)."""
    return _kill(pid, 0) == 0

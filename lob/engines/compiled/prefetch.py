"""Software prefetch for numba code: ``prefetch(a, i)`` and ``prefetch_write(a, i)`` hint that
element ``i`` of the 1-D array ``a`` will soon be read (or written).

Each is an ``@intrinsic`` that emits LLVM's ``llvm.prefetch`` (x86 ``prefetcht0`` /
``prefetchw``) on ``a``'s data pointer offset by ``i`` elements of ``a``'s own record size.
A prefetch never faults and never changes what a program computes, so ``i`` may lie past the
array's end (a loop prefetching ``i + d`` needs no bound test), and a bounds-checked build
checks nothing here. Used by :mod:`lob.engines.compiled.kernel_v4` for the two streams every
replay walks in order: the commands it reads and the outcome records it writes.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


def _hint(write: int):
    def typer(typingctx, arr, idx):
        if not isinstance(arr, types.Array) or arr.ndim != 1 or \
                not isinstance(idx, types.Integer):
            return None  # numba reports no matching signature
        sig = types.void(arr, idx)

        def codegen(context, builder, signature, args):
            a, i = args
            data = context.make_array(signature.args[0])(context, builder, a).data
            i = context.cast(builder, i, signature.args[1], types.int64)
            # not inbounds: i may point past the end
            ptr = builder.bitcast(builder.gep(data, [i]), ir.IntType(8).as_pointer())
            i32 = ir.IntType(32)
            fnty = ir.FunctionType(ir.VoidType(), [ptr.type, i32, i32, i32])
            fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0i8")
            # read or write, locality 3 (keep in every cache level), the data cache
            builder.call(fn, [ptr, i32(write), i32(3), i32(1)])
            return context.get_dummy_value()

        return sig, codegen

    typer.__name__ = "prefetch_write" if write else "prefetch"
    return intrinsic(typer)


prefetch = _hint(0)
prefetch_write = _hint(1)

__all__ = ["prefetch", "prefetch_write"]

"""Vectorised math for the array kernels: glibc's libmvec, called from Numba.

Numba stopped using Intel's SVML in 0.62 (llvmlite's LLVM is no longer patched for it),
so a Numba loop over ``math.sin`` runs one element at a time, and NumPy's float64
sin/cos are scalar too (about 10 ns an element here).  glibc ships libmvec: the vector
variants of libm under the x86-64 vector function ABI (``_ZGVeN8v_sin`` takes and
returns eight doubles in a zmm register), documented to within 4 ulp.  This module binds
them as Numba intrinsics:

    ``lanes_sin(src, so, dst, do)``   dst[do:do+LANES] = sin(src[so:so+LANES])

(one per function in ``FUNCTIONS``); ``generated_blocks.v_sin(src, so, dst, do, n)``
and its siblings loop over them, with libm's scalar function for the tail.  The ISA variant follows the features Numba compiles
for (AVX-512: 8 lanes, AVX2: 4, otherwise SSE: 2), so the register convention of the
call always matches the caller.  Where there is no libmvec (not glibc on x86-64), the
same functions run libm's scalar function on every element: same results as the
scalar kernels, no vector speed.  ``LIBRARY`` says which is in use.
"""
import ctypes.util
import platform

import llvmlite.binding as llvm
from llvmlite import ir
from numba import types
from numba.core import cgutils, config
from numba.extending import intrinsic

FUNCTIONS = ("exp", "log", "log1p", "expm1", "sin", "cos", "tan", "tanh", "erf")


def _isa():
    """(libmvec ISA letter, lanes), or None where libmvec cannot be used."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return None
    path = ctypes.util.find_library("mvec")
    if path is None:
        return None
    try:
        llvm.load_library_permanently(path)
    except RuntimeError:
        return None
    # the features Numba compiles for (NUMBA_CPU_NAME / NUMBA_CPU_FEATURES, else the host's)
    features = (config.CPU_FEATURES if config.CPU_NAME else llvm.get_host_cpu_features().flatten())
    features = features or ""
    if config.CPU_NAME and config.CPU_NAME != "host" and not config.CPU_FEATURES:
        return "b", 2                 # a named generic CPU: the SSE variant is always safe
    if "+avx512f" in features:
        return "e", 8
    if "+avx2" in features:
        return "d", 4
    return "b", 2


_ISA = _isa()
LANES = _ISA[1] if _ISA else 4
LIBRARY = f"libmvec ({LANES} lanes)" if _ISA else "libm (scalar: no libmvec here)"


def symbol(name):
    """libmvec's function ``name`` over ``LANES`` doubles (the compiled tape calls it too,
    ``replay/llvm_tape``), or None where there is no libmvec."""
    return f"_ZGV{_ISA[0]}N{LANES}v_{name}" if _ISA else None


def _lanes(name):
    """Intrinsic: dst[do:do+LANES] = name(src[so:so+LANES]) in one call."""
    @intrinsic
    def lanes(typingctx, src, so, dst, do):
        def codegen(context, builder, sig, args):
            s, soff, d, doff = args
            sp = builder.gep(context.make_array(sig.args[0])(context, builder, s).data, [soff])
            dp = builder.gep(context.make_array(sig.args[2])(context, builder, d).data, [doff])
            dbl = ir.DoubleType()
            vt = ir.VectorType(dbl, LANES)
            if _ISA:
                fn = cgutils.get_or_insert_function(
                    builder.module, ir.FunctionType(vt, [vt]), symbol(name))
                v = builder.load(builder.bitcast(sp, vt.as_pointer()), align=8)
                builder.store(builder.call(fn, [v]), builder.bitcast(dp, vt.as_pointer()),
                              align=8)
            else:
                fn = cgutils.get_or_insert_function(builder.module,
                                                    ir.FunctionType(dbl, [dbl]), name)
                for k in range(LANES):
                    idx = ir.Constant(ir.IntType(64), k)
                    builder.store(builder.call(fn, [builder.load(builder.gep(sp, [idx]))]),
                                  builder.gep(dp, [idx]))
            return context.get_dummy_value()
        return types.void(src, so, dst, do), codegen
    lanes.__name__ = f"lanes_{name}"
    return lanes


lanes_exp, lanes_log, lanes_log1p, lanes_expm1, lanes_sin, lanes_cos, lanes_tan, lanes_tanh, \
    lanes_erf = (_lanes(f) for f in FUNCTIONS)

"""Compiled tapes: a recording lowered to LLVM IR and built with llvmlite.

``CompiledTape(r)`` turns a recording of scalar code and small arrays into one native
function ``int tape(double *x, double *grad, double *value)``: every buffer is unrolled
into its elements, the forward sweep becomes straight-line code, then the guards (it
returns 0 at the first that fails), then the reverse sweep, with the adjoints in
registers, added in the interpreter's order.  Every kind but custom Functions lowers.

The op rules come from the op table, walked by ``ops.rules.Walker``: ``math`` calls
become LLVM intrinsics or libm calls (libmvec's vector calls where the kernels make them:
elementwise entries from ``FUSE_MIN`` values on, long softmax rows), and the
``scalar_math`` helpers are compiled from their source (their ``if ...: return`` bodies
become selects) into functions that LLVM inlines.  A compiled tape computes what the
interpreted replay and the eager ops compute, bit for bit.

Compile time is what limits this tier, so the IR is written as text (no IR objects),
only the inliner runs, and code generation is LLVM's fast path on blocks of bounded
length: all linear in the tape's length.

The object code is kept in the kernel cache's folder (``tapes/``), keyed by a hash of
the IR text, the host CPU (name and features) and the LLVM version: a recording lowered
to the same IR on the same kind of machine (the same function traced again, or a saved
compiled tape loaded in a new process) loads its code instead of compiling it.  Each
file starts with a hash of the object code, checked before it is loaded; the folder is
kept under ``OBJECTS_MAX_BYTES``, least recently used first out.
"""
import ctypes
import hashlib
import math
import os
import struct
import tempfile

import llvmlite.binding as llvm
import numpy as np

from ..kernels import vmath
from ..kernels.fused import FUSE_MIN
from ..kernels.softmax import SCALAR_MAX
from ..ops.rules import Walker, helper_def
from ..ops.table import BY_CODE, CODE, EW_OF, KINDS, kind_range
from ..tracing import G_EQUAL, G_TRUTH

_CONST = CODE["const"]
# rules.MATH (and abs, **) as LLVM intrinsics; the others are libm calls of their name
_INTRINSICS = {"exp": "exp", "log": "log", "sin": "sin", "cos": "cos", "sqrt": "sqrt",
               "abs": "fabs", "pow": "pow"}
_ARITH = {"+": "fadd", "-": "fsub", "*": "fmul", "/": "fdiv"}
_CMP = {"<": "olt", "<=": "ole", ">": "ogt", ">=": "oge", "==": "oeq",
        "!=": "une"}   # Python: comparisons with NaN are False, except != (True)
BLOCK = 64                  # entries per basic block


class CompileError(RuntimeError):
    """The recording uses something the compiled tier does not lower (arrays, reductions,
    matrix products): the interpreted replay runs it instead."""


def const(v):
    """An exact LLVM double literal."""
    return "0x%016X" % struct.unpack("<Q", struct.pack("<d", float(v)))[0]


class Emitter(Walker):
    """Writes IR text for the op table's rules into ``lines``: ``ops.rules.Walker`` over
    an algebra of IR registers.  Math functions are LLVM intrinsics or libm calls (the
    same libm the interpreter calls); a helper becomes an internal function LLVM inlines."""

    def __init__(self):
        self.lines = []
        self.n = 0
        self.declared = set()      # intrinsics, libm and libmvec functions used
        self.helpers = {}          # scalar_math helper -> its IR definition
        self.lanes = False         # math as libmvec's (``vector_math``) where it has it

    def tmp(self, rhs):
        self.n += 1
        name = f"%t{self.n}"
        self.lines.append(f"  {name} = {rhs}")
        return name

    def label(self):
        self.n += 1
        return f"L{self.n}"

    def _call(self, fname, args):
        return self.tmp(f"call double @{fname}(" + ", ".join(f"double {a}" for a in args) + ")")

    # -- the algebra -----------------------------------------------------------------------
    def const(self, v):
        return const(v)

    def neg(self, a):
        return self.tmp(f"fneg double {a}")

    def arith(self, op, a, b):
        if op == "**":
            return self.math("pow", [a, b])
        return self.tmp(f"{_ARITH[op]} double {a}, {b}")

    def compare(self, op, a, b):
        return self.tmp(f"fcmp {_CMP[op]} double {a}, {b}")

    def logic(self, op, a, b):
        return self.tmp(f"{op} i1 {a}, {b}")

    def select(self, c, a, b):
        return self.tmp(f"select i1 {c}, double {a}, double {b}")

    def math(self, name, args):
        if self.lanes and name in vmath.FUNCTIONS and vmath.symbol(name):
            return self.vector_math(name, args[0])
        fname = f"llvm.{_INTRINSICS[name]}.f64" if name in _INTRINSICS else name
        self.declared.add((fname, len(args)))
        return self._call(fname, args)

    def vector_math(self, name, a):
        """libmvec's ``name`` of ``a``, as the kernels' vector calls give it (the value
        in one lane depends on that lane only): ``a`` in every lane, lane 0 read back."""
        vt = f"<{vmath.LANES} x double>"
        one = self.tmp(f"insertelement {vt} undef, double {a}, i32 0")
        every = self.tmp(f"shufflevector {vt} {one}, {vt} undef, <{vmath.LANES} x i32> "
                         "zeroinitializer")
        fname = vmath.symbol(name)
        self.declared.add((fname, -1))
        return self.tmp(f"extractelement {vt} {self.tmp(f'call {vt} @{fname}({vt} {every})')}, "
                        "i32 0")

    def helper(self, name, args):
        """A ``scalar_math`` helper compiled from its source into an internal function
        (one with libmvec's math under ``lanes``)."""
        fname = f"tapegrad_sm_{name}" + ("_lanes" if self.lanes else "")
        if fname not in self.helpers:
            self.helpers[fname] = None              # (recursion guard)
            params, body = helper_def(name)
            outer, self.lines = self.lines, []
            result = self.body(body, {p: f"%{p}" for p in params})
            sig = ", ".join(f"double %{p}" for p in params)
            self.helpers[fname] = (f"define internal double @{fname}({sig}) alwaysinline {{\n"
                                  + "\n".join(self.lines) + f"\n  ret double {result}\n}}\n")
            self.lines = outer
        return self._call(fname, args)

    def declarations(self):
        out = [h for h in self.helpers.values() if h]
        vt = f"<{vmath.LANES} x double>"
        for fname, n in sorted(self.declared):
            out.append(f"declare {vt} @{fname}({vt})" if n < 0 else
                       f"declare double @{fname}(" + ", ".join(["double"] * n) + ")")
        return "\n".join(out)


MAX_ELEMENTS = 1 << 16      # values per tape the straight-line code may hold
_KINDS = tuple(k for k in KINDS if k not in ("source", "host"))   # (a host entry runs Python)
_SOURCE_FIRST, _SOURCE_LAST = kind_range("source")


def _entries(r):
    """The scheduled entries the lowering computes: an unoptimised recording
    (``optimize=False``) schedules its sources too, whose values are inputs or
    constants (``_Tape.elems``)."""
    return [i for i in r.schedule.tolist()
            if not _SOURCE_FIRST <= int(r.OP[i]) <= _SOURCE_LAST]


def _lanes(n, k):
    """Does element k of an elementwise entry of n values take libmvec's math, as the
    kernels compute it?  From ``FUSE_MIN`` values on (the block rules of eager ops and
    replays, ``kernels/fused``), but for the last ``n % LANES`` (libm's tail)."""
    return n >= FUSE_MIN and k < n - n % vmath.LANES


def _check_supported(r):
    if len(r.outs) != 1 or r.size(r.outs[0]) != 1:
        raise CompileError("the compiled tier lowers functions of one scalar output (their "
                           f"gradient); this recording has outputs of shapes {r.out_shapes}")
    total = 0
    for i in _entries(r):
        spec = BY_CODE[int(r.OP[i])]
        if spec.kind not in _KINDS:
            raise CompileError(f"entry {i} ({spec.name}) has no compiled lowering")
        total += r.size(i)
    if total > MAX_ELEMENTS:
        raise CompileError(f"the tape holds {total} values: too many to unroll into "
                           "straight-line code (the compiled tier is for scalar code and "
                           "small arrays)")
    for kind, e, data, _ in r.guard_list:
        if kind not in (G_EQUAL, G_TRUTH):
            raise CompileError("the compiled tier checks value guards only (not argmax)")


def _broadcast_map(r, i):
    """(x position, y position) per output element of broadcast entry i, in the
    kernel's loop order (``kernels.broadcast``)."""
    s0, s1, s2, s3, a0, a1, a2, a3, b0, b1, b2, b3 = r.broadcast_loops(i)
    return [(i0 * a0 + i1 * a1 + i2 * a2 + i3 * a3, i0 * b0 + i1 * b1 + i2 * b2 + i3 * b3)
            for i0 in range(s0) for i1 in range(s1) for i2 in range(s2) for i3 in range(s3)]


def _product_dims(r, i):
    """(nb, M, K, N, ysk, ysn) of product entry i, y's strides as ``kernels.matmul.dims``."""
    nb, M, K, N, _, ty = r.product(i)
    return (nb, M, K, N) + ((1, K) if ty else (N, 1))


class _Tape:
    """Straight-line IR for one recording: each buffer a list of element values."""

    def __init__(self, r):
        self.r, self.em = r, Emitter()
        self.in_pos, pos = {}, 0
        for e in r.ins:
            self.in_pos[e] = pos
            pos += r.size(e)
        self.val = {}

    def elems(self, j):
        """The elements of buffer j: registers, inputs read from x, or constants."""
        v = self.val.get(j)
        if v is None:
            r, em = self.r, self.em
            if j in self.in_pos:
                v = []
                for k in range(r.size(j)):
                    p = em.tmp(f"getelementptr double, double* %x, i64 {self.in_pos[j] + k}")
                    v.append(em.tmp(f"load double, double* {p}"))
            else:
                o = r.OFF[j]
                v = [const(x) for x in r.V[o:o + r.size(j)]]
            self.val[j] = v
        return v

    def operand(self, j, i, n):
        """An elementwise operand: buffer j, or entry i's Python-number constant."""
        return self.elems(j) if j >= 0 else [const(self.r.C[i])] * n

    # -- forward -----------------------------------------------------------------------
    def forward(self, i):
        r, em = self.r, self.em
        spec = BY_CODE[int(r.OP[i])]
        a, b, n = int(r.A[i]), int(r.B[i]), r.size(i)
        kind = spec.kind
        if kind in ("ew", "compare", "where"):
            xs, ys = self.operand(a, i, n), self.operand(b, i, n)
            if kind == "where":
                cs = self.elems(r.condition(i))
                out = []
                for k in range(n):
                    c = em.tmp(f"fcmp une double {cs[k]}, {const(0.0)}")
                    out.append(em.tmp(f"select i1 {c}, double {xs[k]}, double {ys[k]}"))
                return out
            c2 = const(r.C2[i])
            out = []
            for k in range(n):
                em.lanes = _lanes(n, k)
                out.append(em.expr(spec.fwd, {"x": xs[k], "y": ys[k], "c2": c2}))
            em.lanes = False
            return out
        if kind == "broadcast":            # kernels/broadcast.py, in its loop order
            xs, ys = self.elems(a), self.elems(b)
            fwd = EW_OF[spec.code].fwd
            return [em.expr(fwd, {"x": xs[p], "y": ys[q]}) for p, q in _broadcast_map(r, i)]
        src = self.elems(a)
        if kind == "gather":
            return [src[o] for o in r.gather_sources(i)]
        if kind in ("reshape", "stop"):
            if r.C[i] == 32.0:             # a copy into float32: rounded (structural.move)
                return [em.tmp("fpext float " + em.tmp(f"fptrunc double {v} to float")
                               + " to double") for v in src]
            return list(src)
        if kind == "index":
            return [src[p] for p in r.index_sources(i)]
        if kind == "cat":
            outer, pieces = r.cat_pieces(i)
            out = []
            for o in range(outer):
                for buf, inner in pieces:
                    out += self.elems(buf)[o * inner:(o + 1) * inner]
            return out
        if kind == "matmul":
            return self._matmul(i, src, self.elems(b))
        if kind == "softmax":
            return self._softmax(i, spec.name, src)
        return self._reduce(i, spec.name, src)

    def _rows(self, i):
        """Element positions of each softmax row, as ``kernels/softmax.py`` walks them, and
        whether its rows take libmvec's exp (contiguous, longer than ``SCALAR_MAX``)."""
        outer, n, inner = self.r.softmax_dims(i)
        return [[p * n * inner + q + j * inner for j in range(n)]
                for p in range(outer) for q in range(inner)], inner == 1 and n > SCALAR_MAX

    def _softmax(self, i, name, src):
        """``kernels/softmax.rows_forward``'s order: the max, the exps and their sum, then
        the output."""
        em = self.em
        log = name == "log_softmax"
        rows, vector = self._rows(i)
        out = [None] * (len(rows) if name == "logsumexp" else len(src))
        for ri, row in enumerate(rows):
            top = const(-math.inf)
            for k in row:             # the max; NaN wins
                x = src[k]
                take = em.tmp(f"fcmp ugt double {x}, {top}")
                top = em.tmp(f"select i1 {take}, double {x}, double {top}")
            if name == "logsumexp":   # shifted by 0 where the max is not finite
                finite = em.tmp(f"fcmp oeq double {em.tmp(f'fsub double {top}, {top}')}, "
                                f"{const(0.0)}")
                top = em.tmp(f"select i1 {finite}, double {top}, double {const(0.0)}")
            z = [em.tmp(f"fsub double {src[k]}, {top}") for k in row]
            e = []
            for j in range(len(row)):           # libmvec's lanes, libm's tail (_exps)
                em.lanes = vector and j < len(row) - len(row) % vmath.LANES
                e.append(em.math("exp", [z[j]]))
            em.lanes = False
            if vector:
                s = self._sum(e, None, 1)[0]
            else:
                s = const(0.0)
                for v in e:
                    s = em.tmp(f"fadd double {s}, {v}")
            if name == "logsumexp":
                out[ri] = em.tmp(f"fadd double {em.math('log', [s])}, {top}")
                continue
            lse = em.math("log", [s]) if log else None
            for j, k in enumerate(row):         # (each exp once, as the kernel)
                out[k] = (em.tmp(f"fsub double {z[j]}, {lse}") if log else
                          em.tmp(f"fdiv double {e[j]}, {s}"))
        return out

    def _matmul(self, i, X, Y):
        em = self.em
        nb, M, K, N, ysk, ysn = _product_dims(self.r, i)
        out = []
        for bt in range(nb):
            for m in range(M):
                for n in range(N):
                    acc = const(0.0)
                    for k in range(K):
                        p = em.tmp(f"fmul double {X[bt * M * K + m * K + k]}, "
                                   f"{Y[bt * K * N + k * ysk + n * ysn]}")
                        acc = em.tmp(f"fadd double {acc}, {p}")
                    out.append(acc)
        return out

    def _sum(self, src, o, nout):
        """``kernels.reduce.sum_into``'s order: a full sum in 8 interleaved partial sums
        combined pairwise, then the rest; a sum over dims element by element."""
        em = self.em

        def add(a, b):
            return em.tmp(f"fadd double {a}, {b}")
        if nout == 1:
            m = len(src) // 8 * 8
            lane = [const(0.0)] * 8
            for k in range(m):
                lane[k % 8] = add(lane[k % 8], src[k])
            s = add(add(add(lane[0], lane[1]), add(lane[2], lane[3])),
                    add(add(lane[4], lane[5]), add(lane[6], lane[7])))
            for x in src[m:]:
                s = add(s, x)
            return [s]
        acc = [const(0.0)] * nout
        for k, x in enumerate(src):
            acc[o[k]] = add(acc[o[k]], x)
        return acc

    def _reduce(self, i, name, src):
        """As the interpreter: accumulate in input order from 0, 1 or -/+inf."""
        em, nout = self.em, self.r.size(i)
        o = self.r.reduce_targets(i)
        if name in ("sum", "sum_dim", "mean", "mean_dim"):
            acc = self._sum(src, o, nout)
            if name.startswith("mean"):
                count = const(len(src) / nout)
                acc = [em.tmp(f"fdiv double {v}, {count}") for v in acc]
            return acc
        if name in ("prod", "prod_dim"):
            acc = [const(1.0)] * nout
            for k, x in enumerate(src):
                acc[o[k]] = em.tmp(f"fmul double {acc[o[k]]}, {x}")
            return acc
        big = name in ("amax", "max_all")
        acc = [const(-math.inf if big else math.inf)] * nout
        for k, x in enumerate(src):
            cur = acc[o[k]]
            nan = em.tmp(f"fcmp uno double {x}, {x}")
            better = em.tmp(f"fcmp {'ogt' if big else 'olt'} double {x}, {cur}")
            take = em.tmp(f"or i1 {nan}, {better}")
            ok = em.tmp(f"fcmp ord double {cur}, {cur}")
            take = em.tmp(f"and i1 {take}, {ok}")
            acc[o[k]] = em.tmp(f"select i1 {take}, double {x}, double {cur}")
        return acc

    # -- reverse -------------------------------------------------------------------------
    def reverse(self, out):
        self.adj = {out: [const(1.0)]}
        for n_done, i in enumerate(reversed(_entries(self.r))):
            _split_block(self.em, n_done)
            g = self.adj.pop(i, None)
            if g is not None:
                self._adjoint(i, g)

    def add(self, j, k, v):
        r = self.r
        if j < 0 or r.OP[j] == _CONST:
            return
        lst = self.adj.get(j)
        if lst is None:
            lst = self.adj[j] = [None] * r.size(j)
        lst[k] = v if lst[k] is None else self.em.tmp(f"fadd double {lst[k]}, {v}")

    def _adjoint(self, i, g):
        r, em = self.r, self.em
        spec = BY_CODE[int(r.OP[i])]
        a, b, n = int(r.A[i]), int(r.B[i]), r.size(i)
        g = [const(0.0) if v is None else v for v in g]
        kind = spec.kind
        if kind == "ew":
            xs, ys, rs = self.operand(a, i, n), self.operand(b, i, n), self.elems(i)
            for k in range(n):
                env = {"x": xs[k], "y": ys[k], "r": rs[k], "g": g[k], "c2": const(r.C2[i])}
                em.lanes = _lanes(n, k)
                gx = em.expr(spec.gx, env)
                gy = em.expr(spec.gy, env) if spec.gy else None
                em.lanes = False
                self.add(a, k, gx)
                if gy is not None:
                    self.add(b, k, gy)
        elif kind == "where":
            cs = self.elems(r.condition(i))
            for k in range(n):
                c = em.tmp(f"fcmp une double {cs[k]}, {const(0.0)}")
                self.add(a, k, em.tmp(f"select i1 {c}, double {g[k]}, double {const(0.0)}"))
                self.add(b, k, em.tmp(f"select i1 {c}, double {const(0.0)}, double {g[k]}"))
        elif kind == "gather":
            for k, o in enumerate(r.gather_sources(i)):
                self.add(a, int(o), g[k])
        elif kind == "reshape":
            for k in range(n):
                self.add(a, k, g[k])
        elif kind == "index":
            for k, p in enumerate(r.index_sources(i)):
                self.add(a, int(p), g[k])
        elif kind == "cat":
            outer, pieces = r.cat_pieces(i)
            pos = 0
            for o in range(outer):
                for buf, inner in pieces:
                    for t in range(inner):
                        self.add(buf, o * inner + t, g[pos + t])
                    pos += inner
        elif kind == "matmul":
            self._matmul_adjoint(i, g)
        elif kind == "reduce":
            self._reduce_adjoint(i, spec.name, g)
        elif kind == "softmax":
            self._softmax_adjoint(i, spec.name, g)
        elif kind == "broadcast":
            xs, ys = self.elems(a), self.elems(b)
            op = EW_OF[spec.code]
            for k, (p, q) in enumerate(_broadcast_map(r, i)):
                env = {"x": xs[p], "y": ys[q], "g": g[k]}
                self.add(a, p, em.expr(op.gx, env))
                self.add(b, q, em.expr(op.gy, env))

    def _softmax_adjoint(self, i, name, g):
        em, a = self.em, int(self.r.A[i])
        log = name == "log_softmax"
        R = self.elems(i)
        X = self.elems(a) if name == "logsumexp" else None
        for ri, row in enumerate(self._rows(i)[0]):
            if name == "logsumexp":       # g exp(x - r)
                for k in row:
                    e = em.math("exp", [em.tmp(f"fsub double {X[k]}, {R[ri]}")])
                    self.add(a, k, em.tmp(f"fmul double {g[ri]}, {e}"))
                continue
            acc = const(0.0)
            for k in row:
                t = g[k] if log else em.tmp(f"fmul double {g[k]}, {R[k]}")
                acc = em.tmp(f"fadd double {acc}, {t}")
            for k in row:
                if log:
                    t = em.tmp(f"fmul double {em.math('exp', [R[k]])}, {acc}")
                    self.add(a, k, em.tmp(f"fsub double {g[k]}, {t}"))
                else:
                    d = em.tmp(f"fsub double {g[k]}, {acc}")
                    self.add(a, k, em.tmp(f"fmul double {R[k]}, {d}"))

    def _matmul_adjoint(self, i, g):
        """dx = g y^T, dy = x^T g, in the interpreter's loop order."""
        r, em = self.r, self.em
        nb, M, K, N, ysk, ysn = _product_dims(r, i)
        a, b = int(r.A[i]), int(r.B[i])
        X, Y = self.elems(a), self.elems(b)
        for bt in range(nb):
            xa, yb, go = bt * M * K, bt * K * N, bt * M * N
            if r.OP[a] != _CONST:
                for m in range(M):
                    for k in range(K):
                        acc = const(0.0)
                        for n in range(N):
                            y = Y[yb + k * ysk + n * ysn]
                            p = em.tmp(f"fmul double {g[go + m * N + n]}, {y}")
                            acc = em.tmp(f"fadd double {acc}, {p}")
                        self.add(a, xa + m * K + k, acc)
            if r.OP[b] != _CONST:
                for m in range(M):
                    for k in range(K):
                        for n in range(N):
                            self.add(b, yb + k * ysk + n * ysn,
                                     em.tmp(f"fmul double {X[xa + m * K + k]}, {g[go + m * N + n]}"))

    def _reduce_adjoint(self, i, name, g):
        r, em = self.r, self.em
        a = int(r.A[i])
        o = r.reduce_targets(i)
        X = self.elems(a)
        if name in ("sum", "sum_dim"):
            for k in range(len(X)):
                self.add(a, k, g[o[k]])
        elif name in ("mean", "mean_dim"):
            scale = const(r.size(i) / len(X))
            for k in range(len(X)):
                self.add(a, k, em.tmp(f"fmul double {g[o[k]]}, {scale}"))
        elif name in ("prod", "prod_dim"):
            self._prod_adjoint(i, a, o, X, g)
        else:           # amax / amin: shared evenly among the positions that attain it
            R = self.elems(i)          # (kernels.reduce.attains: a full reduction's nans)
            hit = [em.tmp(f"fcmp oeq double {X[k]}, {R[o[k]]}") for k in range(len(X))]
            if name.endswith("_all"):
                for k in range(len(X)):
                    r_nan = em.tmp(f"fcmp uno double {R[o[k]]}, {R[o[k]]}")
                    x_nan = em.tmp(f"fcmp uno double {X[k]}, {X[k]}")
                    both = em.tmp(f"and i1 {r_nan}, {x_nan}")
                    hit[k] = em.tmp(f"or i1 {hit[k]}, {both}")
            count = [const(0.0)] * r.size(i)
            for k in range(len(X)):
                one = em.tmp(f"select i1 {hit[k]}, double {const(1.0)}, double {const(0.0)}")
                count[o[k]] = em.tmp(f"fadd double {count[o[k]]}, {one}")
            for k in range(len(X)):            # (g / count) * hit: nan where none attains
                share = em.tmp(f"fdiv double {g[o[k]]}, {count[o[k]]}")
                one = em.tmp(f"select i1 {hit[k]}, double {const(1.0)}, double {const(0.0)}")
                self.add(a, k, em.tmp(f"fmul double {share}, {one}"))

    def _prod_adjoint(self, i, a, o, X, g):
        """The product of the others, exact with zeros (as the interpreter counts them)."""
        em, nout = self.em, self.r.size(i)
        zeros, nz = [const(0.0)] * nout, [const(1.0)] * nout
        is0 = []
        for k, x in enumerate(X):
            z = em.tmp(f"fcmp oeq double {x}, {const(0.0)}")
            is0.append(z)
            one = em.tmp(f"select i1 {z}, double {const(1.0)}, double {const(0.0)}")
            zeros[o[k]] = em.tmp(f"fadd double {zeros[o[k]]}, {one}")
            factor = em.tmp(f"select i1 {z}, double {const(1.0)}, double {x}")
            nz[o[k]] = em.tmp(f"fmul double {nz[o[k]]}, {factor}")
        for k, x in enumerate(X):
            j = o[k]
            none = em.tmp(f"fcmp oeq double {zeros[j]}, {const(0.0)}")
            one = em.tmp(f"fcmp oeq double {zeros[j]}, {const(1.0)}")
            only = em.tmp(f"and i1 {one}, {is0[k]}")
            t = em.tmp(f"fmul double {g[j]}, {nz[j]}")
            q = em.tmp(f"fdiv double {nz[j]}, {x}")      # (PyTorch's order: r / x first)
            divided = em.tmp(f"fmul double {g[j]}, {q}")
            v = em.tmp(f"select i1 {only}, double {t}, double {const(0.0)}")
            self.add(a, k, em.tmp(f"select i1 {none}, double {divided}, double {v}"))


def build_ir(r):
    """The IR text of recording ``r`` (see the module docstring)."""
    _check_supported(r)
    tp = _Tape(r)
    em = tp.em
    guards = {}
    for kind, e, data, _ in r.guard_list:
        guards.setdefault(e, []).append((kind, data))
    for n_done, i in enumerate(_entries(r)):
        _split_block(em, n_done)
        tp.val[i] = vals = tp.forward(i)
        for kind, data in guards.get(i, ()):
            for k, want in enumerate(data):
                v = vals[k]
                if kind == G_TRUTH:
                    nz = em.tmp(f"fcmp une double {v}, {const(0.0)}")
                    ok = em.tmp(f"icmp eq i1 {nz}, {'true' if want != 0.0 else 'false'}")
                elif want != want:
                    ok = em.tmp(f"fcmp uno double {v}, {v}")
                else:
                    ok = em.tmp(f"fcmp oeq double {v}, {const(want)}")
                nxt = em.label()
                em.lines.append(f"  br i1 {ok}, label %{nxt}, label %fail\n{nxt}:")
    out = r.outs[0]
    em.lines.append(f"  store double {tp.elems(out)[0]}, double* %value")
    tp.reverse(out)
    for e, start in tp.in_pos.items():
        got = tp.adj.get(e) or [None] * r.size(e)
        for k, v in enumerate(got):
            p = em.tmp(f"getelementptr double, double* %grad, i64 {start + k}")
            # + 0.0: the interpreter sums adjoints from +0, so its gradients are never -0;
            # the sign of a zero adjoint changes nothing else (rules are linear in g)
            v = const(0.0) if v is None else em.tmp(f"fadd double {const(0.0)}, {v}")
            em.lines.append(f"  store double {v}, double* {p}")
    body = "\n".join(em.lines)
    return (f"{em.declarations()}\n"
            "define i32 @tape(double* %x, double* %grad, double* %value) {\nentry:\n"
            f"{body}\n  ret i32 1\nfail:\n  ret i32 0\n}}\n")


def _split_block(em, n_done):
    """A new basic block every ``BLOCK`` entries (per-block work in code generation
    grows faster than linearly with a block's length)."""
    if n_done and n_done % BLOCK == 0:
        nxt = em.label()
        em.lines.append(f"  br label %{nxt}\n{nxt}:")


def _target_machine():
    """A new target machine for the host, its features included (a call of libmvec's
    passes its vector in the register the host's variant takes: ``kernels/vmath``; an
    execution engine owns the one it gets); optimisation level 0 selects LLVM's fast,
    linear code generation."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    return llvm.Target.from_default_triple().create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=0)


OBJECTS_MAX_BYTES = 256 << 20


def _objects_folder():
    from ..kernels import FOLDER
    return os.path.join(FOLDER, "tapes")


def _object_key(ir, tm):
    h = hashlib.sha256(ir.encode())
    h.update(f"\n{tm.triple} {llvm.get_host_cpu_name()} {llvm.get_host_cpu_features().flatten()} "
             f"{llvm.llvm_version_info}".encode())
    return h.hexdigest()


def _cached_object(key):
    """The object code stored under ``key``, if it is there and intact."""
    path = os.path.join(_objects_folder(), key + ".o")
    try:
        with open(path, "rb") as f:
            data = f.read()
        os.utime(path)                          # (recently used)
    except OSError:
        return None
    code = data[32:]
    return code if code and hashlib.sha256(code).digest() == data[:32] else None


def _store_object(key, code):
    folder = _objects_folder()
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(hashlib.sha256(code).digest() + code)
        os.replace(tmp, os.path.join(folder, key + ".o"))
        files = sorted((os.stat(e.path).st_mtime, e.stat().st_size, e.path)
                       for e in os.scandir(folder) if e.name.endswith(".o"))
        total = sum(size for _, size, _ in files)
        for _, size, path in files:             # least recently used first
            if total <= OBJECTS_MAX_BYTES:
                break
            os.remove(path)
            total -= size
    except OSError:
        pass                                    # (no cache: it compiles next time too)


class CompiledTape:
    """A native function for one recording: ``__call__(x, grad)`` -> value or None.
    ``cached``: its code was loaded from the object cache, not compiled."""

    def __init__(self, r):
        ir = build_ir(r)
        tm = _target_machine()
        key = _object_key(ir, tm)
        code = _cached_object(key)
        self.cached = code is not None
        if self.cached:
            self.engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), tm)
            self.engine.add_object_file(llvm.ObjectFileRef.from_data(code))
        else:
            mod = llvm.parse_assembly(ir)
            mod.verify()
            pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=0))
            mpm = llvm.create_new_module_pass_manager()
            mpm.add_always_inliner_pass()     # (instruction combining would be superlinear)
            mpm.run(mod, pb)
            pb.close()
            self.engine = llvm.create_mcjit_compiler(mod, tm)
            self.engine.set_object_cache(lambda module, buffer: _store_object(key, buffer))
        self.engine.finalize_object()
        self.fn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                   ctypes.c_void_p)(self.engine.get_function_address("tape"))
        self._value = np.empty(1)

    def __call__(self, x, grad):
        """Value at ``x`` (float64, flat) with d/dx written into ``grad``; None if a
        guard fails."""
        if not self.fn(x.ctypes.data, grad.ctypes.data, self._value.ctypes.data):
            return None
        return float(self._value[0])

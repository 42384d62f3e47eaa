"""Compiled tapes: a recording lowered to LLVM IR and built with llvmlite.

``CompiledTape(r)`` turns a recording of scalar code (0-d elementwise ops and
comparisons, elements read from vector inputs, ``where``, copies) into one native
function ``int tape(double *x, double *grad, double *value)``: straight-line forward
code, the guards (it returns 0 at the first that fails), then straight-line reverse
code with the adjoints in registers, added in the interpreter's order.

The op rules come from the op table: its forward and reverse expressions are compiled
from their Python syntax, ``math`` calls become LLVM intrinsics or libm calls, and the
``scalar_math`` helpers are compiled from their source (their ``if ...: return`` bodies
become selects) into functions that LLVM inlines, so constant operands fold
(``x ** 2.0`` becomes ``x * x``).  A compiled tape computes what the interpreted replay
computes, bit for bit.

Compile time is what limits this tier, so the IR is written as text (no IR objects),
only the inliner and instruction combining run, and code generation is LLVM's fast
path: all linear in the tape's length.
"""
import ast
import ctypes
import functools
import inspect
import math
import struct

import llvmlite.binding as llvm
import numpy as np

from ..ops import scalar_math
from ..ops.table import CODE, OPS
from ..tracing import G_EQUAL, G_TRUTH

_CONST = CODE["const"]
_WHERE = CODE["where"]
_INTRINSICS = {"exp", "log", "sin", "cos", "sqrt", "floor", "fabs", "pow"}
_LIBM = {"tanh", "tan", "log1p", "expm1", "erf"}
_CMP = {ast.Lt: "olt", ast.LtE: "ole", ast.Gt: "ogt", ast.GtE: "oge", ast.Eq: "oeq",
        ast.NotEq: "une"}   # Python: comparisons with NaN are False, except != (True)
BLOCK = 64                  # entries per basic block


class CompileError(RuntimeError):
    """The recording uses something the compiled tier does not lower (arrays, reductions,
    matrix products): the interpreted replay runs it instead."""


def const(v):
    """An exact LLVM double literal."""
    return "0x%016X" % struct.unpack("<Q", struct.pack("<d", float(v)))[0]


@functools.lru_cache(maxsize=None)
def _parse(text):
    return ast.parse(text, mode="eval").body


class Emitter:
    """Writes IR text for the op table's expressions into ``lines``."""

    def __init__(self):
        self.lines = []
        self.n = 0
        self.declared = set()      # intrinsics and libm functions used
        self.helpers = {}          # scalar_math helper -> its IR definition

    def tmp(self, rhs):
        self.n += 1
        name = f"%t{self.n}"
        self.lines.append(f"  {name} = {rhs}")
        return name

    def label(self):
        self.n += 1
        return f"L{self.n}"

    def emit(self, text, env):
        return self._node(_parse(text), env)

    def _call(self, fname, args):
        return self.tmp(f"call double @{fname}(" + ", ".join(f"double {a}" for a in args) + ")")

    def _node(self, node, env):
        if isinstance(node, ast.Name):
            return env[node.id]
        if isinstance(node, ast.Constant):
            return const(node.value)
        if isinstance(node, ast.Attribute) and node.value.id == "math":
            return const(getattr(math, node.attr))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return self.tmp(f"fneg double {self._node(node.operand, env)}")
        if isinstance(node, ast.BinOp):
            x, y = self._node(node.left, env), self._node(node.right, env)
            if isinstance(node.op, ast.Pow):
                return self._math("pow", [x, y])
            op = {ast.Add: "fadd", ast.Sub: "fsub", ast.Mult: "fmul", ast.Div: "fdiv"}
            return self.tmp(f"{op[type(node.op)]} double {x}, {y}")
        if isinstance(node, ast.Compare):
            (op,), (right,) = node.ops, node.comparators
            x, y = self._node(node.left, env), self._node(right, env)
            return self.tmp(f"fcmp {_CMP[type(op)]} double {x}, {y}")
        if isinstance(node, ast.BoolOp):
            vals = [self._node(v, env) for v in node.values]
            op = "and" if isinstance(node.op, ast.And) else "or"
            out = vals[0]
            for v in vals[1:]:
                out = self.tmp(f"{op} i1 {out}, {v}")
            return out
        if isinstance(node, ast.IfExp):
            c = self._node(node.test, env)
            a, b = self._node(node.body, env), self._node(node.orelse, env)
            return self.tmp(f"select i1 {c}, double {a}, double {b}")
        if isinstance(node, ast.Call):
            args = [self._node(a, env) for a in node.args]
            f = node.func
            if isinstance(f, ast.Attribute) and f.value.id == "math" and \
                    (f.attr in _INTRINSICS or f.attr in _LIBM):
                return self._math(f.attr, args)
            if isinstance(f, ast.Attribute) and f.value.id == "sm":
                return self._call(self._helper(f.attr), args)
            if isinstance(f, ast.Name) and f.id == "abs":
                return self._math("fabs", args)
            if isinstance(f, ast.Name) and f.id in ("max", "min"):
                x, y = args                 # Python's: the first unless the second wins
                win = self.tmp(f"fcmp {'ogt' if f.id == 'max' else 'olt'} double {y}, {x}")
                return self.tmp(f"select i1 {win}, double {y}, double {x}")
        raise CompileError(f"cannot compile the rule {ast.unparse(node)}")

    def _math(self, name, args):
        fname = f"llvm.{name}.f64" if name in _INTRINSICS else name
        self.declared.add((fname, len(args)))
        return self._call(fname, args)

    def _helper(self, name):
        """A ``scalar_math`` helper compiled from its source: its body as one value
        (assignments; ``if c: ... return a`` then the rest, as ``select(c, a, rest)``:
        both sides are pure arithmetic)."""
        fname = f"tapegrad_sm_{name}"
        if name not in self.helpers:
            self.helpers[name] = None               # (recursion guard)
            tree = ast.parse(inspect.getsource(getattr(scalar_math, name))).body[0]
            params = [a.arg for a in tree.args.args]
            outer, self.lines = self.lines, []
            body = [s for s in tree.body
                    if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
            result = self._block(body, {p: f"%{p}" for p in params})
            sig = ", ".join(f"double %{p}" for p in params)
            self.helpers[name] = (f"define internal double @{fname}({sig}) alwaysinline {{\n"
                                  + "\n".join(self.lines) + f"\n  ret double {result}\n}}\n")
            self.lines = outer
        return fname

    def _block(self, stmts, env):
        env = dict(env)
        for k, st in enumerate(stmts):
            if isinstance(st, ast.Return):
                return self._node(st.value, env)
            if isinstance(st, ast.Assign):
                env[st.targets[0].id] = self._node(st.value, env)
            elif isinstance(st, ast.If):
                then = self._block(st.body, env)
                rest = self._block(st.orelse + stmts[k + 1:], env)
                c = self._node(st.test, env)
                return self.tmp(f"select i1 {c}, double {then}, double {rest}")
            else:
                raise CompileError(f"cannot compile {ast.unparse(st)}")
        raise CompileError("a helper without a return")

    def declarations(self):
        out = [h for h in self.helpers.values() if h]
        for fname, n in sorted(self.declared):
            out.append(f"declare double @{fname}(" + ", ".join(["double"] * n) + ")")
        return "\n".join(out)


def _check_supported(r):
    for i in r.schedule:
        op = int(r.OP[i])
        kind = OPS[op].kind
        if r.META[i] >= 0 and r.shape(i) or kind not in ("ew", "compare", "gather", "reshape",
                                                           "stop", "where"):
            raise CompileError(f"entry {i} ({OPS[op].name}, shape {r.shape(i)}): the compiled "
                               "tier handles scalar code only")
    for kind, e, data, _ in r.guard_list:
        if kind not in (G_EQUAL, G_TRUTH) or len(data) != 1:
            raise CompileError("the compiled tier checks scalar guards only")


def _extra(r, i):
    """First metadata extra of a 0-d array entry (a gather's base, where's condition)."""
    return int(r.IAUX[r.META[i] + 2])


def build_ir(r):
    """The IR text of recording ``r`` (see the module docstring)."""
    _check_supported(r)
    em = Emitter()
    in_pos, pos = {}, 0
    for e in r.ins:
        in_pos[e] = pos
        pos += r.size(e)
    val = {}

    def elem(j, k=0):
        """Element k of buffer j: a register, an input read from x, or a constant."""
        if k == 0 and j in val:
            return val[j]
        if j in in_pos:
            p = em.tmp(f"getelementptr double, double* %x, i64 {in_pos[j] + k}")
            v = em.tmp(f"load double, double* {p}")
            if k == 0 and not r.shape(j):            # a scalar input: load it once
                val[j] = v
            return v
        return const(r.V[r.OFF[j] + k])

    guards = {}
    for kind, e, data, _ in r.guard_list:
        guards.setdefault(e, []).append((kind, data[0]))
    for n_done, i in enumerate(r.schedule.tolist()):
        _split_block(em, n_done)
        spec = OPS[int(r.OP[i])]
        a, b = int(r.A[i]), int(r.B[i])
        x = elem(a) if a >= 0 else const(r.C[i])
        y = elem(b) if b >= 0 else const(r.C[i])
        if spec.kind in ("ew", "compare"):
            val[i] = em.emit(spec.fwd, {"x": x, "y": y, "c2": const(r.C2[i])})
        elif spec.kind == "gather":
            val[i] = elem(a, _extra(r, i))
        elif spec.kind in ("reshape", "stop"):
            val[i] = x
        else:                                                       # where
            c = em.tmp(f"fcmp une double {elem(_extra(r, i))}, {const(0.0)}")
            val[i] = em.tmp(f"select i1 {c}, double {x}, double {y}")
        for kind, want in guards.get(i, ()):
            if kind == G_TRUTH:
                nz = em.tmp(f"fcmp une double {val[i]}, {const(0.0)}")
                ok = em.tmp(f"icmp eq i1 {nz}, {'true' if want != 0.0 else 'false'}")
            elif want != want:
                ok = em.tmp(f"fcmp uno double {val[i]}, {val[i]}")
            else:
                ok = em.tmp(f"fcmp oeq double {val[i]}, {const(want)}")
            nxt = em.label()
            em.lines.append(f"  br i1 {ok}, label %{nxt}, label %fail\n{nxt}:")
    em.lines.append(f"  store double {elem(r.outs[0])}, double* %value")
    _reverse(r, em, elem, in_pos)
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


def _reverse(r, em, elem, in_pos):
    adj = {(r.outs[0], 0): const(1.0)}

    def add(j, k, v):
        if j < 0 or r.OP[j] == _CONST:
            return
        old = adj.get((j, k))
        adj[(j, k)] = v if old is None else em.tmp(f"fadd double {old}, {v}")

    for n_done, i in enumerate(reversed(r.schedule.tolist())):
        _split_block(em, n_done)
        g = adj.pop((i, 0), None)
        if g is None:
            continue
        op = int(r.OP[i])
        spec = OPS[op]
        a, b = int(r.A[i]), int(r.B[i])
        if spec.kind == "ew":
            env = {"x": elem(a) if a >= 0 else const(r.C[i]),
                   "y": elem(b) if b >= 0 else const(r.C[i]),
                   "r": elem(i), "g": g, "c2": const(r.C2[i])}
            add(a, 0, em.emit(spec.gx, env))
            if spec.gy:
                add(b, 0, em.emit(spec.gy, env))
        elif spec.kind == "gather":
            add(a, _extra(r, i), g)
        elif spec.kind == "reshape":
            add(a, 0, g)
        elif op == _WHERE:
            c = em.tmp(f"fcmp une double {elem(_extra(r, i))}, {const(0.0)}")
            add(a, 0, em.tmp(f"select i1 {c}, double {g}, double {const(0.0)}"))
            add(b, 0, em.tmp(f"select i1 {c}, double {const(0.0)}, double {g}"))
    for e, start in in_pos.items():
        for k in range(r.size(e)):
            p = em.tmp(f"getelementptr double, double* %grad, i64 {start + k}")
            em.lines.append(f"  store double {adj.get((e, k), const(0.0))}, double* {p}")


def _target_machine():
    """A new target machine for the host (an execution engine owns the one it gets);
    optimisation level 0 selects LLVM's fast, linear code generation."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    return llvm.Target.from_default_triple().create_target_machine(opt=0)


class CompiledTape:
    """A native function for one recording: ``__call__(x, grad)`` -> value or None."""

    def __init__(self, r):
        mod = llvm.parse_assembly(build_ir(r))
        mod.verify()
        tm = _target_machine()
        pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=0))
        mpm = llvm.create_new_module_pass_manager()
        mpm.add_always_inliner_pass()
        mpm.add_instruction_combine_pass()
        mpm.add_simplify_cfg_pass()
        mpm.run(mod, pb)
        pb.close()
        self.engine = llvm.create_mcjit_compiler(mod, tm)
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

"""The op table: every opcode of the tape, declared once.

An entry gives the op's name, its kind (which sweep branch runs it), its arity, the
PyTorch Node name that graph views show, and for elementwise ops the forward rule and
the reverse (adjoint) rule as scalar expressions.  Everything else is derived from
this table: the opcodes, the Tensor methods, the generated dispatch of the compiled
sweeps (``generated.py``, which ``kernels/codegen.py`` writes into the kernel cache's
folder at import, never into the package: ``kernels/__init__.py``), Node names and the
per-op tests.

Rule expressions are written in the names
  ``x``, ``y``  the operands (``y`` is the constant for a tensor-and-scalar op),
  ``r``         the op's result,
  ``g``         the adjoint arriving at the result,
  ``c2``        the entry's second constant (clamp's upper bound),
and may call ``math`` and the helpers of ``tapegrad.ops.scalar_math``.

Kinds, each a band of op codes (``BANDS``; the sweeps dispatch on a code's band):
  ``ew``      elementwise on operands of the output's shape (broadcasting is recorded
              as explicit ``expand`` entries first), or on 0-d scalars;
  ``source``  entries with no inputs: leaves, constants, tensors of other tapes;
  ``where``   select by a mask buffer;
  ``gather``  output element k reads input[base + strided offset of k]: views,
              transposes, slices, expand;
  ``reshape`` the same elements in a new shape;
  ``index``   output element k reads input[idx[k]] for an index list;
  ``reduce``  sum / mean / amax / amin / prod over dims;
  ``matmul``  batched matrix products;
  ``cat``     concatenation of n inputs along a dim;
  ``softmax`` softmax / log_softmax / logsumexp along a dim (extras: outer, n, inner),
              fused: one entry where the composition would be five;
  ``host``    computed in Python (custom Functions): the sweep stops and resumes;
  ``compare`` comparisons (0.0 / 1.0), recorded only while tracing so that a replay
              recomputes masks and checks the guards that depend on them; no gradient;
  ``stop``    ``detach`` while tracing: a copy that a replay recomputes, no gradient;
  ``broadcast`` + - * / of operands of different shapes, each read in place along the
              output's dims (extras: the loops and the operands' strides), its
              adjoints summed back in the same walk: no materialised broadcast.

Tangent (forward-mode) rules are derived, not declared: an elementwise op's Jacobian
is diagonal, so its tangent is its reverse rule applied to the input tangents.
"""
import math
import operator
from dataclasses import dataclass

import numpy as np

from . import scalar_math as sm


@dataclass(frozen=True)
class Op:
    code: int                 # stable: saved files and compiled kernels hold it
    name: str
    kind: str
    arity: int
    node: str                 # PyTorch Node name shown by grad_fn.name()
    fwd: str = ""             # ew: forward expression in x, y (c2)
    gx: str = ""              # ew: adjoint of x in x, y, r, g (c2)
    gy: str = ""              # ew: adjoint of y
    saves: tuple = ()         # saved values shown on the Node: 'self', 'other', 'result'
    py: object = None         # ew: a builtin equal to fwd on floats, for speed (may raise:
                              # the compiled rule answers then); default: fwd itself
    np_fwd: object = None     # the NumPy form: integer tensors of an int_closed op, the
                              # comparisons (bool results), and float arrays if exact
    int_closed: bool = False  # ew: integer tensors give integer results (by np_fwd)
    exact: bool = False       # ew: np_fwd is fwd bit for bit on floats (an IEEE operation
                              # correctly rounded): small float arrays use it
    node_rconst: str = ""     # Node name when the right operand is a Python scalar
    node_lconst: str = ""     # Node name when the left operand is a Python scalar
    domain: tuple = (-2.0, 2.0)    # test inputs for x
    domain_y: tuple = (-2.0, 2.0)  # test inputs for y
    commutes: bool = False    # a Python scalar on the left may be swapped to the right
    const_edge: bool = True   # a Python scalar operand shows as a (None, 0) next function
    inplace: bool = True      # ew: Tensor has the in-place form ``name_`` (as PyTorch)
    dunders: tuple = ()       # the Python operators that are this op (``__add__``, ...)
    rdunder: str = ""         # the reflected operator (a Python number on the left)
    aliases: tuple = ()       # PyTorch's other names for it (``subtract``)
    named: bool = True        # ew: tapegrad.<name> and Tensor.<name> (else reached only
                              # through another function)
    kept: str = ""            # ew: the operand ('x') or result ('r') that PyTorch's backward
                              # reads where the rule reads none or only compares it
                              # (relu's threshold_backward reads the result; square is
                              # pow(x, 2), whose gradient reads x.pow(1)): a create_graph
                              # gradient requires grad through it (``adjoint_rules.read_with``)


E = "ew"
_POS = (0.1, 3.0)


def _int_power(x, y):
    """pow of integers as PyTorch's: a negative exponent leaves 1 of 1, +-1 of -1 and 0 of
    any other base (NumPy's ``power`` refuses it).  A negative Python exponent is refused
    before (``elementwise._refuse``)."""
    neg = np.asarray(y) < 0
    if not neg.any():
        return np.power(x, y)
    x, y, neg = np.broadcast_arrays(x, y, neg)
    odd = np.where(y % 2 == 1, x, 1)              # (-1) ** y: -1 where y is odd
    return np.where(neg, np.where(abs(x) == 1, odd, 0), np.power(x, np.where(neg, 0, y)))

OPS = (
    # ---- elementwise binary -------------------------------------------------------
    Op(0, "add", E, 2, "AddBackward0", "x + y", "g", "g", py=operator.add, np_fwd=np.add,
       commutes=True, int_closed=True, exact=True, dunders=("__add__", "__radd__")),
    Op(1, "sub", E, 2, "SubBackward0", "x - y", "g", "-g", py=operator.sub, np_fwd=np.subtract,
       node_lconst="RsubBackward1", int_closed=True, exact=True,
       dunders=("__sub__",), rdunder="__rsub__", aliases=("subtract",)),
    Op(2, "mul", E, 2, "MulBackward0", "x * y", "g * y", "g * x", ("self", "other"),
       py=operator.mul, np_fwd=np.multiply, commutes=True, int_closed=True, exact=True,
       dunders=("__mul__", "__rmul__"), aliases=("multiply",)),
    Op(3, "div", E, 2, "DivBackward0", "x / y", "g / y", "-g * ((x / y) / y)", ("self", "other"),
       py=operator.truediv, domain_y=_POS, np_fwd=np.true_divide, exact=True,
       dunders=("__truediv__",), rdunder="__rtruediv__", aliases=("divide", "true_divide")),
    # (c2 1.0: the exponent is a Python number, PyTorch's pow of a tensor by a scalar)
    Op(4, "pow", E, 2, "PowBackward1", "sm.power(x, y, c2)", "g * sm.pow_dx(x, y, c2)",
       "g * sm.pow_dy(x, y, r)", ("self", "other", "result"), py=math.pow, np_fwd=_int_power,
       node_rconst="PowBackward0", node_lconst="PowBackward2", const_edge=False, domain=_POS,
       int_closed=True, dunders=("__pow__",), rdunder="__rpow__"),
    Op(5, "maximum", E, 2, "MaximumBackward0", "sm.maximum(x, y)", "sm.max_grad(g, x, y)",
       "sm.max_grad(g, y, x)", ("self", "other"), np_fwd=np.maximum, commutes=True,
       int_closed=True, inplace=False),
    Op(6, "minimum", E, 2, "MinimumBackward0", "sm.minimum(x, y)", "sm.max_grad(g, y, x)",
       "sm.max_grad(g, x, y)", ("self", "other"), np_fwd=np.minimum, commutes=True,
       int_closed=True, inplace=False),
    # ---- elementwise unary --------------------------------------------------------
    Op(7, "neg", E, 1, "NegBackward0", "-x", "-g", py=operator.neg, np_fwd=np.negative,
       int_closed=True, exact=True, dunders=("__neg__",), aliases=("negative",)),
    Op(8, "exp", E, 1, "ExpBackward0", "math.exp(x)", "g * r", saves=("result",), py=math.exp),
    Op(9, "log", E, 1, "LogBackward0", "math.log(x)", "g / x", saves=("self",), py=math.log,
       domain=_POS),
    Op(10, "log1p", E, 1, "Log1PBackward0", "math.log1p(x)", "g / (1.0 + x)", saves=("self",),
       py=math.log1p, domain=(-0.5, 2.0)),
    Op(11, "expm1", E, 1, "Expm1Backward0", "math.expm1(x)", "g * (r + 1.0)", saves=("result",),
       py=math.expm1),
    Op(12, "sqrt", E, 1, "SqrtBackward0", "math.sqrt(x)", "g / (2.0 * r)", saves=("result",),
       py=math.sqrt, domain=_POS, np_fwd=np.sqrt, exact=True),
    Op(13, "rsqrt", E, 1, "RsqrtBackward0", "1.0 / math.sqrt(x)", "-0.5 * g * r * r * r",
       saves=("result",), domain=_POS),
    Op(14, "sin", E, 1, "SinBackward0", "math.sin(x)", "g * math.cos(x)", saves=("self",),
       py=math.sin),
    Op(15, "cos", E, 1, "CosBackward0", "math.cos(x)", "-g * math.sin(x)", saves=("self",),
       py=math.cos),
    Op(16, "tan", E, 1, "TanBackward0", "math.tan(x)", "g * (1.0 + r * r)", saves=("result",),
       py=math.tan, domain=(-1.2, 1.2)),
    Op(17, "tanh", E, 1, "TanhBackward0", "math.tanh(x)", "g * (1.0 - r * r)", saves=("result",),
       py=math.tanh),
    Op(18, "sigmoid", E, 1, "SigmoidBackward0", "sm.sigmoid(x)", "g * r * (1.0 - r)",
       saves=("result",)),
    Op(19, "relu", E, 1, "ReluBackward0", "sm.relu(x)", "0.0 if r <= 0.0 else g", saves=("result",),
       np_fwd=lambda x: np.maximum(x, 0), int_closed=True, kept="r"),
    Op(20, "abs", E, 1, "AbsBackward0", "abs(x)", "g * sm.sign(x)", saves=("self",), py=abs,
       np_fwd=np.abs, int_closed=True, exact=True,
       dunders=("__abs__",), aliases=("absolute",)),
    Op(21, "sign", E, 1, "SignBackward0", "sm.sign(x)", "0.0", np_fwd=np.sign,
       int_closed=True),
    Op(22, "square", E, 1, "PowBackward0", "x * x", "g * (2.0 * x)", saves=("self",),
       np_fwd=np.square, int_closed=True, exact=True, kept="x"),
    Op(23, "reciprocal", E, 1, "ReciprocalBackward0", "1.0 / x", "-g * (r * r)", saves=("result",),
       domain=_POS, np_fwd=np.reciprocal, exact=True),
    Op(24, "softplus", E, 1, "SoftplusBackward0", "sm.softplus(x)", "g * sm.softplus_grad(x)",
       saves=("self",), domain=(-25.0, 25.0), inplace=False),
    Op(25, "erf", E, 1, "ErfBackward0", "math.erf(x)", "g * sm.erf_grad(x)", saves=("self",),
       py=math.erf),
    Op(26, "clamp", E, 1, "ClampBackward1", "sm.clamp(x, y, c2)", "g if x >= y and x <= c2 else 0.0",
       saves=("self",), np_fwd=np.clip, int_closed=True, aliases=("clip",)),
    Op(27, "sinc", E, 1, "SincBackward0", "sm.sinc(x)", "sm.sinc_grad(x, g)", saves=("self",)),
    # (y, c2: [eps, 1 - eps] of PyTorch's logit with eps, in x's dtype; 0, 0 without)
    Op(28, "logit", E, 1, "LogitBackward0", "sm.logit(x, y, c2)", "sm.logit_grad(x, g, y, c2)",
       saves=("self",), domain=(0.05, 0.95)),
    Op(29, "hypot", E, 2, "HypotBackward0", "math.hypot(x, y)", "g * x / r", "g * y / r",
       ("self", "other", "result"), py=math.hypot, commutes=True),
    Op(30, "xlogy", E, 2, "XlogyBackward0", "sm.xlogy(x, y)", "sm.xlogy_grad(x, y, g)",
       "g * x / y", ("self", "other"), domain_y=_POS),
    # PyTorch's atan backward: grad / (self * self + 1); atan2's: grad * other * recip and
    # grad * -self * recip, recip = 1 / (self * self + other * other), 0 where that is 0
    Op(31, "atan", E, 1, "AtanBackward0", "math.atan(x)", "g / (x * x + 1.0)", saves=("self",),
       py=math.atan, aliases=("arctan",)),
    Op(32, "atan2", E, 2, "Atan2Backward0", "math.atan2(x, y)", "g * y * sm.atan2_recip(x, y)",
       "g * -x * sm.atan2_recip(x, y)", ("self", "other"), py=math.atan2,
       aliases=("arctan2",)),
    # ---- rounding and the integer-valued division family ----------------------------
    # PyTorch's derivatives: trunc's is 0, frac's g; fmod and remainder send g to x and
    # -g times x / y rounded (toward zero for fmod, down for remainder) to y: div with a
    # rounding_mode, floor_divide and div_trunc here, whose gradient (DivBackward2) is
    # zeros, which a further gradient does not reach (PyTorch's own floor_divide has none:
    # ``division.floor_divide``; div_trunc is only ``div(..., rounding_mode='trunc')``)
    Op(33, "trunc", E, 1, "TruncBackward0", "sm.trunc(x)", "0.0", np_fwd=np.trunc,
       int_closed=True, exact=True, aliases=("fix",)),
    Op(34, "frac", E, 1, "FracBackward0", "x - sm.trunc(x)", "g"),
    Op(35, "fmod", E, 2, "FmodBackward1", "math.fmod(x, y)", "g", "-g * sm.div_trunc(x, y)",
       ("self", "other"), py=math.fmod, np_fwd=np.fmod, int_closed=True,
       node_rconst="FmodBackward0", domain_y=_POS),
    Op(36, "remainder", E, 2, "RemainderBackward1", "sm.remainder(x, y)", "g",
       "-g * sm.floor_divide(x, y)", ("self", "other"), np_fwd=np.remainder, int_closed=True,
       node_rconst="RemainderBackward0", domain_y=_POS, dunders=("__mod__",),
       rdunder="__rmod__"),
    Op(37, "floor_divide", E, 2, "DivBackward2", "sm.floor_divide(x, y)", "0.0", "0.0",
       np_fwd=np.floor_divide, int_closed=True, domain_y=_POS, dunders=("__floordiv__",),
       rdunder="__rfloordiv__"),
    Op(40, "div_trunc", E, 2, "DivBackward2", "sm.div_trunc(x, y)", "0.0", "0.0",
       domain_y=_POS, inplace=False, named=False),
    # ---- log of a sum of exponentials: PyTorch's backward formulas, so that a
    # create_graph gradient is theirs too (at a tie, and nan at the infinite ends) ----
    Op(38, "logaddexp", E, 2, "LogaddexpBackward0", "sm.logaddexp(x, y)",
       "g / (1.0 + math.exp(y - x))", "g / (1.0 + math.exp(x - y))", ("self", "other"),
       inplace=False),
    Op(39, "logaddexp2", E, 2, "Logaddexp2Backward0", "sm.logaddexp2(x, y)",
       "g / (1.0 + 2.0 ** (y - x))", "g / (1.0 + 2.0 ** (x - y))", ("self", "other"),
       inplace=False),
    # ---- entries with no inputs ---------------------------------------------------
    Op(256, "leaf", "source", 0, "AccumulateGrad"),
    Op(257, "const", "source", 0, ""),
    Op(258, "external", "source", 0, ""),
    # ---- structural ---------------------------------------------------------------
    Op(264, "where", "where", 2, "WhereBackward0", saves=("condition",)),
    Op(272, "expand", "gather", 1, "ExpandBackward0"),
    Op(273, "permute", "gather", 1, "PermuteBackward0"),
    Op(274, "t", "gather", 1, "TBackward0"),
    Op(275, "transpose", "gather", 1, "TransposeBackward0"),
    Op(276, "select", "gather", 1, "SelectBackward0"),
    Op(277, "slice", "gather", 1, "SliceBackward0"),
    Op(278, "split", "gather", 1, "SplitBackward0"),
    Op(279, "unbind", "gather", 1, "UnbindBackward0"),
    Op(304, "view", "reshape", 1, "ViewBackward0"),
    Op(305, "squeeze", "reshape", 1, "SqueezeBackward0"),
    Op(306, "squeeze_dim", "reshape", 1, "SqueezeBackward1"),
    Op(307, "unsqueeze", "reshape", 1, "UnsqueezeBackward0"),
    Op(308, "squeeze_mm", "reshape", 1, "SqueezeBackward4"),   # vector @ matrix's last step
    Op(309, "clone", "reshape", 1, "CloneBackward0"),
    Op(310, "to_copy", "reshape", 1, "ToCopyBackward0"),
    Op(336, "index", "index", 1, "IndexBackward0", saves=("indices",)),
    Op(337, "max_dim", "index", 1, "MaxBackward0", saves=("indices",)),
    Op(338, "min_dim", "index", 1, "MinBackward0", saves=("indices",)),
    Op(352, "sum", "reduce", 1, "SumBackward0"),
    Op(353, "sum_dim", "reduce", 1, "SumBackward1"),
    Op(354, "mean", "reduce", 1, "MeanBackward0"),
    Op(355, "mean_dim", "reduce", 1, "MeanBackward1"),
    Op(356, "amax", "reduce", 1, "AmaxBackward0", saves=("self", "result")),
    Op(357, "amin", "reduce", 1, "AminBackward0", saves=("self", "result")),
    Op(358, "max_all", "reduce", 1, "MaxBackward1", saves=("self", "result")),
    Op(359, "min_all", "reduce", 1, "MinBackward1", saves=("self", "result")),
    Op(360, "prod", "reduce", 1, "ProdBackward0", saves=("self", "result")),
    Op(361, "prod_dim", "reduce", 1, "ProdBackward1", saves=("self", "result")),
    Op(384, "mm", "matmul", 2, "MmBackward0", saves=("self", "other")),
    Op(385, "bmm", "matmul", 2, "BmmBackward0", saves=("self", "other")),
    Op(386, "mv", "matmul", 2, "MvBackward0", saves=("self", "other")),
    Op(387, "dot", "matmul", 2, "DotBackward0", saves=("self", "other")),
    Op(388, "matmul", "matmul", 2, "UnsafeViewBackward0", saves=("self", "other")),
    Op(400, "cat", "cat", -1, "CatBackward0"),
    Op(401, "stack", "cat", -1, "StackBackward0"),
    Op(408, "softmax", "softmax", 1, "SoftmaxBackward0", saves=("result",)),
    Op(409, "log_softmax", "softmax", 1, "LogSoftmaxBackward0", saves=("result",)),
    Op(410, "logsumexp", "softmax", 1, "LogsumexpBackward0", saves=("self", "result")),
    # + - * / of operands of different shapes, read in place (no materialised broadcast)
    Op(440, "broadcast_add", "broadcast", 2, "AddBackward0"),
    Op(441, "broadcast_sub", "broadcast", 2, "SubBackward0"),
    Op(442, "broadcast_mul", "broadcast", 2, "MulBackward0", saves=("self", "other")),
    Op(443, "broadcast_div", "broadcast", 2, "DivBackward0", saves=("self", "other")),
    # one entry per output of a custom autograd.Function: a host entry, whose backward
    # runs in Python between two compiled sweeps
    Op(416, "function", "host", -1, "Backward"),
    # ---- comparisons (only on traced tapes) -------------------------------------------
    Op(420, "lt", "compare", 2, "", "1.0 if x < y else 0.0", np_fwd=np.less,
       dunders=("__lt__",)),
    Op(421, "le", "compare", 2, "", "1.0 if x <= y else 0.0", np_fwd=np.less_equal,
       dunders=("__le__",)),
    Op(422, "gt", "compare", 2, "", "1.0 if x > y else 0.0", np_fwd=np.greater,
       dunders=("__gt__",)),
    Op(423, "ge", "compare", 2, "", "1.0 if x >= y else 0.0", np_fwd=np.greater_equal,
       dunders=("__ge__",)),
    Op(424, "eq", "compare", 2, "", "1.0 if x == y else 0.0", np_fwd=np.equal,
       dunders=("__eq__",)),
    Op(425, "ne", "compare", 2, "", "1.0 if x != y else 0.0", np_fwd=np.not_equal,
       dunders=("__ne__",)),
    Op(436, "detach", "stop", 1, ""),
)

# Each kind owns a fixed band of op codes, in this order: a sweep dispatches on a code's
# band, and a new op takes a free code in its kind's band, so no code ever changes.
# (first, last) per kind; the bands never overlap and never move.
BANDS = {"ew": (0, 255), "source": (256, 263), "where": (264, 271), "gather": (272, 303),
         "reshape": (304, 335), "index": (336, 351), "reduce": (352, 383),
         "matmul": (384, 399), "cat": (400, 407), "softmax": (408, 415), "host": (416, 419),
         "compare": (420, 435), "stop": (436, 439), "broadcast": (440, 447)}
KINDS = tuple(BANDS)


def _check(ops):
    """Names and codes unique, every code inside its kind's band."""
    names, codes = [op.name for op in ops], [op.code for op in ops]
    if len(set(names)) != len(names) or len(set(codes)) != len(codes):
        raise AssertionError("op names and codes must be unique")
    for op in ops:
        lo, hi = BANDS[op.kind]
        if not lo <= op.code <= hi:
            raise AssertionError(f"op {op.name}: code {op.code} is outside the {op.kind} band")
        if op.kind == "broadcast":        # (one code away from its elementwise op's)
            ew = next(o for o in ops if o.name == op.name[len("broadcast_"):])
            if op.code - lo != ew.code:
                raise AssertionError(f"op {op.name}: code {op.code} is not its band's first "
                                     f"plus {ew.name}'s code {ew.code}")


_check(OPS)
BY_NAME = {op.name: op for op in OPS}
CODE = {op.name: op.code for op in OPS}
BY_CODE = tuple(next((op for op in OPS if op.code == c), None)
                for c in range(max(CODE.values()) + 1))   # None: a free code
NODE_NAMES = tuple(op.node if op else "" for op in BY_CODE)


def kind_range(kind):
    """(first, last) op code of a kind's band."""
    return BANDS[kind]


EW_OPS = tuple(op for op in OPS if op.kind == "ew")
UNARY = tuple(op for op in EW_OPS if op.arity == 1)
BINARY = tuple(op for op in EW_OPS if op.arity == 2)
COMPARE_OPS = tuple(op for op in OPS if op.kind == "compare")
# a broadcast op's elementwise op (its rules), by the broadcast op's code; and back
EW_OF = {op.code: BY_NAME[op.name[len("broadcast_"):]] for op in OPS if op.kind == "broadcast"}
BROADCAST_OF = {ew.code: code for code, ew in EW_OF.items()}

"""The op table: every opcode of the tape, declared once.

An entry gives the op's name, its kind (which sweep branch runs it), its arity, the
PyTorch Node name that graph views show, and for elementwise ops the forward rule and
the reverse (adjoint) rule as scalar expressions.  Everything else is derived from
this table: the opcodes, the Tensor methods, the generated dispatch of the compiled
sweeps (``tapegrad/kernels/generated.py``), Node names and the per-op tests.

Rule expressions are written in the names
  ``x``, ``y``  the operands (``y`` is the constant for a tensor-and-scalar op),
  ``r``         the op's result,
  ``g``         the adjoint arriving at the result,
  ``c2``        the entry's second constant (clamp's upper bound),
and may call ``math`` and the helpers of ``tapegrad.ops.scalar_math``.

Kinds, in opcode order (the sweep dispatches on ranges of codes):
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
  ``softmax`` softmax / log_softmax along a dim (extras: outer, n, inner), fused: one
              entry where the composition would be five;
  ``host``    computed in Python (custom Functions): the sweep stops and resumes;
  ``compare`` comparisons (0.0 / 1.0), recorded only while tracing so that a replay
              recomputes masks and checks the guards that depend on them; no gradient;
  ``stop``    ``detach`` while tracing: a copy that a replay recomputes, no gradient.

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
    name: str
    kind: str
    arity: int
    node: str                 # PyTorch Node name shown by grad_fn.name()
    fwd: str = ""             # ew: forward expression in x, y (c2)
    gx: str = ""              # ew: adjoint of x in x, y, r, g (c2)
    gy: str = ""              # ew: adjoint of y
    saves: tuple = ()         # saved values shown on the Node: 'self', 'other', 'result'
    py: object = None         # ew: fast scalar forward (may raise: falls back to numpy)
    np_fwd: object = None     # ew: NumPy forward on arrays
    node_rconst: str = ""     # Node name when the right operand is a Python scalar
    node_lconst: str = ""     # Node name when the left operand is a Python scalar
    domain: tuple = (-2.0, 2.0)    # test inputs for x
    domain_y: tuple = (-2.0, 2.0)  # test inputs for y
    commutes: bool = False    # a Python scalar on the left may be swapped to the right
    const_edge: bool = True   # a Python scalar operand shows as a (None, 0) next function


def _sigmoid(x):
    # 1 / (1 + exp(-x)) without overflow: exp(-log(1 + exp(-x)))
    return np.exp(-np.logaddexp(0, -x))


def _softplus(x):
    # PyTorch's threshold: linear above 20
    return np.where(x > 20.0, x, np.logaddexp(0, x))


E = "ew"
_POS = (0.1, 3.0)

OPS = (
    # ---- elementwise binary -------------------------------------------------------
    Op("add", E, 2, "AddBackward0", "x + y", "g", "g", py=operator.add, np_fwd=np.add,
       commutes=True),
    Op("sub", E, 2, "SubBackward0", "x - y", "g", "-g", py=operator.sub, np_fwd=np.subtract,
       node_lconst="RsubBackward1"),
    Op("mul", E, 2, "MulBackward0", "x * y", "g * y", "g * x", ("self", "other"),
       py=operator.mul, np_fwd=np.multiply, commutes=True),
    Op("div", E, 2, "DivBackward0", "x / y", "g / y", "-g * x / (y * y)", ("self", "other"),
       py=operator.truediv, np_fwd=np.true_divide, domain_y=_POS),
    Op("pow", E, 2, "PowBackward1", "sm.rpow(x, y)", "g * sm.pow_dx(x, y)", "g * sm.pow_dy(x, r)",
       ("self", "other", "result"), py=math.pow, np_fwd=np.power, node_rconst="PowBackward0",
       node_lconst="PowBackward2", const_edge=False,
       domain=_POS),
    Op("maximum", E, 2, "MaximumBackward0", "max(x, y)", "g * sm.max_share(x, y)",
       "g * sm.max_share(y, x)", ("self", "other"), py=max, np_fwd=np.maximum, commutes=True),
    Op("minimum", E, 2, "MinimumBackward0", "min(x, y)", "g * sm.max_share(y, x)",
       "g * sm.max_share(x, y)", ("self", "other"), py=min, np_fwd=np.minimum, commutes=True),
    # ---- elementwise unary --------------------------------------------------------
    Op("neg", E, 1, "NegBackward0", "-x", "-g", py=operator.neg, np_fwd=np.negative),
    Op("exp", E, 1, "ExpBackward0", "math.exp(x)", "g * r", saves=("result",), py=math.exp,
       np_fwd=np.exp),
    Op("log", E, 1, "LogBackward0", "math.log(x)", "g / x", saves=("self",), py=math.log,
       np_fwd=np.log, domain=_POS),
    Op("log1p", E, 1, "Log1PBackward0", "math.log1p(x)", "g / (1.0 + x)", saves=("self",),
       py=math.log1p, np_fwd=np.log1p, domain=(-0.5, 2.0)),
    Op("expm1", E, 1, "Expm1Backward0", "math.expm1(x)", "g * (r + 1.0)", saves=("result",),
       py=math.expm1, np_fwd=np.expm1),
    Op("sqrt", E, 1, "SqrtBackward0", "math.sqrt(x)", "g / (2.0 * r)", saves=("result",),
       py=math.sqrt, np_fwd=np.sqrt, domain=_POS),
    Op("rsqrt", E, 1, "RsqrtBackward0", "1.0 / math.sqrt(x)", "-0.5 * g * r * r * r",
       saves=("result",), np_fwd=lambda x: 1.0 / np.sqrt(x), domain=_POS),
    Op("sin", E, 1, "SinBackward0", "math.sin(x)", "g * math.cos(x)", saves=("self",),
       py=math.sin, np_fwd=np.sin),
    Op("cos", E, 1, "CosBackward0", "math.cos(x)", "-g * math.sin(x)", saves=("self",),
       py=math.cos, np_fwd=np.cos),
    Op("tan", E, 1, "TanBackward0", "math.tan(x)", "g * (1.0 + r * r)", saves=("result",),
       py=math.tan, np_fwd=np.tan, domain=(-1.2, 1.2)),
    Op("tanh", E, 1, "TanhBackward0", "math.tanh(x)", "g * (1.0 - r * r)", saves=("result",),
       py=math.tanh, np_fwd=np.tanh),
    Op("sigmoid", E, 1, "SigmoidBackward0", "sm.sigmoid(x)", "g * r * (1.0 - r)",
       saves=("result",), py=sm.sigmoid, np_fwd=_sigmoid),
    Op("relu", E, 1, "ReluBackward0", "sm.relu(x)", "g * sm.step(r)", saves=("result",),
       py=sm.relu, np_fwd=lambda x: np.maximum(x, 0)),
    Op("abs", E, 1, "AbsBackward0", "abs(x)", "g * sm.sign(x)", saves=("self",), py=abs,
       np_fwd=np.abs),
    Op("sign", E, 1, "SignBackward0", "sm.sign(x)", "0.0 * g", py=sm.sign, np_fwd=np.sign),
    Op("square", E, 1, "PowBackward0", "x * x", "2.0 * g * x", saves=("self",),
       np_fwd=np.square),
    Op("reciprocal", E, 1, "ReciprocalBackward0", "1.0 / x", "-g * r * r", saves=("result",),
       np_fwd=np.reciprocal, domain=_POS),
    Op("softplus", E, 1, "SoftplusBackward0", "sm.softplus(x)", "g * sm.softplus_grad(x)",
       saves=("self",), py=sm.softplus, np_fwd=_softplus, domain=(-25.0, 25.0)),
    Op("erf", E, 1, "ErfBackward0", "math.erf(x)", "g * sm.erf_grad(x)", saves=("self",),
       py=math.erf),
    Op("clamp", E, 1, "ClampBackward1", "sm.clamp(x, y, c2)", "g * sm.in_range(x, y, c2)",
       saves=("self",)),
    # ---- entries with no inputs ---------------------------------------------------
    Op("leaf", "source", 0, "AccumulateGrad"),
    Op("const", "source", 0, ""),
    Op("external", "source", 0, ""),
    # ---- structural ---------------------------------------------------------------
    Op("where", "where", 2, "WhereBackward0", saves=("condition",)),
    Op("expand", "gather", 1, "ExpandBackward0"),
    Op("permute", "gather", 1, "PermuteBackward0"),
    Op("t", "gather", 1, "TBackward0"),
    Op("transpose", "gather", 1, "TransposeBackward0"),
    Op("select", "gather", 1, "SelectBackward0"),
    Op("slice", "gather", 1, "SliceBackward0"),
    Op("split", "gather", 1, "SplitBackward0"),
    Op("unbind", "gather", 1, "UnbindBackward0"),
    Op("view", "reshape", 1, "ViewBackward0"),
    Op("squeeze", "reshape", 1, "SqueezeBackward0"),
    Op("squeeze_dim", "reshape", 1, "SqueezeBackward1"),
    Op("unsqueeze", "reshape", 1, "UnsqueezeBackward0"),
    Op("squeeze_mm", "reshape", 1, "SqueezeBackward4"),   # vector @ matrix's last step
    Op("clone", "reshape", 1, "CloneBackward0"),
    Op("to_copy", "reshape", 1, "ToCopyBackward0"),
    Op("index", "index", 1, "IndexBackward0", saves=("indices",)),
    Op("max_dim", "index", 1, "MaxBackward0", saves=("indices",)),
    Op("min_dim", "index", 1, "MinBackward0", saves=("indices",)),
    Op("sum", "reduce", 1, "SumBackward0"),
    Op("sum_dim", "reduce", 1, "SumBackward1"),
    Op("mean", "reduce", 1, "MeanBackward0"),
    Op("mean_dim", "reduce", 1, "MeanBackward1"),
    Op("amax", "reduce", 1, "AmaxBackward0", saves=("self", "result")),
    Op("amin", "reduce", 1, "AminBackward0", saves=("self", "result")),
    Op("max_all", "reduce", 1, "MaxBackward1", saves=("self", "result")),
    Op("min_all", "reduce", 1, "MinBackward1", saves=("self", "result")),
    Op("prod", "reduce", 1, "ProdBackward0", saves=("self", "result")),
    Op("prod_dim", "reduce", 1, "ProdBackward1", saves=("self", "result")),
    Op("mm", "matmul", 2, "MmBackward0", saves=("self", "other")),
    Op("bmm", "matmul", 2, "BmmBackward0", saves=("self", "other")),
    Op("mv", "matmul", 2, "MvBackward0", saves=("self", "other")),
    Op("dot", "matmul", 2, "DotBackward0", saves=("self", "other")),
    Op("matmul", "matmul", 2, "UnsafeViewBackward0", saves=("self", "other")),
    Op("cat", "cat", -1, "CatBackward0"),
    Op("stack", "cat", -1, "StackBackward0"),
    Op("softmax", "softmax", 1, "SoftmaxBackward0", saves=("result",)),
    Op("log_softmax", "softmax", 1, "LogSoftmaxBackward0", saves=("result",)),
    # one entry per output of a custom autograd.Function: a host entry, whose backward
    # runs in Python between two compiled sweeps
    Op("function", "host", -1, "Backward"),
    # ---- comparisons (only on traced tapes) -------------------------------------------
    Op("lt", "compare", 2, "", "1.0 if x < y else 0.0", np_fwd=np.less),
    Op("le", "compare", 2, "", "1.0 if x <= y else 0.0", np_fwd=np.less_equal),
    Op("gt", "compare", 2, "", "1.0 if x > y else 0.0", np_fwd=np.greater),
    Op("ge", "compare", 2, "", "1.0 if x >= y else 0.0", np_fwd=np.greater_equal),
    Op("eq", "compare", 2, "", "1.0 if x == y else 0.0", np_fwd=np.equal),
    Op("ne", "compare", 2, "", "1.0 if x != y else 0.0", np_fwd=np.not_equal),
    Op("detach", "stop", 1, ""),
)

KINDS = ("ew", "source", "where", "gather", "reshape", "index", "reduce", "matmul", "cat",
         "softmax", "host", "compare", "stop")

BY_NAME = {op.name: op for op in OPS}
CODE = {op.name: i for i, op in enumerate(OPS)}
NODE_NAMES = tuple(op.node for op in OPS)


def kind_range(kind):
    """(first, last) opcode of a kind: the table lists each kind contiguously."""
    codes = [i for i, op in enumerate(OPS) if op.kind == kind]
    assert codes == list(range(codes[0], codes[-1] + 1)), f"kind {kind} is not contiguous"
    return codes[0], codes[-1]


EW_OPS = tuple(op for op in OPS if op.kind == "ew")
UNARY = tuple(op for op in EW_OPS if op.arity == 1)
BINARY = tuple(op for op in EW_OPS if op.arity == 2)
COMPARE_OPS = tuple(op for op in OPS if op.kind == "compare")

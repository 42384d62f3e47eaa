"""Elementwise ops, derived from the op table.

For each ``ew`` entry of the table this module builds the function ``tapegrad.<name>``
and the Tensor method/operator.  Two paths:
  * the scalar fast path: both operands are 0-d float64 (a Python float) or a Python
    number; the value is computed with ``math``/``operator`` and one tuple is staged
    on the tape;
  * the array paths: the table's compiled rule, element by element (the block kernels
    for large float64 arrays), with PyTorch's type promotion; broadcast operands are
    recorded as hidden ``expand`` entries first.  Integer tensors of integer-closed ops
    use the op's NumPy form.
Every float path computes the table's one rule: where Python's ``math`` raises (0-d
fast path), the compiled rule answers, so nan and inf come out as on arrays.
"""
import functools
import math

import numpy as np

from . import dtypes
from .grad_mode import STATE
from .autograd.engine import KIND_RULES
from .composite import composite
from .kernels import broadcast, fused
from .kernels.forward import ew_array, ew_map
from .kernels.generated import ew_fwd
from .ops import scalar_math
from .ops.table import BROADCAST_OF, BY_CODE, BY_NAME, CODE, COMPARE_OPS, EW_OPS
from .record import broadcast_shape, broadcast_to, expand_strides
from .tape import PLACE_MIN, current_tape, roomy_tape
from .tensor import Tensor, _leaf, _new, _norm, _result, buf, recording, requires_grad
from .tracing import freeze, traced_entry

_NUMBERS = (float, int, bool)
_BROADCAST = BROADCAST_OF        # + - * / of arrays of different shapes: a broadcast entry


def _py_rule(op):
    """The op's scalar forward for the fast path: its ``py`` builtin or its rule text (a
    unary op's constants 0, as the fast path records them)."""
    if op.py is not None:
        return op.py
    args = ("x, y=0.0" if op.arity == 1 else "x, y") + ", c2=0.0"
    return eval(f"lambda {args}: {op.fwd}", {"math": math, "sm": scalar_math})


# -- type promotion ----------------------------------------------------------------------
def _operand_dtype(v):
    if v.__class__ is Tensor:
        return v.dtype, v.ndim == 0, 0
    if isinstance(v, bool):
        return dtypes.bool_, True, 1
    if isinstance(v, int):
        return dtypes.int64, True, 1
    return dtypes.get_default_dtype(), True, 1


def _same_float_dtype(operands):
    """The common float dtype of tensor operands (Python numbers aside), else None."""
    common = None
    for v in operands:
        if v.__class__ is Tensor:
            d = v._d
            nd = np.dtype(np.float64) if d.__class__ is float else d.dtype
            if common is None:
                common = nd
            elif nd != common:
                return None
        elif v.__class__ is not float and v.__class__ is not int:
            return None
    return dtypes.from_np(common) if common is not None and common.kind == "f" else None


def result_dtype(*operands):
    """PyTorch's promotion: the highest category wins; within it, dimensioned tensors
    beat 0-d tensors, which beat Python numbers (a float number in an int op gives the
    default float dtype)."""
    same = _same_float_dtype(operands)
    if same is not None:
        return same
    infos = [_operand_dtype(v) for v in operands]
    cat = max(dtypes.category(d) for d, _, _ in infos)
    for tier in ((False, 0), (True, 0), (True, 1)):
        ds = [d for d, zero, py in infos if (zero, py) == tier and dtypes.category(d) == cat]
        if ds:
            if tier[1] == 1 and cat == 2:
                return dtypes.get_default_dtype()
            if dtypes.uint8 in ds and dtypes.int8 in ds:
                return dtypes.int16          # (PyTorch's: a byte of either sign fits)
            return max(ds, key=lambda d: d._rank)
    raise AssertionError("unreachable")


def _value(v, np_dtype):
    if v.__class__ is Tensor:
        d = v._d
        return np.asarray(d, np_dtype) if d.__class__ is float or d.dtype != np_dtype else d
    return v


# -- the general path ---------------------------------------------------------------------
def _refuse(op, operands, rd):
    """PyTorch's errors for what it does not compute, raised before NumPy raises errors of
    its own: ``-`` of a bool (a Python ``bool`` is one too), an integer to a negative
    Python integer power."""
    if op.name in ("sub", "neg"):
        bools = sum(_operand_dtype(v)[0] is dtypes.bool_ for v in operands)
        if op.name == "neg" and bools:
            raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. "
                               "If you are trying to invert a mask, use the `~` or "
                               "`logical_not()` operator instead.")
        if bools == 2:
            raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not "
                               "supported. Use the `^` or `logical_xor()` operator instead.")
        if bools:
            raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not "
                               "supported. If you are trying to invert a mask, use the `~` or "
                               "`logical_not()` operator instead.")
    elif op.name == "pow" and not rd.is_floating_point and isinstance(operands[1], int) \
            and operands[1] < 0:
        raise RuntimeError("Integers to negative integer powers are not allowed.")
    elif op.name in INTEGER_KERNELS and not rd.is_floating_point:
        refuse_integer_division(INTEGER_KERNELS[op.name], operands, rd)


# PyTorch's CPU kernels of the division family, named in its errors for integer dtypes
INTEGER_KERNELS = {"remainder": "remainder_cpu", "fmod": "fmod_cpu",
                   "floor_divide": "div_floor_cpu", "trunc": "trunc_vml_cpu",
                   "frac": "frac_cpu"}


def refuse_integer_division(kernel, operands, rd):
    """PyTorch's errors for the division family on integers (result dtype ``rd``), in its
    order: operands that do not broadcast; bools (and for ``frac`` any integers) have no
    kernel; an integer divisor 0 raises where it divides something."""
    shape = broadcast_shape(*(np.shape(v._d if v.__class__ is Tensor else v)
                              for v in operands)) if len(operands) == 2 else ()
    if rd is dtypes.bool_ or kernel == "frac_cpu":
        raise NotImplementedError(f'"{kernel}" not implemented for '
                                  f"'{dtypes.TORCH_NAMES[rd.name][0]}'")
    if len(operands) == 2 and math.prod(shape) and not np.all(_integer(operands[1], rd.np)):
        raise RuntimeError("ZeroDivisionError")


def _integer(v, np_dtype):
    """An operand of an integer op in its dtype: a Python int wraps round, as PyTorch's
    (a uint8 tensor // -2 divides by 254)."""
    if v.__class__ is int:
        return np.array(v).astype(np_dtype)[()]
    return _value(v, np_dtype)


def _general(op, x, y=None, c2=0.0):
    """``op(x, y)`` for any operands (x may be a Python number when y is a Tensor); of a
    unary op, ``y`` and ``c2`` are its constants (clamp's bounds, logit's)."""
    operands = (x,) if op.arity == 1 else (x, y)
    for v in operands:
        if v.__class__ is not Tensor and not isinstance(v, _NUMBERS):
            raise TypeError(f"{op.name}(): argument must be a Tensor or a number, "
                            f"not {type(v).__name__}")
    # (square is PyTorch's pow(x, 2): a bool squares to an int64)
    rd = result_dtype(*operands) if op.name != "square" else result_dtype(x, 2)
    _refuse(op, operands, rd)
    if not rd.is_floating_point and not op.int_closed:
        rd = dtypes.get_default_dtype()
    vals = [(_value if rd.is_floating_point else _integer)(v, rd.np) for v in operands]
    shapes = [np.shape(v) for v in vals if v.__class__ is not float and not isinstance(v, (int, bool))]
    out_shape = shapes[0] if len(shapes) == 1 else broadcast_shape(*shapes) if shapes else ()
    if op.arity == 1 and y is not None:
        r = op.np_fwd(vals[0], y, c2) if not rd.is_floating_point else \
            ew_map(CODE[op.name], vals[0], y, c2)
    elif not rd.is_floating_point or op.exact:
        with np.errstate(over="ignore"):     # (int64's lowest // -1: itself, as PyTorch)
            r = op.np_fwd(*vals)
    else:
        r = ew_map(CODE[op.name], *vals, c2=c2)
    r = np.asarray(r, rd.np)
    if r.shape != tuple(out_shape):
        r = np.broadcast_to(r, out_shape).copy()
    t = recording(*operands) if rd.is_floating_point else None
    if t is None:
        if STATE.trace is not None and not rd.is_floating_point:
            freeze(*operands)        # an integer / bool result of traced values: guarded
        return _leaf(_norm(r))
    ia = ib = -1
    c = 0.0
    saves = op.saves
    if x.__class__ is Tensor:
        ia = broadcast_to(t, buf(t, x, "self" in saves), vals[0], out_shape)
    else:
        c = float(x)
    if op.arity == 2:
        if y.__class__ is Tensor:
            ib = broadcast_to(t, buf(t, y, "other" in saves), vals[1], out_shape)
        else:
            c = float(y)
    elif y is not None:
        c = float(y)
    i = t.append(CODE[op.name], ia, ib, r, c=c, c2=c2)
    return _result(_norm(r), t, i, requires_grad(*operands))


# -- the fast paths ------------------------------------------------------------------------
def _array_result(code, r, x, y, c, sx, sy):
    """Tensor for ``r``, the result of a float-array op on operands of one shape and
    dtype (or a Python number ``y``), recorded if an operand requires grad."""
    rg = x._rg or (y.__class__ is Tensor and y._rg)
    if rg and STATE.grad:
        t = current_tape(x, y)
    else:
        t = recording(x, y) if STATE.trace else None
        if t is None:
            return _leaf(r)
    ia = buf(t, x, sx)
    ib = buf(t, y, sy) if y.__class__ is Tensor else -1
    return _result(r, t, t.append(code, ia, ib, r, c=c), rg)


@functools.lru_cache(maxsize=256)
def _loops(shape, sa, sb):
    """The ``broadcast`` kind's extras for an output of ``shape`` whose operands have
    element strides ``sa`` and ``sb`` along it: adjacent dims merged where both allow,
    padded to four loops; None past four."""
    dims = [(n, a, b) for n, a, b in zip(shape, sa, sb) if n != 1]
    merged = []
    for n, a, b in dims:
        if merged:
            m, ma, mb = merged[-1]
            if ma == a * n and mb == b * n:
                merged[-1] = (m * n, a, b)
                continue
        merged.append((n, a, b))
    if len(merged) > 4:
        return None
    merged = [(1, 0, 0)] * (4 - len(merged)) + merged
    return tuple(n for n, _, _ in merged) + tuple(a for _, a, _ in merged) + \
        tuple(b for _, _, b in merged)


def _broadcast_entry(code, arr, x, y, xd, yd, out_shape):
    """``x op y`` (+ - * /) of two arrays of one float dtype and different shapes (or a
    float64 array and a 0-d one), as one ``broadcast`` entry that reads both in place;
    None where its loops do not fit (more than four dims after merging)."""
    extras = _loops(out_shape, expand_strides(np.shape(xd), out_shape),
                    expand_strides(np.shape(yd), out_shape))
    if extras is None:
        return None
    bcode = _BROADCAST[code]
    n = math.prod(out_shape)
    fill = _broadcast_fill(bcode, xd, yd, n, extras)
    t = recording(x, y)
    if t is None:
        return _leaf(arr(xd, yd) if fill is None else fill(np.empty(out_shape)))
    rg, saves = requires_grad(x, y), bool(BY_CODE[bcode].saves)
    if n >= PLACE_MIN and (yd if xd.__class__ is float else xd).dtype.char == "d":
        # into the arena, as _large_result
        t = roomy_tape(n, x, y)
        i, out = t.append_into(bcode, buf(t, x, saves), buf(t, y, saves), out_shape, n,
                               fill or (lambda out: arr(xd, yd, out=out)), extras=extras)
        return _result(out, t, i, rg)
    r = arr(xd, yd) if fill is None else fill(np.empty(out_shape))
    return _result(r, t, t.append(bcode, buf(t, x, saves), buf(t, y, saves), r, extras), rg)


_ROW_MAX = 256         # rows up to this long: the broadcast kind's loops (below: NumPy's)


class _Fill:
    """Fills an output array with x op y, two float64 arrays broadcast, by the broadcast
    kind's forward (``kernels.broadcast.apply``: the loops a replay runs)."""
    __slots__ = ("args",)

    def __init__(self, *args):
        self.args = args

    def __call__(self, out):
        bcode, xd, yd, extras = self.args
        broadcast.apply(bcode, xd.reshape(-1), 0, yd.reshape(-1), 0, out.reshape(-1), 0,
                        extras)
        return out


def _broadcast_fill(bcode, xd, yd, n, extras):
    """A ``_Fill`` for ``xd op yd`` where NumPy's broadcast loop is slow: two float64
    arrays whose rows (the innermost merged loop) are short and both contiguous.  NumPy
    pays about 20 ns per row: x - mu of (1000, 1, 10) and (10, 10) took twice as long as
    these loops (a column beside rows, read once per row, is NumPy's to do).  The same
    IEEE operations either way: the same bits.  None elsewhere (and until the background
    compile of a cold cache has compiled the loops: ``KIND_RULES``)."""
    if n >= 512 and extras[3] <= _ROW_MAX and extras[7] == 1 == extras[11] and \
            xd.__class__ is not float and \
            yd.__class__ is not float and xd.dtype.char == "d" == yd.dtype.char and \
            xd.flags.c_contiguous and yd.flags.c_contiguous and not KIND_RULES.compiling():
        return _Fill(bcode, xd, yd, extras)
    return None


def _broadcast_result(code, arr, x, y, sx, sy):
    """A float op on two arrays of one dtype and different shapes: ``_general``'s result
    and recording (each operand broadcast by a hidden expand entry where needed),
    without its promotion and Python-number cases.  A trailing-dims operand (a bias)
    skips the general shape rule.  + - * / are one ``broadcast`` entry."""
    xd, yd = x._d, y._d
    xs, ys = xd.shape, yd.shape
    out_shape = xs if ys == xs[len(xs) - len(ys):] else broadcast_shape(xs, ys)
    n = math.prod(out_shape)
    if code in _BROADCAST and n:
        out = _broadcast_entry(code, arr, x, y, xd, yd, out_shape)
        if out is not None:
            return out
    exact = arr.__class__ is np.ufunc
    if exact and xd.dtype.char == "d" and n >= PLACE_MIN and (
            (STATE.grad and (x._rg or y._rg)) or recording(x, y) is not None):
        # large: the ufunc writes straight into the tape's arena (as _large_result)
        t = roomy_tape(n, x, y)
        ia = broadcast_to(t, buf(t, x, sx), xd, out_shape)
        ib = broadcast_to(t, buf(t, y, sy), yd, out_shape)
        i, out = t.append_into(code, ia, ib, out_shape, n, lambda out: arr(xd, yd, out=out))
        return _result(out, t, i, requires_grad(x, y))
    r = arr(xd, yd) if exact else \
        arr(xd if xs == out_shape else np.broadcast_to(xd, out_shape),
            yd if ys == out_shape else np.broadcast_to(yd, out_shape))
    t = recording(x, y)
    if t is None:
        return _leaf(_norm(r))
    ia = broadcast_to(t, buf(t, x, sx), xd, out_shape)
    ib = broadcast_to(t, buf(t, y, sy), yd, out_shape)
    return _result(_norm(r), t, t.append(code, ia, ib, r), x._rg or y._rg)


def _large(x, d):
    """Is ``d`` (x's value) a float64 array large enough to be computed straight into
    the tape's arena?  (From ``fused.FUSE_MIN`` on, smaller ones are computed by the
    same block kernels, ``ew_array``, and copied at the flush: cheaper up to here.)"""
    return d.size >= PLACE_MIN and d.dtype.char == "d" and d.flags.c_contiguous


def _large_result(code, x, y, c, sx, sy):
    """A float64 op on large arrays (``y`` a same-shape float64 tensor, a Python number,
    or a 0-d float64 tensor: computed as with that number, recorded with y broadcast
    by a hidden expand) by the block kernels: vectorised, on both cores; when recorded,
    the result is written straight into the tape's arena (no copy, no fresh memory)."""
    xd = x._d
    yd = y._d if y.__class__ is Tensor else None
    scalar = yd.__class__ is float
    if scalar:
        c, yd = yd, None
    rg = requires_grad(x, y)
    if (not STATE.grad or not rg) and recording(x, y) is None:
        return _leaf(fused.ew_into(code, xd, yd, c, np.empty_like(xd)))
    t = roomy_tape(xd.size, x, y)
    ia = buf(t, x, sx)
    ib = -1 if y.__class__ is not Tensor else \
        broadcast_to(t, buf(t, y, sy), c, xd.shape) if scalar else buf(t, y, sy)
    i, out = t.append_into(code, ia, ib, xd.shape, xd.size,
                           lambda out: fused.ew_into(code, xd, yd, c, out), 0.0 if scalar else c)
    return _result(out, t, i, rg)


def _stage(code, x, sx, y, sy, c, r, rg=True):
    """Record a scalar op: one tuple staged on the current tape (``x`` / ``y`` None for
    a Python-number operand, whose value is the constant ``c``)."""
    t = STATE.tape
    if t is None or t.next >= t.flush_at:
        t = None   # drop this frame's reference: maintain() counts them
        t = current_tape(x, y)
    uid = t.uid
    # _i is read before _tid (register() writes _tid first): a leaf shared with another
    # thread that registers it meanwhile can only fail the check, never mix the pair
    ia = -1
    if x is not None:
        ia = x._i
        if x._tid != uid:
            ia = buf(t, x, sx)
    ib = -1
    if y is not None:
        ib = y._i
        if y._tid != uid:
            ib = buf(t, y, sy)
    i = t.next
    t.next = i + 1
    t._stage_put((i, code, ia, ib, c, r))
    o = _new(Tensor)
    o._d, o._t, o._tid, o._i, o._rg = r, t, uid, i, rg
    return o


def _traced(code, x, sx, y, sy, c, r):
    """A scalar op whose operands need no grad: staged all the same while tracing if an
    operand is a traced value (a replay recomputes it), else a leaf."""
    if recording(x, y) is None:
        return _leaf(r)
    o = _stage(code, x, sx, y if y.__class__ is Tensor else None, sy, c, r, False)
    if requires_grad(x, y):         # (under no_grad): no gradient through it
        t = o._t
        return _result(r, t, t.append(CODE["detach"], o._i, -1, r), False)
    return o


def _array_rule(op):
    """The op on float arrays below the block kernels' size: its NumPy ufunc where that
    is the rule bit for bit (``exact``), else the compiled rule."""
    code = CODE[op.name]
    if op.exact:
        return op.np_fwd
    if op.arity == 1:
        return lambda x: ew_array(code, x)
    return lambda x, y: ew_array(code, x, y) if y.__class__ is np.ndarray else \
        ew_array(code, x, None, float(y))


def _make_unary(op):
    code, py, arr = CODE[op.name], _py_rule(op), _array_rule(op)
    saved = "self" in op.saves

    def unary(x):
        d = x._d
        if d.__class__ is not float:
            if d.__class__ is np.ndarray and d.dtype.kind == "f":
                if _large(x, d):
                    return _large_result(code, x, None, 0.0, saved, False)
                return _array_result(code, arr(d), x, None, 0.0, saved, False)
            return _general(op, x)
        try:
            r = py(d)
        except (ArithmeticError, ValueError):
            r = ew_fwd(code, d, 0.0, 0.0)
        if x._rg and STATE.grad:
            return _stage(code, x, saved, None, False, 0.0, r)
        return _traced(code, x, saved, None, False, 0.0, r) if STATE.trace else _leaf(r)

    unary.__name__ = op.name
    return unary


def _make_binary(op):
    code, py, arr = CODE[op.name], _py_rule(op), _array_rule(op)
    sx, sy = "self" in op.saves, "other" in op.saves

    def binary(x, y):
        if x.__class__ is not Tensor:
            if op.commutes:
                x, y = y, x
            else:
                return _rbinary(op, x, y)
        xd = x._d
        yc = y.__class__
        if xd.__class__ is np.ndarray and xd.dtype.kind == "f":
            if yc is Tensor:
                yd = y._d
                if yd.__class__ is np.ndarray and yd.dtype == xd.dtype:
                    if yd.shape != xd.shape:
                        return _broadcast_result(code, arr, x, y, sx, sy)
                    if _large(x, xd) and yd.flags.c_contiguous:
                        return _large_result(code, x, y, 0.0, sx, sy)
                    return _array_result(code, arr(xd, yd), x, y, 0.0, sx, sy)
                if yd.__class__ is float and code in _BROADCAST and xd.dtype.char == "d" \
                        and xd.size:
                    out = _broadcast_entry(code, arr, x, y, xd, yd, xd.shape)
                    if out is not None:
                        return out
                if yd.__class__ is float and _large(x, xd):
                    return _large_result(code, x, y, 0.0, sx, sy)
            elif yc is float or yc is int:
                if _large(x, xd):
                    return _large_result(code, x, y, float(y), sx, sy)
                return _array_result(code, arr(xd, y), x, y, float(y), sx, sy)
            return _general(op, x, y)
        if yc is Tensor:
            yd = y._d
            if xd.__class__ is not float or yd.__class__ is not float:
                if xd.__class__ is float and code in _BROADCAST and yd.__class__ is np.ndarray \
                        and yd.dtype.char == "d" and yd.size:
                    out = _broadcast_entry(code, arr, x, y, xd, yd, yd.shape)
                    if out is not None:
                        return out
                return _general(op, x, y)
            rg = x._rg or y._rg
        elif (yc is float or yc is int) and xd.__class__ is float:
            yd = float(y)
            rg = x._rg
        else:
            return _general(op, x, y)
        try:
            r = py(xd, yd)
        except (ArithmeticError, ValueError):
            r = ew_fwd(code, xd, yd, 0.0)
        if rg and STATE.grad:
            if yc is Tensor:
                return _stage(code, x, sx, y, sy, 0.0, r)
            return _stage(code, x, sx, None, False, yd, r)
        if STATE.trace:
            return _traced(code, x, sx, y, sy, 0.0 if yc is Tensor else yd, r)
        return _leaf(r)

    binary.__name__ = op.name
    return binary


def _rbinary(op, x, y):
    """``x op y`` with a Python number ``x`` and a Tensor ``y`` (rsub, rpow, rdiv, ...)."""
    if op.name == "div":
        return reciprocal(y) * x
    return _RBINARY[op.name](y, x)


def _make_rbinary(op):
    """``c op y`` for a Python number ``c``: recorded with the constant on the left."""
    code, py = CODE[op.name], _py_rule(op)
    sy = "other" in op.saves

    def rbinary(y, c):
        yd = y._d
        cc = c.__class__
        if yd.__class__ is not float or (cc is not float and cc is not int):
            return _general(op, c, y)
        c = float(c)
        try:
            r = py(c, yd)
        except (ArithmeticError, ValueError):
            r = ew_fwd(code, c, yd, 0.0)
        if y._rg and STATE.grad:
            return _stage(code, None, False, y, sy, c, r)
        return _traced(code, None, False, y, sy, c, r) if STATE.trace else _leaf(r)

    rbinary.__name__ = "r" + op.name
    return rbinary


_RBINARY = {op.name: _make_rbinary(op) for op in EW_OPS
            if op.arity == 2 and not op.commutes and op.name != "div"}
# the reflected operators: ``c - y`` is recorded with the constant on the left;
# ``c / y`` is PyTorch's reciprocal(y) * c
REFLECTED = dict(_RBINARY, div=lambda y, c: reciprocal(y) * c)


FUNCTIONS = {}
for _op in EW_OPS:
    if _op.name != "clamp":
        FUNCTIONS[_op.name] = (_make_unary if _op.arity == 1 else _make_binary)(_op)
add, sub, mul, div, neg, abs, reciprocal = (
    FUNCTIONS[n] for n in ("add", "sub", "mul", "div", "neg", "abs", "reciprocal"))


# PyTorch's functions of these take a tensor ``input`` only (the ops themselves take a
# Python number there: the table's tensor rules call them so)
TENSOR_INPUT = ("maximum", "minimum", "hypot", "atan2", "fmod")


def tensor_input(name, shown):
    """The top-level function ``shown`` (a name or alias) of op ``name``: PyTorch's
    TypeError for a non-tensor ``input`` (fmod names its overloads), else the op."""
    op = FUNCTIONS[name]

    def checked(input, other):
        if input.__class__ is not Tensor:
            if name == "fmod":
                raise TypeError(
                    f"fmod() received an invalid combination of arguments - got "
                    f"({type(input).__name__}, {type(other).__name__}), but expected one of:\n"
                    f" * (Tensor input, Tensor other, *, Tensor out = None)\n"
                    f" * (Tensor input, Number other, *, Tensor out = None)\n")
            raise TypeError(f"{shown}(): argument 'input' (position 1) must be Tensor, not "
                            f"{type(input).__name__}")
        return op(input, other)
    checked.__name__ = shown
    return checked


def _alpha_form(plain):
    """``add`` / ``sub`` as PyTorch's functions and methods take them: ``input op alpha *
    other`` (other scaled first, as the in-place forms do).  The operators (``x + y``)
    keep the plain form: no keyword to read on the scalar path."""
    def with_alpha(input, other, *, alpha=None):
        return plain(input, other if alpha is None else other * alpha)
    with_alpha.__name__ = plain.__name__
    return with_alpha


FUNCTIONS["add"], FUNCTIONS["sub"] = _alpha_form(add), _alpha_form(sub)
OPERATORS = {"add": add, "sub": sub}    # (the dunders' functions, where they differ)
_pow, _square, _logit = FUNCTIONS["pow"], FUNCTIONS["square"], FUNCTIONS["logit"]


def pow(input, exponent):
    """``input ** exponent``.  With the Python number 2 it is recorded as ``square``
    (a PowBackward0 as well): the same values, rules without a libm ``pow``.  With 0.5,
    -0.5 or 1.5, whose value or gradient PyTorch computes with sqrt (signed zeros, nan
    at -inf), the entry says that its exponent is a Python number (``sm.power``)."""
    if exponent.__class__ in (int, float) and input.__class__ is Tensor:
        if exponent == 2 and input.dtype.is_floating_point:
            return _square(input)
        if exponent in (0.5, -0.5, 1.5):
            return _pow_by_number(input, float(exponent))
    return _pow(input, exponent)


def _pow_by_number(x, e):
    """``x ** e`` by a Python number ``e`` whose rule PyTorch computes with sqrt: the entry's
    c2 says so (``sm.power``).  A float tensor as ``_general`` records it, without its
    promotion and broadcasting (``_general`` took 25 us for a 0-d ``x ** 0.5``)."""
    d = x._d
    if d.__class__ is float:
        r = float(ew_fwd(_POW, d, e, 1.0))
    elif d.__class__ is np.ndarray and d.dtype.kind == "f":
        r = ew_array(_POW, d, None, e, 1.0)
    else:
        return _general(BY_NAME["pow"], x, e, c2=1.0)
    t = recording(x)
    if t is None:
        return _leaf(r)
    return _result(r, t, t.append(_POW, buf(t, x, True), -1, r, c=e, c2=1.0), x._rg)


_POW = CODE["pow"]


FUNCTIONS["pow"] = pow


def clamp(input, min=None, max=None):
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    if min.__class__ is Tensor or max.__class__ is Tensor:
        if min is not None and max is not None and (min.__class__ is Tensor) != (
                max.__class__ is Tensor):
            raise TypeError("clamp() received an invalid combination of arguments - got (Tensor, "
                            f"{type(min).__name__}, {type(max).__name__}), but expected one of:\n"
                            " * (Tensor input, Tensor min = None, Tensor max = None, *, "
                            "Tensor out = None)\n * (Tensor input, Number min = None, Number max "
                            "= None, *, Tensor out = None)")
        return _clamp_tensors(input, min, max)
    if input.__class__ is Tensor and not input.dtype.is_floating_point:
        rd = result_dtype(input, *(b for b in (min, max) if b is not None))
        if rd is not input.dtype:            # an integer tensor, a float bound: as PyTorch
            input = input.to(rd)
    return _general(BY_NAME["clamp"], input, -math.inf if min is None else min,
                    math.inf if max is None else float(max))


def _clamp_tensors(input, lo, hi):
    """clamp with tensor bounds, as PyTorch's ClampBackward0: the value is
    min(max(input, lo), hi) (NaN in, NaN out; ``max`` wins over ``min``) and the gradient
    goes by PyTorch's masks: to the input where lo <= x <= hi, to ``min`` where x < lo <
    hi, to ``max`` where x > hi or hi < lo, else nowhere."""
    shape = np.shape(input._arr)
    for b in (lo, hi):
        if b is not None:
            shape = broadcast_shape(shape, b.shape)

    def body():
        x = c = input.detach()          # c: the value (where no mask holds: lo == hi)
        if lo is not None:
            c = FUNCTIONS["maximum"](c, lo.detach())
        if hi is not None:
            c = FUNCTIONS["minimum"](c, hi.detach())
        x = input
        if hi is None:
            out = where(x >= lo, x, where(x < lo, lo, c))
        elif lo is None:
            out = where(x <= hi, x, where(x > hi, hi, c))
        else:
            out = where(x >= lo, where(x <= hi, x, c), c)
            out = where(x < lo, where(lo < hi, lo, out), out)
            out = where(x > hi, hi, where(hi < lo, hi, out))
        return where(c != c, out + c, out)     # a NaN value, its gradient still by the masks
    return composite("ClampBackward0", body, *[v for v in (input, lo, hi) if v is not None])


def logit(input, eps=None):
    """log(x / (1 - x)).  With ``eps`` (not negative), of x clamped as PyTorch's logit
    clamps it, to [eps, 1 - eps] in x's dtype: the table op's constants (its rules)."""
    if eps is None or eps < 0:
        return _logit(input)
    if not input.dtype.is_floating_point:
        input = input.to(dtypes.get_default_dtype())
    lo = input.dtype.np.type(eps)
    return _general(BY_NAME["logit"], input, float(lo), float(input.dtype.np.type(1) - lo))


FUNCTIONS["logit"] = logit


def clamp_min(input, min):
    return clamp(input, min=min)


def clamp_max(input, max):
    return clamp(input, max=max)


def where(condition, input=None, other=None):
    """Elements of ``input`` where ``condition`` holds, else of ``other``.  Given the
    condition alone, the indices of its nonzero elements, one tensor per dim (of a 0-d
    condition as 1-D), as PyTorch's ``nonzero(condition, as_tuple=True)``."""
    from .tensor import from_array
    cond = condition._arr if condition.__class__ is Tensor else np.asarray(condition)
    if input is None and other is None:
        if STATE.trace is not None:
            freeze(condition)          # (which indices depends on its values: guarded)
        return tuple(_leaf(i.astype(np.int64)) for i in np.nonzero(np.atleast_1d(cond)))
    if cond.dtype != np.bool_:
        raise RuntimeError(f"where expected condition to be a boolean tensor, but got a tensor "
                           f"with dtype {dtypes.from_np(cond.dtype).name.capitalize()}")
    rd = result_dtype(input, other)
    vals = [_value(v, rd.np) for v in (input, other)]
    out_shape = broadcast_shape(broadcast_shape(cond.shape, np.shape(vals[0])), np.shape(vals[1]))
    r = np.asarray(np.where(cond, vals[0], vals[1]), rd.np)
    t = recording(input, other, condition) if rd.is_floating_point else None
    if t is None:
        if STATE.trace is not None and not rd.is_floating_point:
            freeze(input, other, condition)
        return _leaf(_norm(r))
    if input.__class__ is not Tensor and other.__class__ is not Tensor:
        input = from_array(np.array(float(input)))     # (one constant slot per entry)
    if condition.__class__ is Tensor and traced_entry(condition) is not None:
        ic = broadcast_to(t, condition._i, cond, out_shape)     # recomputed by a replay
    else:
        ic = t.register(from_array(np.broadcast_to(cond, out_shape).astype(np.float64)))
    ins = [broadcast_to(t, buf(t, v, False), vals[k], out_shape) if v.__class__ is Tensor else -1
           for k, v in enumerate((input, other))]
    scalar = [float(v) for v in (input, other) if v.__class__ is not Tensor]
    i = t.append(CODE["where"], ins[0], ins[1], r, (ic,), c=scalar[0] if scalar else 0.0)
    return _result(_norm(r), t, i, requires_grad(input, other))


# -- comparisons (bool results; recorded only while tracing) -----------------------------
def _compare(op):
    npf, code = op.np_fwd, CODE[op.name]

    def cmp(x, y):
        rd = result_dtype(x, y)
        value = _value if rd.is_floating_point else _integer   # (uint8 < -1: 255, as PyTorch)
        r = np.asarray(npf(value(x, rd.np), value(y, rd.np)))
        if STATE.trace is not None and any(v.__class__ is Tensor and traced_entry(v) is not None
                                           for v in (x, y)):
            return _record_compare(code, x, y, r)
        return _leaf(_norm(r))
    return cmp


def _record_compare(code, x, y, r):
    """A comparison on the traced tape: a replay recomputes it."""
    t = STATE.trace.tape
    ins, c = [], 0.0
    for v in (x, y):
        if v.__class__ is Tensor:
            ins.append(broadcast_to(t, buf(t, v, False), v._arr, r.shape))
        else:
            ins.append(-1)
            c = float(v)
    i = t.append(code, ins[0], ins[1], r.astype(np.float64), c=c)
    return _result(r, t, i, False)          # no gradient


for _op in COMPARE_OPS:
    globals()[_op.name] = FUNCTIONS[_op.name] = _compare(_op)

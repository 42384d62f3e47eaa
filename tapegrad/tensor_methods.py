"""Every method ``Tensor`` gets from the op modules, installed in one place.

``tensor.py`` defines the class with its own attributes (data, grad, graph views,
conversions); the ops are defined where their kind lives (``elementwise`` from the op
table, ``shape_ops``, ``reductions``, ``linalg``, ``softmax_ops``, ``factories``,
``inplace``) and become methods and operators here, at import of ``tapegrad``.
"""
from . import division, dtypes, views
from .elementwise import FUNCTIONS, OPERATORS, REFLECTED, clamp, clamp_max, clamp_min, where
from .devices import CPU, check as check_device
from .extra_ops import allclose, equal, isclose
from .factories import cpu, ones, tensor, tensor_type, to, zeros
from .inplace import clamp_, copy_, fill_, inplace_form, normal_, setitem, uniform_, zero_
from .linalg import bmm, dot, matmul, mm, mv, outer
from .scan_ops import cumprod, cumsum
from .shape_extras import masked_fill, masked_fill_, narrow, repeat, select
from .reductions import (all, amax, amin, any, argmax, argmin, max, mean, min, norm, prod, std,
                         sum, var)
from .shape_ops import (broadcast_to, chunk, clone, expand, expand_as, flatten, getitem, iterate,
                        permute, reshape, split, squeeze, t, transpose, unbind, unsqueeze, view)
from .softmax_ops import log_softmax, logsumexp, softmax
from .ops.table import COMPARE_OPS, EW_OPS
from .tensor import Tensor

T = Tensor
# -- storage: aliases, copies, iteration (views, shape_ops) ------------------------------------
T.data = property(views.data_alias, T._set_data)
T.detach, T.is_contiguous, T.clone, T.__iter__ = (views.detach, views.is_contiguous, clone,
                                                   iterate)
# -- elementwise and comparisons, from the op table: name, aliases, operators, in-place form --
for _op in [op for op in EW_OPS if op.named] + list(COMPARE_OPS):
    _f = clamp if _op.name == "clamp" else FUNCTIONS[_op.name]
    for _name in (_op.name,) + _op.aliases:
        setattr(T, _name, _f)
    for _name in _op.dunders:
        setattr(T, _name, OPERATORS.get(_op.name, _f))
    if _op.rdunder:
        setattr(T, _op.rdunder, REFLECTED[_op.name])
    if _op.kind == "ew" and _op.inplace:
        _g = clamp_ if _op.name == "clamp" else inplace_form(_op.name, _op.arity)
        for _name in (_op.name,) + _op.aliases:
            setattr(T, _name + "_", _g)
        for _dunder in _op.dunders[:1]:                 # x += y is x.add_(y)
            if _op.arity == 2:
                setattr(T, "__i" + _dunder[2:], _g)
T.clamp_min, T.clamp_max = clamp_min, clamp_max
# -- the division family: div's rounding modes, PyTorch's ops without a derivative ------------
T.div = T.divide = division.div
T.floor_divide = T.__floordiv__ = division.floor_divide
T.floor_divide_ = T.__ifloordiv__ = division.floor_divide_
T.__rfloordiv__, T.__rmod__ = division.rfloordiv, division.rmod
T.__pos__ = lambda self: self
T.where = lambda self, condition, other: where(condition, self, other)
# -- in place, the rest -----------------------------------------------------------------------
T.zero_, T.fill_, T.copy_ = zero_, fill_, copy_
T.uniform_, T.normal_ = uniform_, normal_
T.__setitem__ = setitem
# -- shapes, indexing -------------------------------------------------------------------------
for _f in (reshape, view, flatten, squeeze, unsqueeze, expand, expand_as, permute, transpose, t,
           split, chunk, unbind):
    setattr(T, _f.__name__, _f)
T.broadcast_to = broadcast_to
T.__getitem__ = getitem
T.view_as = lambda self, other: view(self, other.shape)
T.reshape_as = lambda self, other: reshape(self, other.shape)
T.swapaxes = T.transpose
# -- reductions, products, softmax ------------------------------------------------------------
for _f in (sum, mean, max, min, amax, amin, prod, argmax, argmin, var, std, norm, all, any,
           matmul, mm, bmm, mv, dot, outer):
    setattr(T, _f.__name__, _f)
T.__matmul__ = matmul
T.__rmatmul__ = lambda self, other: matmul(other, self)
T.ger = outer
T.softmax = lambda self, dim, dtype=None: softmax(self, dim, dtype=dtype)
T.log_softmax = lambda self, dim, dtype=None: log_softmax(self, dim, dtype=dtype)
T.logsumexp = logsumexp
# -- dtypes and new tensors -------------------------------------------------------------------
T.to = to
T.type = tensor_type
for _name, _d in (("double", dtypes.float64), ("float", dtypes.float32),
                  ("half", dtypes.float16), ("long", dtypes.int64), ("int", dtypes.int32),
                  ("bool", dtypes.bool_)):
    setattr(T, _name, lambda self, _d=_d: to(self, _d))
T.new_zeros = lambda self, *size, dtype=None, device=None, requires_grad=False: zeros(
    *size, dtype=dtype or self.dtype, device=device, requires_grad=requires_grad)
T.new_ones = lambda self, *size, dtype=None, device=None, requires_grad=False: ones(
    *size, dtype=dtype or self.dtype, device=device, requires_grad=requires_grad)
T.new_tensor = lambda self, data, dtype=None, device=None, requires_grad=False: tensor(
    data, dtype or self.dtype, device, requires_grad=requires_grad)
# -- more shape ops, scans, whole-tensor comparisons ---------------------------------------------
for _f in (narrow, select, repeat, masked_fill, masked_fill_, cumsum, cumprod, equal, allclose,
           isclose):
    setattr(T, _f.__name__, _f)
# -- more ops (more_ops): indexing, sorting, rounding, tests of values ---------------------------
from . import more_ops as _mo  # noqa: E402
for _name in ("gather", "index_select", "flip", "roll", "repeat_interleave", "tril", "triu",
              "diag", "movedim", "unflatten", "type_as", "new_empty", "sort", "argsort", "topk",
              "floor", "ceil", "round", "isnan", "isinf", "isfinite", "nan_to_num", "lerp",
              "logical_and", "logical_or", "logical_not", "logical_xor", "lgamma"):
    setattr(T, _name, getattr(_mo, _name))
T.flip = lambda self, *dims: _mo.flip(self, dims[0] if len(dims) == 1 else dims)  # (x.flip(0, 1))
T.cross = lambda self, other, dim=None: _mo.cross(self, other, dim)
T.moveaxis = T.movedim
T.mvlgamma = lambda self, p: _mo.multigammaln(self, p)
# -- linear algebra (linalg_ops) ---------------------------------------------------------------
from . import linalg_ops as _lo  # noqa: E402
T.det, T.logdet, T.slogdet, T.inverse = _lo.det, _lo.logdet, _lo.slogdet_top, _lo.inverse
for _name in ("addmm", "addmv", "baddbmm"):
    setattr(T, _name, getattr(_lo, _name))
    setattr(T, _name + "_", _mo._inplace_form(getattr(_lo, _name)))
# -- more compositions: elementwise (more_ops), reductions --------------------------------------
for _name in ("addcmul", "addcdiv", "logaddexp", "logaddexp2", "sgn", "copysign", "heaviside",
              "fmax", "fmin", "diff", "addcmul_", "addcdiv_", "copysign_", "sgn_", "heaviside_"):
    setattr(T, _name, getattr(_mo, _name))
from .reductions import count_nonzero, nanmean, nansum  # noqa: E402
T.nansum, T.nanmean, T.count_nonzero = nansum, nanmean, count_nonzero
for _name in ("diagonal", "diag_embed", "inner", "kron"):
    setattr(T, _name, getattr(_mo, _name))
from .shape_extras import tensor_split, tile  # noqa: E402
T.tensor_split, T.tile, T.swapdims = tensor_split, tile, T.transpose
# -- devices: every tensor is on the CPU ----------------------------------------------------------
T.device = property(lambda self: CPU, doc="The tensor's device: always device(type='cpu').")
T.is_cpu = property(lambda self: True)
T.is_cuda = property(lambda self: False)
T.get_device = lambda self: -1
T.cpu = cpu
T.cuda = lambda self, device=None, non_blocking=False, memory_format=None: to(
    self, check_device("cuda" if device is None else device))
# -- writes and reads by index (more_ops) ---------------------------------------------------------
for _name in ("scatter", "scatter_add", "index_add", "index_copy", "index_fill", "index_put",
              "masked_scatter", "take_along_dim", "take", "masked_select", "nonzero"):
    setattr(T, _name, getattr(_mo, _name))
    if hasattr(_mo, _name + "_"):
        setattr(T, _name + "_", getattr(_mo, _name + "_"))

"""Every method ``Tensor`` gets from the op modules, installed in one place.

``tensor.py`` defines the class with its own attributes (data, grad, graph views,
conversions); the ops are defined where their kind lives (``elementwise`` from the op
table, ``shape_ops``, ``reductions``, ``linalg``, ``softmax_ops``, ``factories``,
``inplace``) and become methods and operators here, at import of ``tapegrad``.
"""
from . import dtypes
from .elementwise import (_RBINARY, FUNCTIONS, abs, add, clamp, clamp_max, clamp_min, div, mul,
                          neg, pow, reciprocal, sub, where)
from .factories import ones, tensor, to, zeros
from .inplace import _make, clamp_, copy_, fill_, normal_, setitem, uniform_, zero_
from .linalg import bmm, dot, matmul, mm, mv, outer
from .reductions import (all, amax, amin, any, argmax, argmin, max, mean, min, norm, prod, std,
                         sum, var)
from .shape_ops import (broadcast_to, chunk, expand, expand_as, flatten, getitem, permute,
                        reshape, split, squeeze, t, transpose, unbind, unsqueeze, view)
from .softmax_ops import log_softmax, logsumexp, softmax
from .tensor import Tensor

T = Tensor
# -- elementwise, from the op table: functions, operators, comparisons ------------------------
for _name, _f in FUNCTIONS.items():
    setattr(T, _name, _f)
T.clamp, T.clamp_min, T.clamp_max, T.clip = clamp, clamp_min, clamp_max, clamp
T.__add__ = T.__radd__ = add
T.__sub__ = sub
T.__rsub__ = _RBINARY["sub"]
T.__mul__ = T.__rmul__ = mul
T.__truediv__ = T.div = T.divide = div
T.__rtruediv__ = lambda self, other: reciprocal(self) * other
T.__pow__ = pow
T.__rpow__ = _RBINARY["pow"]
T.__neg__ = T.negative = neg
T.__abs__ = T.absolute = abs
T.__pos__ = lambda self: self
for _name, _dunder in (("lt", "__lt__"), ("le", "__le__"), ("gt", "__gt__"),
                       ("ge", "__ge__"), ("eq", "__eq__"), ("ne", "__ne__")):
    setattr(T, _dunder, FUNCTIONS[_name])
T.subtract, T.multiply = sub, mul
T.where = lambda self, condition, other: where(condition, self, other)
# -- in place ---------------------------------------------------------------------------------
for _name in ("add", "sub", "mul", "div", "pow"):
    setattr(T, _name + "_", _make(_name))
T.__iadd__, T.__isub__, T.__imul__, T.__itruediv__ = T.add_, T.sub_, T.mul_, T.div_
T.__ipow__ = T.pow_
T.clamp_ = T.clip_ = clamp_
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
T.type = lambda self, dtype=None: self.dtype if dtype is None else to(self, dtype)
for _name, _d in (("double", dtypes.float64), ("float", dtypes.float32),
                  ("half", dtypes.float16), ("long", dtypes.int64), ("int", dtypes.int32),
                  ("bool", dtypes.bool_)):
    setattr(T, _name, lambda self, _d=_d: to(self, _d))
T.new_zeros = lambda self, *size, dtype=None: zeros(*size, dtype=dtype or self.dtype)
T.new_ones = lambda self, *size, dtype=None: ones(*size, dtype=dtype or self.dtype)
T.new_tensor = lambda self, data, dtype=None, requires_grad=False: tensor(
    data, dtype or self.dtype, requires_grad=requires_grad)

"""tapegrad: PyTorch's autograd API on a flat Wengert tape swept by compiled Numba code.

    import tapegrad as torch
    x = torch.tensor([2.0], requires_grad=True)
    z = x * 3 + 5
    z.backward(); x.grad          # tensor([3.])
"""
from . import dtypes as _dtypes
from .dtypes import get_default_dtype, set_default_dtype
from .grad_mode import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled,
                        no_grad, set_grad_enabled)
from .tape import Tape, current_tape
from .tensor import Size, Tensor
from .ops.table import BY_NAME as _BY_NAME, EW_OPS as _EW_OPS
from .elementwise import (FUNCTIONS as _EW, clamp, clamp_max, clamp_min, where)
from .shape_ops import (broadcast_to, cat, chunk, clone, expand, flatten, permute, reshape,
                        split, squeeze, stack, t, transpose, unbind, unsqueeze, view)
from .reductions import (all, amax, amin, any, argmax, argmin, max, mean, min, norm, prod, std,
                         sum, var)
from .linalg import bmm, dot, matmul, mm, mv, outer
from .factories import (arange, as_tensor, empty, empty_like, eye, from_numpy, full, full_like,
                        linspace, manual_seed, ones, ones_like, rand, rand_like, randint, randn,
                        randn_like, tensor, zeros, zeros_like)
from . import tensor_methods  # noqa: F401  (Tensor's methods and operators, installed)
from . import autograd, inplace, nn, optim, viz  # noqa: E402, F401
from .replay import grad, load, trace, value_and_grad  # noqa: E402, F401
from .autograd.functional import sparsity  # noqa: E402, F401  (tapegrad's own)
from .softmax_ops import log_softmax, logsumexp, softmax  # noqa: E402, F401
from . import cuda  # noqa: E402, F401
from .devices import device, get_default_device, set_default_device  # noqa: E402, F401
from .extra_ops import (allclose, chain_matmul, detach, equal, isclose,  # noqa: E402, F401
                        std_mean, var_mean)
from .scan_ops import cumprod, cumsum  # noqa: E402, F401
from .shape_extras import (hstack, masked_fill, narrow, row_stack, select,  # noqa: E402, F401
                           vstack)
from .more_ops import (argsort, ceil, cross, diag, einsum, flip, floor,  # noqa: E402, F401
                       gather, index_select, isfinite, isinf, isnan, lerp, lgamma, linalg_cross,
                       logical_and, logical_not, logical_or, logical_xor, meshgrid, movedim,
                       multigammaln as mvlgamma, nan_to_num, randperm, repeat_interleave,
                       roll, round, sort, topk, tril, triu, unflatten)
from . import linalg as _linalg_module, special  # noqa: E402, F401
from .linalg_ops import (LinAlgError as _LinAlgError, addmm, addmv,  # noqa: E402
                         baddbmm, det, inverse, linalg_norm as _linalg_norm, logdet,
                         slogdet_top as slogdet)
from .more_ops import (addcdiv, addcmul, copysign, diff, fmax, fmin,  # noqa: E402
                       heaviside, sgn)
from .reductions import count_nonzero, nanmean, nansum  # noqa: E402
from .more_ops import diag_embed, diagonal, inner, kron, tensordot  # noqa: E402
from .more_ops import (index_add, index_copy, index_fill, index_put,  # noqa: E402
                       index_put_, masked_scatter, masked_select, nonzero, scatter, scatter_add,
                       take, take_along_dim)
from .shape_extras import (atleast_1d, atleast_2d, atleast_3d,  # noqa: E402
                           broadcast_tensors, column_stack, dstack, tensor_split, tile)
swapaxes = swapdims = transpose
moveaxis = movedim
from . import linalg_ops as _lo  # noqa: E402
_linalg_module.cross = linalg_cross          # torch.linalg.cross, .norm, .det, ...
_linalg_module.norm, _linalg_module.LinAlgError = _linalg_norm, _LinAlgError
for _name in ("vector_norm", "matrix_norm", "det", "slogdet", "inv", "solve"):
    setattr(_linalg_module, _name, getattr(_lo, _name))
del linalg_cross, _linalg_norm, _LinAlgError, _lo, _name

globals().update({n: f for n, f in _EW.items() if _BY_NAME[n].named})
globals().update({alias: _EW[op.name] for op in _EW_OPS for alias in op.aliases
                  if op.name in _EW})          # subtract, multiply, arctan, absolute, ...
from .elementwise import TENSOR_INPUT as _TI, tensor_input as _tensor_input  # noqa: E402
globals().update({alias: _tensor_input(op.name, alias) for op in _EW_OPS if op.name in _TI
                  for alias in (op.name,) + op.aliases})
from .division import div, floor_divide, remainder  # noqa: E402  (rounding modes; no derivative)
from .more_ops import logaddexp, logaddexp2  # noqa: E402  (the table's ops, of tensors only)
divide = div
atan_ = arctan_ = Tensor.atan_
clip = clamp
concat = concatenate = cat
float64 = double = _dtypes.float64
float32 = float = _dtypes.float32
float16 = half = _dtypes.float16
int64 = long = _dtypes.int64
int32 = int = _dtypes.int32
int16, int8, uint8 = _dtypes.int16, _dtypes.int8, _dtypes.uint8
bool = _dtypes.bool_
dtype = _dtypes.dtype
__version__ = "0.1.0"


is_anomaly_enabled = autograd.is_anomaly_enabled


def is_tensor(obj):
    return isinstance(obj, Tensor)


def numel(input):
    return input.numel()


def _warm_in_background():
    """A cold kernel cache: compile what a first gradient needs in the background."""
    from .autograd import engine, sweeps
    from .kernels import cold, fused
    from .replay import vector_replay
    cold.warm_in_background(engine.REVERSE, engine.FUSED, vector_replay.REPLAY,
                            vector_replay.VECTOR, sweeps.TANGENT, engine.KIND_RULES,
                            vector_replay.FORWARD_RULES, fused.BLOCKS, fused.PARALLEL)


_warm_in_background()
del _warm_in_background

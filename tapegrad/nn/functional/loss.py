"""Losses: mse_loss, l1_loss, smooth_l1_loss, huber_loss, nll_loss / cross_entropy (class
indices or class probabilities), binary_cross_entropy(_with_logits), kl_div; each shows as
PyTorch's Nodes in graph views."""
import warnings

import math

import numpy as np

from ...composite import composite
from ...dtypes import TORCH_NAMES
from ...elementwise import FUNCTIONS, where
from ...reductions import sum
from ...tensor import from_array
from ...tracing import freeze
from .activation import _softplus, relu
from ...softmax_ops import log_softmax

_REDUCTIONS = ("none", "mean", "sum")


def legacy_reduction(size_average, reduce, reduction):
    """The reduction a loss applies: ``reduction``, unless the deprecated ``size_average``
    or ``reduce`` is given; then they decide it, with PyTorch's warning, as its
    ``_reduction.legacy_get_string`` (a None of the two counts as True): ``reduce`` false
    'none', else ``size_average`` false 'sum', else 'mean'."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    reduction = "mean" if size_average and reduce else "sum" if reduce else "none"
    warnings.warn("size_average and reduce args will be deprecated, please use "
                  f"reduction='{reduction}' instead.", stacklevel=3)
    return reduction


def _reduction(size_average, reduce, reduction):
    """A loss function's reduction (``legacy_reduction``), checked."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return reduction


def _reduce(loss, reduction):
    return loss if reduction == "none" else loss.mean() if reduction == "mean" else loss.sum()


def _const(arr, like):
    return from_array(np.asarray(arr, like._arr.dtype))


def _check_weight(weight, n_classes, ndim, op=""):
    """PyTorch's check of a class weight: one value per class (NllLoss2d, of an input of
    3 dims or more, counts them only; cross_entropy's probability targets say ``op``)."""
    if weight is None:
        return
    if ndim >= 3 and not op:
        if weight.numel() != n_classes:
            raise RuntimeError("weight tensor should be defined either for all or no classes")
    elif weight.ndim != 1 or weight.numel() != n_classes:
        raise RuntimeError(f"{op}weight tensor should be defined either for all {n_classes} "
                           f"classes or no classes but got weight tensor of shape: "
                           f"{list(weight.shape)}")


def _mean_of_none(total):
    """The mean over no target (all ignored, or an empty batch): PyTorch's 0 / 0, nan,
    whose backward writes no gradient.  ``total`` is a sum of zeros: the nan is added to
    it, as a division by 0 would send nan (0 times inf) back to every input."""
    return total + math.nan


def _warn_size(input, target):
    if target.shape != input.shape:
        warnings.warn(f"Using a target size ({target.shape}) that is different to the input "
                      f"size ({input.shape}). This will likely lead to incorrect results due "
                      "to broadcasting. Please ensure they have the same size.", stacklevel=3)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    reduction = _reduction(size_average, reduce, reduction)
    _warn_size(input, target)

    def body():
        d = input - target
        return _reduce(d * d, reduction)
    return composite("MseLossBackward0", body, input, target)


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """-input[n, target[n], ...] (times the class weight), over an (N, C, ...) or (C,) input."""
    reduction = _reduction(size_average, reduce, reduction)
    freeze(target, weight)           # (while tracing: class weights become constants, guarded)
    t = target._arr
    if t.dtype.kind not in "iu":
        raise RuntimeError("expected target dtype to be Long or Byte, but got "
                           f"{target.dtype.name.capitalize()}")
    if input.ndim >= 2 and input.shape[0] != t.shape[0]:
        raise ValueError(f"Expected input batch_size ({input.shape[0]}) to match target "
                         f"batch_size ({t.shape[0]}).")
    n_classes = input.shape[1 if input.ndim >= 2 else 0]
    _check_weight(weight, n_classes, input.ndim)
    valid = t != ignore_index
    bad = t[valid & ((t < 0) | (t >= n_classes))]
    if bad.size:
        raise IndexError(f"Target {bad.flat[0]} is out of bounds.")
    safe = np.where(valid, t, 0)
    grid = np.indices(t.shape)
    key = (safe,) if input.ndim == 1 else (grid[0], safe, *grid[1:])
    w = valid if weight is None else np.where(valid, weight._arr.reshape(-1)[safe], 0)
    w = np.asarray(w, input._arr.dtype)
    with np.errstate(invalid="ignore", divide="ignore"):    # (a zero total weight: nan)
        scale = _const(np.where(valid, -w / w.sum(), 0.0) if reduction == "mean" else -w,
                       input)

    def body():     # the sign, the weights and the mean's division in one product
        loss = input[key] * scale
        if reduction == "none":
            return loss
        return sum(loss) if valid.any() or reduction == "sum" else _mean_of_none(sum(loss))
    return composite("NllLoss2DBackward0" if input.ndim >= 3 else "NllLossBackward0", body,
                     input)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100,
                  reduce=None, reduction="mean", label_smoothing=0.0):
    """log_softmax over the class dim (1, or 0 for an unbatched input), then the NLL of
    class-index targets or the cross entropy with class-probability targets."""
    reduction = _reduction(size_average, reduce, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: "
                           f"{label_smoothing}")
    cdim = 1 if input.ndim >= 2 else 0
    logp = log_softmax(input, cdim)
    n_classes = input.shape[cdim]
    probabilities = target.dtype.is_floating_point and target.shape == input.shape
    _check_weight(weight, n_classes, input.ndim, "cross_entropy: " if probabilities else "")
    wshape = [n_classes if d == cdim else 1 for d in range(input.ndim)]
    freeze(weight)
    wb = None if weight is None else _const(weight._arr.reshape(wshape), input)
    if probabilities:
        return _probability_targets(logp, target, wb, cdim, n_classes, reduction,
                                    label_smoothing)
    loss = nll_loss(logp, target, weight, ignore_index=ignore_index, reduction=reduction)
    if label_smoothing == 0.0:
        return loss
    return (1.0 - label_smoothing) * loss + _smoothing(logp, target, weight, wb, cdim,
                                                       ignore_index, reduction) * \
        (label_smoothing / n_classes)


def _probability_targets(logp, target, wb, cdim, n_classes, reduction, label_smoothing):
    if label_smoothing > 0.0:
        target = target * (1.0 - label_smoothing) + label_smoothing / n_classes
    per = logp * target if wb is None else logp * wb * target
    loss = -sum(per, cdim)
    if reduction == "mean":        # PyTorch divides by a C++ scalar here: DivBackward1
        total = sum(loss)
        return composite("DivBackward1", lambda: total / (logp.numel() // n_classes), total)
    return _reduce(loss, reduction)


def _smoothing(logp, target, weight, wb, cdim, ignore_index, reduction):
    """The label-smoothing term of class-index targets, normalised as nll_loss is."""
    ignored = target._arr == ignore_index
    per = logp if wb is None else logp * wb
    smooth = -sum(per, cdim) * _const(~ignored, logp)
    if reduction == "mean":
        if ignored.all():
            return _mean_of_none(sum(smooth))
        if weight is None:
            return sum(smooth) / float((~ignored).sum())
        return sum(smooth) / float(weight._arr[target._arr[~ignored]].sum())
    return _reduce(smooth, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None,
                                     reduce=None, reduction="mean", pos_weight=None):
    """(1 - t) x - (1 + (pos_weight - 1) t) log_sigmoid(x), PyTorch's formula, with
    -log_sigmoid(x) = softplus(-|x|) + relu(-x), its values bit for bit.  The table's
    softplus is PyTorch's, linear above 20, where it drops log1p(exp(-y)) (up to 2e-9:
    all of a confident logit's loss), and its second derivative is nan where exp
    overflows: it is called at -|x| only.  That -|x| is a ``where``, whose slope at 0
    is -1 (abs's is 0, which would make the gradient there 1 - t, not 1/2 - t)."""
    reduction = _reduction(size_average, reduce, reduction)
    if target.shape != input.shape:
        raise ValueError(f"Target size ({target.shape}) must be the same as input size "
                         f"({input.shape})")

    def body():
        sp = _softplus(where(input < 0.0, input, -input)) + relu(-input)
        if pos_weight is not None:
            sp = sp * ((pos_weight - 1.0) * target + 1.0)
        loss = (1.0 - target) * input + sp
        return _reduce(loss if weight is None else loss * weight, reduction)
    return composite("BinaryCrossEntropyWithLogitsBackward0", body, input, target)



def _weighted(loss, weight, input, reduction, mean):
    """``loss`` times an elementwise ``weight`` (input's size), reduced; ``mean`` the
    weighted mean's form."""
    if weight.shape != input.shape:
        raise ValueError("Weights and input must have the same size.")
    loss = loss * weight
    if reduction not in _REDUCTIONS:
        raise ValueError(f"Invalid reduction mode: {reduction}. Expected one of 'none', "
                         f"'mean', 'sum'.")
    return mean(loss) if reduction == "mean" else _reduce(loss, reduction)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """|input - target| (broadcast), reduced; with ``weight``, each times its weight, the
    mean divided by the weights' sum."""
    _warn_size(input, target)
    reduction = legacy_reduction(size_average, reduce, reduction)
    loss = (input - target).abs()
    if weight is not None:
        return _weighted(loss, weight, input, reduction, lambda w: w.sum() / weight.sum())
    return _reduce(loss, _reduction(None, None, reduction))


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """0.5 d**2 / beta where |d| < beta, else |d| - 0.5 beta (d = input - target); beta 0 is
    l1_loss."""
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    if beta == 0:
        return l1_loss(input, target, size_average, reduce, reduction)
    _warn_size(input, target)
    reduction = _reduction(size_average, reduce, reduction)

    def body():
        d = input - target
        a = d.abs()
        return _reduce(where(a < beta, 0.5 * d * d / beta, a - 0.5 * beta), reduction)
    return composite("SmoothL1LossBackward0", body, input, target)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """0.5 d**2 where |d| < delta, else delta (|d| - 0.5 delta) (d = input - target)."""
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    _warn_size(input, target)

    def pointwise():
        d = input - target
        a = d.abs()
        return where(a < delta, 0.5 * d * d, delta * (a - 0.5 * delta))
    if weight is not None:
        return _weighted(composite("HuberLossBackward0", pointwise, input, target), weight,
                         input, reduction, lambda w: w.mean())
    reduction = _reduction(None, None, reduction)
    return composite("HuberLossBackward0", lambda: _reduce(pointwise(), reduction), input,
                     target)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    """-(t log x + (1 - t) log(1 - x)), each log at least -100, times ``weight`` (which
    broadcasts to input's shape).  Its gradient is the formula's: (x - t) / (x (1 - x)),
    0 where a log is clamped; PyTorch divides by max(x (1 - x), 1e-12), which differs
    within 1e-12 of 0 and 1."""
    reduction = _reduction(size_average, reduce, reduction)
    if target.shape != input.shape:
        raise ValueError(f"Using a target size ({target.shape}) that is different to the input "
                         f"size ({input.shape}) is deprecated. Please ensure they have the "
                         f"same size.")
    if target.dtype is not input.dtype:
        raise RuntimeError(f"Found dtype {TORCH_NAMES[target.dtype.name][0]} but expected "
                           f"{TORCH_NAMES[input.dtype.name][0]}")
    if weight is not None and weight.requires_grad:
        raise RuntimeError("The function 'binary_cross_entropy' is not differentiable with "
                           "respect to argument 'weight'. This input cannot have requires_grad "
                           "True.")
    freeze(input)
    x = input._arr
    if ((x < 0) | (x > 1)).any():
        raise RuntimeError("all elements of input should be between 0 and 1")

    def body():
        log_x = input.log().clamp(min=-100.0)
        log_1mx = (1.0 - input).log().clamp(min=-100.0)
        loss = -(target * log_x + (1.0 - target) * log_1mx)
        return _reduce(loss if weight is None else loss * weight, reduction)
    return composite("BinaryCrossEntropyBackward0", body, input, target)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """target (log target - input) pointwise (input and, with ``log_target``, target are
    log-probabilities; 0 where target is 0), reduced; 'batchmean' divides the sum by the
    batch size."""
    if reduction == "mean" and size_average is None and reduce is None:
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the "
                      "support size.'batchmean' divides only by the batch size, and aligns with "
                      "the KL div math definition.'mean' will be changed to behave the same as "
                      "'batchmean' in the next major release.", stacklevel=2)
    if reduction != "batchmean":
        reduction = _reduction(size_average, reduce, reduction)
    if log_target:
        loss = target.exp() * (target - input)
    else:
        loss = FUNCTIONS["xlogy"](target, target) - target * input
    if reduction == "batchmean":
        return loss.sum() / input.shape[0] if input.ndim else loss.sum()
    return _reduce(loss, reduction)

"""Activations: the op table's relu / sigmoid / tanh / softplus, and compositions of
table ops for softplus with other beta / threshold, gelu, leaky_relu, silu, mish, elu,
hardtanh, prelu and softsign."""
import math

from ...composite import composite
from ...elementwise import FUNCTIONS, where

_relu = FUNCTIONS["relu"]
sigmoid = FUNCTIONS["sigmoid"]
tanh = FUNCTIONS["tanh"]
_softplus, _erf, _expm1 = FUNCTIONS["softplus"], FUNCTIONS["erf"], FUNCTIONS["expm1"]
_SQRT_HALF = math.sqrt(0.5)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _maybe_inplace(input, inplace, compute):
    """``compute()``, or with ``inplace`` written into ``input`` (its in-place form)."""
    if not inplace:
        return compute()
    from ...inplace import _adopt, _check
    _check(input)
    return _adopt(input, compute)


def relu(input, inplace=False):
    """max(x, 0), the op table's relu (``inplace``: written into input, as PyTorch's)."""
    return _relu(input) if not inplace else _maybe_inplace(input, True, lambda: _relu(input))


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """x where x > 0, else negative_slope * x (the slope's side at 0, as PyTorch)."""
    return _maybe_inplace(input, inplace, lambda: composite(
        "LeakyReluBackward0", lambda: where(input > 0, input, input * negative_slope), input,
        reads=(0,)))


def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta x)) / beta, and x itself where beta x > threshold."""
    if beta == 1.0 and threshold == 20.0:
        return _softplus(input)
    return composite("SoftplusBackward0", lambda: where(
        input * beta > threshold, input, _softplus(input * beta) / beta), input)


def gelu(input, approximate="none"):
    """x Phi(x) (``approximate='none'``, through erf) or PyTorch's tanh approximation."""
    if approximate == "none":
        body = lambda: input * 0.5 * (1.0 + _erf(input * _SQRT_HALF))
    elif approximate == "tanh":
        body = lambda: input * 0.5 * (1.0 + tanh(
            _SQRT_2_OVER_PI * (input + 0.044715 * input * input * input)))
    else:
        raise RuntimeError("approximate argument must be either none or tanh.")
    return composite("GeluBackward0", body, input)


def silu(input, inplace=False):
    """x sigmoid(x)."""
    return _maybe_inplace(input, inplace, lambda: composite(
        "SiluBackward0", lambda: input * sigmoid(input), input))


def mish(input, inplace=False):
    """x tanh(softplus(x))."""
    return _maybe_inplace(input, inplace, lambda: composite(
        "MishBackward0", lambda: input * tanh(_softplus(input)), input))


def elu(input, alpha=1.0, inplace=False):
    """x where x > 0, else alpha (exp(x) - 1) (that side's slope, alpha, at 0)."""
    return _maybe_inplace(input, inplace, lambda: composite(
        "EluBackward0", lambda: where(input > 0, input, alpha * _expm1(input)), input))


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """x clamped to [min_val, max_val]; the gradient is 0 at the bounds (and 1 at nan), as
    PyTorch's."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return _maybe_inplace(input, inplace, lambda: composite("HardtanhBackward0", lambda: where(
        input <= min_val, min_val, where(input >= max_val, max_val, input)), input))


def prelu(input, weight):
    """x where x > 0, else weight x: one weight, or one per channel (dim 1)."""
    channels = input.shape[1] if input.ndim >= 2 else 1
    if weight.numel() != 1 and weight.numel() != channels:
        raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found "
                           f"parameter numbers = {weight.numel()} and channel size = {channels}.")
    if weight.ndim > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: "
                           f"ndim = {weight.ndim}")
    w = weight.reshape((-1,) + (1,) * (input.ndim - 2)) if weight.numel() > 1 else \
        weight.reshape(())
    return composite("PreluKernelBackward0", lambda: where(input > 0, input, w * input), input,
                     weight)


def softsign(input):
    """x / (1 + |x|)."""
    return input / (input.abs() + 1)

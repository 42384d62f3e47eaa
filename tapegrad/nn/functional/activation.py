"""Activations: the op table's relu / sigmoid / tanh / softplus, and compositions of
table ops for softplus with other beta / threshold, gelu and leaky_relu."""
import math

from ...elementwise import FUNCTIONS, where
from ...reductions import composite

relu = FUNCTIONS["relu"]
sigmoid = FUNCTIONS["sigmoid"]
tanh = FUNCTIONS["tanh"]
_softplus, _erf = FUNCTIONS["softplus"], FUNCTIONS["erf"]
_SQRT_HALF = math.sqrt(0.5)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


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


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """x where x > 0, else negative_slope * x (the slope's side at 0, as PyTorch)."""
    return composite("LeakyReluBackward0",
                     lambda: where(input > 0, input, input * negative_slope), input,
                     reads=(0,))

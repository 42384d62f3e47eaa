"""Linear and Identity."""
import math

from ..factories import empty
from . import init
from .functional import linear
from .module import Module
from .parameter import Parameter


class Identity(Module):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """y = x W^T + b, initialised as PyTorch does: W ~ kaiming_uniform_(a=sqrt(5)), i.e.
    U(-1/sqrt(in_features), 1/sqrt(in_features)), and b from the same range."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        weight_and_bias(self, (out_features, in_features), bias, dtype)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        return linear(input, self.weight, self.bias)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


def weight_and_bias(module, shape, bias, dtype):
    """``module.weight`` of ``shape`` and ``module.bias`` of ``shape[0]`` (or None), not
    yet initialised (Linear's and the convolutions')."""
    module.weight = Parameter(empty(*shape, dtype=dtype))
    if bias:
        module.bias = Parameter(empty(shape[0], dtype=dtype))
    else:
        module.register_parameter("bias", None)

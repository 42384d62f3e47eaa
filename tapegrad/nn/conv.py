"""Conv1d and Conv2d: PyTorch's ``_ConvNd`` attributes, checks and initialisation
(weight kaiming_uniform_(a=sqrt(5)), bias U(-1/sqrt(fan_in), 1/sqrt(fan_in))).  A
``padding_mode`` other than 'zeros' reads the padded taps reflected, replicated or
wrapped around, through the same one gather."""
import math

from . import init
from .functional.conv import (PADDING_MODES, _conv, _padding, _tuple, check_padding,
                               convolution)
from .linear import weight_and_bias
from .module import Module


class _ConvNd(Module):
    _nd = 0
    _name = ""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 dilation=1, groups=1, bias=True, padding_mode="zeros", device=None,
                 dtype=None):
        super().__init__()
        nd = self._nd
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        kernel_size = _tuple(kernel_size, nd, "kernel_size")
        stride = _tuple(stride, nd, "stride")
        dilation = _tuple(dilation, nd, "dilation")
        if isinstance(padding, str):
            if padding not in ("valid", "same"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                                 "{'valid', 'same'}")
            if padding == "same" and any(s != 1 for s in stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
        else:
            padding = _tuple(padding, nd, "padding")
        if padding_mode not in PADDING_MODES:
            raise ValueError("padding_mode must be one of {'zeros', 'replicate', 'reflect', "
                             f"'circular'}}, but got padding_mode='{padding_mode}'")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding
        self.dilation = dilation
        self.transposed = False
        self.output_padding = (0,) * nd
        self.groups = groups
        self.padding_mode = padding_mode
        weight_and_bias(self, (out_channels, in_channels // groups, *kernel_size), bias, dtype)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def _conv_forward(self, input, weight, bias):
        if self.padding_mode == "zeros":
            return _conv(self._nd, self._name, input, weight, bias, self.stride, self.padding,
                         self.dilation, self.groups)
        nd = self._nd
        if input.ndim not in (nd + 1, nd + 2):
            raise RuntimeError(f"Expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input "
                               f"to {self._name}, but got input of size: {list(input.shape)}")
        lo, hi = _padding(self.padding, nd, self.kernel_size, self.stride, self.dilation)
        check_padding(tuple(input.shape), nd, lo, hi, self.padding_mode)
        batched = input.ndim == nd + 2
        out = convolution(input if batched else input.unsqueeze(0), weight, bias, self.stride,
                          lo, hi, self.dilation, self.groups, self.padding_mode)
        return out if batched else out.squeeze(0)

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)

    def extra_repr(self):
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * len(self.padding):
            s += f", padding={self.padding}"
        if self.dilation != (1,) * len(self.dilation):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class Conv1d(_ConvNd):
    """1-D convolution of an (N, C_in, L) or (C_in, L) input."""
    _nd, _name = 1, "conv1d"


class Conv2d(_ConvNd):
    """2-D convolution of an (N, C_in, H, W) or (C_in, H, W) input."""
    _nd, _name = 2, "conv2d"

"""max_pool1d / max_pool2d: the windows gathered by one index of precomputed offsets
(taps in the padding read one -inf appended to the flattened input), then ``max`` over
the taps; the first maximum of a window wins, as in PyTorch.  max_pool2d shows as
PyTorch's ``MaxPool2DWithIndicesBackward0``, max_pool1d as that Node's squeeze."""
import functools
import math

import numpy as np

from ...composite import composite
from ...factories import full
from ...reductions import max
from ...shape_ops import cat
from ...tensor import from_array
from .conv import _fmt, _tuple, windows


def _pool_out(size, k, s, p, d, ceil_mode):
    """PyTorch's ``pooling_output_shape``."""
    num = size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)
    out = num // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


@functools.lru_cache(maxsize=16)
def _pool_index(planes, spatial, kernel, stride, dilation, padding, out):
    """Offsets into the flattened (planes, *spatial) input, laid out (planes, positions,
    taps) (-inf at offset planes * prod(spatial)), the (positions, taps) spatial offsets
    themselves (for ``return_indices``), and whether any tap reads the padding."""
    win = windows(spatial, kernel, stride, dilation, padding, out).T   # (positions, taps)
    # the padding's taps last in each window (the others in PyTorch's scan order): a
    # window whose inputs are all -inf picks its first input, as PyTorch's kernel does
    order = np.argsort(win < 0, axis=1, kind="stable")
    win = np.take_along_axis(win, order, axis=1)
    win.setflags(write=False)
    size = math.prod(spatial)
    idx = np.arange(planes)[:, None, None] * size + win[None]
    pad = win < 0
    pads = bool(pad.any())
    if pads:
        idx = np.where(pad[None], planes * size, idx)
    idx.setflags(write=False)
    return idx, win, pads


def _max_pool(nd, input, kernel_size, stride, padding, dilation, ceil_mode, c_int=False):
    """Max pooling over the last ``nd`` dims of an (N, C, *spatial) or (C, *spatial)
    input: (values, indices) with indices the flat spatial offsets of the winners.
    ``c_int``: the sizes are C ints, as max_pool2d's (max_pool1d's are int64s)."""
    kernel = _tuple(kernel_size, nd, "kernel_size")
    stride = kernel if stride is None or (isinstance(stride, (tuple, list)) and not stride) \
        else _tuple(stride, nd, "stride")
    padding = _tuple(padding, nd, "padding")
    dilation = _tuple(dilation, nd, "dilation")
    if c_int and any(not -2 ** 31 <= v < 2 ** 31 for v in kernel + stride + padding + dilation):
        raise RuntimeError("value cannot be converted to type int without overflow")
    if any(k <= 0 for k in kernel):
        raise RuntimeError(f"kernel size should be greater than zero, but got kernel_size="
                           f"{kernel}")
    if any(s <= 0 for s in stride):
        raise RuntimeError("stride should not be zero")
    if any(d <= 0 for d in dilation):
        raise RuntimeError(f"dilation should be greater than zero, but got dilation={dilation}")
    for p, k, d in zip(padding, kernel, dilation):
        if p < 0 or p > ((k - 1) * d + 1) // 2:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got "
                               f"pad={p}, kernel_size={k} and dilation={d}")
    spatial = tuple(input.shape[-nd:])
    out = tuple(_pool_out(*a, ceil_mode) for a in zip(spatial, kernel, stride, padding,
                                                      dilation))
    lead = tuple(input.shape[:-nd])
    if any(o < 1 for o in out):
        planes = "x".join(str(s) for s in input.shape[-nd - 1:])
        outs = "x".join(str(s) for s in (input.shape[-nd - 1],) + out)
        raise RuntimeError(f"Given input size: ({planes}). Calculated output size: ({outs}). "
                           "Output size is too small")
    planes = math.prod(lead)
    idx, win, pads = _pool_index(planes, spatial, kernel, stride, dilation, padding, out)

    winners = []

    def body():
        flat = input.reshape(-1)
        if pads:
            flat = cat([flat, full((1,), -math.inf, dtype=input.dtype)])
        values, taps = max(flat[idx], dim=-1)          # (planes, positions)
        winners.append(taps._arr)
        return values.reshape(lead + out)
    values = composite("MaxPool2DWithIndicesBackward0", body, input, reads=(0,))
    at = win[np.arange(win.shape[0])[None, :], winners[0]]          # (planes, positions)
    return values, from_array(np.ascontiguousarray(at).reshape(lead + out))


def _check_dims(nd, name, input):
    if input.ndim not in (nd + 1, nd + 2) or (input.numel() == 0 and input.ndim == nd + 1):
        if nd == 1:
            raise RuntimeError(f"{name}: Expected 2D or 3D (batch mode) tensor with optional 0 "
                               f"dim batch size for input, but got:{_fmt(input.shape)}")
        raise RuntimeError("non-empty 3D or 4D (batch mode) tensor expected for input")


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """PyTorch's ``F.max_pool1d`` over an (N, C, L) or (C, L) input."""
    _check_dims(1, "max_pool1d", input)
    kernel = _tuple(kernel_size, 1, "kernel_size")
    stride = kernel if stride is None or (isinstance(stride, (tuple, list)) and not stride) \
        else _tuple(stride, 1, "stride")
    x = input.unsqueeze(-2)
    values, indices = _max_pool(2, x, (1,) + kernel, (1,) + stride,
                                (0,) + _tuple(padding, 1, "padding"),
                                (1,) + _tuple(dilation, 1, "dilation"), ceil_mode)
    values = values.squeeze(-2)
    indices = indices.squeeze(-2)
    return (values, indices) if return_indices else values


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """PyTorch's ``F.max_pool2d`` over an (N, C, H, W) or (C, H, W) input."""
    _check_dims(2, "max_pool2d", input)
    values, indices = _max_pool(2, input, kernel_size, stride, padding, dilation, ceil_mode,
                                True)
    return (values, indices) if return_indices else values


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=True):
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=True):
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)

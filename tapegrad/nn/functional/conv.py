"""conv1d / conv2d: im2col as one gather of precomputed offsets, then one matrix product.

The offsets of every (channel, kernel tap, batch, output position) into the flattened
input are NumPy arrays built once per geometry (cached); a tap that falls in the zero
padding reads one zero appended to the flattened input.  The columns, laid out
(groups, C/groups * taps, N * positions), meet the weight, (groups, O/groups, C/groups *
taps), in one ``mm`` (``bmm`` for groups > 1), so large convolutions run in BLAS.  The
result shows as PyTorch's one ``ConvolutionBackward0`` Node.
"""
import functools
import math

import numpy as np

from ...composite import composite
from ...factories import zeros
from ...linalg import bmm, mm
from ...shape_ops import cat

PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _tuple(value, n, name):
    """PyTorch's ``_single`` / ``_pair``: an int repeated, or an n-sequence of ints."""
    if isinstance(value, (tuple, list)):
        if len(value) == 1 and n > 1:
            value = tuple(value) * n
        if len(value) != n:
            raise RuntimeError(f"expected {name} to be a single integer value or a list of {n} "
                               f"values to match the convolution dimensions, but got "
                               f"{name}={list(value)}")
        value = tuple(int(v) for v in value)
    else:
        value = (int(value),) * n
    if any(not -2 ** 63 <= v < 2 ** 63 for v in value):
        raise ValueError("Overflow when unpacking long long")       # (PyTorch reads int64s)
    return value


def _source(coord, size, mode):
    """Map padded coordinates (input coordinates, possibly outside [0, size)) to input
    coordinates for ``mode``; -1 marks a zero.  ``coord`` is an int64 array."""
    if mode == "zeros":
        return np.where((coord >= 0) & (coord < size), coord, -1)
    if mode == "replicate":
        return np.clip(coord, 0, size - 1)
    if mode == "circular":
        return np.mod(coord, size)
    if mode == "reflect":
        if size == 1:
            return np.zeros_like(coord)
        period = 2 * (size - 1)
        c = np.mod(coord, period)
        return np.where(c < size, c, period - c)
    raise ValueError(f"unknown padding mode {mode!r}")


@functools.lru_cache(maxsize=128)
def windows(spatial, kernel, stride, dilation, pad_lo, out, mode="zeros"):
    """(taps, positions) int64: the flat spatial offset (C order over ``spatial``) that
    kernel tap k of output position p reads, or -1 where it reads a padding zero.  Taps and
    positions are both in C order over their dims (PyTorch's weight and output layout)."""
    flat = np.zeros((1,) * (2 * len(spatial)), np.int64)
    zero = np.zeros_like(flat, dtype=bool)
    nd = len(spatial)
    step = 1
    for d in reversed(range(nd)):
        k = np.arange(kernel[d]) * dilation[d]
        o = np.arange(out[d]) * stride[d] - pad_lo[d]
        src = _source(k[:, None] + o[None, :], spatial[d], mode)
        shape = [1] * (2 * nd)
        shape[d], shape[nd + d] = kernel[d], out[d]
        src = src.reshape(shape)
        flat = flat + src * step
        zero = zero | (src < 0)
        step *= spatial[d]
    flat = np.where(zero, -1, flat)
    flat = np.broadcast_to(flat, tuple(kernel) + tuple(out))
    flat = np.ascontiguousarray(flat.reshape(math.prod(kernel), math.prod(out)))
    flat.setflags(write=False)            # cached: shared by every call of this geometry
    return flat


@functools.lru_cache(maxsize=16)
def _im2col_index(n, c, groups, spatial, kernel, stride, dilation, pad_lo, out, mode):
    """Offsets into the flattened (N, C, *spatial) input, laid out (groups, C/groups *
    taps, N * positions); a padding zero reads offset N * C * prod(spatial).  The second
    value says whether any does."""
    win = windows(spatial, kernel, stride, dilation, pad_lo, out, mode)
    size = math.prod(spatial)
    taps, pos = win.shape
    base = (np.arange(n)[None, :] * c + np.arange(c)[:, None]) * size   # (C, N)
    idx = base[:, None, :, None] + win[None, :, None, :]                 # (C, taps, N, pos)
    pad = win < 0
    has_pad = bool(pad.any())
    if has_pad:
        idx = np.where(pad[None, :, None, :], n * c * size, idx)
    idx = idx.reshape(groups, (c // groups) * taps, n * pos)
    idx.setflags(write=False)
    return idx, has_pad


def _out_size(spatial, kernel, stride, dilation, pad_lo, pad_hi):
    return tuple((s + lo + hi - d * (k - 1) - 1) // st + 1
                 for s, k, st, d, lo, hi in zip(spatial, kernel, stride, dilation, pad_lo, pad_hi))


def _fmt(shape):
    return "[" + ", ".join(str(s) for s in shape) + "]"


def _padding(padding, nd, kernel, stride, dilation):
    """(pad_lo, pad_hi) from an int, a tuple or 'same' / 'valid' (as F.conv*d takes it)."""
    if isinstance(padding, str):
        if padding == "valid":
            return (0,) * nd, (0,) * nd
        if padding != "same":
            raise RuntimeError(f"Invalid padding string: '{padding}'")
        if any(s != 1 for s in stride):
            raise RuntimeError("padding='same' is not supported for strided convolutions")
        total = tuple(d * (k - 1) for d, k in zip(dilation, kernel))
        lo = tuple(t // 2 for t in total)
        return lo, tuple(t - a for t, a in zip(total, lo))
    pad = _tuple(padding, nd, "padding")
    if any(p < 0 for p in pad):
        raise RuntimeError("negative padding is not supported")
    return pad, pad


def check_padding(shape, nd, pad_lo, pad_hi, mode):
    """PyTorch's checks of F.pad for ``padding_mode`` 'reflect' / 'circular' (``shape``:
    the input's, batched or not)."""
    spatial = shape[-nd:]
    if mode == "reflect":
        for d in reversed(range(nd)):      # as PyTorch's reflection_pad: width first
            if pad_lo[d] >= spatial[d] or pad_hi[d] >= spatial[d]:
                raise RuntimeError(f"Argument #{4 + 2 * (nd - 1 - d)}: Padding size should be "
                                   "less than the corresponding input dimension, but got: "
                                   f"padding ({pad_lo[d]}, {pad_hi[d]}) at dimension "
                                   f"{len(shape) - nd + d} of input {_fmt(shape)}")
    if mode == "circular" and any(lo > s or hi > s
                                  for s, lo, hi in zip(spatial, pad_lo, pad_hi)):
        raise RuntimeError("Padding value causes wrapping around more than once.")


def convolution(input, weight, bias, stride, pad_lo, pad_hi, dilation, groups, mode="zeros"):
    """The convolution of a batched (N, C, *spatial) input, its padding given per side
    (``mode``: how padded taps read the input, PyTorch's ``padding_mode``; its limits are
    ``check_padding``'s)."""
    n, c = input.shape[:2]
    spatial = tuple(input.shape[2:])
    o_ch = weight.shape[0]
    kernel = tuple(weight.shape[2:])
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(d <= 0 for d in dilation):
        raise RuntimeError("dilation should be greater than zero")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if weight.shape[1] * groups != c:
        raise RuntimeError(f"Given groups={groups}, weight of size {_fmt(weight.shape)}, "
                           f"expected input{_fmt(input.shape)} to have "
                           f"{weight.shape[1] * groups} channels, but got {c} channels instead")
    if o_ch == 0:
        raise RuntimeError(f"Given groups={groups}, expected weight to be at least {groups} at "
                           f"dimension 0, but got weight of size {_fmt(weight.shape)} instead")
    if o_ch % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by "
                           f"{groups} at dimension 0, but got weight of size "
                           f"{_fmt(weight.shape)} instead")
    if bias is not None and tuple(bias.shape) != (o_ch,):
        raise RuntimeError(f"Given weight of size {_fmt(weight.shape)}, expected bias to be "
                           f"1-dimensional with {o_ch} elements, but got bias of size "
                           f"{_fmt(bias.shape)} instead")
    padded = tuple(s + lo + hi for s, lo, hi in zip(spatial, pad_lo, pad_hi))
    eff = tuple(d * (k - 1) + 1 for d, k in zip(dilation, kernel))
    if any(p < e for p, e in zip(padded, eff)):
        raise RuntimeError(f"Calculated padded input size per channel: "
                           f"({' x '.join(map(str, padded))}). Kernel size: "
                           f"({' x '.join(map(str, eff))}). Kernel size can't be greater than "
                           "actual input size")
    out = _out_size(spatial, kernel, stride, dilation, pad_lo, pad_hi)
    idx, has_pad = _im2col_index(n, c, groups, spatial, kernel, tuple(stride), tuple(dilation),
                                 tuple(pad_lo), out, mode)

    # (sizes spelled out, never -1: a batch, channels or taps of 0 leave -1 ambiguous)
    taps = weight.shape[1] * math.prod(kernel)

    def body():
        flat = input.reshape(-1)
        if has_pad:
            flat = cat([flat, zeros(1, dtype=input.dtype)])
        if groups == 1:                                   # (C * taps, N * positions)
            y = mm(weight.reshape(o_ch, taps), flat[idx[0]])
        else:                                             # (G, C/G * taps, N * positions)
            y = bmm(weight.reshape(groups, o_ch // groups, taps), flat[idx])
        y = y.reshape(o_ch, n, math.prod(out))
        if bias is not None:
            y = y + bias.reshape(o_ch, 1, 1)
        y = y.reshape(1, o_ch, -1) if n == 1 else y.permute(1, 0, 2)
        return y.reshape(n, o_ch, *out)
    return composite("ConvolutionBackward0", body, input, weight, bias, reads=(0, 1))


def _conv(nd, name, input, weight, bias, stride, padding, dilation, groups):
    if input.ndim not in (nd + 1, nd + 2):
        raise RuntimeError(f"Expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input to "
                           f"{name}, but got input of size: {_fmt(input.shape)}")
    if weight.ndim != nd + 2:
        raise RuntimeError(f"Expected {nd + 2}-dimensional weight for {nd + 2}-dimensional "
                           f"input {_fmt(input.shape)}, but got {weight.ndim}-dimensional weight "
                           f"of size {_fmt(weight.shape)} instead")
    stride = _tuple(stride, nd, "stride")
    dilation = _tuple(dilation, nd, "dilation")
    pad_lo, pad_hi = _padding(padding, nd, tuple(weight.shape[2:]), stride, dilation)
    if input.ndim == nd + 1:
        out = convolution(input.unsqueeze(0), weight, bias, stride, pad_lo, pad_hi, dilation,
                          groups)
        return out.squeeze(0)
    return convolution(input, weight, bias, stride, pad_lo, pad_hi, dilation, groups)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """PyTorch's ``F.conv1d``: (N, C, L) or (C, L) input, (O, C / groups, k) weight;
    ``padding`` an int, a 1-tuple, 'valid' or 'same'."""
    return _conv(1, "conv1d", input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """PyTorch's ``F.conv2d``: (N, C, H, W) or (C, H, W) input, (O, C / groups, kh, kw)
    weight; ``padding`` an int, a pair, 'valid' or 'same'."""
    return _conv(2, "conv2d", input, weight, bias, stride, padding, dilation, groups)

"""amax / amin over dims and max() / min() of all values: eager values come from the
reduction kind's kernel (``kernels.reduce.extreme_into``), as a replay's do.  Against
PyTorch: values (a nan wins; of -0.0 and 0.0 the first, as PyTorch's kernels give on
these small arrays, where NumPy keeps the last; max() / min(), the last), dtypes, gradients (split evenly among
ties); over trailing, leading, middle and several dims; a replay bit for bit."""
import itertools

import numpy as np
import pytest
import torch

import tapegrad as tg
from tapegrad.replay import trace

from replay_checks import assert_replays_eager

RNG = np.random.default_rng(5)
SHAPES = [(7,), (3, 4), (2, 3, 4), (5, 1, 3)]


def _cases():
    for shape in SHAPES:
        for r in range(1, len(shape) + 1):
            for dims in itertools.combinations(range(len(shape)), r):
                yield shape, dims


def _values(shape, nan):
    v = RNG.normal(size=shape).round(0)       # (ties: integers)
    v.flat[::3] = 0.0
    v.flat[1::4] = -0.0
    if nan:
        v.flat[len(v.flat) // 2] = np.nan
    return v


@pytest.mark.parametrize("nan", [False, True])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", ["amax", "amin"])
def test_amax_amin_over_dims_are_pytorchs(name, dtype, nan):
    for shape, dims in _cases():
        v = _values(shape, nan)
        out = []
        for m in (tg, torch):
            x = m.tensor(v, dtype=getattr(m, dtype), requires_grad=True)
            y = getattr(m, name)(x, dims)
            w = m.tensor(np.arange(1.0, y.numel() + 1).reshape(y.shape), dtype=getattr(m, dtype))
            (y * w).sum().backward()
            out.append((y.detach().numpy(), x.grad.numpy()))
        (yo, go), (yt, gt) = out
        assert yo.dtype == yt.dtype and yo.shape == yt.shape, (shape, dims)
        np.testing.assert_array_equal(yo, yt, err_msg=str((shape, dims)))
        assert (np.signbit(yo) == np.signbit(yt))[~np.isnan(yt)].all(), (shape, dims, yo, yt)
        np.testing.assert_allclose(go, gt, rtol=1e-6, equal_nan=True, err_msg=str((shape, dims)))


@pytest.mark.parametrize("name", ["max", "min"])
def test_max_min_of_all_values_are_pytorchs(name):
    for shape in SHAPES + [(1000,)]:
        for nan in (False, True):
            v = _values(shape, nan)
            got = getattr(tg, name)(tg.tensor(v)).numpy()
            want = getattr(torch, name)(torch.tensor(v)).numpy()
            np.testing.assert_array_equal(got, want)
            assert nan or np.signbit(got) == np.signbit(want)
    for first, second in ((-0.0, 0.0), (0.0, -0.0)):
        got = getattr(tg, name)(tg.tensor([first, second, 1.0 if name == "min" else -1.0]))
        assert np.signbit(got.item()) == np.signbit(second)     # the last of equal values


@pytest.mark.parametrize("dims", [(1,), (0,), (1, 2), (0, 2)], ids=str)
def test_a_replayed_amax_is_eager_bit_for_bit(dims):
    def f(x, y):
        return (tg.amax(x, dims) * tg.amin(y.sin(), dims)).sum()
    points = [[_values((4, 3, 5), False) for _ in range(2)] for _ in range(3)]
    traced = trace(f, *(tg.tensor(v) for v in points[0]), compile_after=None)
    assert_replays_eager(traced, f, points[1:])

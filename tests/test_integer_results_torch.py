"""Integer and bool tensors: result dtypes and values as PyTorch's (found by a probe that
compared the two): a byte of either sign promotes to int16, an integer tensor clamped by
a float bound is a float tensor, relu keeps an integer dtype, a bool squares to int64,
and sums and products of small integers (uint8 included) are int64."""
import numpy as np
import pytest
import torch

import tapegrad as tg

pytestmark = pytest.mark.usefixtures("torch_float64")
INTS = ["uint8", "int8", "int16", "int32", "int64", "bool"]


def _same(got, want):
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("a", INTS)
@pytest.mark.parametrize("b", INTS)
def test_binary_promotion_of_integer_tensors(a, b):
    xs, ys = [200, 1, 0, 7], [100, 1, 1, 3]
    for op in (lambda x, y: x + y, lambda x, y: x * y):
        # (.to() casts, wrapping round, as PyTorch's; tensor(200, dtype=int8) raises there)
        got = op(tg.tensor(xs).to(getattr(tg, a)), tg.tensor(ys).to(getattr(tg, b)))
        want = op(torch.tensor(xs).to(getattr(torch, a)), torch.tensor(ys).to(getattr(torch, b)))
        _same(got, want)


@pytest.mark.parametrize("a", INTS[:-1])
def test_clamp_relu_and_square_of_integers(a):
    def results(m):
        x = m.tensor([-1, 2, 5, 0] if a != "uint8" else [1, 2, 5, 0], dtype=getattr(m, a))
        return [x.clamp(0.5, 3), x.clamp(0, 3), x.clamp(max=3.5), x.clamp(min=1), m.relu(x),
                x.square()]
    for got, want in zip(results(tg), results(torch)):
        _same(got, want)


def test_a_bool_squares_to_int64():
    _same(tg.tensor([True, False]).square(), torch.tensor([True, False]).square())


@pytest.mark.parametrize("a", INTS)
def test_sums_and_products_of_small_integers_are_int64(a):
    xs = [[1, 2, 250], [3, 0, 1]]
    for f in (lambda x: x.sum(), lambda x: x.prod(), lambda x: x.sum(0), lambda x: x.prod(1),
              lambda x: x.sum(1, keepdim=True)):
        got = f(tg.tensor(xs).to(getattr(tg, a)))
        _same(got, f(torch.tensor(xs).to(getattr(torch, a))))
        assert got.tolist() == f(torch.tensor(xs).to(getattr(torch, a))).tolist()


@pytest.mark.parametrize("a", INTS)
@pytest.mark.parametrize("number", [-1, -56, 200, 257, 300, 2 ** 40, 1.5])
def test_comparisons_with_a_python_number_take_it_in_the_tensors_dtype(a, number):
    """A Python int compared with an integer tensor is taken in the tensor's dtype first
    (it wraps round: a uint8 tensor < -1 compares with 255), as PyTorch's."""
    def results(m):
        x = m.tensor([0, 1, 200, 255] if a != "bool" else [True, False, True, False])
        x = x.to(getattr(m, a))
        return [x < number, x <= number, x > number, x >= number, x == number, x != number,
                number > x, m.eq(x, number)]
    for got, want in zip(results(tg), results(torch)):
        _same(got, want)


def _filled(m, call):
    try:
        return call(m).tolist()
    except (RuntimeError, OverflowError) as e:
        return type(e), str(e)


@pytest.mark.parametrize("a", INTS)
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), 300.0, -1.0, 2.5,
                                   -2.5, 1e20, 255.9, -128.9, 127.9, 300, -1, -300, 2 ** 70])
def test_fills_of_integer_tensors_check_the_number_as_pytorch(a, value):
    """``fill_`` and ``full`` take a Python number into an integer dtype as PyTorch does: a
    float outside its range (nan, inf) and an int outside it raise PyTorch's error (C's cast
    gave INT64_MIN for nan before); a negative int wraps round into an unsigned one."""
    for call in (lambda m: m.zeros(3, dtype=getattr(m, a)).fill_(value),
                 lambda m: m.full((2,), value, dtype=getattr(m, a))):
        assert _filled(tg, call) == _filled(torch, call)

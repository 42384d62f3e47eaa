"""gradcheck: slow and fast mode, wrong and non-reentrant backward are caught."""
import numpy as np
import pytest

import tapegrad as tg
from tapegrad.autograd import gradcheck
from tapegrad.autograd.gradcheck import GradcheckError


class WrongScale(tg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * x

    @staticmethod
    def backward(ctx, g):
        return g                      # should be 2 x g


class Noisy(tg.autograd.Function):
    calls = [0]

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 3.0

    @staticmethod
    def backward(ctx, g):
        Noisy.calls[0] += 1
        return g * (3.0 + 1e-7 * (Noisy.calls[0] % 2))   # within tolerance, not repeatable


def _x():
    return tg.tensor(np.array([0.3, -0.7, 1.1]), requires_grad=True)


@pytest.mark.parametrize("fast", [False, True], ids=["slow", "fast"])
def test_correct_gradients_pass(fast):
    assert gradcheck(lambda a: (a.sin() * a).sum() + a.exp(), [_x()], fast_mode=fast)


@pytest.mark.parametrize("fast", [False, True], ids=["slow", "fast"])
def test_wrong_backward_is_caught(fast):
    with pytest.raises(GradcheckError, match="Jacobian mismatch for output 0 with respect to "
                                             "input 0"):
        gradcheck(WrongScale.apply, [_x()], fast_mode=fast)
    assert gradcheck(WrongScale.apply, [_x()], fast_mode=fast, raise_exception=False) is False


def test_non_reentrant_backward_is_caught():
    with pytest.raises(GradcheckError, match="Backward is not reentrant"):
        gradcheck(Noisy.apply, [_x()])
    assert gradcheck(Noisy.apply, [_x()], nondet_tol=1e-6)


def test_float32_inputs_are_warned_about():
    with pytest.warns(UserWarning, match="Input #0 requires gradient and is not a double "
                                         "precision floating point"):
        gradcheck(lambda a: a * 2, [tg.ones(2, dtype=tg.float32, requires_grad=True)],
                  atol=1e-2, rtol=1e-2, eps=1e-3)

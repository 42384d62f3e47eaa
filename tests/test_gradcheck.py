"""gradcheck: slow and fast mode, wrong and non-reentrant backward are caught."""
import warnings

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


def _is_zero(g):
    return float(g.abs().sum()) == 0.0


def broken_functions(m):
    """Functions whose Jacobians are right but whose backward misbehaves."""
    class NotMultiplied(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return m.ones_like(x) if _is_zero(g) else 2 * x * g

    class NonzeroForUndefined(m.autograd.Function):      # one output undefined
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            if g1 is None and g2 is None:
                return None
            if g1 is None and _is_zero(g2):
                return m.ones_like(g2)
            return (0 if g1 is None else g1 * 2) + (0 if g2 is None else g2 * 3)

    class NonzeroForAllUndefined(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return m.ones(3, dtype=m.float64) if g is None else g * 2

    class FailsOnUndefined(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            if g1 is None and (g2 is None or _is_zero(g2)):
                raise RuntimeError("undefined gradient")
            return (0 if g1 is None else g1 * 2) + (0 if g2 is None else g2 * 3)

    class HandlesUndefined(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            if g1 is None and g2 is None:
                return None
            return (0 if g1 is None else g1 * 2) + (0 if g2 is None else g2 * 3)

    return NotMultiplied, NonzeroForUndefined, NonzeroForAllUndefined, FailsOnUndefined, \
        HandlesUndefined


@pytest.mark.parametrize("options", [{}, {"fast_mode": True}, {"check_undefined_grad": False},
                                     {"raise_exception": False}],
                         ids=["default", "fast", "no_undefined", "no_raise"])
@pytest.mark.parametrize("which", range(5), ids=["not_multiplied", "undefined_one",
                                                 "undefined_all", "fails_undefined", "fine"])
def test_backward_checks_match_pytorch(which, options):
    import torch

    def outcome(m):
        F = broken_functions(m)[which]
        x = m.tensor([0.3, -0.7, 1.1], dtype=m.float64, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                return m.autograd.gradcheck(lambda a: F.apply(a.sin()), (x,), **options)
            except Exception as e:    # noqa: BLE001 - the class is compared
                return type(e).__name__, str(e)

    ref, got = outcome(torch), outcome(tg)
    assert got == ref


def test_the_failures_are_the_documented_ones():
    NotMultiplied, NonzeroForUndefined, _, FailsOnUndefined, _ = broken_functions(tg)
    x = _x()
    with pytest.raises(GradcheckError, match="backward not multiplied by grad_output"):
        gradcheck(NotMultiplied.apply, [x])
    with pytest.warns(UserWarning, match="Backwards compatibility: New undefined gradient"), \
            pytest.raises(GradcheckError, match="Expected all input grads to be undefined or zero"):
        gradcheck(NonzeroForUndefined.apply, [x])
    with pytest.warns(UserWarning), pytest.raises(
            GradcheckError, match="Expected backward function to handle undefined output grads"):
        gradcheck(FailsOnUndefined.apply, [x])
    assert gradcheck(NonzeroForUndefined.apply, [x], check_undefined_grad=False)


def test_forward_mode_check_and_signature():
    x = _x()
    assert gradcheck(lambda a: (a.sin() * a).sum() + a.exp(), [x], check_forward_ad=True)
    assert gradcheck(lambda a: a.exp() * 2, [x], check_forward_ad=True, check_backward_ad=False,
                     fast_mode=True)
    assert gradcheck(lambda a: a.exp(), [x], check_batched_grad=True, check_grad_dtypes=True,
                     check_batched_forward_grad=False, masked=None)
    with pytest.raises(AssertionError, match="Expected at least one of check_forward_ad or "
                                             "check_backward_ad to be True"):
        gradcheck(lambda a: a, [x], check_backward_ad=False)
    with pytest.raises(AssertionError, match="check_batched_grad=True requires "
                                             "check_backward_ad"):
        gradcheck(lambda a: a, [x], check_backward_ad=False, check_forward_ad=True,
                  check_batched_grad=True)
    with pytest.raises(ValueError, match="none of them have requires_grad=True"):
        gradcheck(lambda a: a * 2, [tg.tensor([1.0])])
    assert gradcheck(lambda a: (a > 0).double(), [x])       # no differentiable output
    assert tg.autograd.gradgradcheck(lambda a: a.sin() * a, [x], check_fwd_over_rev=True)

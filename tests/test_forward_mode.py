"""Forward mode: the compiled tangent sweep, forward_ad's dual tensors.

Every op of the table: the Jacobian built column by column from tangents equals the
one built row by row from adjoints (which gradcheck checks against finite
differences); dual tensors against PyTorch's forward AD."""
import numpy as np
import pytest
import torch

import tapegrad as tg
import tapegrad.autograd.forward_ad as fwAD
from tapegrad.autograd import functional as F
from tapegrad.ops.table import BINARY, UNARY
from test_cross_path import _call as torch_call
from test_higher_order import _away_from_kinks
from test_op_table import STRUCTURAL, _call, _inputs
from custom_functions import Double

RNG = np.random.default_rng(5)


def _both_strategies(fn, xs):
    rev = F.jacobian(fn, xs)
    fwd = F.jacobian(fn, xs, vectorize=True, strategy="forward-mode")
    for a, b in zip(np.atleast_1d(rev), np.atleast_1d(fwd)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12, atol=1e-13)


def _arrays(t):
    return [x.numpy() for x in t] if isinstance(t, tuple) else [t.numpy()]


@pytest.mark.parametrize("op", UNARY + BINARY, ids=lambda op: op.name)
@pytest.mark.parametrize("shape", [(), (3,)], ids=str)
def test_tangents_equal_adjoints_elementwise(op, shape):
    arrs = [_inputs(op.domain, shape)] + ([_inputs(op.domain_y, shape)] if op.arity == 2 else [])
    xs = tuple(tg.tensor(a) for a in _away_from_kinks(op, arrs))
    rev = F.jacobian(lambda *a: _call(op, *a), xs)
    fwd = F.jacobian(lambda *a: _call(op, *a), xs, vectorize=True, strategy="forward-mode")
    for a, b in zip(_arrays(rev), _arrays(fwd)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("op", UNARY + BINARY, ids=lambda op: op.name)
def test_large_tangents_equal_pytorchs(op):
    """From ``fused.FUSE_MIN`` elements the tangent sweep runs an op's reverse block rule
    block by block (5,000 elements: four whole blocks and a part): dual tensors against
    PyTorch's forward AD, with tangents on both operands, on x only and on y only."""
    n = 5000
    arrs = [_inputs(op.domain, n)] + ([_inputs(op.domain_y, n)] if op.arity == 2 else [])
    arrs = _away_from_kinks(op, arrs)
    vs = [RNG.normal(size=n) for _ in arrs]
    carries = [(True,)] if op.arity == 1 else [(True, True), (True, False), (False, True)]
    for carry in carries:
        found = []
        for m, ad in ((tg, fwAD), (torch, torch.autograd.forward_ad)):
            with ad.dual_level():
                args = [ad.make_dual(m.tensor(a), m.tensor(v)) if c else m.tensor(a)
                        for a, v, c in zip(arrs, vs, carry)]
                found.append(ad.unpack_dual(torch_call(m, op.name, *args)).tangent.numpy())
        # (atol: derivatives that cancel, as sinc's near its extrema, to 1e-12 of terms as
        # large as the inputs: libm's and libmvec's sin differ by an ulp of pi x, and a cold
        # kernel cache runs the scalar rules until the block rules are compiled)
        scale = max(1.0, max(float(np.abs(a).max()) for a in arrs))
        np.testing.assert_allclose(found[0], found[1], rtol=1e-12, atol=2e-12 * scale)


@pytest.mark.parametrize("name", sorted(STRUCTURAL))
def test_tangents_equal_adjoints_structural(name):
    shapes, fn = STRUCTURAL[name]
    xs = tuple(tg.tensor(RNG.uniform(-1, 1, s)) for s in shapes)
    rev = F.jacobian(fn, xs)
    fwd = F.jacobian(fn, xs, vectorize=True, strategy="forward-mode")
    for a, b in zip(_arrays(rev), _arrays(fwd)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)


def test_prod_tangent_with_zeros():
    x = tg.tensor([2.0, 0.0, 3.0])
    _, jv = F.jvp(lambda a: a.prod(), x, tg.tensor([1.0, 1.0, 1.0]))
    assert jv.item() == 6.0


def _program(m, x, w):
    return (m.tanh(x @ w) * x.sum()).exp() / (1 + (x ** 2).sum())


def test_dual_tensors_match_pytorch(torch_float64):
    xa, wa, va = RNG.uniform(-1, 1, 3), RNG.uniform(-1, 1, (3, 2)), RNG.uniform(-1, 1, 3)
    out = []
    for m, ad in ((tg, fwAD), (torch, torch.autograd.forward_ad)):
        with ad.dual_level():
            x = ad.make_dual(m.tensor(xa), m.tensor(va))
            y = _program(m, x, m.tensor(wa))
            primal, tangent = ad.unpack_dual(y)
            out.append((primal.detach().numpy(), tangent.numpy()))
            assert ad.unpack_dual(m.tensor(wa)).tangent is None
            assert ad.unpack_dual(x).tangent is not None
    np.testing.assert_allclose(out[0][0], out[1][0], rtol=1e-13)
    np.testing.assert_allclose(out[0][1], out[1][1], rtol=1e-12)


def test_dual_of_a_tensor_that_requires_grad_keeps_its_gradient():
    w = tg.tensor([1.0, 2.0], requires_grad=True)
    with fwAD.dual_level():
        d = fwAD.make_dual(w, tg.tensor([1.0, 0.0]))
        y = (d * d).sum()
        assert fwAD.unpack_dual(y).tangent.item() == 2.0
        y.backward()
    np.testing.assert_allclose(w.grad.numpy(), [2.0, 4.0])


def test_tangents_end_with_their_level():
    with fwAD.dual_level():
        d = fwAD.make_dual(tg.tensor([1.0]), tg.tensor([1.0]))
        y = d * 3
    assert fwAD.unpack_dual(y).tangent is None


def test_tangents_cross_tapes():
    with fwAD.dual_level():
        d = fwAD.make_dual(tg.tensor([0.5]), tg.tensor([2.0]))
        with tg.Tape():
            y = d.exp()
        z = y * y                       # on another tape: y is an external entry there
        assert fwAD.unpack_dual(z).tangent.item() == pytest.approx(4 * np.exp(1.0))


def test_forward_ad_errors_are_pytorchs():
    with pytest.raises(RuntimeError, match="no level exists, make sure to enter_dual_level"):
        fwAD.make_dual(tg.ones(2), tg.ones(2))
    with fwAD.dual_level():
        with pytest.raises(RuntimeError, match="Tensor is of size \\[2\\] while the given "
                                               "forward gradient is of size \\[3\\]"):
            fwAD.make_dual(tg.ones(2), tg.ones(3))


def test_custom_function_without_jvp_is_refused_in_forward_mode():
    with fwAD.dual_level():
        d = fwAD.make_dual(tg.ones(2), tg.ones(2))
        y = Double.apply(d)
        with pytest.raises(RuntimeError, match="You must implement the jvp function"):
            fwAD.unpack_dual(y)


def _no_grad_inside_dual_level(m, make_inside=False):
    fw = m.autograd.forward_ad
    x = m.tensor([1., 2., 3.], dtype=m.float64)
    t = m.tensor([1., 0., 0.5], dtype=m.float64)
    with fw.dual_level():
        d = None if make_inside else fw.make_dual(x, t)
        with m.no_grad():
            if make_inside:
                d = fw.make_dual(x, t)
            y = d.sin() * 2
        return fw.unpack_dual(y).tangent, fw.unpack_dual(y * d).tangent


def _constants_made_under_no_grad(m):
    """Tensors made under no_grad inside a dual level from no dual (factories, a mask):
    they carry no tangent, in PyTorch as here, and the tangent through them is exact."""
    fw = m.autograd.forward_ad
    with fw.dual_level():
        x = fw.make_dual(m.tensor([1., -2., 3.], dtype=m.float64),
                         m.tensor([1., 0.5, -1.], dtype=m.float64))
        with m.no_grad():
            c = m.arange(1, 4, dtype=m.float64)
            mask = x > 0
            z = m.tensor([0.5, 0.25, 2.0], dtype=m.float64)
            e = m.eye(3, dtype=m.float64)
        return fw.unpack_dual((x * c).sin() * mask + z * x @ e).tangent.numpy()


def test_constants_made_under_no_grad_keep_the_tangent_exact():
    np.testing.assert_allclose(_constants_made_under_no_grad(tg),
                               _constants_made_under_no_grad(torch), rtol=1e-14)


def test_forward_ad_under_no_grad_is_refused_not_dropped():
    """PyTorch keeps propagating tangents under no_grad; tapegrad records nothing there,
    so it refuses (rather than answer None, or a tangent that misses the ops there)."""
    p_inner, p_outer = _no_grad_inside_dual_level(torch)
    assert p_inner is not None and p_outer is not None      # PyTorch's: carried on
    for make_inside in (False, True):
        with pytest.raises(NotImplementedError, match="forward-mode AD under no_grad"):
            _no_grad_inside_dual_level(tg, make_inside)
    with fwAD.dual_level():                 # inference_mode drops tangents in both
        d = fwAD.make_dual(tg.tensor([1., 2.]), tg.tensor([1., 1.]))
        with tg.inference_mode():
            y = d.sin()
        assert fwAD.unpack_dual(y).tangent is None
    with fwAD.dual_level():                 # no_grad on values apart from the duals: fine
        d = fwAD.make_dual(tg.tensor([1., 2.]), tg.tensor([1., 1.]))
        s = tg.tensor([3., 4.])
        with tg.no_grad():
            s.mul_(2)
        np.testing.assert_allclose(fwAD.unpack_dual(d * s).tangent.numpy(), [6., 8.])

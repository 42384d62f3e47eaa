"""With ``create_graph=True`` a gradient requires grad as PyTorch's does: where PyTorch's
backward reads a saved tensor that requires grad (relu's result, x for square, a
composite Node's inputs), also where its derivative in it is zero, and not otherwise
(a 0-d prod).  Each program runs with torch and with tapegrad: the ``requires_grad``
and ``grad_fn`` of the first, second and third derivatives must agree, and the next
derivative's values (zeros where a derivative is constant)."""
import math

import numpy as np
import pytest
import torch

import tapegrad
from tapegrad.ops.table import BINARY, UNARY

pytestmark = pytest.mark.usefixtures("torch_float64")
XS = [-1.5, -0.5, 0.3, 0.7, 1.2]
POS = [0.2, 0.4, 0.6, 0.7, 0.9]
RNG = np.random.default_rng(0)
IMG, KER, VEC, MAT = (RNG.standard_normal(s) for s in ((2, 3, 4, 4), (2, 3, 2, 2), 6, (3, 4)))


def _derivatives(m, f, make, wrt=0, order=3, unused_as_zeros=False):
    """[(requires_grad, has grad_fn, values)] of successive derivatives of f's sum in input
    ``wrt``, up to the first that does not require grad; 'None' for one not reached
    (zeros when ``unused_as_zeros``: PyTorch's undefined gradients of a Node's double
    backward, where tapegrad passes zeros)."""
    ins = make(m)
    cur, out = f(m, *ins), []
    for _ in range(order):
        d, = m.autograd.grad(cur.sum(), ins[wrt], create_graph=True, allow_unused=True)
        if d is None:
            if not unused_as_zeros:
                out.append("None")
                break
            d = m.zeros_like(ins[wrt])
        out.append((d.requires_grad, d.grad_fn is not None, _values(d)))
        if not d.requires_grad:
            break
        cur = d
    return out


def _values(d):
    if getattr(d, "_is_zerotensor", lambda: False)():        # (abs's: torch's ZeroTensor)
        return np.zeros(tuple(d.shape))
    return np.array(d.detach().tolist())


def _same(f, make, wrt=0, order=3, unused_as_zeros=False):
    want = _derivatives(torch, f, make, wrt, order, unused_as_zeros)
    got = _derivatives(tapegrad, f, make, wrt, order, unused_as_zeros)
    assert [w if w == "None" else w[:2] for w in want] == \
        [g if g == "None" else g[:2] for g in got]
    for w, g in zip(want, got):
        if w != "None":
            np.testing.assert_allclose(g[2], w[2], rtol=1e-10, atol=1e-12, equal_nan=True)


def _t(values, rg=True):
    return lambda m: [m.tensor(values, requires_grad=rg)]


@pytest.mark.parametrize("zero_d", [False, True])
@pytest.mark.parametrize("name", [op.name for op in UNARY if hasattr(torch, op.name)])
def test_unary_ops(name, zero_d):
    op = next(o for o in UNARY if o.name == name)
    xs = POS if op.domain[0] > 0 else XS
    f = (lambda m, x: m.clamp(x, -0.4, 0.8)) if name == "clamp" else \
        (lambda m, x: getattr(m, name)(x))
    _same(f, _t(xs[1] if zero_d else xs))


# (torch's maximum, minimum, hypot, xlogy, atan2, logaddexp and logaddexp2 take no Python
# number)
BINARY_CASES = [(op.name, operands) for op in BINARY if hasattr(torch, op.name)
                for operands in ("both", "x", "y", "scalar", "0-d")
                if operands != "scalar" or op.name not in
                ("maximum", "minimum", "hypot", "xlogy", "atan2", "logaddexp", "logaddexp2")]


def _binary(name):
    """The op as a function of (module, x, y): floor_divide is the one with a
    derivative, div(rounding_mode='floor') (PyTorch's floor_divide has none)."""
    if name == "floor_divide":
        return lambda m, x, y: m.div(x, y, rounding_mode="floor")
    return lambda m, x, y: getattr(m, name)(x, y)


@pytest.mark.parametrize("name, operands", BINARY_CASES)
def test_binary_ops(name, operands):
    op = next(o for o in BINARY if o.name == name)
    xs = POS if op.domain[0] > 0 else XS
    ys = POS if op.domain_y[0] > 0 else [0.5, -1.0, 2.0, 0.3, -0.7]
    f = _binary(name)
    if operands == "scalar":
        _same(lambda m, x: f(m, x, ys[1]), _t(xs))
        return
    if operands == "0-d":
        xs, ys = xs[1], ys[1]
    rx, ry = operands != "y", operands != "x"
    make = lambda m: [m.tensor(xs, requires_grad=rx), m.tensor(ys, requires_grad=ry)]
    _same(f, make, wrt=0 if rx else 1)


F = lambda m: m.nn.functional
PROGRAMS = {
    "relu": (lambda m, x: m.relu(x), _t(VEC), 0),
    "relu 0-d": (lambda m, x: m.relu(x), _t(-0.4), 0),
    "relu of a product": (lambda m, x, y: F(m).relu(x * y),
                          lambda m: [m.tensor(VEC, requires_grad=True),
                                     m.tensor(VEC[::-1].copy(), requires_grad=True)], 1),
    "relu squared": (lambda m, x: F(m).relu(x) ** 2, _t(VEC), 0),
    "leaky_relu": (lambda m, x: F(m).leaky_relu(x, 0.1), _t(VEC), 0),
    "max_pool1d": (lambda m, x: F(m).max_pool1d(x, 2), _t(IMG[0, :, 0]), 0),
    "max_pool2d": (lambda m, x: F(m).max_pool2d(x, 2), _t(IMG), 0),
    "max_pool2d squared": (lambda m, x: F(m).max_pool2d(x, 2) ** 2, _t(IMG), 0),
    "square": (lambda m, x: x.square(), _t(VEC), 0),
    "square 0-d": (lambda m, x: x.square(), _t(0.3), 0),
    "x ** 2": (lambda m, x: x ** 2, _t(VEC), 0),
    "x ** 3": (lambda m, x: x ** 3, _t(VEC), 0),
    "pow": (lambda m, x, y: m.pow(x, y),
            lambda m: [m.tensor(np.abs(VEC), requires_grad=True), m.tensor(VEC)], 0),
    "x * x": (lambda m, x: x * x, _t(VEC), 0),
    "x + y": (lambda m, x, y: x + y, lambda m: [m.tensor(VEC, requires_grad=True),
                                                m.tensor(VEC, requires_grad=True)], 0),
    "linear": (lambda m, x, w, b: F(m).linear(x, w, b) ** 2,
               lambda m: [m.tensor(MAT, requires_grad=True), m.tensor(MAT.copy(), requires_grad=True),
                          m.tensor(VEC[:3], requires_grad=True)], 0),
    "linear bias": (lambda m, x, w, b: F(m).linear(x, w, b),
                    lambda m: [m.tensor(MAT, requires_grad=True), m.tensor(MAT.copy(), requires_grad=True),
                               m.tensor(VEC[:3], requires_grad=True)], 2),
    "matmul": (lambda m, x: x @ x, _t(MAT[:, :3]), 0),
    "sum": (lambda m, x: x.sum(), _t(MAT), 0),
    "sum cubed": (lambda m, x: x.sum(1) ** 3, _t(MAT), 0),
    "mean": (lambda m, x: x.mean(), _t(MAT), 0),
    "mean squared": (lambda m, x: x.mean(0) ** 2, _t(MAT), 0),
    "var": (lambda m, x: x.var(1), _t(MAT), 0),
    "prod": (lambda m, x: x.prod(1), _t(MAT), 0),
    "prod 0-d": (lambda m, x: x.prod(), _t(0.7), 0),
    "amax": (lambda m, x: x.amax(1), _t(MAT), 0),
    "softmax": (lambda m, x: m.softmax(x, 1) ** 2, _t(MAT), 0),
    "logsumexp": (lambda m, x: m.logsumexp(x, 1), _t(MAT), 0),
    "gather squared": (lambda m, x: x[[0, 2, 2]] ** 2, _t(VEC), 0),
}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_programs(name):
    f, make, wrt = PROGRAMS[name]
    _same(f, make, wrt)


LAYERS = {
    "layer_norm": (lambda m, x, w, b: F(m).layer_norm(x, (4,), w, b),
                   lambda m, rx, rw: [m.tensor(MAT, requires_grad=rx),
                                      m.tensor(VEC[:4], requires_grad=rw),
                                      m.tensor(VEC[2:], requires_grad=True)]),
    "batch_norm": (lambda m, x, w, b: F(m).batch_norm(x, None, None, w, b, training=True),
                   lambda m, rx, rw: [m.tensor(IMG, requires_grad=rx),
                                      m.tensor(VEC[:3], requires_grad=rw),
                                      m.tensor(VEC[3:], requires_grad=True)]),
    "batch_norm eval": (lambda m, x, w, b: F(m).batch_norm(x, m.zeros(3), m.ones(3), w, b),
                        lambda m, rx, rw: [m.tensor(IMG, requires_grad=rx),
                                           m.tensor(VEC[:3], requires_grad=rw),
                                           m.tensor(VEC[3:], requires_grad=True)]),
    "conv2d": (lambda m, x, w, b: F(m).conv2d(x, w, b),
               lambda m, rx, rw: [m.tensor(IMG, requires_grad=rx),
                                  m.tensor(KER, requires_grad=rw),
                                  m.tensor(VEC[:2], requires_grad=True)]),
}


@pytest.mark.parametrize("reads", [(True, True), (True, False), (False, True), (False, False)])
@pytest.mark.parametrize("name", list(LAYERS))
def test_layer_bias_gradients(name, reads):
    """A bias's gradient requires grad where the Node's backward reads an input that
    does (layer_norm's reads the bias too; conv2d's and batch_norm's do not).  Its
    derivatives are PyTorch's undefined gradients, zeros here."""
    f, make = LAYERS[name]
    _same(f, lambda m: make(m, *reads), wrt=2, order=2, unused_as_zeros=True)


def test_hessian_of_a_relu_mlp():
    def program(m):
        w1 = m.tensor(np.linspace(-1, 1, 15).reshape(5, 3))
        w2 = m.tensor(np.linspace(1, -0.5, 5).reshape(1, 5))
        f = lambda x: F(m).linear(m.relu(F(m).linear(x, w1)), w2).sum()
        return m.autograd.functional.hessian(f, m.tensor([0.3, -0.2, 0.5])).numpy()
    want, got = program(torch), program(tapegrad)
    assert not want.any()
    np.testing.assert_array_equal(got, want)


def test_traced_hvp_of_a_relu_function():
    f = lambda x: (tapegrad.relu(x) ** 3).sum() + (x * x).sum()
    x = tapegrad.tensor([0.5, -1.0, 2.0])
    v = tapegrad.tensor([1.0, 2.0, -1.0])
    got = tapegrad.trace(f, x).hvp((x,), v)[1]
    tx = torch.tensor([0.5, -1.0, 2.0])
    want = torch.autograd.functional.hvp(lambda x: (torch.relu(x) ** 3).sum() + (x * x).sum(),
                                         tx, torch.tensor([1.0, 2.0, -1.0]))[1]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


def test_values_of_relu_gradient_keep_their_bits():
    """The read adds no arithmetic: nan, inf and signed zeros come through unchanged."""
    vals = [-0.0, 0.0, -1.0, 2.0, math.inf, -math.inf, math.nan]
    for seed in ([1.0] * 7, [-0.0, math.inf, math.nan, -2.0, 1.0, math.nan, -math.inf]):
        x = tapegrad.tensor(vals, requires_grad=True)
        g1, = tapegrad.autograd.grad(tapegrad.relu(x), x, tapegrad.tensor(seed),
                                     create_graph=True)
        x2 = tapegrad.tensor(vals, requires_grad=True)
        tapegrad.relu(x2).backward(tapegrad.tensor(seed))
        assert g1.requires_grad
        np.testing.assert_array_equal(np.signbit(g1.detach().numpy()), np.signbit(x2.grad.numpy()))
        np.testing.assert_array_equal(g1.detach().numpy(), x2.grad.numpy())

"""nn.functional against PyTorch: values and gradients (float64), stability at extreme
inputs, the graph PyTorch records (Node names down to the leaves), gradcheck, errors
and warnings."""
import warnings

import numpy as np
import pytest
import torch

import tapegrad
from tapegrad.autograd import gradcheck

pytestmark = pytest.mark.usefixtures("torch_float64")
R = np.random.RandomState(3)
A = R.randn(4, 5) * 3
BIG = np.array([[1000.0, 999.0, -1000.0], [-1e300, 0.0, 1e-300], [5.0, 5.0, 5.0]])
WITH_INF = np.array([[-np.inf, 0.0, 1.0], [-np.inf, -np.inf, -np.inf], [np.inf, 0.0, -np.inf]])


def _names(fn):
    """The graph below ``fn`` as nested (name, children) tuples."""
    if fn is None:
        return None
    return (fn.name().replace("torch::autograd::", ""),
            tuple(_names(child) for child, _ in fn.next_functions))


def _run(m, fn, arrays):
    xs = [m.tensor(a, requires_grad=True) for a in arrays]
    out = fn(m, *xs)
    cot = np.random.RandomState(1).randn(*out.shape)
    cot = np.where(np.isfinite(out.detach().numpy()), cot, 0.0)
    (out * m.tensor(cot)).sum().backward()
    return out.detach().numpy(), [x.grad.numpy() for x in xs], _names(out.grad_fn)


F_CASES = {
    "softmax-1": (lambda m, x: m.nn.functional.softmax(x, dim=1), [A]),
    "softmax-0-method": (lambda m, x: x.softmax(0), [A]),
    "softmax-big": (lambda m, x: m.softmax(x, -1), [BIG]),
    "log_softmax": (lambda m, x: m.nn.functional.log_softmax(x, dim=-1), [A]),
    "log_softmax-big": (lambda m, x: x.log_softmax(1), [BIG]),
    "log_softmax-3d": (lambda m, x: m.log_softmax(x, 1), [R.randn(2, 3, 4)]),
    "logsumexp": (lambda m, x: m.logsumexp(x, 1), [A]),
    "logsumexp-keepdim-method": (lambda m, x: x.logsumexp(0, keepdim=True), [A]),
    "logsumexp-dims": (lambda m, x: m.logsumexp(x, (0, 2)), [R.randn(2, 3, 4)]),
    "logsumexp-big": (lambda m, x: m.logsumexp(x, 1), [BIG]),
    "logsumexp-0d": (lambda m, x: m.logsumexp(x, 0), [np.array(1.5)]),
    "softplus": (lambda m, x: m.nn.functional.softplus(x), [BIG[:1] / 50]),
    "softplus-beta": (lambda m, x: m.nn.functional.softplus(x, beta=0.5, threshold=4.0), [A]),
    "gelu": (lambda m, x: m.nn.functional.gelu(x), [A]),
    "gelu-tanh": (lambda m, x: m.nn.functional.gelu(x, approximate="tanh"), [A]),
    "leaky_relu": (lambda m, x: m.nn.functional.leaky_relu(x, 0.1), [np.r_[A.ravel(), 0.0]]),
    "relu": (lambda m, x: m.nn.functional.relu(x), [A]),
    "sigmoid": (lambda m, x: m.nn.functional.sigmoid(x), [A]),
    "tanh": (lambda m, x: m.nn.functional.tanh(x), [A]),
    "linear": (lambda m, x, w, b: m.nn.functional.linear(x, w, b),
               [A, R.randn(3, 5), R.randn(3)]),
    "linear-nobias": (lambda m, x, w: m.nn.functional.linear(x, w), [A, R.randn(3, 5)]),
    "linear-3d": (lambda m, x, w, b: m.nn.functional.linear(x, w, b),
                  [R.randn(2, 4, 5), R.randn(3, 5), R.randn(3)]),
    "linear-3d-nobias": (lambda m, x, w: m.nn.functional.linear(x, w),
                         [R.randn(2, 4, 5), R.randn(3, 5)]),
    "linear-1d": (lambda m, x, w, b: m.nn.functional.linear(x, w, b),
                  [R.randn(5), R.randn(3, 5), R.randn(3)]),
    "linear-1d-nobias": (lambda m, x, w: m.nn.functional.linear(x, w),
                         [R.randn(5), R.randn(3, 5)]),
    "mse_loss": (lambda m, x, y: m.nn.functional.mse_loss(x, y), [A, R.randn(4, 5)]),
    "cross_entropy": (lambda m, x: m.nn.functional.cross_entropy(
        x, m.tensor([4, 0, 2, 2])), [A]),
    "nll_loss": (lambda m, x: m.nn.functional.nll_loss(
        x.log_softmax(1), m.tensor([4, 0, 2, 2]), reduction="sum"), [A]),
    "bce_logits": (lambda m, x, y: m.nn.functional.binary_cross_entropy_with_logits(x, y),
                   [A, R.rand(4, 5)]),
}


@pytest.mark.parametrize("name", F_CASES)
def test_functional_matches_torch(both, name):
    fn, arrays = F_CASES[name]
    (to, tg, tn), (go, gg, gn) = both(lambda m: _run(m, fn, arrays))
    np.testing.assert_allclose(go, to, rtol=1e-10, atol=1e-12)
    for a, b in zip(tg, gg):
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-12)
    assert gn == tn


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "logsumexp"])
def test_infinities_like_torch(both, name):
    """-inf entries are probabilities 0; all -inf rows and +inf entries give what PyTorch
    gives (nan / inf), without warnings or errors."""
    def program(m):
        x = m.tensor(WITH_INF)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            return getattr(m.nn.functional if name != "logsumexp" else m, name)(x, 1).numpy()
    a, b = both(program)
    np.testing.assert_allclose(b, a, rtol=1e-15, atol=0)


# finite differences cannot resolve the extreme magnitudes of the "big" cases
@pytest.mark.parametrize("name", [n for n in F_CASES if not n.endswith("big")
                                  and n != "softplus"])
def test_gradcheck(name):
    fn, arrays = F_CASES[name]
    xs = [tapegrad.tensor(a, requires_grad=True) for a in arrays]
    if name == "bce_logits":
        xs[1] = xs[1].detach()
    if name == "leaky_relu":
        xs[0] = tapegrad.tensor(np.r_[A.ravel(), 0.5], requires_grad=True)
    assert gradcheck(lambda *v: fn(tapegrad, *v), tuple(xs))


def test_exports():
    x = tapegrad.tensor(A)
    for f in (tapegrad.softmax, tapegrad.log_softmax):
        assert np.allclose(f(x, 1).numpy(), getattr(torch, f.__name__)(torch.tensor(A), 1))
    assert np.allclose(tapegrad.logsumexp(x, 1).numpy(), torch.logsumexp(torch.tensor(A), 1))
    assert set(tapegrad.nn.functional.__all__) >= {
        "softmax", "log_softmax", "logsumexp", "softplus", "gelu", "leaky_relu", "relu",
        "sigmoid", "tanh", "dropout", "mse_loss", "cross_entropy",
        "binary_cross_entropy_with_logits", "linear"}


def test_float32_stays_float32(both):
    def program(m):
        x = m.tensor(A, dtype=m.float32, requires_grad=True)
        outs = [m.softmax(x, 1), m.nn.functional.cross_entropy(x, m.tensor([1, 0, 2, 2])),
                m.nn.functional.gelu(x), m.logsumexp(x, 0)]
        sum(o.sum() for o in outs).backward()
        return [o.dtype == m.float32 for o in outs] + [x.grad.dtype == m.float32], \
            [o.detach().numpy() for o in outs]
    (ta, tv), (ga, gv) = both(program)
    assert ta == ga == [True] * 5
    for a, b in zip(tv, gv):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


ERRORS = [
    (lambda m: m.nn.functional.mse_loss(m.ones(2), m.ones(2), reduction="avg"),
     ValueError, "avg is not a valid value for reduction"),
    (lambda m: m.nn.functional.gelu(m.ones(2), approximate="fast"),
     RuntimeError, "approximate argument must be either none or tanh."),
    (lambda m: m.nn.functional.cross_entropy(m.ones(2, 3), m.tensor([0, 3])),
     IndexError, "Target 3 is out of bounds."),
    (lambda m: m.nn.functional.cross_entropy(m.ones(2, 3), m.tensor([0, 1, 1])),
     ValueError, "Expected input batch_size (2) to match target batch_size (3)."),
    (lambda m: m.nn.functional.cross_entropy(m.ones(2, 3), m.tensor([0.0, 1.0])),
     RuntimeError, "expected target dtype to be Long or Byte, but got"),
    (lambda m: m.nn.functional.binary_cross_entropy_with_logits(m.ones(2, 3), m.ones(3)),
     ValueError, "Target size ("),
    (lambda m: m.nn.functional.dropout(m.ones(2), p=-0.1),
     ValueError, "dropout probability has to be between 0 and 1, but got -0.1"),
]


@pytest.mark.parametrize("call,error,message", ERRORS)
def test_errors_match_torch(call, error, message):
    for m in (torch, tapegrad):
        with pytest.raises(error) as err:
            call(m)
        assert str(err.value).startswith(message), (m.__name__, str(err.value))


def test_warnings_match_torch(both):
    def program(m):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            m.nn.functional.mse_loss(m.ones(2, 3), m.ones(3))
            out = m.nn.functional.softmax(m.tensor(A))
        texts = [str(w.message).replace("torch.Size", "Size").replace("tapegrad.Size", "Size")
                 for w in caught]
        return texts, out.numpy()
    (ta, tv), (ga, gv) = both(program)
    assert ga == ta and len(ta) == 2
    np.testing.assert_allclose(gv, tv, rtol=1e-12)

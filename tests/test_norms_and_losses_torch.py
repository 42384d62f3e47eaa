"""norm's orders and dtypes, the reductions' ``dtype=``, binary_cross_entropy_with_logits
at confident logits and nll_loss / cross_entropy with no target left, against PyTorch:
values, gradients (nan where PyTorch's is nan), dtypes and error messages."""
import math

import numpy as np
import pytest
import torch

import tapegrad

pytestmark = pytest.mark.usefixtures("torch_float64")

# (2, 3, 4): rows with an exact zero, rows with ties of |x|, rows with neither
X = (np.arange(1.0, 25.0) / 7 * (-1.0) ** np.arange(24)).reshape(2, 3, 4)
X[0, 0, 1] = X[1, 2, 3] = X[1, 0, 0] = 0.0
X[0, 1, 2] = -X[0, 1, 0]
X[1, 1, 1] = X[1, 1, 3]
NORM_CASES = [((0, 0), None, False), ((0, 1), None, False), ((0,), 1, False),
              ((0,), 0, True), ((), (0, 2), False), ((), -1, True), ((), None, False),
              ((), (1,), False), ((), (-1, 0), True)]
ORDERS = [math.inf, -math.inf, 0.5, -1, -2, -0.5, 1, 2, 3, 1.5, "fro", None]


def _np(t):
    return None if t is None else t.detach().numpy()


def _same(got, want, rtol=1e-12, atol=1e-15):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    assert (np.isnan(got) == np.isnan(want)).all()


def _norm_program(at, p, dim, keepdim, dtype=np.float64):
    def program(m):
        x = m.tensor(X[at].astype(dtype), requires_grad=True)
        n = x.norm(p, dim=dim, keepdim=keepdim)
        (n * m.arange(1.0, n.numel() + 1.0).to(n.dtype).reshape(n.shape)).sum().backward()
        return _np(n), _np(x.grad)
    return program


@pytest.mark.parametrize("p", ORDERS, ids=str)
@pytest.mark.parametrize("at, dim, keepdim", NORM_CASES)
def test_norm_orders(both, p, at, dim, keepdim):
    """-inf is the smallest |x| (its gradient shared among ties, as inf's); below 1 a
    zero entry's gradient is 0, never nan (nor, for negative p, the others')."""
    (want, want_g), (got, got_g) = both(_norm_program(at, p, dim, keepdim))
    _same(got, want)
    _same(got_g, want_g)


@pytest.mark.parametrize("p", [-math.inf, math.inf, 0.5, -1, 3])
def test_norm_orders_float32(both, p):
    (want, want_g), (got, got_g) = both(_norm_program((), p, (0, 2), False, np.float32))
    _same(got, want, rtol=1e-6, atol=1e-7)
    _same(got_g, want_g, rtol=1e-6, atol=1e-7)


def test_norm_zero_order(both):
    """p = 0 counts the non-zeros; PyTorch's backward gives it no gradient."""
    def program(m):
        x = m.tensor(X[0], requires_grad=True)
        n = x.norm(0, dim=1)
        (n.sum() + (x * x).sum()).backward()
        return _np(n), _np(x.grad)
    (want, want_g), (got, got_g) = both(program)
    _same(got, want)
    _same(got_g, want_g)


def _error(f):
    with pytest.raises(Exception) as info:
        f()
    return type(info.value), str(info.value)


@pytest.mark.parametrize("p, dim", [("fro", (0, 1, 2)), ("fro", [-3, -2, -1]), ("abc", None),
                                    ("abc", 0)])
def test_norm_string_orders_refused_as_pytorch(p, dim):
    want = _error(lambda: torch.tensor(X).norm(p, dim=dim))
    assert want[0] is RuntimeError
    assert _error(lambda: tapegrad.tensor(X).norm(p, dim=dim)) == want


def test_norm_nuclear_says_it_is_missing():
    """PyTorch computes it (a sum of singular values); tapegrad has no SVD and says so
    rather than failing inside, or computing another norm."""
    with pytest.raises(RuntimeError, match="'nuc'"):
        tapegrad.tensor(X[0]).norm("nuc")


# -- dtype= -------------------------------------------------------------------------------
REDUCTIONS = ["sum", "mean", "prod", "norm", "cumsum", "cumprod"]
DTYPES = ["float32", "float64", "int64"]


def _reduced(m, fn, x, dim, dtype):
    if fn.startswith("cum"):
        return getattr(x, fn)(0 if dim is None else dim, dtype=dtype)
    if dim is None:
        return getattr(x, fn)(dtype=dtype)
    return getattr(x, fn)(dim=dim, dtype=dtype)


@pytest.mark.parametrize("dim", [None, 1])
@pytest.mark.parametrize("dst", DTYPES)
@pytest.mark.parametrize("src", DTYPES)
@pytest.mark.parametrize("fn", REDUCTIONS)
def test_reduction_dtype(both, fn, src, dst, dim):
    """The input is cast to ``dtype`` first; the result is in it, the gradient in the
    input's dtype; PyTorch's refusals (mean and norm to integers, norm of integers or
    narrowing) are its errors."""
    def program(m):
        x = m.tensor(X[0] * 3).to(getattr(m, src))
        rg = src != "int64" and dst != "int64"
        x.requires_grad_(rg)
        try:
            y = _reduced(m, fn, x, dim, getattr(m, dst))
        except RuntimeError as e:
            return "error", str(e)
        if rg:
            y.sum().backward()
        return str(y.dtype).split(".")[-1], _np(y), None if not rg else _np(x.grad)
    want, got = both(program)
    assert got[:1] == want[:1]
    if want[0] == "error":
        assert got == want
        return
    tol = dict(rtol=1e-6, atol=1e-5) if "float32" in (src, dst) else {}
    _same(got[1], want[1], **tol)
    if want[2] is not None:
        _same(got[2], want[2], **tol)


# -- binary_cross_entropy_with_logits --------------------------------------------------------
LOGITS = [-800.0, -50.0, -22.0, -3.0, -0.5, 0.0, 0.5, 3.0, 22.0, 30.0, 50.0, 800.0]


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("weighted", ["none", "weight", "pos_weight", "both"])
def test_bce_with_logits_at_confident_logits(both, weighted, reduction):
    """log1p(exp(-|x|)) is kept where it is all of the loss (x = -22, t = 0: 2.8e-10, not
    0), at logits up to +-800, with the target's gradient as well."""
    def program(m):
        x = m.tensor(LOGITS * 3, requires_grad=True)
        t = m.tensor([0.0] * 12 + [1.0] * 12 + [0.3] * 12, requires_grad=True)
        kw = {}
        if weighted in ("weight", "both"):
            kw["weight"] = m.linspace(0.5, 2.0, 36)
        if weighted in ("pos_weight", "both"):
            kw["pos_weight"] = m.tensor(3.0)
        loss = m.nn.functional.binary_cross_entropy_with_logits(x, t, reduction=reduction,
                                                                **kw)
        gx, gt = m.autograd.grad(loss.sum(), (x, t), create_graph=True)
        ggx, = m.autograd.grad(gx.sum(), x)       # sigmoid's slope, 1/4 at x = 0
        return _np(loss), _np(gx), _np(gt), _np(ggx)
    for want, got in zip(*both(program)):
        _same(got, want, rtol=1e-9, atol=1e-15)


# -- nll_loss / cross_entropy ------------------------------------------------------------------
def _ce(m, shape, target, **kw):
    x = m.tensor(np.arange(float(np.prod(shape))).reshape(shape) / 7, requires_grad=True)
    loss = m.nn.functional.cross_entropy(x, m.tensor(target), **kw)
    loss.backward()
    return _np(loss), _np(x.grad)


@pytest.mark.parametrize("kw", [{}, {"label_smoothing": 0.2},
                                {"weight": np.array([1.0, 2.0, 0.5, 1.0])},
                                {"weight": np.array([1.0, 2.0, 0.5, 1.0]), "label_smoothing": 0.2}],
                         ids=["plain", "smoothing", "weight", "weight-smoothing"])
@pytest.mark.parametrize("shape, target", [((2, 4), [-100, -100]), ((4,), -100),
                                           ((1, 4, 3), [[-100, -100, -100]])])
def test_cross_entropy_mean_of_all_ignored(both, shape, target, kw):
    """nan, as PyTorch's 0 / 0, whose gradient is 0 (ignored targets get none), not nan."""
    def program(m):
        args = {k: m.tensor(v) if k == "weight" else v for k, v in kw.items()}
        return _ce(m, shape, target, **args)
    (want, want_g), (got, got_g) = both(program)
    assert np.isnan(want) and (want_g == 0).all()
    _same(got, want)
    _same(got_g, want_g)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("loss", ["nll_loss", "cross_entropy"])
def test_losses_over_an_empty_batch(both, loss, reduction):
    def program(m):
        x = m.zeros(0, 4, requires_grad=True)
        out = getattr(m.nn.functional, loss)(x, m.zeros(0, dtype=m.int64), reduction=reduction)
        out.sum().backward()
        return _np(out), _np(x.grad)
    (want, want_g), (got, got_g) = both(program)
    _same(got, want)
    _same(got_g, want_g)


def test_nll_loss_zero_total_weight(both):
    """Targets left but of weight 0: nan, and nan gradients where they point (PyTorch's
    -w / total)."""
    def program(m):
        x = m.tensor(np.arange(8.0).reshape(2, 4) / 7, requires_grad=True)
        loss = m.nn.functional.nll_loss(x, m.tensor([1, -100]),
                                        weight=m.tensor([1.0, 0.0, 0.0, 1.0]))
        loss.backward()
        return _np(loss), _np(x.grad)
    (want, want_g), (got, got_g) = both(program)
    _same(got, want)
    _same(got_g, want_g)


# (class-probability targets are cross_entropy's only)
WEIGHT_CASES = [(loss, shape, target) for loss in ("nll_loss", "cross_entropy")
                for shape, target in [((2, 4), [1, 2]), ((4,), 1), ((2, 4, 3), "zeros"),
                                      ((2, 4), "probabilities")]
                if loss == "cross_entropy" or target != "probabilities"]


@pytest.mark.parametrize("wshape", [(3,), (5,), (2, 2), (1, 4)])
@pytest.mark.parametrize("loss, shape, target", WEIGHT_CASES)
def test_class_weight_of_the_wrong_shape(loss, shape, target, wshape):
    """PyTorch's RuntimeError (NllLoss2d, of 3 dims and more, counts the values only)."""

    def program(m):
        x = m.zeros(*shape)
        t = (m.zeros(shape[0], *shape[2:], dtype=m.int64) if target == "zeros" else
             m.full(shape, 0.25) if target == "probabilities" else m.tensor(target))
        return getattr(m.nn.functional, loss)(x, t, weight=m.ones(*wshape))
    try:
        want = ("value", program(torch).item())
    except RuntimeError as e:
        want = ("error", str(e))
    try:
        got = ("value", program(tapegrad).item())
    except RuntimeError as e:
        got = ("error", str(e))
    assert got == want

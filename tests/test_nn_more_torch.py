"""More of nn against PyTorch 2.13: silu, elu, mish, hardtanh, prelu, softsign, l1_loss,
smooth_l1_loss, huber_loss, binary_cross_entropy, kl_div (functional and modules), NLLLoss,
diag_embed: values, Nodes, gradients (edges included), gradcheck / gradgradcheck, module
reprs and state, errors."""
import numpy as np
import pytest

import tapegrad as tg
from tapegrad.autograd import gradcheck, gradgradcheck
from torch_twins import raised_by_both

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.usefixtures("torch_float64")


def _run(m, program, arrays):
    leaves = [m.tensor(a, requires_grad=True) for a in arrays]
    out = program(m, *leaves)
    rng = np.random.default_rng(5)
    (out * m.tensor(rng.standard_normal(tuple(out.shape)))).sum().backward()
    grads = [None if x.grad is None else x.grad.numpy() for x in leaves]
    return out.detach().numpy(), out.grad_fn.name(), grads


def _assert_same(program, arrays):
    want, got = _run(torch, program, arrays), _run(tg, program, arrays)
    assert got[0].shape == want[0].shape
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12, atol=1e-14)
    assert got[1] == want[1]
    for w, g in zip(want[2], got[2]):
        assert (w is None) == (g is None)
        if w is not None:
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)


def F(m):
    return m.nn.functional


def _p(m, x):
    """A probability in (0.05, 0.95) from any x."""
    return m.sigmoid(x) * 0.9 + 0.05


PROGRAMS = {
    "silu": ([(3, 4)], lambda m, x: F(m).silu(x * 3)),
    "mish": ([(3, 4)], lambda m, x: F(m).mish(x * 3)),
    "elu": ([(3, 4)], lambda m, x: F(m).elu(x)),
    "elu alpha": ([(3, 4)], lambda m, x: F(m).elu(x, alpha=0.5)),
    "hardtanh": ([(3, 4)], lambda m, x: F(m).hardtanh(x * 2)),
    "hardtanh bounds": ([(3, 4)], lambda m, x: F(m).hardtanh(x, -0.5, 0.25)),
    "prelu one": ([(3, 4), (1,)], lambda m, x, w: F(m).prelu(x, w)),
    "prelu channels": ([(2, 3, 4), (3,)], lambda m, x, w: F(m).prelu(x, w)),
    "softsign": ([(3, 4)], lambda m, x: F(m).softsign(x)),
    "l1_loss": ([(3, 4), (3, 4)], lambda m, x, t: F(m).l1_loss(x, t)),
    "l1_loss none": ([(3, 4), (3, 4)], lambda m, x, t: F(m).l1_loss(x, t, reduction="none")),
    "l1_loss sum": ([(3, 4), (3, 4)], lambda m, x, t: F(m).l1_loss(x, t, reduction="sum")),
    "l1_loss weight": ([(3, 4), (3, 4)], lambda m, x, t: F(m).l1_loss(
        x, t, weight=m.arange(12.0).reshape(3, 4))),
    "smooth_l1_loss": ([(3, 4), (3, 4)], lambda m, x, t: F(m).smooth_l1_loss(x, t)),
    "smooth_l1_loss beta": ([(3, 4), (3, 4)], lambda m, x, t: F(m).smooth_l1_loss(
        x, t, reduction="none", beta=0.5)),
    "smooth_l1_loss beta 0": ([(3, 4), (3, 4)], lambda m, x, t: F(m).smooth_l1_loss(
        x, t, beta=0.0)),
    "huber_loss": ([(3, 4), (3, 4)], lambda m, x, t: F(m).huber_loss(x, t, delta=0.5)),
    "huber_loss sum": ([(3, 4), (3, 4)], lambda m, x, t: F(m).huber_loss(x, t, "sum", 2.0)),
    "huber_loss weight": ([(3, 4), (3, 4)], lambda m, x, t: F(m).huber_loss(
        x, t, weight=m.arange(12.0).reshape(3, 4))),
    "binary_cross_entropy": ([(3, 4), (3, 4)], lambda m, x, t: F(m).binary_cross_entropy(
        _p(m, x), _p(m, t))),
    "binary_cross_entropy weight none": ([(3, 4), (3, 4)], lambda m, x, t: F(
        m).binary_cross_entropy(_p(m, x), _p(m, t), weight=m.arange(4.0), reduction="none")),
    "kl_div batchmean": ([(3, 4), (3, 4)], lambda m, x, t: F(m).kl_div(
        x.log_softmax(1), t.softmax(1), reduction="batchmean")),
    "kl_div none": ([(3, 4), (3, 4)], lambda m, x, t: F(m).kl_div(
        x, t.softmax(1), reduction="none")),
    "kl_div log_target sum": ([(3, 4), (3, 4)], lambda m, x, t: F(m).kl_div(
        x, t, reduction="sum", log_target=True)),
    "diag_embed": ([(2, 3)], lambda m, x: m.diag_embed(x)),
    "diag_embed offset dims": ([(2, 3)], lambda m, x: x.diag_embed(-1, 2, 0)),
    "SiLU": ([(3, 4)], lambda m, x: m.nn.SiLU()(x)),
    "ELU": ([(3, 4)], lambda m, x: m.nn.ELU(0.3)(x)),
    "Mish": ([(3, 4)], lambda m, x: m.nn.Mish()(x)),
    "Hardtanh": ([(3, 4)], lambda m, x: m.nn.Hardtanh(-0.5, 0.5)(x)),
    "Softsign": ([(3, 4)], lambda m, x: m.nn.Softsign()(x)),
    "L1Loss": ([(3, 4), (3, 4)], lambda m, x, t: m.nn.L1Loss(reduction="sum")(x, t)),
    "SmoothL1Loss": ([(3, 4), (3, 4)], lambda m, x, t: m.nn.SmoothL1Loss(beta=0.3)(x, t)),
    "HuberLoss": ([(3, 4), (3, 4)], lambda m, x, t: m.nn.HuberLoss(delta=0.3)(x, t)),
    "BCELoss": ([(3, 4), (3, 4)], lambda m, x, t: m.nn.BCELoss(weight=m.arange(4.0))(
        _p(m, x), _p(m, t))),
    "KLDivLoss": ([(3, 4), (3, 4)], lambda m, x, t: m.nn.KLDivLoss(
        reduction="batchmean", log_target=True)(x, t)),
    "NLLLoss": ([(5, 3)], lambda m, x: m.nn.NLLLoss(weight=m.tensor([1.0, 2.0, 0.5]),
                                                   ignore_index=1)(
        x.log_softmax(1), m.tensor([0, 2, 1, 1, 0]))),
    "elu in place": ([(3, 4)], lambda m, x: F(m).elu(x * 1, inplace=True) * 1),
    "silu in place": ([(3, 4)], lambda m, x: F(m).silu(x * 1, inplace=True) * 1),
    "hardtanh in place": ([(3, 4)], lambda m, x: F(m).hardtanh(x * 1, inplace=True) * 1),
}


@pytest.mark.parametrize("name", PROGRAMS)
def test_values_gradients_and_nodes_match_pytorch(name):
    shapes, program = PROGRAMS[name]
    rng = np.random.default_rng(len(name))
    _assert_same(program, [rng.uniform(-2, 2, s) for s in shapes])


@pytest.mark.parametrize("name", ["silu", "mish", "elu alpha", "prelu channels", "softsign",
                                  "smooth_l1_loss beta", "huber_loss", "binary_cross_entropy",
                                  "kl_div batchmean", "diag_embed offset dims"])
def test_gradcheck_and_gradgradcheck(name):
    shapes, program = PROGRAMS[name]
    rng = np.random.default_rng(1)
    leaves = [tg.tensor(rng.uniform(-2, 2, s), requires_grad=True) for s in shapes]
    assert gradcheck(lambda *xs: program(tg, *xs), leaves)
    assert gradgradcheck(lambda *xs: program(tg, *xs), leaves)


EDGES = [0.0, -0.0, -1.0, 1.0, 0.5, -0.5, -0.25, 0.25, -10.0, 10.0, -90.0, 90.0]


@pytest.mark.parametrize("name", ["silu", "mish", "elu", "elu alpha", "hardtanh",
                                  "hardtanh bounds", "softsign"])
def test_edges(name):
    """The gradients at the kinks and bounds (elu's slope alpha at 0, hardtanh's 0 at its
    bounds) and far out.  (elu's slope below 0 is expm1's, result + 1, where PyTorch's
    computes exp(x): they differ in the last bits there, and below -37, where result + 1
    is 0.)"""
    program = PROGRAMS[name][1]
    want, got = _run(torch, program, [EDGES]), _run(tg, program, [EDGES])
    np.testing.assert_allclose(got[0], want[0], rtol=1e-14, atol=0)
    np.testing.assert_allclose(got[2][0], want[2][0], rtol=1e-12, atol=1e-30)


def test_modules_repr_and_state():
    for m in (torch, tg):
        nn = m.nn
        reprs = [repr(x) for x in (nn.SiLU(), nn.SiLU(True), nn.ELU(), nn.ELU(0.5, True),
                                   nn.Mish(), nn.Hardtanh(), nn.Hardtanh(-2, 3), nn.PReLU(),
                                   nn.PReLU(3), nn.Softsign(), nn.L1Loss(), nn.SmoothL1Loss(),
                                   nn.HuberLoss(), nn.BCELoss(), nn.KLDivLoss(), nn.NLLLoss())]
        prelu = nn.PReLU(3, 0.1)
        state = {k: v.tolist() for k, v in prelu.state_dict().items()}
        bce = list(nn.BCELoss(weight=m.ones(2)).state_dict())
        if m is torch:
            want = (reprs, state, bce)
    assert (reprs, state, bce) == want
    assert [p.shape[0] for p in prelu.parameters()] == [3]


X = [[0.2, 0.5], [0.9, 0.1]]
ERRORS = {
    "hardtanh bounds": lambda m: m.nn.functional.hardtanh(m.tensor(X), 1.0, -1.0),
    "Hardtanh bounds": lambda m: m.nn.Hardtanh(1, -1),
    "prelu channels": lambda m: m.nn.functional.prelu(m.tensor(X), m.ones(3)),
    "prelu channels first": lambda m: m.nn.functional.prelu(m.tensor(X), m.ones(2, 2)),
    "prelu 2-d weight": lambda m: m.nn.functional.prelu(m.tensor(X), m.ones(1, 2)),
    "prelu 1-d input": lambda m: m.nn.functional.prelu(m.ones(3), m.ones(3)),
    "bce range": lambda m: m.nn.functional.binary_cross_entropy(m.tensor(X) * 3, m.tensor(X)),
    "bce size": lambda m: m.nn.functional.binary_cross_entropy(m.tensor(X), m.tensor(X[0])),
    "bce dtype": lambda m: m.nn.functional.binary_cross_entropy(m.tensor(X), m.tensor(
        X, dtype=m.float32)),
    "bce weight grad": lambda m: m.nn.functional.binary_cross_entropy(
        m.tensor(X), m.tensor(X), weight=m.ones(2, requires_grad=True)),
    "kl_div reduction": lambda m: m.nn.functional.kl_div(m.tensor(X), m.tensor(X),
                                                         reduction="foo"),
    "l1 reduction": lambda m: m.nn.functional.l1_loss(m.tensor(X), m.tensor(X),
                                                      reduction="foo"),
    "l1 weight size": lambda m: m.nn.functional.l1_loss(m.tensor(X), m.tensor(X),
                                                        weight=m.ones(2)),
    "huber delta": lambda m: m.nn.functional.huber_loss(m.tensor(X), m.tensor(X), delta=-1.0),
    "smooth_l1 beta": lambda m: m.nn.functional.smooth_l1_loss(m.tensor(X), m.tensor(X),
                                                               beta=-1.0),
    "diag_embed dims": lambda m: m.diag_embed(m.ones(3), 0, 0, 0),
    "diag_embed dim range": lambda m: m.diag_embed(m.ones(3), 0, 0, 3),
    "elu in place on a leaf": lambda m: m.nn.functional.elu(m.ones(2, requires_grad=True),
                                                            inplace=True),
}


@pytest.mark.parametrize("name", ERRORS)
def test_errors_are_pytorchs(name):
    want, got = raised_by_both(ERRORS[name])
    assert type(got) is type(want)
    assert str(got).replace("tapegrad.Size", "torch.Size") == str(want)


def test_warnings_are_pytorchs():
    for m in (torch, tg):
        with pytest.warns(UserWarning, match="'batchmean' divides only by the batch size"):
            m.nn.functional.kl_div(m.zeros(2, 2), m.ones(2, 2) / 2)
        with pytest.warns(UserWarning, match="Using a target size"):
            m.nn.functional.l1_loss(m.zeros(2, 2), m.ones(2))


IN_PLACE = {
    "relu": lambda m, y: m.nn.functional.relu(y, inplace=True),
    "leaky_relu": lambda m, y: m.nn.functional.leaky_relu(y, 0.2, inplace=True),
    "elu": lambda m, y: m.nn.functional.elu(y, inplace=True),
    "silu": lambda m, y: m.nn.functional.silu(y, inplace=True),
    "mish": lambda m, y: m.nn.functional.mish(y, inplace=True),
    "hardtanh": lambda m, y: m.nn.functional.hardtanh(y, inplace=True),
    "ReLU": lambda m, y: m.nn.ReLU(inplace=True)(y),
    "LeakyReLU": lambda m, y: m.nn.LeakyReLU(0.3, inplace=True)(y),
    "ELU": lambda m, y: m.nn.ELU(inplace=True)(y),
}


@pytest.mark.parametrize("name", IN_PLACE)
def test_inplace_activations_write_into_their_input(name):
    """``inplace=True`` returns its input, changed (a view of it sees the change), and the
    gradient flows through the in-place op, as PyTorch's."""
    def run(m):
        x = m.tensor(np.linspace(-2, 2, 12).reshape(3, 4), requires_grad=True)
        y = x * 1
        row = y[1]
        out = IN_PLACE[name](m, y)
        (out * m.arange(12.0).reshape(3, 4)).sum().backward()
        return out is y, y.detach().numpy().copy(), row.detach().numpy().copy(), \
            x.grad.numpy()
    want, got = run(torch), run(tg)
    assert got[0] is want[0] is True
    for w, g in zip(want[1:], got[1:]):
        np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("name", list(IN_PLACE) + ["relu_"])
def test_inplace_activations_through_a_view(name):
    """In place through a view of a non-leaf: the base's gradient, as PyTorch's (relu,
    which saves its result, raised 'modified by an inplace operation': the view's new
    value counted as changed again when the base's views were made again)."""
    op = IN_PLACE.get(name, lambda m, v: v.relu_())

    def run(m):
        x = m.tensor(np.linspace(-2, 2, 12).reshape(3, 4), requires_grad=True)
        y = x * 1
        op(m, y[1:])
        (y * y).sum().backward()
        return y.detach().numpy().copy(), x.grad.numpy()
    for w, g in zip(run(torch), run(tg)):
        np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-15)

"""Arithmetic names composed of tapegrad's ops, against PyTorch 2.13: ``addcmul``,
``addcdiv``, ``addmm``, ``addmv``, ``baddbmm`` (beta / alpha), ``logaddexp(2)``,
``nansum``, ``nanmean``, ``sgn``, ``copysign``, ``heaviside``, ``fmax``, ``fmin``,
``count_nonzero``, ``diff``: values, dtypes, Nodes, gradients (special values
included), gradcheck / gradgradcheck, and errors."""
import math

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.autograd import gradcheck, gradgradcheck
from torch_twins import raised_by_both

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.usefixtures("torch_float64")

INF, NAN = math.inf, math.nan


def _run(m, program, arrays):
    leaves = [m.tensor(a, requires_grad=True) for a in arrays]
    out = program(m, *leaves)
    rng = np.random.default_rng(5)
    if out.requires_grad:
        (out * m.tensor(rng.standard_normal(tuple(out.shape)))).sum().backward()
    zero = getattr(torch.Tensor, "_is_zerotensor") if m is torch else (lambda g: False)
    grads = [None if x.grad is None else np.zeros(x.shape) if zero(x.grad) else x.grad.numpy()
             for x in leaves]
    return (out.detach().numpy(), str(out.dtype).rpartition(".")[2],
            out.grad_fn.name() if out.grad_fn is not None else None, grads)


def _assert_same(program, arrays):
    want, got = _run(torch, program, arrays), _run(tg, program, arrays)
    assert got[0].shape == want[0].shape
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12, atol=1e-14)
    assert got[1:3] == want[1:3]
    for w, g in zip(want[3], got[3]):
        assert (w is None) == (g is None)
        if w is not None:
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)


PROGRAMS = {
    "addcmul": ([(3, 4), (3, 4), (3, 4)], lambda m, a, b, c: m.addcmul(a, b, c)),
    "addcmul value broadcast": ([(4,), (3, 1), (3, 4)], lambda m, a, b, c: m.addcmul(
        a, b, c, value=-2.5)),
    "addcmul method": ([(3,), (3,), (3,)], lambda m, a, b, c: a.addcmul(b, c, value=2)),
    "addcdiv": ([(3, 4), (3, 4), (3, 4)], lambda m, a, b, c: m.addcdiv(a, b, c + 3)),
    "addcdiv value": ([(2, 3), (3,), (2, 1)], lambda m, a, b, c: a.addcdiv(b, c + 3,
                                                                           value=0.5)),
    "addmm": ([(3, 5), (3, 4), (4, 5)], lambda m, a, b, c: m.addmm(a, b, c)),
    "addmm beta alpha": ([(5,), (3, 4), (4, 5)], lambda m, a, b, c: m.addmm(
        a, b, c, beta=2, alpha=-0.5)),
    "addmm beta 0": ([(3, 5), (3, 4), (4, 5)], lambda m, a, b, c: a.addmm(b, c, beta=0)),
    "addmv": ([(3,), (3, 4), (4,)], lambda m, a, b, c: m.addmv(a, b, c)),
    "addmv beta alpha": ([(), (3, 4), (4,)], lambda m, a, b, c: a.addmv(b, c, beta=0.5,
                                                                         alpha=3)),
    "baddbmm": ([(2, 3, 5), (2, 3, 4), (2, 4, 5)], lambda m, a, b, c: m.baddbmm(a, b, c)),
    "baddbmm beta alpha": ([(3, 1), (2, 3, 4), (2, 4, 5)], lambda m, a, b, c: a.baddbmm(
        b, c, beta=-1, alpha=2)),
    "logaddexp": ([(3, 4), (3, 4)], lambda m, a, b: m.logaddexp(a, b)),
    "logaddexp broadcast": ([(3, 1), (4,)], lambda m, a, b: a.logaddexp(b * 30)),
    "logaddexp2": ([(3, 4), (4,)], lambda m, a, b: m.logaddexp2(a, b)),
    "nansum": ([(3, 4)], lambda m, a: m.nansum(a)),
    "nansum dim": ([(3, 4)], lambda m, a: a.nansum(1, keepdim=True)),
    "nanmean": ([(3, 4)], lambda m, a: m.nanmean(a)),
    "nanmean dims": ([(3, 4, 2)], lambda m, a: a.nanmean((0, 2))),
    "sgn": ([(3, 4)], lambda m, a: m.sgn(a)),
    "copysign": ([(3, 4), (3, 4)], lambda m, a, b: m.copysign(a, b)),
    "copysign broadcast": ([(3, 4), (4,)], lambda m, a, b: a.copysign(b)),
    "copysign number": ([(3, 4)], lambda m, a: m.copysign(a, -2.0)),
    "fmax": ([(3, 4), (3, 4)], lambda m, a, b: m.fmax(a, b)),
    "fmin broadcast": ([(3, 4), (4,)], lambda m, a, b: a.fmin(b)),
    "diff": ([(3, 5)], lambda m, a: m.diff(a)),
    "diff n dim": ([(4, 3)], lambda m, a: a.diff(n=2, dim=0)),
    "diff prepend append": ([(3, 4), (3, 2), (3, 1)], lambda m, a, b, c: m.diff(
        a, 1, -1, b, c)),
    "diff too far": ([(3,)], lambda m, a: a.diff(4)),
}


@pytest.mark.parametrize("name", PROGRAMS)
def test_values_gradients_and_nodes_match_pytorch(name):
    shapes, program = PROGRAMS[name]
    rng = np.random.default_rng(len(name))
    _assert_same(program, [rng.uniform(-2, 2, s) for s in shapes])


_NO_GRADCHECK = {"sgn", "diff too far", "copysign number", "copysign", "copysign broadcast"}


@pytest.mark.parametrize("name", [n for n in PROGRAMS if n not in _NO_GRADCHECK])
def test_gradcheck_and_gradgradcheck(name):
    shapes, program = PROGRAMS[name]
    rng = np.random.default_rng(1)
    leaves = [tg.tensor(rng.uniform(-2, 2, s), requires_grad=True) for s in shapes]
    assert gradcheck(lambda *xs: program(tg, *xs), leaves)
    assert gradgradcheck(lambda *xs: program(tg, *xs), leaves)


_FLOAT32 = dict(PROGRAMS, **{
    "addmm of computed operands": ([(3, 5), (3, 4), (1, 5)], lambda m, a, b, c: m.addmm(
        a, b.sin(), c.expand(4, 5), alpha=2)),
    "baddbmm of computed operands": ([(3, 1), (2, 3, 4), (2, 4, 5)], lambda m, a, b, c: (
        a * 1).baddbmm(b, c * 2, beta=0))})


@pytest.mark.parametrize("name", ["addmm beta alpha", "addmv beta alpha", "baddbmm beta alpha",
                                  "addcmul value broadcast", "logaddexp2",
                                  "addmm of computed operands", "baddbmm of computed operands"])
def test_float32_second_derivatives(name):
    """create_graph through a float32 program: products' recorded rules take the seed
    and the operands in the product's dtype (the implicit seed was float64, and so is an
    operand read from the tape: 'expected scalar type Double but found Float')."""
    shapes, program = _FLOAT32[name]
    rng = np.random.default_rng(2)
    arrays = [rng.uniform(-2, 2, s).astype(np.float32) for s in shapes]
    results = []
    for m in (torch, tg):
        xs = [m.tensor(a, requires_grad=True) for a in arrays]
        gs = m.autograd.grad(program(m, *xs).sum(), xs, create_graph=True)
        ggs = m.autograd.grad(sum((g * g).sum() for g in gs), xs, allow_unused=True,
                              materialize_grads=True)
        results.append([(str(g.dtype).rpartition(".")[2], g.detach().numpy())
                        for g in gs + ggs])
    for (wd, w), (gd, g) in zip(*results):
        assert gd == wd
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


_A = [-INF, INF, INF, 1.0, NAN, 0.0, -INF, 2.0, -0.0, 0.0, NAN, 3.0]
_B = [-INF, INF, 1.0, -INF, 2.0, 0.0, 3.0, NAN, 0.0, -0.0, NAN, 3.0]


@pytest.mark.parametrize("name", ["logaddexp", "logaddexp2", "fmax", "fmin", "copysign",
                                  "nansum", "nanmean", "sgn", "addmm nan beta 0"])
def test_special_values(name):
    program = {
        "logaddexp": lambda m, a, b: m.logaddexp(a, b),
        "logaddexp2": lambda m, a, b: m.logaddexp2(a, b),
        "fmax": lambda m, a, b: m.fmax(a, b), "fmin": lambda m, a, b: m.fmin(a, b),
        "copysign": lambda m, a, b: m.copysign(a, b),
        "nansum": lambda m, a, b: m.nansum(a * b.reshape(12, 1), 0),
        "nanmean": lambda m, a, b: m.nanmean(a.reshape(3, 4) + b.reshape(3, 4), 1),
        "sgn": lambda m, a, b: m.sgn(a) + b,
        "addmm nan beta 0": lambda m, a, b: m.addmm(a.reshape(3, 4), b.reshape(3, 4),
                                                    m.ones(4, 4), beta=0),
    }[name]
    want, got = _run(torch, program, [_A, _B]), _run(tg, program, [_A, _B])
    np.testing.assert_allclose(got[0], want[0], rtol=1e-15, atol=0)
    assert got[2] == want[2]
    for w, g in zip(want[3], got[3]):
        np.testing.assert_allclose(g, w, rtol=1e-15, atol=0)


def test_results_without_a_gradient():
    a = [[0.0, 1.5, -2.0], [0.0, 0.0, 3.0]]
    for program in (lambda m: m.count_nonzero(m.tensor(a)),
                    lambda m: m.count_nonzero(m.tensor(a), 0),
                    lambda m: m.tensor(a).count_nonzero(dim=(0, 1)),
                    lambda m: m.count_nonzero(m.tensor([[True, False]]), -1),
                    lambda m: m.heaviside(m.tensor(a), m.tensor([0.5])),
                    lambda m: m.tensor([-1, 0, 2]).heaviside(m.tensor(7)),
                    lambda m: m.nansum(m.tensor([1, 2, 3])),
                    lambda m: m.copysign(m.tensor([1, -2, 3]), m.tensor([-1, 1, -1])),
                    lambda m: m.diff(m.tensor([True, False, False, True])),
                    lambda m: m.diff(m.tensor([[1, 4, 9]]), n=2)):
        want, got = program(torch), program(tg)
        assert str(got.dtype).rpartition(".")[2] == str(want.dtype).rpartition(".")[2]
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_heavisides_backward_raises_as_pytorchs():
    for m in (torch, tg):
        x = m.tensor([1.0, 0.0], requires_grad=True)
        out = m.heaviside(x, m.tensor([0.5]))
        assert out.requires_grad and out.grad_fn.name() == "torch::autograd::NotImplemented"
        with pytest.raises(RuntimeError, match="derivative for aten::heaviside is not "
                                               "implemented"):
            out.sum().backward()


def test_a_python_number_first_in_copysign_is_a_type_error():
    for m in (torch, tg):
        with pytest.raises(TypeError):
            m.copysign(2.0, m.ones(2))


@pytest.mark.parametrize("name", ["logaddexp2 float32 int64", "logaddexp float64 float32",
                                  "logaddexp bool float64", "copysign bool float32",
                                  "copysign int float32", "sgn bool", "addmm int", "addmv int",
                                  "baddbmm int", "addcmul int"])
def test_dtypes_of_mixed_operands(name):
    """The promoted dtype, computed in it (logaddexp2 scaled a float32 operand by ln 2
    before promoting it: float64 results 3e-9 off; int64 gave float64; a bool input hit
    the bool subtraction error; copysign of a bool gave float64, sgn of a bool a NumPy
    error; integer products with fractional beta / alpha / value gave floats)."""
    i = np.array([[3, -1], [2, 5]])
    program = {
        "logaddexp2 float32 int64": lambda m: m.logaddexp2(
            m.tensor([0.3, -1.7], dtype=m.float32), m.tensor([1, -2])),
        "logaddexp float64 float32": lambda m: m.logaddexp2(
            m.tensor([0.3, -1.7]), m.tensor([0.1, -1.3], dtype=m.float32)),
        "logaddexp bool float64": lambda m: m.logaddexp(m.tensor([True, False]),
                                                        m.tensor([0.5, -3.0])),
        "copysign bool float32": lambda m: m.copysign(m.tensor([True, False]),
                                                      m.tensor([-1.0, 2.0], dtype=m.float32)),
        "copysign int float32": lambda m: m.tensor([3, -2]).copysign(
            m.tensor([-1.0, 2.0], dtype=m.float32)),
        "sgn bool": lambda m: m.sgn(m.tensor([True, False])),
        "addmm int": lambda m: m.addmm(m.tensor(i), m.tensor(i), m.tensor(i), beta=0.5,
                                       alpha=-1.7),
        "addmv int": lambda m: m.addmv(m.tensor(i[0]), m.tensor(i), m.tensor(i[1]), beta=2.9),
        "baddbmm int": lambda m: m.baddbmm(m.tensor(i), m.tensor(i[None]), m.tensor(i[None]),
                                           alpha=0.9),
        "addcmul int": lambda m: m.addcmul(m.tensor(i), m.tensor(i), m.tensor(i), value=-2.5),
    }[name]
    want, got = program(torch), program(tg)
    assert str(got.dtype).rpartition(".")[2] == str(want.dtype).rpartition(".")[2]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-7 if "32" in name else 1e-15)


IN_PLACE = {
    "addcmul_": ([(2, 3), (3,), (2, 1)], lambda v, a, b: v.addcmul_(a, b, value=-1.5)),
    "addcdiv_": ([(2, 3), (2, 3), (3,)], lambda v, a, b: v.addcdiv_(a, b + 3)),
    "addmm_": ([(2, 3), (2, 4), (4, 3)], lambda v, a, b: v.addmm_(a, b, beta=0.5, alpha=2)),
    "addmv_": ([(3,), (3, 4), (4,)], lambda v, a, b: v.addmv_(a, b, alpha=-1)),
    "baddbmm_": ([(2, 2, 3), (2, 2, 4), (2, 4, 3)], lambda v, a, b: v.baddbmm_(a, b)),
    "copysign_": ([(2, 3), (3,)], lambda v, a: v.copysign_(a)),
    "sgn_": ([(2, 3)], lambda v: v.sgn_()),
}


@pytest.mark.parametrize("name", IN_PLACE)
@pytest.mark.parametrize("through", ["tensor", "view"])
def test_in_place_forms(name, through):
    """The in-place forms (each an AttributeError before), on a non-leaf or through a
    view of one: the result is the tensor, the base sees it, gradients as PyTorch's."""
    shapes, op = IN_PLACE[name]
    rng = np.random.default_rng(3)
    arrays = [rng.uniform(-2, 2, s) for s in shapes]

    def program(m, x, *others):
        base = x * 1
        target = base if through == "tensor" else base[:]
        out = op(target, *others)
        assert out is target
        return base
    _assert_same(program, arrays)


def test_diff_n_0_is_a_copy():
    x = tg.tensor([1.0, 2.0])
    y = tg.diff(x, n=0)
    y.add_(1)
    assert x.tolist() == [1.0, 2.0] and y.tolist() == [2.0, 3.0]


ERRORS = {
    "addcdiv integers": lambda m: m.addcdiv(m.ones(2), m.tensor([1, 2]), m.tensor([1, 2])),
    "addmm 1-d mat1": lambda m: m.addmm(m.ones(2, 2), m.ones(2), m.ones(2, 2)),
    "addmm 1-d mat2": lambda m: m.addmm(m.ones(2, 2), m.ones(2, 2), m.ones(2)),
    "addmm shapes": lambda m: m.addmm(m.ones(2, 3), m.ones(2, 2), m.ones(3, 3)),
    "addmm input": lambda m: m.addmm(m.ones(3, 3), m.ones(2, 2), m.ones(2, 2)),
    "addmm dtypes": lambda m: m.addmm(m.ones(2, 2, dtype=m.float32), m.ones(2, 2),
                                      m.ones(2, 2)),
    "addmv ndim": lambda m: m.addmv(m.ones(2), m.ones(2), m.ones(2)),
    "addmv vec": lambda m: m.addmv(m.ones(2), m.ones(2, 2), m.ones(2, 2)),
    "addmv size": lambda m: m.addmv(m.ones(3), m.ones(2, 2), m.ones(2)),
    "baddbmm input": lambda m: m.baddbmm(m.ones(3, 2, 2), m.ones(2, 2, 2), m.ones(2, 2, 2)),
    "nanmean long": lambda m: m.nanmean(m.tensor([1, 2])),
    "heaviside dtypes": lambda m: m.heaviside(m.ones(2), m.tensor([1])),
    "diff 0-d": lambda m: m.diff(m.tensor(1.0)),
    "diff prepend": lambda m: m.diff(m.ones(3), prepend=m.ones(2, 2)),
    "diff order": lambda m: m.diff(m.ones(3), n=-1),
    "fmax number": lambda m: m.fmax(m.ones(2), 2.0),
    "fmin number first": lambda m: m.fmin(2, m.ones(2)),
    "logaddexp number": lambda m: m.logaddexp(m.ones(2), 0.5),
    "logaddexp2 number first": lambda m: m.logaddexp2(0.5, m.ones(2)),
    "heaviside number": lambda m: m.heaviside(m.ones(2), 0.5),
    "fmax shapes": lambda m: m.fmax(m.ones(3), m.ones(1, 4)),
    "fmin shapes": lambda m: m.ones(2, 0).fmin(m.ones(3)),
    "heaviside shapes": lambda m: m.heaviside(m.ones(3, 3), m.ones(0)),
    "logaddexp shapes": lambda m: m.logaddexp(m.ones(3), m.ones(2, 0)),
    "copysign shapes": lambda m: m.copysign(m.ones(3), m.ones(4)),
    "logaddexp integers": lambda m: m.logaddexp(m.tensor([1, 2]), m.tensor([3, 4])),
    "logaddexp2 bools": lambda m: m.logaddexp2(m.tensor([True]), m.tensor([False])),
    "addcmul bools": lambda m: m.addcmul(*[m.tensor([True, False])] * 3),
}


@pytest.mark.parametrize("name", ERRORS)
def test_errors_are_pytorchs(name):
    want, got = raised_by_both(ERRORS[name])
    assert type(got) is type(want)
    assert str(got) == str(want)

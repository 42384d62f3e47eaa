"""The integer-valued division family (``//``, ``%``, ``fmod``, ``remainder``,
``floor_divide``, ``div`` with ``rounding_mode``, ``true_divide``, ``trunc`` / ``fix``,
``frac``), float-to-integer conversions (``copy_``, ``to``, ``long``), ``logit(x, eps)``
and ``Tensor.type``, each run with PyTorch and with tapegrad: values, dtypes, gradients
and Node names, or the same error."""
import math

import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")

INF, NAN = math.inf, math.nan
# every pair of these: signs, zeros, infinities, nan, exact and inexact quotients
SPECIAL = [5.5, -5.5, 6.0, -6.0, 0.0, -0.0, 1.0, -1.0, 0.1, INF, -INF, NAN, 2.0, -3.0]
XS, YS = (np.array(v).ravel() for v in np.meshgrid(SPECIAL, SPECIAL))
INTS = [7, -7, 6, -6, 0, 1, -1, 3, -3, 100]
IX, IY = (np.array(v).ravel() for v in np.meshgrid(INTS, [v for v in INTS if v]))


@pytest.fixture(autouse=True)
def _float64():
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(before)


def _outcome(m, f, make):
    """(value, dtype name, grad_fn name, gradients) of f over make(m)'s inputs, or the
    error's type and message."""
    ins = make(m)
    try:
        r = f(m, *ins)
    except Exception as e:              # noqa: BLE001  (the same error is the check)
        return type(e).__name__, str(e).split("\n")[0]
    rg = [t for t in ins if isinstance(t, m.Tensor) and t.requires_grad]
    grads = None
    if rg and r.requires_grad:
        try:
            grads = [g.detach().numpy() for g in m.autograd.grad(r.sum(), rg)]
        except RuntimeError as e:
            grads = str(e)
    return (r.detach().numpy(), str(r.dtype).split(".")[-1],
            r.grad_fn.name() if r.grad_fn is not None else None, grads)


def _same(f, make, rtol=1e-15):
    """The same outcome; values and gradients to ``rtol`` (float32: tapegrad's rules run
    in float64 and round once, PyTorch's round at every step)."""
    want, got = _outcome(torch, f, make), _outcome(tg, f, make)
    assert len(want) == len(got)
    if len(want) == 2:                  # an error
        assert got == want
        return
    np.testing.assert_allclose(got[0], want[0], rtol=rtol if rtol > 1e-15 else 0, atol=0)
    assert got[0].dtype == want[0].dtype
    zero = want[0] == 0                 # (assert_array_equal takes -0.0 for 0.0)
    assert np.array_equal(np.signbit(got[0][zero]), np.signbit(want[0][zero]))
    assert got[1:3] == want[1:3]
    if isinstance(want[3], str) or want[3] is None:
        assert got[3] == want[3]
    else:
        for g, w in zip(got[3], want[3]):
            np.testing.assert_allclose(g, w, rtol=rtol, atol=0, equal_nan=True)


def _floats(dtype, *arrays, rg=True):
    return lambda m: [m.tensor(a, dtype=getattr(m, dtype), requires_grad=rg) for a in arrays]


def _ints(dtype, *arrays):
    return lambda m: [m.tensor(a, dtype=getattr(m, dtype)) for a in arrays]


BINARY = {
    "floor_divide": lambda m, x, y: m.floor_divide(x, y),
    "//": lambda m, x, y: x // y,
    "remainder": lambda m, x, y: m.remainder(x, y),
    "%": lambda m, x, y: x % y,
    "fmod": lambda m, x, y: m.fmod(x, y),
    "div floor": lambda m, x, y: m.div(x, y, rounding_mode="floor"),
    "div trunc": lambda m, x, y: m.div(x, y, rounding_mode="trunc"),
    "div None": lambda m, x, y: m.div(x, y, rounding_mode=None),
    "divide floor": lambda m, x, y: m.divide(x, y, rounding_mode="floor"),
    "Tensor.div trunc": lambda m, x, y: x.div(y, rounding_mode="trunc"),
    "true_divide": lambda m, x, y: m.true_divide(x, y),
    "Tensor.remainder": lambda m, x, y: x.remainder(y),
    "Tensor.fmod": lambda m, x, y: x.fmod(y),
    "Tensor.floor_divide": lambda m, x, y: x.floor_divide(y),
}
UNARY = {
    "trunc": lambda m, x: m.trunc(x),
    "fix": lambda m, x: m.fix(x),
    "frac": lambda m, x: m.frac(x),
    "Tensor.trunc": lambda m, x: x.trunc(),
    "Tensor.frac": lambda m, x: x.frac(),
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_floats_at_special_values(name):
    _same(BINARY[name], _floats("float64", XS, YS))


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_float32(name):
    """(Without 0.1: x / 0.1 rounded in float32 or float64 can fall either side of an
    integer, which moves fmod's and remainder's gradient in y by 1.)"""
    x, y = (np.array(v).ravel() for v in np.meshgrid(*[[v for v in SPECIAL if v != 0.1]] * 2))
    _same(BINARY[name], _floats("float32", x, y), rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_floats_at_special_values(name, dtype):
    _same(UNARY[name], _floats(dtype, np.array(SPECIAL)))


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8"])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_integers(name, dtype):
    x, y = (IX, IY) if dtype != "uint8" else (np.abs(IX), np.abs(IY))
    _same(BINARY[name], _ints(dtype, x, y))


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "bool"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_integers_and_bools(name, dtype):
    _same(UNARY[name], _ints(dtype, np.abs(IX) % 2 if dtype == "bool" else np.abs(IX)))


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "bool"])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_integer_division_by_zero(name, dtype):
    """PyTorch's RuntimeError('ZeroDivisionError') (bools: no kernel), never a crash."""
    zero = np.array([1, 0, 1]) if dtype == "bool" else np.array([3, 0, 2])
    _same(BINARY[name], _ints(dtype, np.array([5, 6, 1]), zero))


@pytest.mark.parametrize("dtype", ["int64", "int32", "bool"])
@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("shapes", [((2, 0), ()), ((0,), (1,)), ((1, 4), (2, 0)), ((3,), (2,))],
                         ids=str)
def test_integer_division_of_empty_and_mismatched_shapes(name, dtype, shapes):
    """A zero divisor that divides nothing is no error (was ZeroDivisionError); shapes
    that do not broadcast are PyTorch's RuntimeError before the dtype's (was NumPy's
    ValueError for div trunc, the bool error for the others)."""
    _same(BINARY[name], lambda m: [m.zeros(s, dtype=getattr(m, dtype)) for s in shapes])


@pytest.mark.parametrize("dtype", ["int64", "uint8", "bool"])
@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("number", [2, -3, 2.5, 0, 0.0])
def test_a_python_number_divisor(name, dtype, number):
    _same(lambda m, x: BINARY[name](m, x, number), _ints(dtype, np.array([7, 1, 0])))


@pytest.mark.parametrize("name", ["//", "%", "floor_divide", "remainder", "div floor",
                                  "div trunc"])
@pytest.mark.parametrize("number", [7, -7.5, 0.0])
def test_a_python_number_dividend(name, number):
    """``7.5 % x`` and ``7.5 // x`` have no derivative in PyTorch: the backward raises."""
    f = BINARY[name]
    op = {"//": lambda m, x: number // x, "%": lambda m, x: number % x}.get(
        name, lambda m, x: f(m, number, x))
    _same(op, _floats("float64", np.array([2.0, -2.0, 0.0, INF, -0.0, NAN])))
    _same(op, _ints("int64", np.array([2, -3, 5])))


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("shapes", [((3, 1), (1, 4)), ((), (4,)), ((), ())], ids=str)
def test_broadcasting_and_0d(name, shapes):
    rng = np.random.default_rng(len(name))
    x, y = (rng.uniform(-9, 9, s) for s in shapes)
    _same(BINARY[name], _floats("float64", x, np.where(np.abs(y) < 0.5, 1.5, y)))


def test_promotion():
    _same(lambda m, x, y: x // y, lambda m: [m.tensor([7.5], dtype=m.float32),
                                             m.tensor([2.0])])
    _same(lambda m, x, y: x % y, lambda m: [m.tensor([7], dtype=m.int32), m.tensor(2.5)])
    _same(lambda m, x: x % 2.0, lambda m: [m.tensor([7.5, -1.5], dtype=m.float32)])
    _same(lambda m, x: x // 2, lambda m: [m.tensor([True, False])])
    _same(lambda m, x: m.remainder(x, 2), lambda m: [m.tensor([-7.0, 7.0])])


def test_bad_rounding_mode():
    _same(lambda m, x: m.div(x, 2, rounding_mode="round"), _floats("float64", [1.0]))


@pytest.mark.parametrize("form", ["//=", "%=", "floor_divide_", "remainder_", "fmod_",
                                  "div_ floor", "div_ trunc", "divide_ trunc", "true_divide_",
                                  "trunc_", "fix_", "frac_"])
@pytest.mark.parametrize("dtype", ["float64", "int64"])
def test_in_place(form, dtype):
    def f(m, x):
        x = x * 1 if dtype == "float64" else x.clone()     # (a non-leaf: in place allowed)
        if form == "//=":
            x //= 3
        elif form == "%=":
            x %= -3
        elif form.startswith("div") and " " in form:
            method, mode = form.split()
            getattr(x, method)(3, rounding_mode=mode)
        elif form in ("trunc_", "fix_", "frac_"):
            getattr(x, form)()
        else:
            getattr(x, form)(3)
        return x
    make = _floats(dtype, np.array([7.5, -7.5, 0.0, -2.0])) if dtype == "float64" else \
        _ints(dtype, np.array([7, -7, 0, -2]))
    _same(f, make)


@pytest.mark.parametrize("form", ["%=", "remainder_", "fmod_", "true_divide_", "div_ floor",
                                  "logit_", "pow_", "sin_"])
def test_in_place_through_a_view(form):
    """The op reads the view's old value as its input (not a saved value that the op
    itself then changed): the base's gradient, as PyTorch's (was the 'modified by an
    inplace operation' error for every op that saves its input)."""
    def f(m, x, y=0.5):
        base = x * 1
        v = base[1:]
        if form == "%=":
            v %= y
        elif form == "div_ floor":
            v.div_(y, rounding_mode="floor")
        elif form in ("logit_", "sin_"):
            getattr(v, form)()
        else:
            getattr(v, form)(y)
        return base
    divisor = [np.array([2.0, -0.25, 0.5])] if form not in ("logit_", "sin_", "pow_") else []
    _same(f, _floats("float64", np.array([0.5, 0.3, 0.6, 0.7]), *divisor))


def test_second_derivatives_of_remainder_and_fmod():
    def f(m, x, y):
        out = []
        for op in (m.remainder, m.fmod):
            r = op(x, y)
            gx, gy = m.autograd.grad(r.sum(), (x, y), create_graph=True)
            out += [v.detach().numpy() for v in (gx, gy)]
            out += [v.detach().numpy() for v in m.autograd.grad((gx * gy).sum(), (x, y),
                                                                allow_unused=True,
                                                                materialize_grads=True)]
        return out
    make = _floats("float64", np.array([5.5, -5.5, 7.0, 1.0]), np.array([2.0, 2.0, -3.0, 0.3]))
    for got, want in zip(f(tg, *make(tg)), f(torch, *make(torch))):
        np.testing.assert_array_equal(got, want)


ROUNDED = {"fmod": lambda m, x, y: m.fmod(x, y), "remainder": lambda m, x, y: m.remainder(x, y),
           "div trunc": lambda m, x, y: m.div(x, y, rounding_mode="trunc"),
           "div floor": lambda m, x, y: m.div(x, y, rounding_mode="floor")}


@pytest.mark.parametrize("name", sorted(ROUNDED))
def test_second_derivatives_at_special_values(name):
    """Value, gradients (an incoming 1, inf and nan) and each gradient's gradient
    (create_graph), every pair of SPECIAL, as PyTorch's: the rounded quotient in the
    gradient in y (fmod's, remainder's) is DivBackward2's, whose gradient is zeros that
    require no grad; fmod's was nan at y = 0 (trunc(x / y) differentiated through x / y),
    div's rounded quotients' gradient nan at an incoming inf or nan, and requiring grad."""
    def f(m):
        x, y = (m.tensor(np.tile(v, 3), requires_grad=True) for v in (XS, YS))
        w = m.tensor(np.repeat([1.0, INF, NAN], XS.size))
        r = ROUNDED[name](m, x, y)
        grads = m.autograd.grad(r, (x, y), w, create_graph=True)
        out = [r] + list(grads)
        for g in grads:
            if g.requires_grad:
                out += m.autograd.grad(g.sum(), (x, y), allow_unused=True, materialize_grads=True)
        return [v.detach().numpy() for v in out], [g.requires_grad for g in grads]
    (got, got_rg), (want, want_rg) = f(tg), f(torch)
    assert got_rg == want_rg and len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


# -- float to integer -------------------------------------------------------------------------
VALUES = np.array([-1.5, 2.7, -0.3, 0.0, -0.0, 3.0, -2.0, 127.9, 255.9, 300.2])


@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "int8", "uint8", "bool"])
@pytest.mark.parametrize("source", ["float64", "float32"])
def test_copy_into_integers_truncates(dtype, source):
    def f(m, src):
        return m.zeros(len(VALUES), dtype=getattr(m, dtype)).copy_(src)
    _same(f, _floats(source, VALUES, rg=False))
    _same(lambda m: m.zeros(3, dtype=getattr(m, dtype)).copy_(-2.7), lambda m: [])


@pytest.mark.parametrize("form", ["long", "int", "to int16", "to uint8", "bool"])
def test_conversions_truncate(form):
    def f(m, x):
        if form.startswith("to "):
            return x.to(getattr(m, form[3:]))
        return getattr(x, form)()
    _same(f, _floats("float64", VALUES[:7], rg=False))


def test_nan_and_inf_into_integers_do_not_fail():
    """PyTorch's result is platform-defined (C's cast): tapegrad's is NumPy's, with no
    warning; here both are the lowest int64, as on x86."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x = tg.tensor([NAN, INF, -INF])
        got = [tg.zeros(3, dtype=tg.int64).copy_(x).tolist(), x.long().tolist()]
    assert got == [[-2 ** 63] * 3] * 2
    assert tg.zeros(3, dtype=tg.bool).copy_(x).tolist() == [True] * 3


# -- logit(x, eps) -----------------------------------------------------------------------------
# (no nan: PyTorch's gradient there is 0 or nan, depending on where its kernels put it;
# tapegrad's is 0, outside [eps, 1 - eps])
LOGIT_X = np.array([0.0, -0.0, 0.1, 0.2, 0.5, 0.8, 0.9, 1.0, -0.5, 1.5, INF, -INF, 0.1 + 1e-17,
                    0.0999999999, 0.19999999, 0.80000001])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("eps", [0.1, 0.2, 0.0, 0.5, 0.6, 1e-6, -0.1])
def test_logit_eps(eps, dtype):
    """Clamped as PyTorch clamps, gradient 0 outside [eps, 1 - eps], its ends included; a
    negative eps is none (nan outside [0, 1]: it was 0).  (eps 0 or none leaves -0.0 in,
    where PyTorch's gradient's sign depends on the tensor's length: docs/API.md.)"""
    x = LOGIT_X[LOGIT_X != 0] if eps <= 0 else LOGIT_X
    rtol = 1e-6 if dtype == "float32" else 1e-15
    _same(lambda m, x: m.logit(x, eps=eps), _floats(dtype, x), rtol)
    _same(lambda m, x: x.logit(eps), _floats(dtype, x), rtol)


@pytest.mark.parametrize("eps", [None, 0.1, 0.0, 0.6, 0.5])
def test_logit_second_derivative(eps):
    """PyTorch's create_graph gradient of logit is a where of the slope at x (0, or nan
    without eps, outside [eps, 1 - eps]): its gradient is 0 times the slope's there, nan
    at 0, 1, inf and nan, 0 elsewhere (0.05 with eps 0.1).  tapegrad's was 0 outside
    (the gradient of clamp's mask); both derivatives are PyTorch's now, nan included."""
    x0 = np.concatenate([LOGIT_X[LOGIT_X != 0], [0.0, 0.05, 0.3, 1.2, NAN]])

    def f(m):
        x = m.tensor(x0, requires_grad=True)
        g, = m.autograd.grad(m.logit(x, eps).sum(), x, create_graph=True)
        gg, = m.autograd.grad((g * m.tensor(np.arange(1.0, len(x0) + 1))).sum(), x)
        return g.detach().numpy(), gg.numpy()
    for got, want in zip(f(tg), f(torch)):
        np.testing.assert_allclose(got, want, rtol=1e-15, atol=0)


def test_logit_eps_forms():
    _same(lambda m, x: m.logit(x, 0.1), lambda m: [m.tensor(0.05, requires_grad=True)])
    _same(lambda m, x: m.logit(x, eps=0.1), _ints("int64", np.array([0, 1])))

    def in_place(m, x):
        y = x * 1
        y.logit_(0.1)
        return y
    _same(in_place, _floats("float64", LOGIT_X))


# -- Tensor.type ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "int64", "int32", "int16",
                                   "int8", "uint8", "bool"])
def test_type_names(dtype):
    assert tg.zeros(1, dtype=getattr(tg, dtype)).type() == \
        torch.zeros(1, dtype=getattr(torch, dtype)).type()


@pytest.mark.parametrize("arg", ["torch.FloatTensor", "torch.LongTensor", "torch.BoolTensor",
                                 "torch.ByteTensor", "torch.DoubleTensor", "torch.Tensor",
                                 "float32", "int32", "float", "torch.float32", 3])
def test_type_converts(arg):
    def f(m, x):
        return x.type(getattr(m, arg) if arg in ("float32", "int32") else arg)
    _same(f, _floats("float64", np.array([1.5, -2.5])))


def test_type_of_the_same_type_is_the_tensor():
    x = tg.tensor([1.5])
    assert x.type("torch.DoubleTensor") is x and x.type(tg.float64) is x
    with pytest.raises(RuntimeError, match="CPU only"):
        x.type("torch.cuda.FloatTensor")

"""nn.init against PyTorch: gains, fans, the bounds / stds of every initialiser (the
samples come from tapegrad's own generator, so distributions are compared, not
values), in-place semantics and errors."""
import math
import warnings

import pytest
import torch

import tapegrad

GAINS = [("linear", None), ("conv2d", None), ("sigmoid", None), ("tanh", None),
         ("relu", None), ("leaky_relu", None), ("leaky_relu", 0.2), ("leaky_relu", 3),
         ("selu", None)]


@pytest.mark.parametrize("name,param", GAINS)
def test_calculate_gain(name, param):
    assert tapegrad.nn.init.calculate_gain(name, param) == torch.nn.init.calculate_gain(name,
                                                                                        param)


@pytest.mark.parametrize("shape", [(3, 4), (5, 2, 3), (6, 4, 3, 2)])
def test_fan_in_and_fan_out(shape):
    assert tapegrad.nn.init._calculate_fan_in_and_fan_out(tapegrad.zeros(*shape)) == \
        torch.nn.init._calculate_fan_in_and_fan_out(torch.zeros(*shape))


ERRORS = [
    (lambda m: m.nn.init.calculate_gain("swish"), "Unsupported nonlinearity swish"),
    (lambda m: m.nn.init.calculate_gain("leaky_relu", True), "negative_slope True not a valid "
                                                             "number"),
    (lambda m: m.nn.init.xavier_uniform_(m.zeros(3)), "Fan in and fan out can not be computed "
                                                      "for tensor with fewer than 2 dimensions"),
    (lambda m: m.nn.init.kaiming_normal_(m.zeros(3, 2), mode="fan_avg"),
     "Mode fan_avg not supported, please use one of ['fan_in', 'fan_out']"),
]


@pytest.mark.parametrize("call,message", ERRORS)
def test_errors_match_torch(call, message):
    for m in (torch, tapegrad):
        with pytest.raises(ValueError) as err:
            call(m)
        assert str(err.value) == message


SHAPE = (300, 200)     # fan_in 200, fan_out 300
UNIFORM = {            # initialiser -> its bound for SHAPE (PyTorch's formulas)
    "uniform_": (dict(a=-0.3, b=0.7), None),
    "xavier_uniform_": (dict(gain=2.0), 2.0 * math.sqrt(6.0 / 500)),
    "kaiming_uniform_": (dict(a=math.sqrt(5)), 1 / math.sqrt(200)),
    "kaiming_uniform_-relu-fan_out": (dict(mode="fan_out", nonlinearity="relu"),
                                      math.sqrt(2.0) * math.sqrt(3.0 / 300)),
}
NORMAL = {             # initialiser -> (kwargs, mean, std)
    "normal_": (dict(mean=1.5, std=0.2), 1.5, 0.2),
    "xavier_normal_": (dict(), 0.0, math.sqrt(2.0 / 500)),
    "kaiming_normal_": (dict(nonlinearity="tanh"), 0.0, 5.0 / 3 / math.sqrt(200)),
}


def _init(name, kwargs, m, shape=SHAPE):
    w = m.nn.Parameter(m.zeros(*shape))
    out = getattr(m.nn.init, name.split("-")[0])(w, **kwargs)
    return w, out


@pytest.mark.parametrize("name", UNIFORM)
def test_uniform_family(name):
    kwargs, bound = UNIFORM[name]
    tapegrad.manual_seed(0)
    w, out = _init(name, kwargs, tapegrad)
    v = w.detach().numpy()
    lo, hi = (kwargs["a"], kwargs["b"]) if bound is None else (-bound, bound)
    assert out is w and w.is_leaf and w.requires_grad and w._version == 1
    assert lo <= v.min() < lo + 0.01 * (hi - lo) and hi - 0.01 * (hi - lo) < v.max() < hi
    tv = _init(name, kwargs, torch)[0].detach().numpy()
    assert abs(v.std() - tv.std()) < 0.02 * (hi - lo)


@pytest.mark.parametrize("name", NORMAL)
def test_normal_family(name):
    kwargs, mean, std = NORMAL[name]
    tapegrad.manual_seed(0)
    w, out = _init(name, kwargs, tapegrad)
    v = w.detach().numpy()
    assert out is w and w._version == 1
    assert abs(v.mean() - mean) < 0.02 * std and abs(v.std() - std) < 0.02 * std
    tv = _init(name, kwargs, torch)[0].detach().numpy()
    assert abs(v.std() - tv.std()) < 0.03 * std


def test_constants_keep_dtype_and_object(both):
    def program(m):
        w = m.nn.Parameter(m.ones(2, 3, dtype=m.float32))
        outs = [m.nn.init.constant_(w, 0.25).tolist(), m.nn.init.zeros_(w).tolist(),
                m.nn.init.ones_(w).tolist()]
        return outs, w.dtype == m.float32, w.requires_grad, w._version
    a, b = both(program)
    assert a == b


def test_zero_element_tensors_warn(both):
    def program(m):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for f in (m.nn.init.kaiming_uniform_, m.nn.init.kaiming_normal_):
                f(m.zeros(0, 3))
        return [str(w.message) for w in caught]
    a, b = both(program)
    assert a == b == ["Initializing zero-element tensors is a no-op"] * 2


def test_initialising_is_not_recorded_and_allowed_in_grad_mode():
    w = tapegrad.nn.Parameter(tapegrad.zeros(4, 4))
    assert tapegrad.is_grad_enabled()
    tapegrad.nn.init.xavier_uniform_(w)
    assert w.grad_fn is None and w.is_leaf
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used "
                                           "in an in-place operation"):
        w.uniform_()

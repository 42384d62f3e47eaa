"""RMSprop and Adagrad against PyTorch 2.13: every option, 6 steps of a small model on
float64 (parameters, losses and state to 1e-13), state dicts (PyTorch's keys and
options; a run saved after 3 steps and loaded into fresh objects continues as the
straight run), and PyTorch's argument errors."""
import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.usefixtures("torch_float64")

RNG = np.random.default_rng(3)
W1, B1, W2 = RNG.standard_normal((4, 3)), RNG.standard_normal(4), RNG.standard_normal((1, 4))
X, Y = RNG.standard_normal((8, 3)), RNG.standard_normal((8, 1))

CONFIGS = {
    "RMSprop": ("RMSprop", {}),
    "RMSprop lr alpha eps": ("RMSprop", dict(lr=0.05, alpha=0.9, eps=1e-3)),
    "RMSprop momentum": ("RMSprop", dict(lr=0.01, momentum=0.9)),
    "RMSprop centered": ("RMSprop", dict(centered=True, alpha=0.3)),
    "RMSprop all": ("RMSprop", dict(lr=0.02, momentum=0.5, centered=True, weight_decay=0.1,
                                    maximize=True)),
    "Adagrad": ("Adagrad", {}),
    "Adagrad lr_decay": ("Adagrad", dict(lr=0.1, lr_decay=0.3)),
    "Adagrad weight_decay init": ("Adagrad", dict(lr=0.05, weight_decay=0.2,
                                                  initial_accumulator_value=0.7, eps=1e-4)),
    "Adagrad maximize": ("Adagrad", dict(maximize=True, lr_decay=0.01)),
}


def _model(m):
    w1, b1, w2 = (m.nn.Parameter(m.tensor(a)) for a in (W1, B1, W2))
    return [w1, b1, w2]


def _loss(m, params):
    w1, b1, w2 = params
    return ((m.tanh(m.tensor(X) @ w1.T + b1) @ w2.T - m.tensor(Y)) ** 2).mean()


def _steps(m, params, opt, n):
    losses = []
    for _ in range(n):
        opt.zero_grad()
        loss = _loss(m, params)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def _state(m, opt):
    sd = opt.state_dict()
    return ({i: {k: v.numpy().copy() for k, v in s.items()} for i, s in sd["state"].items()},
            sd["param_groups"])


def _run(m, name, resume):
    cls, kwargs = CONFIGS[name]
    params = _model(m)
    groups = [{"params": params[:2]}, {"params": params[2:], "lr": 0.03}]
    opt = getattr(m.optim, cls)(groups, **kwargs)
    first = _state(m, opt)
    losses = _steps(m, params, opt, 3)
    if resume:
        saved = opt.state_dict()
        values = [p.detach().clone() for p in params]
        params = [m.nn.Parameter(v) for v in values]
        opt = getattr(m.optim, cls)([{"params": params[:2]}, {"params": params[2:]}], lr=0.5)
        opt.load_state_dict(saved)
    losses += _steps(m, params, opt, 3)
    return losses, [p.detach().numpy() for p in params], first, _state(m, opt)


def _same_state(got, want):
    (gs, gg), (ws, wg) = got, want
    assert gg == wg
    assert gs.keys() == ws.keys()
    for i in ws:
        assert list(gs[i]) == list(ws[i])
        for k in ws[i]:
            np.testing.assert_allclose(gs[i][k], ws[i][k], rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("resume", [False, True])
@pytest.mark.parametrize("name", CONFIGS)
def test_steps_and_state_match_pytorch(name, resume):
    want, got = _run(torch, name, resume), _run(tg, name, resume)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-13)
    for g, w in zip(got[1], want[1]):
        np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-15)
    _same_state(got[2], want[2])
    _same_state(got[3], want[3])


def test_resumed_run_is_the_straight_run():
    for name in ("RMSprop all", "Adagrad lr_decay"):
        straight, resumed = _run(tg, name, False), _run(tg, name, True)
        assert straight[0] == resumed[0]
        for a, b in zip(straight[1], resumed[1]):
            np.testing.assert_array_equal(a, b)


def test_parameters_without_gradient_are_left_alone():
    for m in (torch, tg):
        a, b = m.nn.Parameter(m.ones(2)), m.nn.Parameter(m.ones(2))
        for opt in (m.optim.RMSprop([a, b], momentum=0.9), m.optim.Adagrad([a, b])):
            (a * 3).sum().backward()
            opt.step()
            assert b.tolist() == [1.0, 1.0]
            assert (1 in opt.state_dict()["state"]) == isinstance(opt, m.optim.Adagrad)


ERRORS = [("RMSprop", dict(lr=-1)), ("RMSprop", dict(alpha=-1)), ("RMSprop", dict(eps=-1)),
          ("RMSprop", dict(momentum=-1)), ("RMSprop", dict(weight_decay=-1)),
          ("Adagrad", dict(lr=-1)), ("Adagrad", dict(lr_decay=-1)), ("Adagrad", dict(eps=-1)),
          ("Adagrad", dict(initial_accumulator_value=-1)), ("Adagrad", dict(weight_decay=-1))]


@pytest.mark.parametrize("cls, kwargs", ERRORS)
def test_errors_are_pytorchs(cls, kwargs):
    caught = []
    for m in (torch, tg):
        with pytest.raises(ValueError) as info:
            getattr(m.optim, cls)([m.nn.Parameter(m.ones(2))], **kwargs)
        caught.append(str(info.value))
    assert caught[0] == caught[1]

"""Twin programs for the nn / optim tests: the same model, weights and data built with
``m = torch`` or ``m = tapegrad`` (the tests set torch's default dtype to float64)."""
import numpy as np

_rng = np.random.RandomState(0)
X = _rng.randn(16, 3)
Y = _rng.randn(16, 2)
WEIGHTS = {"0.weight": _rng.randn(8, 3) / 2, "0.bias": _rng.randn(8) / 4,
           "2.weight": _rng.randn(2, 8) / 3, "2.bias": _rng.randn(2) / 4}


def mlp(m, weights=WEIGHTS):
    """Linear(3, 8) -> Tanh -> Linear(8, 2) holding ``weights``."""
    model = m.nn.Sequential(m.nn.Linear(3, 8), m.nn.Tanh(), m.nn.Linear(8, 2))
    model.load_state_dict({k: m.tensor(v) for k, v in weights.items()})
    return model


def numpy_state(module):
    return {k: v.detach().numpy().copy() for k, v in module.state_dict().items()}


def train(m, make_optimizer, steps=20, scheduler=None):
    """Full-batch MSE training of ``mlp(m)``: (losses, final weights, lrs seen)."""
    model = mlp(m)
    opt = make_optimizer(m, model)
    sched = scheduler(m, opt) if scheduler else None
    x, y = m.tensor(X), m.tensor(Y)
    losses, lrs = [], []
    for _ in range(steps):
        opt.zero_grad()
        loss = m.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if sched is not None:
            sched.step()
            lrs.append(sched.get_last_lr())
    return np.array(losses), numpy_state(model), lrs


def assert_same_training(a, b, rtol=1e-6):
    np.testing.assert_allclose(a[0], b[0], rtol=rtol)
    assert a[1].keys() == b[1].keys()
    for k in a[1]:
        np.testing.assert_allclose(a[1][k], b[1][k], rtol=rtol, atol=1e-12, err_msg=k)


def raised_by_both(program):
    """(PyTorch's exception, tapegrad's): ``program(m)`` run with each library, each of
    which must raise."""
    import pytest
    import torch

    import tapegrad
    caught = []
    for m in (torch, tapegrad):
        with pytest.raises(Exception) as info:
            program(m)
        caught.append(info.value)
    return caught

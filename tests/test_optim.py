"""Optimizers against PyTorch 2.13: 20 full-batch steps from identical weights give the
same losses and parameters (rtol 1e-6, float64) for every SGD option combination,
Adam and AdamW; plus state dicts, parameter groups, zero_grad, validation errors, and
the seed's x1 * x2 example."""
import itertools

import numpy as np
import pytest
import torch
from torch_twins import X, Y, assert_same_training, mlp, numpy_state, train

import tapegrad

pytestmark = pytest.mark.usefixtures("torch_float64")

SGD_CASES = [dict(momentum=mo, dampening=da, nesterov=ne, weight_decay=wd, maximize=mx)
             for mo, da, ne, wd, mx in itertools.product((0.0, 0.9), (0.0, 0.3), (False, True),
                                                         (0.0, 0.05), (False, True))
             if not ne or (mo > 0 and da == 0)]


@pytest.mark.parametrize("options", SGD_CASES, ids=lambda o: ",".join(
    f"{k}={v}" for k, v in o.items() if v))
def test_sgd_matches_torch(both, options):
    runs = both(lambda m: train(m, lambda m, model: m.optim.SGD(model.parameters(), lr=0.05,
                                                                **options)))
    assert_same_training(*runs)


ADAM_CASES = [("Adam", dict()), ("Adam", dict(amsgrad=True)),
              ("Adam", dict(weight_decay=0.1, maximize=True)),
              ("Adam", dict(betas=(0.3, 0.9), eps=1e-6, amsgrad=True, weight_decay=0.01)),
              ("AdamW", dict()), ("AdamW", dict(amsgrad=True)),
              ("AdamW", dict(weight_decay=0.2, amsgrad=True, maximize=True)),
              ("AdamW", dict(betas=(0.8, 0.99), weight_decay=0.0))]


@pytest.mark.parametrize("name,options", ADAM_CASES,
                         ids=[f"{n}-{','.join(o) or 'defaults'}" for n, o in ADAM_CASES])
def test_adam_family_matches_torch(both, name, options):
    runs = both(lambda m: train(m, lambda m, model: getattr(m.optim, name)(
        model.parameters(), lr=0.02, **options)))
    assert_same_training(*runs)


def test_param_groups_with_their_own_options(both):
    def make(m, model):
        return m.optim.SGD([{"params": model[0].parameters()},
                            {"params": model[2].parameters(), "lr": 0.2, "momentum": 0.5}],
                           lr=0.05, momentum=0.9, nesterov=True)
    a, b = both(lambda m: train(m, make))
    assert_same_training(a, b)


def test_seed_example_x1_times_x2():
    """The seed's pipeline: v = x1 * x2; v.backward(); SGD(lr=0.1).step() updates the
    leaves in place under no_grad: x1 = 2 - 0.1 * 3, x2 = 3 - 0.1 * 2."""
    x1 = tapegrad.tensor(2.0, requires_grad=True)
    x2 = tapegrad.tensor(3.0, requires_grad=True)
    v = x1 * x2
    v.backward()
    assert (x1.grad.item(), x2.grad.item()) == (3.0, 2.0)
    opt = tapegrad.optim.SGD([x1, x2], lr=0.1)
    opt.step()
    assert x1.item() == pytest.approx(1.7) and x2.item() == pytest.approx(2.8)
    assert x1.is_leaf and x1.requires_grad and x1.grad_fn is None
    assert x1._version == 1 and x2._version == 1      # updated in place
    t1, t2 = torch.tensor(2.0, requires_grad=True), torch.tensor(3.0, requires_grad=True)
    (t1 * t2).backward()
    torch.optim.SGD([t1, t2], lr=0.1).step()
    assert (x1.item(), x2.item()) == (t1.item(), t2.item())


def test_step_updates_in_place_and_skips_parameters_without_grad():
    a = tapegrad.nn.Parameter(tapegrad.ones(3))
    b = tapegrad.nn.Parameter(tapegrad.ones(2))
    shared = a.detach()                    # shares a's storage, as PyTorch's: sees the step
    (a * 2).sum().backward()
    opt = tapegrad.optim.Adam([a, b], lr=0.1)
    opt.step()
    assert a._version == 1 and b._version == 0 and b.grad is None
    assert np.allclose(a.detach().numpy(), 0.9) and np.allclose(shared.numpy(), 0.9)
    assert b not in opt.state and opt.state[a]["step"].item() == 1.0
    plain = tapegrad.optim.SGD([a, b], lr=0.1)
    plain.step()
    assert plain.state_dict()["state"] == {}          # as PyTorch: no momentum, no state


def test_step_after_a_recorded_forward_raises_at_backward_like_torch(both):
    def program(m):
        w = m.tensor([1.0, 2.0], requires_grad=True)
        (w * w).sum().backward()
        loss = (w * w).sum()               # saves w
        m.optim.SGD([w], lr=0.1).step()    # modifies w in place
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            loss.backward()
    both(program)


def test_closure_is_evaluated_with_grad_enabled(both):
    def program(m):
        w = m.tensor([1.0, -2.0], requires_grad=True)
        opt = m.optim.SGD([w], lr=0.25)

        def closure():
            opt.zero_grad()
            loss = (w * w).sum()
            loss.backward()
            return loss
        with m.no_grad():
            loss = opt.step(closure)
        return loss.item(), w.detach().numpy().tolist()
    assert both(program)[0] == both(program)[1]


@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad(both, set_to_none):
    def program(m):
        w = m.tensor([1.0, 2.0], requires_grad=True)
        (w * 3).sum().backward()
        grad = w.grad
        m.optim.SGD([w], lr=0.1).zero_grad(set_to_none=set_to_none)
        return (None if w.grad is None else (w.grad.tolist(), w.grad is grad,
                                             w.grad.requires_grad))
    a, b = both(program)
    assert a == b


def test_state_dict_round_trip_continues_the_same_run(both):
    """Train 10 steps, save model and optimizer state, load both into fresh objects,
    train 10 more: the same as 20 steps straight (and as PyTorch)."""
    def resumed(m):
        model = mlp(m)
        opt = m.optim.Adam(model.parameters(), lr=0.02, amsgrad=True)
        x, y = m.tensor(X), m.tensor(Y)

        def steps(model, opt, n):
            for _ in range(n):
                opt.zero_grad()
                loss = m.nn.functional.mse_loss(model(x), y)
                loss.backward()
                opt.step()
            return loss.item()
        steps(model, opt, 10)
        saved_model, saved_opt = model.state_dict(), opt.state_dict()
        packed = {"param_groups": saved_opt["param_groups"],
                  "state": {i: {k: v.numpy().copy() for k, v in s.items()}
                            for i, s in saved_opt["state"].items()}}
        model2 = mlp(m)
        opt2 = m.optim.Adam(model2.parameters(), lr=0.5)
        model2.load_state_dict(saved_model)
        opt2.load_state_dict(saved_opt)
        assert opt2.param_groups[0]["lr"] == 0.02
        last = steps(model2, opt2, 10)
        return last, numpy_state(model2), packed
    (tl, tw, tsd), (gl, gw, gsd) = both(resumed)
    straight = train(tapegrad, lambda m, model: m.optim.Adam(model.parameters(), lr=0.02,
                                                            amsgrad=True))
    np.testing.assert_allclose(gl, straight[0][-1], rtol=1e-12)
    np.testing.assert_allclose(gl, tl, rtol=1e-6)
    for k in tw:
        np.testing.assert_allclose(gw[k], tw[k], rtol=1e-6)
    # the packed form is PyTorch's: integer ids, same keys, same options
    assert gsd["state"].keys() == tsd["state"].keys()
    for pid in tsd["state"]:
        assert gsd["state"][pid].keys() == tsd["state"][pid].keys()
        for key, value in tsd["state"][pid].items():
            np.testing.assert_allclose(gsd["state"][pid][key], value, rtol=1e-6)
    assert gsd["param_groups"] == tsd["param_groups"]


def test_loaded_state_is_copied_and_cast_to_the_parameter_dtype():
    w = tapegrad.nn.Parameter(tapegrad.ones(2, dtype=tapegrad.float32))
    w.grad = tapegrad.ones(2, dtype=tapegrad.float32)
    src = tapegrad.optim.SGD([w], lr=0.1, momentum=0.9)
    src.step()
    sd = src.state_dict()
    sd["state"][0]["momentum_buffer"] = sd["state"][0]["momentum_buffer"].double()
    dst = tapegrad.optim.SGD([w], lr=0.1, momentum=0.9)
    dst.load_state_dict(sd)
    buf = dst.state[w]["momentum_buffer"]
    assert buf.dtype is tapegrad.float32 and buf is not src.state[w]["momentum_buffer"]
    dst.step()
    assert src.state[w]["momentum_buffer"].tolist() == [1.0, 1.0]


def test_float32_parameters_stay_float32(both):
    def program(m):
        w = m.tensor([0.5, -1.5, 2.0], dtype=m.float32, requires_grad=True)
        opt = m.optim.Adam([w], lr=0.1)
        for _ in range(5):
            opt.zero_grad()
            (w * w).sum().backward()
            opt.step()
        return w.dtype == m.float32, w.detach().numpy()
    (ta, tw), (ga, gw) = both(program)
    assert ta and ga
    np.testing.assert_allclose(gw, tw, rtol=1e-5)


def test_repr_matches_torch(both):
    a, b = both(lambda m: repr(m.optim.AdamW([m.zeros(1, requires_grad=True)], lr=0.5)))
    assert a == b


BAD_ARGS = [
    ("SGD", dict(lr=-1.0), "Invalid learning rate: -1.0"),
    ("SGD", dict(lr=0.1, momentum=-0.5), "Invalid momentum value: -0.5"),
    ("SGD", dict(lr=0.1, weight_decay=-1), "Invalid weight_decay value: -1"),
    ("SGD", dict(lr=0.1, nesterov=True), "Nesterov momentum requires a momentum and zero "
                                         "dampening"),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1, nesterov=True), "Nesterov momentum"),
    ("Adam", dict(lr=-0.1), "Invalid learning rate: -0.1"),
    ("Adam", dict(eps=-1e-8), "Invalid epsilon value: -1e-08"),
    ("Adam", dict(betas=(1.0, 0.9)), "Invalid beta parameter at index 0: 1.0"),
    ("Adam", dict(betas=(0.9, -0.1)), "Invalid beta parameter at index 1: -0.1"),
    ("Adam", dict(weight_decay=-0.5), "Invalid weight_decay value: -0.5"),
    ("AdamW", dict(betas=(0, 0.9)), "betas must be either both floats or both Tensors"),
]


@pytest.mark.parametrize("name,kwargs,message", BAD_ARGS)
def test_bad_arguments_raise_torch_errors(name, kwargs, message):
    for m in (torch, tapegrad):
        with pytest.raises(ValueError) as err:
            getattr(m.optim, name)([m.zeros(1, requires_grad=True)], **kwargs)
        assert str(err.value).startswith(message), (m.__name__, str(err.value))


def test_bad_params_raise_torch_errors():
    for m in (torch, tapegrad):
        w = m.zeros(2, requires_grad=True)
        cases = [([], ValueError, "optimizer got an empty parameter list"),
                 (w, TypeError, "params argument given to the optimizer should be an iterable "
                                "of Tensors or dicts, but got torch.DoubleTensor"),
                 ([w * 2], ValueError, "can't optimize a non-leaf Tensor"),
                 ([{"params": {w}}], TypeError, "optimizer parameters need to be organized in ordered "
                                  "collections"),
                 ([w, 1.0], TypeError, "optimizer can only optimize Tensors, but one of the "
                                       "params is float")]
        for params, error, message in cases:
            with pytest.raises(error) as err:
                m.optim.SGD(params, lr=0.1)
            assert str(err.value).startswith(message), (m.__name__, str(err.value))
        opt = m.optim.SGD([w], lr=0.1)
        with pytest.raises(ValueError, match="some parameters appear in more than one "
                                             "parameter group"):
            opt.add_param_group({"params": [w]})
        with pytest.raises(ValueError, match="different number of parameter groups"):
            opt.load_state_dict({"state": {}, "param_groups": []})

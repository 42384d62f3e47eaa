"""nn.Parameter and nn.Module against PyTorch: registration by attribute assignment,
the walks, train/eval, zero_grad, printing, state dicts and their errors."""
import collections

import numpy as np
import pytest
import torch
from torch_twins import WEIGHTS, mlp, numpy_state

import tapegrad

pytestmark = pytest.mark.usefixtures("torch_float64")


def test_parameter_is_a_leaf_that_requires_grad(both):
    def program(m):
        data = m.tensor([1.0, 2.0])
        p = m.nn.Parameter(data)
        frozen = m.nn.Parameter(m.ones(2), requires_grad=False)
        return (repr(p), p.is_leaf, p.requires_grad, frozen.requires_grad,
                isinstance(p, m.nn.Parameter), isinstance(data, m.nn.Parameter),
                isinstance(p, m.Tensor), isinstance(p.detach(), m.nn.Parameter),
                tuple(m.nn.Parameter().shape))
    a, b = both(program)
    assert a == b
    assert a[0] == "Parameter containing:\ntensor([1., 2.], requires_grad=True)"


class Net:
    """The same small module class written for either framework."""

    @staticmethod
    def build(m):
        class Block(m.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = m.nn.Linear(3, 4)
                self.scale = m.nn.Parameter(m.ones(4))
                self.register_buffer("count", m.zeros(1))
                self.register_buffer("scratch", m.zeros(2), persistent=False)
                self.note = "plain attribute"

            def forward(self, x):
                return self.lin(x) * self.scale

        class Top(m.nn.Module):
            def __init__(self):
                super().__init__()
                self.block = Block()
                self.head = m.nn.Sequential(m.nn.Tanh(), m.nn.Linear(4, 2, bias=False))
                self.shared = self.block        # the same module twice
                self.drop = m.nn.Dropout(0.25)

            def forward(self, x):
                return self.head(self.drop(self.block(x)))
        return Top()


def test_registration_and_walks(both):
    def program(m):
        net = Net.build(m)
        return dict(
            params=[(n, tuple(p.shape)) for n, p in net.named_parameters()],
            params_dup=[n for n, _ in net.named_parameters(remove_duplicate=False)],
            buffers=[n for n, _ in net.named_buffers()],
            children=[n for n, _ in net.named_children()],
            modules=[(n, type(mod).__name__) for n, mod in net.named_modules()],
            nonrecursive=[n for n, _ in net.block.named_parameters(recurse=False)],
            n_params=len(list(net.parameters())),
            state=list(net.state_dict().keys()),
            note=net.block.note,
            repr=repr(net))
    a, b = both(program)
    assert a == b
    assert "scratch" not in " ".join(a["state"])        # non-persistent buffer


def test_attribute_assignment_moves_between_tables(both):
    def program(m):
        net = m.nn.Module()
        net.w = m.nn.Parameter(m.ones(2))
        net.w = None                                    # stays a (None) parameter
        net.sub = m.nn.Linear(1, 1)
        del net.sub
        net.register_buffer("b", m.ones(1))
        net.b = m.zeros(1)
        errors = []
        for action in (lambda: setattr(net, "w", m.ones(2)),
                       lambda: setattr(net, "b", 3.0),
                       lambda: net.register_parameter("b", None),
                       lambda: net.register_parameter("a.b", None),
                       lambda: net.register_buffer("x", 1.0),
                       lambda: net.add_module("m.x", m.nn.Tanh()),
                       lambda: net.add_module("t", 3),
                       lambda: getattr(net, "missing")):
            try:
                action()
                errors.append(None)
            except Exception as e:
                errors.append((type(e).__name__, str(e)))
        return (list(net._parameters), list(net._modules), net.b.tolist(), errors,
                list(net.state_dict()))
    a, b = both(program)
    assert a == b


def test_module_errors_before_init_and_missing_forward(both):
    def program(m):
        class Early(m.nn.Module):
            def __init__(self):
                self.w = m.nn.Parameter(m.ones(1))
        out = []
        for action in (Early, lambda: m.nn.Module()(1)):
            try:
                action()
            except Exception as e:
                out.append((type(e).__name__, str(e)))
        return out
    a, b = both(program)
    assert a == b


def test_train_eval_propagate_and_change_dropout(both):
    def program(m):
        net = Net.build(m)
        modes = [net.training, net.drop.training]
        net.eval()
        modes += [net.training, net.drop.training, net.head[1].training]
        x = m.ones(5, 4)
        same = (net.drop(x) - x).abs().sum().item() == 0
        net.train()
        modes += [net.drop.training]
        try:
            net.train("yes")
        except ValueError as e:
            modes.append(str(e))
        return modes, same
    a, b = both(program)
    assert a == b and a[1]


def test_dropout_in_training_zeroes_and_rescales():
    tapegrad.manual_seed(0)
    drop = tapegrad.nn.Dropout(p=0.25)
    x = tapegrad.ones(200, 50, requires_grad=True)
    y = drop(x)
    kept = y.detach().numpy() != 0
    assert np.allclose(y.detach().numpy()[kept], 1 / 0.75)
    assert 0.72 < kept.mean() < 0.78
    y.sum().backward()
    assert np.array_equal(x.grad.numpy(), np.where(kept, 1 / 0.75, 0.0))
    drop.eval()
    assert drop(x) is x
    assert tapegrad.nn.functional.dropout(x, 1.0).sum().item() == 0.0
    for m in (torch, tapegrad):
        with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, "
                                             "but got 1.5"):
            m.nn.Dropout(1.5)


@pytest.mark.parametrize("set_to_none", [True, False])
def test_module_zero_grad(both, set_to_none):
    def program(m):
        net = mlp(m)
        net(m.tensor(np.ones((2, 3)))).sum().backward()
        net.zero_grad(set_to_none=set_to_none)
        return [None if p.grad is None else p.grad.abs().sum().item() for p in net.parameters()]
    a, b = both(program)
    assert a == b


def test_state_dict_round_trip(both):
    def program(m):
        src = mlp(m)
        dst = m.nn.Sequential(m.nn.Linear(3, 8), m.nn.Tanh(), m.nn.Linear(8, 2))
        sd = src.state_dict()
        result = dst.load_state_dict(sd)
        w = dst[0].weight
        ok = (repr(result), isinstance(sd, collections.OrderedDict),
              sd["0.weight"].requires_grad, w.requires_grad, w._version)
        return ok, numpy_state(dst)
    (a, sa), (b, sb) = both(program)
    assert a == b and a[0] == "<All keys matched successfully>"
    for k, v in WEIGHTS.items():
        assert np.array_equal(sa[k], v) and np.array_equal(sb[k], v)


def test_load_copies_values(both):
    def program(m):
        src, dst = mlp(m), mlp(m, {k: v * 0 for k, v in WEIGHTS.items()})
        dst.load_state_dict(src.state_dict())
        with m.no_grad():
            src[0].weight.mul_(2)
        return dst[0].weight.detach().numpy().copy()
    a, b = both(program)
    assert np.array_equal(a, b) and np.array_equal(a, WEIGHTS["0.weight"])


def test_load_state_dict_errors_match_torch(both):
    def program(m):
        net = mlp(m)
        good = {k: m.tensor(v) for k, v in WEIGHTS.items()}
        cases = [
            {k: v for k, v in good.items() if k != "2.bias"},
            dict(good, extra=m.zeros(1), **{"2.foo": m.zeros(1)}),
            dict(good, **{"0.bias": m.zeros(3)}),
            dict(good, **{"0.bias": [1.0]}),
        ]
        out = []
        for sd in cases:
            with pytest.raises(RuntimeError) as err:
                net.load_state_dict(sd)
            out.append(str(err.value).replace("torch.Size", "Size").replace("tapegrad.Size",
                                                                              "Size"))
        res = net.load_state_dict(cases[0], strict=False)
        out.append((res.missing_keys, res.unexpected_keys))
        res = net.load_state_dict(cases[1], strict=False)
        out.append((res.missing_keys, res.unexpected_keys))
        return out
    a, b = both(program)
    assert a == b
    assert a[0] == ('Error(s) in loading state_dict for Sequential:\n\tMissing key(s) in '
                    'state_dict: "2.bias". ')


def test_sequential_indexing(both):
    def program(m):
        seq = m.nn.Sequential(m.nn.Linear(2, 3), m.nn.ReLU(), m.nn.Linear(3, 1))
        out = [len(seq), type(seq[-1]).__name__, repr(seq[1:]),
               [type(s).__name__ for s in seq]]
        seq.append(m.nn.Sigmoid())
        seq[1] = m.nn.Tanh()
        del seq[0]
        out += [repr(seq), list(seq.state_dict())]
        try:
            seq[5]
        except IndexError as e:
            out.append(str(e))
        od = m.nn.Sequential(collections.OrderedDict([("fc", m.nn.Linear(1, 1)),
                                                      ("act", m.nn.GELU("tanh"))]))
        out += [repr(od), list(od.state_dict())]
        return out
    a, b = both(program)
    assert a == b


def test_reprs_match_torch(both):
    def program(m):
        nn = m.nn
        mods = [nn.Linear(2, 3), nn.Linear(2, 3, bias=False), nn.Tanh(), nn.ReLU(),
                nn.Sigmoid(), nn.GELU(), nn.GELU(approximate="tanh"), nn.Softplus(),
                nn.Softplus(beta=2.0, threshold=10.0), nn.Dropout(), nn.Dropout(0.1),
                nn.LeakyReLU(), nn.LeakyReLU(0.2), nn.Softmax(dim=1), nn.LogSoftmax(dim=-1),
                nn.Identity(), nn.MSELoss(), nn.CrossEntropyLoss(), nn.BCEWithLogitsLoss()]
        return [repr(mod) for mod in mods]
    a, b = both(program)
    assert a == b


def test_to_dtype_casts_parameters():
    net = mlp(tapegrad).float()
    assert {p.dtype for p in net.parameters()} == {tapegrad.float32}
    assert net(tapegrad.ones(2, 3, dtype=tapegrad.float32)).dtype is tapegrad.float32
    net.double()
    assert {p.dtype for p in net.parameters()} == {tapegrad.float64}

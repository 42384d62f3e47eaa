"""nn.ModuleList, ModuleDict, ParameterList, ParameterDict and Module's forward hooks
against PyTorch: registration (parameters, state dicts, train / eval, to), indexing,
keys, the list and dict methods, printing, gradients through them, and the errors."""
import collections

import numpy as np
import pytest

import tapegrad
from torch_twins import raised_by_both

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.usefixtures("torch_float64")


def _walk(net):
    """What a container shows of itself: names, shapes, the state dict, its repr."""
    return dict(params=[(n, tuple(p.shape), p.requires_grad) for n, p in net.named_parameters()],
                modules=[(n, type(m).__name__) for n, m in net.named_modules()],
                state=list(net.state_dict()), repr=repr(net),
                training=[m.training for m in net.modules()])


def _module_list(m):
    ml = m.nn.ModuleList([m.nn.Linear(2, 2), m.nn.Linear(2, 2), m.nn.ReLU()])
    ml.append(m.nn.Linear(2, 3))
    ml.extend([m.nn.Tanh(), m.nn.Tanh()])
    ml.insert(1, m.nn.Sigmoid())
    ml += [m.nn.ReLU()]
    return ml


def test_module_list(both):
    def program(m):
        ml = _module_list(m)
        out = _walk(ml)
        out.update(len=len(ml), types=[type(x).__name__ for x in ml],
                   neg=type(ml[-2]).__name__, slice=repr(ml[1:4]),
                   slice_type=type(ml[::2]).__name__, added=len(ml + ml[:2]))
        ml[0] = m.nn.Linear(2, 5)
        del ml[1]
        del ml[2:4]
        out.update(after=_walk(ml), popped=type(ml.pop(-1)).__name__, final=repr(ml),
                   empty=repr(m.nn.ModuleList()), eval=_walk(ml.eval())["training"])
        return out
    a, b = both(program)
    assert a == b
    assert "(5-6): 2 x Tanh()" in a["repr"]


def test_module_dict(both):
    def program(m):
        md = m.nn.ModuleDict({"b": m.nn.Linear(2, 2), "a": m.nn.ReLU()})
        md["c"] = m.nn.Linear(2, 1)
        md.update([("d", m.nn.Tanh()), ("a", m.nn.Sigmoid())])
        md.update(collections.OrderedDict(e=m.nn.Linear(1, 1)))
        out = _walk(md)
        out.update(keys=list(md.keys()), iter=list(md), len=len(md), has=("c" in md, "z" in md),
                   values=[type(v).__name__ for v in md.values()],
                   items=[(k, type(v).__name__) for k, v in md.items()],
                   popped=type(md.pop("b")).__name__)
        del md["d"]
        out.update(after=_walk(md))
        md.clear()
        out.update(cleared=(len(md), repr(md)))
        return out
    a, b = both(program)
    assert a == b


def test_parameter_list(both):
    def program(m):
        pl = m.nn.ParameterList([m.nn.Parameter(m.ones(2, 3)), m.zeros(2)])
        pl.append(m.ones(4, requires_grad=False))
        pl.extend([m.nn.Parameter(m.ones(1), requires_grad=False)])
        pl += [m.ones(2, 2)]
        out = _walk(pl)
        out.update(len=len(pl), kinds=[isinstance(p, m.nn.Parameter) for p in pl],
                   neg=tuple(pl[-1].shape), slice=[tuple(p.shape) for p in pl[1:4:2]],
                   slice_type=type(pl[:2]).__name__,
                   objects=repr(m.nn.ParameterList([1.0, "a", m.ones(1)])))
        pl[0] = m.ones(7)
        out.update(after=_walk(pl))
        return out
    a, b = both(program)
    assert a == b


def test_parameter_dict(both):
    def program(m):
        pd = m.nn.ParameterDict({"z": m.nn.Parameter(m.ones(2)), "a": m.ones(3)})
        pd["m"] = m.zeros(1, 2)
        pd.update([("k", m.ones(2)), ("z", m.zeros(5))])
        out = _walk(pd)
        out.update(keys=list(pd.keys()), iter=list(pd), len=len(pd), has="m" in pd,
                   values=[tuple(v.shape) for v in pd.values()],
                   items=[(k, tuple(v.shape)) for k, v in pd.items()],
                   get=(pd.get("nope", 3), tuple(pd.get("a").shape)),
                   rev=list(reversed(pd)), popitem=pd.popitem()[0],
                   pop=tuple(pd.pop("a").shape), default=tuple(pd.setdefault("n", m.ones(4)).shape),
                   copy=list(pd.copy().keys()), fromkeys=list(pd.fromkeys(["x", "y"]).keys()),
                   objects=repr(m.nn.ParameterDict({"a": 1, "b": m.ones(2)})),
                   one=repr(m.nn.ParameterDict({"a": 1})))
        del pd["m"]
        out.update(after=_walk(pd))
        pd.clear()
        out.update(cleared=(len(pd), repr(pd)))
        return out
    a, b = both(program)
    assert a == b


def _model(m):
    class Net(m.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = m.nn.ModuleList([m.nn.Linear(3, 4), m.nn.Linear(4, 2)])
            self.heads = m.nn.ModuleDict({"x": m.nn.Linear(2, 1), "y": m.nn.Linear(2, 2)})
            self.scales = m.nn.ParameterList([m.ones(2), m.full((1,), 2.0)])
            self.extra = m.nn.ParameterDict({"s": m.ones(1)})

        def forward(self, x):
            for layer in self.layers:
                x = layer(x).tanh()
            x = x * self.scales[0] * self.scales[1]
            return self.heads["x"](x).sum() * self.extra["s"] + self.heads["y"](x).sum()
    return Net()


def test_gradients_state_dicts_and_dtypes_through_containers():
    rng = np.random.default_rng(0)
    tnet, gnet = _model(torch), _model(tapegrad)
    state = {k: v.detach().numpy() + rng.standard_normal(v.shape) for k, v in
             tnet.state_dict().items()}
    assert list(state) == list(gnet.state_dict())
    tnet.load_state_dict({k: torch.tensor(v) for k, v in state.items()})
    gnet.load_state_dict({k: tapegrad.tensor(v) for k, v in state.items()})
    x = rng.standard_normal((5, 3))
    tout, gout = tnet(torch.tensor(x)), gnet(tapegrad.tensor(x))
    np.testing.assert_allclose(gout.detach().numpy(), tout.detach().numpy(), rtol=1e-12)
    tout.backward()
    gout.backward()
    for (tn, tp), (gn, gp) in zip(tnet.named_parameters(), gnet.named_parameters()):
        assert tn == gn
        np.testing.assert_allclose(gp.grad.numpy(), tp.grad.numpy(), rtol=1e-12, atol=1e-14)
    gnet.to(tapegrad.float32)
    assert {p.dtype for p in gnet.parameters()} == {tapegrad.float32}
    with pytest.raises(RuntimeError, match="Missing key"):
        gnet.load_state_dict({})


ERRORS = {
    "list index": lambda m: m.nn.ModuleList([m.nn.ReLU()])[1],
    "list negative index": lambda m: m.nn.ModuleList([m.nn.ReLU()])[-2],
    "list extend": lambda m: m.nn.ModuleList().extend(3),
    "list not a module": lambda m: m.nn.ModuleList([3]),
    "list forward": lambda m: m.nn.ModuleList()(m.ones(1)),
    "dict update": lambda m: m.nn.ModuleDict().update(3),
    "dict pair": lambda m: m.nn.ModuleDict().update([("a", m.nn.ReLU(), 1)]),
    "dict element": lambda m: m.nn.ModuleDict().update([3]),
    "dict missing": lambda m: m.nn.ModuleDict()["a"],
    "dict dot": lambda m: m.nn.ModuleDict({"a.b": m.nn.ReLU()}),
    "plist index": lambda m: m.nn.ParameterList([m.ones(1)])[3],
    "plist extend tensor": lambda m: m.nn.ParameterList().extend(m.ones(2)),
    "plist call": lambda m: m.nn.ParameterList()(1),
    "pdict key": lambda m: m.nn.ParameterDict()[1],
    "pdict missing": lambda m: m.nn.ParameterDict()["a"],
    "pdict update": lambda m: m.nn.ParameterDict().update(1),
    "pdict pair": lambda m: m.nn.ParameterDict().update([("a",)]),
    "pdict call": lambda m: m.nn.ParameterDict()(),
}


@pytest.mark.parametrize("name", ERRORS)
def test_errors_are_pytorchs(name, torch_float64):
    want, got = raised_by_both(ERRORS[name])
    assert type(got) is type(want)
    assert str(got) == str(want)


# -- forward hooks ---------------------------------------------------------------------
def test_forward_hooks(both):
    def program(m):
        calls = []
        lin = m.nn.Linear(2, 2)
        with m.no_grad():
            lin.weight.copy_(m.tensor([[1.0, 2.0], [3.0, 4.0]]))
            lin.bias.zero_()

        def pre(mod, args):
            calls.append("pre")
            return args[0] * 2                          # one argument, not a tuple

        def pre_first(mod, args):
            calls.append("pre_first")

        def pre_kw(mod, args, kwargs):
            calls.append(("pre_kw", sorted(kwargs)))
            return (args[0] + 1,), kwargs

        def post(mod, args, out):
            calls.append(("post", args[0].tolist()))
            return out * 10

        def post_kw(mod, args, kwargs, out):
            calls.append("post_kw")
        handles = [lin.register_forward_pre_hook(pre),
                   lin.register_forward_pre_hook(pre_first, prepend=True),
                   lin.register_forward_pre_hook(pre_kw, with_kwargs=True),
                   lin.register_forward_hook(post),
                   lin.register_forward_hook(post_kw, with_kwargs=True, prepend=True)]
        first = lin(m.tensor([1.0, 1.0])).tolist()
        handles[0].remove()
        handles[3].remove()
        second = lin(m.tensor([1.0, 1.0])).tolist()
        with lin.register_forward_hook(lambda mod, args, out: out + 1):
            third = lin(m.tensor([0.0, 0.0])).tolist()
        fourth = lin(m.tensor([0.0, 0.0])).tolist()
        bad = lin.register_forward_pre_hook(lambda mod, a, k: 5, with_kwargs=True)
        try:
            lin(m.tensor([0.0, 0.0]))
        except RuntimeError as e:
            error = str(e)
        bad.remove()
        return calls, first, second, third, fourth, error
    a, b = both(program)
    assert a == b


def test_a_forward_hook_sees_the_graph():
    for m in (torch, tapegrad):
        lin = m.nn.Linear(2, 1)
        lin.register_forward_hook(lambda mod, args, out: out * out)
        x = m.ones(1, 2, requires_grad=True)
        lin(x).sum().backward()
        assert x.grad is not None and tuple(x.grad.shape) == (1, 2)

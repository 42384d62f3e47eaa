"""PyTorch conformance of autograd's semantics: each program runs with ``m = torch`` and
``m = tapegrad`` and must give PyTorch's answer (values, gradients, which hooks and
backwards ran, errors).  The cases are issue 14's silent divergences and their kin:
in-place overwrites, custom Functions saving outputs, hooks on requested inputs, masked
gradients at nan/inf, retain_grad after in-place ops, grad modes on generators, pruning
to requested inputs, gradcheck's in-place perturbation, and smaller API behaviours."""
import gc
import pickle
import warnings
import weakref

import numpy as np
import pytest
import torch

import tapegrad
from torch_programs import registry, run

pytestmark = pytest.mark.usefixtures("torch_float64")
PROGRAMS, program = registry()


# -- 1. in-place overwrite of a non-leaf ------------------------------------------------------
def _overwrite(m, op):
    x = m.ones(3, requires_grad=True)
    y = x * 3
    op(m, y)
    (y + x).sum().backward()
    return [x.grad, y, y.requires_grad, y.grad_fn.name()]


@program
def zero_drops_history(m):
    return _overwrite(m, lambda m, y: y.zero_())


@program
def fill_drops_history(m):
    return _overwrite(m, lambda m, y: y.fill_(2.5))


@program
def copy_constant_drops_history(m):
    return _overwrite(m, lambda m, y: y.copy_(m.tensor([1.0, 2.0, 3.0])))


@program
def copy_broadcast_drops_history(m):
    return _overwrite(m, lambda m, y: y.copy_(m.tensor([4.0])))


@program
def copy_from_grad_tensor(m):
    x = m.ones(3, requires_grad=True)
    s = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 3
    y.copy_(s * 2)
    (y * y + x).sum().backward()
    return [x.grad, s.grad]


@program
def zero_under_no_grad_keeps_history(m):
    x = m.ones(3, requires_grad=True)
    y = x * 3
    with m.no_grad():
        y.zero_()
    (y + x).sum().backward()
    return [x.grad, y]


# -- 2. custom Functions that save outputs ------------------------------------------------------
def _square(m):
    class Square(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x ** 2
            ctx.save_for_backward(x, y)
            return y

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            return g * 2 * y / x
    return Square


def _exp(m):
    class Exp(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            y, = ctx.saved_tensors
            return g * y
    return Exp


@program
def function_saved_output_second_derivative(m):
    x = m.tensor(2.0, requires_grad=True)
    g, = m.autograd.grad(_square(m).apply(x), x, create_graph=True)
    g2, = m.autograd.grad(g, x)
    return [g, g2]


@program
def function_exp_third_derivative(m):
    x = m.tensor([0.5, -1.0], requires_grad=True)
    y = _exp(m).apply(x).sum()
    g, = m.autograd.grad(y, x, create_graph=True)
    g2, = m.autograd.grad(g.sum(), x, create_graph=True)
    g3, = m.autograd.grad(g2.sum(), x)
    return [g, g2, g3]


def test_function_exp_gradgradcheck():
    x = tapegrad.tensor([0.3, -0.7], requires_grad=True)
    assert tapegrad.autograd.gradgradcheck(_exp(tapegrad).apply, (x,))


# -- 3. hooks on the requested inputs -------------------------------------------------------
@program
def grad_runs_leaf_hooks(m):
    a = m.tensor([1.0, 2.0], requires_grad=True)
    a.register_hook(lambda g: g * 3)
    return m.autograd.grad((a * a).sum(), a)


@program
def grad_runs_leaf_hooks_create_graph(m):
    a = m.tensor([1.0, 2.0], requires_grad=True)
    a.register_hook(lambda g: g * 3)
    g, = m.autograd.grad((a * a).sum(), a, create_graph=True)
    return [g, m.autograd.grad(g.sum(), a)]


@program
def grad_runs_nonleaf_hooks(m):
    a = m.tensor([1.0, 2.0], requires_grad=True)
    b = a * 1
    b.register_hook(lambda g: g * 5)
    return [m.autograd.grad((b * b).sum(), b, retain_graph=True),
            m.autograd.grad((b * b).sum(), a)]


# -- 4. masked gradients: nan / inf upstream, norms at zero ---------------------------------------
def _grad_of(m, values, fn):
    x = m.tensor(values, requires_grad=True)
    fn(m, x).sum().backward()
    return x.grad


MASKED = {
    "clamp_sqrt": lambda m, x: x.clamp(min=0).sqrt(),
    "clamp_max_sqrt": lambda m, x: (-x).clamp(max=0).neg().sqrt(),
    "clamp_both_log": lambda m, x: x.clamp(-0.5, 0).neg().sqrt(),
    "relu_sqrt": lambda m, x: x.relu().sqrt(),
    "maximum_sqrt": lambda m, x: m.maximum(x, m.zeros(3)).sqrt(),
    "minimum_sqrt": lambda m, x: m.minimum(-x, m.zeros(3)).neg().sqrt(),
    "maximum_tie": lambda m, x: m.maximum(x, m.zeros(3)) * 2,
    "relu_inf": lambda m, x: x.relu() * m.tensor([float("inf")] * 3),
    "sign_inf": lambda m, x: x.sign() * (x * m.tensor([float("inf")] * 3)),
    "norm": lambda m, x: (x * 0).norm(),
    "norm_p3": lambda m, x: (x * 0).norm(p=3),
    "norm_p1_5": lambda m, x: (x * 0).norm(p=1.5),
    "norm_p1": lambda m, x: (x * 0).norm(p=1),
    "norm_inf": lambda m, x: (x * 0).norm(p=float("inf")),
    "norm_nonzero": lambda m, x: x.norm(p=3),
    "norm_dim_zero_row": lambda m, x: m.stack([x * 0, x]).norm(dim=1),
    "std_constant": lambda m, x: (x * 0 + 1).std(),
    "std_dim_constant_row": lambda m, x: m.stack([x * 0, x]).std(dim=1),
}


@pytest.mark.parametrize("name", sorted(MASKED))
def test_masked_gradients(name):
    fn = MASKED[name]
    want = _grad_of(torch, [-1.0, 0.0, 4.0], fn).numpy()
    got = _grad_of(tapegrad, [-1.0, 0.0, 4.0], fn).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)


@pytest.mark.parametrize("name", ["clamp_sqrt", "relu_sqrt", "norm", "std_constant"])
def test_masked_gradients_replayed(name):
    """The replay and its compiled tape follow the same rules."""
    fn = MASKED[name]
    want = _grad_of(torch, [-1.0, 0.0, 4.0], fn).numpy()
    traced = tapegrad.trace(lambda x: fn(tapegrad, x).sum(), tapegrad.tensor([-2.0, 0.0, 3.0]))
    np.testing.assert_allclose(np.asarray(traced.grad(tapegrad.tensor([-1.0, 0.0, 4.0]))),
                               want, rtol=1e-12)


# -- 5. retain_grad then in place ---------------------------------------------------------------
@program
def retain_grad_then_inplace(m):
    t = m.tensor([1.0, 2.0], requires_grad=True)
    b = t.clone()
    b.retain_grad()
    b.mul_(2)
    (b * b).sum().backward()
    return [b.grad, t.grad]


@program
def clone_of_a_scalar_and_torch_clone(m):
    """A 0-d tensor's clone is a CloneBackward0 Node (it was an AddBackward0), and
    ``torch.clone`` is the function form."""
    t = m.tensor(1.5, requires_grad=True)
    a, b = t.clone(), m.clone(t)
    (a * b).backward()
    with m.no_grad():
        c = t.clone()
    return [a.grad_fn.name(), b.grad_fn.name(), t.grad, c.requires_grad, c.grad_fn is None]


# -- 6. grad modes on generators ----------------------------------------------------------------
@program
def grad_modes_on_generators(m):
    @m.no_grad()
    def off():
        yield m.is_grad_enabled()
        yield m.is_grad_enabled()

    @m.enable_grad()
    def on():
        yield m.is_grad_enabled()

    @m.set_grad_enabled(False)
    def switched():
        x = yield m.is_grad_enabled()
        yield x

    seen = list(off())
    with m.no_grad():
        seen += list(on())
    gen = switched()
    seen.append(next(gen))
    seen.append(m.is_grad_enabled())        # the caller's mode while suspended
    seen.append(gen.send(7))
    return seen


# -- 8. only the Nodes leading to the requested inputs run ----------------------------------------
@program
def unneeded_function_backward_does_not_run(m):
    called = []

    class F(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            called.append(1)
            return g
    t = m.tensor([1.0], requires_grad=True)
    y = m.tensor([2.0], requires_grad=True)
    out = (F.apply(t * 2) * y).sum()
    first = m.autograd.grad(out, (y,), retain_graph=True)
    n_first = len(called)
    second = m.autograd.grad(out, (t,))
    return [first, n_first, second, len(called)]


@program
def node_hook_of_requested_tensor_does_not_run(m):
    x = m.tensor([1.0], requires_grad=True)
    b = x * 2
    c = b * 3
    seen = []
    b.grad_fn.register_hook(lambda gi, go: seen.append("node"))
    b.register_hook(lambda g: seen.append("tensor"))
    g = m.autograd.grad(c.sum(), inputs=b)
    return [g, seen]


# -- 9. gradcheck perturbs the inputs in place -----------------------------------------------------
@program
def gradcheck_closure_over_input(m):
    x = m.tensor([1.0, 2.0], requires_grad=True)
    return m.autograd.gradcheck(lambda _: x * x, (x,))


# -- 10. smaller divergences ---------------------------------------------------------------------
@program
def post_accumulate_hook_optimizer_step(m):
    p = m.tensor([1.0, 2.0], requires_grad=True)
    p.register_post_accumulate_grad_hook(lambda t: t.sub_(t.grad))
    (p * 3).sum().backward()
    return [p, p.grad]


@program
def post_accumulate_hook_returning_a_value(m):
    p = m.tensor([1.0], requires_grad=True)
    p.register_post_accumulate_grad_hook(lambda t: t.grad * 2)
    (p * 3).sum().backward()
    return p.grad


@program
def accumulate_grad_post_hook_edits_grad(m):
    x = m.tensor([1.0], requires_grad=True)
    y = x * 2
    y.grad_fn.next_functions[0][0].register_hook(lambda gi, go: go[0].mul_(10) and None)
    y.sum().backward()
    first = x.grad.clone()
    (x * 2).sum().backward()
    return [first, x.grad]


@program
def function_returns_one_tensor_twice(m):
    seen = []

    class F(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x * 2
            return y, y

        @staticmethod
        def backward(ctx, a, b):
            seen.extend([a, b])
            return a + b
    x = m.tensor([1.0], requires_grad=True)
    a, b = F.apply(x)
    (a * 3).sum().backward()
    return [a is b, x.grad, seen]


@program
def materialized_zero_requires_grad(m):
    x = m.tensor([1.0], requires_grad=True)
    z = m.tensor([1.0], requires_grad=True)
    g = m.autograd.grad((x * 2).sum(), (x, z), create_graph=True, materialize_grads=True)
    return [g[1], g[1].requires_grad]


@program
def saved_self_is_the_input(m):
    a = m.tensor([1.0], requires_grad=True)
    y = a * a
    return y.grad_fn._saved_self is a


@program
def function_backward_with_extra_nones(m):
    class F(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2, None, None
    x = m.tensor([1.0], requires_grad=True)
    F.apply(x).sum().backward()
    return x.grad


@program
def requires_grad_on_grad_nonleaf(m):
    x = m.tensor([1.0], requires_grad=True)
    b = (x * 2).requires_grad_()
    return b.requires_grad


@program
def numpy_under_no_grad(m):
    x = m.tensor([1.0, 2.0], requires_grad=True)
    with m.no_grad():
        return x.numpy().tolist()


@program
def list_key_with_slice(m):
    y = m.zeros(3, 4)
    y[[slice(None), [1, 3]]] = 2
    x = m.arange(12.0).reshape(3, 4)
    return [y, x[[[0, 1], [1, 2]]], x[[0, [1, 2]]], x[[0, 2]]]


@program
def overflowing_exp_exp(m):
    x = m.tensor([1.0, 5.0, 10.0, 800.0], requires_grad=True)
    (x.exp().exp().sum() + (1 / x.exp()).sum()).backward()
    return x.grad


@program
def pickled_tensors(m):
    out = []
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        x = m.tensor([1.0, 2.0], requires_grad=True)
        y = pickle.loads(pickle.dumps(x, protocol=protocol))
        z = pickle.loads(pickle.dumps(x * 2, protocol=protocol))
        out.append([y, y.requires_grad, y.is_leaf, z, z.is_leaf])
    return out


def test_nonleaf_grad_warns():
    x = tapegrad.tensor([1.0], requires_grad=True)
    y = x * 2
    with pytest.warns(UserWarning, match="not a leaf Tensor"):
        assert y.grad is None
    y.retain_grad()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert y.grad is None and x.grad is None


def test_retained_tensor_is_released():
    x = tapegrad.tensor([1.0], requires_grad=True)
    y = x * 2
    y.retain_grad()
    ref = weakref.ref(y)
    (y * 1).sum().backward()
    del y
    gc.collect()
    assert ref() is None


# -- autograd names real programs use ------------------------------------------------------------
@program
def function_setup_context_style(m):
    class MulConst(m.autograd.Function):
        @staticmethod
        def forward(x, c):
            return x * c

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, c = inputs
            ctx.c = c
            ctx.save_for_backward(output)

        @staticmethod
        def backward(ctx, g):
            out, = ctx.saved_tensors
            return g * ctx.c + 0 * out, None
    x = m.tensor([1.0, 2.0], requires_grad=True)
    y = MulConst.apply(x, 3.0)
    g, = m.autograd.grad((y * y).sum(), x, create_graph=True)
    g2, = m.autograd.grad(g.sum(), x)
    return [y, g, g2, m.autograd.gradcheck(lambda v: MulConst.apply(v, 3.0), (x,))]


@program
def legacy_variable(m):
    v = m.autograd.Variable(m.tensor([1.0, 2.0]), requires_grad=True)
    (v * v).sum().backward()
    return [isinstance(v, m.autograd.Variable), isinstance(m.ones(1), m.autograd.Variable),
            v.is_leaf, v.grad]


@program
def output_nr(m):
    a = m.ones(3, requires_grad=True)
    p, q, r = a.unbind()
    s1, s2 = a.split(2)
    return [a.output_nr, p.output_nr, q.output_nr, r.output_nr, s2.output_nr, (a * 2).output_nr]


@program
def calling_a_node(m):
    a = m.tensor([1.0, 2.0], requires_grad=True)
    b = m.tensor([3.0, 4.0], requires_grad=True)
    p, q = a.unbind()
    out = [(a * b).grad_fn(m.ones(2)), (a * 2).grad_fn(m.ones(2)), a.exp().grad_fn(m.ones(2)),
           a.sum().grad_fn(m.tensor(1.0)), p.grad_fn(m.tensor(1.0), None)]
    return [[v for v in o if v is not None] if isinstance(o, tuple) else o for o in out]


@program
def save_on_cpu(m):
    x = m.tensor([1.0, 2.0], requires_grad=True)
    with m.autograd.graph.save_on_cpu(pin_memory=False):
        y = (x.exp() * x).sum()
    y.backward()
    return x.grad


def test_make_dot_of_several_roots():
    a = tapegrad.ones(2, requires_grad=True)
    b = a * 2
    c = b.exp()
    d = c + a
    src = tapegrad.viz.make_dot((b, c, d)).source
    assert src.count("AccumulateGrad") == 1 and src.count("MulBackward0") == 1
    for k, name in enumerate(["MulBackward0", "ExpBackward0", "AddBackward0"]):
        node = next(line.split()[0] for line in src.splitlines() if f'"{name}"' in line)
        assert f"{node} -> out{k}" in src


@program
def backward_inputs_retained_nonleaf_once(m):
    x = m.tensor([1.0, 2.0], requires_grad=True)
    h = x * 2
    h.retain_grad()
    k = h * 1
    k.retain_grad()
    (k * k).sum().backward(inputs=[h])
    return [h.grad, k.grad, x.grad is None]


@program
def hooks_on_unreached_pieces_get_none(m):
    out = []
    x = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
    a, b, c = x.unbind()
    a.register_hook(lambda g: out.append(("a", g)))
    c.register_hook(lambda g: out.append(("c", g)))
    (b * 2).backward()
    y = m.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    p, q = y.split(2)
    p.register_hook(lambda g: out.append(("p", g)))
    (q * p).sum().backward()
    return [[k, g] for k, g in out] + [x.grad, y.grad]


SECOND = {
    "add_const": lambda m, x: (x + 1).sum(),
    "mul_const": lambda m, x: (x * 2).sum(),
    "sub_neg": lambda m, x: (-(x - 3)).sum(),
    "slice_sum": lambda m, x: x[1:].sum(),
    "mean_view": lambda m, x: x.view(3, 1).mean(),
    "exp": lambda m, x: x.exp().sum(),
    "mul_xx": lambda m, x: (x * x).sum(),
    "cat_expand": lambda m, x: m.cat([x, x]).sum() + x.expand(2, 3).sum(),
    "large": lambda m, x: (x.expand(100000, 3) + 1).sum(),
}


@pytest.mark.parametrize("name", sorted(SECOND))
def test_second_backward_like_torch(name):
    """A second backward without retain_graph goes through entries that saved nothing
    (PyTorch frees only saved tensors) and raises at one that did."""
    def run(m):
        x = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = SECOND[name](m, x)
        y.backward()
        try:
            y.backward()
        except RuntimeError as e:
            return str(e)[:40]
        return x.grad.tolist()
    assert run(tapegrad) == run(torch)


@program
def second_backward_through_function_saving_nothing(m):
    class Twice(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2
    x = m.tensor([1.0, 2.0], requires_grad=True)
    y = (Twice.apply(x) + 1).sum()
    y.backward()
    y.backward()
    return x.grad


# -- every program above, against PyTorch (last: PROGRAMS is complete here) ---------------------
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_like_torch(name):
    want = run(PROGRAMS[name], torch)
    got = run(PROGRAMS[name], tapegrad)
    assert _same(got, want), (got, want)


def _same(a, b):
    """Equal results: floats to 1e-12 relative (nan equals nan), the rest exactly."""
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return (a != a and b != b) or a == pytest.approx(b, rel=1e-12, abs=0)
    return type(a) is type(b) and a == b

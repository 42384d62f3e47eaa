"""Node hooks (``grad_fn.register_prehook`` / ``register_hook``, AccumulateGrad's too)
against PyTorch: what the hooks see, replacements, order, errors, create_graph."""
import numpy as np
import pytest

import tapegrad as tg

pytestmark = pytest.mark.usefixtures("torch_float64")


class Log(list):
    """Records hook calls as nested lists of floats (None kept)."""

    def __call__(self, *items):
        self.append([_plain(v) for v in items])


def _plain(v):
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, tuple):
        return [_plain(u) for u in v]
    return v.tolist() if hasattr(v, "tolist") else v


def same(ref, got):
    """Equal structure, numbers equal up to float64 rounding."""
    if isinstance(ref, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(ref), (ref, got)
        for r, g in zip(ref, got):
            same(r, g)
    elif isinstance(ref, float):
        assert got == pytest.approx(ref, rel=1e-12, abs=1e-12), (ref, got)
    else:
        assert got == ref


def test_prehook_and_post_hook_see_and_replace_gradients(both):
    def program(m):
        log = Log()
        x = m.tensor([1.0, 2.0], requires_grad=True)
        y = m.tensor([3.0, 4.0], requires_grad=True)
        z = x * y
        z.retain_grad()
        z.register_hook(lambda g: log("tensor hook", g) or g * 10)
        z.grad_fn.register_prehook(lambda go: log("pre", go) or (go[0] * 2,))
        z.grad_fn.register_hook(lambda gi, go: log("post", gi, go) or (gi[0], gi[1] * 3))
        z.exp().sum().backward()
        # retain_grad sees the gradient after tensor hooks, before the prehook
        log("result", z.grad, x.grad, y.grad)
        return log
    same(*both(program))


@pytest.mark.parametrize("case", ["const", "no_grad_input", "same_input_twice", "broadcast",
                                  "where_broadcast_twice", "split", "unary_zeroed", "var",
                                  "matmul", "cat_twice", "scalar"])
def test_grad_inputs_are_per_next_functions_edge(both, case):
    def program(m):
        log = Log()
        x = m.tensor([1.0, 2.0], requires_grad=True)
        w = m.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        if case == "const":
            out = x * 3.0
        elif case == "no_grad_input":
            out = x * m.tensor([1.0, 5.0])
        elif case == "same_input_twice":
            out = x * x
        elif case == "broadcast":
            out = x + w
        elif case == "where_broadcast_twice":
            out = m.where(w > 2, x, x)
        elif case == "split":
            p, q = m.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True).split(2)
            p.grad_fn.register_prehook(lambda go: log("pre", go))
            p.grad_fn.register_hook(lambda gi, go: log("post", gi, go))
            (q * 2).sum().backward()
            return log
        elif case == "unary_zeroed":
            out = x.exp()
        elif case == "var":
            out = w.var(dim=1)
        elif case == "matmul":
            out = w @ w
        elif case == "cat_twice":
            out = m.cat([x, x * 2, x])
        else:
            s = m.tensor(0.5, requires_grad=True)
            out = s * s.sin()
        out.grad_fn.register_prehook(lambda go: log("pre", go))
        out.grad_fn.register_hook(lambda gi, go: log("post", gi, go)
                                  or tuple(None if g is None else g * 0.5 for g in gi))
        weights = m.tensor(np.arange(1.0, out.numel() + 1).reshape(tuple(out.shape)))
        (out.sin() * weights).sum().backward()
        log("grads", x.grad, w.grad)
        return log
    same(*both(program))


def test_custom_function_node_hooks(both):
    def program(m):
        log = Log()

        class Pair(m.autograd.Function):
            @staticmethod
            def forward(ctx, a, b):
                ctx.save_for_backward(a, b)
                return a * b, a + b

            @staticmethod
            def backward(ctx, g1, g2):
                a, b = ctx.saved_tensors
                return g1 * b + g2, g1 * a + g2

        x = m.tensor([1.0, 2.0], requires_grad=True)
        y = m.tensor([3.0, 4.0], requires_grad=True)
        p, q = Pair.apply(x, y)
        p.grad_fn.register_prehook(lambda go: log("pre", go))
        p.grad_fn.register_hook(lambda gi, go: log("post", gi, go) or (gi[0], gi[1] * 3))
        q.register_hook(lambda g: log("q hook", g) or g * 5)
        (q * 2).sum().backward()
        log("grads", x.grad, y.grad)
        return log
    same(*both(program))


def test_tensor_hook_on_any_output_of_a_function(both):
    def program(m):
        class Two(m.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                return a * 2, a * 3

            @staticmethod
            def backward(ctx, g1, g2):
                return g1 * 2 + g2 * 3

        x = m.tensor([1.0, 2.0], requires_grad=True)
        p, q = Two.apply(x)
        p.register_hook(lambda g: g * 100)     # the lower entry: still runs
        (p + q).sum().backward()
        return x.grad.tolist()
    same(*both(program))


def test_accumulate_grad_hooks(both):
    def program(m):
        log = Log()
        x = m.tensor([1.0, 2.0], requires_grad=True)
        x.register_hook(lambda g: log("tensor hook", g) or g * 2)
        acc = (x * 2).grad_fn.next_functions[0][0]
        acc.register_prehook(lambda go: log("acc pre", go) or (go[0] + 1,))
        acc.register_hook(lambda gi, go: log("acc post", gi, go))
        x.register_post_accumulate_grad_hook(lambda p: log("post accumulate", p.grad))
        (x * 3).sum().backward()
        s = m.tensor(3.0, requires_grad=True)
        acc_s = (s * 2).grad_fn.next_functions[0][0]   # held: its hooks live with it
        acc_s.register_prehook(lambda go: (go[0] * 10,))
        (s * s).backward()
        log("grads", x.grad, s.grad)
        return log
    same(*both(program))


def test_node_hooks_under_create_graph(both):
    def program(m):
        log = Log()
        x = m.tensor([1.0, 2.0], requires_grad=True)
        y = m.tensor([3.0, 4.0], requires_grad=True)
        z = x * y
        z.grad_fn.register_prehook(lambda go: (go[0] * 2,))
        z.grad_fn.register_hook(lambda gi, go: log("post", gi[0], go) or (gi[0] * gi[0], gi[1]))
        gx, gy = m.autograd.grad(z.sin().sum(), [x, y], create_graph=True)
        gxx, = m.autograd.grad((gx + gy).sum(), [x])
        log("grads", gx, gy, gxx)
        return log
    same(*both(program))


@pytest.mark.parametrize("kind", ["post", "pre"])
def test_removed_node_hooks_do_not_run(both, kind):
    def program(m):
        log = Log()
        x = m.tensor([1.0, 2.0], requires_grad=True)
        e = x * 2
        register = e.grad_fn.register_hook if kind == "post" else e.grad_fn.register_prehook
        handle = register(lambda *args: log("ran"))
        handle.remove()
        e.sum().backward()
        log("grad", x.grad)
        return log
    same(*both(program))


@pytest.mark.parametrize("bad, kind", [
    (lambda gi, go: (gi[0],), "post"),
    (lambda go: (go[0], go[0]), "pre"),
    (lambda go: (go[0].sum(),), "pre"),
    (lambda gi, go: (gi[0][:1], gi[1]), "post"),
    (lambda gi, go: 5, "post"),
    (lambda go: [go[0]], "pre"),
], ids=["count_post", "count_pre", "size_pre", "size_post", "int", "list"])
def test_hook_return_errors(both, bad, kind):
    def program(m):
        x = m.tensor([1.0, 2.0], requires_grad=True)
        e = x * m.tensor([3.0, 4.0], requires_grad=True)
        (e.grad_fn.register_hook if kind == "post" else e.grad_fn.register_prehook)(bad)
        try:
            e.sum().backward()
        except (RuntimeError, TypeError) as err:
            return type(err).__name__, str(err)
        return None
    ref, got = both(program)
    assert ref is not None and got == ref


def test_node_hooks_cost_nothing_when_absent():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    with tg.Tape() as t:
        y = (x * x).sin()
    t.flush()
    assert not t.autograd.node_hooks and not (t.FLAGS[:t.n] & tg.tape.HOOKED).any()
    y.grad_fn.register_prehook(lambda go: None)
    assert t.FLAGS[y._i] & tg.tape.HOOKED and not t.FLAGS[y._i - 1] & tg.tape.HOOKED


def test_a_multi_output_node_runs_its_hooks_once(both):
    def program(m):
        log = Log()
        p, q = m.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True).split(2)
        p.grad_fn.register_prehook(lambda go: log("pre", go) or (None, None))
        p.grad_fn.register_hook(lambda gi, go: log("post", gi, go))
        (p * 2 + q).sum().backward()
        return log
    same(*both(program))

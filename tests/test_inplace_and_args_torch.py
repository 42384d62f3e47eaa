"""In-place ops whose operands broadcast beyond their target, ``autograd.grad`` with an
input listed twice, uint8 masks, the legacy ``size_average`` / ``reduce`` loss arguments
and ``split`` / ``chunk`` at their edges.  Each program runs with torch and tapegrad in
float64; values (with shapes), gradients and errors (type and message start) must agree."""
import warnings

import numpy as np
import pytest
import torch

import tapegrad
from torch_programs import plain, registry

pytestmark = pytest.mark.usefixtures("torch_float64")
PROGRAMS, program = registry()


# -- 1. an in-place op never takes a larger, broadcast shape ---------------------------------
@program
def inplace_mul_broadcasts_beyond_target(m):
    y = m.tensor([1.0, 2.0])
    y.mul_(m.ones(3, 1))
    return y


@program
def inplace_add_through_view_broadcasts_beyond_it(m):
    base = m.zeros(2, 2)
    base[0].add_(m.ones(2, 2))
    return base


@program
def inplace_on_non_leaf_broadcasts_beyond_it(m):
    w = m.tensor([1.0, 2.0], requires_grad=True)
    z = w * 1
    z.add_(m.ones(2, 2))
    z.sum().backward()
    return w.grad


@program
def inplace_on_0d_broadcasts_beyond_it(m):
    return m.tensor(1.0).sub_(m.ones(2))


@program
def inplace_iadd_broadcasts_beyond_target(m):
    y = m.tensor([1.0, 2.0])
    y += m.ones(2, 2)
    return y


@program
def inplace_operands_that_do_not_broadcast(m):
    return m.tensor([1.0, 2.0]).add_(m.ones(3))


@program
def inplace_clamp_tensor_bounds_broadcast_beyond_target(m):
    return m.tensor([1.0, 2.0]).clamp_(None, m.zeros(2, 2))


@program
def inplace_clamp_tensor_bounds_that_do_not_broadcast(m):
    return m.tensor([1.0, 2.0]).clamp_(m.zeros(3, 2), m.zeros(2, 1))


@program
def inplace_masked_fill_mask_broadcasts_beyond_target(m):
    return m.zeros(2, 1).masked_fill_(m.ones(3, dtype=m.bool), 1.0)


@program
def inplace_copy_broadcasts_src_to_target(m):
    x = m.zeros(2, 3)
    w = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x.copy_(w * 2)
    (x * x).sum().backward()
    return [x, w.grad]


@pytest.mark.parametrize("src", [(2, 2), (1, 2), (3,), (3, 1)])
def test_copy_src_must_broadcast_to_target(src):
    def prog(m):
        return m.zeros(2).copy_(m.ones(*src))
    assert _run(prog, tapegrad) == _run(prog, torch)


@program
def inplace_leaf_check_comes_before_the_shape_check(m):
    return m.zeros(2, requires_grad=True).add_(m.ones(2, 2))


@program
def inplace_that_fits_after_a_refused_one(m):
    w = m.tensor([1.0, 2.0], requires_grad=True)
    z = w * 3
    try:
        z.mul_(m.ones(2, 2))
    except RuntimeError:
        pass
    z.mul_(m.tensor([[2.0, 5.0]]).squeeze(0))
    z.sum().backward()
    return [z, w.grad, z._version]


# -- 2. autograd.grad with an input listed twice ---------------------------------------------
@program
def grad_same_leaf_twice(m):
    x = m.tensor([1.0, 2.0], requires_grad=True)
    return list(m.autograd.grad((x ** 2).sum(), [x, x]))


@program
def grad_same_leaf_twice_allow_unused(m):
    x = m.tensor([1.0, 2.0], requires_grad=True)
    y = m.tensor([1.0, 2.0], requires_grad=True)
    return list(m.autograd.grad((x ** 2).sum() + y.sum(), [x, y, x], allow_unused=True))


@program
def grad_same_intermediate_twice(m):
    x = m.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    return list(m.autograd.grad((y ** 2).sum(), [y, x, y]))


@program
def grad_same_leaf_twice_create_graph(m):
    x = m.tensor([1.0, 2.0], requires_grad=True)
    a, b = m.autograd.grad((x ** 3).sum(), [x, x], create_graph=True)
    (a * b).sum().backward()
    return [a, b, x.grad, a is b]


@program
def grad_same_leaf_twice_runs_its_hook_once(m):
    x = m.tensor([1.0, 2.0], requires_grad=True)
    calls = []
    x.register_hook(lambda g: calls.append(1) or g * 10)
    return list(m.autograd.grad((x ** 2).sum(), [x, x])) + [len(calls)]


@program
def backward_inputs_same_tensor_twice(m):
    x = m.tensor([1.0, 2.0], requires_grad=True)
    z = x * 1
    z.retain_grad()
    (z ** 2).sum().backward(inputs=[x, z, x, z])
    return [x.grad, z.grad]


# -- 3. a uint8 tensor in a key is a mask ----------------------------------------------------
def _byte(m, values):
    return m.tensor(values, dtype=m.uint8)


@program
def uint8_mask_getitem(m):
    x = m.tensor([10.0, 20.0, 30.0, 40.0], requires_grad=True)
    y = x[_byte(m, [1, 0, 2, 0])]
    (y * y).sum().backward()
    return [y, x.grad]


@program
def uint8_mask_getitem_in_tuples_and_lists(m):
    x = m.arange(8.0).reshape(2, 4)
    return [x[:, _byte(m, [1, 0, 1, 0])], x[[_byte(m, [0, 1])]],
            x[_byte(m, [[1, 0, 1, 0], [0, 0, 0, 1]])], x[_byte(m, 1)], x[_byte(m, 0)]]


@program
def uint8_mask_getitem_wrong_shape(m):
    return m.arange(8.0).reshape(2, 4)[_byte(m, [1, 0, 1])]


@program
def uint8_mask_setitem_tensor_value(m):
    x = m.tensor([10.0, 20.0, 30.0, 40.0])
    x[_byte(m, [1, 0, 1, 0])] = m.tensor([5.0, 6.0])
    return x


@program
def uint8_mask_setitem_with_another_index(m):
    x = m.zeros(4, 4)
    x[_byte(m, [1, 0, 1, 0]), [0, 1]] = 7.0
    return x


@pytest.mark.parametrize("key, value", [("mask", 0.0), ("mask", "0-d"), ("mask", "(1,)"),
                                        ("(mask,)", 0.0), ("(..., mask)", 0.0),
                                        ("short mask", 0.0)])
def test_uint8_mask_setitem_of_one_element(key, value):
    """PyTorch writes one element through one mask with masked_fill_, which refuses uint8."""
    def prog(m):
        x = m.tensor([10.0, 20.0, 30.0, 40.0])
        mask = _byte(m, [1, 0, 1] if key == "short mask" else [1, 0, 1, 0])
        k = {"(mask,)": (mask,), "(..., mask)": (Ellipsis, mask)}.get(key, mask)
        x[k] = {"0-d": m.tensor(0.0), "(1,)": m.tensor([0.0])}.get(value, value)
        return x
    assert _run(prog, tapegrad) == _run(prog, torch)


def test_uint8_key_warns_as_torch():
    for m in (torch, tapegrad):
        with pytest.warns(UserWarning, match="indexing with dtype torch.uint8 is now deprecated"):
            m.arange(4.0)[_byte(m, [1, 0, 1, 0])]


def _run(prog, m):
    """``prog(m)`` as plain Python with each tensor's shape, or ("error", its type, the
    start of its message)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return _shaped(prog(m))
    except Exception as e:         # noqa: BLE001 (the error is the answer to compare)
        return ("error", type(e).__name__, str(e)[:60])


def _shaped(r):
    if isinstance(r, (list, tuple)):
        return [_shaped(v) for v in r]
    if isinstance(r, (torch.Tensor, tapegrad.Tensor)):
        return (tuple(r.shape), str(r.dtype).split(".")[-1], np.round(plain(r), 12).tolist())
    return r


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_like_torch(name):
    assert _run(PROGRAMS[name], tapegrad) == _run(PROGRAMS[name], torch)


# -- 4. the legacy size_average / reduce loss arguments decide the reduction ------------------
LEGACY = [dict(size_average=False), dict(reduce=False), dict(size_average=True),
          dict(reduce=True), dict(size_average=False, reduce=False),
          dict(size_average=True, reduce=True), dict(size_average=False, reduction="none"),
          dict(size_average=None, reduce=None, reduction="sum")]


def _loss_call(m, name, legacy):
    """(the loss, functional and module) of a small batch, its gradient w.r.t. the input."""
    F, nn = m.nn.functional, m.nn
    x = m.tensor(np.arange(8.0).reshape(2, 4) / 7 - 0.3, requires_grad=True)
    t = m.tensor([1, 3])
    p = m.tensor(np.array([[0.0, 1, 1, 0], [1, 0, 0.5, 1]]))
    w = m.tensor([1.0, 2.0, 0.5, 1.0])
    call = {"cross_entropy": lambda: F.cross_entropy(x, t, w, **legacy),
            "nll_loss": lambda: F.nll_loss(F.log_softmax(x, 1), t, **legacy),
            "mse_loss": lambda: F.mse_loss(x, p, **legacy),
            "bce_with_logits": lambda: F.binary_cross_entropy_with_logits(x, p, **legacy),
            "CrossEntropyLoss": lambda: nn.CrossEntropyLoss(w, **legacy)(x, t),
            "MSELoss": lambda: nn.MSELoss(**legacy)(x, p),
            "BCEWithLogitsLoss": lambda: nn.BCEWithLogitsLoss(**legacy)(x, p)}[name]
    loss = call()
    loss.sum().backward()
    return [loss, x.grad]


@pytest.mark.parametrize("legacy", LEGACY, ids=lambda d: ",".join(f"{k}={v}" for k, v in
                                                                     d.items()))
@pytest.mark.parametrize("name", ["cross_entropy", "nll_loss", "mse_loss", "bce_with_logits",
                                  "CrossEntropyLoss", "MSELoss", "BCEWithLogitsLoss"])
def test_legacy_loss_arguments(name, legacy):
    assert _run(lambda m: _loss_call(m, name, legacy), tapegrad) == \
        _run(lambda m: _loss_call(m, name, legacy), torch)


@pytest.mark.parametrize("m", [torch, tapegrad], ids=["torch", "tapegrad"])
def test_legacy_loss_arguments_warn(m):
    x = m.zeros(2, 3)
    with pytest.warns(UserWarning, match=r"size_average and reduce args will be deprecated, "
                                         r"please use reduction='sum' instead\."):
        m.nn.functional.mse_loss(x, x, size_average=False)
    with pytest.warns(UserWarning, match=r"please use reduction='none' instead\."):
        m.nn.MSELoss(reduce=False)


# -- 5. split and chunk at their edges --------------------------------------------------------
@pytest.mark.parametrize("sizes", [[8, -1], [-1, 8], [-1, 9], [3, 4, 0], [0, 7], [3, 3], [],
                                   (3, 4)])
def test_split_with_sizes(sizes):
    def prog(m):
        x = m.arange(7.0, requires_grad=True)
        pieces = x.split(sizes)
        sum((k + 1) * (p * p).sum() for k, p in enumerate(pieces)).backward()
        return list(pieces) + [x.grad]
    assert _run(prog, tapegrad) == _run(prog, torch)


@pytest.mark.parametrize("sizes, shape, dim", [([], (0,), 0), ([], (2, 0), 1),
                                               ([3, 3], (3, 7), -1)])
def test_split_with_sizes_of_empty_or_wrapped_dims(sizes, shape, dim):
    def prog(m):
        return list(m.zeros(*shape).split(sizes, dim))
    assert _run(prog, tapegrad) == _run(prog, torch)


@pytest.mark.parametrize("n, chunks", [(0, 2), (0, 1), (0, 5), (1, 3), (5, 3), (6, 4), (7, 3),
                                       (2, 5), (10, 4), (4, 3)])
def test_chunk(n, chunks):
    def prog(m):
        x = m.ones(n, 3, requires_grad=True)
        pieces = x.chunk(chunks)
        sum((k + 1) * p.sum() for k, p in enumerate(pieces)).backward()
        return list(pieces) + [x.grad, pieces[0].grad_fn.name()]
    assert _run(prog, tapegrad) == _run(prog, torch)


def test_chunk_of_an_empty_inner_dim():
    def prog(m):
        return list(m.zeros(3, 0).chunk(2, 1)) + list(m.chunk(m.zeros(0, 3), 3))
    assert _run(prog, tapegrad) == _run(prog, torch)


def test_bare_grad_mode_decorators_and_flip_of_several_dims():
    """``@no_grad`` / ``@enable_grad`` without parentheses, and ``x.flip(0, 1)``, as
    PyTorch takes them."""
    out = []
    for m in (tapegrad, torch):
        x = m.ones(2, requires_grad=True, dtype=m.float64)

        @m.no_grad
        def off(v):
            return v * 2

        @m.enable_grad
        def on(v):
            return v * 2
        with m.no_grad():
            back_on = on(x).requires_grad
        y = m.arange(6.0, dtype=m.float64).reshape(2, 3)
        out.append([off(x).requires_grad, back_on, off.__name__, y.flip(0, 1).tolist(),
                    y.flip(1).tolist(), y.flip([0]).tolist()])
    assert out[0] == out[1]


def test_add_and_sub_take_alpha():
    """``add`` / ``sub`` / ``subtract`` with ``alpha``, as functions and methods: input op
    alpha * other, with its gradients (PyTorch fuses the product, one rounding fewer)."""
    out = []
    for m in (tapegrad, torch):
        a = m.tensor([1.0, -2.0, 0.3], requires_grad=True, dtype=m.float64)
        b = m.tensor([3.0, 5.0, -0.7], requires_grad=True, dtype=m.float64)
        ys = [m.add(a, b, alpha=2), m.sub(a, b, alpha=0.5), a.add(b, alpha=-3),
              a.sub(b, alpha=2), m.subtract(a, b, alpha=4), m.sub(a, 2.0, alpha=3),
              a.add(b)]
        sum(y.sum() for y in ys).backward()
        out.append([y.detach().numpy() for y in ys] + [a.grad.numpy(), b.grad.numpy()])
    for got, want in zip(*out):
        np.testing.assert_allclose(got, want, rtol=1e-15)

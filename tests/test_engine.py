"""The engine: backward, autograd.grad, accumulation, grad modes, tapes."""
import threading

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.autograd import grad


def test_seed_example():
    x = tg.tensor([2.0], requires_grad=True)
    y = x * 3
    z = y + 5
    assert z.grad_fn.name() == "AddBackward0"
    nf = z.grad_fn.next_functions
    assert nf[0][0].name() == "MulBackward0" and nf[0][1] == 0 and nf[1] == (None, 0)
    assert y.grad_fn.next_functions[0][0].variable is x
    z.backward()
    assert x.grad.tolist() == [3.0]


def test_gradients_accumulate_and_zero():
    x = tg.tensor(1.5, requires_grad=True)
    (x * x).backward()
    (x * x).backward()
    assert x.grad.item() == 6.0
    x.grad = None
    (x * 2.0).backward()
    assert x.grad.item() == 2.0


def test_grad_identity_kept_on_accumulation():
    x = tg.ones(3, requires_grad=True)
    (x * 2).sum().backward()
    g = x.grad
    (x * 3).sum().backward()
    assert x.grad is g and g.tolist() == [5.0, 5.0, 5.0]


def test_retain_graph_allows_second_backward():
    x = tg.tensor(2.0, requires_grad=True)
    y = x.exp() * x
    y.backward(retain_graph=True)
    first = x.grad.item()
    y.backward()
    assert x.grad.item() == pytest.approx(2 * first)


def test_backward_with_gradient_on_vector():
    x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * x
    y.backward(tg.tensor([1.0, 0.5, 0.0]))
    assert x.grad.tolist() == [2.0, 2.0, 0.0]


def test_autograd_grad_does_not_touch_dot_grad():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    w = tg.tensor([3.0, 4.0], requires_grad=True)
    y = (x * w).sum()
    gx, gw = grad(y, (x, w))
    assert gx.tolist() == [3.0, 4.0] and gw.tolist() == [1.0, 2.0]
    assert x.grad is None and w.grad is None


def test_autograd_grad_of_non_leaf_and_grad_outputs():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    h = x * 2
    y = h * h
    gh, = grad(y, h, grad_outputs=tg.tensor([1.0, 1.0]))
    assert gh.tolist() == [4.0, 8.0]


def test_allow_unused_returns_none():
    x = tg.tensor(1.0, requires_grad=True)
    u = tg.tensor(1.0, requires_grad=True)
    y = x * 2.0
    gx, gu = grad(y, (x, u), allow_unused=True)
    assert gx.item() == 2.0 and gu is None


def test_backward_inputs_restricts_accumulation():
    x = tg.tensor(1.0, requires_grad=True)
    w = tg.tensor(2.0, requires_grad=True)
    (x * w).backward(inputs=[w])
    assert w.grad.item() == 1.0 and x.grad is None


def test_retain_grad_on_non_leaf():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3
    h.retain_grad()
    (h * h).sum().backward()
    assert h.retains_grad and h.grad.tolist() == [6.0, 12.0]
    assert x.grad.tolist() == [18.0, 36.0]


def test_detach_cuts_the_graph():
    x = tg.tensor(2.0, requires_grad=True)
    y = (x * x).detach()
    assert not y.requires_grad and y.grad_fn is None and y.is_leaf
    z = x * y
    z.backward()
    assert x.grad.item() == 4.0


def test_requires_grad_propagation_and_int_tensors():
    x = tg.tensor([1.0, 2.0])
    w = tg.tensor([1.0, 2.0], requires_grad=True)
    assert not (x * 2).requires_grad
    assert (x * w).requires_grad and not (x * w).is_leaf
    i = tg.tensor([1, 2])
    assert i.dtype is tg.int64 and not (i * w).is_leaf
    assert not (w > 1.0).requires_grad and (w > 1.0).dtype is tg.bool


def test_no_grad_outputs_usable_later():
    x = tg.tensor(3.0, requires_grad=True)
    with tg.no_grad():
        y = x * 2.0
    assert not y.requires_grad and y.grad_fn is None
    z = x * y
    z.backward()
    assert x.grad.item() == 6.0


def test_grad_mode_decorators_and_set_grad_enabled():
    x = tg.tensor(1.0, requires_grad=True)

    @tg.no_grad()
    def f():
        return x * 2.0

    assert not f().requires_grad and tg.is_grad_enabled()
    with tg.set_grad_enabled(False):
        assert not tg.is_grad_enabled()
        with tg.enable_grad():
            assert (x * 2.0).requires_grad
    assert tg.is_grad_enabled()
    tg.set_grad_enabled(False)
    assert not tg.is_grad_enabled()
    tg.set_grad_enabled(True)


def test_inference_mode_tensors_cannot_be_saved():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    with tg.inference_mode():
        assert tg.is_inference_mode_enabled()
        y = x * 2
    assert not y.requires_grad
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
        x * y
    (x * y.clone()).sum().backward()
    assert x.grad.tolist() == [2.0, 4.0]


def test_grad_mode_is_per_thread():
    seen = []
    with tg.no_grad():
        th = threading.Thread(target=lambda: seen.append(tg.is_grad_enabled()))
        th.start()
        th.join()
    assert seen == [True]


def test_explicit_tape_scopes_recording():
    x = tg.tensor(1.0, requires_grad=True)
    with tg.Tape() as t:
        y = (x * 2.0).exp()
    assert y.tape is t and len(t) == 3      # leaf, mul, exp
    z = y * 3.0                             # recorded on the default tape, crosses tapes
    assert z.tape is not t
    z.backward()
    assert x.grad.item() == pytest.approx(6.0 * np.exp(2.0))


def test_graphs_across_tapes_in_both_orders():
    x = tg.tensor([0.5, 1.0], requires_grad=True)
    with tg.Tape():
        a = x * x
    with tg.Tape():
        b = a.sin()
    with tg.Tape():
        c = (b * a).sum()
    c.backward()
    xv = np.array([0.5, 1.0])
    expect = 2 * xv * (np.cos(xv**2) * xv**2 + np.sin(xv**2))
    np.testing.assert_allclose(x.grad.numpy(), expect)


def test_only_the_subgraph_of_the_output_is_swept():
    x = tg.tensor(1.0, requires_grad=True)
    w = tg.tensor(1.0, requires_grad=True)
    a = x * 2.0
    b = w * 3.0
    a.backward()
    assert x.grad.item() == 2.0 and w.grad is None
    b.backward()                             # b's graph was not consumed by a.backward()
    assert w.grad.item() == 3.0


def test_leaf_backward_and_float32():
    x = tg.tensor([1.0, 2.0], dtype=tg.float32, requires_grad=True)
    y = (x * x).sum()
    assert y.dtype is tg.float32
    y.backward()
    assert x.grad.dtype is tg.float32 and x.grad.tolist() == [2.0, 4.0]
    m = tg.ones(2, 3, dtype=tg.float32, requires_grad=True)
    out = (m @ tg.ones(3, 4, dtype=tg.float32)).tanh().mean()
    assert out.dtype is tg.float32
    out.backward()
    assert m.grad.dtype is tg.float32


def test_mixed_dtypes_promote_like_pytorch():
    f32 = tg.ones(2, dtype=tg.float32)
    f64 = tg.ones(2)
    assert (f32 + f64).dtype is tg.float64
    assert (f32 + 1.5).dtype is tg.float32
    assert (f32 + tg.tensor(1.5)).dtype is tg.float32   # a 0-d tensor does not promote
    assert (tg.tensor([1, 2]) * 1.5).dtype is tg.float64
    assert (tg.tensor([1, 2]) + 1).dtype is tg.int64


def test_iteration_len_item_tolist():
    m = tg.arange(6.0).reshape(2, 3)
    rows = list(m)
    assert len(m) == 2 and rows[1].tolist() == [3.0, 4.0, 5.0]
    assert tg.tensor(2.5).item() == 2.5 and m.tolist()[0] == [0.0, 1.0, 2.0]
    assert m.shape == (2, 3) and m.size(1) == 3 and m.numel() == 6 and m.ndim == 2
    assert repr(tg.Size([2, 3])) == "tapegrad.Size([2, 3])"


def test_factories():
    tg.manual_seed(0)
    a = tg.randn(3, 4)
    tg.manual_seed(0)
    assert tg.randn(3, 4).tolist() == a.tolist()
    assert tg.zeros(2, 2).sum().item() == 0 and tg.ones((2, 3)).shape == (2, 3)
    assert tg.full((2,), 7.0).tolist() == [7.0, 7.0] and tg.eye(2).tolist() == [[1, 0], [0, 1]]
    assert tg.linspace(0, 1, 5).tolist() == [0, 0.25, 0.5, 0.75, 1.0]
    assert tg.arange(3).dtype is tg.int64 and tg.arange(3.0).dtype is tg.float64
    assert tg.zeros_like(a).shape == a.shape and tg.ones_like(a, dtype=tg.float32).dtype is tg.float32
    z = tg.from_numpy(np.arange(3, dtype=np.float32))
    assert z.dtype is tg.float32
    r = tg.rand(100)
    assert 0 <= r.min().item() and r.max().item() < 1


def test_default_dtype_switch():
    tg.set_default_dtype(tg.float32)
    try:
        assert tg.tensor([1.0]).dtype is tg.float32 and tg.zeros(2).dtype is tg.float32
    finally:
        tg.set_default_dtype(tg.float64)
    assert tg.tensor([1.0]).dtype is tg.float64


def test_indexing_variants_match_numpy():
    a = np.arange(24.0).reshape(2, 3, 4)
    t = tg.tensor(a)
    for key in (1, (0, 2), (slice(None), 1), (Ellipsis, 2), (None, 1), ([1, 0],),
                (slice(None), [0, 2], 1), (a > 10,), (1, slice(1, 3), slice(None, None, 2))):
        np.testing.assert_array_equal(t[key].numpy(), a[key])
    x = tg.tensor(a, requires_grad=True)
    x[:, [0, 0, 2], 1:3].sum().backward()
    expect = np.zeros_like(a)
    np.add.at(expect, (slice(None), [0, 0, 2], slice(1, 3)), 1.0)
    np.testing.assert_array_equal(x.grad.numpy(), expect)


@pytest.mark.parametrize("shapes", [((64, 128), (128, 96)), ((3, 40, 50), (3, 50, 30)),
                                    ((200, 200), None)], ids=["mm", "bmm", "x@x"])
def test_large_products_go_through_blas_and_agree(shapes, monkeypatch):
    """Products past HOST_MIN_MACS are host entries (BLAS between two compiled sweeps);
    they must give the in-kernel loops' gradients."""
    from tapegrad.autograd import engine
    rng = np.random.default_rng(3)
    a0 = rng.standard_normal(shapes[0])
    b0 = a0 if shapes[1] is None else rng.standard_normal(shapes[1])

    def grads(host_min):
        monkeypatch.setattr(engine, "HOST_MIN_MACS", host_min)
        a = tg.tensor(a0, requires_grad=True)
        b = a if shapes[1] is None else tg.tensor(b0, requires_grad=True)
        ((a @ b).tanh() * 0.5).sum().backward()
        return [a.grad.numpy()] + ([] if shapes[1] is None else [b.grad.numpy()])

    host, loops = grads(1), grads(1 << 62)
    for h, k in zip(host, loops):
        np.testing.assert_allclose(h, k, rtol=1e-10, atol=1e-10)


def test_saved_values_and_metadata_on_nodes():
    x = tg.tensor([1.5, 2.0], requires_grad=True)
    w = tg.tensor([3.0, 4.0], requires_grad=True)
    y = x * w
    assert y.grad_fn._saved_self.tolist() == [1.5, 2.0]
    assert y.grad_fn._saved_other.tolist() == [3.0, 4.0]
    z = x.exp()
    np.testing.assert_allclose(z.grad_fn._saved_result.numpy(), np.exp([1.5, 2.0]))
    with pytest.raises(AttributeError):
        (x + w).grad_fn._saved_self                  # add saves nothing
    y.grad_fn.metadata["note"] = "kept"
    assert y.grad_fn.metadata == {"note": "kept"}    # the view is cached per entry
    assert y.grad_fn is y.grad_fn


def test_each_thread_records_on_its_own_tape():
    seen = []

    def work():
        a = tg.tensor(1.0, requires_grad=True)
        b = a * 2.0
        seen.append(b.tape)
        b.backward()
        seen.append(a.grad.item())

    main = (tg.tensor(1.0, requires_grad=True) * 3.0).tape
    th = threading.Thread(target=work)
    th.start()
    th.join()
    assert seen[0] is not main and seen[1] == 2.0


def test_indexing_zero_d_and_whole_tensors():
    s = tg.tensor(2.0, requires_grad=True)
    assert s[None].shape == (1,) and s[...].shape == () and s[None, ...].shape == (1,)
    (s[...] * 3).backward()
    assert s.grad.item() == 3.0
    with pytest.raises(IndexError, match="invalid index of a 0-dim tensor"):
        s[0]
    v = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = v[:]
    assert w is not v and w.tolist() == [1.0, 2.0, 3.0]
    (w * w).sum().backward()
    assert v.grad.tolist() == [2.0, 4.0, 6.0]


def test_eight_threads_record_and_accumulate_into_a_shared_leaf():
    w = tg.tensor([0.5, -1.0, 2.0], requires_grad=True)
    s = tg.tensor(0.25, requires_grad=True)
    rounds, errors = 40, []

    def work(k):
        try:
            for _ in range(rounds):
                v = tg.tensor([1.0, 2.0, 3.0]) * (k + 1)
                loss = ((w * v).tanh().sum() + s * float(k)) * 1.0
                loss.backward()
        except Exception as e:   # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    wv = np.array([0.5, -1.0, 2.0])
    expect = sum(rounds * (1 - np.tanh(wv * np.array([1.0, 2.0, 3.0]) * (k + 1)) ** 2)
                 * np.array([1.0, 2.0, 3.0]) * (k + 1) for k in range(8))
    np.testing.assert_allclose(w.grad.numpy(), expect)
    assert s.grad.item() == pytest.approx(rounds * sum(range(8)))


def test_deepcopy_of_a_used_leaf_is_a_fresh_leaf(both):
    import copy

    def program(m):
        x = m.tensor([1.0, 2.0], requires_grad=True)
        (x * 5).sum().backward()
        c = copy.deepcopy(x)            # x has been used on a tape: c must not alias it
        (3 * c).sum().backward()
        assert c.is_leaf and c.requires_grad
        return c.grad.tolist(), x.grad.tolist()
    torch_out, tg_out = both(program)
    assert torch_out == tg_out == ([8.0, 8.0], [5.0, 5.0])


def test_deepcopy_of_a_non_leaf_is_refused(both):
    import copy

    def program(m):
        y = m.tensor([1.0], requires_grad=True) * 2
        with pytest.raises(RuntimeError, match="Only Tensors created explicitly by the user"):
            copy.deepcopy(y)
    both(program)


def test_all_and_any_match_pytorch(both):
    def program(m):
        a = m.tensor([[1.0, 0.0], [2.0, 3.0]])
        return [a.all().item(), a.any().item(), a.all(1).tolist(), m.any(a, 0).tolist(),
                a.all(dim=1, keepdim=True).tolist()]
    torch_out, tg_out = both(program)
    assert torch_out == tg_out


def test_a_constant_made_to_require_grad_after_its_use_gets_no_gradient(both):
    """Its entry is a constant's: no gradient reaches the tensor (it got one, unzeroed
    memory for an array, before the engine delivered leaf entries only)."""
    def program(m):
        out = []
        for shape in [(), (3,)]:
            w = m.ones(shape, dtype=m.float32, requires_grad=True)
            c = m.ones(shape, dtype=m.float32) * 2
            y = (c * w * 3).sum()
            c.requires_grad_()
            y.backward()
            out.append((c.grad, w.grad.tolist()))
        return out
    torch_out, tg_out = both(program)
    assert torch_out == tg_out == [(None, 6.0), (None, [6.0, 6.0, 6.0])]


@pytest.mark.parametrize("create_graph", [False, True])
def test_a_leaf_given_a_history_in_place_after_its_use_raises_pytorchs_error(
        both, create_graph):
    def program(m):
        x = m.ones(2, requires_grad=True)
        y = (x * 3).sum()
        x.requires_grad_(False)
        x.mul_(m.ones(2, requires_grad=True))
        with pytest.raises(RuntimeError, match="leaf variable has been moved into the graph "
                                               "interior"):
            y.backward(create_graph=create_graph)
    both(program)


def test_a_tensor_detached_in_place_after_its_use_on_another_tape_passes_gradients_on(both):
    """An external entry goes on to the entry it stood for when it was recorded
    (``tape.foreign``), as PyTorch's graph keeps the edge to the old ``grad_fn`` (the
    backward delivered nothing, ``next_functions`` raised, before)."""
    import contextlib

    def program(m):
        x = m.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2
        with m.Tape() if m is tg else contextlib.nullcontext():
            z = (y * 3).sum()
        y.detach_()
        nodes = [n and n.name() for n, _ in z.grad_fn.next_functions[0][0].next_functions]
        z.backward()
        return nodes, x.grad.tolist()
    torch_out, tg_out = both(program)
    assert torch_out == tg_out == (["MulBackward0", None], [6.0, 6.0])

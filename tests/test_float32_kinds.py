"""float32 stays float32, kind by kind (elementwise, reductions, products, gathers,
indexing, concatenation, where, softmax, broadcasting, pieces), at 7, 1,000 and 5,000
elements: the result, its values' NumPy dtype and every ``.grad`` are float32, the values
and gradients equal PyTorch's float32 ones (rtol 1e-5), eagerly and replayed; optimizer
state is float32 as PyTorch's."""
import numpy as np
import pytest
import torch

import tapegrad as tg

KINDS = {
    "elementwise": lambda m, x, w: (m.sin(x) * 2 + m.exp(x) - x.tanh()).sum(),
    "reduce": lambda m, x, w: m.amax(x, 1).sum() + x.mean() + (x[:, :3] * 0.5 + 1).prod(),
    "matmul": lambda m, x, w: (x @ w).sum() + (x.t() @ x).sum() * 1e-3,
    "gather": lambda m, x, w: x[1:, ::2].sum() + x.t().reshape(-1)[3],
    "index": lambda m, x, w: x[[0, -1, -1]].sum(),
    "cat": lambda m, x, w: m.cat([x, x * 2], 0).sum() + m.stack([x, x]).sum(),
    "where": lambda m, x, w: m.where(x > 0, x, -x).sum(),
    "softmax": lambda m, x, w: m.softmax(x, 1)[:, 0].sum() + m.logsumexp(x, 1).sum(),
    "broadcast": lambda m, x, w: ((x + w) ** 2).sum(),
    "pieces": lambda m, x, w: builtins_sum(r.sum() * (k + 1) for k, r in enumerate(x.unbind())),
}
builtins_sum = sum


def _run(m, kind, n):
    cols = {7: 7, 1000: 100, 5000: 500}[n]
    r = np.random.RandomState(n)
    x = m.tensor(r.uniform(-1, 1, (n // cols, cols)).astype(np.float32), requires_grad=True)
    w = m.tensor(r.uniform(0.5, 1.5, cols).astype(np.float32), requires_grad=True)
    y = KINDS[kind](m, x, w)
    y.backward()
    return y, x, w


@pytest.mark.parametrize("n", [7, 1000, 5000])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_float32_kind_stays_float32_and_matches_pytorch(kind, n):
    y, x, w = _run(tg, kind, n)
    yt, xt, wt = _run(torch, kind, n)
    assert y.dtype is tg.float32 and y.detach().numpy().dtype == np.float32
    np.testing.assert_allclose(y.item(), yt.item(), rtol=1e-5, atol=1e-5)
    for a, b in ((x, xt), (w, wt)):
        if b.grad is None:
            assert a.grad is None
            continue
        assert a.grad.dtype is tg.float32 and a.grad.numpy().dtype == np.float32
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_float32_kind_replayed(kind):
    y, x, w = _run(tg, kind, 1000)
    x0 = x.detach()
    traced = tg.trace(lambda v: KINDS[kind](tg, v, w.detach()), x0 * 0.5)
    value, grad = traced.value_and_grad(x0)
    assert value.dtype is tg.float32 and grad.dtype is tg.float32
    np.testing.assert_allclose(value.item(), y.item(), rtol=1e-6)
    np.testing.assert_allclose(grad.numpy(), x.grad.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW"])
def test_optimizer_state_dtypes_are_pytorchs(name, torch_float64):
    states = {}
    for m in (tg, torch):
        p = m.tensor(np.linspace(-1, 1, 6).astype(np.float32), requires_grad=True)
        kw = {"momentum": 0.9} if name == "SGD" else {}
        opt = getattr(m.optim, name)([p], lr=0.1, **kw)
        for _ in range(2):
            opt.zero_grad()
            (p * p).sum().backward()
            opt.step()
        states[m] = (str(p.dtype).split(".")[-1], p.detach().numpy().copy(),
                     {k: str(v.dtype).split(".")[-1] for k, v in opt.state[p].items()
                      if hasattr(v, "dtype")})
    (pd, pv, sd), (td, tv, tsd) = states[tg], states[torch]
    assert pd == td == "float32" and sd == tsd
    np.testing.assert_allclose(pv, tv, rtol=1e-6, atol=1e-7)


def test_a_traced_function_sees_its_arguments_dtypes(tmp_path):
    """Traced, a float32 argument is float32 inside the function (a product with a
    float32 matrix works, as eagerly; it was traced as float64 and raised PyTorch's
    mixed-dtype error), and the outputs keep the eager dtypes, saved and loaded too."""
    w = tg.tensor(np.ones((3, 2), np.float32))
    x0 = tg.tensor(np.linspace(-1, 1, 6).astype(np.float32).reshape(2, 3))

    def f(v):
        return v @ w, (v > 0).sum()

    traced = tg.trace(f, x0)
    path = tmp_path / "f32.npz"
    traced.save(path)
    for tr in (traced, tg.load(path)):
        prod, count = tr(x0 * 2)
        eager = f(x0 * 2)
        assert prod.dtype is tg.float32 and count.dtype is tg.int64
        np.testing.assert_allclose(prod.numpy(), eager[0].numpy(), rtol=1e-6)
        assert count.item() == eager[1].item()

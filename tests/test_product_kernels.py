"""The compiled sweep's matrix-product rules (``kernels.matmul``) at shapes that take
each of their loop branches: a row of outputs vectorised or four dot products at a
time, y read in place transposed or not, dims below and above the vector width, and
the remainders of four.  Gradients against PyTorch; replayed values and gradients bit
for bit against eager, and against the compiled tape for small ones."""
import numpy as np
import pytest

import tapegrad as tg
from tapegrad.autograd.engine import HOST_MIN_MACS
from tapegrad.replay import trace

from replay_checks import assert_replays_eager

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(11)
# (batch, M, K, N): K and N at 1, 3 (below four), 5 / 7 (four and a remainder), 8 and 16;
# M above and below N and K (dot products along M or along N / K)
SHAPES = [(1, 6, 1, 16), (1, 6, 16, 1), (1, 5, 3, 7), (1, 4, 8, 8), (1, 64, 16, 16),
          (2, 3, 5, 9), (3, 7, 16, 5), (1, 9, 7, 3), (1, 64, 256, 1), (1, 2, 9, 3),
          (1, 1, 12, 9), (1, 11, 2, 2)]
# y as stored (matmul, batched too) and read in place transposed (linear: one weight)
CASES = [(s, False) for s in SHAPES] + [(s, True) for s in SHAPES if s[0] == 1]
IDS = ["x".join(map(str, s)) + ("-T" if t else "") for s, t in CASES]


def _loss(m, x, w, transposed):
    y = m.nn.functional.linear(x, w) if transposed else m.matmul(x, w)
    return (m.tanh(y) * m.arange(y.numel(), dtype=y.dtype).reshape(y.shape)).sum()


def _operands(b, M, K, N, transposed):
    xs = (b, M, K) if b > 1 else (M, K)
    if transposed:
        return RNG.normal(size=(M, K)), RNG.normal(size=(N, K))
    return RNG.normal(size=xs), RNG.normal(size=(b, K, N) if b > 1 else (K, N))


@pytest.mark.parametrize("shape,transposed", CASES, ids=IDS)
def test_product_gradients_match_pytorch(shape, transposed):
    b, M, K, N = shape
    x, w = _operands(b, M, K, N, transposed)
    assert b * M * K * N < HOST_MIN_MACS          # the compiled sweep's rules, not BLAS
    grads = []
    for m in (tg, torch):
        xs, ws = (m.tensor(a, dtype=m.float64, requires_grad=True) for a in (x, w))
        _loss(m, xs, ws, transposed).backward()
        grads.append([xs.grad.numpy(), ws.grad.numpy()])
    for ours, theirs in zip(*grads):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape,transposed", CASES, ids=IDS)
def test_replayed_products_are_eager_bit_for_bit(shape, transposed):
    b, M, K, N = shape
    traced = trace(lambda x, w: _loss(tg, x, w, transposed),
                   *(tg.tensor(a) for a in _operands(b, M, K, N, transposed)), compile_after=None)
    small = M * K * N * b <= 200
    if small:
        traced.compile()
    assert_replays_eager(traced, lambda x, w: _loss(tg, x, w, transposed),
                         [list(_operands(b, M, K, N, transposed)) for _ in range(2)])

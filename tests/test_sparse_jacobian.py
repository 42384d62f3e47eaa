"""Sparse Jacobians and Hessians (``sparse=True``), their patterns and colorings.

Values are checked against PyTorch's dense ``jacobian`` / ``hessian`` (within 1e-12),
patterns against the nonzeros of PyTorch's dense matrices at random inputs (where no
derivative vanishes by accident), and colorings against the definitions they must meet.
"""
import numpy as np
import pytest

import tapegrad as tg
import torch
from tapegrad.autograd import functional as F
from tapegrad.autograd import sparse as S

sp = pytest.importorskip("scipy.sparse")      # (in the test extra: CI always has it)
RNG = np.random.default_rng(20)


def _dense_torch(fn, x, hessian=False):
    f = (lambda z: fn(torch, z))
    J = (torch.autograd.functional.hessian if hessian else torch.autograd.functional.jacobian)(
        f, torch.tensor(x))
    return J.numpy().reshape(-1, x.size)


def _check(fn, x, hessian=False, exact_pattern=True):
    ours = (F.hessian if hessian else F.jacobian)(lambda z: fn(tg, z), tg.tensor(x), sparse=True)
    assert isinstance(ours, sp.csr_array)
    dense = _dense_torch(fn, x, hessian)
    np.testing.assert_allclose(ours.toarray(), dense, rtol=1e-12, atol=1e-12)
    pattern = ours.toarray() != 0 if hessian else \
        tg.sparsity(lambda z: fn(tg, z), tg.tensor(x)).toarray()
    assert not (np.abs(dense) > 0)[~pattern].any()          # never misses a nonzero
    if exact_pattern:
        assert (pattern == (dense != 0)).all()
    return ours


# -- the patterns of the issue: banded, block, arrow ------------------------------------------
def banded(m, u):
    """A 1-D finite-difference residual (tridiagonal), boundary rows the identity."""
    lap = u[:-2] - 2 * u[1:-1] + u[2:]
    return m.cat([u[:1], lap + u[1:-1] ** 3 - 1.0, u[-1:] * 2])


def banded_2d(m, u):
    k = int(round(u.shape[0] ** 0.5))
    U = u.reshape(k, k)
    lap = U[:-2, 1:-1] + U[2:, 1:-1] + U[1:-1, :-2] + U[1:-1, 2:] - 4 * U[1:-1, 1:-1]
    return (lap + m.exp(U[1:-1, 1:-1]) * 0.1).reshape(-1)


def block(m, u):
    """Blocks of 4 mixed by small products and softmaxes (block diagonal)."""
    B = u.reshape(-1, 4)
    W = m.tensor(np.arange(16.0).reshape(4, 4) / 10 + 0.5)
    return (m.softmax(B @ W, 1) + m.tanh(B)).reshape(-1)


def arrow(m, u):
    """Every output reads u[0]; otherwise elementwise."""
    return m.sin(u) * u[0] + u ** 2


@pytest.mark.parametrize("fn,n", [(banded, 9), (banded, 200), (banded_2d, 36), (block, 24),
                                  (arrow, 30)], ids=lambda v: getattr(v, "__name__", str(v)))
def test_jacobian_patterns_match_pytorch(fn, n):
    _check(fn, RNG.uniform(0.5, 1.5, n))


def test_banded_takes_three_sweeps_and_an_arrow_two():
    x = tg.tensor(RNG.uniform(0.5, 1.5, 300), requires_grad=True)
    with tg.Tape() as t:
        y = banded(tg, x)
    plan = S.Plan(S.pattern(t, [y._i], [x._i]))
    assert plan.colors == 3
    with tg.Tape() as t:
        y = arrow(tg, x)
    plan = S.Plan(S.pattern(t, [y._i], [x._i]))
    assert plan.colors == 2       # column 0 alone, the diagonal together


def hess_banded(m, u):
    return ((u[1:] - u[:-1]) ** 2).sum() + (u ** 4).sum()


def hess_arrow(m, u):
    return (u ** 3).sum() + u[0] * (u * u).sum()


def hess_block(m, u):
    B = u.reshape(-1, 3)
    return m.logsumexp(B, 1).sum() + (B.prod(1)).sum()


@pytest.mark.parametrize("fn,n", [(hess_banded, 40), (hess_arrow, 40), (hess_block, 30)],
                         ids=lambda v: getattr(v, "__name__", str(v)))
def test_hessian_patterns_match_pytorch(fn, n):
    _check(fn, RNG.uniform(0.5, 1.5, n), hessian=True)


def test_an_arrow_hessian_takes_a_few_colors_not_n():
    """A column coloring of an arrow pattern needs n colors (the dense row ties every
    column to every other); a star coloring, with each nonzero read from its other
    side, needs 2 for the arrow plus what the diagonal's neighbors need."""
    n = 60
    H = F.hessian(lambda z: hess_arrow(tg, z), tg.tensor(RNG.uniform(0.5, 1.5, n)),
                  sparse=True)
    P = sp.csr_array(H.toarray() != 0)
    assert S.column_colors(P).max() + 1 == n
    assert S.star_colors(P).max() + 1 == 2


# -- random sparse programs ----------------------------------------------------------------
def _program(seed):
    """A random program over a vector of 12: slices, index gathers, cat, where, small
    reductions, products and elementwise ops, each step reading one or two earlier
    values of the same length."""
    r = np.random.default_rng(seed)
    steps = []
    for _ in range(8):
        kind = r.integers(7)
        a, b = r.integers(0, 1 + len(steps), 2)
        steps.append((kind, int(a), int(b), r.permutation(12)[:int(r.integers(2, 12))],
                      int(r.integers(1, 11))))

    def fn(m, x):
        vals = [x]
        for kind, a, b, idx, k in steps:
            u, v = vals[a], vals[b]
            if kind == 0:
                w = m.sin(u) * v + 0.5
            elif kind == 1:                          # a shifted copy
                w = m.cat([u[k:], v[:k]])
            elif kind == 2:                          # a gather of some elements
                z = u[m.tensor(idx)] if m is torch else u[tg.tensor(idx)]
                w = m.cat([z, v[idx.size:]]) if idx.size < 12 else z
            elif kind == 3:                          # sums of pairs, spread back
                w = u.reshape(6, 2).sum(1).repeat_interleave(2) * v
            elif kind == 4:
                w = m.where(m.tensor(np.arange(12) % 3 == 0), m.exp(u), v * v)
            elif kind == 5:                          # 3x3 mixing of blocks of 3
                W = m.tensor(np.eye(3) + 0.25)
                w = (u.reshape(4, 3) @ W).reshape(-1) + m.tanh(v)
            else:
                w = m.softmax(u.reshape(3, 4), 1).reshape(-1) * v
            vals.append(w)
        return vals[-1] + vals[len(vals) // 2]
    return fn


@pytest.mark.parametrize("seed", range(12))
def test_random_sparse_programs_match_pytorch(seed):
    _check(_program(seed), RNG.uniform(0.5, 1.5, 12))


@pytest.mark.parametrize("seed", range(4))
def test_random_programs_hessian(seed):
    prog = _program(100 + seed)
    _check(lambda m, x: (prog(m, x) ** 2).sum(), RNG.uniform(0.5, 1.5, 12), hessian=True,
           exact_pattern=False)


def test_a_derivative_zero_at_this_point_stays_in_the_pattern():
    """relu's derivative vanishes at negative inputs, but another input makes it
    nonzero: the pattern keeps it (the same at every input), the values stay right."""
    x = np.array([-1.0, 2.0, -3.0, 4.0])
    P = tg.sparsity(lambda z: tg.relu(z) * z[0], tg.tensor(x)).toarray()
    assert (P == (np.eye(4, dtype=bool) | (np.arange(4) == 0))).all()
    _check(lambda m, z: m.relu(z) * z[0], x, exact_pattern=False)


# -- API --------------------------------------------------------------------------------------
def test_tuples_nest_as_pytorch_and_dtypes_stay():
    def fn(m, a, b):
        return a * b[:3].sum(), m.cat([a, b]).sin()
    a, b = RNG.uniform(0.5, 1.5, 3), RNG.uniform(0.5, 1.5, 5)
    ours = F.jacobian(lambda *z: fn(tg, *z), (tg.tensor(a), tg.tensor(b)), sparse=True)
    theirs = torch.autograd.functional.jacobian(lambda *z: fn(torch, *z),
                                                (torch.tensor(a), torch.tensor(b)))
    for ro, rt in zip(ours, theirs):
        for o, t in zip(ro, rt):
            np.testing.assert_allclose(o.toarray(), t.numpy().reshape(o.shape), rtol=1e-12)
    J32 = F.jacobian(lambda z: z.sin(), tg.tensor(a, dtype=tg.float32), sparse=True)
    assert J32.dtype == np.float32


def test_an_unused_input_gives_an_empty_block():
    a, b = tg.tensor([1.0, 2.0]), tg.tensor([3.0])
    Ja, Jb = F.jacobian(lambda x, y: x * 2, (a, b), sparse=True)
    assert Ja.toarray().tolist() == [[2.0, 0.0], [0.0, 2.0]]
    assert Jb.shape == (2, 1) and Jb.nnz == 0


def test_sparse_refuses_create_graph_and_custom_functions():
    with pytest.raises(ValueError, match="create_graph"):
        F.jacobian(lambda z: z * 2, tg.tensor([1.0]), create_graph=True, sparse=True)

    class Twice(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    with pytest.raises(NotImplementedError, match="custom autograd.Function"):
        F.jacobian(lambda z: Twice.apply(z), tg.tensor([1.0, 2.0]), sparse=True)


def test_without_scipy_the_error_says_how_to_get_it(monkeypatch):
    import builtins
    real = builtins.__import__

    def no_scipy(name, *args, **kw):
        if name.startswith("scipy"):
            raise ImportError("no scipy here")
        return real(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", no_scipy)
    with pytest.raises(ImportError, match=r"tapegrad\[sparse\]"):
        F.jacobian(lambda z: z * 2, tg.tensor([1.0, 2.0]), sparse=True)


# -- replays: the pattern and coloring kept per recording, guards as everywhere -----------
def branchy(m, u):
    if u.sum() > 0:                    # a guard: two recordings, two patterns
        return banded(m, u)
    return arrow(m, u)


def test_traced_sparse_jacobian_reuses_its_plan_and_follows_the_guards():
    x = RNG.uniform(0.5, 1.5, 20)
    traced = tg.trace(lambda z: branchy(tg, z), tg.tensor(x))
    for sign in (1, 1, -1, -1, 1):
        z = sign * RNG.uniform(0.5, 1.5, 20)
        J = traced.jacobian(tg.tensor(z), sparse=True)
        np.testing.assert_allclose(J.toarray(), _dense_torch(branchy, z), rtol=1e-12,
                                   atol=1e-12)
        np.testing.assert_allclose(traced.jacobian(tg.tensor(z)).numpy(),
                                   _dense_torch(branchy, z), rtol=1e-12, atol=1e-12)
    assert len(traced.records) == 2
    assert all(set(r.sparse_plans) == {False} for r in traced.records)


def test_traced_sparse_hessian_matches_pytorch():
    traced = tg.trace(lambda z: hess_arrow(tg, z), tg.tensor(RNG.uniform(0.5, 1.5, 25)))
    for _ in range(3):
        z = RNG.uniform(-1.5, 1.5, 25)
        H = traced.hessian(tg.tensor(z), sparse=True)
        np.testing.assert_allclose(H.toarray(), _dense_torch(hess_arrow, z, hessian=True),
                                   rtol=1e-12, atol=1e-12)
    assert traced.second[0].sparse_plans[True].colors == 2


# -- the colorings against their definitions --------------------------------------------------
def _random_symmetric(n, density, seed):
    r = np.random.default_rng(seed)
    A = r.random((n, n)) < density
    A = A | A.T
    np.fill_diagonal(A, True)
    return sp.csr_array(A)


@pytest.mark.parametrize("seed", range(6))
def test_star_coloring_is_a_star_coloring(seed):
    P = _random_symmetric(40, 0.08, seed)
    color = S.star_colors(P)
    A = P.toarray()
    np.fill_diagonal(A, False)
    assert not (A & (color[:, None] == color[None, :])).any()             # proper
    nbr = [np.flatnonzero(A[v]) for v in range(40)]
    for a in range(40):        # no path a - b - c - d on two colors
        for b in nbr[a]:
            for c in nbr[b]:
                if c == a or color[c] != color[a]:
                    continue
                for d in nbr[c]:
                    assert not (d != b and color[d] == color[b]), (a, b, c, d)


@pytest.mark.parametrize("seed", range(6))
def test_column_coloring_separates_columns_sharing_a_row(seed):
    r = np.random.default_rng(seed)
    P = sp.csr_array(r.random((30, 50)) < 0.1)
    color = S.column_colors(P)
    A = P.toarray()
    for row in A:
        cols = np.flatnonzero(row)
        assert len(set(color[cols].tolist())) == cols.size

"""The array kernels (issue: vector speed at scale): libmvec's vector math and its
accuracy table, the generated block rules, fused reverse runs against the per-entry
sweep, parallel against serial kernels, large results written into the tape's arena,
the reused adjoint arena, and float32 kept float32."""
import math
import os
import threading

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.autograd import engine
from tapegrad.kernels import fused, generated_blocks, vmath
from tapegrad.ops.table import CODE, EW_OPS
from test_op_table import ROUNDING

N = 3 * fused.FUSE_MIN + 17          # large enough for the fused kernels, a ragged last block
# max ulp error of libmvec (glibc documents 4) over each function's sweep; libm's scalar
# functions, where there is no libmvec, are within these too
ULP_BOUNDS = {"exp": 4, "log": 4, "log1p": 4, "expm1": 4, "sin": 4, "cos": 4, "tan": 4,
              "tanh": 4, "erf": 4}
SWEEPS = {"exp": (-700, 700), "log": (1e-300, 1e300), "log1p": (-0.999, 1e10),
          "expm1": (-50, 700), "sin": (-1e4, 1e4), "cos": (-1e4, 1e4), "tan": (-1.5, 1.5),
          "tanh": (-30, 30), "erf": (-7, 7)}


def _ulps(got, want):
    want = np.asarray(want, np.float64)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    with np.errstate(invalid="ignore"):
        err = np.abs(got - want) / np.spacing(np.maximum(np.abs(want), np.finfo(float).tiny))
    return float(np.max(np.where(same, 0.0, err)))


def _reference(name, x):
    if name == "erf":
        return np.array([math.erf(v) for v in x])
    return getattr(np, name)(x)


@pytest.mark.parametrize("name", vmath.FUNCTIONS)
def test_vector_math_accuracy_table(name):
    """The accuracy table: max ulp error against NumPy (libm) over a sweep of inputs."""
    lo, hi = SWEEPS[name]
    x = np.concatenate([np.linspace(lo, hi, 100_003),
                        np.random.RandomState(0).uniform(lo, hi, 50_000)])
    if lo > 0:
        x = np.geomspace(lo, hi, 150_003)
    out = np.empty_like(x)
    getattr(generated_blocks, f"v_{name}")(x, 0, out, 0, x.size)
    assert _ulps(out, _reference(name, x)) <= ULP_BOUNDS[name]


@pytest.mark.parametrize("name", vmath.FUNCTIONS)
def test_vector_math_special_values(name):
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-310, 1e300, -1e300, 0.5] * 3)
    out = np.empty_like(x)
    with np.errstate(all="ignore"):
        getattr(generated_blocks, f"v_{name}")(x, 0, out, 0, x.size)
        want = _reference(name, x)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(want))
    assert _ulps(out, want) <= ULP_BOUNDS[name]


def _function(m, op):
    """The op's function in tapegrad or PyTorch (m): its name, or div's rounding mode."""
    if op.name in ROUNDING:
        return lambda x, y: m.div(x, y, rounding_mode=ROUNDING[op.name])
    return next(getattr(ns, op.name) for ns in (m, m.nn.functional, m.special)
                if hasattr(ns, op.name))


def _operands(op, n, seed=0):
    r = np.random.RandomState(seed)
    lo, hi = op.domain
    x = r.uniform(lo, hi, n)
    y = r.uniform(*op.domain_y, n)
    return x, y


@pytest.mark.parametrize("op", EW_OPS, ids=lambda op: op.name)
def test_large_forward_matches_small_path(op):
    """A large float64 op (block kernels, written into the arena) against the same op
    on small pieces (NumPy / the scalar rules): exact for exact ops, within the vector
    math's bounds otherwise."""
    x, y = _operands(op, N)
    X = tg.tensor(x, requires_grad=True)
    args = (X, tg.tensor(y)) if op.arity == 2 else (X,)
    kwargs = {}
    if op.name == "clamp":
        args, kwargs = (X,), {"min": -0.5, "max": 0.7}
    big = _function(tg, op)(*args, **kwargs).detach().numpy()
    pieces = []
    for s in range(0, N, 1000):
        a = [tg.tensor(v.detach().numpy()[s:s + 1000]) for v in args]
        pieces.append(_function(tg, op)(*a, **kwargs).numpy())
    small = np.concatenate(pieces)
    if op.name == "sign" or not any(f"math.{f}" in op.fwd or "sm." in op.fwd
                                    for f in vmath.FUNCTIONS):
        np.testing.assert_array_equal(big, small)
    else:
        assert _ulps(big, small) <= 8   # two roundings of at most 4 ulp each


@pytest.mark.parametrize("n", [7, fused.FUSE_MIN, 5 * fused.BLOCK + 3, 70_000])
@pytest.mark.parametrize("op", EW_OPS, ids=lambda op: op.name)
def test_float32_op_is_the_float64_rule_rounded(op, n):
    """A float32 op, at every size (small ones on float64 copies, large ones widened
    block by block inside the kernel), is the float64 op on the widened values rounded
    once to float32, bit for bit, special values included; and PyTorch's float32 op
    within float32 precision."""
    x, y = (v.astype(np.float32) for v in _operands(op, n, seed=n))
    x[:5] = [np.nan, np.inf, -np.inf, 0.0, -0.0]
    kwargs = {"min": -0.5, "max": 0.7} if op.name == "clamp" else {}

    def run(m, dtype):
        args = [m.tensor(v.astype(dtype)) for v in ((x, y) if op.arity == 2 else (x,))]
        return _function(m, op)(*(args[:1] if kwargs else args), **kwargs).numpy()

    got = run(tg, np.float32)
    assert got.dtype == np.float32
    want = run(tg, np.float64).astype(np.float32)
    np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32))
    torch = pytest.importorskip("torch")
    ref = run(torch, np.float32)
    np.testing.assert_allclose(got[5:], ref[5:], rtol=2e-6, atol=1e-6)


def _chain(x, y, with_trig):
    """A run of elementwise entries over x's size: every kind of operand (two tensors,
    a constant on either side, one tensor twice, a leaf used at several places)."""
    h = x * 1.5 + y
    h = h.tanh() * x - 0.25
    h = (h * h).sqrt() + h.exp() / (1.0 + y * y)
    h = 2.0 - h.sigmoid() * y
    h = h.relu() + h.abs() + h.square().log1p() + h.expm1().neg()
    h = h.maximum(x) - h.minimum(y) + (x * 0.1).rsqrt().reciprocal()
    if with_trig:
        h = h.sin() + (h * 0.5).cos() * x + (h * 0.2).tan()
    return h


def _grads(fn, fuse, n=N, **kw):
    r = np.random.RandomState(3)
    x = tg.tensor(r.uniform(0.5, 2.0, n), requires_grad=True)
    y = tg.tensor(r.uniform(-1.0, 1.0, n), requires_grad=True)
    out = fn(x, y, **kw)
    seed = tg.tensor(r.uniform(-1, 1, n))
    saved = fused.FUSE_MIN
    fused.FUSE_MIN = fused.FUSE_MIN if fuse else engine.NO_FUSION   # the backward only
    try:
        out.backward(seed)
    finally:
        fused.FUSE_MIN = saved
    return x.grad.numpy(), y.grad.numpy()


def test_fused_and_per_entry_sweeps_agree_bitwise_without_vector_math():
    """No libmvec call in these reverse rules and the same order of accumulation: the
    fused run gives the per-entry sweep's gradients bit for bit."""
    for a, b in zip(_grads(_chain, True, with_trig=False), _grads(_chain, False, with_trig=False)):
        np.testing.assert_array_equal(a, b)


def test_fused_and_per_entry_sweeps_agree_within_4_ulp_with_vector_math():
    """sin's and cos's reverse rules call libmvec's cos / sin in the fused run (math's
    in the per-entry sweep): a derivative within 4 ulp, so a gradient within a few ulp
    of the size of its terms (sums that cancel lose relative accuracy either way)."""
    eps = np.finfo(float).eps
    for a, b in zip(_grads(_chain, True, with_trig=True), _grads(_chain, False, with_trig=True)):
        assert np.max(np.abs(a - b)) > 0          # the vector math was used
        np.testing.assert_allclose(a, b, rtol=16 * eps, atol=16 * eps * np.max(np.abs(b)))


def test_fused_gradients_match_torch():
    torch = pytest.importorskip("torch")
    r = np.random.RandomState(3)
    xv, yv, sv = r.uniform(0.5, 2.0, N), r.uniform(-1.0, 1.0, N), r.uniform(-1, 1, N)
    ours = _grads(_chain, True, with_trig=True)
    x = torch.tensor(xv, requires_grad=True)
    y = torch.tensor(yv, requires_grad=True)
    _chain(x, y, True).backward(torch.tensor(sv))
    np.testing.assert_allclose(ours[0], x.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ours[1], y.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_fused_run_stops_at_hooks_retained_grads_and_other_kinds():
    """A hook, a retained grad and a reduction in the middle of a large chain: each
    sees its full gradient, as in the per-entry sweep."""
    def fn(x, y, seen):
        a = (x * y).sin()
        a.register_hook(lambda g: seen.append(g.numpy().copy()))
        b = a.exp() * 2.0
        b.retain_grad()
        seen.append(b)
        c = b.tanh() + b.sum() * 1e-3
        return c * x
    for fuse in (True, False):
        seen = []
        gx, gy = _grads(fn, fuse, seen=seen)
        if fuse:
            first = (gx, gy, seen[1].copy(), seen[0].grad.numpy())
        else:
            np.testing.assert_allclose(gx, first[0], rtol=1e-13)
            np.testing.assert_allclose(gy, first[1], rtol=1e-13)
            np.testing.assert_allclose(seen[1], first[2], rtol=1e-13)
            np.testing.assert_allclose(seen[0].grad.numpy(), first[3], rtol=1e-13)


def test_fused_run_gradcheck_float64():
    """Finite differences through the fused kernels: a few inputs perturbed at a time
    on a large vector (the rest of the vector rides along)."""
    r = np.random.RandomState(5)
    base = r.uniform(0.5, 2.0, N)
    idx = r.choice(N, 6, replace=False)
    y = tg.tensor(r.uniform(-1, 1, N))

    def f(v):
        x = tg.tensor(v, requires_grad=True)
        out = _chain(x, y, True).sum()
        return out, x
    out, x = f(base)
    out.backward()
    g = x.grad.numpy()
    eps = 1e-6
    for i in idx:
        up, dn = base.copy(), base.copy()
        up[i] += eps
        dn[i] -= eps
        num = (f(up)[0].item() - f(dn)[0].item()) / (2 * eps)
        assert abs(num - g[i]) <= 1e-6 * max(1.0, abs(num))


_USED = [CODE[c] for c in ("sin", "mul", "tanh", "add", "exp", "pow")]


def _run_args(n, m=6, seed=0):
    """A tape-like set of arrays for a fused run of m entries over n elements."""
    r = np.random.RandomState(seed)
    codes = [CODE[c] for c in ("sin", "mul", "tanh", "add", "exp", "mul")][:m]
    OP = np.array([CODE["leaf"]] + codes, np.int16)
    A = np.arange(-1, m, dtype=np.int64)
    B = np.full(m + 1, -1, np.int64)
    C = np.array([0.0, 0.0, 1.01, 0.0, 0.5, 0.0, 0.1][:m + 1])
    OFF = np.arange(m + 1, dtype=np.int64) * n
    V = np.empty((m + 1) * n)
    V[:n] = r.uniform(-1, 1, n)
    ents = np.arange(1, m + 1, dtype=np.int64)
    fused.forward_part(ents, m, OP, A, B, C, C, OFF, V, n, fused.FWD.compile_slots(_USED),
                       0, 1)
    G = np.zeros_like(V)
    G[m * n:] = r.uniform(-1, 1, n)
    return ents[::-1].copy(), m, OP, A, B, C, C, OFF, V, G, n


@pytest.mark.parametrize("n", [1, fused.BLOCK - 1, 5 * fused.BLOCK + 3, 40_000])
def test_parallel_kernels_equal_one_share_of_all(n):
    # (the fused kernels call the ops' block rules through these tables)
    _FWD, _REV = fused.FWD.compile_slots(_USED), fused.REV.compile_slots(_USED)
    ents, m, OP, A, B, C, C2, OFF, V, G, n = _run_args(n)
    Gs, Gp, Gk = G.copy(), G.copy(), G.copy()
    keep, fresh = np.zeros(m + 1, np.uint8), np.zeros(2 * m, np.uint8)
    fused.reverse_part(ents, m, OP, A, B, C, C2, OFF, V, Gs, n, keep, fresh, _REV, 0, 1)
    fused.reverse_parallel(ents, m, OP, A, B, C, C2, OFF, V, Gp, n, keep, fresh, _REV, 2)
    np.testing.assert_array_equal(Gs, Gp)
    # each entry's adjoint is zeroed once used up, unless kept; the leaf's is left
    fused.reverse_part(ents, m, OP, A, B, C, C2, OFF, V, Gk, n, keep + 1, fresh, _REV, 0, 1)
    np.testing.assert_array_equal(Gs[:n], Gk[:n])
    assert not Gs[n:].any() and Gk[m * n:].any()
    # on an uncleared arena, each input flagged fresh (first reached by its entry) is
    # zeroed block by block before the entry adds into it: the same adjoints
    Gf, Gfp = G.copy(), G.copy()
    Gf[:m * n] = Gfp[:m * n] = np.nan
    fresh[0::2] = 1
    fused.reverse_part(ents, m, OP, A, B, C, C2, OFF, V, Gf, n, keep, fresh, _REV, 0, 1)
    fused.reverse_parallel(ents, m, OP, A, B, C, C2, OFF, V, Gfp, n, keep, fresh, _REV, 2)
    np.testing.assert_array_equal(Gs, Gf)
    np.testing.assert_array_equal(Gs, Gfp)
    Vs, Vp = V.copy(), V.copy()
    asc = ents[::-1].copy()
    fused.forward_part(asc, m, OP, A, B, C, C2, OFF, Vs, n, _FWD, 0, 1)
    fused.forward_parallel(asc, m, OP, A, B, C, C2, OFF, Vp, n, _FWD, 2)
    np.testing.assert_array_equal(Vs, Vp)
    x = V[:n]
    for code in (CODE["sin"], CODE["mul"], CODE["pow"]):
        outs = [np.empty(n), np.empty(n)]
        fused.map_part(code, x, np.abs(x), True, 1.5, 0.0, outs[0], n, _FWD, 0, 1)
        fused.map_parallel(code, x, np.abs(x), True, 1.5, 0.0, outs[1], n, _FWD, 2)
        np.testing.assert_array_equal(outs[0], outs[1])


def _run_program(m, x, y):
    """A run with 40 adjoints live at once, an operand read twice by one entry,
    intermediates also read above the run (by a sum: part of their adjoints arrives
    before the run is swept) and one with its grad retained."""
    vs = [x * (1.0 + k / 8) for k in range(40)]                   # all live at once ...
    s = vs[0].sin()
    for v in vs[1:]:
        s = s + v.tanh()                                          # ... until swept here
    h = s * y
    h.retain_grad()
    q = h * h * 0.01 + (s * 0.05).exp()
    low = (q * x).sum() + s.sum() * 0.5 + (vs[3] * vs[3]).sum()
    return low + (q.cos() * y).sum(), h


@pytest.mark.parametrize("n", [fused.FUSE_MIN, 5 * fused.BLOCK + 3])
def test_fused_run_adjoints_equal_pytorchs(n):
    """The fused reverse over a run whose adjoints come from inside and above it, on a
    fresh and on a reused adjoint arena: gradients as PyTorch's, eager and replayed."""
    torch = pytest.importorskip("torch")
    r = np.random.RandomState(5)
    xv, yv = r.uniform(-1, 1, n), r.uniform(0.5, 1.5, n)
    tx, ty = (torch.tensor(v, requires_grad=True) for v in (xv, yv))
    out, th = _run_program(torch, tx, ty)
    th.retain_grad()
    out.backward()
    for _ in range(2):     # (the second on the first's adjoint arena: it must be left clean)
        x, y = (tg.tensor(v, requires_grad=True) for v in (xv, yv))
        out, h = _run_program(tg, x, y)
        out.backward()
        for ours, theirs in ((x.grad, tx.grad), (y.grad, ty.grad), (h.grad, th.grad)):
            np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12, atol=1e-12)
    traced = tg.trace(lambda a, b: _run_program(tg, a, b)[0], xv, yv)
    gx, gy = traced.grad(xv, yv)
    np.testing.assert_allclose(gx.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gy.numpy(), ty.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_large_results_live_in_the_arena_and_survive_its_reuse():
    """A large result's value is a view of the tape's arena; the arena is not reused
    while such a view is alive (after backward, after the tape starts over)."""
    x = tg.tensor(np.linspace(-1, 1, N), requires_grad=True)
    y = (x * 3.0).sin()
    kept = y.detach()
    want = np.sin(np.linspace(-1, 1, N) * 3.0)
    assert _ulps(kept.numpy(), want) <= 4
    y.sum().backward()
    del y
    for _ in range(3):   # the default tape starts over and records new values
        z = tg.tensor(np.full(N, 7.0), requires_grad=True)
        (z * 2.0).exp().sum().backward()
    assert _ulps(kept.numpy(), want) <= 4


def test_reused_adjoint_arena_does_not_touch_kept_gradients():
    seen = []
    for k in range(3):
        x = tg.tensor(np.full(N, 1.0 + k), requires_grad=True)
        h = x * 2.0
        h.register_hook(lambda g: seen.append(g))
        (h * h).sum().backward()
    for k, g in enumerate(seen):
        np.testing.assert_array_equal(g.numpy(), np.full(N, 4.0 * (1.0 + k)))


def test_the_kept_adjoint_arena_is_cleared_between_backwards():
    """Backwards of other sizes and shapes one after another on the reused arena (the
    kernels clear what they use up, the rest is cleared when it is taken again)."""
    r = np.random.RandomState(2)
    for n in (N, 2 * N, N // 2 + 5000, N):
        xv = r.uniform(-1, 1, n)
        x = tg.tensor(xv, requires_grad=True)
        h = (x * 2.0).sin()
        h.retain_grad()
        (h.exp() * h).sum().backward()
        want_h = np.exp(np.sin(2 * xv)) * (1 + np.sin(2 * xv))
        want_x = want_h * 2 * np.cos(2 * xv)
        np.testing.assert_allclose(h.grad.numpy(), want_h, rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(x.grad.numpy(), want_x, rtol=1e-13, atol=1e-14)


def test_anomaly_mode_finds_a_nan_inside_a_large_run():
    x = tg.tensor(np.linspace(0.0, 1.0, N), requires_grad=True)
    with tg.autograd.detect_anomaly():
        y = ((x * x.sqrt()) * 2.0).exp().sum()      # sqrt's adjoint at 0: 0 / 0
        with pytest.raises(RuntimeError, match="SqrtBackward0"):
            y.backward()


def test_threads_run_large_backwards_at_once():
    """Only one thread at a time runs the parallel kernels (the others the serial
    twins): every thread gets its own right gradient."""
    errors, barrier = [], threading.Barrier(4)

    def work(k):
        try:
            barrier.wait()
            for _ in range(5):
                x = tg.tensor(np.full(N, 0.1 * (k + 1)), requires_grad=True)
                (x * x * 0.5).sin().sum().backward()
                want = np.cos(0.5 * (0.1 * (k + 1)) ** 2) * 0.1 * (k + 1)
                np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-13)
        except Exception as e:   # noqa: BLE001 (reported below)
            errors.append(e)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


@pytest.mark.parametrize("width", [256, 1024])
def test_float32_stays_float32(width):
    """Values, results and gradients of float32 tensors are float32, in large
    elementwise ops, matrix products and reductions."""
    r = np.random.RandomState(0)
    x = tg.tensor(r.randn(64, 16).astype(np.float32))
    w = tg.tensor(r.randn(16, width).astype(np.float32), requires_grad=True)
    b = tg.tensor(r.randn(width).astype(np.float32), requires_grad=True)
    h = (x @ w + b).tanh()
    assert h.dtype == tg.float32 and h.detach().numpy().dtype == np.float32
    loss = (h * h).mean()
    assert loss.dtype == tg.float32
    loss.backward()
    assert w.grad.dtype == tg.float32 and w.grad.numpy().dtype == np.float32
    assert b.grad.dtype == tg.float32
    v = tg.tensor(r.rand(N).astype(np.float32), requires_grad=True)
    s = (v.sin() * 2.0).exp()
    assert s.dtype == tg.float32
    s.sum().backward()
    assert v.grad.numpy().dtype == np.float32
    v64 = v.detach().numpy().astype(np.float64)
    want = np.exp(2 * np.sin(v64)) * 2 * np.cos(v64)
    np.testing.assert_allclose(v.grad.numpy(), want, rtol=1e-5)


def test_replay_over_large_arrays_uses_fused_runs_and_blas():
    """A traced function over large arrays replays by segments (fused runs, BLAS
    products, the compiled rest) and gives the eager gradient."""
    r = np.random.RandomState(4)
    w0 = r.randn(256, 64) / 8

    def f(x, w):
        h = (x * 1.5).sin() * x + (x * 0.5).exp()          # a run over 64 * 256 values
        h = (h.reshape(64, 256) @ w).tanh()                # a BLAS product, then a run
        return (h * h).sum() + h.mean()
    x0 = r.uniform(-1, 1, 64 * 256)
    traced = tg.trace(f, x0, w0)
    for seed in range(3):
        xv = np.random.RandomState(seed).uniform(-1, 1, 64 * 256)
        value, (gx, gw) = traced.value_and_grad(xv, w0)
        x = tg.tensor(xv, requires_grad=True)
        w = tg.tensor(w0, requires_grad=True)
        out = f(x, w)
        out.backward()
        np.testing.assert_allclose(value.item(), out.item(), rtol=1e-12)
        np.testing.assert_allclose(gx.numpy(), x.grad.numpy(), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(gw.numpy(), w.grad.numpy(), rtol=1e-12, atol=1e-14)
    rec = traced.records[0]
    kinds = [s[0] for s in rec.segments[1]]
    assert rec.vector and kinds.count("run") >= 2 and "blas" in kinds


def _child_gradient(n, q):
    x = tg.tensor(np.full(n, 0.3), requires_grad=True)
    (x * x).sin().sum().backward()
    q.put(float(x.grad.numpy()[0]))


def test_a_forked_child_runs_the_kernels_serially():
    """GNU OpenMP's pool does not survive a fork: a child forked after the parallel
    kernels ran uses the serial twins (instead of hanging)."""
    import multiprocessing as mp
    x = tg.tensor(np.full(N, 0.3), requires_grad=True)
    (x * x).sin().sum().backward()             # the parent's pool is up
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child_gradient, args=(N, q))
    p.start()
    got = q.get(timeout=120)
    p.join(60)
    assert p.exitcode == 0
    assert got == pytest.approx(np.cos(0.09) * 0.6, rel=1e-13)


def test_without_libmvec_the_kernels_call_libm(tmp_path):
    """Where there is no libmvec (not glibc on x86-64), the same kernels call libm's
    scalar functions: run in a fresh process that cannot find it, with its own Numba
    cache (the compiled code differs)."""
    import subprocess
    import sys
    code = """
import ctypes.util
ctypes.util.find_library = lambda name: None
import numpy as np
import tapegrad as tg
from tapegrad.kernels import vmath
assert vmath.LIBRARY.startswith("libm"), vmath.LIBRARY
x = tg.tensor(np.linspace(-3, 3, 20000), requires_grad=True)
y = (x.sin() * x.exp()).tanh()
y.sum().backward()
xv = np.linspace(-3, 3, 20000)
want = np.tanh(np.sin(xv) * np.exp(xv))
assert np.max(np.abs(y.detach().numpy() - want)) < 1e-13
g = (1 - want ** 2) * (np.cos(xv) * np.exp(xv) + np.sin(xv) * np.exp(xv))
assert np.allclose(x.grad.numpy(), g, rtol=1e-12, atol=1e-13)
print("ok")
"""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path), TAPEGRAD_BACKGROUND_COMPILE="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]

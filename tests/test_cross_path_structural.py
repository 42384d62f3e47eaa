"""One semantics per op, the structural kinds: reductions, softmax, products, gathers,
concatenation and indexing, on inputs with nan, +-inf, +-0, denormals and ties, at 0-d,
7, 263 and 5,000 elements, eagerly, replayed and as a compiled tape (up to 263 elements:
``test_cross_path`` says why), the same bit for bit, and PyTorch's.  Each program ends in
a weighted sum, so that every output element's gradient is seen; against PyTorch values
and gradients compare as in ``test_cross_path`` (4 ulp, the same nan, inf and, for
values, sign of zero).  Softmax rows are 7 long, 263 (past 16: libmvec's exp) and 1,000."""
import numpy as np
import pytest

import tapegrad as tg
from tapegrad.replay.llvm_tape import CompileError
from test_cross_path import _check

torch = pytest.importorskip("torch")

SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 5e-324, 1.0, -1.0, 0.5, 2.0, 2.0,
                    -2.5, 30.0, 1e300])
FINITE = np.array([0.0, -0.0, 5e-324, 1.0, -1.0, 0.5, 2.0, 2.0, -2.5, 3.0, 0.25, -0.75])
# softmax's inputs: a nan or +inf makes its whole row nan, so they come in the middle only
SOFT = np.array([-np.inf, 0.0, -0.0, 5e-324, 1.0, -1.0, 0.5, 2.0, 2.0, -2.5, 30.0, -745.0,
                 0.25, -0.75, 3.0])


def _programs(m):
    """name -> function of one vector: m is tapegrad or torch."""
    def rows(x):
        return x.reshape(-1, 7) if x.shape[0] % 7 == 0 else x.reshape(1, -1)

    def long_rows(x):
        return x.reshape(-1, 1000) if x.shape[0] % 1000 == 0 else rows(x)
    return {
        "sum": lambda x: x.sum(),
        "mean": lambda x: x.mean(),
        "sum_dim": lambda x: rows(x).sum(1),
        "amax": lambda x: m.amax(rows(x), 1),
        "amin": lambda x: m.amin(rows(x), 1),
        "max_all": lambda x: x.max(),
        "min_all": lambda x: x.min(),
        "prod_dim": lambda x: rows(x).prod(1),
        "softmax": lambda x: m.softmax(rows(x), 1),
        "log_softmax": lambda x: m.log_softmax(rows(x), 1),
        "logsumexp": lambda x: m.logsumexp(rows(x), 1),
        "logsumexp_cols": lambda x: m.logsumexp(rows(x), 0, keepdim=True),
        "logsumexp_all": lambda x: m.logsumexp(rows(x), (0, 1)),
        "matmul": lambda x: rows(x) @ rows(x).transpose(0, 1),
        "cat_slices": lambda x: m.cat([x[1:], x[:3], x[2:4]]),
        "index": lambda x: x[[0, 3, 3, 1]],
        "expand": lambda x: x[:3].reshape(3, 1).expand(3, 4),
        "where": lambda x: m.where(x > 0.5, x, -x),
        "mean_dim": lambda x: rows(x).mean(1),
        "prod": lambda x: x[:6].prod(),
        "max_dim": lambda x: rows(x).max(1)[0],
        "min_dim": lambda x: rows(x).min(1)[0],
        "permute": lambda x: rows(x).permute(1, 0) * 1.0,
        "t": lambda x: rows(x).t() * 1.0,
        "select": lambda x: rows(x)[0] + rows(x)[:, 1].sum(),
        "split": lambda x: m.cat([p * (k + 1.0) for k, p in enumerate(x.split(3))]),
        "unbind": lambda x: m.stack([p * 2.0 for p in rows(x).unbind(0)]),
        # 0-d pieces of a vector (the sweeps move one element inline)
        "elements": lambda x: m.stack([x[k] * (k % 5 + 1.0) for k in range(0, x.shape[0], 3)]),
        "pieces": lambda x: m.stack([p * p for p in x]),
        "squeeze": lambda x: x.reshape(1, -1, 1).squeeze() + x.unsqueeze(0).squeeze(0),
        "clone": lambda x: x.clone() * x,
        "to_copy": lambda x: x.to(m.float32).to(m.float64) * 2.0,
        "detach": lambda x: x * x.detach(),
        "vecmat": lambda x: x[:7] @ rows(x).t(),
        "mm": lambda x: m.mm(rows(x), rows(x).t()),
        "bmm": lambda x: m.bmm(rows(x).unsqueeze(0), rows(x).t().unsqueeze(0)),
        "mv": lambda x: m.mv(rows(x), rows(x)[0]),
        "dot": lambda x: m.dot(x, x),
        "stack": lambda x: m.stack([x, x * 2.0], 1),
        # short vectors: softmax in Python, in the compiled rule's order
        "softmax_short": lambda x: m.cat([m.softmax(p, 0) for p in x[:14].split(4)]),
        "log_softmax_short": lambda x: m.cat([m.log_softmax(p, 0) for p in x[:14].split(4)]),
        "softmax_vector": lambda x: m.softmax(x, 0),
        "softmax_long_rows": lambda x: m.softmax(long_rows(x), 1),
        "log_softmax_long_rows": lambda x: m.log_softmax(long_rows(x), 1),
        "logsumexp_long_rows": lambda x: m.logsumexp(long_rows(x), 1),
        "softmax_columns": lambda x: m.softmax(long_rows(x), 0),
    }


def _zero_d_programs(m):
    """name -> function of a 0-d tensor, for the programs that take one."""
    return {
        "sum": lambda x: x.sum(), "mean": lambda x: x.mean(), "sum_dim": lambda x: x.sum(0),
        "mean_dim": lambda x: x.mean(0), "amax": lambda x: m.amax(x, 0),
        "amin": lambda x: m.amin(x, 0), "max_all": lambda x: x.max(),
        "min_all": lambda x: x.min(), "prod": lambda x: x.prod(),
        "prod_dim": lambda x: x.prod(0), "max_dim": lambda x: x.max(0)[0],
        "min_dim": lambda x: x.min(0)[0], "softmax": lambda x: m.softmax(x, 0),
        "log_softmax": lambda x: m.log_softmax(x, 0), "logsumexp": lambda x: m.logsumexp(x, 0),
        "where": lambda x: m.where(x > 0.5, x, -x), "expand": lambda x: x.expand(3),
        "clone": lambda x: x.clone() * x, "to_copy": lambda x: x.to(m.float32).to(m.float64) * 2.0,
        "detach": lambda x: x * x.detach(), "t": lambda x: x.t() * 1.0,
        "squeeze": lambda x: x.unsqueeze(0).squeeze() + x.reshape(1, 1).squeeze(),
        "index": lambda x: x.reshape(1)[[0, 0]], "select": lambda x: x.reshape(1)[0] * 3.0,
        "unbind": lambda x: x.reshape(1).unbind(0)[0] * 2.0,
        "cat_slices": lambda x: m.cat([x.reshape(1), x.reshape(1) * 2.0]),
        "stack": lambda x: m.stack([x, x * 2.0]),
        "dot": lambda x: m.dot(x.reshape(1), x.reshape(1)),
        "mm": lambda x: m.mm(x.reshape(1, 1), x.reshape(1, 1)),
    }


NAMES = list(_programs(None))


PRODUCTS = ("matmul", "mm", "bmm", "mv", "vecmat")


def _inputs(name, n):
    if "softmax" in name or "logsumexp" in name:
        x = np.resize(SOFT, n)
        if n >= 2000:       # (rows of 1,000: the third; columns: 15 of 1,000)
            x[n // 2:n // 2 + SPECIAL.size] = SPECIAL
        return x
    base = FINITE if name in PRODUCTS + ("prod_dim", "prod", "dot") else SPECIAL
    return np.resize(base, n).astype(np.float64)


def _weights(shape):
    return np.random.default_rng(1).uniform(0.5, 1.5, shape)


def _torch(f, x):
    xt = torch.tensor(x, requires_grad=True)
    out = f(torch)(xt)
    w = torch.tensor(_weights(tuple(out.shape)))
    (out * w).sum().backward()
    return out.detach().numpy(), xt.grad.numpy()


def _eager(f, x):
    xt = tg.tensor(x, requires_grad=True)
    out = f(tg)(xt)
    w = tg.tensor(_weights(tuple(out.shape)))
    (out * w).sum().backward()
    return out.detach().numpy(), xt.grad.numpy()


def _replayed(f, xs, compiled):
    """(values, gradients) at each of ``xs`` (arrays of one shape) from one recording,
    replayed or compiled.  The compiled tape's values are its gradient in the weights,
    an input there (plus 0: its adjoints are sums from +0, -0 reads +0)."""
    f = f(tg)
    example = tg.tensor(np.resize(FINITE, xs[0].shape))
    w = tg.tensor(_weights(tuple(f(example).shape)))
    tr = tg.trace(lambda v, u: (f(v) * u).sum(), example, w)
    if compiled:
        tr.compile()
        assert tr.records[0].native is not None
    values = None if compiled else tg.trace(f, example)
    out = []
    for x in xs:
        _, (grad, gw) = tr.value_and_grad(tg.tensor(x), w)
        out.append(((gw if compiled else values(tg.tensor(x))).numpy(), grad.numpy()))
    return out


def _check_paths(name, x, paths, want_v, want_g, at=""):
    """The paths of one input give the eager answer bit for bit, and PyTorch's."""
    v0, g0 = (np.ravel(a) for a in paths["eager"])
    # r (g - <g, r>) cancels where r is 1: what is left is rounding, whose ulps differ
    tiny = 1e-14 if "softmax" in name else 0.0
    for path, (v, g) in paths.items():
        v, g = np.ravel(v), np.ravel(g)
        what = f"{name}{at} {{}}, {path} against"
        _check(what.format("value") + " eager", v, v0 + 0.0 if path == "compiled" else v0, [v0])
        _check(what.format("gradient") + " eager", g, g0, [x])
        _check(what.format("value") + " PyTorch", v, np.ravel(want_v), [v], ulp=4,
               signed_zero=path != "compiled")
        # through a float32 copy PyTorch rounds the gradient to float32; the tape's
        # adjoints stay float64 (README, "float32"): equal to float32's precision
        _check(what.format("gradient") + " PyTorch", g, np.ravel(want_g), [x], ulp=4,
               signed_zero=False, tiny=tiny, rtol=1e-7 if name == "to_copy" else 1e-14)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("n", [7, 263, 5000], ids=lambda n: f"{n} elements")
def test_structural_ops_give_one_answer_on_every_path_and_pytorchs(name, n):
    if name in PRODUCTS:     # (rows of 7: a 38 x 38 product, then 70 x 70)
        n = {263: 266, 5000: 490}.get(n, n)
    x = _inputs(name, n)
    f = lambda m: _programs(m)[name]                                   # noqa: E731
    with np.errstate(all="ignore"):
        want_v, want_g = _torch(f, x)
    paths = {"eager": _eager(f, x), "replayed": _replayed(f, [x], False)[0]}
    if n <= 263 and name in ("max_dim", "min_dim"):     # positions chosen: argmax guards
        with pytest.raises(CompileError, match="not argmax"):
            _replayed(f, [x], True)
    elif n <= 263:
        paths["compiled"] = _replayed(f, [x], True)[0]
    _check_paths(name, x, paths, want_v, want_g)


@pytest.mark.parametrize("name", list(_zero_d_programs(None)))
def test_structural_ops_of_a_0d_tensor_give_one_answer_on_every_path_and_pytorchs(name):
    xs = [np.array(v) for v in (FINITE if name in ("prod", "prod_dim", "dot", "mm")
                                else SPECIAL)]
    f = lambda m: _zero_d_programs(m)[name]                            # noqa: E731
    replayed = _replayed(f, xs, False)
    compiled = None if name in ("max_dim", "min_dim") else _replayed(f, xs, True)
    for k, x in enumerate(xs):
        with np.errstate(all="ignore"):
            want_v, want_g = _torch(f, x)
        paths = {"eager": _eager(f, x), "replayed": replayed[k]}
        if compiled:
            paths["compiled"] = compiled[k]
        _check_paths(name, np.ravel(x), paths, want_v, want_g, f"({float(x)})")

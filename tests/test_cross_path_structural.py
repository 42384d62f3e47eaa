"""One semantics per op, the structural kinds: reductions, softmax, products, gathers,
concatenation and indexing, on inputs with nan, +-inf, +-0, denormals and ties, at 7
and 5,000 elements, eagerly, replayed and as a compiled tape (7 elements), against
PyTorch.  Each program ends in a weighted sum, so that every output element's gradient
is seen; values and gradients compare as in ``test_cross_path`` (4 ulp, the same nan,
inf and, for values, sign of zero)."""
import numpy as np
import pytest

import tapegrad as tg
from tapegrad.replay.llvm_tape import CompileError
from test_cross_path import _check

torch = pytest.importorskip("torch")

SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 5e-324, 1.0, -1.0, 0.5, 2.0, 2.0,
                    -2.5, 30.0, 1e300])
FINITE = np.array([0.0, -0.0, 5e-324, 1.0, -1.0, 0.5, 2.0, 2.0, -2.5, 3.0, 0.25, -0.75])


def _programs(m):
    """name -> (function of one vector, inputs): m is tapegrad or torch."""
    def rows(x):
        return x.reshape(-1, 7) if x.shape[0] % 7 == 0 else x.reshape(1, -1)
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
    }


NAMES = list(_programs(None))


def _inputs(name, n):
    base = FINITE if name in ("matmul", "prod_dim", "prod", "mm", "bmm", "mv", "dot", "vecmat") \
        else SPECIAL
    return np.resize(base, n).astype(np.float64)


def _weights(shape):
    return np.random.default_rng(1).uniform(0.5, 1.5, shape)


def _torch(name, x):
    xt = torch.tensor(x, requires_grad=True)
    out = _programs(torch)[name](xt)
    w = torch.tensor(_weights(tuple(out.shape)))
    (out * w).sum().backward()
    return out.detach().numpy(), xt.grad.numpy()


def _eager(name, x):
    xt = tg.tensor(x, requires_grad=True)
    out = _programs(tg)[name](xt)
    w = tg.tensor(_weights(tuple(out.shape)))
    (out * w).sum().backward()
    return out.detach().numpy(), xt.grad.numpy()


def _replayed(name, x, compiled):
    f = _programs(tg)[name]
    example = tg.tensor(np.resize(FINITE, x.size))
    out_shape = tuple(f(example).shape)
    w = tg.tensor(_weights(out_shape))
    tr = tg.trace(lambda v: (f(v) * w).sum(), example)
    if compiled:
        tr.compile()
        assert tr.records[0].native is not None
    value, grad = tr.value_and_grad(tg.tensor(x))
    vals = tg.trace(f, example)(tg.tensor(x))
    return vals.numpy(), grad.numpy()


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("n", [7, 5000], ids=lambda n: f"{n} elements")
def test_structural_ops_give_pytorchs_answer_on_every_path(name, n):
    products = ("matmul", "mm", "bmm", "mv", "vecmat")
    x = _inputs(name, 490 if name in products and n > 7 else n)    # (a 70 x 70 product)
    with np.errstate(all="ignore"):
        want_v, want_g = _torch(name, x)
    paths = {"eager": _eager(name, x), "replayed": _replayed(name, x, False)}
    if n == 7 and name in ("max_dim", "min_dim"):     # positions chosen: argmax guards
        with pytest.raises(CompileError, match="not argmax"):
            _replayed(name, x, True)
    elif n == 7:
        paths["compiled"] = _replayed(name, x, True)
    for path, (v, g) in paths.items():
        _check(f"{name} value, {path}", np.ravel(v), np.ravel(want_v), [np.ravel(v)], ulp=4)
        # through a float32 copy PyTorch rounds the gradient to float32; the tape's
        # adjoints stay float64 (README, "float32"): equal to float32's precision
        _check(f"{name} gradient, {path}", g, want_g, [x], ulp=4, signed_zero=False,
               rtol=1e-7 if name == "to_copy" else 1e-14)

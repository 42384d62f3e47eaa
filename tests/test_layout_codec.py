"""The entry layout has one codec (``tape/layout_codec.py``): ``Layout`` reads it in
Python, the kernels call the same functions compiled (``kernels/layout.py``).  On a tape
holding an entry of every kind with metadata, both read what the tensors and NumPy say."""
import math

import numpy as np
from numba import njit

import tapegrad as tg
from tapegrad.kernels import layout as compiled
from tapegrad.ops.table import BY_CODE


@njit
def _header(META, IAUX, i):
    """(size, ndim, the first two dims (-1: none), the extras' position (-1: none)),
    compiled; ndim read both ways (``ndim_of``, ``ndim_at``)."""
    nd = compiled.ndim_of(META, IAUX, i)
    dims = [-1, -1]
    e = -1
    if META[i] >= 0:
        s = compiled.shape_at(META[i])
        for d in range(min(nd, 2)):
            dims[d] = IAUX[s + d]
        e = compiled.extras_at(META, IAUX, i)
        if compiled.ndim_at(IAUX, META[i]) != nd:
            nd = -1
    return compiled.size_of(META, IAUX, i), nd, dims[0], dims[1], e


@njit
def _cat(IAUX, e):
    outer, n = compiled.cat_dims(IAUX, e)
    pieces = [compiled.cat_piece(IAUX, e, j) for j in range(n)]
    return outer, pieces


@njit
def _function_inputs(IAUX, e):
    return [IAUX[compiled.function_input_at(e, j)]
            for j in range(compiled.function_inputs(IAUX, e))]


class _Twice(tg.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        return a * 2 + b

    @staticmethod
    def backward(ctx, g):
        return g * 2, g


def test_python_and_compiled_codecs_read_every_kind_as_numpy_does():
    rng = np.random.default_rng(0)
    xv, wv, bv = rng.standard_normal((3, 4)), rng.standard_normal((4, 5)), rng.standard_normal(4)
    x = tg.tensor(xv, requires_grad=True)
    w = tg.tensor(wv, requires_grad=True)
    b = tg.tensor(bv, requires_grad=True)
    part = x[:, :2] * 1.0
    outs = {
        "gather": x[:, 1:3], "element": x[1][2], "reshape": (x * 1.0).reshape(4, 3),
        "index": x[[0, 2, 2]], "reduce": x.sum(dim=0), "matmul": x @ w,
        "cat": tg.cat([x, part], dim=1), "softmax": tg.softmax(x, dim=1), "broadcast": x * b,
        "where": tg.where(x > 0, x, x * 2), "scalar": x.sum(), "function": _Twice.apply(x, x),
    }
    t = outs["matmul"]._t
    t.flush()
    kinds = {name: BY_CODE[int(t.OP[o._i])].kind for name, o in outs.items()}
    assert {kinds[k] for k in ("gather", "element", "reshape", "index", "reduce", "matmul",
                               "cat", "softmax", "broadcast", "where", "function")} == {
        "gather", "reshape", "index", "reduce", "matmul", "cat", "softmax", "broadcast",
        "where", "host"}, kinds
    for name, o in outs.items():
        assert o._t is t, name
        i = o._i
        shape = tuple(o.shape)
        size, nd, d0, d1, e = _header(t.META, t.IAUX, i)
        assert (t.size(i), t.shape(i)) == (math.prod(shape), shape), name
        assert (size, nd) == (math.prod(shape), len(shape)), name
        assert [d0, d1][:min(nd, 2)] == list(shape[:2]), name
        if name != "scalar":
            assert t.IAUX.size - t.extras(i).size == e, name     # (extras: IAUX[e:])
    i, e = outs["cat"]._i, _header(t.META, t.IAUX, outs["cat"]._i)[4]
    pieces = [(x._i, 4), (part._i, 2)]                 # 3 rows: 4 values of x, 2 of part
    assert t.cat_pieces(i) == (3, pieces)
    assert _cat(t.IAUX, e) == (3, pieces)
    i = outs["function"]._i
    assert t.function_inputs(i) == [x._i, x._i]
    assert _function_inputs(t.IAUX, _header(t.META, t.IAUX, i)[4]) == [x._i, x._i]
    i = outs["matmul"]._i
    assert t.product(i) == (1, 3, 4, 5, np.float64, False)
    assert compiled.product_dims(t.IAUX, compiled.extras_at(t.META, t.IAUX, i)) == (1, 3, 4, 5, 0)
    i = outs["softmax"]._i
    assert t.softmax_dims(i) == (3, 4, 1)
    assert compiled.softmax_rows(t.IAUX, compiled.extras_at(t.META, t.IAUX, i)) == (3, 4, 1)
    i = outs["broadcast"]._i
    loops = t.broadcast_loops(i)
    assert loops == compiled.broadcast_loops(t.IAUX, compiled.extras_at(t.META, t.IAUX, i))
    s, sa, sb = loops[:4], loops[4:8], loops[8:]             # x (3, 4) * b (4,) along 4 loops
    assert math.prod(s) == 12
    idx = np.indices(s).reshape(4, -1).T
    np.testing.assert_array_equal(xv.reshape(-1)[idx @ sa] * bv[idx @ sb],
                                  outs["broadcast"].detach().numpy().reshape(-1))
    np.testing.assert_array_equal(t.sizes(0, t.n), [t.size(j) for j in range(t.n)])

"""+ - * / of two arrays of different shapes is one ``broadcast`` entry that reads both
operands in place: no materialised broadcast, each operand's adjoint summed back in
the same walk.  Values, gradients, Node names and next_functions against PyTorch, in
both operand orders and dtypes, small and large (written into the arena); a constant
or a non-grad operand; linear's AddmmBackward0; replays and the compiled tape bit for
bit against eager; a saved file round trip, and a crafted one refused."""
import io
import json

import numpy as np
import pytest
import torch

import tapegrad as tg
from tapegrad.ops.table import CODE
from tapegrad.replay import ReplayFileError, serialize, trace

from replay_checks import assert_replays_eager

RNG = np.random.default_rng(21)
# a bias, a bias with a leading 1, trailing dims, an outer product, a column against
# rows (both broadcast), a 0-d-like row, large (into the arena), six dims merged to two,
# short rows beside a column (swept down the columns)
SHAPES = [((5, 3), (3,)), ((2, 3, 4), (1, 4)), ((2, 3, 4), (3, 4)), ((4, 1), (1, 3)),
          ((2, 1, 4), (3, 1)), ((6,), (1,)), ((64, 128), (128,)),
          ((2, 3, 1, 1, 4, 5), (1, 1, 1, 4, 5)), ((7, 3), (7, 1))]
OPS = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
       "div": lambda a, b: a / b}


def _names(y):
    node = y.grad_fn
    return node.name(), [f.name() if f is not None else None for f, _ in node.next_functions]


def _codes(y):
    y.tape.flush()
    return set(y.tape.OP[:y.tape.next].tolist())


def _operands(shapes, name):
    xv, bv = (RNG.normal(size=s) for s in shapes)
    if name == "div":
        bv = np.sign(bv) * (np.abs(bv) + 0.5)
    return xv, bv


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(OPS))
def test_broadcast_arithmetic_is_pytorchs(name, shapes, swap, dtype):
    xv, bv = _operands(shapes, name)
    if swap:
        xv, bv = bv, xv
        if name == "div":
            bv = np.sign(bv) * (np.abs(bv) + 0.5)
    out = []
    for m in (tg, torch):
        x, b = (m.tensor(v, dtype=getattr(m, dtype), requires_grad=True) for v in (xv, bv))
        y = OPS[name](x, b)
        (y.tanh() * y).sum().backward()
        out.append((y.detach().numpy(), _names(y), x.grad.numpy(), b.grad.numpy(),
                    str(y.dtype).split(".")[-1]))
        if m is tg:
            assert CODE["broadcast_" + name] in _codes(y) and CODE["expand"] not in _codes(y)
    tol = 1e-12 if dtype == "float64" else 2e-6
    (yo, no, gxo, gbo, do), (yt, nt, gxt, gbt, dt) = out
    assert (no, do) == (nt, dt) and yo.shape == yt.shape
    np.testing.assert_array_equal(yo, yt)           # one IEEE operation: the same bits
    np.testing.assert_allclose(gxo, gxt, rtol=10 * tol, atol=10 * tol)
    np.testing.assert_allclose(gbo, gbt, rtol=10 * tol, atol=10 * tol)


def test_more_than_four_loops_broadcast_as_expand_entries():
    """Operands whose broadcast dims alternate six times need six loops: recorded with
    hidden expand entries instead, as PyTorch's values and gradients all the same."""
    xv, bv = RNG.normal(size=(2, 1, 2, 1, 2, 3)), RNG.normal(size=(1, 2, 1, 2, 1, 3))
    out = []
    for m in (tg, torch):
        x, b = (m.tensor(v, requires_grad=True) for v in (xv, bv))
        y = x * b
        if m is tg:
            assert CODE["expand"] in _codes(y) and CODE["broadcast_mul"] not in _codes(y)
        y.sin().sum().backward()
        out.append((y.detach().numpy(), _names(y), x.grad.numpy(), b.grad.numpy()))
    assert out[0][1] == out[1][1]
    for a, c in zip(out[0][2:], out[1][2:]):
        np.testing.assert_allclose(a, c, rtol=1e-12, atol=1e-13)
    np.testing.assert_array_equal(out[0][0], out[1][0])


def test_a_row_without_grad_and_a_constant_full_operand():
    xv, bv = RNG.normal(size=(4, 3)), RNG.normal(size=3)
    for grad_x in (True, False):
        got = []
        for m in (tg, torch):
            x = m.tensor(xv, requires_grad=grad_x)
            b = m.tensor(bv, requires_grad=not grad_x)
            (x + b).exp().sum().backward()
            got.append((x if grad_x else b).grad.numpy())
            assert (b if grad_x else x).grad is None
        np.testing.assert_allclose(got[0], got[1], rtol=1e-13)
    with tg.no_grad():
        y = tg.tensor(xv, requires_grad=True) + tg.tensor(bv, requires_grad=True)
    assert y.grad_fn is None and not y.requires_grad


@pytest.mark.parametrize("lead", [(5,), (2, 3)])
def test_linear_with_bias_is_one_addmm_node(lead):
    xv, wv, bv = RNG.normal(size=lead + (4,)), RNG.normal(size=(3, 4)), RNG.normal(size=3)
    out = []
    for m in (tg, torch):
        x, w, b = (m.tensor(v, requires_grad=True) for v in (xv, wv, bv))
        y = m.nn.functional.linear(x, w, b)
        node = y.grad_fn if len(lead) == 1 else y.grad_fn.next_functions[0][0]
        names = (node.name(), [f.name() if f else None for f, _ in node.next_functions])
        (y * y).sum().backward()
        out.append((names, y.detach().numpy(), x.grad.numpy(), w.grad.numpy(), b.grad.numpy()))
    assert out[0][0] == out[1][0]
    for a, c in zip(out[0][1:], out[1][1:]):
        np.testing.assert_allclose(a, c, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("shapes", [((4, 3), (3,)), ((2, 1, 4), (3, 1)), ((64, 128), (128,)),
                                    ((6, 3), (6, 1)), ((5, 2, 3), (5, 1, 1))], ids=str)
def test_replayed_and_compiled_broadcasts_are_eager_bit_for_bit(shapes):
    def f(x, b):
        return (((x + b).tanh() * x) / (b * b + 1.0)).sum() + ((b - x) * b).sin().sum()
    points = [[RNG.normal(size=s) for s in shapes] for _ in range(3)]
    traced = trace(f, *(tg.tensor(v) for v in points[0]), compile_after=None)
    small = np.prod(np.broadcast_shapes(*shapes)) <= 64
    if small:
        traced.compile()
        assert traced.records[0].native is not None
    assert_replays_eager(traced, f, points[1:])


def test_second_derivatives_and_forward_mode_through_broadcasts_are_pytorchs():
    xv, bv = RNG.normal(size=(3, 1, 4)), RNG.normal(size=(2, 4)) + 3.0
    out = []
    for m in (tg, torch):
        x, b = (m.tensor(v, requires_grad=True) for v in (xv, bv))
        y = ((x * b - x / b + b) ** 2).sum()
        gx, gb = m.autograd.grad(y, (x, b), create_graph=True)
        ((gx ** 2).sum() + (gb * gb * gb).sum()).backward()
        out.append([gx.detach().numpy(), gb.detach().numpy(), x.grad.numpy(), b.grad.numpy()])
    for a, c in zip(*out):
        np.testing.assert_allclose(a, c, rtol=1e-11, atol=1e-12)
    import tapegrad.autograd.forward_ad as tfa
    import torch.autograd.forward_ad as pfa
    got = []
    for m, ad in ((tg, tfa), (torch, pfa)):
        with ad.dual_level():
            x = ad.make_dual(m.tensor(xv), m.tensor(np.full(xv.shape, 0.5)))
            b = ad.make_dual(m.tensor(bv), m.tensor(np.arange(8.0).reshape(2, 4)))
            got.append(ad.unpack_dual((x * b - x / b + b).sin()).tangent.numpy())
    np.testing.assert_allclose(got[0], got[1], rtol=1e-12, atol=1e-13)


def test_a_saved_broadcast_replay_loads_and_a_crafted_stride_is_refused(tmp_path):
    def f(x, b):
        return ((x + b) ** 2).sum()
    xv, bv = RNG.normal(size=(4, 3)), RNG.normal(size=3)
    traced = trace(f, tg.tensor(xv), tg.tensor(bv))
    path = tmp_path / "broadcast.npz"
    traced.save(path)
    loaded = tg.load(path)
    v, (gx, gb) = loaded.value_and_grad(tg.tensor(xv), tg.tensor(bv))
    want_v, (wx, wb) = traced.value_and_grad(tg.tensor(xv), tg.tensor(bv))
    assert v.item() == want_v.item()
    np.testing.assert_array_equal(gx.numpy(), wx.numpy())
    np.testing.assert_array_equal(gb.numpy(), wb.numpy())
    # the full operand swapped for the row (a file's digest sealed over it): its strides
    # reach past the row, refused before any kernel reads it
    r = traced.records[0]
    i = int(np.flatnonzero(r.OP[:r.n] == CODE["broadcast_add"])[0])
    buf = io.BytesIO()
    traced.save(buf)
    with np.load(io.BytesIO(buf.getvalue()), allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files if k != "__header__"}
        header = json.loads(bytes(z["__header__"]).decode())
    arrays["r0_A"][i] = arrays["r0_B"][i]
    header["digest"] = serialize.digest(header, arrays)
    crafted = io.BytesIO()
    np.savez(crafted, __header__=np.frombuffer(json.dumps(header).encode(), np.uint8), **arrays)
    with pytest.raises(ReplayFileError, match="an operand's offsets"):
        tg.load(io.BytesIO(crafted.getvalue()))


SPECIAL = [0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan, 5e-324, 1e308, -3e-310]


@pytest.mark.parametrize("name", sorted(OPS))
def test_row_loops_and_strided_loops_give_one_answer_at_special_values(name):
    """The kernel's vectorised row loops (operands contiguous along the innermost loop)
    and its strided loops (the elementwise rules of the op table): the same values and
    gradients bit for bit, nan, inf, signed zeros and denormals included, and
    PyTorch's values."""
    n = len(SPECIAL)
    xv = np.array([SPECIAL, SPECIAL[::-1]])                  # (2, n)
    yv = np.array(SPECIAL[3:] + SPECIAL[:3])                 # (n,)
    rows, cols = [], []
    for out, (xs, ys) in ((rows, (xv, yv)), (cols, (xv.T.copy(), yv.reshape(n, 1)))):
        x, y = tg.tensor(xs, requires_grad=True), tg.tensor(ys, requires_grad=True)
        z = OPS[name](x, y)
        assert CODE["broadcast_" + name] in _codes(z)
        z.backward(tg.tensor(np.linspace(-1.5, 2.0, z.numel()).reshape(z.shape)
                             if out is rows else
                             np.linspace(-1.5, 2.0, z.numel()).reshape(2, n).T.copy()))
        out += [z.detach().numpy(), x.grad.numpy(), y.grad.numpy()]
    np.testing.assert_array_equal(rows[0], cols[0].T)
    np.testing.assert_array_equal(rows[1], cols[1].T)
    np.testing.assert_array_equal(rows[2], cols[2].reshape(-1))
    want = OPS[name](torch.tensor(xv), torch.tensor(yv)).numpy()
    np.testing.assert_array_equal(rows[0], want)


@pytest.mark.parametrize("n", [7, 5000])
@pytest.mark.parametrize("name", sorted(OPS))
def test_an_array_and_a_0d_tensor_either_side_are_pytorchs(name, n):
    """A float64 array with a 0-d tensor (a scalar parameter) on either side: one
    broadcast entry, PyTorch's values and gradients, small and large."""
    xv = RNG.normal(size=n) + 3.0
    out = []
    for m in (tg, torch):
        x = m.tensor(xv, requires_grad=True)
        b = m.tensor(1.75, dtype=m.float64, requires_grad=True)
        y = OPS[name](x, b) * OPS[name](b, x)
        if m is tg:
            assert CODE["broadcast_" + name] in _codes(y) and CODE["expand"] not in _codes(y)
        y.sum().backward()
        out.append((y.detach().numpy(), x.grad.numpy(), b.grad.numpy()))
    np.testing.assert_array_equal(out[0][0], out[1][0])
    np.testing.assert_allclose(out[0][1], out[1][1], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out[0][2], out[1][2], rtol=1e-10, atol=1e-9)   # (div: 0)


@pytest.mark.parametrize("name", sorted(OPS))
def test_the_kernels_rules_are_the_op_tables_bit_for_bit(name):
    """The broadcast kernels' written-out rules (``_fwd``, ``_grads``) against the op
    table's generated ones, at every pair of special values."""
    from tapegrad.kernels import broadcast, generated
    op, ew = CODE["broadcast_" + name], CODE[name]
    for x in SPECIAL:
        for y in SPECIAL:
            for g in (1.0, -0.0, 3.5, np.nan):
                want = (generated.ew_fwd(ew, x, y, 0.0),) + generated.ew_grad(ew, x, y, 0.0, g, 0.0)
                got = (broadcast._fwd(op, x, y),) + broadcast._grads(op, x, y, g)
                np.testing.assert_array_equal(np.array(got), np.array(want))
                assert np.signbit(got).tolist() == np.signbit(want).tolist()


# rows the broadcast kind's loops fill eagerly (>= 512 values, rows of at most 256): both
# operands along the row, a column beside rows on either side, a 3-d one with a column
EAGER_LOOPS = [((40, 1, 13), (9, 13)), ((13, 40), (13, 1)), ((13, 1), (13, 40)),
               ((40, 1, 13), (40, 9, 1))]


@pytest.mark.parametrize("shapes", EAGER_LOOPS, ids=str)
@pytest.mark.parametrize("name", sorted(OPS))
def test_short_rows_filled_by_the_kinds_loops_are_pytorchs_at_special_values(name, shapes):
    """Eager values from the broadcast kind's own loops (NumPy's is slow on short rows):
    PyTorch's bit for bit, nan, inf, signed zeros and denormals included, recorded or
    not; PyTorch's gradients; a replay at new inputs is eager bit for bit."""
    xv, yv = _operands(shapes, name)
    for v in (xv, yv):
        v.flat[::7] = np.resize(SPECIAL, v.flat[::7].shape)
    out = []
    for m in (tg, torch):
        x, y = (m.tensor(v, requires_grad=True) for v in (xv, yv))
        z = OPS[name](x, y)
        with m.no_grad():
            free = OPS[name](x, y).numpy()
        z.backward(m.tensor(np.linspace(-1.5, 2.0, z.numel()).reshape(z.shape)))
        out.append((z.detach().numpy(), free, x.grad.numpy(), y.grad.numpy()))
    (zo, fo, gxo, gyo), (zt, ft, gxt, gyt) = out
    for got, want in ((zo, zt), (fo, ft)):
        np.testing.assert_array_equal(got, want)
        assert (np.signbit(got) == np.signbit(want))[~np.isnan(want)].all()
    np.testing.assert_allclose(gxo, gxt, rtol=1e-12, atol=1e-300, equal_nan=True)
    np.testing.assert_allclose(gyo, gyt, rtol=1e-12, atol=1e-300, equal_nan=True)

    def f(a, b):
        return (OPS[name](a, b) * 0.5).sin().sum()
    points = [list(_operands(shapes, name)) for _ in range(3)]
    assert_replays_eager(trace(f, *(tg.tensor(v) for v in points[0]), compile_after=None),
                         f, points[1:])


@pytest.mark.parametrize("name", sorted(OPS))
def test_create_graph_gradients_of_broadcasts_are_eagers_bit_for_bit(name):
    """The recorded backward (create_graph) sums a broadcast operand's contributions in
    the eager sweep's order (+ and -: summed, then negated): the same bits."""
    xv, bv = _operands(((30, 1, 7), (5, 7)), name)
    w = RNG.normal(size=(30, 5, 7))
    grads = []
    for create_graph in (False, True):
        x, b = tg.tensor(xv, requires_grad=True), tg.tensor(bv, requires_grad=True)
        y = (OPS[name](x, b) * tg.tensor(w)).sum()
        grads.append([g.detach().numpy() for g in tg.autograd.grad(y, (x, b),
                                                                    create_graph=create_graph)])
    for eager, recorded in zip(*grads):
        np.testing.assert_array_equal(recorded, eager)

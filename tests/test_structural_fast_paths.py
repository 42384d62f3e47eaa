"""The fast paths of scalar code over vectors (iterating, ``unbind(0)``, ``stack`` of
0-d pieces) against PyTorch: values, dtypes, Node names, next_functions, gradients,
second derivatives, views, and a traced replay."""
import numpy as np
import pytest
import torch

import tapegrad as tg


def _graph(y):
    node = y.grad_fn
    return node.name(), [(f.name() if f is not None else None, k) for f, k in node.next_functions]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("shape", [(4,), (3, 2), (2, 3, 2)])
def test_iteration_records_unbind(both, dtype, shape):
    def program(m):
        x = m.tensor(np.linspace(0.5, 2.0, int(np.prod(shape))).reshape(shape),
                     dtype=getattr(m, dtype), requires_grad=True)
        y = x * 2
        rows = list(y)
        out = sum((r.sin() * (k + 1)).sum() for k, r in enumerate(rows))
        out.backward()
        return ([r.detach().numpy() for r in rows], [str(r.dtype) for r in rows],
                _graph(rows[1]), x.grad.numpy())
    (tv, td, tgph, tgrad), (gv, gd, ggph, ggrad) = both(program)
    for a, b in zip(tv, gv):
        np.testing.assert_array_equal(a, b)
    assert [d.split(".")[-1] for d in td] == [d.split(".")[-1] for d in gd]
    assert tgph == ggph
    np.testing.assert_allclose(ggrad, tgrad, rtol=1e-6 if dtype == "float32" else 1e-14)


def test_iteration_without_grad_and_of_integers(both):
    def program(m):
        a = [float(v) for v in m.tensor([1.0, 2.0, 3.0])]
        b = [int(v) for v in m.tensor([4, 5, 6])]
        r = list(m.tensor([[1.0, 2.0], [3.0, 4.0]]))
        return a, b, [v.requires_grad for v in r], [v.grad_fn is None for v in r]
    assert both(program)[0] == both(program)[1]


def test_stack_of_scalar_pieces(both):
    def program(m):
        x = m.tensor([0.3, -1.2, 2.0, 0.7], requires_grad=True)
        a, b, c, d = x * 1.5
        s = m.stack([a * b, b + c, c, d.exp(), a])
        s2 = m.stack([a, b], dim=-1)
        (s * m.tensor([1.0, 2.0, 3.0, 4.0, 5.0])).sum().backward(create_graph=True)
        g1 = x.grad.detach().numpy().copy()
        x.grad.sum().backward()          # (into x.grad: d/dx of sum(g1) plus g1)
        return (s.detach().numpy(), s2.detach().numpy(), _graph(s), s.shape == (5,),
                g1, x.grad.detach().numpy())
    t, g = both(program)
    np.testing.assert_allclose(g[0], t[0], rtol=1e-15)
    np.testing.assert_allclose(g[1], t[1], rtol=1e-15)
    assert g[2] == t[2] and g[3] == t[3]
    np.testing.assert_allclose(g[4], t[4], rtol=1e-14)
    np.testing.assert_allclose(g[5], t[5], rtol=1e-14)


def test_stack_of_scalars_without_grad_and_mixed(both):
    def program(m):
        a, b = m.tensor(1.5), m.tensor(2.5)
        plain = m.stack([a, b])
        w = m.tensor(3.0, requires_grad=True)
        mixed = m.stack([a, w * 2])
        mixed.sum().backward()
        return plain.numpy(), plain.requires_grad, mixed.detach().numpy(), w.grad.item()
    t, g = both(program)
    np.testing.assert_array_equal(g[0], t[0])
    np.testing.assert_array_equal(g[2], t[2])
    assert (g[1], g[3]) == (t[1], t[3])


def test_rows_are_views_of_the_vector():
    """As in PyTorch, a row of ``unbind`` shares the vector's storage: an in-place op on
    the vector shows in a row taken before (values), and in-place on a row is refused."""
    for m in (torch, tg):
        x = m.tensor([1.0, 2.0, 3.0], dtype=m.float64)
        rows = x.unbind()
        x.mul_(10)
        assert [float(r) for r in rows] == [10.0, 20.0, 30.0]
        w = m.tensor([1.0, 2.0], dtype=m.float64, requires_grad=True)
        r0, _ = (w * 1).unbind()
        with pytest.raises(RuntimeError, match="Output 0 of Unbind is a view and is being "
                                               "modified inplace"):
            r0.mul_(2)
        with pytest.raises(RuntimeError, match="Output 1 of Split is a view"):
            (w * 1).split(1)[1].add_(1)
        with m.no_grad():                 # allowed there: no gradient to get wrong
            rows = (w * 1).unbind()
            rows[0].mul_(2)


def test_a_traced_loop_over_a_vector_replays_at_new_points():
    def f(x):
        acc = x[0] * 0
        for k, v in enumerate(x):
            acc = acc + v.sin() * (k + 1)
        return tg.stack([acc, acc * acc]).sum()

    def f_torch(x):
        acc = x[0] * 0
        for k, v in enumerate(x):
            acc = acc + v.sin() * (k + 1)
        return torch.stack([acc, acc * acc]).sum()

    traced = tg.trace(f, tg.tensor([0.1, 0.2, 0.3]))
    for point in ([0.4, -0.3, 1.1], [2.0, 0.5, -1.0]):
        value, grad = traced.value_and_grad(tg.tensor(point))
        xt = torch.tensor(point, dtype=torch.float64, requires_grad=True)
        yt = f_torch(xt)
        yt.backward()
        assert float(value) == pytest.approx(yt.item(), rel=1e-14)
        np.testing.assert_allclose(np.asarray(grad), xt.grad.numpy(), rtol=1e-13)


def test_rows_are_seen_by_anomaly_mode():
    """Anomaly mode notes the user's line of every entry, the rows of ``unbind`` too
    (they are staged in one call)."""
    from tapegrad.tape import tape as tp
    with tg.autograd.detect_anomaly():
        x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
        rows = list(x * 2)
        t = rows[0]._t
        t.flush()
        lines = {tp.LOCATIONS[t.locs[r._i]] for r in rows}
    assert lines == {(__file__, _line_of("rows = list(x * 2)"))}


def _line_of(text):
    with open(__file__) as f:
        return next(k for k, line in enumerate(f, 1) if text in line and "_line_of" not in line)


def test_split_node_names_are_pytorchs(both):
    def program(m):
        x = m.tensor([1.0, 2.0, 3.0, 4.0, 5.0], requires_grad=True) * 2
        names = [p.grad_fn.name() for p in x.split([2, 3])] + \
            [p.grad_fn.name() for p in x.split(2)] + [p.grad_fn.name() for p in x.chunk(2)]
        try:
            x.split([2, 3])[1].mul_(2)
        except RuntimeError as e:
            names.append(str(e).split(" is a view")[0])
        return names
    t, g = both(program)
    assert g == t


def test_views_made_under_no_grad_refuse_in_place_ops_in_grad_mode(both):
    """PyTorch forbids an in-place op in grad mode on a view made under no_grad of a
    tensor that requires grad (ambiguous); inside no_grad, or on plain tensors and
    detached aliases, it is allowed."""
    def program(m):
        out = []
        w = m.tensor([1.0, 2.0], requires_grad=True)
        y = w * 1
        for make in (lambda: y[0:1], lambda: y.unbind()[0], lambda: y.view(2), lambda: w[0:1]):
            with m.no_grad():
                v = make()
            try:
                v.mul_(2)
                out.append("ok")
            except RuntimeError as e:
                out.append(str(e))
        with m.no_grad():
            v = y[0:1]
            v.mul_(2)
        p = m.tensor([1.0, 2.0])
        with m.no_grad():
            c = p[0:1]
        c.mul_(3)
        with m.no_grad():
            d = w.detach()[1:]
        d.mul_(3)
        return out, y.tolist(), p.tolist(), w.tolist()
    t, g = both(program)
    assert g == t


@pytest.mark.parametrize("name", ["stack", "cat"])
def test_a_number_among_the_tensors_is_pytorchs_type_error(both, name):
    def program(m):
        with pytest.raises(TypeError) as e:
            getattr(m, name)([m.tensor([1.0]) if name == "cat" else m.tensor(1.0), 3.0])
        return str(e.value)
    t, g = both(program)
    assert g == t


# the last two: large results (from tape.PLACE_MIN values), written straight into the arena
BROADCASTS = [((5, 3), (3,)), ((2, 5, 3), (5, 3)), ((4, 1), (1, 3)), ((3,), (2, 3)), ((), (4,)),
              ((64, 128), (128,)), ((128,), (2, 32, 128))]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("shapes", BROADCASTS, ids=str)
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "maximum", "atan2", "pow"])
def test_broadcast_binary_ops_and_full_reductions_are_pytorchs(name, shapes, dtype):
    """Two float arrays of one dtype and different shapes (a bias, an outer product, a
    0-d array), then a full sum and mean: values, dtypes, Node names and gradients."""
    rng = np.random.RandomState(len(name))
    vals = [rng.uniform(0.5, 2.0, s) for s in shapes]
    out = []
    for m in (tg, torch):
        x, y = (m.tensor(v, dtype=getattr(m, dtype), requires_grad=True) for v in vals)
        z = getattr(m, name)(x, y)
        s = z.sum() * 0.5 + (z * z).mean()
        s.backward()
        out.append((z.detach().numpy(), s.item(), str(z.dtype).split(".")[-1], _graph(z),
                    _graph(s), x.grad.numpy(), y.grad.numpy()))
    tol = 1e-12 if dtype == "float64" else 2e-6
    (zt, st, dt, gz, gs, gxt, gyt), (zr, sr, dr, rz, rs, gxr, gyr) = out
    assert (dt, gz, gs) == (dr, rz, rs)
    np.testing.assert_allclose(zt, zr, rtol=tol)
    assert st == pytest.approx(sr, rel=tol)
    np.testing.assert_allclose(gxt, gxr, rtol=10 * tol, atol=tol)
    np.testing.assert_allclose(gyt, gyr, rtol=10 * tol, atol=tol)



@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("shape, key", [((4, 3), 1), ((4, 3), -1), ((5, 2, 3), 3),
                                        ((2, 3, 2, 2), -2)],
                         ids=str)
def test_a_row_by_an_integer_is_one_select(both, dtype, shape, key):
    """``x[i]`` of an array (the loops of hand-tracking-style code): one SelectBackward0
    to the indexed tensor, PyTorch's values and gradients, a view that follows an
    in-place change of its base, and an index out of range refused alike."""
    def program(m):
        base = np.linspace(-1.0, 2.0, int(np.prod(shape))).reshape(shape)
        x = m.tensor(base, dtype=getattr(m, dtype), requires_grad=True)
        y = x * 2
        r = y[key]
        w = m.tensor(np.arange(1.0, r.numel() + 1).reshape(tuple(r.shape)), dtype=r.dtype)
        (r.sin() * w).sum().backward()
        c = m.tensor(base, dtype=getattr(m, dtype))
        row = c[key]
        with m.no_grad():
            c.mul_(3)
        try:
            y[shape[0]]
            refused = None
        except IndexError as e:
            refused = str(e)
        return (r.detach().numpy(), str(r.dtype).split(".")[-1], _graph(r), x.grad.numpy(),
                row.numpy(), refused)
    (tv, td, tgph, tgr, trow, terr), (gv, gd, ggph, ggr, grow, gerr) = both(program)
    tol = 1e-12 if dtype == "float64" else 1e-6
    assert (td, tgph, terr) == (gd, ggph, gerr)
    np.testing.assert_allclose(gv, tv, rtol=tol)
    np.testing.assert_allclose(ggr, tgr, rtol=tol, atol=tol)
    np.testing.assert_allclose(grow, trow, rtol=tol)

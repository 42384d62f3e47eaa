"""Version counters, as PyTorch keeps them: a view (and ``detach()``) shares its base's
counter, so a value saved for backward is stale when its base, or any view of that base,
changed in place since (PyTorch's "modified by an inplace operation" error, or for a
view that is one of several outputs, its multi-output error); ``.data`` has a counter
of its own.  Each case runs the same code with both libraries and expects the same
outcome: the versions, the values and gradients, or the same error type and message."""
import re

import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _float64():
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(before)


def _outcome(m, fn):
    try:
        out = fn(m)
    except RuntimeError as e:
        # the messages name the library's tensor type ([torch.DoubleTensor [2]])
        return type(e), re.sub(r"\[(torch|tapegrad)\.", "[", str(e))
    return _plain(out)


def _plain(v):
    if isinstance(v, (tuple, list)):
        return [_plain(x) for x in v]
    if hasattr(v, "tolist"):
        return v.tolist()
    return v


def _same(fn):
    assert _outcome(tg, fn) == _outcome(torch, fn)


VIEWS = {
    "slice": lambda y: y[1:3],
    "view": lambda y: y.view(2, 2)[0],
    "narrow": lambda y: y.narrow(0, 1, 2),
    "select": lambda y: y.view(2, 2).select(0, 1),
    "unbind": lambda y: y.view(2, 2).unbind(0)[1],
    "split": lambda y: y.split(2)[1],
    "chunk": lambda y: y.chunk(2)[1],
    "transpose": lambda y: y.view(2, 2).t()[0],
    "expand": lambda y: y[0:1].expand(2),
    "detach": lambda y: y.detach()[1:3],
    "view of a view": lambda y: y[1:4][0:2],
}
CHANGES = {
    "base": lambda y, v: y.mul_(5),
    "the view": lambda y, v: v.mul_(5),
    "another view": lambda y, v: y[0:2].add_(1),
    "the base's detach": lambda y, v: y.detach().add_(1),
}
# (views that are one of several outputs, expanded ones and detached ones refuse or
# cannot take an in-place op of their own)
CASES = [(v, c) for v in VIEWS for c in CHANGES
         if not (c == "the view" and v in ("unbind", "split", "chunk", "expand", "detach"))]


def _saved_view(view, change, op):
    def fn(m):
        x = m.tensor([1., 2., 3., 4.], requires_grad=True)
        y = x * 1
        c = m.tensor([2., 3.], requires_grad=True)
        v = VIEWS[view](y)
        z = op(v, c)
        before = (y._version, v._version)
        CHANGES[change](y, v)
        after = (y._version, v._version)
        z.sum().backward()
        return before, after, x.grad, c.grad
    return fn


@pytest.mark.parametrize("view,change", CASES)
def test_a_saved_view_is_stale_once_its_storage_changed(view, change):
    _same(_saved_view(view, change, lambda v, c: v * c))


@pytest.mark.parametrize("view,change", CASES)
def test_an_op_that_saves_nothing_of_the_view_is_fine(view, change):
    _same(_saved_view(view, change, lambda v, c: v + c))


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_view_dropped_before_the_change_is_stale_too(change):
    def fn(m):
        x = m.tensor([1., 2., 3., 4.], requires_grad=True)
        y = x * 1
        c = m.tensor([2., 3.], requires_grad=True)
        z = y[1:3] * c                         # (the view is gone once z is made)
        CHANGES[change](y, y[1:3])
        z.sum().backward()
        return x.grad
    _same(fn)


def test_a_change_before_the_view_is_used_is_fine():
    def fn(m):
        x = m.tensor([1., 2., 3., 4.], requires_grad=True)
        y = x * 1
        c = m.tensor([2., 3.], requires_grad=True)
        v = y[1:3]
        y.mul_(5)
        v.add_(1)
        z = v * c * y[0:2]
        z.sum().backward()
        return v._version, y._version, x.grad, c.grad
    _same(fn)


def test_views_of_a_leaf_changed_under_no_grad():
    def fn(m):
        p = m.tensor([1., 2., 3.], requires_grad=True)
        c = m.tensor([2., 3.], requires_grad=True)
        z = (p[1:] * c).sum()
        with m.no_grad():
            p.sub_(1)
        z.backward()
    _same(fn)


def test_views_of_a_constant():
    def fn(m):
        p = m.tensor([1., 2., 3.])
        c = m.tensor([2., 3.], requires_grad=True)
        z = (p[1:] * c).sum()
        p.sub_(1)
        z.backward()
    _same(fn)


def test_a_saved_leaf_names_no_node():
    def fn(m):
        p = m.tensor([1., 2., 3.], requires_grad=True)
        z = (p * p).sum()
        with m.no_grad():
            p.detach().sub_(1)
        z.backward()
    _same(fn)


def test_a_view_saved_on_another_tape():
    def fn(m):
        x = m.tensor([1., 2., 3., 4.], requires_grad=True)
        y = x * 1
        c = m.tensor([2., 3.], requires_grad=True)
        if m is tg:
            with tg.Tape():
                z = y[1:3] * c
        else:
            z = y[1:3] * c
        y.mul_(5)
        z.sum().backward()
    _same(fn)


def test_versions_are_shared_with_views_and_detach():
    def fn(m):
        x = m.tensor([1., 2., 3., 4.], requires_grad=True)
        y = x * 1
        y.add_(1)
        y.add_(1)
        made = [y[1:], y.view(4), y.detach(), y.unbind(0)[0], y[0:1].expand(3),
                y.view(1, 4).t(), y.narrow(0, 1, 2), y[1:][1:]]
        seen = [[t._version for t in made]]
        made[0].mul_(2)
        made[2].add_(1)
        y.view(2, 2)[1].sub_(1)
        seen.append([t._version for t in made] + [y._version, x._version])
        return seen
    _same(fn)


def test_versions_of_a_leaf_changed_under_no_grad():
    def fn(m):
        x = m.tensor([1., 2., 3., 4.], requires_grad=True)
        with m.no_grad():
            v = x[1:3]
            v.mul_(2)
        d = x.detach()
        d.add_(1)
        return x._version, v._version, d._version
    _same(fn)


# -- .data: the storage, not the version counter ------------------------------------------

def test_data_has_a_counter_of_its_own():
    def fn(m):
        x = m.tensor([1., 2., 3.], requires_grad=True)
        y = x * 1
        dd = y.data
        seen = [(y._version, dd._version)]
        dd.add_(1)
        seen.append((y._version, dd._version))
        dd.add_(1)
        seen.append((y._version, dd._version))
        y.add_(1)
        seen.append((y._version, dd._version))
        v = y[1:]
        y.data.mul_(2)
        seen.append((y._version, v._version, y.data._version, v.data._version))
        return seen, y.detach(), dd, v.detach()
    _same(fn)


def test_an_optimizer_step_through_data_leaves_the_versions():
    def fn(m):
        p = m.tensor([1., 2., 3.], requires_grad=True)
        (p * p).sum().backward()
        p.data.sub_(0.1 * p.grad)
        (p * p).sum().backward()                 # a new graph: fine
        return p._version, p.detach(), p.grad
    _same(fn)


def _leaf_saved(p, c):
    return p * c, p


def _leaf_view_saved(p, c):
    return p[1:] * c[1:], p


def _non_leaf_saved(p, c):
    y = p * 2
    return y * c, y


def _result_saved(p, c):
    y = p.exp()
    return y, y


@pytest.mark.parametrize("graph", [_leaf_saved, _leaf_view_saved, _non_leaf_saved,
                                   _result_saved])
def test_backward_through_a_value_changed_through_data_is_refused(graph):
    """PyTorch's backward silently reads the new value; tapegrad's tape holds the old
    one, so it refuses, saying why, rather than give another gradient."""
    p = tg.tensor([1., 2., 3.], requires_grad=True)
    c = tg.tensor([2., 3., 4.], requires_grad=True)
    z, changed = graph(p, c)
    changed.data.mul_(10)
    assert changed._version == 0
    with pytest.raises(RuntimeError, match=r"changed through \.data .* PyTorch's backward "
                                           r"would silently use the new value"):
        z.sum().backward()


THROUGH = {
    "t": lambda y: y.t(),
    "row": lambda y: y[1],
    "view": lambda y: y.view(-1),
    "unsqueeze": lambda y: y.unsqueeze(0),
}


@pytest.mark.parametrize("view", THROUGH)
@pytest.mark.parametrize("op", ["pow_", "mul_"])
def test_an_inplace_op_through_a_view_reads_what_it_changes(view, op):
    """An in-place op through a view that saves its input (``pow_``; ``mul_`` by a tensor
    that requires grad) reads the value it changes as it was: not stale (its own
    CopySlices into the base comes after it), as PyTorch's."""
    def fn(m):
        x = m.tensor([[0.5, -1.0], [1.5, 2.0]], requires_grad=True)
        c = m.tensor(3.0, requires_grad=True)
        y = x * 2
        v = THROUGH[view](y)
        v.pow_(2) if op == "pow_" else v.mul_(c)
        (y * y).sum().backward()
        return x.grad, c.grad, y._version
    _same(fn)

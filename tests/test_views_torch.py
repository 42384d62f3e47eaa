"""Shared storage as PyTorch has it: in-place ops through views, ``detach()``, ``.data``,
``from_numpy`` and ``numpy()`` reach the base, the base's changes reach its views, and
gradients follow (CopySlices).  Each program runs with torch and tapegrad; values,
gradients and errors must agree."""
import contextlib

import numpy as np
import pytest
import torch

import tapegrad
from torch_programs import registry, run

pytestmark = pytest.mark.usefixtures("torch_float64")
PROGRAMS, program = registry()


@program
def manual_sgd_step_through_data(m):
    p = m.tensor([1.0, 2.0], requires_grad=True)
    (p * p).sum().backward()
    p.data.sub_(0.1 * p.grad)
    q = m.tensor(3.0, requires_grad=True)
    (q * q).backward()
    q.data.sub_(0.1 * q.grad)
    return [p, q]


@program
def detach_shares_storage(m):
    x = m.ones(3)
    x.detach().zero_()
    y = m.tensor([1.0, 2.0])
    d = y.detach()
    y.mul_(3)                    # the base changes: so does the alias
    return [x, d]


@program
def from_numpy_and_numpy_share(m):
    a = np.ones(3)
    x = m.from_numpy(a)
    x.mul_(2)
    b = x.numpy()
    b[0] = 7.0
    return [a, x]


@program
def basic_index_views_write_through(m):
    y = m.ones(2, 3)
    y[0].mul_(10)
    y[:, 2].add_(1)
    y.t()[1].sub_(5)
    y.view(6)[0:2].fill_(-1)
    return y


@program
def views_of_views_and_pieces(m):
    y = m.arange(12.0).reshape(3, 4)
    a, b, c = y.unbind()
    b.mul_(-1)
    s = y.split(2, dim=1)[1]
    s.add_(100)
    y.narrow(0, 2, 1).squeeze(0)[1:3].zero_()
    return y


@program
def base_changes_reach_views(m):
    y = m.ones(4)
    v = y[1:3]
    w = y.view(2, 2)
    y.mul_(5)
    y[0] = -1.0
    return [v, w]


@program
def copy_slices_gradient(m):
    x = m.ones(3, requires_grad=True)
    y = x * 2
    y[1:].mul_(10)
    (y * y).sum().backward()
    return [y, x.grad, y.grad_fn.name()]


@program
def copy_slices_through_transpose(m):
    x = m.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    y = x * 2
    y.t()[0].mul_(3)
    (y * y).sum().backward()
    return [y, x.grad]


@program
def view_of_plain_tensor_takes_a_gradient(m):
    w = m.tensor([2.0, 3.0], requires_grad=True)
    b = m.zeros(4)
    b[1:3].copy_(w * w)
    (b * m.arange(4.0)).sum().backward()
    return [b, w.grad]


@program
def view_refreshed_after_base_inplace(m):
    x = m.ones(3, requires_grad=True)
    y = x * 2
    v = y[1:]
    y.mul_(5)
    v.sum().backward()
    return [v, x.grad]


@program
def inplace_on_view_of_leaf_is_refused(m):
    a = m.randn(2, 3)
    b = a[:]
    a.requires_grad = True
    b.add_(5)
    return b


@program
def inplace_on_view_of_leaf_under_no_grad(m):
    a = m.ones(3, requires_grad=True)
    with m.no_grad():
        a[1:].mul_(4)
    return a


@program
def inplace_on_expanded_is_refused(m):
    x = m.ones(1)
    e = x.expand(3)
    e.add_(1)
    return e


@program
def detach_of_leaf_may_be_written(m):
    p = m.ones(2, requires_grad=True)
    p.detach()[0].mul_(4)
    return p


@program
def contiguous_copies_only_views_out_of_order(m):
    x = m.ones(2, 3)
    x.t().contiguous().add_(1)           # a copy: x unchanged
    x[0].contiguous().mul_(5)            # in order: x itself changes
    flags = [v.is_contiguous() for v in (x, x.t(), x[:, 1], x[1], x.expand(2, 2, 3),
                                         x.view(3, 2), x[:, ::2], x.t()[0], x.t().t(),
                                         x[:, 1:][0], x.view(6)[2:4])]
    return [x, flags]


@program
def as_tensor_shares_a_numpy_array(m):
    a = np.ones(3)
    m.as_tensor(a).add_(1)
    b = np.ones(3, np.float32)
    m.as_tensor(b, dtype=m.float64).add_(1)  # converted: a copy
    return [a, b]


def _written_under_no_grad(m, n, how):
    """A non-leaf written in place under no_grad (through a view, whole, or through a
    view made before): it keeps its history, and what reads it later reads (and saves)
    its new value."""
    x = m.tensor(np.linspace(0.5, 2.0, n), requires_grad=True)
    y = x * 1
    v = y[1:3]
    w = y * 2                            # (saves nothing of y: no error)
    with m.no_grad():
        if how == "slice":
            y[1:3].mul_(100.0)
        elif how == "whole":
            y.mul_(100.0)                # v, a view of y, takes its new value too
        elif how == "view":
            y.view(-1)[0:2].copy_(m.tensor([7.0, 8.0]))
        else:
            v.add_(5.0)
    (y.sin().sum() + (v * v).sum() + w.sum()).backward()
    return [y, v, x.grad]


for _n in (6, 5000):
    for _how in ("slice", "whole", "view", "view_made_before"):
        _p = (lambda n, how: lambda m: _written_under_no_grad(m, n, how))(_n, _how)
        _p.__name__ = f"no_grad_write_{_how}_of_{_n}_is_read_later"
        program(_p)


@program
def no_grad_write_of_a_tensor_another_tape_read(m):
    x = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 1
    with (m.Tape() if m is tapegrad else contextlib.nullcontext()):
        z = y * 3                        # y: an external entry of this tape
        with m.no_grad():
            y[0:2].mul_(10)
        q = y * y                        # its new value
        (z.sum() + q.sum()).backward()
    return x.grad


@program
def reshape_of_a_view_out_of_order_copies(m):
    x = m.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    z = m.tensor([1.0, 2.0])
    x.t().reshape(6).mul_(2)             # copies: x unchanged
    x[:, ::2].flatten().mul_(10)
    x.t().reshape(3, 2, 1).add_(100)     # a transpose with a trailing 1: a view
    x.t().flatten(0, 0).sub_(1)
    x.permute(1, 0).reshape(2, 3).mul_(3)
    z.unsqueeze(0).expand(2, 2).reshape(4).add_(1)
    z.repeat(1).add_(1000)               # repeat always copies
    x.repeat(1, 1).add_(1000)
    return [x, z, [v.is_contiguous() for v in (x.t().reshape(3, 2, 1), x.t().reshape(6))]]


@program
def reshape_of_a_view_out_of_order_gets_its_gradient(m):
    w = m.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    y = w * 1
    f = y.t().reshape(6)                 # a copy
    f.mul_(10)
    ((y * y).sum() + (f * f).sum()).backward()
    return [y, w.grad]


@program
def view_of_a_view_out_of_order_is_refused(m):
    x = m.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    return x.t().view(6)


@program
def view_of_a_strided_slice_where_it_can(m):
    x = m.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    x[:, ::2].view(2, 2).mul_(2)
    x.t().unflatten(0, (3, 1)).add_(1)
    return x


@program
def view_of_an_expand_overlaps(m):
    x = m.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    x.unsqueeze(0).expand(2, 2, 3).view(2, 6).mul_(2)
    return x


@program
def grad_accumulates_in_its_own_storage(m):
    x = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (x * x).sum().backward()
    g, v, version = x.grad, x.grad[1:], x.grad._version
    a = x.grad.numpy()                   # shares the gradient's storage
    (x * 3).sum().backward()             # (PyTorch's own backward ops may count too)
    y = m.ones(2, 3, dtype=m.float32, requires_grad=True)
    (y * 2).sum().backward()
    (y * y).sum().backward()
    return [g is x.grad, g._version - version, v, a, x.grad, y.grad,
            str(y.grad.dtype).split(".")[-1]]


def test_programs_cover_the_cases():
    assert len(PROGRAMS) >= 14


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_like_torch(name):
    want = run(PROGRAMS[name], torch)
    got = run(PROGRAMS[name], tapegrad)
    assert repr(_rounded(got)) == repr(_rounded(want))


def _rounded(r):
    if isinstance(r, (list, tuple)):
        return [_rounded(v) for v in r]
    if isinstance(r, float):
        return round(r, 10)
    if isinstance(r, str):
        return r.replace("torch::autograd::", "")
    return r

"""Error cases: tapegrad must raise the same exception type with the same
message phrase as torch 2.13, and leave its state intact so that a correct
call right afterwards still works.

Every test runs on ``m = torch`` too, which proves the phrase is torch's.
"""
import importlib
import re

import numpy as np
import pytest


@pytest.fixture(params=["torch", "tapegrad"])
def m(request):
    return importlib.import_module(request.param)


def raises(phrase):
    """pytest.raises for a RuntimeError whose message contains ``phrase`` verbatim."""
    return pytest.raises(RuntimeError, match=re.escape(phrase))


def f64(m, data, requires_grad=False):
    return m.tensor(data, dtype=m.float64, requires_grad=requires_grad)


def assert_values(t, expected):
    np.testing.assert_allclose(t.detach().numpy(), np.asarray(expected, dtype=np.float64),
                               rtol=1e-12)


def test_backward_non_scalar_needs_gradient(m):
    x = f64(m, [1.0, 2.0], requires_grad=True)
    y = x * 2
    with raises("grad can be implicitly created only for scalar outputs"):
        y.backward()
    assert x.grad is None
    y.backward(f64(m, [1.0, 1.0]))
    assert_values(x.grad, [2.0, 2.0])


def test_backward_twice_needs_retain_graph(m):
    x = f64(m, [1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with raises("Trying to backward through the graph a second time") as info:
        y.backward()
    assert "retain_graph=True" in str(info.value)
    assert_values(x.grad, [2.0, 4.0])  # the failed call accumulated nothing
    (x * x).sum().backward()           # a fresh graph still works
    assert_values(x.grad, [4.0, 8.0])


def test_retain_graph_allows_second_backward(m):
    x = f64(m, [1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert_values(x.grad, [4.0, 8.0])


def test_autograd_grad_twice_needs_retain_graph(m):
    x = f64(m, [1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    m.autograd.grad(y, x)
    with raises("Trying to backward through the graph a second time"):
        m.autograd.grad(y, x)
    (gx,) = m.autograd.grad((x * x).sum(), x)
    assert_values(gx, [2.0, 4.0])


def test_integer_tensor_cannot_require_grad(m):
    with raises("Only Tensors of floating point and complex dtype can require gradients"):
        m.tensor([1, 2], requires_grad=True)
    ints = m.tensor([1, 2])
    assert ints.dtype == m.int64 and not ints.requires_grad
    floats = m.tensor([1.0, 2.0], requires_grad=True)
    assert floats.requires_grad


def test_requires_grad_on_integer_tensor_via_method(m):
    ints = m.tensor([1, 2])
    with raises("only Tensors of floating point dtype can require gradients"):
        ints.requires_grad_()
    assert not ints.requires_grad
    assert m.tensor([1.0, 2.0]).requires_grad_().requires_grad


def test_backward_on_tensor_without_grad(m):
    c = f64(m, [1.0, 2.0])
    with raises("element 0 of tensors does not require grad and does not have a grad_fn"):
        c.sum().backward()
    x = f64(m, [1.0, 2.0], requires_grad=True)
    (x * c).sum().backward()
    assert_values(x.grad, [1.0, 2.0])


def test_autograd_grad_unused_input(m):
    a = f64(m, 1.5, requires_grad=True)
    b = f64(m, 2.0, requires_grad=True)
    with raises("Set allow_unused=True"):
        m.autograd.grad(a * 2, [a, b])
    ga, gb = m.autograd.grad(a * 2, [a, b], allow_unused=True)
    assert_values(ga, 2.0)
    assert gb is None


def test_gradient_of_wrong_shape(m):
    x = f64(m, [1.0, 2.0], requires_grad=True)
    y = x * 2
    # torch: "Mismatch in shape: grad_output[0] has a shape of torch.Size([3]) and
    #         output[0] has a shape of torch.Size([2])."
    with pytest.raises(RuntimeError, match=r"Mismatch in shape: grad_output\[0\] has a shape "
                                           r"of .*\[3\].* and output\[0\] has a shape of .*\[2\]"):
        y.backward(f64(m, [1.0, 1.0, 1.0]))
    assert x.grad is None
    y.backward(f64(m, [1.0, 3.0]))
    assert_values(x.grad, [2.0, 6.0])


@pytest.mark.parametrize("requires_grad", [False, True], ids=["plain", "requires_grad"])
def test_broadcast_error_names_sizes(m, requires_grad):
    a = f64(m, np.ones((2, 3)).tolist(), requires_grad=requires_grad)
    b = f64(m, [1.0, 2.0, 3.0, 4.0])
    with raises("The size of tensor a (3) must match the size of tensor b (4) "
                "at non-singleton dimension 1"):
        a + b
    assert_values(a + f64(m, [1.0, 2.0, 3.0]), [[2.0, 3.0, 4.0]] * 2)


@pytest.mark.parametrize("op", ["@", "mm"])
def test_matmul_error_names_both_shapes(m, op):
    a = f64(m, np.ones((2, 3)).tolist(), requires_grad=True)
    b = f64(m, np.ones((4, 5)).tolist(), requires_grad=True)
    matmul = (lambda p, q: p @ q) if op == "@" else m.mm
    with raises("mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"):
        matmul(a, b)
    out = matmul(a, b[:3])
    assert tuple(out.shape) == (2, 5)
    out.sum().backward()
    assert_values(a.grad, np.full((2, 3), 5.0))


def test_requires_grad_on_non_leaf(m):
    x = f64(m, [1.0, 2.0], requires_grad=True)
    y = x * 2
    with raises("you can only change requires_grad flags of leaf variables"):
        y.requires_grad = False
    with raises("you can only change requires_grad flags of leaf variables"):
        y.requires_grad_(False)
    assert y.requires_grad and not y.is_leaf
    y.sum().backward()
    assert_values(x.grad, [2.0, 2.0])
    d = y.detach().requires_grad_()  # the fix the message suggests
    assert d.is_leaf and d.requires_grad


def test_numpy_on_tensor_requiring_grad(m):
    x = f64(m, [1.0, 2.0], requires_grad=True)
    with raises("Can't call numpy() on Tensor that requires grad"):
        x.numpy()
    np.testing.assert_array_equal(x.detach().numpy(), [1.0, 2.0])
    assert x.requires_grad


def test_item_on_multi_element_tensor(m):
    x = f64(m, [1.0, 2.0])
    with raises("a Tensor with 2 elements cannot be converted to Scalar"):
        x.item()
    assert x[1].item() == 2.0
    assert x.sum().item() == 3.0

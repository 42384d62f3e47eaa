"""User errors raise PyTorch's exception, with PyTorch's message, never NumPy's; and the
inputs PyTorch accepts (a 0-d tensor's dim 0 and -1, logsumexp of integers, tensor bounds
of clamp) give PyTorch's values.  Every case runs on torch 2.13 and on tapegrad, and the
two outcomes (exception type and first line of the message, or the value) must agree."""
import numpy as np
import pytest
import torch

import tapegrad


def outcome(m, src, env=None):
    """(exception type, first message line) of ``src`` run with ``m``, or ("ok", value)."""
    try:
        r = eval(src, {"m": m, "np": np, **(env or {})})
    except Exception as e:                      # noqa: BLE001 (the outcome is compared)
        return type(e).__name__, str(e).split("\n")[0]
    return "ok", _value(r)


def _value(r):
    if isinstance(r, (tuple, list)):
        return [_value(v) for v in r]
    if isinstance(r, (torch.Tensor, tapegrad.Tensor)):
        return (str(r.dtype).split(".")[-1], list(r.shape), r.detach().numpy().tolist())
    return r


def same(src, env=None):
    want = outcome(torch, src, env)
    got = outcome(tapegrad, src, env)
    assert repr(got) == repr(want), f"{src}\n torch:    {want}\n tapegrad: {got}"  # (nan, -0.0)
    return want


F32, I64 = "dtype=m.float32", "dtype=m.int64"
PRODUCTS = [
    f"m.ones(3) @ m.ones(3, {F32})",
    f"m.ones(3, {I64}) @ m.ones(3)",
    f"m.dot(m.ones(3, {F32}), m.ones(3))",
    f"m.ones(3, {F32}).dot(m.ones(3))",
    f"m.matmul(m.ones(2, 3), m.ones(3, 2, {F32}))",
    f"m.mm(m.ones(2, 3, {F32}), m.ones(3, 2))",
    f"m.ones(2, 3).mm(m.ones(3, 2, {I64}))",
    f"m.ones(3, {F32}) @ m.ones(3, 2)",
    f"m.mv(m.ones(2, 3), m.ones(3, {F32}))",
    f"m.ones(2, 3, {F32}) @ m.ones(3)",
    f"m.ones(2, 3, {F32}).mv(m.ones(3))",
    f"m.bmm(m.ones(2, 2, 3), m.ones(2, 3, 2, {F32}))",
    f"m.ones(2, 2, 3, {F32}) @ m.ones(2, 3, 2)",
    f"m.ones(2, 2, 3) @ m.ones(3, 2, {F32})",
    f"m.ones(2, 2, 3) @ m.ones(3, {F32})",
    f"m.ones(3, {F32}) @ m.ones(2, 3, 2)",
    f"m.ones(2, 3, dtype=m.int32) @ m.ones(3, 2, {I64})",
    # shapes are checked before dtypes (dot: after)
    f"m.ones(2, 3, {F32}) @ m.ones(2, 2)",
    f"m.mv(m.ones(2, 3, {F32}), m.ones(2))",
    f"m.ones(3, {F32}) @ m.ones(2)",
    f"m.ones(2, 2, 3, {F32}) @ m.ones(3, 3, 2)",
    f"m.mv(m.ones(2, 2, {F32}), m.ones(2, 2))",
    "m.ones(2, 3) @ m.ones(4)",
    "m.ones(2, 3, 4) @ m.ones(3, 4, 5)",
    "m.outer(m.ones(2, 2), m.ones(2))",
    # same dtypes: still fine
    f"m.ones(2, 3, {F32}) @ m.ones(3, {F32})",
    f"m.ones(2, 3, {I64}) @ m.ones(3, 2, {I64})",
]


@pytest.mark.parametrize("src", PRODUCTS)
def test_products_take_no_mixed_dtypes(torch_float64, src):
    same(src)


ZERO_D = ["sum", "mean", "amax", "amin", "prod", "logsumexp", "softmax", "log_softmax", "std",
          "var", "norm", "argmax", "argmin", "max", "min", "cumsum", "squeeze"]


@pytest.mark.parametrize("name", ZERO_D)
@pytest.mark.parametrize("dim", [0, -1, 1, -2])
def test_a_0d_tensor_takes_dim_0_and_minus_1(torch_float64, name, dim):
    src = f"m.tensor(2.5).{name}(dim={dim})"
    if name in ("max", "min"):
        src += "[0]"
    same(src)
    if name not in ("argmax", "argmin", "squeeze") and dim in (0, -1):
        for keepdim in (True, False):
            if name in ("softmax", "log_softmax", "cumsum"):
                continue
            same(f"m.tensor(2.5).{name}(dim={dim}, keepdim={keepdim})"
                 + ("[0]" if name in ("max", "min") else ""))
            if name not in ("prod", "max", "min"):
                same(f"m.tensor(2.5).{name}(dim=({dim},), keepdim={keepdim})")


@pytest.mark.parametrize("name", ["sum", "mean", "amax", "prod", "logsumexp", "norm", "std"])
def test_a_0d_reduction_over_dim_0_has_pytorch_gradient(torch_float64, name):
    src = ("[x.grad for x in [m.tensor(1.5, requires_grad=True)] "
           f"if m.autograd.backward(x.{name}(dim=0) * 3.0) is None]")
    same(src)


@pytest.mark.parametrize("src", [
    "m.ones(2, 3).sum(dim=(0, 0))",
    "m.ones(2, 3).amax(dim=(1, -1))",
    "m.ones(2, 3).std(dim=(0, -2))",
    "m.ones(2, 3).logsumexp(dim=(1, 1))",
    "m.ones(2, 3).squeeze((0, 0))",
    "m.ones(2, 3).sum(dim=2)",
    "m.ones(2, 3).logsumexp(dim=-3)",
])
def test_reduction_dims_named_twice_or_out_of_range(torch_float64, src):
    same(src)


@pytest.mark.parametrize("src", [
    "m.tensor([True, False]).logsumexp(0)",
    "m.tensor(True).logsumexp(0)",
    "m.tensor([[1, 2], [3, 4]]).logsumexp(1)",
    "m.logsumexp(m.tensor([1, 2], dtype=m.int32), dim=0, keepdim=True)",
])
def test_logsumexp_of_bool_and_integers_is_floating(torch_float64, src):
    assert same(src)[0] == "ok"


def _assign(m, value_src):
    x = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x.grad = eval(value_src, {"m": m, "np": np})
    return x.grad


@pytest.mark.parametrize("value", [
    "m.ones(2)", "m.ones(1, 3)", "m.ones(())", "m.ones(3, dtype=m.float32)",
    "m.ones(3, dtype=m.int64)", "m.ones(2, dtype=m.float32)", "[1.0, 2.0, 3.0]", "1.0",
    "np.ones(3)", "None", "m.ones(3)", "m.ones(3, requires_grad=True)",
])
def test_assigned_grad_is_checked(torch_float64, value):
    same(f"assign(m, {value!r})", {"assign": _assign})


def test_a_refused_grad_leaves_the_old_one_and_backward_accumulates(both):
    def program(m):
        x = m.tensor([1.0, 2.0], requires_grad=True)
        (x * x).sum().backward()
        with pytest.raises(RuntimeError):
            x.grad = m.ones(3)
        with pytest.raises(TypeError):
            x.grad = [0.0, 0.0]
        (x * x).sum().backward()
        g = x.grad.clone()
        x.grad = m.zeros(2)
        del x.grad
        return g, x.grad
    (gt, nt), (gg, ng) = both(program)
    assert gg.tolist() == gt.tolist() == [4.0, 8.0] and nt is None and ng is None
    y = tapegrad.tensor(2.0, requires_grad=True)        # the 0-d fast path
    (y * y).backward()
    with pytest.raises(RuntimeError, match="to a tensor of size"):
        y.grad = tapegrad.ones(1)


SHAPES = [
    # cat / stack
    "m.cat([m.ones(2, 3), m.ones(3, 2)])",
    "m.cat([m.ones(2, 3), m.ones(2, 3), m.ones(3, 2)])",
    "m.cat([m.ones(2, 3), m.ones(3, 2)], dim=1)",
    "m.cat([m.ones(2, 3), m.ones(3)])",
    "m.cat([m.ones(2, 3), m.ones(())])",
    "m.cat([m.ones(2, 3), m.ones(0)])",
    "m.cat([m.ones(0), m.ones(2, 3)], dim=1)",
    "m.cat([m.ones(0), m.ones(0)])",
    "m.cat([m.ones(2, 3), m.ones(2, 3)], dim=2)",
    "m.cat([])",
    "m.stack([m.ones(2, 3), m.ones(2, 3), m.ones(3, 2)])",
    "m.stack([m.ones(2, 3), m.ones(2, 3)], dim=3)",
    # reshape / view / flatten
    "m.ones(2, 3).reshape(4, 2)",
    "m.ones(2, 3).reshape(-1, -1)",
    "m.ones(2, 3).reshape(2, -2)",
    "m.ones(2, 3).view(-1, 4)",
    "m.ones(0, 3).reshape(-1, 0)",
    "m.ones(2, 3).reshape(-1, 2)",
    "m.ones(2, 3).flatten(1, 0)",
    "m.ones(()).flatten(1)",
    # expand / broadcasting
    "m.ones(2, 3).expand(3)",
    "m.ones(2, 3, dtype=m.float32).expand(3)",
    "m.ones(2, 3, dtype=m.bool).expand(1)",
    "m.ones(2, 3).expand(4, 2)",
    "m.ones(2, 3).expand(2, 3, 4)",
    "m.ones(2, 3).expand(-1, -1, 3)",
    "m.ones(2, 3) + m.ones(3, 2)",
    "m.ones(2, 3, 4) * m.ones(3, 1)",
    "m.maximum(m.ones(2, 3), m.ones(3, 2))",
    "m.where(m.ones(2, 3) > 0, m.ones(2, 3), m.ones(3, 2))",
    "m.ones(2, 3).clamp(min=m.ones(3, 2))",
    # dims
    "m.ones(2, 3).transpose(0, 2)",
    "m.tensor(2.0).transpose(0, -1)",
    "m.ones(2, 3).permute(0, 0)",
    "m.ones(2, 3).permute(1, -1)",
    "m.ones(2, 3).permute(0, 1, 2)",
    "m.ones(2, 3).permute(0)",
    "m.ones(2, 3).squeeze(2)",
    "m.ones(2, 3).unsqueeze(-4)",
    "m.ones(2, 3).split(0)",
    "m.ones(2, 3).chunk(0)",
    "m.ones(2, 3).split([1, 1])",
    "m.ones(2, 3).unbind(2)",
]


@pytest.mark.parametrize("src", SHAPES)
def test_shape_errors_are_pytorchs(torch_float64, src):
    same(src)


INDEXING = [
    "m.ones(2, 3)[2]",
    "m.ones(2, 3)[0, 3]",
    "m.ones(2, 3)[-3]",
    "m.ones(2, 3)[0, 0, 0]",
    "m.ones(2, 3)[..., 0, 0, 0]",
    "m.ones(2, 3)[m.tensor([0]), 0, 0]",
    "m.ones(2, 3)[m.tensor([0, 5])]",
    "m.ones(2, 3)[:, m.tensor([3])]",
    "m.ones(2, 3)[0, m.tensor([3])]",
    "m.ones(2, 3, 4)[:, m.tensor([0]), m.tensor([4])]",
    "m.ones(2, 3)[:, [0, 5]]",
    "m.ones(2, 3)[m.tensor([True, False, True])]",
    "m.ones(2, 3)[:, m.tensor([True, False])]",
    "m.ones(2, 3)[m.tensor([[True, False, True]])]",
    "m.ones(2, 3)[m.tensor([0.5])]",
    "m.ones(2, 3)[0.5]",
    "m.ones(2, 3)[0:5:0]",
    "m.ones(2, 3)[::-1]",
    "m.ones(2, 3)[m.tensor([0, 1]), m.tensor([0, 1, 2])]",
    "m.ones(3)[5]",
    "m.tensor(1.0)[0]",
    # ints past int64: PyTorch's ValueError (an IndexError, or NumPy's OverflowError, before)
    "m.ones(3)[2 ** 70]", "m.ones(3)[-2 ** 63 - 1]", "m.ones(3)[2 ** 63]",
    "m.ones(2, 3)[0, 2 ** 63]", "m.ones(2, 3)[..., -2 ** 64]", "m.ones(3)[2 ** 62]",
    "m.ones(3).__setitem__(2 ** 70, 1.0)", "m.ones(2, 3).__setitem__((0, 2 ** 63), 1.0)",
]


@pytest.mark.parametrize("src", INDEXING)
def test_indexing_errors_are_pytorchs(torch_float64, src):
    same(src)


FACTORIES = [
    "m.zeros(-1)", "m.zeros(2, -3)", "m.ones(-1)", "m.ones(2, -1)", "m.empty(-1)",
    "m.full((-1,), 1.0)", "m.rand(-1)", "m.randn(2, -1)",
    "m.eye(-1)", "m.eye(2, -1)",
    "m.arange(0, 5, 0)", "m.arange(5, 0, 1)", "m.arange(0, 5, -1)", "m.arange(5, 0, -2)",
    "m.linspace(0, 1, -1)",
    "m.tensor([[1.0, 2.0], [3.0]])", "m.tensor([[[1.0, 2.0]], [[3.0]]])",
    "m.tensor([[1.0, 2.0], 3.0])", "m.tensor([1.0, [2.0]])", "m.tensor(None)",
    # Python ints past int64: PyTorch's ValueError where the tensor is of integers (2 ** 63
    # was -2 ** 63, silently, even with dtype=float64), floats where it is of floats
    "m.tensor(2 ** 63)", "m.tensor(2 ** 70)", "m.tensor(-2 ** 63 - 1)", "m.tensor(-2 ** 63)",
    "m.tensor([1, 2 ** 63])", "m.tensor([[1, 2], [-1, 2 ** 64]])", "m.tensor([True, 2 ** 64])",
    "m.tensor(2 ** 63, dtype=m.float64)", "m.tensor([1, 2 ** 70], dtype=m.float32)",
    "m.tensor([1.5, 2 ** 70])", "m.tensor([2 ** 70, 1.5], dtype=m.int64)",
    "m.tensor(2 ** 64, dtype=m.int64)",
    # Python numbers outside an integer dtype asked for: PyTorch's error (C's cast gave
    # -2 ** 63, or wrapped round); floats compared as doubles (int64's 2 ** 63 is in, as
    # there), ints into uint8 from -255 on; NumPy arrays and .to() cast without a check
    "m.tensor([1e19, 2], dtype=m.int64)", "m.tensor(-1e19, dtype=m.int64)",
    "m.tensor([9.3e18], dtype=m.int64)", "m.tensor([9.2e18], dtype=m.int64)",
    "m.tensor([2.0 ** 63], dtype=m.int64)", "m.tensor([-2.0 ** 63], dtype=m.int64)",
    "m.tensor([float('inf')], dtype=m.int64)", "m.tensor([1, float('nan')], dtype=m.int64)",
    "m.tensor([[1.0], [3e9]], dtype=m.int32)", "m.tensor([2147483647.5], dtype=m.int32)",
    "m.tensor([2147483647.0, -2147483648.0], dtype=m.int32)", "m.tensor(-2147483648.5, "
    "dtype=m.int32)", "m.tensor([1e5], dtype=m.int16)", "m.tensor([127.9], dtype=m.int8)",
    "m.tensor([300], dtype=m.int8)", "m.tensor([-129], dtype=m.int8)",
    "m.tensor([-0.5], dtype=m.uint8)", "m.tensor([255.0, 255.5], dtype=m.uint8)",
    "m.tensor([-255, 255], dtype=m.uint8)", "m.tensor([-256], dtype=m.uint8)",
    "m.tensor([True, 1e19], dtype=m.int64)", "m.tensor([1e19], dtype=m.bool)",
    "m.tensor([np.float64(1e19)], dtype=m.int64)", "m.as_tensor([1e19], dtype=m.int32)",
    "m.tensor(np.array([1e19, 2.0]), dtype=m.int64)", "m.tensor([1e19, 2.0]).to(m.int64)",
    "m.tensor([1e19]).long()", "m.tensor([1e39], dtype=m.float32)",
    "m.arange(0, 1e19, 1e18, dtype=m.int64)", "m.arange(0, 10, 1e19, dtype=m.int64)",
    "m.arange(0, 300, dtype=m.uint8)", "m.arange(0.0, 4e4, 1e4, dtype=m.int16)",
]


@pytest.mark.parametrize("src", FACTORIES)
def test_factory_errors_are_pytorchs(torch_float64, src):
    same(src)


# max_pool2d reads its sizes as C ints (past int32: PyTorch's RuntimeError; it computed),
# max_pool1d and conv as int64s; past int64 every one is PyTorch's ValueError (it was
# OverflowError)
POOL_SIZES = [
    f"m.nn.functional.{f}(m.ones(1, 1, 4, 4){a}, {args})"
    for f, a in [("max_pool2d", ", 2"), ("max_pool1d", "[0], 2"),
                 ("conv2d", ", m.ones(1, 1, 2, 2)")]
    for args in ["stride=2 ** 31", "stride=2 ** 40", "stride=2 ** 62", "stride=2 ** 63",
                 "stride=-2 ** 63 - 1", "stride=2 ** 64"]] + [
    f"m.nn.functional.max_pool2d(m.ones(1, 1, 4, 4), {args})"
    for args in ["2 ** 40", "2, padding=2 ** 62", "2, dilation=-2 ** 63 - 1", "2, 2 ** 64",
                 "2, stride=(1, 2 ** 31 - 1)", "2, stride=(1, -2 ** 31 - 1)"]]


@pytest.mark.parametrize("src", POOL_SIZES)
def test_pooling_sizes_past_c_ints(torch_float64, src):
    same(src)


@pytest.mark.parametrize("x", ["[0.0, -2.0, 3.0]", "[[0.0, 1.0], [float('inf'), 0.0]]", "1.5"])
def test_norm_of_order_0_counts_the_nonzeros(torch_float64, x):
    same(f"m.tensor({x}).norm(0)")
    same(f"m.tensor({x}).norm(p=0, dim=-1, keepdim=True)")
    # (no gradient: PyTorch's is undefined, so None alone, tapegrad's zero)
    same(f"[v.grad for v in [m.tensor({x}, requires_grad=True)] "
         "if m.autograd.backward(v.norm(0) * 3.0 + v.sum()) is None]")


@pytest.mark.parametrize("name", ["fmod", "maximum", "minimum", "hypot", "atan2", "arctan2"])
def test_a_python_number_input_is_refused_where_pytorchs_is(torch_float64, name):
    """PyTorch's functions of these take a tensor input (tapegrad's computed)."""
    same(f"m.{name}(2.5, m.ones(2))")
    same(f"m.{name}(2, m.ones(2))")
    same(f"m.{name}(m.ones(2), m.ones(2))")


def test_max_and_min_of_two_tensors(torch_float64):
    same("m.ones(2, 3).max(m.zeros(3))")
    same("m.min(m.ones(2, 3), m.zeros(2, 1) + 2)")
    same("m.ones(2, 3).min(m.ones(3, 2))")


@pytest.mark.parametrize("bounds", ["lo, hi", "min=lo", "max=hi", "lo, 1.5", "max=nan_lo",
                                    "nan_lo, hi", "hi, nan_lo"])
def test_clamp_with_tensor_bounds(torch_float64, bounds):
    def program(m):
        inf, nan = float("inf"), float("nan")
        x = m.tensor([[0.0, 1.0, 2.0, -inf, 1.0], [nan, 4.0, -1.0, inf, 2.0]],
                     requires_grad=True)
        lo = m.tensor([1.0, 1.0, 3.0, 2.0, 2.0], requires_grad=True)   # (lo == hi, lo > hi)
        hi = m.tensor([[0.5, 2.0, 2.5, 2.0, 2.0]], requires_grad=True)
        nan_lo = m.tensor([nan, 0.0, 0.0, nan, 1.0], requires_grad=True)
        y = eval(f"m.clamp(x, {bounds})")
        y.backward(m.tensor([[1.0, 2.0, 3.0, 4.0, 5.0], [6.0, 7.0, 8.0, 9.0, 10.0]]))
        return [y.grad_fn.name(), _value(y)] + [_value(v.grad) if v.grad is not None else None
                                                for v in (x, lo, hi, nan_lo)]
    want, got = (outcome(m, "program(m)", {"program": program}) for m in (torch, tapegrad))
    np.testing.assert_equal(got, want)

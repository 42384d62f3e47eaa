"""Oracle tests: every program runs twice, once with ``m = torch`` and once with
``m = tapegrad``, and the two runs must agree on

* forward values, shapes and dtypes (rtol 1e-10 in float64, 1e-5 in float32),
* ``requires_grad`` / ``is_leaf`` of every recorded tensor,
* ``.grad`` of every leaf after backward,
* ``grad_fn.name()`` and the whole ``next_functions`` graph below it: node
  names, ``None`` positions, ``input_nr``, and which leaf each
  ``AccumulateGrad.variable`` is.

The candidate module is parametrized over ``["torch", "tapegrad"]``: the torch
run checks the programs and the expected names against PyTorch itself, the
tapegrad run is the real test.  Expected root names in the tables are what
torch 2.13 produces; they are asserted for both modules.
"""
import importlib
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest
import torch

ACCUMULATE_GRAD = "torch::autograd::AccumulateGrad"
TOLERANCES = {np.dtype("float64"): dict(rtol=1e-10, atol=1e-12),
              np.dtype("float32"): dict(rtol=1e-5, atol=1e-6)}


pytestmark = pytest.mark.usefixtures("torch_float64")


@pytest.fixture(params=["torch", "tapegrad"])
def m(request):
    return importlib.import_module(request.param)




# --------------------------------------------------------------------------
# Describing a run in framework-neutral terms, and comparing two descriptions
# --------------------------------------------------------------------------

def graph_signature(fn, leaves):
    """Nested tuple describing the autograd graph hanging off ``fn``.

    AccumulateGrad nodes are identified by the position (in ``leaves``) of the
    tensor their ``.variable`` is; a variable that is not one of the leaves
    shows up as ``"<not a leaf of this program>"``.
    """
    if fn is None:
        return None
    name = fn.name()
    # recognise the node by role too, so a mere name deviation still shows the leaf
    if name == ACCUMULATE_GRAD or name.endswith("AccumulateGrad") or hasattr(fn, "variable"):
        variable = getattr(fn, "variable", None)
        index = next((i for i, leaf in enumerate(leaves) if leaf is variable),
                     "<not a leaf of this program>")
        return (name, ("leaf", index), tuple(fn.next_functions))
    children = tuple((graph_signature(child, leaves), input_nr)
                     for child, input_nr in fn.next_functions)
    return (name, children)


def describe(value, m, leaves):
    """Framework-neutral description of a (nest of) result value(s)."""
    if isinstance(value, m.Tensor):
        return {
            "values": np.array(value.detach().numpy(), copy=True),
            "shape": tuple(value.shape),
            "requires_grad": value.requires_grad,
            "is_leaf": value.is_leaf,
            "grad_fn": graph_signature(value.grad_fn, leaves),
        }
    if isinstance(value, dict):
        return {k: describe(v, m, leaves) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [describe(v, m, leaves) for v in value]
    return value  # None, bool, int, float, str


def differences(ref, got, path="result"):
    """Yield every way ``got`` differs from torch's ``ref`` (all, not just the first)."""
    if isinstance(ref, np.ndarray):
        if not isinstance(got, np.ndarray):
            yield f"{path}: expected an array, got {got!r}"
            return
        if got.dtype != ref.dtype:
            yield f"{path}: dtype {got.dtype}, torch gives {ref.dtype}"
        if got.shape != ref.shape:
            yield f"{path}: shape {got.shape}, torch gives {ref.shape}"
        if got.size == ref.size:  # values are still worth comparing
            try:
                np.testing.assert_allclose(got.reshape(ref.shape), ref,
                                           **TOLERANCES.get(ref.dtype, dict(rtol=0, atol=0)))
            except AssertionError as e:
                yield f"{path}: values differ{e}"
    elif isinstance(ref, dict):
        if not isinstance(got, dict) or got.keys() != ref.keys():
            yield f"{path}: got {got!r}, torch gives {ref!r}"
            return
        for key in ref:
            yield from differences(ref[key], got[key], f"{path}.{key}")
    elif isinstance(ref, list):
        if not isinstance(got, list) or len(got) != len(ref):
            yield f"{path}: got {got!r}, torch gives {ref!r}"
            return
        for i, (r, g) in enumerate(zip(ref, got)):
            yield from differences(r, g, f"{path}[{i}]")
    elif got != ref:
        yield f"{path}: got {got!r}, torch gives {ref!r}"


def assert_same(ref, got):
    problems = list(differences(ref, got))
    assert not problems, "\n".join(problems)


def run_and_compare(scenario, m):
    """``scenario(m) -> (results, leaves)`` run on torch and on ``m``; compare."""
    descriptions = []
    for module in (torch, m):
        results, leaves = scenario(module)
        descriptions.append(describe(results, module, leaves))
    ref, got = descriptions
    assert_same(ref, got)
    return got


def weights_like(out, m):
    """A fixed, non-uniform cotangent (so transposed/permuted grads show up)."""
    shape = tuple(out.shape)
    w = np.linspace(0.5, 1.5, int(np.prod(shape, dtype=int))).reshape(shape)
    return m.tensor(w.tolist(), dtype=out.dtype)


def backprop(out, m):
    if out.numel() == 1:
        out.backward()
    else:
        (out * weights_like(out, m)).sum().backward()


# --------------------------------------------------------------------------
# Program table
# --------------------------------------------------------------------------

X = [[0.5, -1.2, 2.0, 0.3], [1.5, 0.7, -0.4, 2.2], [-1.1, 0.9, 1.3, -0.6]]  # (3, 4)
Y = [[0.2, -0.5, 1.0, 0.4, -0.3], [0.8, 0.1, -0.9, 0.6, 1.1],
     [-0.7, 0.3, 0.5, -1.4, 0.9], [1.2, -0.2, 0.7, 0.05, -0.6]]            # (4, 5)
V3 = [0.5, -1.2, 2.0]
V4 = [1.5, 0.7, -0.4, 2.2]
B1 = np.linspace(-1.0, 1.0, 24).reshape(2, 3, 4).tolist()                  # (2, 3, 4)
B2 = np.linspace(0.5, -0.8, 40).reshape(2, 4, 5).tolist()                  # (2, 4, 5)


def leaf(m, data, dt, requires_grad=True):
    return m.tensor(data, dtype=getattr(m, dt), requires_grad=requires_grad)


@dataclass
class Case:
    id: str
    prog: Callable  # prog(m, dt) -> (out, leaves)
    name: str       # torch's out.grad_fn.name()


def unary(fn, x0=0.7):
    """0-d input x0 -> fn(m, x)."""
    def prog(m, dt):
        x = leaf(m, x0, dt)
        return fn(m, x), [x]
    return prog


def binary(fn, a0=1.5, b0=0.5):
    """Two 0-d inputs."""
    def prog(m, dt):
        a, b = leaf(m, a0, dt), leaf(m, b0, dt)
        return fn(m, a, b), [a, b]
    return prog


def on(data, fn, *more):
    """fn(m, x, *others) where each datum becomes a leaf requiring grad."""
    def prog(m, dt):
        leaves = [leaf(m, d, dt) for d in (data,) + more]
        return fn(m, *leaves), leaves
    return prog


def with_constant(data, const, fn):
    """fn(m, x, c) where c does not require grad (shows as None in next_functions)."""
    def prog(m, dt):
        x, c = leaf(m, data, dt), leaf(m, const, dt, requires_grad=False)
        return fn(m, x, c), [x]
    return prog


def issue_example(m, dt):
    x = m.tensor([2.0], requires_grad=True)  # the default dtype
    y = x * 3
    z = y + 5
    return z, [x]


def seed_example(m, dt):
    x1 = m.tensor(2.0, requires_grad=True)
    x2 = m.tensor(3.0, requires_grad=True)
    return x1 * x2, [x1, x2]


def scalar_chain(m, dt):
    x, y = leaf(m, 0.7, dt), leaf(m, 1.3, dt)
    out = (x.exp() * y.log() + x.sin() / y.cos()).tanh() ** 2 - x.sqrt().sigmoid()
    return out, [x, y]


def scalar_chain_reuse(m, dt):
    x = leaf(m, 0.4, dt)
    y = x * x          # x used twice by the same node
    z = y.exp() + y    # y used by two nodes
    return z * x, [x]


def split_both_outputs(m, dt):
    x = leaf(m, X, dt)
    first, second = x.split(2)  # (2, 4) and (1, 4)
    return first * second, [x]


def unbind_two_outputs(m, dt):
    x = leaf(m, X, dt)
    a, _, c = x.unbind()
    return a * c, [x]


def unbind_vector(m, dt):
    a, b, _, d = (x := leaf(m, V4, dt)).unbind()   # 0-d pieces of a 1-d tensor
    return a * d + b, [x]


def iterate_rows(m, dt):
    x = leaf(m, X, dt)
    rows = list(x)
    return rows[2] - rows[0], [x]


def max_dim_values_and_indices(m, dt):
    x = leaf(m, X, dt)
    values, indices = x.max(dim=1)
    return values * indices, [x]


CASES = [
    # --- examples from the issue / README --------------------------------
    Case("issue_x_mul_3_add_5", issue_example, "AddBackward0"),
    Case("seed_x1_mul_x2", seed_example, "MulBackward0"),
    # --- unary ops on 0-d tensors --------------------------------------------
    Case("exp", unary(lambda m, x: x.exp()), "ExpBackward0"),
    Case("m.exp", unary(lambda m, x: m.exp(x)), "ExpBackward0"),
    Case("log", unary(lambda m, x: x.log()), "LogBackward0"),
    Case("sin", unary(lambda m, x: m.sin(x)), "SinBackward0"),
    Case("cos", unary(lambda m, x: x.cos()), "CosBackward0"),
    Case("tan", unary(lambda m, x: x.tan()), "TanBackward0"),
    Case("tanh", unary(lambda m, x: m.tanh(x)), "TanhBackward0"),
    Case("sigmoid", unary(lambda m, x: x.sigmoid()), "SigmoidBackward0"),
    Case("m.sigmoid", unary(lambda m, x: m.sigmoid(x)), "SigmoidBackward0"),
    Case("sqrt", unary(lambda m, x: x.sqrt()), "SqrtBackward0"),
    Case("rsqrt", unary(lambda m, x: x.rsqrt()), "RsqrtBackward0"),
    Case("pow_float", unary(lambda m, x: x.pow(2.5)), "PowBackward0"),
    Case("square", unary(lambda m, x: x.square()), "PowBackward0"),
    Case("abs_neg", unary(lambda m, x: x.abs(), -0.7), "AbsBackward0"),
    Case("builtin_abs", unary(lambda m, x: abs(x), -0.7), "AbsBackward0"),
    Case("relu_pos", unary(lambda m, x: x.relu()), "ReluBackward0"),
    Case("relu_neg", unary(lambda m, x: m.relu(x), -0.7), "ReluBackward0"),
    Case("F.relu", unary(lambda m, x: m.nn.functional.relu(x)), "ReluBackward0"),
    Case("F.softplus", unary(lambda m, x: m.nn.functional.softplus(x)), "SoftplusBackward0"),
    Case("neg", unary(lambda m, x: -x), "NegBackward0"),
    Case("reciprocal", unary(lambda m, x: x.reciprocal()), "ReciprocalBackward0"),
    Case("erf", unary(lambda m, x: x.erf()), "ErfBackward0"),
    Case("log1p", unary(lambda m, x: x.log1p()), "Log1PBackward0"),
    Case("expm1", unary(lambda m, x: m.expm1(x)), "Expm1Backward0"),
    Case("sign", unary(lambda m, x: x.sign(), -0.7), "SignBackward0"),
    Case("clamp_inside", unary(lambda m, x: x.clamp(0.0, 1.0)), "ClampBackward1"),
    Case("clamp_outside", unary(lambda m, x: m.clamp(x, 0.0, 0.5)), "ClampBackward1"),
    Case("clamp_min_only", unary(lambda m, x: x.clamp(min=1.0)), "ClampBackward1"),
    Case("scalar_chain", scalar_chain, "SubBackward0"),
    Case("scalar_chain_reuse", scalar_chain_reuse, "MulBackward0"),
    # --- binary ops on 0-d tensors -------------------------------------------
    Case("add", binary(lambda m, a, b: a + b), "AddBackward0"),
    Case("sub", binary(lambda m, a, b: a - b), "SubBackward0"),
    Case("mul", binary(lambda m, a, b: a * b), "MulBackward0"),
    Case("div", binary(lambda m, a, b: a / b), "DivBackward0"),
    Case("tensor_pow_tensor", binary(lambda m, a, b: a ** b), "PowBackward1"),
    Case("m.pow", binary(lambda m, a, b: m.pow(a, b)), "PowBackward1"),
    Case("minimum", binary(lambda m, a, b: m.minimum(a, b)), "MinimumBackward0"),
    Case("maximum", binary(lambda m, a, b: m.maximum(a, b)), "MaximumBackward0"),
    Case("where", binary(lambda m, a, b: m.where(a > b, a, b)), "WhereBackward0"),
    # --- python scalars on either side ---------------------------------------
    Case("x_add_2", unary(lambda m, x: x + 2), "AddBackward0"),
    Case("2_add_x", unary(lambda m, x: 2 + x), "AddBackward0"),
    Case("x_sub_3", unary(lambda m, x: x - 3), "SubBackward0"),
    Case("3_sub_x", unary(lambda m, x: 3 - x), "RsubBackward1"),
    Case("x_mul_2.5", unary(lambda m, x: x * 2.5), "MulBackward0"),
    Case("2.5_mul_x", unary(lambda m, x: 2.5 * x), "MulBackward0"),
    Case("x_div_2", unary(lambda m, x: x / 2), "DivBackward0"),
    Case("2_div_x", unary(lambda m, x: 2 / x), "MulBackward0"),
    Case("x_pow_2", unary(lambda m, x: x ** 2), "PowBackward0"),
    Case("2_pow_x", unary(lambda m, x: 2 ** x), "PowBackward2"),
    # --- elementwise on vectors, incl. torch's subgradient conventions ------
    Case("relu_at_zero", on([-1.0, 0.0, 2.0], lambda m, x: x.relu()), "ReluBackward0"),
    Case("abs_at_zero", on([-1.0, 0.0, 2.0], lambda m, x: x.abs()), "AbsBackward0"),
    Case("clamp_at_bounds", on([-1.0, 0.0, 0.5, 1.0, 2.0], lambda m, x: x.clamp(0.0, 1.0)),
         "ClampBackward1"),
    Case("maximum_ties", on([1.0, 2.0, 3.0], lambda m, a, b: m.maximum(a, b), [1.0, 0.0, 3.0]),
         "MaximumBackward0"),
    Case("minimum_ties", on([1.0, 2.0, 3.0], lambda m, a, b: m.minimum(a, b), [1.0, 0.0, 3.0]),
         "MinimumBackward0"),
    Case("where_vector", on(V3, lambda m, a, b: m.where(a > 0, a * a, b), [1.0, 2.0, 3.0]),
         "WhereBackward0"),
    Case("softplus_matrix", on(X, lambda m, x: m.nn.functional.softplus(x)), "SoftplusBackward0"),
    # --- broadcasting ----------------------------------------------------------
    Case("bcast_col_plus_row", on([[1.0], [2.0], [3.0]], lambda m, a, b: a + b, [[0.5, -1.0, 2.0, 4.0]]),
         "AddBackward0"),
    Case("bcast_vec_mul_matrix", on(V4, lambda m, a, b: a * b, X), "MulBackward0"),
    Case("bcast_0d_mul_vec", on(2.0, lambda m, a, b: a * b, V3), "MulBackward0"),
    Case("bcast_vec_div_0d", on(V3, lambda m, a, b: a / b, 2.0), "DivBackward0"),
    Case("bcast_3d_sub_2d", on(B1, lambda m, a, b: a - b, X), "SubBackward0"),
    Case("bcast_unsqueezed", on(V3, lambda m, a, b: a[:, None] + b[None, :], V4), "AddBackward0"),
    Case("bcast_with_constant", with_constant(X, V4, lambda m, x, c: x + c), "AddBackward0"),
    Case("constant_times_x", with_constant(X, V4, lambda m, x, c: c * x), "MulBackward0"),
    # --- reductions --------------------------------------------------------------
    Case("sum", on(X, lambda m, x: x.sum()), "SumBackward0"),
    Case("m.sum", on(X, lambda m, x: m.sum(x)), "SumBackward0"),
    Case("sum_dim1", on(X, lambda m, x: x.sum(1)), "SumBackward1"),
    Case("sum_dim0_keepdim", on(X, lambda m, x: x.sum(dim=0, keepdim=True)), "SumBackward1"),
    Case("sum_dims_tuple", on(B1, lambda m, x: x.sum((0, 2))), "SumBackward1"),
    Case("sum_neg_dim", on(B1, lambda m, x: m.sum(x, dim=-1)), "SumBackward1"),
    Case("mean", on(X, lambda m, x: x.mean()), "MeanBackward0"),
    Case("mean_dim1", on(X, lambda m, x: x.mean(1)), "MeanBackward1"),
    Case("mean_dim0_keepdim", on(X, lambda m, x: m.mean(x, dim=0, keepdim=True)), "MeanBackward1"),
    Case("prod", on(X, lambda m, x: x.prod()), "ProdBackward0"),
    Case("prod_dim1", on(X, lambda m, x: x.prod(1)), "ProdBackward1"),
    Case("prod_dim1_keepdim", on(X, lambda m, x: x.prod(1, keepdim=True)), "ProdBackward1"),
    Case("amax_dim1", on(X, lambda m, x: x.amax(1)), "AmaxBackward0"),
    Case("amax_full", on(X, lambda m, x: x.amax()), "AmaxBackward0"),
    Case("amin_dim0_keepdim", on(X, lambda m, x: x.amin(0, keepdim=True)), "AminBackward0"),
    Case("max_full", on(X, lambda m, x: x.max()), "MaxBackward1"),
    Case("min_full", on(X, lambda m, x: m.min(x)), "MinBackward1"),
    Case("max_dim", on(X, lambda m, x: x.max(1)[0]), "MaxBackward0"),
    Case("max_dim_values", on(X, lambda m, x: x.max(dim=1, keepdim=True).values), "MaxBackward0"),
    Case("min_dim", on(X, lambda m, x: x.min(0)[0]), "MinBackward0"),
    Case("max_dim_with_indices", max_dim_values_and_indices, "MulBackward0"),
    Case("max_full_ties", on([[1.0, 3.0, 3.0], [2.0, 3.0, 0.0]], lambda m, x: x.max()), "MaxBackward1"),
    Case("amax_ties", on([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]], lambda m, x: x.amax(1)), "AmaxBackward0"),
    Case("var", on(X, lambda m, x: x.var()), "VarBackward0"),
    Case("var_dim1", on(X, lambda m, x: x.var(1)), "VarBackward0"),
    Case("std", on(X, lambda m, x: x.std()), "StdBackward0"),
    Case("std_dim0_keepdim", on(X, lambda m, x: x.std(0, keepdim=True)), "StdBackward0"),
    Case("norm", on(X, lambda m, x: x.norm()), "LinalgVectorNormBackward0"),
    Case("norm_dim1", on(X, lambda m, x: x.norm(dim=1)), "LinalgVectorNormBackward0"),
    Case("m.norm", on(X, lambda m, x: m.norm(x)), "LinalgVectorNormBackward0"),
    # --- matmul family -----------------------------------------------------------
    Case("mm", on(X, lambda m, a, b: m.mm(a, b), Y), "MmBackward0"),
    Case("matmul_2d", on(X, lambda m, a, b: a @ b, Y), "MmBackward0"),
    Case("m.matmul_2d", on(X, lambda m, a, b: m.matmul(a, b), Y), "MmBackward0"),
    Case("dot", on(V4, lambda m, a, b: m.dot(a, b), [0.3, -0.2, 1.1, 0.5]), "DotBackward0"),
    Case("matmul_1d_1d", on(V4, lambda m, a, b: a @ b, [0.3, -0.2, 1.1, 0.5]), "DotBackward0"),
    Case("mv", on(X, lambda m, a, b: m.mv(a, b), V4), "MvBackward0"),
    Case("matmul_2d_1d", on(X, lambda m, a, b: a @ b, V4), "MvBackward0"),
    Case("matmul_1d_2d", on(V3, lambda m, a, b: a @ b, X), "SqueezeBackward4"),
    Case("bmm", on(B1, lambda m, a, b: m.bmm(a, b), B2), "BmmBackward0"),
    Case("outer", on(V3, lambda m, a, b: m.outer(a, b), V4), "MulBackward0"),
    Case("mm_with_constant", with_constant(X, Y, lambda m, x, c: x @ c), "MmBackward0"),
    # --- shape ops --------------------------------------------------------------
    Case("reshape", on(X, lambda m, x: x.reshape(4, 3)), "ViewBackward0"),
    Case("reshape_infer", on(X, lambda m, x: m.reshape(x, (2, -1))), "ViewBackward0"),
    Case("view", on(X, lambda m, x: x.view(-1)), "ViewBackward0"),
    Case("flatten", on(B1, lambda m, x: x.flatten()), "ViewBackward0"),
    Case("T", on(X, lambda m, x: x.T), "PermuteBackward0"),
    Case("t", on(X, lambda m, x: x.t()), "TBackward0"),
    Case("transpose", on(X, lambda m, x: x.transpose(0, 1)), "TransposeBackward0"),
    Case("m.transpose_3d", on(B1, lambda m, x: m.transpose(x, 0, 2)), "TransposeBackward0"),
    Case("permute", on(B1, lambda m, x: x.permute(2, 0, 1)), "PermuteBackward0"),
    Case("squeeze_all", on([[[1.0, 2.0, 3.0]]], lambda m, x: x.squeeze()), "SqueezeBackward0"),
    Case("squeeze_dim", on([[[1.0, 2.0, 3.0]]], lambda m, x: x.squeeze(1)), "SqueezeBackward1"),
    Case("unsqueeze", on(X, lambda m, x: x.unsqueeze(1)), "UnsqueezeBackward0"),
    Case("expand", on([[1.0], [2.0], [3.0]], lambda m, x: x.expand(3, 4)), "ExpandBackward0"),
    Case("expand_new_dim", on(V4, lambda m, x: x.expand(2, 4)), "ExpandBackward0"),
    Case("cat", on(X, lambda m, a, b: m.cat([a, b]), [V4]), "CatBackward0"),
    Case("cat_dim1", on(X, lambda m, a, b: m.cat([a, b, a], dim=1), [[1.0], [2.0], [3.0]]),
         "CatBackward0"),
    Case("stack", on(V3, lambda m, a, b: m.stack([a, b]), [0.1, 0.2, 0.3]), "StackBackward0"),
    Case("stack_dim1", on(V3, lambda m, a, b: m.stack([a, b, a], dim=1), [0.1, 0.2, 0.3]),
         "StackBackward0"),
    Case("split", on(X, lambda m, x: x.split(2)[1]), "SplitBackward0"),
    Case("split_both_outputs", split_both_outputs, "MulBackward0"),
    Case("chunk", on(X, lambda m, x: x.chunk(2, dim=1)[1]), "SplitBackward0"),
    Case("unbind", on(X, lambda m, x: x.unbind(1)[2]), "UnbindBackward0"),
    Case("unbind_two_outputs", unbind_two_outputs, "MulBackward0"),
    Case("unbind_vector", unbind_vector, "AddBackward0"),
    Case("iterate_rows", iterate_rows, "SubBackward0"),
    # --- indexing ---------------------------------------------------------------
    Case("index_int", on(X, lambda m, x: x[1]), "SelectBackward0"),
    Case("index_neg_int", on(X, lambda m, x: x[-1]), "SelectBackward0"),
    Case("index_int_int", on(X, lambda m, x: x[1, 2]), "SelectBackward0"),
    Case("index_ellipsis_int", on(X, lambda m, x: x[..., 0]), "SelectBackward0"),
    Case("index_slice", on(X, lambda m, x: x[:, 1:3]), "SliceBackward0"),
    Case("index_slice_dim0", on(X, lambda m, x: x[1:]), "SliceBackward0"),
    Case("index_slice_step", on(X, lambda m, x: x[:, ::2]), "SliceBackward0"),
    Case("index_none", on(X, lambda m, x: x[None]), "UnsqueezeBackward0"),
    Case("index_colon_none", on(X, lambda m, x: x[:, None]), "UnsqueezeBackward0"),
    Case("index_list", on(X, lambda m, x: x[[0, 2]]), "IndexBackward0"),
    Case("index_list_repeated", on(X, lambda m, x: x[[0, 0, 2]]), "IndexBackward0"),
    Case("index_long_tensor", on(X, lambda m, x: x[m.tensor([2, 0])]), "IndexBackward0"),
    Case("index_list_dim1", on(X, lambda m, x: x[:, [1, 3]]), "IndexBackward0"),
    Case("index_bool_mask", on(X, lambda m, x: x[x > 0.6]), "IndexBackward0"),
    # --- ops and layers added for conformance (issue 14) ---------------------------
    Case("atan", unary(lambda m, x: x.atan()), "AtanBackward0"),
    Case("atan2", binary(lambda m, a, b: m.atan2(a, b)), "Atan2Backward0"),
    Case("narrow", on(X, lambda m, x: x.narrow(1, 1, 2)), "SliceBackward0"),
    Case("select", on(X, lambda m, x: x.select(1, 2)), "SelectBackward0"),
    Case("masked_fill", on(X, lambda m, x: x.masked_fill(x > 0.6, 0.0)),
         "MaskedFillBackward0"),
    Case("cumsum", on(X, lambda m, x: x.cumsum(1)), "CumsumBackward0"),
    Case("cumprod", on(X, lambda m, x: x.cumprod(0)), "CumprodBackward0"),
    Case("hstack", on(X, lambda m, x, y: m.hstack([x, y]), X), "CatBackward0"),
    Case("vstack", on(X, lambda m, x, y: m.vstack([x, y]), X), "CatBackward0"),
    Case("layer_norm", on(X, lambda m, x, w, b: m.nn.functional.layer_norm(x, (4,), w, b),
                          [1.0, 0.5, -1.0, 2.0], [0.1, 0.2, 0.3, 0.4]),
         "NativeLayerNormBackward0"),
    Case("conv1d", on([X], lambda m, x, w: m.nn.functional.conv1d(x, w),
                      [[[0.5, -1.0], [1.5, 0.2], [0.3, 0.3]], [[1.0, 0.0], [-0.5, 0.7],
                                                                [0.2, -0.2]]]),
         "ConvolutionBackward0"),
    Case("max_pool1d", on([X], lambda m, x: m.nn.functional.max_pool1d(x, 2)),
         "SqueezeBackward1"),
    Case("embedding", on([[0.5, 1.0], [2.0, -1.0], [0.3, 0.7]],
                         lambda m, w: m.nn.functional.embedding(m.tensor([2, 0, 2]), w)),
         "EmbeddingBackward0"),
    Case("repeat", on(X, lambda m, x: x.repeat(2, 1)), "RepeatBackward0"),
    Case("chain_matmul", on(X, lambda m, x, y: m.chain_matmul(x, y), Y), "ViewBackward0"),
    Case("var_mean", on(X, lambda m, x: m.var_mean(x, 1)[0]), "VarMeanBackward0"),
    Case("batch_norm", on(X, lambda m, x, w, b: m.nn.functional.batch_norm(
        x, None, None, w, b, training=True), [1.0, 0.5, -1.0, 2.0], [0.1, 0.2, 0.3, 0.4]),
         "NativeBatchNormBackward0"),
    Case("conv2d", on([[X]], lambda m, x, w: m.nn.functional.conv2d(x, w, padding=1),
                      [[[[0.5, -1.0], [1.5, 0.2]]], [[[1.0, 0.0], [-0.5, 0.7]]]]),
         "ConvolutionBackward0"),
    Case("max_pool2d", on([[X]], lambda m, x: m.nn.functional.max_pool2d(x, 2, 1)),
         "MaxPool2DWithIndicesBackward0"),
    Case("nn_flatten", on([X], lambda m, x: m.nn.Flatten()(x)), "ViewBackward0"),
]

# issue/seed examples already use the default dtype (float32)
FLOAT32_IDS = {"scalar_chain", "2.5_mul_x",
               "bcast_col_plus_row", "sum_dim1", "mean", "var_dim1", "matmul_2d",
               "F.softplus", "index_list_repeated", "cat"}
PARAMS = ([pytest.param(c, "float64", id=c.id) for c in CASES]
          + [pytest.param(c, "float32", id=f"{c.id}-float32") for c in CASES if c.id in FLOAT32_IDS])
assert len(FLOAT32_IDS & {c.id for c in CASES}) == len(FLOAT32_IDS)
assert len({c.id for c in CASES}) == len(CASES), "duplicate case ids"


def program_scenario(case, dt):
    def scenario(m):
        out, leaves = case.prog(m, dt)
        record = {"out": out, "grad_fn_name": out.grad_fn.name()}
        backprop(out, m)
        record["grads"] = [x.grad for x in leaves]
        return record, leaves
    return scenario


@pytest.mark.parametrize("case, dt", PARAMS)
def test_program_matches_torch(case, dt, m):
    got = run_and_compare(program_scenario(case, dt), m)
    assert got["grad_fn_name"] == case.name


def sharing_pattern(fn):
    """The graph below ``fn`` in DFS order, each node replaced by the ordinal of
    its first visit: equal patterns mean the same nodes are shared (``is``)."""
    ordinals, alive, pattern = {}, [], []

    def visit(node):
        if node is None:
            pattern.append(None)
            return
        if id(node) in ordinals:
            pattern.append(ordinals[id(node)])
            return
        ordinals[id(node)] = len(ordinals)
        alive.append(node)  # keep it alive so its id is not reused
        pattern.append(ordinals[id(node)])
        for child, _ in node.next_functions:
            visit(child)

    visit(fn)
    return pattern


# x used twice by one node, a node used by two nodes, several outputs of one node
SHARING_IDS = ["issue_x_mul_3_add_5", "scalar_chain", "scalar_chain_reuse", "mul",
               "bcast_unsqueezed", "split_both_outputs", "unbind_two_outputs",
               "iterate_rows", "max_dim_with_indices"]


@pytest.mark.parametrize("case", [c for c in CASES if c.id in SHARING_IDS], ids=lambda c: c.id)
def test_graph_node_sharing_matches_torch(case, m):
    patterns = [sharing_pattern(case.prog(module, "float64")[0].grad_fn) for module in (torch, m)]
    assert patterns[1] == patterns[0]


# --------------------------------------------------------------------------
# The issue example, spelled out literally
# --------------------------------------------------------------------------

def test_issue_example_literally(m):
    x = m.tensor([2.0], requires_grad=True)
    y = x * 3
    z = y + 5
    assert z.grad_fn.name() == "AddBackward0"
    (mul_node, mul_nr), (none_node, none_nr) = z.grad_fn.next_functions
    assert mul_node.name() == "MulBackward0" and mul_nr == 0
    assert none_node is None and none_nr == 0
    assert y.grad_fn.next_functions[0][0].variable is x
    z.backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.array([3.0], dtype=np.float32))


# --------------------------------------------------------------------------
# Autograd API scenarios (each returns (results, leaves), compared with torch)
# --------------------------------------------------------------------------

def autograd_grad_with_grad_outputs(m):
    x = m.tensor([0.5, -1.0, 2.0], dtype=m.float64, requires_grad=True)
    y = x ** 2 * 3
    (gx,) = m.autograd.grad(y, x, grad_outputs=m.tensor([1.0, 0.5, -2.0], dtype=m.float64))
    return {"gx": gx, "x.grad": x.grad}, [x]


def autograd_grad_tuple_inputs(m):
    a = m.tensor([1.0, 2.0], dtype=m.float64, requires_grad=True)
    b = m.tensor([3.0, -1.0], dtype=m.float64, requires_grad=True)
    out = (a * b + b.exp()).sum()
    grads = m.autograd.grad(out, (a, b))
    return {"grads": grads, "a.grad": a.grad, "b.grad": b.grad}, [a, b]


def autograd_grad_allow_unused(m):
    a = m.tensor(1.5, dtype=m.float64, requires_grad=True)
    b = m.tensor(2.0, dtype=m.float64, requires_grad=True)
    grads = m.autograd.grad(a * a, [a, b], allow_unused=True)
    return {"grads": grads, "is_tuple": isinstance(grads, tuple)}, [a, b]


def autograd_grad_retain_graph(m):
    x = m.tensor([1.0, 2.0], dtype=m.float64, requires_grad=True)
    out = (x * x).sum()
    first = m.autograd.grad(out, x, retain_graph=True)
    second = m.autograd.grad(out, x)
    return {"first": first, "second": second}, [x]


def retain_grad_on_non_leaf(m):
    x = m.tensor([1.0, -2.0, 3.0], dtype=m.float64, requires_grad=True)
    y = x * 2
    y.retain_grad()
    z = (y * y).sum()
    z.backward()
    return {"y": y, "y.grad": y.grad, "x.grad": x.grad, "retains": y.retains_grad}, [x]


def detach_cuts_the_graph(m):
    x = m.tensor([1.0, -2.0, 3.0], dtype=m.float64, requires_grad=True)
    y = x * 2
    d = y.detach()
    z = (d * x).sum()
    z.backward()
    return {"d": d, "d.grad_fn_is_none": d.grad_fn is None, "z": z, "x.grad": x.grad}, [x]


def no_grad_output_used_later(m):
    x = m.tensor([1.0, -2.0, 3.0], dtype=m.float64, requires_grad=True)
    with m.no_grad():
        c = x * 2 + 1
        enabled_inside = m.is_grad_enabled()
    z = (c * x.sin()).sum()
    z.backward()
    return {"c": c, "enabled_inside": enabled_inside, "enabled_after": m.is_grad_enabled(),
            "z": z, "x.grad": x.grad}, [x]


def backward_with_gradient_argument(m):
    x = m.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=m.float64, requires_grad=True)
    y = x * x + 1
    y.backward(gradient=m.tensor([[1.0, 0.5], [-1.0, 2.0]], dtype=m.float64))
    return {"y": y, "x.grad": x.grad}, [x]


def backward_with_positional_gradient(m):
    x = m.tensor([1.0, 2.0, 3.0], dtype=m.float64, requires_grad=True)
    y = x.exp()
    y.backward(m.tensor([0.1, 0.2, 0.3], dtype=m.float64))
    return {"x.grad": x.grad}, [x]


def grad_accumulates_over_two_backwards(m):
    x = m.tensor([1.0, -2.0, 3.0], dtype=m.float64, requires_grad=True)
    (x * x).sum().backward()
    first_grad = x.grad
    after_first = x.grad.clone()
    (x * 3).sum().backward()
    accumulated_in_place = x.grad is first_grad
    after_second = x.grad.clone()
    x.grad = None
    (x * 5).sum().backward()
    return {"after_first": after_first, "after_second": after_second,
            "accumulated_in_place": accumulated_in_place, "after_reset": x.grad}, [x]


def grad_accumulates_within_one_graph(m):
    x = m.tensor([1.0, -2.0], dtype=m.float64, requires_grad=True)
    a = x * 2
    b = x.exp()
    (a * b + x).sum().backward()
    return {"x.grad": x.grad}, [x]


def leaf_attributes(m):
    x = m.tensor([1.0, 2.0], dtype=m.float64, requires_grad=True)
    c = m.tensor([1.0, 2.0], dtype=m.float64)
    y = x + c
    return {"x.is_leaf": x.is_leaf, "x.grad_fn_is_none": x.grad_fn is None, "x.grad": x.grad,
            "c.requires_grad": c.requires_grad, "c.is_leaf": c.is_leaf,
            "y.is_leaf": y.is_leaf, "y": y, "(c*c)": c * c}, [x]


SCENARIOS = [autograd_grad_with_grad_outputs, autograd_grad_tuple_inputs,
             autograd_grad_allow_unused, autograd_grad_retain_graph,
             retain_grad_on_non_leaf, detach_cuts_the_graph, no_grad_output_used_later,
             backward_with_gradient_argument, backward_with_positional_gradient,
             grad_accumulates_over_two_backwards, grad_accumulates_within_one_graph,
             leaf_attributes]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
def test_scenario_matches_torch(scenario, m):
    run_and_compare(scenario, m)

"""``gradcheck`` / ``gradgradcheck``: PyTorch's signature and checks (float64 inputs).

Slow mode compares whole Jacobians with central finite differences; ``fast_mode``
compares one random projection ``u^T J v`` with the numerical directional derivative
along ``v``.  As in PyTorch, for reverse mode (``check_backward_ad``) backward must also
be reentrant (the same input and grad_output give the same gradient twice), give zero
gradients for zero grad_outputs ("backward not multiplied by grad_output") and, with
``check_undefined_grad``, cope with undefined output gradients (the outputs are passed
through a Function whose backward returns None, so a custom Function's backward sees
None, or zeros where it materializes them: it must return None or zeros).  With
``check_forward_ad`` the forward-mode Jacobian (``forward_ad``) is compared too.

Accepted and not checked: ``check_batched_grad`` and ``check_batched_forward_grad``
(PyTorch checks them with vmap, which tapegrad does not have), ``check_grad_dtypes``
(tapegrad's gradients always have their input's dtype) and ``masked`` (sparse inputs).
"""
import functools
import warnings

import numpy as np

from ..grad_mode import no_grad
from ..tensor import Tensor, _norm, from_array
from . import forward_ad
from .entry_points import grad
from .function import Function
from .graph import Node


class GradcheckError(RuntimeError):
    pass


FAILED_NONDET_MSG = """\n
NOTE: If your op relies on non-deterministic operations i.e., it is listed here:
https://pytorch.org/docs/stable/generated/torch.use_deterministic_algorithms.html
this failure might be expected.

If you are adding a new operator, please file an issue and then use one of the
workarounds. The workaround depends on how your test invokes gradcheck/gradgradcheck.
If the test
- manually invokes gradcheck/gradgradcheck, then call gradcheck/gradgradcheck
  with `nondet_tol=<tol>` as a keyword argument.
- is OpInfo-based (e.g., in test_ops_gradients.py), then modify the OpInfo for the test
  to have `gradcheck_nondet_tol=<tol>`.
- is a Module test (e.g., in common_nn.py), then modify the corresponding
  module_test entry to have `gradcheck_nondet_tol=<tol>`
"""
UNDEFINED_NOTE = 'Please look at "Notes about undefined output gradients" in ' \
                 '"tools/autograd/derivatives.yaml"'


def _outputs(func, inputs):
    out = func(*inputs)
    return out if isinstance(out, (tuple, list)) else (out,)


def _differentiable(outs):
    return [o for o in outs if isinstance(o, Tensor) and o.requires_grad]


def _flat(outs):
    return [np.asarray(o._arr, np.float64).reshape(-1) for o in outs]


def _numerical(func, inputs, k, eps, directions):
    """d(outputs)/d(inputs[k]) along each direction by central differences: per
    direction, one flat array per output of ``func``.  A leaf input is perturbed in
    place, as PyTorch does (a function that closes over it sees the change); an input
    with a history is passed as a perturbed copy."""
    x = inputs[k]
    base = x._arr.astype(np.float64)
    cols = []
    kept = x._d
    try:
        for step in directions:
            vals = []
            for sign in (1, -1):
                value = (base.reshape(-1) + sign * eps * step).reshape(base.shape)
                args = list(inputs)
                if x._t is None:
                    x._d, x._tid = _norm(value.astype(x._arr.dtype)), 0
                else:
                    args[k] = from_array(value, rg=x.requires_grad)
                # not under no_grad: func may differentiate inside (gradgradcheck's vjp does)
                vals.append(_flat(_outputs(func, args)))
            cols.append([(p - m) / (2 * eps) for p, m in zip(*vals)])
    finally:
        if x._t is None:
            x._d, x._tid = kept, 0
    return cols


def _vjp(output, x, seed):
    g, = grad(output, x, from_array(seed.reshape(tuple(output.shape))), retain_graph=True,
              allow_unused=True)
    return np.zeros(x.numel()) if g is None else np.asarray(g._arr, np.float64).reshape(-1)


def _jvp(func, inputs, k, direction):
    """Tangents of the differentiable outputs along ``direction`` of inputs[k]."""
    x = inputs[k]
    with forward_ad.dual_level():
        args = list(inputs)
        args[k] = forward_ad.make_dual(x, from_array(direction.reshape(tuple(x.shape))))
        outs = _differentiable(_outputs(func, args))
        tangents = [forward_ad.unpack_dual(o).tangent for o in outs]
    return [np.zeros(o.numel()) if tan is None else np.asarray(tan._arr, np.float64).reshape(-1)
            for o, tan in zip(outs, tangents)]


def _mismatch(analytic, numeric, oi, k, forward):
    mode = "computed with forward mode " if forward else ""
    return (f"Jacobian {mode}mismatch for output {oi:d} with respect to input {k:d},\n"
            f"numerical:{numeric}\nanalytical:{analytic}\n")


def _check_inputs(inputs):
    any_rg = False
    for k, x in enumerate(inputs):
        if isinstance(x, Tensor) and x.requires_grad:
            if x.dtype.name != "float64":
                warnings.warn(f"Input #{k} requires gradient and is not a double precision "
                              "floating point or complex. This check will likely fail if all "
                              "the inputs are not of double precision floating point or "
                              "complex. ", stacklevel=3)
            any_rg = True
    if not any_rg:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but "
                         "none of them have requires_grad=True.")


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
              nondet_tol=0.0, check_undefined_grad=True, check_grad_dtypes=False,
              check_batched_grad=False, check_batched_forward_grad=False,
              check_forward_ad=False, check_backward_ad=True, fast_mode=False, masked=None):
    """True if the gradients of ``func`` at ``inputs`` match finite differences (see the
    module docstring for what is checked)."""
    if not (check_forward_ad or check_backward_ad):
        raise AssertionError("Expected at least one of check_forward_ad or check_backward_ad "
                             "to be True")
    if check_batched_grad and not check_backward_ad:
        raise AssertionError("Setting check_batched_grad=True requires check_backward_ad to be "
                             "True")
    if check_batched_forward_grad and not check_forward_ad:
        raise AssertionError("Setting check_batched_forward_grad=True requires "
                             "check_forward_ad to be True")
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    try:
        return _gradcheck(func, inputs, eps, atol, rtol, nondet_tol, check_undefined_grad,
                          check_forward_ad, check_backward_ad, fast_mode)
    except GradcheckError:
        if raise_exception:
            raise
        return False


def _gradcheck(func, inputs, eps, atol, rtol, nondet_tol, check_undefined_grad,
               check_forward_ad, check_backward_ad, fast_mode):
    _check_inputs(inputs)
    all_outs = _outputs(func, inputs)
    outs = _differentiable(all_outs)
    diff = [k for k, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    rng = np.random.default_rng(0)
    if not outs:        # the numerical gradient must then be zero
        for k in diff:
            cols = _numerical(func, inputs, k, eps, np.eye(inputs[k].numel()))
            if any(np.any(c != 0) for col in cols for c in col):
                raise GradcheckError("Numerical gradient for function expected to be zero")
        return True
    rows = [o for o in all_outs if isinstance(o, Tensor)]
    out_pos = [next(p for p, r in enumerate(rows) if r is o) for o in outs]
    for j, k in enumerate(diff):             # j: the input's index among those checked
        n_in = inputs[k].numel()
        v = rng.standard_normal(n_in) if fast_mode else None
        directions = [v] if fast_mode else np.eye(n_in)
        numeric = _numerical(func, inputs, k, eps, directions)
        for oi, out in enumerate(outs):
            num = np.array([col[out_pos[oi]] for col in numeric]).T      # (n_out, dirs)
            if fast_mode:
                u = rng.standard_normal(out.numel())
                num = np.array([u @ num[:, 0]])
            if check_backward_ad:
                seeds = [u] if fast_mode else np.eye(out.numel())
                analytic = np.array([_vjp(out, inputs[k], s) for s in seeds])  # (seeds, n_in)
                again = np.array([_vjp(out, inputs[k], s) for s in seeds])
                if np.abs(again - analytic).max(initial=0.0) > nondet_tol:
                    raise GradcheckError(
                        "Backward is not reentrant, i.e., running backward with same input and "
                        "grad_output multiple times gives different values, although analytical "
                        "gradient matches numerical gradient.The tolerance for nondeterminism "
                        f"was {nondet_tol}." + FAILED_NONDET_MSG)
                analytic = analytic @ v if fast_mode else analytic.reshape(num.shape)
                if not np.allclose(analytic, num, rtol=rtol, atol=atol, equal_nan=True):
                    raise GradcheckError(_mismatch(analytic, num, oi, j, False))
        if check_forward_ad:
            tangents = [_jvp(func, inputs, k, d) for d in directions]   # per direction
            for oi, out in enumerate(outs):
                analytic = np.array([tan[oi] for tan in tangents]).T
                num = np.array([col[out_pos[oi]] for col in numeric]).T
                if not np.allclose(analytic, num, rtol=rtol, atol=atol, equal_nan=True):
                    raise GradcheckError(_mismatch(analytic, num, oi, j, True))
    if check_backward_ad:
        _test_backward_mul_by_grad_output(outs, [inputs[k] for k in diff])
        if check_undefined_grad:
            _test_undefined_backward_mode(func, inputs, [inputs[k] for k in diff])
    return True


def _zero_grad_outputs(outs):
    return [from_array(np.zeros(tuple(o.shape), o.dtype.np)) for o in outs]


def _test_backward_mul_by_grad_output(outs, diff_inputs):
    """Zero grad_outputs must give zero gradients."""
    for g in grad(outs, diff_inputs, _zero_grad_outputs(outs), allow_unused=True):
        if g is not None and np.any(np.asarray(g._arr) != 0):
            raise GradcheckError("backward not multiplied by grad_output")


class _UndefinedGrad(Function):
    """Identity whose backward gives no gradient: what follows it gets an undefined
    (None) gradient from it."""

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return None


def _functions_behind(outs):
    """The custom Function calls in the graph of ``outs``."""
    seen, groups = set(), []
    stack = [o.grad_fn for o in outs]
    while stack:
        node = stack.pop()
        if not isinstance(node, Node) or id(node) in seen:
            continue
        seen.add(id(node))
        group = node._t().autograd.functions.get(node._i)
        if group is not None:
            groups.append(group)
        stack.extend(n for n, _ in node.next_functions)
    return groups


def _test_undefined_backward_mode(func, inputs, diff_inputs):
    """Backward must cope with undefined output gradients and then give None or zero
    gradients: all outputs' gradients undefined (every custom Function of the graph is
    called with undefined gradients, as PyTorch's engine calls it: None, or zeros where
    it materializes them) and, with several outputs, one at a time (a backward)."""
    def warn_bc_breaking():
        warnings.warn("Backwards compatibility: New undefined gradient support checking feature "
                      "is enabled by default, but it may break existing callers of this "
                      "function. If this is true for you, you can call this function with "
                      '"check_undefined_grad=False" to disable the feature', stacklevel=4)

    def check(backward, *args):
        try:
            grads = backward(*args)
        except RuntimeError as e:
            warn_bc_breaking()
            raise GradcheckError("Expected backward function to handle undefined output "
                                 "grads. " + UNDEFINED_NOTE) from e
        for g in grads:
            if g is not None and np.any(np.asarray(g._arr) != 0):
                warn_bc_breaking()
                raise GradcheckError("Expected all input grads to be undefined or zero when all "
                                     "output grads are undefined or zero. " + UNDEFINED_NOTE)

    outs = _differentiable(_outputs(func, inputs))
    for group in _functions_behind(outs):
        with no_grad():
            check(group.call_backward, [None] * len(group.outputs))
    for k in range(len(outs) if len(outs) > 1 else 0):
        outs = [_UndefinedGrad.apply(o) if i == k else o
                for i, o in enumerate(_differentiable(_outputs(func, inputs)))]
        check(functools.partial(grad, allow_unused=True), outs, diff_inputs,
              _zero_grad_outputs(outs))


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True, nondet_tol=0.0,
                  check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
                  check_fwd_over_rev=False, check_rev_over_rev=True, fast_mode=False,
                  masked=False):
    """True if the second derivatives of ``func`` match finite differences of its
    first derivatives: ``gradcheck`` of the vector-Jacobian product, taken with
    ``create_graph=True``, as a function of the inputs and the grad_outputs
    (``gen_non_contig_grad_outputs`` has no meaning here: tapegrad has no strides)."""
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    if grad_outputs is None:
        rng = np.random.default_rng(1)
        grad_outputs = tuple(from_array(rng.uniform(-1, 1, tuple(o.shape)), rg=True)
                             for o in _differentiable(_outputs(func, inputs)))
    grad_outputs = tuple(grad_outputs) if isinstance(grad_outputs, (tuple, list)) \
        else (grad_outputs,)
    n = len(inputs)
    diff = [k for k, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]

    def first_derivatives(*args):
        xs, gos = args[:n], args[n:]
        outs = _differentiable(_outputs(func, xs))
        gs = grad(outs, [xs[k] for k in diff], gos, create_graph=True, allow_unused=True)
        return tuple(g for g in gs if g is not None)

    return gradcheck(first_derivatives, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception, nondet_tol=nondet_tol,
                     check_undefined_grad=check_undefined_grad,
                     check_grad_dtypes=check_grad_dtypes, check_batched_grad=check_batched_grad,
                     check_forward_ad=check_fwd_over_rev, check_backward_ad=check_rev_over_rev,
                     fast_mode=fast_mode, masked=masked)

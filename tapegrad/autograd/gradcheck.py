"""``gradcheck``: analytical Jacobians against central finite differences (float64).

Slow mode compares whole Jacobians; ``fast_mode`` compares one random projection
``u^T J v`` with the numerical directional derivative along ``v``.  Backward must also
be reentrant: the same input and grad_output give the same gradient twice.
"""
import numpy as np

from ..tensor import Tensor, from_array
from .engine import grad


class GradcheckError(RuntimeError):
    pass


def _outputs(func, inputs):
    out = func(*inputs)
    return out if isinstance(out, (tuple, list)) else (out,)


def _flat_outputs(func, args):
    # not under no_grad: func may differentiate inside (gradgradcheck's vjp does)
    return [np.asarray(o._arr, np.float64).reshape(-1) for o in _outputs(func, args)]


def _numerical(func, inputs, k, eps, direction=None):
    """d(outputs)/d(inputs[k]) by central differences: one column per input element,
    or the single derivative along ``direction``."""
    base = inputs[k]._arr.astype(np.float64)
    steps = [direction] if direction is not None else \
        [np.eye(1, base.size, j).reshape(-1) for j in range(base.size)]
    cols = []
    for step in steps:
        vals = []
        for sign in (1, -1):
            args = list(inputs)
            args[k] = from_array((base.reshape(-1) + sign * eps * step).reshape(base.shape),
                                 rg=inputs[k].requires_grad)
            vals.append(_flat_outputs(func, args))
        cols.append([(p - m) / (2 * eps) for p, m in zip(*vals)])
    return cols


def _vjp(func, inputs, oi, k, seed, shape):
    g, = grad(_outputs(func, inputs)[oi], inputs[k], from_array(seed.reshape(shape)),
              allow_unused=True)
    return np.zeros(inputs[k].numel()) if g is None else np.asarray(g._arr).reshape(-1)


def _fail(msg, raise_exception):
    if raise_exception:
        raise GradcheckError(msg)
    return False


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
              nondet_tol=0.0, check_undefined_grad=True, fast_mode=False):
    """True if the gradients of ``func`` at ``inputs`` match finite differences."""
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    diff = [k for k, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    for k in diff:
        if inputs[k].dtype.name != "float64":
            raise GradcheckError(f"Input #{k} requires gradient and is not a double precision "
                                 "floating point.")
    outs = _outputs(func, inputs)
    rng = np.random.default_rng(0)
    for k in diff:
        v = rng.standard_normal(inputs[k].numel()) if fast_mode else None
        numeric = _numerical(func, inputs, k, eps, v)
        for oi, out in enumerate(outs):
            if not out.requires_grad:
                continue
            shape, n_out = tuple(out.shape), out.numel()
            if fast_mode:
                u = rng.standard_normal(n_out)
                analytic = np.array([_vjp(func, inputs, oi, k, u, shape) @ v])
                num = np.array([numeric[0][oi] @ u])
                again = np.array([_vjp(func, inputs, oi, k, u, shape) @ v])
            else:
                seeds = np.eye(n_out)
                analytic = np.array([_vjp(func, inputs, oi, k, s, shape) for s in seeds]).T
                num = np.array([col[oi] for col in numeric]).reshape(analytic.shape)
                again = np.array([_vjp(func, inputs, oi, k, s, shape) for s in seeds]).T
            if not np.allclose(analytic, num, rtol=rtol, atol=atol, equal_nan=True):
                return _fail(f"Jacobian mismatch for output {oi} with respect to input {k},\n"
                             f"numerical:{num}\nanalytical:{analytic}\n", raise_exception)
            if np.abs(again - analytic).max(initial=0.0) > nondet_tol:
                return _fail("Backward is not reentrant, i.e., running backward with same input "
                             "and grad_output multiple times gives different values, although "
                             "analytical gradient matches numerical gradient.The tolerance for "
                             f"nondeterminism was {nondet_tol}.", raise_exception)
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True, nondet_tol=0.0,
                  check_undefined_grad=True, fast_mode=False):
    """True if the second derivatives of ``func`` match finite differences of its
    first derivatives: ``gradcheck`` of the vector-Jacobian product, taken with
    ``create_graph=True``, as a function of the inputs and the grad_outputs."""
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    outs = _outputs(func, inputs)
    if grad_outputs is None:
        rng = np.random.default_rng(1)
        grad_outputs = tuple(from_array(rng.standard_normal(tuple(o.shape)), rg=True)
                             for o in outs if o.requires_grad)
    grad_outputs = tuple(grad_outputs) if isinstance(grad_outputs, (tuple, list)) \
        else (grad_outputs,)
    n = len(inputs)
    diff = [k for k, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]

    def first_derivatives(*args):
        xs, gos = args[:n], args[n:]
        outs = [o for o in _outputs(func, xs) if o.requires_grad]
        gs = grad(outs, [xs[k] for k in diff], gos, create_graph=True, allow_unused=True)
        return tuple(g for g in gs if g is not None)

    return gradcheck(first_derivatives, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception, nondet_tol=nondet_tol,
                     fast_mode=fast_mode)

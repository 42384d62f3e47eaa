"""``gradcheck``: analytical Jacobians against central finite differences (float64)."""
import numpy as np

from ..grad_mode import no_grad
from ..tensor import Tensor, from_array
from .engine import grad


class GradcheckError(RuntimeError):
    pass


def _outputs(func, inputs):
    out = func(*inputs)
    return out if isinstance(out, (tuple, list)) else (out,)


def _numerical(func, inputs, k, eps):
    """d(outputs)/d(inputs[k]) by central differences: one column per input element."""
    x = inputs[k]
    base = x._arr.astype(np.float64)
    cols = []
    for j in range(base.size):
        vals = []
        for sign in (1, -1):
            pert = base.copy().reshape(-1)
            pert[j] += sign * eps
            args = list(inputs)
            args[k] = from_array(pert.reshape(base.shape))
            with no_grad():
                vals.append([np.asarray(o._arr, np.float64).reshape(-1) for o in
                             _outputs(func, args)])
        cols.append([(p - m) / (2 * eps) for p, m in zip(*vals)])
    return cols


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
              nondet_tol=0.0, check_undefined_grad=True):
    """True if the gradients of ``func`` at ``inputs`` match finite differences."""
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    diff = [k for k, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    for k in diff:
        if inputs[k].dtype.name != "float64":
            raise GradcheckError(f"Input #{k} requires gradient and is not a double precision "
                                 "floating point.")
    outs = _outputs(func, inputs)
    for k in diff:
        numeric = _numerical(func, inputs, k, eps)
        for oi, out in enumerate(outs):
            if not out.requires_grad:
                continue
            n_out = out.numel()
            analytic = np.zeros((inputs[k].numel(), n_out))
            for r in range(n_out):
                seed = np.zeros(n_out)
                seed[r] = 1.0
                g, = grad(_outputs(func, inputs)[oi], inputs[k],
                          from_array(seed.reshape(tuple(out.shape))), allow_unused=True)
                if g is not None:
                    analytic[:, r] = np.asarray(g._arr).reshape(-1)
            num = np.array([col[oi] for col in numeric]).reshape(analytic.shape)
            if not np.allclose(analytic, num, rtol=rtol, atol=atol, equal_nan=True):
                msg = (f"Jacobian mismatch for output {oi} with respect to input {k},\n"
                       f"numerical:{num}\nanalytical:{analytic}\n")
                if raise_exception:
                    raise GradcheckError(msg)
                return False
    return True

"""Linear least squares objective written as a loop (GradBench's ``llsq``, from cmpad):

    y(x) = 1/2 sum_{i<n} (s_i - x_0 - x_1 t_i - x_2 t_i^2 - ... - x_{m-1} t_i^{m-1})^2,
    t_i = -1 + 2 i / (n - 1),   s_i = sign(t_i)

one Python iteration per row i: the residual from a dot product of x with the constant
row of powers (t_i^0 .. t_i^{m-1}), squared and added to a running total, so the tape
holds about 4 n small ops.  Timed: y(x) and its gradient in x (m = 16 coefficients).
Reference: NumPy, -P^T r.  Inputs: x ~ N(0, 1), seed 12.  --quick: n = 8.
"""
import numpy as np

from ..harness import Config
from .common import STANDARD, standard

NAME = "llsq"
FRAMEWORKS = STANDARD
SIZES, QUICK_SIZES = (256, 4_096), (8,)
XLABEL = "n (rows, 16 coefficients)"
M = 16
_LOOP = "jax-jit unrolls the Python loop: compile time grows with n"
LIMITS = {"jax-jit": (4_096, _LOOP)}


def objective(m, consts, x):
    rows, s = consts
    total = 0.0
    for p, si in zip(rows, s):
        r = si - m.dot(x, p)
        total = total + r * r
    return 0.5 * total


def configs(n, quick):
    return [Config(f"n={n}", n, "float64", {"n": n, "m": 4 if quick else M})]


def _powers(n, m):
    t = -1.0 + 2.0 * np.arange(n) / (n - 1)
    return t[:, None] ** np.arange(m), np.sign(t)


def _data(cfg):
    n, m = cfg.params["n"], cfg.params["m"]
    P, s = _powers(n, m)
    return (list(P), [float(v) for v in s]), [np.random.RandomState(12).randn(m)]


def reference(cfg):
    _, (x,) = _data(cfg)
    P, s = _powers(cfg.params["n"], cfg.params["m"])
    r = s - P @ x
    return 0.5 * float(r @ r), -P.T @ r


standard(globals())

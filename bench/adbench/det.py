"""Determinant by expansion in minors (GradBench's ``det_by_minor``, from cmpad): the
Laplace expansion along the first row, recursively, over the matrix's entries as scalars
(``A.unbind()`` twice), so an l x l matrix records about e l! scalar products and sums.
Timed: det(A) and its gradient, the cofactor matrix det(A) A^-T.  Reference: NumPy
(``linalg.det`` and ``inv``).  Inputs: A ~ N(0, 1), seed 14.  --quick: 3 x 3.
No jax-jit row: an XLA program of thousands of scalar ops compiles for minutes.
"""
import numpy as np

from ..harness import Config
from .common import standard

NAME = "det"
FRAMEWORKS = ("tapegrad", "tapegrad-replay", "torch", "torch-mt")
SIZES, QUICK_SIZES = (5, 7), (3,)
XLABEL = "l (matrix is l x l)"


def det_by_minors(a, row, cols):
    """det of the minor of the scalar rows ``a`` on rows ``row..`` and columns ``cols``."""
    if len(cols) == 1:
        return a[row][cols[0]]
    total = None
    for k, c in enumerate(cols):
        term = a[row][c] * det_by_minors(a, row + 1, cols[:k] + cols[k + 1:])
        total = term if total is None else total + term if k % 2 == 0 else total - term
    return total


def objective(m, consts, A):
    a = [r.unbind(0) for r in A.unbind(0)]
    return det_by_minors(a, 0, tuple(range(len(a))))


def configs(ell, quick):
    return [Config(f"{ell}x{ell}", ell, "float64", {"ell": ell})]


def _data(cfg):
    ell = cfg.params["ell"]
    return (), [np.random.RandomState(14).randn(ell, ell)]


def reference(cfg):
    _, (A,) = _data(cfg)
    d = np.linalg.det(A)
    return float(d), (d * np.linalg.inv(A).T).ravel()


standard(globals(), FRAMEWORKS)

"""LogSumExp of a vector (GradBench's ``lse``), from its primitive elements:

    a = max_i x_i,    LSE(x) = a + log sum_i exp(x_i - a)

(the max shift taken as an ordinary op: its gradient cancels, 1 - sum softmax = 0).
Timed: LSE(x) and its gradient softmax(x).  Reference: NumPy, the gradient written by hand.
Inputs: x ~ N(0, 4), seed 11.  --quick: n = 100.
"""
import numpy as np

from ..harness import Config
from .common import STANDARD, standard

NAME = "lse"
FRAMEWORKS = STANDARD
SIZES, QUICK_SIZES = (1_000, 1_000_000), (100,)
XLABEL = "n (vector length)"


def objective(m, consts, x):
    a = m.max(x)
    return a + m.log(m.sum(m.exp(x - a)))


def configs(n, quick):
    return [Config(f"n={n}", n, "float64", {"n": n})]


def _data(cfg):
    return (), [2.0 * np.random.RandomState(11).randn(cfg.params["n"])]


def reference(cfg):
    _, (x,) = _data(cfg)
    e = np.exp(x - x.max())
    return float(x.max() + np.log(e.sum())), e / e.sum()


standard(globals())

"""RK4 integration of a small linear ODE system written with slices (GradBench's ``ode``,
from cmpad's ``an_ode``):

    y_0' = x_0,    y_i' = (x_1 + ... + x_i) y_{i-1}   (i = 1 .. n-1),   t in [0, 2]

integrated by classical Runge-Kutta with s equal steps, the right-hand side one
``cat([x[:1], cumsum(x[1:]) * y[:-1]])``.  GradBench starts from y(0) = 0; here the
initial state is an input too (zero by default, as there), and the objective is the last
component of the final state.  Timed: y_{n-1}(2) and its gradient with respect to x and
y(0) (n = 10 equations).  Reference: PyTorch, float64.  Inputs: x ~ U(0, 1), seed 13.
--quick: 5 steps, n = 4.
"""
import numpy as np

from ..harness import Config
from .common import STANDARD, standard

NAME = "ode"
FRAMEWORKS = STANDARD
SIZES, QUICK_SIZES = (100, 1_000), (5,)
XLABEL = "RK4 steps (10 equations)"
N, T_END = 10, 2.0
LIMITS = {"jax-jit": (10_000, "jax-jit unrolls the step loop: compile time grows with it")}


def objective(m, consts, x, y0):
    steps, = consts
    h = T_END / steps
    rate = m.cumsum(x[1:], 0)

    def f(y):
        return m.cat([x[:1], rate * y[:-1]])

    y = y0
    for _ in range(steps):
        k1 = f(y)
        k2 = f(y + (h / 2) * k1)
        k3 = f(y + (h / 2) * k2)
        k4 = f(y + h * k3)
        y = y + (h / 6) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
    return y[-1]


def configs(steps, quick):
    return [Config(f"s={steps}", steps, "float64", {"steps": steps, "n": 4 if quick else N})]


def _data(cfg):
    n = cfg.params["n"]
    return (cfg.params["steps"],), [np.random.RandomState(13).uniform(0, 1, n), np.zeros(n)]


standard(globals())

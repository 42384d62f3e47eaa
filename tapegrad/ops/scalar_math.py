"""Scalar helpers used by the op table's rule expressions.

Plain Python on floats, so the same text runs eagerly in Python and, wrapped by
``numba.njit`` in ``tapegrad.kernels.generated``, inside the compiled sweeps.
The helpers never call one another (each is compiled on its own).
Non-differentiable points follow PyTorch: relu'(0) = 0, abs'(0) = 0, sign' = 0.
"""
import math


def sigmoid(x):
    if x >= 0.0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def softplus(x):
    # PyTorch's softplus(beta=1, threshold=20): linear above the threshold.
    if x > 20.0:
        return x
    return math.log1p(math.exp(x))


def softplus_grad(x):
    if x > 20.0:
        return 1.0
    if x >= 0.0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def relu(x):
    return x if x > 0.0 else 0.0


def sign(x):
    if x > 0.0:
        return 1.0
    if x < 0.0:
        return -1.0
    return x * 0.0  # keeps nan as nan, 0 as 0


def step(x):
    """1 where x > 0 else 0: relu's derivative (0 at 0, as PyTorch)."""
    return 1.0 if x > 0.0 else 0.0


def pow_dx(x, y):
    # d/dx x**y = y * x**(y-1); PyTorch masks exponent == 0 to 0.
    if y == 0.0:
        return 0.0
    return y * x ** (y - 1.0)


def pow_dy(x, r):
    # d/dy x**y = x**y * log(x); PyTorch masks base == 0 (with r >= 0) to 0.
    if x == 0.0 and r >= 0.0:
        return 0.0
    return r * math.log(x)


def rpow(x, y):
    """x ** y with Python's float semantics but no exceptions (nan for a
    negative base with a fractional exponent, inf for 0 ** negative), as NumPy."""
    if x == 0.0 and y < 0.0:
        return math.inf
    if x < 0.0 and y != math.floor(y):
        return math.nan
    return x ** y


def max_share(x, y):
    """Share of the gradient of maximum(x, y) that goes to x: PyTorch splits ties."""
    if x > y:
        return 1.0
    if x == y:
        return 0.5
    return 0.0


def erf_grad(x):
    return 1.1283791670955126 * math.exp(-x * x)  # 2 / sqrt(pi)


def clamp(x, lo, hi):
    return min(max(x, lo), hi)


def in_range(x, lo, hi):
    return 1.0 if (x >= lo and x <= hi) else 0.0

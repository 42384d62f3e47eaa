"""Scalar helpers used by the op table's rule expressions.

Plain Python on floats, so the same text runs eagerly in Python (the 0-d fast path);
``ops.rules.Walker`` walks the same source for the Numba kernels (``kernels.codegen``
inlines each helper into the rules that call it), the LLVM lowering and
``create_graph``'s tensor rules.
Helpers may call one another by their bare names; a helper named like a table op
(``sigmoid``) stands for that op in the tensor rules, so it must compute the op.
Non-differentiable points follow PyTorch: relu'(0) = 0, abs'(0) = 0, sign' = 0.
Where PyTorch masks a gradient (relu, clamp, maximum, minimum) the rule selects 0
rather than multiplying by an indicator, so a nan or inf arriving there gives 0.
NaN, inf and signed zeros follow PyTorch too (``tests/test_cross_path.py`` holds every
op to it on every path): maximum and minimum propagate NaN, relu(nan) is nan, sign(nan)
is 0.
"""
import math


def sigmoid(x):
    """PyTorch's formula (0 below about -709, where exp(-x) overflows): one exp, so the
    fused kernels call it on whole blocks."""
    return 1.0 / (1.0 + math.exp(-x))


def softplus(x):
    # PyTorch's softplus(beta=1, threshold=20): linear above the threshold.
    if x > 20.0:
        return x
    return math.log1p(math.exp(x))


def softplus_grad(x):
    """PyTorch's: exp(x) / (exp(x) + 1) up to the threshold.  (exp of x held at the
    threshold: the side a create_graph gradient does not take is finite at +inf, so
    its zero gradient stays 0, not nan, as PyTorch's second derivative.)"""
    if x > 20.0:
        return 1.0
    e = math.exp(20.0 if x > 20.0 else x)
    return e / (e + 1.0)


def relu(x):
    """0 below 0, else x (relu(-0.0) is -0.0 and relu(nan) nan, as PyTorch)."""
    if x < 0.0:
        return 0.0
    return x


def sign(x):
    if x > 0.0:
        return 1.0
    if x < 0.0:
        return -1.0
    return 0.0      # 0 for +-0 and for nan, as PyTorch


def maximum(x, y):
    """The larger, nan if either is nan, the first on a tie."""
    if x != x or x >= y:
        return x
    return y


def minimum(x, y):
    """The smaller, nan if either is nan, the first on a tie."""
    if x != x or x <= y:
        return x
    return y


def power(x, y, scalar):
    """x ** y.  By a Python number (``scalar`` 1.0: PyTorch's pow of a tensor by a scalar)
    0.5 is sqrt(x) and -0.5 is 1 / sqrt(x), as PyTorch computes them: (-0.0) ** 0.5 is
    -0.0 and (-inf) ** 0.5 nan there, where C's pow gives 0.0 and inf.  (Its other special
    exponents, x * x * x for 3 and 1 / (x * x) for -2, are C's pow up to rounding.)"""
    if scalar == 1.0 and y == 0.5:
        return math.sqrt(x)
    if scalar == 1.0 and y == -0.5:
        return 1.0 / math.sqrt(x)
    return x ** y


def pow_dx(x, y, scalar):
    # d/dx x**y = y * x**(y-1) (the same pow); PyTorch masks exponent == 0 to 0.
    if y == 0.0:
        return 0.0
    return y * power(x, y - 1.0, scalar)


def pow_dy(x, y, r):
    # d/dy x**y = x**y * log(x); PyTorch masks base == 0 with exponent >= 0 to 0.
    if x == 0.0 and y >= 0.0:
        return 0.0
    return r * math.log(x)


def max_grad(g, x, y):
    """The part of g that maximum(x, y) sends to x: none where x < y, half on a tie, all
    otherwise (nan included).  Masked, not multiplied, as PyTorch: a nan or inf g
    sends 0 where x < y."""
    if x < y:
        return 0.0
    if x == y:
        return 0.5 * g
    return g


def erf_grad(x):
    return 1.1283791670955126 * math.exp(-x * x)  # 2 / sqrt(pi)


def clamp(x, lo, hi):
    """minimum(maximum(x, lo), hi): NaN propagates, the first on a tie."""
    if x != x:
        return x
    if x >= lo:
        if x <= hi:
            return x
        return hi
    if lo != lo or lo <= hi:
        return lo
    return hi


def sinc(x):
    """sin(pi x) / (pi x), 1 at 0."""
    if x == 0.0:
        return 1.0
    p = x * math.pi
    return math.sin(p) / p


def sinc_grad(x, g):
    """g (pi x cos(pi x) - sin(pi x)) / (pi x^2), 0 where pi x^2 is 0 whatever g is
    (PyTorch's sinc_backward selects 0 there: an inf g gives 0, not nan)."""
    s = x * x * math.pi
    if s == 0.0:
        return 0.0
    p = x * math.pi
    return g * (p * math.cos(p) - math.sin(p)) / s


def logit(x, lo, hi):
    """log(x / (1 - x)) of x clamped as PyTorch's logit with eps clamps it (``logit_in``)."""
    z = logit_in(x, lo, hi)
    return math.log(z / (1.0 - z))


def logit_in(x, lo, hi):
    """x clamped to [lo, hi] = [eps, 1 - eps] as PyTorch's logit with eps clamps it: lo
    below lo, else hi above hi (nan kept).  Without eps lo = hi = 0 (which no eps gives:
    eps 0 has hi 1): x itself."""
    if hi == 0.0 and lo == 0.0:
        return x
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x


def logit_grad(x, g, lo, hi):
    """PyTorch's logit_backward, g / (x (1 - x)) (abs makes -0.0's end +inf, as its scalar
    kernel; no g * inf branch, whose derivative in g is nan): without eps (lo = hi = 0)
    nan outside [0, 1]; with eps 0 outside [lo, hi], and at nan (its create_graph
    gradient's, and its vectorised kernel's).  A ``where`` of the slope at x, as PyTorch's
    create_graph gradient: a second derivative outside is 0 times the slope's (nan at 0,
    1, inf and nan)."""
    if hi == 0.0 and lo == 0.0:
        return math.nan if x < 0.0 or x > 1.0 else g / abs(x * (1.0 - x))
    return g / abs(x * (1.0 - x)) if x >= lo and x <= hi else 0.0


def logaddexp(x, y):
    """log(exp(x) + exp(y)) as the larger plus log1p(exp(-|x - y|)); equal infinities
    are themselves (their difference is nan)."""
    if x == y and x - x != 0.0:
        return x
    return maximum(x, y) + math.log1p(math.exp(-abs(x - y)))


def logaddexp2(x, y):
    """log2(2 ** x + 2 ** y), as ``logaddexp`` (log1p divided by ln 2)."""
    if x == y and x - x != 0.0:
        return x
    return maximum(x, y) + math.log1p(2.0 ** -abs(x - y)) * 1.4426950408889634


def xlogy(x, y):
    """x log(y), 0 where x is 0 unless y is nan."""
    if y != y:
        return y
    if x == 0.0:
        return 0.0
    return x * math.log(y)


def xlogy_grad(x, y, g):
    """xlogy(g, y), 0 where x is 0 and y <= 0 (PyTorch's gradient of xlogy in x)."""
    if x == 0.0 and y <= 0.0:
        return 0.0
    return xlogy(g, y)


def atan2_recip(x, y):
    """1 / (x x + y y), 0 where that sum is 0 (PyTorch's atan2_backward masks it there:
    atan2's gradient at the origin, or where the squares underflow, is 0, not nan)."""
    d = x * x + y * y
    if d == 0.0:
        return 0.0
    return 1.0 / d


def trunc(x):
    """x rounded toward zero: x less its remainder by 1 (both exact), the sign of a zero
    result x's; inf and nan as they are."""
    if x - x != 0.0:
        return x
    t = x - math.fmod(x, 1.0)
    if t == 0.0:
        return 0.0 * x
    return t


def div_trunc(x, y):
    """x / y rounded toward zero (PyTorch's div with rounding_mode='trunc' of floats)."""
    return trunc(x / y)


def remainder(x, y):
    """PyTorch's remainder of floats: fmod(x, y), plus y where that is not 0 and its sign
    is not y's (so the result has y's sign, and an infinite y makes it y)."""
    m = math.fmod(x, y)
    if m != 0.0 and ((m < 0.0 and y > 0.0) or (m > 0.0 and y < 0.0)):
        return m + y
    return m


def floor_divide(x, y):
    """PyTorch's floor division of floats: x / y where y is 0; else (x - fmod(x, y)) / y,
    less 1 where the remainder's sign is not y's (``remainder`` moves it), rounded to the
    nearest integer (it is one up to rounding; a tie down); a zero quotient has the sign
    of x / y.  (Each long value is used once: code generation inlines every use.)"""
    if y == 0.0:
        return x / y
    m = math.fmod(x, y)
    q = (x - m) / y - (1.0 if (m < 0.0 and y > 0.0) or (m > 0.0 and y < 0.0) else 0.0)
    if q == 0.0:
        return 0.0 * (x / y)
    return nearest_tie_down(q)


def nearest_tie_down(q):
    """The integer nearest q, a tie rounded down: ceil(q - 0.5), from fmod (q - 0.5 is
    exact below 2 ** 52; from there on every float is an integer)."""
    if abs(q) >= 4503599627370496.0:
        return q
    v = q - 0.5
    f = math.fmod(v, 1.0)
    return v - f + (1.0 if f > 0.0 else 0.0)

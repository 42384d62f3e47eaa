"""GMM-style log-likelihood, dense: 1,000 points x 10 components x dimension 10, float64.

Diagonal covariances parametrised by log-std; parameters alpha (K, mixture logits),
mu (K, D) and s (K, D, log-std):
    L = sum_i logsumexp_k [log_softmax(alpha)_k
                           + sum_d (-s_kd - ((x_id - mu_kd) exp(-s_kd))^2 / 2)] - N D log(2 pi) / 2
(the log-likelihood itself, not negated), as one broadcast (N, K, D) array program.
Timed: L and its gradient with respect to alpha, mu and s (fresh leaves made untimed;
replay rows: one replayed value and gradient, jax-jit: the compiled value_and_grad).
--quick: 20 points.
"""
import numpy as np

from ..frameworks import block, jax_gradient, load, tapegrad_traced
from ..harness import Config, Impl, leaves, to_float, to_numpy

NAME = "gmm"
FRAMEWORKS = ("tapegrad", "tapegrad-replay", "torch", "torch-mt", "jax-jit", "numpy")
SIZES, QUICK_SIZES = (1_000,), (20,)
XLABEL = "points (10 components, dimension 10)"
K, D = 10, 10


def loglik(m, lse, log_softmax, x, alpha, mu, s):
    """``x`` is (N, 1, D); ``lse``/``log_softmax`` take the axis as their second argument."""
    q = (x - mu) * m.exp(-s)
    z = log_softmax(alpha, 0) + m.sum(-s - 0.5 * q * q, 2)
    return m.sum(lse(z, 1)) - 0.5 * x.shape[0] * D * np.log(2 * np.pi)


def _lse(a, axis):
    top = a.max(axis, keepdims=True)
    return np.log(np.exp(a - top).sum(axis, keepdims=True)) + top


def numpy_value_and_grad(x, alpha, mu, s):
    """Forward, then the analytic gradient through the responsibilities r = softmax_k(z)."""
    inv = np.exp(-s)
    q = (x - mu) * inv
    log_pi = alpha - _lse(alpha, 0)
    z = log_pi + np.sum(-s - 0.5 * q * q, 2)
    lz = _lse(z, 1)
    r = np.exp(z - lz)                                  # (N, K), rows sum to 1
    rk = r.sum(0)
    g_alpha = rk - x.shape[0] * np.exp(log_pi)
    g_mu = np.einsum("nk,nkd->kd", r, q) * inv
    g_s = np.einsum("nk,nkd->kd", r, q * q) - rk[:, None]
    return float(lz.sum() - 0.5 * x.shape[0] * D * np.log(2 * np.pi)), [g_alpha, g_mu, g_s]


def ops(fw, cfg):
    return 14  # -s, exp, x - mu, *, -s, *0.5, *, -, sum, log_softmax, +, logsumexp, sum, -


def configs(n, quick):
    return [Config(f"n={n}", n, "float64", {"n": n})]


def _data(cfg):
    """x (N, 1, D), then alpha, mu, s."""
    r = np.random.RandomState(6)
    x = r.randn(cfg.params["n"], 1, D)
    return x, [0.5 * r.randn(K), r.randn(K, D), 0.3 * r.randn(K, D)]


def _flat(value, grads):
    return to_float(value), np.concatenate([to_numpy(g).ravel() for g in grads])


def reference(cfg):
    x, params = _data(cfg)
    return _flat(*numpy_value_and_grad(x, *params))


def build(fw, cfg):
    x, params = _data(cfg)
    if fw == "tapegrad-replay":
        m = load(fw)
        xt, ps = m.tensor(x), [m.tensor(p) for p in params]
        traced, prep = tapegrad_traced(
            fw, lambda *p: loglik(m, m.logsumexp, m.log_softmax, xt, *p), *ps)
        return Impl(lambda: traced.value_and_grad(*ps), lambda out: _flat(*out), prep_s=prep)
    if fw in ("tapegrad", "torch", "torch-mt"):
        m = load(fw)
        xt = m.tensor(x, dtype=getattr(m, cfg.dtype))
        st = {}

        def reset():
            st["p"] = leaves(m, params, cfg.dtype)

        def run():
            f = loglik(m, m.logsumexp, m.log_softmax, xt, *st["p"])
            f.backward()
            return f

        return Impl(run, lambda f: _flat(f, [p.grad for p in st["p"]]), reset)
    if fw == "jax-jit":
        jax = load(fw)
        lse = load("jax.scipy.special").logsumexp
        vg, prep = jax_gradient(fw, lambda p: loglik(jax.numpy, lse, jax.nn.log_softmax, x, *p),
                                params)
        return Impl(lambda: block(vg(params)), lambda out: _flat(*out), prep_s=prep)
    if fw == "numpy":
        return Impl(lambda: numpy_value_and_grad(x, *params), lambda out: _flat(*out),
                    note="hand-written backward")
    raise ValueError(fw)

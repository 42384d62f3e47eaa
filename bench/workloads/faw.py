"""The "Fastest Autograd in the West" graph (after A. Rogozhnikov's 2023 blog post).

100 scalar inputs; then n_ops operations, each reading nodes counted back from the end of
the growing node list and appending its results, cycling
    softplus(node[-10])  |  node[-30] + node[-25] + node[-20] + node[-15]
    node[-20] * node[-10]  |  softmax(node[-4:]) (appends four nodes)
and the gradient of the last node with respect to the inputs.
One timed run = build the graph eagerly + backward (replay rows: one replayed gradient).

The graph contracts (softmax outputs are < 1), so the input gradient shrinks about 1e-30
per 1,000 ops: checked at 100 and 1,000 ops, it underflows to exactly 0 at 10,000 (the
check then covers the value only; the timing is unaffected).
"""
import numpy as np

from ..frameworks import block, jax_gradient, load, numba_compiled, tapegrad_traced
from ..harness import Config, Impl, to_float, to_numpy

NAME = "faw"
FRAMEWORKS = ("tapegrad", "tapegrad-replay", "tapegrad-compiled", "torch", "torch-mt", "jax",
              "jax-jit", "autograd", "numba")
SIZES, QUICK_SIZES = (100, 1_000, 10_000), (12,)
XLABEL = "graph ops (100 inputs)"
LIMITS = {"jax": (1_000, "eager JAX: about 1 ms per op"),
          "jax-jit": (1_000, "XLA compile time grows super-linearly with the op count")}
N_INPUTS = 100


def graph(ns, nodes, n_ops):
    """The benchmark graph on a list of scalar nodes; ``ns`` supplies softplus and softmax4."""
    for op in range(n_ops):
        kind = op % 4
        if kind == 0:
            nodes.append(ns.softplus(nodes[-10]))
        elif kind == 1:
            a, b, c, d = nodes[-30:-10:5]
            nodes.append(a + b + c + d)
        elif kind == 2:
            nodes.append(nodes[-20] * nodes[-10])
        else:
            nodes.extend(ns.softmax4(nodes[-4:]))
    return nodes[-1]


def value_and_grad(x0, n_ops):
    """Hand-written forward and reverse sweep over the same graph (flat value/adjoint
    arrays).  Plain Python is the reference; Numba compiles it as the speed of light."""
    n_in = x0.shape[0]
    v = np.empty(n_in + 7 * (n_ops // 4) + 4)
    for i in range(n_in):          # a loop: Numba takes seconds to compile v[:n] = x0
        v[i] = x0[i]
    k = n_in
    for op in range(n_ops):
        kind = op % 4
        if kind == 0:
            a = v[k - 10]
            v[k] = max(a, 0.0) + np.log1p(np.exp(-abs(a)))
            k += 1
        elif kind == 1:
            v[k] = v[k - 30] + v[k - 25] + v[k - 20] + v[k - 15]
            k += 1
        elif kind == 2:
            v[k] = v[k - 20] * v[k - 10]
            k += 1
        else:
            top = max(v[k - 4], v[k - 3], v[k - 2], v[k - 1])
            s = 0.0
            for i in range(4):
                v[k + i] = np.exp(v[k - 4 + i] - top)
                s += v[k + i]
            for i in range(4):
                v[k + i] /= s
            k += 4
    g = np.zeros_like(v)
    g[k - 1] = 1.0
    value = v[k - 1]
    for op in range(n_ops - 1, -1, -1):
        kind = op % 4
        if kind == 3:
            k -= 4
            dot = 0.0
            for i in range(4):
                dot += v[k + i] * g[k + i]
            for i in range(4):
                g[k - 4 + i] += v[k + i] * (g[k + i] - dot)
            continue
        k -= 1
        if kind == 0:
            g[k - 10] += g[k] / (1.0 + np.exp(-v[k - 10]))
        elif kind == 1:
            for back in (30, 25, 20, 15):
                g[k - back] += g[k]
        else:
            g[k - 20] += g[k] * v[k - 10]
            g[k - 10] += g[k] * v[k - 20]
    return value, g[:n_in]


def ops(fw, cfg):
    return cfg.params["n_ops"]


def configs(n_ops, quick):
    return [Config(f"ops={n_ops}", n_ops, "float64", {"n_ops": n_ops})]


def _x0(cfg):
    return np.random.RandomState(3).uniform(-1, 1, N_INPUTS)


def reference(cfg):
    return value_and_grad(_x0(cfg), cfg.params["n_ops"])


class _Torchlike:
    """softplus/softmax4 for torch and tapegrad (tapegrad: softmax composed until it has one)."""

    def __init__(self, m):
        nnf = m.nn.functional
        self.m, self.softplus = m, nnf.softplus
        self._softmax = getattr(nnf, "softmax", None)

    def scalars(self, x):
        return list(x.unbind())

    def softmax4(self, xs):
        s = self.m.stack(xs)
        if self._softmax is not None:
            return self._softmax(s, dim=0).unbind()
        e = (s - s.amax()).exp()
        return (e / e.sum()).unbind()


class _Numpylike:
    """softplus/softmax4 for jax.numpy and autograd.numpy."""

    def __init__(self, np_, softmax=None):
        self.np = np_
        self._softmax = softmax

    def scalars(self, x):
        return [x[i] for i in range(x.shape[0])]

    def softplus(self, x):
        return self.np.logaddexp(0.0, x)

    def softmax4(self, xs):
        s = self.np.stack(xs)
        if self._softmax is None:
            e = self.np.exp(s - self.np.max(s))
            s = e / self.np.sum(e)
        else:
            s = self._softmax(s)
        return [s[i] for i in range(4)]


def _namespace(fw):
    m = load(fw)
    if fw.startswith(("tapegrad", "torch")):
        return m, _Torchlike(m)
    if fw.startswith("jax"):
        return m, _Numpylike(m.numpy, m.nn.softmax)
    return m, _Numpylike(load("autograd.numpy"))


def build(fw, cfg):
    x0, n_ops = _x0(cfg), cfg.params["n_ops"]
    if fw == "numba":
        f, prep = numba_compiled(value_and_grad, x0, n_ops)
        return Impl(lambda: f(x0, n_ops), prep_s=prep, note="hand-written gradient")
    m, ns = _namespace(fw)

    def f(x):
        return graph(ns, ns.scalars(x), n_ops)

    if fw in ("tapegrad-replay", "tapegrad-compiled"):
        x = m.tensor(x0)
        traced, prep = tapegrad_traced(fw, f, x)
        return Impl(lambda: traced.grad(x), lambda g: (None, to_numpy(g)), prep_s=prep,
                    note="same point every run")
    if fw in ("tapegrad", "torch", "torch-mt"):
        st = {}

        def reset():
            st["x"] = m.tensor(x0, requires_grad=True)

        def run():
            y = f(st["x"])
            y.backward()
            return y

        return Impl(run, lambda y: (to_float(y), to_numpy(st["x"].grad)), reset)
    if fw in ("jax", "jax-jit"):
        vg, prep = jax_gradient(fw, f, x0)
        return Impl(lambda: block(vg(x0)), lambda out: (float(out[0]), to_numpy(out[1])),
                    prep_s=prep)
    if fw == "autograd":
        vg = m.value_and_grad(f)
        return Impl(lambda: vg(x0), lambda out: (float(out[0]), np.asarray(out[1])))
    raise ValueError(fw)

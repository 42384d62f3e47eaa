"""Higher-order and functional autograd: tapegrad against PyTorch.

    python -m bench.functional [--repeats 7]

- ``jacobian`` of a scalar-heavy R^100 -> R^100 function (built element by element):
  tapegrad's compiled many-seed sweep against ``torch.autograd.functional.jacobian``
  with ``vectorize=True`` (and without);
- ``hvp`` of the extended Rosenbrock at n = 10,000 as a multiple of one gradient's cost
  (the textbook bound is about 4-5x), in tapegrad and in PyTorch.
Medians of ``--repeats`` runs after one warm-up, one process, torch on one thread.
"""
import argparse
import platform
import statistics
import time

import numpy as np

import tapegrad as tg
from tapegrad.autograd import functional as F

from .workloads.scalar_chain import rosen


def scalar_heavy(m, x):
    """R^n -> R^n written element by element (the jacobian workload; the tests use it too)."""
    n = x.shape[0]
    out = []
    for i in range(n):
        a, b = x[i], x[(i + 1) % n]
        out.append(m.sin(a * b) + a ** 2 / (1 + b * b) - m.exp(-a))
    return m.stack(out)


def median_time(fn, repeats):
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args(argv)
    import torch
    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float64)
    rng = np.random.default_rng(0)
    print(f"machine: {platform.processor() or platform.machine()}, torch {torch.__version__} "
          "(1 thread)")

    xa = rng.uniform(-1, 1, 100)
    J = F.jacobian(lambda x: scalar_heavy(tg, x), tg.tensor(xa)).numpy()
    Jt = torch.autograd.functional.jacobian(lambda x: scalar_heavy(torch, x), torch.tensor(xa),
                                            vectorize=True).numpy()
    assert np.allclose(J, Jt, rtol=1e-10, atol=1e-12), "jacobians disagree"
    ours = median_time(lambda: F.jacobian(lambda x: scalar_heavy(tg, x), tg.tensor(xa)),
                       args.repeats)
    rows = [("jacobian R^100->R^100", "tapegrad", ours, 1.0)]
    for vec in (True, False):
        t = median_time(lambda: torch.autograd.functional.jacobian(
            lambda x: scalar_heavy(torch, x), torch.tensor(xa), vectorize=vec), args.repeats)
        rows.append(("jacobian R^100->R^100", f"torch vectorize={vec}", t, t / ours))

    n = 10_000
    x0 = rng.uniform(-1, 1, n)
    v0 = rng.uniform(-1, 1, n)

    def rosen_vec(x):        # the same scalar program: element by element
        return rosen([x[i] for i in range(n)])

    def tg_grad():
        xs = [tg.tensor(float(v), requires_grad=True) for v in x0]
        tg.autograd.grad(rosen(xs), xs)

    def tg_hvp():
        xs = [tg.tensor(float(v), requires_grad=True) for v in x0]
        f = rosen(xs)
        gs = tg.autograd.grad(f, xs, create_graph=True)
        dot = sum(g * float(v) for g, v in zip(gs, v0))
        tg.autograd.grad(dot, xs)

    def torch_grad():
        xs = [torch.tensor(float(v), requires_grad=True) for v in x0]
        torch.autograd.grad(rosen(xs), xs)

    def torch_hvp():
        xs = [torch.tensor(float(v), requires_grad=True) for v in x0]
        gs = torch.autograd.grad(rosen(xs), xs, create_graph=True)
        dot = sum(g * float(v) for g, v in zip(gs, v0))
        torch.autograd.grad(dot, xs)

    def tg_hvp_functional():
        F.hvp(rosen_vec, tg.tensor(x0), tg.tensor(v0))

    g_tg, h_tg = median_time(tg_grad, args.repeats), median_time(tg_hvp, args.repeats)
    h_fn = median_time(tg_hvp_functional, args.repeats)
    g_t, h_t = median_time(torch_grad, args.repeats), median_time(torch_hvp, args.repeats)
    rows += [("rosenbrock n=10000 gradient", "tapegrad", g_tg, g_t / g_tg),
             ("rosenbrock n=10000 hvp (double backward)", "tapegrad", h_tg, h_tg / g_tg),
             ("rosenbrock n=10000 hvp (functional.hvp)", "tapegrad", h_fn, h_fn / g_tg),
             ("rosenbrock n=10000 gradient", "torch", g_t, 1.0),
             ("rosenbrock n=10000 hvp (double backward)", "torch", h_t, h_t / g_t)]
    print(f"{'workload':42} {'framework':22} {'median ms':>10}  ratio")
    for what, fw, t, ratio in rows:
        print(f"{what:42} {fw:22} {t * 1e3:10.2f}  {ratio:.2f}")
    print("ratio: jacobian rows = torch time / tapegrad time; gradient rows = torch / "
          "tapegrad; hvp rows = hvp time / the same framework's gradient time")


if __name__ == "__main__":
    main()

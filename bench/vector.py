"""The array kernels' own figures (issue: vector speed at scale), one process, one run.

    python -m bench.vector [--repeats 30]

- the parallel threshold: one elementwise op (sin, exp, tanh, mul) by the serial and
  the parallel block kernel, by array length, and a fused reverse run of 50 entries;
- fusion: the 50-op chain's backward by the fused run against the per-entry sweep
  (the fused kernels switched off), at length 100,000;
- vectorised math: libmvec's functions against NumPy's, ns per element, and their max
  ulp error over a sweep of inputs (``tapegrad.kernels.vmath``; the test suite holds
  the bounds).
"""
import argparse
import statistics
import time

import numba
import numpy as np

import tapegrad as tg
from tapegrad.autograd import engine
from tapegrad.kernels import fused, vmath
from tapegrad.ops.table import CODE

from .tiers import _median
from .workloads.small_vector_ops import chain

SIZES = (8192, 16384, 32768, 65536, 131072, 262144, 1048576)
UNARY = ("sin", "exp", "tanh", "mul")
DOMAINS = {"exp": (-20, 20), "log": (1e-3, 1e3), "log1p": (-0.9, 1e3), "expm1": (-20, 20),
           "sin": (-100, 100), "cos": (-100, 100), "tan": (-1.5, 1.5), "tanh": (-20, 20),
           "erf": (-6, 6)}


def max_ulp(name, n=200_001):
    """(max ulp error of libmvec's ``name`` against NumPy over its sweep, inputs)."""
    lo, hi = DOMAINS[name]
    x = np.linspace(lo, hi, n)
    out = np.empty_like(x)
    getattr(_vector_fns(), f"v_{name}")(x, 0, out, 0, n)
    ref = getattr(np, name, None)
    ref = ref(x) if ref is not None else np.vectorize(__import__("math").erf)(x)
    return float(np.max(np.abs(out - ref) / np.spacing(np.abs(ref)))), x


def _vector_fns():
    from tapegrad.kernels import generated_blocks
    return generated_blocks


def threshold(repeats):
    threads = numba.get_num_threads()
    print(f"one op, serial vs parallel block kernel ({threads} threads), us:")
    print("      n  " + "  ".join(f"{op:>17}" for op in UNARY))
    for n in SIZES:
        x = np.random.RandomState(0).uniform(-2, 2, n)
        out = np.empty(n)
        row = []
        for op in UNARY:
            args = (CODE[op], x, x, False, 1.01, 0.0, out, n, threads)
            s = _median(lambda: fused.map_serial(*args), repeats)
            p = _median(lambda: fused.map_parallel(*args), repeats)
            row.append(f"{s * 1e6:7.1f} {p * 1e6:7.1f} {s / p:4.2f}x")
        print(f"{n:7d}  " + "  ".join(row))


def fusion(repeats, n=100_000):
    x0 = np.random.RandomState(1).uniform(-2, 2, n)

    def backward_only():
        x = tg.tensor(x0, requires_grad=True)
        f = chain(tg, x)
        t0 = time.perf_counter()
        f.backward()
        return time.perf_counter() - t0

    def timed(fuse_min):
        fused.FUSE_MIN, saved = fuse_min, fused.FUSE_MIN
        try:
            backward_only()
            return statistics.median(backward_only() for _ in range(repeats))
        finally:
            fused.FUSE_MIN = saved
    # FUSE_MIN off: the backward sweeps entry by entry (and recording takes NumPy's path)
    per_entry = timed(engine.NO_FUSION)
    fused_run = timed(fused.FUSE_MIN)
    print(f"\n50-op chain backward at n={n}: per-entry sweep {per_entry * 1e3:.2f} ms, "
          f"fused runs {fused_run * 1e3:.2f} ms ({per_entry / fused_run:.2f}x)")


def math_table(repeats, n=100_000):
    fns = _vector_fns()
    print(f"\nvectorised math ({vmath.LIBRARY}) against NumPy, ns per element at n={n}:")
    print(f"{'function':>9} {'libmvec':>8} {'numpy':>8} {'max ulp':>8}")
    for name in vmath.FUNCTIONS:
        lo, hi = DOMAINS[name]
        x = np.random.RandomState(0).uniform(lo, hi, n)
        out = np.empty(n)
        f = getattr(fns, f"v_{name}")
        v = _median(lambda: f(x, 0, out, 0, n), repeats)
        ref = getattr(np, name, None)
        npt = _median(lambda: ref(x), repeats) if ref is not None else float("nan")
        print(f"{name:>9} {v / n * 1e9:8.2f} {npt / n * 1e9:8.2f} {max_ulp(name)[0]:8.1f}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args(argv)
    threshold(args.repeats)
    fusion(max(5, args.repeats // 3))
    math_table(args.repeats)


if __name__ == "__main__":
    main()

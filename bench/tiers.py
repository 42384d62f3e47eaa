"""The replay tiers' own figures (issue: replay and JIT tiers), one process, one run.

    python -m bench.tiers [--repeats 50]

- FAW graph (10,000 ops), its 100 inputs taken by ``unbind`` (``list(x)``, as the bench
  builds it) and by ``x[i]``: record time, interpreted replay and compiled tape in ns
  per graph op (forward + backward), compile time, and the hand-written Numba gradient;
- extended Rosenbrock n = 1,000: interpreted and compiled ns per op against the
  hand-written Numba gradient; n = 10,000: the first replayed gradient including the
  recording;
- batched replay: ``grad_batch`` over 1,000 points against a loop of single replays.
"""
import argparse
import statistics
import time

import numpy as np

import tapegrad as tg

from .harness import Config
from .workloads import faw
from .workloads.scalar_chain import rosen


def _median(fn, repeats):
    fn()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def _cached(record):
    """A compile that loaded the object code from the cache (an earlier run compiled the
    same tape) says so: then it is no compile time."""
    return "(loaded from the object cache)" if record.native.cached else ""


def rosen_hand():
    from numba import njit

    @njit(cache=True)
    def value_and_grad(x, g):
        f = 0.0
        for i in range(0, x.shape[0] - 1, 2):
            a, b = x[i], x[i + 1]
            t = b - a * a
            f += 100.0 * t * t + (1.0 - a) * (1.0 - a)
            g[i] = -400.0 * t * a - 2.0 * (1.0 - a)
            g[i + 1] = 200.0 * t
        return f
    return value_and_grad


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=50)
    args = ap.parse_args(argv)
    rows = []

    # -- FAW: the bench's graph (inputs from unbind: list(x)), and from x[i] -----------
    n_ops = 10_000
    cfg = Config("faw", n_ops, "float64", {"n_ops": n_ops})
    _, ns = faw._namespace("tapegrad")
    x0 = faw._x0(cfg)
    ref_value, ref_grad = faw.value_and_grad(x0, n_ops)
    from .frameworks import numba_compiled
    hand, _ = numba_compiled(faw.value_and_grad, x0, n_ops)
    hand_t = _median(lambda: hand(x0, n_ops), args.repeats)
    per = 1e9 / n_ops
    for label, scalars in (("faw 10,000 ops", ns.scalars),
                           ("faw 10,000 ops, x[i] inputs",
                            lambda x: [x[i] for i in range(x.shape[0])])):
        tr, rec = _timed(lambda: tg.trace(lambda x: faw.graph(ns, scalars(x), n_ops),
                                          tg.tensor(x0), compile_after=None))
        x = tg.tensor(x0)
        v, g = tr.value_and_grad(x)
        assert abs(v.item() - ref_value) <= 1e-9 * abs(ref_value)
        assert np.allclose(g.numpy(), ref_grad)
        r = tr.records[0]
        interp = _median(lambda: tr.grad(x), args.repeats)
        _, comp = _timed(tr.compile)
        compiled = _median(lambda: tr.grad(x), args.repeats)
        assert np.allclose(tr.grad(x).numpy(), ref_grad)
        rows += [(label, "record (trace)", f"{rec:.3f} s", f"{r.stats['after']} tape entries"),
                 (label, "interpreted replay", f"{interp * per:.1f} ns/op",
                  f"{interp * 1e9 / r.stats['after']:.1f} ns/entry; "
                  f"{interp / hand_t:.1f}x hand-written"),
                 (label, "compile (llvmlite)", f"{comp:.3f} s", _cached(r)),
                 (label, "compiled tape", f"{compiled * per:.1f} ns/op",
                  f"{compiled / hand_t:.1f}x hand-written")]
    rows.append(("faw 10,000 ops", "hand-written Numba", f"{hand_t * per:.1f} ns/op", ""))

    # -- Rosenbrock ------------------------------------------------------------------
    hand_r = rosen_hand()
    for n in (1_000,):
        xr = np.random.default_rng(0).uniform(-1, 1, n)
        trr = tg.trace(lambda v: rosen([v[i] for i in range(n)]), tg.tensor(xr),
                       compile_after=None)
        ops = trr.records[0].stats["after"]
        xt = tg.tensor(xr)
        t_i = _median(lambda: trr.grad(xt), args.repeats)
        flat = np.empty(n)
        t_k = _median(lambda: trr.records[0].value_and_grad(xr, flat), args.repeats)
        _, t_c = _timed(trr.compile)
        t_n = _median(lambda: trr.grad(xt), args.repeats)
        t_nk = _median(lambda: trr.records[0].native(xr, flat), args.repeats)
        gh = np.empty(n)
        t_h = _median(lambda: hand_r(xr, gh), args.repeats)
        assert np.allclose(gh, trr.grad(xt).numpy())
        rows += [(f"rosenbrock n={n}", "interpreted replay", f"{t_i * 1e9 / ops:.1f} ns/op",
                  f"kernel alone {t_k * 1e9 / ops:.1f} ns/op; {ops} entries"),
                 (f"rosenbrock n={n}", "compile (llvmlite)", f"{t_c:.3f} s", _cached(trr.records[0])),
                 (f"rosenbrock n={n}", "compiled tape", f"{t_n * 1e9 / ops:.2f} ns/op",
                  f"native call alone {t_nk * 1e9 / ops:.2f} ns/op"),
                 (f"rosenbrock n={n}", "hand-written Numba", f"{t_h * 1e9 / ops:.2f} ns/op",
                  f"compiled/hand = {t_nk / t_h:.1f}x")]
    n = 10_000
    xr = np.random.default_rng(1).uniform(-1, 1, n)

    def first():
        t = tg.trace(lambda v: rosen([v[i] for i in range(n)]), tg.tensor(xr),
                     compile_after=None)
        return t.grad(tg.tensor(xr))
    g10k, t_first = _timed(first)
    rows.append((f"rosenbrock n={n}", "first replayed gradient", f"{t_first:.3f} s",
                 "recording included"))
    trr = tg.trace(lambda v: rosen([v[i] for i in range(n)]), tg.tensor(xr),
                   compile_after=None)
    _, t_c = _timed(trr.compile)
    rows.append((f"rosenbrock n={n}", "compile (llvmlite)", f"{t_c:.3f} s",
                 f"{trr.records[0].stats['after']} entries {_cached(trr.records[0])}"))

    # -- batches -----------------------------------------------------------------------
    n, points = 100, 1_000
    X = np.random.default_rng(2).uniform(-1, 1, (points, n))
    trb = tg.trace(lambda v: rosen([v[i] for i in range(n)]), tg.tensor(X[0]),
                   compile_after=None)
    trb.grad_batch(X[:4])
    loop = _median(lambda: [trb.grad(tg.tensor(p)) for p in X], 5)
    rb, flat = trb.records[0], np.empty(n)
    kernel_loop = _median(lambda: [rb.value_and_grad(p, flat) for p in X], 5)
    batch = _median(lambda: trb.grad_batch(X), 5)
    import numba
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        batch_1 = _median(lambda: trb.grad_batch(X), 5)
    finally:
        numba.set_num_threads(threads)
    one = _median(lambda: rb.value_and_grad(X[0], flat), 200)
    where = f"batch of {points} points, n={n}"
    rows += [(where, "grad_batch vs grad() loop", f"{loop / batch:.2f}x",
              f"{threads} threads; loop {loop * 1e3:.1f} ms, batch {batch * 1e3:.1f} ms"),
             (where, "grad_batch vs kernel loop", f"{kernel_loop / batch:.2f}x",
              f"kernel-only loop {kernel_loop * 1e3:.1f} ms"),
             (where, f"grad_batch 1 -> {threads} threads", f"{batch_1 / batch:.2f}x",
              f"1 thread {batch_1 * 1e3:.1f} ms"),
             (where, "per point / one replay", f"{batch_1 / points / one:.2f}x",
              f"1 thread: {batch_1 / points * 1e6:.2f} us a point; one interpreted "
              f"replay (kernel) {one * 1e6:.2f} us")]

    print(f"{'workload':30} {'what':26} {'figure':>14}  note")
    for w, what, fig, note in rows:
        print(f"{w:30} {what:26} {fig:>14}  {note}")


if __name__ == "__main__":
    main()

"""tapegrad in one screen: a gradient, the tape behind it, and how fast it is.

Run: python examples/demo.py
"""
import time

import numpy as np

import tapegrad as tg


def rosenbrock(xs):
    f = 0.0
    for i in range(0, len(xs) - 1, 2):
        a, b = xs[i], xs[i + 1]
        f = f + 100.0 * (b - a * a) ** 2 + (1.0 - a) ** 2
    return f


def time_gradient(lib, n, repeats=5):
    """Median seconds to record the extended Rosenbrock over n 0-d tensors and backprop."""
    times = []
    for _ in range(repeats):
        xs = [lib.tensor(1.0 + 0.001 * i, dtype=lib.float64, requires_grad=True)
              for i in range(n)]
        t0 = time.perf_counter()
        rosenbrock(xs).backward()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), [x.grad.item() for x in xs]


def chain(lib, v, n_ops=50):
    """50 elementwise ops on one vector (sin, *, tanh, +, *, exp, ...), summed."""
    steps = (lib.sin, lambda t: t * 1.01, lib.tanh, lambda t: t + 0.5, lambda t: t * 0.1,
             lib.exp)
    for k in range(n_ops):
        v = steps[k % len(steps)](v)
    return v.sum()


def time_chain(run, repeats=15):
    run()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main():
    print("== the seed's example: x * 3 + 5 ==")
    x = tg.tensor([2.0], requires_grad=True)
    y = x * 3
    z = y + 5
    print("z.grad_fn:", z.grad_fn.name(), " next_functions:", z.grad_fn.next_functions)
    print("AccumulateGrad holds the leaf:", y.grad_fn.next_functions[0][0].variable is x)
    z.backward()
    print("x.grad =", x.grad)

    print("\n== the tape of a small scalar function ==")
    a = tg.tensor(1.5, requires_grad=True)
    b = tg.tensor(-0.5, requires_grad=True)
    with tg.Tape() as tape:
        f = (a * b).sin() + a.exp() / b
    print(tape)
    f.backward()
    print(f"d/da = {a.grad.item():.6f}   d/db = {b.grad.item():.6f}")

    print("\n== speed: extended Rosenbrock, record + backward, float64 ==")
    time_gradient(tg, 100)      # compile / warm up
    ops_per_term = 8
    try:
        import torch
        default_threads = torch.get_num_threads()
        torch.set_num_threads(1)
    except ImportError:
        torch = None
    for n in (1000, 10000):
        ops = (n // 2) * ops_per_term
        t_tg, g_tg = time_gradient(tg, n)
        line = f"n={n:6d}  tapegrad {t_tg * 1e3:8.2f} ms ({t_tg / ops * 1e9:5.0f} ns/op)"
        if torch is not None:
            t_pt, g_pt = time_gradient(torch, n, 3)
            assert np.allclose(g_tg, g_pt), "gradients differ from PyTorch"
            line += f"   PyTorch {t_pt * 1e3:8.2f} ms   speed-up {t_pt / t_tg:5.1f}x"
        print(line)
    if torch is None:
        print("(install PyTorch to compare: pip install -e '.[bench]')")

    print("\n== record once, replay: the same gradient at new points (n = 1000) ==")
    n = 1000
    x0 = np.random.default_rng(0).uniform(-1, 1, n)
    t0 = time.perf_counter()
    traced = tg.trace(lambda v: rosenbrock([v[i] for i in range(n)]), tg.tensor(x0))
    print(f"trace: {time.perf_counter() - t0:.3f} s")
    points = [tg.tensor(p) for p in np.random.default_rng(1).uniform(-1, 1, (200, n))]
    for tier in ("interpreted", "compiled"):
        if tier == "compiled":
            traced.compile()
            print(f"compile (llvmlite): {traced.compile_seconds:.3f} s")
        traced.grad(points[0])
        t0 = time.perf_counter()
        grads = [traced.grad(p) for p in points]
        dt = (time.perf_counter() - t0) / len(points)
        print(f"{tier:12s} replay: {dt * 1e6:8.1f} us per gradient")
    x = tg.tensor(points[-1].numpy(), requires_grad=True)
    rosenbrock([x[i] for i in range(n)]).backward()
    assert np.allclose(grads[-1].numpy(), x.grad.numpy()), "replay differs from eager"

    print("\n== large arrays: 50 elementwise ops on 100,000 values, forward + backward ==")
    x0 = np.random.default_rng(2).uniform(-2, 2, 100_000)

    def eager(lib):
        x = lib.tensor(x0, requires_grad=True)
        chain(lib, x).backward()
        return x.grad
    traced = tg.trace(lambda v: chain(tg, v), x0)
    line = (f"tapegrad eager {time_chain(lambda: eager(tg)) * 1e3:6.2f} ms   replayed "
            f"{time_chain(lambda: traced.value_and_grad(x0)) * 1e3:6.2f} ms")
    if torch is not None:
        torch.set_num_threads(default_threads)
        assert np.allclose(eager(tg).numpy(), eager(torch).numpy()), "differs from PyTorch"
        line += (f"   PyTorch ({default_threads} threads) "
                 f"{time_chain(lambda: eager(torch)) * 1e3:6.2f} ms")
    print(line)
    print("(fused runs, libmvec's vector math, both cores: see 'Large arrays' in the README)")


if __name__ == "__main__":
    main()

"""Where tapegrad's time goes on the scalar chain: recording, the compiled sweep, and
the rest of backward (seeding, delivering leaf gradients), in ns per op; with
``--arrays``, the time of one recorded array op (Python and the op's own work) at
each length, beside PyTorch's.

    python -m bench.breakdown [--n 1000,10000] [--repeats 9] [--arrays 10,1000]
"""
import argparse
import statistics
import time


import tapegrad as tg
from tapegrad.autograd import engine

from .workloads.scalar_chain import _x0, ops, rosen


def measure(n, repeats):
    """Median seconds of (record, compiled sweep, whole backward) over ``repeats``."""
    swept = []
    real_sweep = engine.sweep_compiling

    def timed_sweep(*args):      # (the sweep, compiled or its twin while a cold cache fills)
        t0 = time.perf_counter()
        out = real_sweep(*args)
        swept[-1] += time.perf_counter() - t0
        return out

    engine.sweep_compiling = timed_sweep
    rec, sweep, bwd = [], [], []
    x0 = _x0(type("C", (), {"params": {"n": n}})())
    try:
        for _ in range(repeats + 1):                     # the first run warms up
            xs = [tg.tensor(float(v), requires_grad=True) for v in x0]
            swept.append(0.0)
            t0 = time.perf_counter()
            f = rosen(xs)
            t1 = time.perf_counter()
            f.backward()
            t2 = time.perf_counter()
            rec.append(t1 - t0)
            bwd.append(t2 - t1)
            sweep.append(swept[-1])
    finally:
        engine.sweep_compiling = real_sweep
    return [statistics.median(v[1:]) for v in (rec, sweep, bwd)]


# one array op each, on x (length n, requires grad), y (x's shape), b (a row of 10) and
# w (10 x 10): recorded on the current tape
ARRAY_OPS = {
    "x * y": lambda m, x, y, b, w: x * y,
    "x + 1.5": lambda m, x, y, b, w: x + 1.5,
    "x.tanh()": lambda m, x, y, b, w: x.tanh(),
    "x.exp()": lambda m, x, y, b, w: x.exp(),
    "X + b (bias)": lambda m, x, y, b, w: x.reshape(-1, 10) + b,
    "X @ w": lambda m, x, y, b, w: x.reshape(-1, 10) @ w,
    "x.sum()": lambda m, x, y, b, w: x.sum(),
    "x[3]": lambda m, x, y, b, w: x[3],
    "x.reshape(-1, 10)": lambda m, x, y, b, w: x.reshape(-1, 10),
}


def measure_arrays(m, n, repeats, batch=200):
    """Median seconds per op of each ``ARRAY_OPS`` entry in module ``m`` at length n."""
    import numpy as np
    rng = np.random.RandomState(0)
    x = m.tensor(rng.rand(n), requires_grad=True)
    y, b, w = m.tensor(rng.rand(n)), m.tensor(rng.rand(10), requires_grad=True), \
        m.tensor(rng.rand(10, 10), requires_grad=True)
    out = {}
    for name, op in ARRAY_OPS.items():
        times = []
        for _ in range(repeats + 1):                  # the first batch warms up
            t0 = time.perf_counter()
            for _ in range(batch):
                op(m, x, y, b, w)
            times.append((time.perf_counter() - t0) / batch)
        out[name] = statistics.median(times[1:])
    return out


def arrays_table(lengths, repeats):
    try:
        import torch
        torch.set_num_threads(1)
    except ImportError:
        torch = None
    print(f"{'op':>18} {'length':>7} {'tapegrad us':>12} {'PyTorch us':>11}")
    for n in lengths:
        ours = measure_arrays(tg, n, repeats)
        theirs = measure_arrays(torch, n, repeats) if torch is not None else {}
        for name, t in ours.items():
            ref = f"{theirs[name] * 1e6:>11.2f}" if name in theirs else f"{'-':>11}"
            print(f"{name:>18} {n:>7} {t * 1e6:>12.2f} {ref}")


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.breakdown", description=__doc__.split("\n")[0])
    p.add_argument("--n", default="1000,10000")
    p.add_argument("--repeats", type=int, default=9)
    p.add_argument("--arrays", default="", help="lengths: time one recorded array op each")
    args = p.parse_args(argv)
    if args.arrays:
        arrays_table([int(v) for v in args.arrays.split(",")], args.repeats)
        return
    print(f"{'n':>7} {'ops':>7} {'record ns/op':>13} {'sweep ns/op':>12} {'rest of backward ns/op':>23}")
    for n in (int(v) for v in args.n.split(",")):
        count = ops("tapegrad", type("C", (), {"params": {"n": n}})())
        rec, sweep, bwd = measure(n, args.repeats)
        print(f"{n:>7} {count:>7} {rec / count * 1e9:>13.0f} {sweep / count * 1e9:>12.1f} "
              f"{(bwd - sweep) / count * 1e9:>23.0f}")


if __name__ == "__main__":
    main()

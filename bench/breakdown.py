"""Where tapegrad's time goes on the scalar chain: recording, the compiled sweep, and
the rest of backward (seeding, delivering leaf gradients), in ns per op.

    python -m bench.breakdown [--n 1000,10000] [--repeats 9]
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
    real_sweep = engine.sweep

    def timed_sweep(*args):
        t0 = time.perf_counter()
        out = real_sweep(*args)
        swept[-1] += time.perf_counter() - t0
        return out

    engine.sweep = timed_sweep
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
        engine.sweep = real_sweep
    return [statistics.median(v[1:]) for v in (rec, sweep, bwd)]


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.breakdown", description=__doc__.split("\n")[0])
    p.add_argument("--n", default="1000,10000")
    p.add_argument("--repeats", type=int, default=9)
    args = p.parse_args(argv)
    print(f"{'n':>7} {'ops':>7} {'record ns/op':>13} {'sweep ns/op':>12} {'rest of backward ns/op':>23}")
    for n in (int(v) for v in args.n.split(",")):
        count = ops("tapegrad", type("C", (), {"params": {"n": n}})())
        rec, sweep, bwd = measure(n, args.repeats)
        print(f"{n:>7} {count:>7} {rec / count * 1e9:>13.0f} {sweep / count * 1e9:>12.1f} "
              f"{(bwd - sweep) / count * 1e9:>23.0f}")


if __name__ == "__main__":
    main()

"""python -m bench.soak: is a step at step 100,000 as cheap as at step 1?

Four long-running patterns, each for ``--steps`` steps (default 100,000):
  scalar    a scalar loop with backward (an optimisation of a 0-d parameter);
  assemble  a vector assembled by writing a value with a gradient into a fresh tensor,
            no backward (the pattern that grew quadratically: issue 22);
  mlp       an MLP training step (forward, backward, SGD);
  replay    a traced function's gradient replayed at new points.
Time per 1,000 steps and the resident set size are printed every ``--every`` steps, and
plotted to ``bench/figures/soak.png`` when matplotlib is installed.  The verdict per
pattern compares the first and the last interval (time and RSS within 10%).  The test
suite checks the same patterns for 5,000 steps by counting work, never by timing
(``tests/test_flat_over_time.py``).
"""
import argparse
import time

import numpy as np

import tapegrad as tg

from .memory import _status_kb


def _scalar():
    p = tg.tensor(0.5, requires_grad=True)

    def step(i):
        loss = (p * 1.3 - 0.2).sin() ** 2 + (p - 1.0) ** 2
        loss.backward()
        with tg.no_grad():
            p.sub_(0.01 * p.grad)
        p.grad = None
    return step


def _assemble():
    w = tg.tensor([1.0, 2.0], requires_grad=True)
    kept = [None]

    def step(i):
        s = tg.zeros(2)
        s[0] = w[0] * 2
        kept[0] = s.sum()
    return step


def _mlp():
    tg.manual_seed(0)
    model = tg.nn.Sequential(tg.nn.Linear(8, 32), tg.nn.Tanh(), tg.nn.Linear(32, 1))
    opt = tg.optim.SGD(model.parameters(), lr=0.01)
    x = tg.tensor(np.random.RandomState(0).randn(64, 8))
    y = tg.tensor(np.random.RandomState(1).randn(64, 1))

    def step(i):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
    return step


def _replay():
    traced = tg.trace(lambda v: ((v.sin() * v).sum() + (v * v).sum().sqrt()),
                      tg.tensor(np.linspace(0.1, 1.0, 16)))
    points = np.random.RandomState(2).randn(32, 16)

    def step(i):
        traced.grad(tg.tensor(points[i % 32]))
    return step


PATTERNS = {"scalar": _scalar, "assemble": _assemble, "mlp": _mlp, "replay": _replay}


def soak(name, steps, every):
    """[(step, seconds per 1,000 steps over the interval, RSS in MiB)]."""
    step = PATTERNS[name]()
    rows = []
    t0 = time.perf_counter()
    for i in range(1, steps + 1):
        step(i)
        if i % every == 0:
            t1 = time.perf_counter()
            rows.append((i, (t1 - t0) * 1000 / every, _status_kb("VmRSS") / 1024))
            t0 = time.perf_counter()
    return rows


def _verdict(rows):
    (_, t_first, m_first), (_, t_last, m_last) = rows[0], rows[-1]
    flat = t_last <= 1.1 * t_first and m_last <= 1.1 * m_first
    return flat, t_last / t_first, m_last / m_first


def _plot(results, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.5))
    for name, rows in results.items():
        s = [r[0] for r in rows]
        a.plot(s, [r[1] * 1e3 for r in rows], label=name)
        b.plot(s, [r[2] for r in rows], label=name)
    a.set(xlabel="step", ylabel="ms per 1,000 steps", title="time", yscale="log")
    b.set(xlabel="step", ylabel="RSS (MiB)", title="memory")
    a.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--every", type=int, default=10_000)
    ap.add_argument("--patterns", default=",".join(PATTERNS))
    ap.add_argument("--plot", default="bench/figures/soak.png")
    args = ap.parse_args(argv)
    results, ok = {}, True
    for name in args.patterns.split(","):
        rows = soak(name, args.steps, args.every)
        results[name] = rows
        for i, sec, mib in rows:
            print(f"{name:9s} step {i:>7,}: {sec * 1e3:8.1f} ms / 1,000 steps   RSS {mib:7.1f} MiB")
        flat, rt, rm = _verdict(rows)
        ok &= flat
        print(f"{name:9s} last/first interval: time x{rt:.2f}, RSS x{rm:.2f}  "
              f"{'flat' if flat else 'GROWS'}")
    where = _plot(results, args.plot) if args.plot else None
    if where:
        print("plot:", where)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""python -m bench.busy: the parallel kernels when another process holds a core.

Two rows, each timed quiet and then with a competing busy process (``while True: pass``
in a subprocess), for tapegrad and PyTorch side by side: a 108-op elementwise chain over
200,000 values (forward and backward) and the gradient of a 40,000-value log-sum-exp.
Each framework runs in its own process (they would share one OpenMP runtime), with the
thread counts they choose by default.  Medians of ``--repeat`` runs; ratio = PyTorch
time / tapegrad time (> 1: tapegrad faster).
"""
import argparse
import json
import subprocess
import sys
import time

_CHILD = r"""
import json, sys, time
import numpy as np
fw, repeat = sys.argv[1], int(sys.argv[2])
if fw == "torch":
    import torch as m
    m.set_default_dtype(m.float64)
else:
    import tapegrad as m
x0 = np.linspace(0.1, 1.0, 200_000)
z0 = np.linspace(-3.0, 3.0, 40_000)

def chain():
    x = m.tensor(x0, requires_grad=True)
    y = x
    for _ in range(36):                      # 3 ops each: 108
        y = (y * 1.001).sin() + x * 0.5
    y.sum().backward()

def lse():
    z = m.tensor(z0, requires_grad=True)
    m.logsumexp(z, 0).backward()

out = {}
for name, fn in (("chain", chain), ("logsumexp", lse)):
    fn(); fn()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter(); fn(); ts.append(time.perf_counter() - t0)
    out[name] = float(np.median(ts))
print(json.dumps(out))
"""


def _run(fw, repeat):
    r = subprocess.run([sys.executable, "-c", _CHILD, fw, str(repeat)], capture_output=True,
                       text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def measure(repeat):
    """{(row, load): {framework: seconds}}."""
    table = {}
    for load in ("quiet", "busy"):
        hog = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if load == "busy" \
            else None
        try:
            if hog is not None:
                time.sleep(0.5)
            for fw in ("tapegrad", "torch"):
                for row, sec in _run(fw, repeat).items():
                    table.setdefault((row, load), {})[fw] = sec
        finally:
            if hog is not None:
                hog.kill()
    return table


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.busy")
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args(argv)
    table = measure(args.repeat)
    print(f"{'row':10s} {'load':6s} {'tapegrad':>10s} {'PyTorch':>10s} {'ratio':>6s}")
    for (row, load), t in table.items():
        print(f"{row:10s} {load:6s} {t['tapegrad'] * 1e3:8.2f} ms {t['torch'] * 1e3:8.2f} ms "
              f"{t['torch'] / t['tapegrad']:6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

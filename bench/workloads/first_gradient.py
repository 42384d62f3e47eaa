"""Time to first gradient in a fresh interpreter: import + one tiny backward.

Measured inside the child with perf_counter (interpreter start-up excluded), as in
    import time; t=time.perf_counter(); import tapegrad as tg; ...; y.backward()
cold: NUMBA_CACHE_DIR is a fresh empty temp dir for every run.
warm: the timed runs reuse the cache dir filled by the last cold run (or, when cold
      was not run, by one untimed priming run).
torch ignores NUMBA_CACHE_DIR, so its cold/warm differ only by OS file caching.
"""
import atexit
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from ..harness import Config, Impl, Missing

NAME = "first_gradient"
FRAMEWORKS = ("tapegrad", "torch")
ROOT = Path(__file__).resolve().parents[2]
SNIPPET = ("import time;t=time.perf_counter();import {mod} as tg;"
           "x=tg.tensor(2.0,requires_grad=True);y=(x*x+x.sin());y.backward();"
           "dt=time.perf_counter()-t;print(dt, y.item(), x.grad.item())")
_dirs = []
_last_cold = {}  # framework -> cache dir of its last cold run
atexit.register(lambda: [shutil.rmtree(d, ignore_errors=True) for d in _dirs])


def ops(fw, cfg):
    return None


def configs(quick):
    return [Config(kind, "default", {"kind": kind, "repeats": 1 if quick else 5, "timeout": 300})
            for kind in ("cold", "warm")]


def reference(cfg):
    return 4 + np.sin(2.0), 4 + np.cos(2.0)


def _fresh_dir():
    d = tempfile.mkdtemp(prefix="bench-numba-cache-")
    _dirs.append(d)
    return d


def _spawn(fw, cache_dir, timeout):
    env = {**os.environ, "NUMBA_CACHE_DIR": cache_dir}
    p = subprocess.run([sys.executable, "-c", SNIPPET.format(mod=fw)], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        lines = (p.stderr or p.stdout).strip().splitlines() or [f"exit code {p.returncode}"]
        raise RuntimeError(f"child exit {p.returncode}: {lines[-1]}")
    dt, value, grad = map(float, p.stdout.split()[-3:])
    return dt, (value, grad)


def build(fw, cfg):
    if importlib.util.find_spec(fw) is None:
        raise Missing(f"no module named {fw!r}")
    kind, timeout = cfg.params["kind"], cfg.params["timeout"]
    st = {"dir": _last_cold.get(fw)}
    if kind == "warm" and st["dir"] is None:
        st["dir"] = _fresh_dir()
        _spawn(fw, st["dir"], timeout)  # priming run, untimed

    def reset():
        if kind == "cold":
            st["dir"] = _fresh_dir()

    def run():
        out = _spawn(fw, st["dir"], timeout)
        if kind == "cold":  # a completed cold run's cache primes "warm" for free
            _last_cold[fw] = st["dir"]
        return out

    return Impl(run, lambda out: out, reset,
                self_timed=True, max_repeats=cfg.params["repeats"],
                note="in-child import+first grad")

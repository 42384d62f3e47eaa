"""Time to first gradient in a fresh interpreter: import + one tiny gradient.

Measured inside the child with perf_counter (interpreter start-up excluded), as in
    import time; t=time.perf_counter(); import tapegrad as tg; ...; y.backward()
cold: NUMBA_CACHE_DIR is a fresh empty temp dir for every run.
warm: the Numba cache where it normally lives, filled by one untimed priming run.
Only tapegrad caches compiled code on disk (Numba), so for the others cold and warm differ
only by the OS file cache.  --quick runs "warm" only (a cold tapegrad start compiles the
kernels: several seconds) and primes tapegrad's cache only.
"""
import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from importlib.util import find_spec
from pathlib import Path

import numpy as np

from ..frameworks import Missing
from ..harness import Config, Impl

NAME = "first_gradient"
FRAMEWORKS = ("tapegrad", "torch", "jax", "autograd")
SIZES, QUICK_SIZES = ("cold", "warm"), ("warm",)
XLABEL = None
ROOT = Path(__file__).resolve().parents[2]
_TORCH_API = ("import {mod} as tg;x=tg.tensor(2.0,requires_grad=True);y=x*x+x.sin();y.backward();"
              "v,g=y.item(),x.grad.item()")
SNIPPETS = {
    "tapegrad": _TORCH_API.format(mod="tapegrad"),
    "torch": _TORCH_API.format(mod="torch"),
    "jax": "import jax;v,g=jax.value_and_grad(lambda x:x*x+jax.numpy.sin(x))(2.0);v,g=float(v),float(g)",
    "autograd": "import autograd,autograd.numpy as np;"
                "v,g=autograd.value_and_grad(lambda x:x*x+np.sin(x))(2.0)",
}
WRAPPER = "import time;t=time.perf_counter();{snippet};dt=time.perf_counter()-t;print(dt,v,g)"
_dirs = []
atexit.register(lambda: [shutil.rmtree(d, ignore_errors=True) for d in _dirs])


def ops(fw, cfg):
    return None


def configs(kind, quick):
    return [Config(kind, None, "default", {"kind": kind, "repeats": 1 if quick else 5,
                                           "quick": quick, "timeout": 300})]


def reference(cfg):
    return 4 + np.sin(2.0), 4 + np.cos(2.0)


def _fresh_dir():
    d = tempfile.mkdtemp(prefix="bench-numba-cache-")
    _dirs.append(d)
    return d


def _spawn(fw, cache_dir, timeout):
    env = dict(os.environ)
    if cache_dir:
        env["NUMBA_CACHE_DIR"] = cache_dir
    p = subprocess.run([sys.executable, "-c", WRAPPER.format(snippet=SNIPPETS[fw])], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        lines = (p.stderr or p.stdout).strip().splitlines() or [f"exit code {p.returncode}"]
        raise RuntimeError(f"child exit {p.returncode}: {lines[-1]}")
    dt, value, grad = map(float, p.stdout.split()[-3:])
    return dt, (value, grad)


def build(fw, cfg):
    if find_spec(fw) is None:
        raise Missing(f"no module named {fw!r}")
    kind, timeout = cfg.params["kind"], cfg.params["timeout"]
    st = {"dir": None}                        # None: the usual cache location
    if kind == "warm" and (fw == "tapegrad" or not cfg.params["quick"]):
        _spawn(fw, None, timeout)             # priming run, untimed

    def reset():
        if kind == "cold":
            st["dir"] = _fresh_dir()

    return Impl(lambda: _spawn(fw, st["dir"], timeout), reset=reset, self_timed=True,
                max_repeats=cfg.params["repeats"], note="in-child import+first grad")

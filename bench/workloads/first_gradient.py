"""Time to first use in a fresh interpreter: import + the first use of one feature.

Each feature runs in a child of its own, measured inside it with perf_counter
(interpreter start-up excluded), as in
    import time; t=time.perf_counter(); import tapegrad as tg; ...; y.backward()
Features: ``scalar`` (x*x + sin(x) at 2.0, backward), ``array`` (sum(sin(v) * v) over
1,000 values, backward), ``large_array`` (the same over 100,000 values: tapegrad's fused
kernels), ``replay`` (a traced function's first ``grad``; JAX: a
jitted ``value_and_grad``), ``compiled`` (``trace(...).compile()`` then ``grad``),
``forward`` (``autograd.functional.jvp``; JAX: ``jvp``), ``create_graph`` (the second
derivative by ``grad(..., create_graph=True)``; JAX: ``grad(grad)``).  A framework without
the feature is reported missing.
cold: NUMBA_CACHE_DIR is a fresh empty temp dir for every run; tapegrad's child then
waits, untimed, for the compiles it left running in the background (so that they do not
slow the next run down).
warm: the Numba cache where it normally lives, filled by one untimed priming run.
Only tapegrad caches compiled code on disk (Numba), so for the others cold and warm differ
only by the OS file cache.  --quick runs "warm scalar" only and primes tapegrad's cache
only.
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
FEATURES, QUICK_FEATURES = ("scalar", "array", "large_array", "replay", "compiled", "forward",
                            "create_graph"), ("scalar",)
XLABEL = None
ROOT = Path(__file__).resolve().parents[2]
_N = {"array": 1_000, "large_array": 100_000}
_ARRAY = ("import numpy as np;import {{mod}} as tg;"
          "x=tg.tensor(np.linspace(0,1,{n}),requires_grad=True);y=(x.sin()*x).sum();"
          "y.backward();v,g=y.item(),x.grad.sum().item()")
_JAX_ARRAY = ("import jax;import jax.numpy as jnp;"
              "v,g=jax.value_and_grad(lambda x:(jnp.sin(x)*x).sum())(jnp.linspace(0,1,{n}));"
              "v,g=float(v),float(g.sum())")
# PyTorch's API: tapegrad and torch alike ({mod})
_TORCH_API = {
    "scalar": "import {mod} as tg;x=tg.tensor(2.0,requires_grad=True);y=x*x+x.sin();"
              "y.backward();v,g=y.item(),x.grad.item()",
    **{k: _ARRAY.format(n=n) for k, n in _N.items()},
    "forward": "import {mod} as tg;v,g=tg.autograd.functional.jvp(lambda x:x*x+x.sin(),"
               "tg.tensor(2.0),tg.tensor(1.0));v,g=v.item(),g.item()",
    "create_graph": "import {mod} as tg;x=tg.tensor(2.0,requires_grad=True);y=x*x+x.sin();"
                    "d,=tg.autograd.grad(y,x,create_graph=True);d.backward();"
                    "v,g=d.item(),x.grad.item()",
}
_TRACED = ("import numpy as np;import tapegrad as tg;"
           "tr=tg.trace(lambda a:(a*a).sum()+a.sin().sum(),np.ones(5)){compile};"
           "v,g=tr.value_and_grad(np.full(5,2.0));v,g=v.item(),g.sum().item()")
_JAX_F = "import jax;import jax.numpy as jnp;f=lambda x:x*x+jnp.sin(x);"
SNIPPETS = {
    "tapegrad": {**{k: s.format(mod="tapegrad") for k, s in _TORCH_API.items()},
                 "replay": _TRACED.format(compile=""),
                 "compiled": _TRACED.format(compile=".compile()")},
    "torch": {k: s.format(mod="torch") for k, s in _TORCH_API.items()},
    "jax": {"scalar": _JAX_F + "v,g=jax.value_and_grad(f)(2.0);v,g=float(v),float(g)",
            **{k: _JAX_ARRAY.format(n=n) for k, n in _N.items()},
            "replay": _JAX_F.replace("f=lambda x:x*x+jnp.sin(x)",
                                     "f=lambda a:(a*a).sum()+jnp.sin(a).sum()")
                      + "v,g=jax.jit(jax.value_and_grad(f))(jnp.full(5,2.0));"
                      "v,g=float(v),float(g.sum())",
            "forward": _JAX_F + "v,g=jax.jvp(f,(2.0,),(1.0,));v,g=float(v),float(g)",
            "create_graph": _JAX_F + "v,g=jax.grad(f)(2.0),jax.grad(jax.grad(f))(2.0);"
                            "v,g=float(v),float(g)"},
    "autograd": {"scalar": "import autograd,autograd.numpy as np;"
                           "v,g=autograd.value_and_grad(lambda x:x*x+np.sin(x))(2.0)",
                 "create_graph": "import autograd,autograd.numpy as np;f=lambda x:x*x+np.sin(x);"
                                 "v,g=autograd.grad(f)(2.0),autograd.grad(autograd.grad(f))(2.0)"},
}
WRAPPER = "import time;t=time.perf_counter();{snippet};dt=time.perf_counter()-t;print(dt,v,g)"
# after the timed part: tapegrad's background compiles finish before the next run starts
SETTLE = ";from tapegrad.kernels import cold;cold.wait_background()"
_dirs = []
atexit.register(lambda: [shutil.rmtree(d, ignore_errors=True) for d in _dirs])


def ops(fw, cfg):
    return None


def configs(kind, quick):
    return [Config(f"{kind} {feature}", None, "default",
                   {"kind": kind, "feature": feature, "quick": quick, "timeout": 300,
                    "repeats": 1 if quick else 3 if kind == "cold" else 5})
            for feature in (QUICK_FEATURES if quick else FEATURES)]


def reference(cfg):
    feature = cfg.params["feature"]
    if feature in _N:
        v = np.linspace(0, 1, _N[feature])
        return float(np.sum(np.sin(v) * v)), float(np.sum(np.cos(v) * v + np.sin(v)))
    if feature in ("replay", "compiled"):
        return 5 * (4 + np.sin(2.0)), 5 * (4 + np.cos(2.0))
    if feature == "create_graph":
        return 4 + np.cos(2.0), 2 - np.sin(2.0)
    return 4 + np.sin(2.0), 4 + np.cos(2.0)


def _fresh_dir():
    d = tempfile.mkdtemp(prefix="bench-numba-cache-")
    _dirs.append(d)
    return d


def _spawn(fw, feature, cache_dir, timeout):
    env = dict(os.environ)
    code = WRAPPER.format(snippet=SNIPPETS[fw][feature])
    if cache_dir:
        env["NUMBA_CACHE_DIR"] = cache_dir
        code += SETTLE if fw == "tapegrad" else ""
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        lines = (p.stderr or p.stdout).strip().splitlines() or [f"exit code {p.returncode}"]
        raise RuntimeError(f"child exit {p.returncode}: {lines[-1]}")
    dt, value, grad = map(float, p.stdout.split()[-3:])
    return dt, (value, grad)


def build(fw, cfg):
    if find_spec(fw) is None:
        raise Missing(f"no module named {fw!r}")
    kind, feature, timeout = cfg.params["kind"], cfg.params["feature"], cfg.params["timeout"]
    if feature not in SNIPPETS[fw]:
        raise Missing(f"{fw} has no {feature.replace('_', ' ')} feature here")
    st = {"dir": None}                        # None: the usual cache location
    if kind == "warm" and (fw == "tapegrad" or not cfg.params["quick"]):
        _spawn(fw, feature, None, timeout)    # priming run, untimed

    def reset():
        if kind == "cold":
            st["dir"] = _fresh_dir()

    return Impl(lambda: _spawn(fw, feature, st["dir"], timeout), reset=reset, self_timed=True,
                max_repeats=cfg.params["repeats"], note=f"in-child import+first {feature}")

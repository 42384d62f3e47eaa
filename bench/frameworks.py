"""The frameworks a workload can be built in: names, imports, thread settings, compile steps.

A bench framework name is a library plus a way of running it (``torch`` and ``torch-mt``
are both PyTorch, ``jax`` and ``jax-jit`` both JAX).  Every comparison library is
optional: ``load`` raises ``Missing`` when it cannot be imported, and the harness turns
that into a "missing" row rather than leaving the framework out.
"""
from __future__ import annotations

import importlib
import time

DESCRIPTIONS = {
    "tapegrad": "tapegrad eager: every run records the tape and sweeps it backward",
    "tapegrad-replay": "tapegrad.trace(fn, x0) recorded once (prep), then .grad(x) replays it",
    "tapegrad-compiled": "a traced tape compiled to native code (traced.compile(), prep)",
    "torch": "PyTorch eager, 1 thread",
    "torch-mt": "PyTorch eager, its default thread count",
    "jax": "JAX eager: op by op, no jit",
    "jax-jit": "jax.jit of the gradient function; compile time is prep, not in the timed run",
    "autograd": "HIPS autograd",
    "micrograd": "micrograd (scalar Values; no exp/log, so scalar polynomial workloads only)",
    "numba": "hand-written gradient compiled by Numba: the speed-of-light reference",
    "numpy": "hand-written backward in NumPy",
    "python": "plain Python floats, forward only: the interpreter floor",
}
_MODULE = {"tapegrad-replay": "tapegrad", "tapegrad-compiled": "tapegrad", "torch-mt": "torch",
           "jax-jit": "jax", "micrograd": "micrograd.engine"}
_torch_default_threads = None


class Missing(Exception):
    """The framework (or the feature a row needs) is not available here."""


def load(name: str):
    """Import the library behind a bench framework name, set up the way that row runs.

    torch: 1 thread; torch-mt: the thread count torch chose at import.  jax: float64
    enabled (workloads pass float32 arrays explicitly where they want float32)."""
    global _torch_default_threads
    modname = _MODULE.get(name, name)
    try:
        mod = importlib.import_module(modname)
    except ImportError as e:
        raise Missing(f"{type(e).__name__}: {e}") from e
    if modname == "torch":
        if _torch_default_threads is None:
            _torch_default_threads = mod.get_num_threads()
        mod.set_num_threads(_torch_default_threads if name == "torch-mt" else 1)
    elif modname == "jax":
        mod.config.update("jax_enable_x64", True)
    return mod


def torch_default_threads():
    """torch's own thread count (None until a torch row has loaded it)."""
    return _torch_default_threads


def timed(make):
    """(make(), seconds it took): one-off preparation reported as a row's prep time."""
    t0 = time.perf_counter()
    out = make()
    return out, time.perf_counter() - t0


def jax_gradient(fw: str, f, *example, value=True, argnums=0):
    """JAX's value_and_grad (or grad) of ``f``: eager for "jax", ahead-of-time compiled at
    the example arguments for "jax-jit".  Returns (function, prep seconds or None)."""
    jax = load(fw)
    g = (jax.value_and_grad if value else jax.grad)(f, argnums=argnums)
    if fw == "jax":
        return g, None
    return timed(lambda: jax.jit(g).lower(*example).compile())


def block(out):
    """Wait for JAX's asynchronous dispatch, so the timed run includes the work."""
    import jax
    return jax.block_until_ready(out)


def numba_compiled(py_func, *example):
    """Numba-compile a hand-written gradient; the first call (the compile) is prep."""
    import numba
    f = numba.njit(cache=False)(py_func)
    return f, timed(lambda: f(*example))[1]


def tapegrad_traced(fw: str, fn, *example):
    """tapegrad.trace(fn, *example), compiled for "tapegrad-compiled" and never compiled
    for "tapegrad-replay" (the interpreted tier: no automatic compilation).
    Returns (traced, prep seconds)."""
    tg = load(fw)
    traced, prep = timed(lambda: tg.trace(fn, *example, compile_after=None))
    if fw == "tapegrad-compiled":
        compiled, more = timed(traced.compile)
        traced, prep = compiled, prep + more
    return traced, prep

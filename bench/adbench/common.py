"""What the adbench workloads share: the standard rows of a scalar objective of a few
parameter arrays, the PyTorch float64 reference, JAX's spelling of the torch API, and the
op count (tapegrad tape entries of one eager run).

A problem module writes its objective once, ``objective(m, consts, *params)``, in the torch
API (``m`` is tapegrad, torch, or ``jax_api()``), and its inputs as NumPy arrays; then

  tapegrad, torch, torch-mt   eager: fresh leaves (untimed), objective, ``backward()``
  tapegrad-replay             ``tapegrad.trace(objective, *params)`` once (prep), then
                              ``value_and_grad(*params)`` replays it
  jax-jit                     ``jax.jit(jax.value_and_grad(objective))``, compiled as prep

The timed output is the value and the gradients, checked (flattened and concatenated)
against the reference before timing.
"""
from __future__ import annotations

import sys

import types

import numpy as np

from ..frameworks import Missing, block, jax_gradient, load, tapegrad_traced
from ..harness import Impl, leaves, to_float, to_numpy

STANDARD = ("tapegrad", "tapegrad-replay", "torch", "torch-mt", "jax-jit")


def flat(value, grads):
    """(value, grads) -> (float, one float64 vector), the form the harness checks."""
    return to_float(value), np.concatenate([to_numpy(g).ravel() for g in grads])


def jax_api():
    """jax.numpy with the few torch spellings the objectives use."""
    jax = load("jax-jit")
    jnp = jax.numpy
    ns = types.SimpleNamespace(**{k: getattr(jnp, k) for k in dir(jnp) if not k.startswith("_")})
    ns.cat, ns.sigmoid, ns.tensor = jnp.concatenate, jax.nn.sigmoid, jnp.asarray
    return ns


def tensors(m, consts):
    """The constant inputs as tensors of ``m``: arrays (integer ones stay integer: indices)
    and lists of arrays; anything else (Python numbers) as it is."""
    def one(c):
        if isinstance(c, np.ndarray):
            return m.tensor(c)
        return [one(v) for v in c] if isinstance(c, list) else c
    return tuple(one(c) for c in consts)


def eager(m, objective, consts, params, dtype="float64"):
    """The eager row: fresh requires_grad leaves before every run (untimed), then the
    objective and ``backward()``; reads (value, gradients)."""
    cs, st = tensors(m, consts), {}

    def reset():
        st["p"] = leaves(m, params, dtype)

    def run():
        f = objective(m, cs, *st["p"])
        f.backward()
        return f

    return Impl(run, lambda f: flat(f, [p.grad for p in st["p"]]), reset)


def replay(fw, objective, consts, params):
    """The tapegrad-replay row: one recording (prep), then replayed value and gradients."""
    m = load(fw)
    cs, ps = tensors(m, consts), [m.tensor(p) for p in params]
    traced, prep = tapegrad_traced(fw, lambda *p: objective(m, cs, *p), *ps)

    def run():
        value, grads = traced.value_and_grad(*ps)
        return value, grads if isinstance(grads, tuple) else (grads,)

    return Impl(run, lambda out: flat(*out), prep_s=prep)


def jax_jit(fw, objective, consts, params):
    jm = jax_api()
    vg, prep = jax_gradient(fw, lambda p: objective(jm, consts, *p), list(params))
    return Impl(lambda: block(vg(list(params))), lambda out: flat(*out), prep_s=prep)


def build_standard(fw, objective, consts, params, frameworks=STANDARD):
    """The rows of a plain value-and-gradient problem (see the module docstring)."""
    if fw not in frameworks:
        raise ValueError(fw)
    if fw in ("tapegrad", "torch", "torch-mt"):
        return eager(load(fw), objective, consts, params)
    if fw == "tapegrad-replay":
        return replay(fw, objective, consts, params)
    if fw == "jax-jit":
        return jax_jit(fw, objective, consts, params)
    raise ValueError(fw)


def standard(ns, frameworks=STANDARD):
    """Give a plain value-and-gradient workload module (namespace ``ns``, defining
    ``objective`` and ``_data``) the harness's ``build`` and ``ops``, and PyTorch's
    float64 result as its ``reference`` unless it defines its own first."""
    def objective_data(cfg):
        return ns["objective"], ns["_data"](cfg)

    def build(fw, cfg):
        objective, data = objective_data(cfg)
        return build_standard(fw, objective, *data, frameworks=frameworks)

    def reference(cfg):
        objective, data = objective_data(cfg)
        return torch_reference(lambda: eager(load("torch"), objective, *data))

    ns["build"] = build
    ns["ops"] = lambda fw, cfg: tape_ops(sys.modules[ns["__name__"]], cfg)
    ns.setdefault("reference", reference)


def torch_reference(build_torch):
    """PyTorch's float64 (value, gradient) as the reference, from ``build_torch()`` (an
    Impl of the torch row); (None, None) where PyTorch is not installed: the rows are
    then checked against tapegrad's alone."""
    try:
        impl = build_torch()
    except Missing:
        return None, None
    if impl.reset:
        impl.reset()
    return impl.read(impl.run())


_OPS = {}


def tape_ops(wl, cfg):
    """Entries one eager tapegrad run records on its tape (ops of the forward, and for
    create_graph problems of the recorded backward too): the op count behind ns/op,
    the same count for every framework.  Measured once per size."""
    key = (wl.NAME, cfg.size, cfg.dtype)
    if key not in _OPS:
        _OPS[key] = None        # tapegrad unavailable or failing here: no count, no error
        try:
            tg = load("tapegrad")
            impl = wl.build("tapegrad", cfg)
            if impl.reset:
                impl.reset()
            with tg.Tape() as tape:
                impl.run()
                _OPS[key] = len(tape) or None
        except Exception:       # the tapegrad row itself reports what went wrong
            pass
    return _OPS[key]

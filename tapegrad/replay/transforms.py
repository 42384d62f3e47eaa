"""``tapegrad.grad`` / ``tapegrad.value_and_grad``: functional transforms that trace on
the first call and replay afterwards.

Recordings are cached per call signature (the shapes and dtypes of the traced
arguments, the values of the others), as ``jax.jit`` caches per signature; within a
signature a recording is added when the inputs take another branch.  ``.explain()``
says why each recording was made.
"""
import functools

import numpy as np

from ..tensor import Tensor
from .traced import Traced


def _signature(args):
    key = []
    for a in args:
        if isinstance(a, Tensor):
            key.append(("tensor", tuple(a.shape), a.dtype.name))
        elif isinstance(a, (float, np.floating)):
            key.append(("float",))
        elif isinstance(a, np.ndarray):
            key.append(("array", a.shape, str(a.dtype)))
        else:
            key.append(("static", repr(a)))
    return tuple(key)


class _Transform:
    def __init__(self, fn, argnums, with_value):
        self.fn, self.argnums, self.with_value = fn, argnums, with_value
        self.cache = {}
        self.log = []
        functools.update_wrapper(self, fn)

    def __call__(self, *args):
        key = _signature(args)
        traced = self.cache.get(key)
        if traced is None:
            self.log.append(f"new signature {key}" if self.cache else f"first call {key}")
            traced = self.cache[key] = Traced(self.fn, *args, argnums=self.argnums)
        value, grads = traced.value_and_grad(*args)
        return (value, grads) if self.with_value else grads

    def explain(self):
        """Why each recording was made: new signatures and failed guards, in order."""
        out = list(self.log)
        for key, traced in self.cache.items():
            out += [f"{key}: {why}" for why in traced.explain()[1:]]
        return out


def grad(fn, argnums=0):
    """The gradient of scalar ``fn`` w.r.t. argument(s) ``argnums``, as a function."""
    return _Transform(fn, argnums, False)


def value_and_grad(fn, argnums=0):
    """``(fn(*args), grad)`` as a function."""
    return _Transform(fn, argnums, True)

"""Tensor hooks: Python callbacks on the gradient flowing into a tensor.

A hook on a non-leaf is a host entry: its tape entry is flagged ``HOOKED``, the compiled
sweep stops there once the entry's adjoint is complete, the hooks run on it (and may
replace it), and the sweep resumes at that entry.  A hook on a leaf runs when the
leaf's gradient is delivered, before AccumulateGrad.  A tape without hooks pays nothing.
"""
import itertools

import numpy as np

from ..tape import HOOKED

_ids = itertools.count()


class RemovableHandle:
    """Returned by ``register_hook``; ``remove()`` unregisters the hook."""

    __slots__ = ("_hooks", "id")

    def __init__(self, hooks):
        self._hooks = hooks
        self.id = next(_ids)

    def remove(self):
        self._hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def register_hook(tensor, hook):
    """``Tensor.register_hook``: ``hook(grad)`` may return a replacement gradient."""
    if not tensor._rg:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    t = tensor._t
    if t is None:
        hooks = tensor.__dict__.setdefault("_hooks", {})
    else:
        from .graph import node_of, node_outputs
        t.flush()
        hooks = t.autograd.hooks.setdefault(tensor._i, {})
        t.autograd.hook_dtypes[tensor._i] = tensor.dtype.np
        # every output of its Node (a piece of split / unbind): a backward reaching only
        # another piece calls this hook with None, as PyTorch's (``node_hooks.at_hook``)
        for e in node_outputs(t, node_of(t, tensor._i)._i)[0]:
            t.FLAGS[e] |= HOOKED
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    return handle


def register_post_accumulate_grad_hook(tensor, hook):
    """``hook(tensor)`` runs after AccumulateGrad has updated ``tensor.grad`` (leaves only)."""
    if tensor._t is not None:
        raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
    if not tensor._rg:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    hooks = tensor.__dict__.setdefault("_post_hooks", {})
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    return handle


def apply_hooks(hooks, g, acc_hooks=None):
    """Apply ``hooks`` (id -> fn, in registration order) to the gradient tensor ``g``;
    each may return a replacement of the same shape.  ``acc_hooks``: the NodeHooks of a
    leaf's AccumulateGrad, whose prehooks run next (on the tuple ``(g,)``)."""
    for fn in list(hooks.values()):
        out = fn(g)
        if out is not None:
            if tuple(out.shape) != tuple(g.shape):
                raise RuntimeError(f"hook '{_name(fn)}' has changed the size of value")
            g = out
    if acc_hooks is not None and acc_hooks.pre:
        grads = (g,)
        for fn in list(acc_hooks.pre.values()):
            grads = replaced(fn, fn(grads), grads)
        g = grads[0]
    return g


def run_hooks(hooks, grad, dtype, acc_hooks=None):
    """``apply_hooks`` on the float64 array ``grad``, shown to the hooks as a tensor of
    ``dtype``; returns the resulting float64 array."""
    from ..tensor import from_array
    return np.asarray(apply_hooks(hooks, from_array(np.array(grad, dtype)), acc_hooks)._arr,
                      np.float64)


def _name(fn):
    return getattr(fn, "__name__", repr(fn))


def replaced(fn, result, old):
    """A Node hook's replacement of the tuple ``old``, checked as PyTorch checks it."""
    if result is None:
        return old
    if not isinstance(result, tuple):
        raise TypeError(f"expected tuple, but hook returned '{type(result).__name__}'")
    if len(result) != len(old):
        raise RuntimeError(f"hook '{_name(fn)}' has returned an incorrect number of values "
                           f"(got {len(result)}, but expected {len(old)})")
    for new, was in zip(result, old):
        if new is not None and was is not None and tuple(new.shape) != tuple(was.shape):
            raise RuntimeError(f"hook '{_name(fn)}' has changed the size of value")
    return result

"""Custom autograd Functions: ``forward`` and ``backward`` written in Python.

``Function.apply`` runs ``forward`` without recording and writes one ``function`` host
entry per differentiable output.  When the compiled sweep reaches a group's outputs it
stops; the engine calls ``backward`` with the outputs' gradients, adds the results into
the inputs' adjoints and resumes the sweep below the group.
"""
import functools
import weakref

import numpy as np

from ..grad_mode import no_grad
from ..inplace import _note_modified, keep_old_history
from ..ops.table import CODE
from ..tensor import Tensor, _result, buf, from_array, recording, requires_grad
from . import saved_hooks

_FUNCTION = CODE["function"]
_LATER = object()     # an output returned again later: the later one is made first


class FunctionCtx:
    """The ``ctx`` of forward/backward: saved tensors, flags, and any attribute."""

    def __init__(self):
        self.to_save = ()
        self.needs_input_grad = ()
        self.materialize_grads = True
        self._non_differentiable = set()
        self._dirty = ()

    def save_for_backward(self, *tensors):
        self.to_save = tensors

    @property
    def saved_tensors(self):
        return tuple(s.tensor() if s.__class__ is _SavedOutput else s
                     for s in saved_hooks.unpack_saved(self.to_save))

    def mark_non_differentiable(self, *tensors):
        self._non_differentiable.update(id(x) for x in tensors)

    def mark_dirty(self, *tensors):
        self._dirty = tensors

    def set_materialize_grads(self, value):
        self.materialize_grads = bool(value)


class Function:
    """Subclass with static ``forward(ctx, *args)`` and ``backward(ctx, *grads)``; call
    ``Function.apply(*args)``."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom "
                                  "autograd.Function.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        """Overridden (PyTorch 2's style): ``forward(*args)`` takes no ctx, and this
        saves what backward needs from ``inputs`` (the args) and ``output``."""
        raise NotImplementedError("setup_context is not overridden")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for "
                                  "your custom autograd.Function to use it with backward mode "
                                  "AD.")

    @classmethod
    def apply(cls, *args):
        ctx = FunctionCtx()
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        tensors = [a for a in args if isinstance(a, Tensor)]
        t = recording(*tensors) if requires_grad(*tensors) else None   # (not replayed)
        # the inputs' buffers before forward runs: an input it modifies in place keeps
        # its history up to here
        inputs = None if t is None else [buf(t, a, False) for a in tensors]
        with no_grad():
            if cls.setup_context is not Function.setup_context:   # PyTorch 2's style
                out = cls.forward(*args)
                cls.setup_context(ctx, args, out)
            else:
                out = cls.forward(ctx, *args)
        outs = out if isinstance(out, tuple) else (out,)
        dirty = _dirty_outputs(ctx, outs, t)
        if t is None:
            return out
        group = _Group(cls, ctx, args, inputs, outs)
        results = []
        last = {id(o): k for k, o in enumerate(outs)}   # a tensor returned twice is one
        for k, o in enumerate(outs):                   # output, its last (PyTorch's)
            if not isinstance(o, Tensor) or not o.dtype.is_floating_point or \
                    id(o) in ctx._non_differentiable:
                results.append(o)
                continue
            if last[id(o)] != k:
                results.append(_LATER)
                continue
            # extras: position among the outputs, number of inputs, the input buffers
            i = t.append(_FUNCTION, -1, -1, o._arr,
                         [len(group.outputs), len(group.inputs)] + group.inputs)
            t.autograd.functions[i] = group
            group.outputs.append((i, k, o.dtype.np, tuple(o.shape)))
            if id(o) in dirty:         # the modified input itself, with this history
                keep_old_history(o)
                o._t, o._tid, o._i, o._rg = t, t.uid, i, True
                results.append(o)
            else:
                results.append(_result(o._d, t, i))
        results = [results[last[id(o)]] if r is _LATER else r for o, r in zip(outs, results)]
        if ctx.to_save:
            ctx.to_save = _saved_outputs(ctx.to_save, outs, results)
        return tuple(results) if isinstance(out, tuple) else results[0]


class _SavedOutput:
    """An output of ``forward`` that ``save_for_backward`` saved, held without a strong
    reference to its tape (the tape holds the ctx: no cycle).  Unpacked, it is the output
    with its history, as PyTorch's: a backward under ``create_graph`` that uses it is
    differentiated through the Function again (``exp``'s ``g * y``)."""

    __slots__ = ("tape", "entry", "value")

    def __init__(self, result):
        self.tape, self.entry, self.value = weakref.ref(result._t), result._i, result._d

    def tensor(self):
        t = self.tape()
        return from_array(np.array(self.value)) if t is None else _result(self.value, t,
                                                                          self.entry)


def _saved_outputs(to_save, outs, results):
    """``ctx.to_save`` as the ctx keeps it: outputs of forward stand for the results that
    carry the Function's history (hooks, if active, pack those); the rest as saved."""
    at = {id(o): r for o, r in zip(outs, results)
          if r is not o and isinstance(r, Tensor) and r._t is not None}
    saved = tuple(at.get(id(x), x) for x in to_save)
    if not at or saved_hooks.packing():
        return saved_hooks.pack_saved(saved)
    made = {id(r) for r in at.values()}
    return tuple(_SavedOutput(x) if id(x) in made else x for x in saved)


def _dirty_outputs(ctx, outs, t):
    """Check the tensors ``ctx.mark_dirty`` named (PyTorch's errors) and bump their
    versions; returns their ids."""
    dirty = {id(x): x for x in ctx._dirty}
    if not dirty:
        return dirty
    returned = {id(o) for o in outs}
    for x in dirty.values():
        if t is not None and x._t is None and x._rg:
            raise RuntimeError("a leaf Variable that requires grad has been used in an in-place "
                               "operation.")
        if id(x) not in returned:
            raise RuntimeError("Some elements marked as dirty during the forward method were not "
                               "returned as output. The inputs that are modified inplace must all "
                               "be outputs of the Function.")
    for x in dirty.values():
        _note_modified(x)
        x._version += 1
    return dirty


class _Group:
    """What the engine needs to run one ``apply``'s backward."""

    __slots__ = ("cls", "ctx", "args", "inputs", "outputs", "n_outputs", "undefined")

    def __init__(self, cls, ctx, args, inputs, outs):
        self.cls, self.ctx, self.args, self.inputs = cls, ctx, args, inputs
        self.outputs = []          # (entry, position among forward's outputs, dtype, shape)
        self.n_outputs = len(outs)
        # what backward gets for an output without an entry (non-differentiable): zeros
        # where gradients are materialized (None for a non-tensor output)
        self.undefined = [(o.dtype.np, tuple(o.shape)) if isinstance(o, Tensor) else None
                          for o in outs]

    def backward(self, output_grads):
        """Gradients for the tensor inputs (float64 arrays or None) from ``backward``."""
        grads = [None if g is None else from_array(np.asarray(g, dtype))
                 for (_, _, dtype, _), g in zip(self.outputs, output_grads)]
        with no_grad():
            result = self.call_backward(grads)
        return [None if g is None else np.asarray(g._arr if isinstance(g, Tensor) else g,
                                                  np.float64) for g in result]

    def call_backward(self, output_grads):
        """Run the user's ``backward`` on the outputs' gradients (tensors or None, one per
        output entry) in the current grad mode; returns one validated gradient per tensor
        input (None where there is none), summed down to the input's shape where it is
        larger, as PyTorch does."""
        ctx, cls = self.ctx, self.cls
        grads = [None] * self.n_outputs
        for (_, k, _, _), g in zip(self.outputs, output_grads):
            grads[k] = g
        if ctx.materialize_grads:
            for k, spec in enumerate(self.undefined):
                if grads[k] is None and spec is not None:
                    grads[k] = from_array(np.zeros(spec[1], spec[0]))
        result = cls.backward(ctx, *grads)
        result = result if isinstance(result, tuple) else (result,)
        name = f"{cls.__name__}Backward"
        while len(result) > len(self.args) and result[-1] is None:
            result = result[:-1]       # extra trailing Nones are allowed, as PyTorch's
        if len(result) != len(self.args):
            raise RuntimeError(f"function {name} returned an incorrect number of gradients "
                               f"(expected {len(self.args)}, got {len(result)})")
        out = []
        for idx, (arg, g) in enumerate(zip(self.args, result)):
            if not isinstance(arg, Tensor):
                continue
            if g is None or not arg.requires_grad:
                out.append(None)
                continue
            if not isinstance(g, Tensor):
                g = from_array(np.asarray(g, np.float64))
            shape = tuple(arg.shape)
            if tuple(g.shape) != shape:
                if not _expandable(shape, tuple(g.shape)):
                    raise RuntimeError(f"Function {name} returned an invalid gradient at index "
                                       f"{idx} - got {list(g.shape)} but expected shape "
                                       f"compatible with {list(shape)}")
                g = _sum_to(g, shape)
            out.append(g)
        return out


def _expandable(shape, to):
    """Can ``shape`` be broadcast to ``to``?"""
    if len(shape) > len(to):
        return False
    return all(s == 1 or s == d for s, d in zip(reversed(shape), reversed(to)))


def _sum_to(g, shape):
    """``g`` summed over the dims that broadcasting ``shape`` to g's shape added."""
    lead = g.ndim - len(shape)
    dims = tuple(range(lead)) + tuple(lead + d for d, s in enumerate(shape)
                                      if s == 1 and g.shape[lead + d] != 1)
    if dims:
        g = g.sum(dims, keepdim=True)
    return g.reshape(shape)


def once_differentiable(fn):
    """Mark a ``backward`` as not differentiable twice: even under ``create_graph`` its
    gradients are computed without recording (they carry no history)."""
    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with no_grad():
            return fn(ctx, *args)
    return wrapper

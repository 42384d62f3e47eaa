"""``tapegrad.autograd.backward`` and ``grad``: PyTorch's entry points over the engine.

They validate and seed the outputs, let ``engine.run`` sweep the tapes from the
outputs' entries (``sweep``: the engine takes and returns tapes and entry indices, and
this maps them to tensors), and hand the gradients it returns to AccumulateGrad
(``.grad``, with the leaves' hooks) or return them as tensors.  This module also fills
the engine's ``CALLBACKS``: the Python of the autograd layer that a sweep runs
(AccumulateGrad of retained tensors, hooks, anomaly checks, the error of a saved value
changed in place, saved-tensor hooks, the ``create_graph`` sweep).
"""
import re
import threading
import warnings

import numpy as np

from .. import inplace
from ..grad_mode import STATE, set_grad_enabled
from ..ops.table import BY_CODE
from ..tensor import Size, Tensor, _leaf, _new, _norm
from . import anomaly, engine, nan_trace
from .graph import _inputs, node_of
from .hooks import apply_hooks, run_hooks
from .node_hooks import accumulate_hooks, accumulate_post_hooks, at_hook, function_output_hooks
from .recorded_backward import seeds_as_tensors, sweep_tape
from .saved_hooks import drop_consumed, saved_slots

_ACCUMULATE = threading.RLock()
CYCLE_WARNING = (
    "Using backward() with create_graph=True will create a reference cycle between the "
    "parameter and its gradient which can cause a memory leak. We recommend using "
    "autograd.grad when creating the graph to avoid this. If you have to use this function, "
    "make sure to reset the .grad fields of your parameters to None after use to break the "
    "cycle and avoid the leak.")


def _as_tuple(x):
    if x is None:
        return ()
    return tuple(x) if isinstance(x, (list, tuple)) else (x,)


def _distinct(tensors):
    """``tensors`` without repeats (by identity), in order: a tensor listed twice as an
    input of ``grad`` / ``backward`` is one input to the sweep, its hooks and its
    ``.grad``, as PyTorch's; ``grad`` hands its gradient back at each place."""
    return tuple({id(x): x for x in tensors}.values())


_ONE = np.ones(())           # the seed of a 0-d output (read only: shared)
_ONE.flags.writeable = False


def _seeds(outputs, grad_outputs, what="grad_output"):
    """Validated seed arrays for ``outputs`` (PyTorch's messages)."""
    grads = _as_tuple(grad_outputs) or (None,) * len(outputs)
    if len(grads) != len(outputs):
        raise RuntimeError(f"{what} should be a sequence of length {len(outputs)}, "
                           f"but got {len(grads)}")
    seeds = []
    for k, (out, g) in enumerate(zip(outputs, grads)):
        if not isinstance(out, Tensor):
            raise TypeError(f"expected Tensor as element {k} in argument 0, "
                            f"but got {type(out).__name__}")
        if not out._rg:
            raise RuntimeError(f"element {k} of tensors does not require grad and does not "
                               "have a grad_fn")
        if g is None:
            if out.numel() != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            seeds.append(_ONE if out.ndim == 0 else np.ones(out.shape))
            continue
        garr = np.asarray(g._arr if isinstance(g, Tensor) else g, dtype=np.float64)
        if garr.shape != tuple(out.shape):
            raise RuntimeError(f"Mismatch in shape: grad_output[{k}] has a shape of "
                               f"{Size(garr.shape)!r} and output[{k}] has a shape of "
                               f"{out.shape!r}.")
        seeds.append(garr)
    return seeds


def _accumulate(x, g):
    """AccumulateGrad: add ``g`` (a float or a float64 array) into ``x.grad``, in x's dtype
    (after the leaf's tensor hooks and AccumulateGrad prehooks, if it has any); returns
    the gradient added."""
    extra = x.__dict__
    if "_hooks" in extra:
        g = run_hooks(extra["_hooks"], np.reshape(g, x._arr.shape), x.dtype.np,
                      accumulate_hooks(extra))
    old = extra["_grad"] if "_grad" in extra else None   # (x.grad's own slot: no property)
    d = x._d
    if d.__class__ is float:           # the scalar path: one float, one new tensor
        if old is None:
            o = _new(Tensor)
            o._d, o._t, o._tid, o._i, o._rg = float(g), None, 0, -1, False
            extra["_grad"] = o
        else:
            old._d = old._d + g
        return g
    if old is None:
        extra["_grad"] = _leaf(_norm(np.array(g, d.dtype)))   # always a copy: g may view G
    else:
        if _own_array(old, d):        # in place, as PyTorch's (no fresh memory to fault in)
            np.add(old._d, g, out=old._d, casting="unsafe")
            old._version += 1
        else:
            old._d = _norm(np.asarray(old._arr + g, d.dtype))
        if "_views" in old.__dict__:  # (views of .grad see it, as PyTorch's storage)
            inplace.refresh(old)
    return g


def _own_array(grad, d):
    """May ``.grad`` take an addition in its own array (x's value ``d``)?  Yes for a
    gradient of x's shape and dtype that no tape holds (no history, never registered)
    and that is no view of another tensor."""
    a = grad._d
    return (a.__class__ is np.ndarray and a.dtype == d.dtype and a.shape == d.shape
            and a.flags.writeable and grad._t is None and not grad._tid
            and "_view" not in grad.__dict__)


def accumulate_recorded(x, g):
    """AccumulateGrad under ``create_graph``: ``.grad`` becomes a tensor with a history
    (out of place, so an earlier ``.grad`` keeps its own)."""
    extra = x.__dict__
    if extra and "_hooks" in extra:
        g = apply_hooks(extra["_hooks"], g, accumulate_hooks(extra))
    if g.dtype != x.dtype:
        g = g.to(x.dtype)
    x.grad = g if x.grad is None else x.grad + g
    return g


def sweep(outputs, seeds, retain_graph, inputs=(), create_graph=False, observe=None):
    """``engine.run`` from tensors ``outputs``: returns the (leaf, gradient) pairs it
    delivered (an output that is a leaf is its own, first) and the gradient of each of
    ``inputs`` (None where none reached it)."""
    roots, leaves = [], []
    for out, s in zip(outputs, seeds):
        if out._t is None:
            leaves.append((out, s))
        else:
            roots.append((out._t, out._i, s))
    want = None
    if inputs:
        at = {id(x): k for k, x in enumerate(inputs) if x._t is None}     # the leaves
        want = engine.Wanted((((x._t.uid, x._i), k) for k, x in enumerate(inputs)
                              if x._t is not None), at.keys(), len(inputs))
    deliveries, found = engine.run(roots, retain_graph, want, observe, create_graph)
    for t, ents, grads in deliveries:
        leaves += zip(map(t.sources.__getitem__, ents), grads)
    if want is not None and at:
        for leaf, g in leaves:
            k = at.get(id(leaf))
            if k is not None:
                found[k] = g if found[k] is None else found[k] + g
    return leaves, found


def _prepare(outputs, grad_outputs, create_graph):
    if anomaly.checking_nan():
        nan_trace.warn_forward(outputs)
    seeds = _seeds(outputs, grad_outputs)
    if create_graph:
        seeds = seeds_as_tensors(outputs, grad_outputs, seeds)
    return seeds


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None,
             grad_variables=None):
    """``tapegrad.autograd.backward``: accumulate d(tensors)/d(leaves) into ``.grad``."""
    outputs = _as_tuple(tensors)
    if retain_graph is None:
        retain_graph = create_graph
    traced, create_graph = _while_tracing(create_graph)
    seeds = _prepare(outputs, grad_tensors, create_graph)
    accumulate = _detached(accumulate_recorded) if traced else \
        accumulate_recorded if create_graph else _accumulate
    if inputs is not None:
        inputs = _distinct(_as_tuple(inputs))
    if inputs:
        _, found = sweep(outputs, seeds, retain_graph, inputs, create_graph)
        with _ACCUMULATE:
            for x, g in zip(inputs, found):
                if g is not None and not (x._t is not None and x._retains):
                    accumulate(x, g)       # (a retained non-leaf got it in the sweep)
        return
    if create_graph and not traced:
        warnings.warn(CYCLE_WARNING, UserWarning, stacklevel=3)
    deliveries, _ = sweep(outputs, seeds, retain_graph, create_graph=create_graph)
    with _ACCUMULATE:       # leaves shared between threads: no lost updates of .grad
        for leaf, g in deliveries:
            if not leaf._rg:
                continue
            if leaf._t is not None:   # (given a history in place since: PyTorch's error)
                raise RuntimeError("leaf variable has been moved into the graph interior")
            extra = leaf.__dict__
            if "_post_hooks" not in extra:
                accumulate(leaf, g)
                continue
            fresh = extra.get("_grad") is None
            g = accumulate(leaf, g)
            _post_accumulate(extra["_post_hooks"], leaf, create_graph)
            acc = accumulate_hooks(extra)
            if acc is not None:   # a new .grad is the gradient itself (PyTorch's)
                accumulate_post_hooks(acc, leaf.grad if fresh else g)


def _while_tracing(create_graph):
    """(traced, create_graph): while tracing, a backward without ``create_graph`` is
    recorded (and its results detached), so that a replay recomputes the gradient."""
    traced = STATE.trace is not None and not create_graph
    return traced, create_graph or traced


def _detached(accumulate):
    """AccumulateGrad that records (while tracing) and leaves ``.grad`` without history."""
    def detached(x, g):
        g = accumulate(x, g)
        x.grad = x.grad.detach()
        return g
    return detached


def _post_accumulate(hooks, leaf, create_graph):
    """A leaf's post-accumulate-grad hooks, in the backward's grad mode (off unless
    ``create_graph``: an optimizer step in a hook may update the leaf in place)."""
    with set_grad_enabled(create_graph):
        for fn in list(hooks.values()):
            out = fn(leaf)
            if out is None or out is leaf:          # (PyTorch accepts the tensor itself)
                continue
            if not isinstance(out, Tensor):
                raise TypeError(f"expected Variable, but hook returned '{type(out).__name__}'")
            raise RuntimeError("Tensor post accumulate grad hooks should return None.")


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         only_inputs=True, allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """``tapegrad.autograd.grad``: the gradients of ``outputs`` w.r.t. ``inputs``."""
    outputs = _as_tuple(outputs)
    inputs = _as_tuple(inputs)
    if allow_unused is None:
        allow_unused = materialize_grads
    for x in inputs:
        if not isinstance(x, Tensor) or not x._rg:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    if retain_graph is None:
        retain_graph = create_graph
    traced, create_graph = _while_tracing(create_graph)
    seeds = _prepare(outputs, grad_outputs, create_graph)
    distinct = _distinct(inputs)
    _, found = sweep(outputs, seeds, retain_graph, distinct, create_graph)
    if traced:
        found = [None if g is None else g.detach() for g in found]
    result = {}
    for x, g in zip(distinct, found):
        if g is not None and x._t is None and x.__dict__ and "_hooks" in x.__dict__:
            g = _leaf_hooks(x, g, create_graph)        # a leaf's tensor hooks run, as torch
        if g is None:
            if not allow_unused:
                raise RuntimeError("One of the differentiated Tensors appears to not have been "
                                   "used in the graph. Set allow_unused=True if this is the "
                                   "desired behavior.")
            zero = _leaf(_norm(np.zeros(x.shape, x.dtype.np))) if materialize_grads else None
            if zero is not None and create_graph and not traced:
                zero.requires_grad_()          # (as PyTorch's materialized zeros)
            result[id(x)] = zero
        elif create_graph:
            result[id(x)] = g if g.dtype == x.dtype else g.to(x.dtype)
        else:
            result[id(x)] = _leaf(_norm(np.asarray(g, x.dtype.np)))
    return tuple(result[id(x)] for x in inputs)


def _leaf_hooks(x, g, create_graph):
    """A leaf's tensor hooks on the gradient ``grad`` returns for it (its AccumulateGrad
    does not run: no prehooks of that Node)."""
    hooks = x.__dict__["_hooks"]
    if create_graph:
        return apply_hooks(hooks, g)
    return run_hooks(hooks, np.reshape(g, x._arr.shape), x.dtype.np)


def _raise_nan(t, i, G, live):
    """Anomaly mode: raise PyTorch's error if entry i left a NaN in an input's adjoint,
    with where the NaN started (``nan_trace``: the chain down from the output, and the
    first non-finite value of the forward pass if there is one)."""
    k = anomaly.nan_in_adjoints(t, i, G)
    if k is not None:
        err = anomaly.nan_error(t, i, k, node_of(t, i).name())
        err.nan_report = nan_trace.adjoint_report(t, i, live, k)
        err.forward_report = nan_trace.forward_origin(t, max(err.nan_report.chain))
        err.args = ("\n".join([err.args[0], str(err.nan_report)]
                              + [str(err.forward_report)] * (err.forward_report is not None)),)
        raise err


def _modified_error(t, hit, record):
    """PyTorch's error for saved entry ``hit`` of tape t, stale since the in-place op
    that ``t.autograd.modified`` noted as ``record`` ((a weak reference to the tensor
    changed, its version now, the version saved, the first entry after, through
    ``.data``)); the engine found it (``engine.modified_saved_error``)."""
    ref, now, then, _, data = record
    if data:
        return RuntimeError(
            "a value saved for backward was changed through .data (which shares its storage, "
            "not its version counter) after it was saved: PyTorch's backward would silently "
            "use the new value, but tapegrad's graph holds the old one, so it cannot compute "
            "that gradient. Run the forward again after the change (or change the value "
            "before the forward).")
    view = t.autograd.bases.get(hit)
    if view is not None and view[1] is not None:
        name = re.sub(r"Backward\d*$", "", BY_CODE[int(t.OP[hit])].node)
        return RuntimeError(
            f"Output {view[1]} of {name} is a view and its base or another view of its base "
            "has been modified inplace. This view is the output of a function that returns "
            "multiple views. Such functions do not allow the output views to be modified "
            "inplace. You should replace the inplace operation by an out-of-place one.")
    what = "a tensor"
    x = ref()
    if x is not None:
        now = x._version
        kind = {np.dtype(np.float64): "DoubleTensor",
                np.dtype(np.float32): "FloatTensor"}.get(x._arr.dtype, "Tensor")
        shape = list(t.shape(hit)) if view is not None else list(x.shape)
        holder = ("AsStrided" if view is not None else         # (PyTorch's view made again)
                  re.sub(r"Backward\d*$", "", x.grad_fn.name()) if x.grad_fn is not None
                  else None)
        what = f"[tapegrad.{kind} {shape}]" + (f", which is output 0 of {holder}," if holder
                                              else "")
    return RuntimeError(
        "one of the variables needed for gradient computation has been modified by an "
        f"inplace operation: {what} is at version {now}; expected version {then} "
        "instead. Hint: enable "
        "anomaly detection to find the operation that failed to compute its gradient, "
        "with torch.autograd.set_detect_anomaly(True, check_nan=False).")


def _retained(t, e, g):
    """AccumulateGrad of the non-leaf tensor that retains entry e's gradient."""
    _accumulate(t.autograd.retained[e], g)


def _register():
    cb = engine.CALLBACKS
    cb.retained, cb.at_hook, cb.function_output_hooks = _retained, at_hook, \
        function_output_hooks
    cb.checking_nan, cb.raise_nan = anomaly.checking_nan, _raise_nan
    cb.modified_error = _modified_error
    cb.saved_slots, cb.drop_consumed, cb.inputs_of = saved_slots, drop_consumed, _inputs
    cb.recorded_sweep = sweep_tape


_register()

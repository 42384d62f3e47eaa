"""``create_graph=True``: a backward that records its own computation on the tape.

The compiled sweep adds floats into an adjoint arena and records nothing.  For higher
order gradients the adjoints must be tensors with a history: this walk visits the same
entries in the same order (last to first, only those the outputs depend on), but each
adjoint is a tensor and each entry's contributions are computed by the tensor forms of
its rules (``adjoint_rules``), so the gradient computation lands on the tape as ordinary
entries and can itself be differentiated, to any order.  Custom Functions run their
``backward`` with grad mode on; hooks see (and may replace) tensor gradients.
"""
import numpy as np

from .. import tape as tp
from ..tensor import Tensor, _norm, _result, from_array
from .adjoint_rules import HOST_FIRST, HOST_LAST, RULES
from .hooks import apply_hooks


def seeds_as_tensors(grad_outputs, seeds):
    """The seed of each output as a tensor: the given grad_output itself (it may have a
    history of its own) or a constant."""
    given = grad_outputs if isinstance(grad_outputs, (list, tuple)) else (grad_outputs,)
    out = []
    for k, s in enumerate(seeds):
        g = given[k] if grad_outputs is not None and k < len(given) else None
        out.append(g if isinstance(g, Tensor) else from_array(s))
    return out


def _add(adj, j, c):
    old = adj.get(j)
    adj[j] = c if old is None else old + c


class _Handles:
    """The tensor that stands for each buffer of a tape: a leaf, constant or foreign
    tensor for a source entry, else a tensor recorded as that entry."""

    def __init__(self, t):
        self.t, self.cache = t, {}

    def __call__(self, j):
        x = self.cache.get(j)
        if x is None:
            t = self.t
            x = t.sources.get(j)
            if x is None:
                x = _result(_norm(t.value(j)), t, j)
            self.cache[j] = x
        return x


def sweep_tape(t, seeds, deliveries, pending, tapes, want_at, found, observe=None):
    """``engine._sweep_tape`` with tensor adjoints (see the module docstring)."""
    from .engine import accumulate_recorded, modified_saved_error
    t.flush()
    if t.released:
        raise RuntimeError(tp.SECOND_BACKWARD)
    n = t.n
    adj = {}
    for e, s in seeds:
        _add(adj, e, s)
    h = _Handles(t)
    live = np.zeros(n, np.uint8)
    for i in range(max(adj), -1, -1):
        g = adj.pop(i, None)
        if g is None:
            continue
        live[i] = 1
        op = t.OP[i]
        if tp.LEAF <= op <= tp.EXTERNAL:
            src = t.sources[i]
            if op == tp.LEAF:
                deliveries.append((src, g))
            elif op == tp.EXTERNAL:
                tapes[src._t.uid] = src._t
                pending.setdefault(src._t.uid, []).append((src._i, g))
            continue
        if t.FLAGS[i] & tp.CONSUMED:
            raise RuntimeError(tp.SECOND_BACKWARD)
        if i in t.hooks:
            g = apply_hooks(t.hooks[i], g)
        if i in t.retained:
            accumulate_recorded(t.retained[i], g)
        k = want_at.get((t.uid, i))
        if k is not None:
            found[k] = g if found[k] is None else found[k] + g
        if HOST_FIRST <= op <= HOST_LAST:
            contributions = _function(t, i, g, adj, live)
        else:
            contributions = RULES[op](t, i, g, h)
        for j, c in contributions:
            _add(adj, j, c)
    if t.modified:
        err = modified_saved_error(t, live, n)
        if err is not None:
            raise err
    return t, live


def _function(t, i, g, adj, live):
    """A custom Function's backward on tensors, with grad mode on."""
    group = t.functions[i]
    grads = []
    for e, _, _, _ in group.outputs:
        grads.append(g if e == i else adj.pop(e, None))
        live[e] = 1
    return [(b, r) for b, r in zip(group.inputs, group.call_backward(grads)) if r is not None]

"""Node hooks: ``grad_fn.register_prehook(fn)`` and ``grad_fn.register_hook(fn)``.

A Node is a view of tape entries rebuilt on demand, so its hooks live on the tape,
under each entry whose gradient the node receives (``t.autograd.node_hooks``; one entry, or the
outputs of a custom Function or of split / unbind), and those entries are flagged
``HOOKED``: the compiled sweep stops at the first of them it reaches, when their
gradients are complete, and hands the node to Python:

1. the tensor hooks of the node's outputs run, then the prehooks, on the tuple of the
   output gradients (None where none arrived), and may replace them;
2. the node's backward runs for this node alone: its entries and the hidden entries
   behind them (broadcasts, the inner steps of a composite op), with the tensor forms
   of the adjoint rules (``adjoint_rules``), because post hooks need one gradient per
   ``next_functions`` edge, which an adjoint arena summing into buffers cannot give
   (``x * x`` has two edges to one buffer);
3. the post hooks see ``(grad_inputs, grad_outputs)`` and may replace ``grad_inputs``,
   which are then added into the inputs' adjoints; the sweep resumes below the node.

Under ``create_graph`` the recorded backward runs the same steps with grad mode on.  A
tape without node hooks pays nothing: no entry is flagged.
"""
from collections import Counter

import numpy as np

from ..grad_mode import no_grad
from ..ops.table import CODE
from ..tape import HOOKED, live_tape
from ..tensor import from_array
from .adjoint_rules import RULES
from .engine import mark_reached
from .graph import _PIECES, edge_gradient, edges, node_of, node_outputs
from .hooks import RemovableHandle, replaced, run_hooks
from .recorded_backward import _add, _complete, _Reader
from .saved_hooks import restore, rule_contributions, write_unpacked

_FUNCTION = CODE["function"]


class NodeHooks:
    """The prehooks and post hooks of one Node (keyed by its first entry)."""

    __slots__ = ("key", "pre", "post")

    def __init__(self, key):
        self.key, self.pre, self.post = key, {}, {}


def register(t, key, fn, post):
    """Add ``fn`` to the hooks of the node of entry ``key``; returns its handle."""
    hooks = t.autograd.node_hooks.get(key)
    if hooks is None:
        hooks = NodeHooks(key)
        for e in node_outputs(t, key)[0]:
            t.autograd.node_hooks[e] = hooks
            t.FLAGS[e] |= HOOKED
    return _add_hook(hooks, fn, post)


def register_accumulate(acc, fn, post):
    """A hook on a leaf's AccumulateGrad, run where the leaf's gradient is delivered:
    prehooks after the leaf's tensor hooks, post hooks (``fn((), (grad,))``) after
    ``.grad`` is updated.  The hooks live as long as the AccumulateGrad, which the leaf
    holds weakly (as in PyTorch) and the tape the leaf is on holds strongly."""
    if acc._hooks is None:
        acc._hooks = NodeHooks(-1)
        leaf = acc.variable
        extra = leaf.__dict__
        extra.setdefault("_hooks", {})        # the engine looks for hooks of a leaf by
        extra.setdefault("_post_hooks", {})   # these two keys only
        t = live_tape(leaf._tid)
        if t is not None and t.sources.get(leaf._i) is leaf:
            t.autograd.views[leaf._i] = acc
    return _add_hook(acc._hooks, fn, post)


def accumulate_hooks(extra):
    """The NodeHooks of the AccumulateGrad of the leaf with ``__dict__`` extra, if any."""
    ref = extra.get("_acc")
    acc = ref() if ref is not None else None
    return None if acc is None else acc._hooks


def accumulate_post_hooks(hooks, g):
    """The post hooks of a leaf's AccumulateGrad (``grad_inputs`` is empty)."""
    grads = (g if hasattr(g, "_arr") else from_array(np.array(g)),)
    for fn in list(hooks.post.values()):
        replaced(fn, fn((), grads), ())


def _add_hook(hooks, fn, post):
    table = hooks.post if post else hooks.pre
    handle = RemovableHandle(table)
    table[handle.id] = fn
    return handle


def node_backward(t, h, hooks, grads):
    """Steps 1-3 of the module docstring after the tensor hooks: ``grads`` are the
    gradients (tensors or None) of the node's entries, ``h`` a reader of the tape
    (``recorded_backward._Reader``; None: made here if needed).  Returns ``(swept,
    sent)``: the entries this swept and ``[(buffer, gradient)]`` per edge that
    received one."""
    entries, positions, n = node_outputs(t, hooks.key)
    grad_outputs = [None] * n
    for p, g in zip(positions, grads):
        grad_outputs[p] = g
    grad_outputs = tuple(grad_outputs)
    for fn in list(hooks.pre.values()):
        grad_outputs = replaced(fn, fn(grad_outputs), grad_outputs)
    grads = [grad_outputs[p] for p in positions]
    hidden = set()
    node_edges = edges(t, hooks.key, hidden)
    grad_inputs, swept = _node_backward(t, h, hooks.key, entries, grads, node_edges, hidden)
    grad_inputs = tuple(edge_gradient(node, g) for (node, _, _), g in zip(node_edges, grad_inputs))
    for fn in list(hooks.post.values()):
        grad_inputs = replaced(fn, fn(grad_inputs, grad_outputs), grad_inputs)
    return swept, [(b, edge_gradient(node, g)) for (node, _, b), g in zip(node_edges, grad_inputs)
                   if b >= 0 and g is not None]


def _node_backward(t, h, key, entries, grads, node_edges, hidden):
    """(one gradient per edge, the entries swept) of the node of entry ``key``."""
    if t.OP[key] == _FUNCTION:              # one gradient per tensor input: per edge
        return t.autograd.functions[key].call_backward(grads), entries
    return _walk(t, h or _Reader(t), entries, grads, node_edges, hidden)


def node_gradients(t, key, grads):
    """``Node.__call__``: the node's backward alone on ``grads`` (tensors or None, one per
    entry of ``node_outputs``), one gradient per edge."""
    hidden = set()
    node_edges = edges(t, key, hidden)
    entries = node_outputs(t, key)[0]
    return [edge_gradient(node, g) for (node, _, _), g in zip(
        node_edges, _node_backward(t, None, key, entries, grads, node_edges, hidden)[0])]


def _walk(t, h, entries, grads, node_edges, hidden):
    """The node's backward by its adjoint rules, from its entries down through the hidden
    entries behind them; one gradient per edge (None where none).  A contribution
    carries the position of the operand it left the node's entry by, so two edges to one
    buffer (``x * x``, ``cat([x, x])``) get their own gradients."""
    adj, scattered = {}, {}
    for e, g in zip(entries, grads):
        if g is not None:
            _add(adj, scattered, e, g)
    via = {}                                    # hidden buffer -> operand position
    sent = {}                                   # edge buffer -> {position: [contributions]}
    swept = []
    for j in sorted(set(entries) | hidden, reverse=True):
        g = _complete(h, adj, scattered, j)
        if g is None:
            continue
        swept.append(j)
        for k, (b, c) in enumerate(rule_contributions(RULES[h.OP[j]], t, h, j, g)):
            pos = via.get(j, k)
            if b in hidden:
                via.setdefault(b, pos)
                _add(adj, scattered, b, c)
            else:
                sent.setdefault(b, {}).setdefault(pos, []).append(c)
    count = Counter(b for _, _, b in node_edges)
    taken = Counter()
    grad_inputs = []
    for _, _, b in node_edges:
        by_pos = sent.get(b)
        if b < 0 or not by_pos:
            grad_inputs.append(None)
            continue
        if count[b] == 1:
            parts = [c for pos in sorted(by_pos) for c in by_pos[pos]]
        else:                                   # the k-th edge to b: the k-th operand path
            keys = sorted(by_pos)
            parts = by_pos[keys[taken[b]]] if taken[b] < len(keys) else []
            taken[b] += 1
        total, pieces = {}, {}
        for c in parts:
            _add(total, pieces, b, c)
        grad_inputs.append(_complete(h, total, pieces, b) if parts else None)
    return grad_inputs, swept


def _adjoint(t, G, e):
    o = t.OFF[e]
    return G[o:o + t.size(e)].reshape(t.shape(e))


def at_hook(t, i, G, live, run_entry, needed=None):
    """The compiled sweep stopped at HOOKED entry i (its gradient is complete).  Runs what
    waits there; returns ``(top, done)`` for the sweep to resume with.  ``run_entry(e)``
    sweeps entry e alone and returns the entry below it to go on from.  ``needed(b)``
    (None: all are): does buffer b lead to a requested input?  A Node that does not
    run no hooks (a requested tensor's own hooks run, its Node's do not)."""
    hooks = t.autograd.node_hooks.get(i)
    if hooks is not None and needed is not None and \
            not any(needed(b) for _, _, b in edges(t, hooks.key) if b >= 0):
        if i in t.autograd.hooks and t.OP[i] != _FUNCTION and needed(i):
            _tensor_hooks(t, i, G)
        return i, i
    if hooks is None:
        if i in t.autograd.hooks and t.OP[i] != _FUNCTION and (needed is None or needed(i)):
            _tensor_hooks(t, i, G)   # (a Function runs its outputs' hooks)
        if t.OP[i] in _PIECES:
            _unreached_pieces(t, i, live)
        if i not in t.autograd.packed:
            return i, i
        old = write_unpacked(t, i)
        try:
            return run_entry(i), -1
        finally:
            restore(t, old)
    entries = node_outputs(t, hooks.key)[0]
    for e in entries:
        if live[e] and e in t.autograd.hooks:
            _tensor_hooks(t, e, G)
    grads = [from_array(_adjoint(t, G, e).copy()) if live[e] else None for e in entries]
    with no_grad():
        swept, sent = node_backward(t, None, hooks, grads)
    for e in swept:
        live[e] = 1
    OFF = t.OFF
    for b, g in sent:
        mark_reached(t, G, live, b)
        G[OFF[b]:OFF[b] + t.size(b)] += np.asarray(getattr(g, "_arr", g), np.float64).reshape(-1)
    return min(entries + swept) - 1, -1


def _unreached_pieces(t, i, live):
    """At the first piece of a split / unbind the sweep reaches (the last recorded):
    the hooks of the pieces no gradient reached are called with None, as PyTorch calls
    them when the Node runs."""
    entries = node_outputs(t, node_of(t, i)._i)[0]
    if any(live[e] for e in entries if e > i):
        return                     # not the first piece reached: done there
    for e in entries:
        if not live[e] and e in t.autograd.hooks:
            for fn in list(t.autograd.hooks[e].values()):
                fn(None)


def _tensor_hooks(t, e, G):
    """Tensor hooks of entry e on its adjoint, which they may replace."""
    G[t.OFF[e]:t.OFF[e] + t.size(e)] = run_hooks(t.autograd.hooks[e], _adjoint(t, G, e),
                                                  t.autograd.hook_dtypes[e]).reshape(-1)


def function_output_hooks(t, group, G, live):
    """Before a custom Function's backward: the tensor hooks of its reached outputs."""
    for e, _, _, _ in group.outputs:
        if live[e] and e in t.autograd.hooks:
            _tensor_hooks(t, e, G)

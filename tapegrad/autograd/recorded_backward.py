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
from ..tensor import Tensor, _result, from_array
from .adjoint_rules import HOST_FIRST, HOST_LAST, RULES, Scattered, Zero, gathered, read_with
from .graph import edges, node_outputs
from .hooks import apply_hooks
from .saved_hooks import rule_contributions


def seeds_as_tensors(outputs, grad_outputs, seeds):
    """The seed of each output as a tensor in the output's dtype, as PyTorch casts it:
    the given grad_output itself (it may have a history of its own) or a constant."""
    given = grad_outputs if isinstance(grad_outputs, (list, tuple)) else (grad_outputs,)
    out = []
    for k, (o, s) in enumerate(zip(outputs, seeds)):
        g = given[k] if grad_outputs is not None and k < len(given) else None
        if not isinstance(g, Tensor):
            g = from_array(np.asarray(s, o.dtype.np))
        out.append(g if g.dtype is o.dtype else g.to(o.dtype))
    return out


def _add(adj, scattered, j, c):
    """Adds contribution c to buffer j's adjoint: a tensor, pieces to scatter (None until
    they are), or a ``Zero`` that any other contribution replaces."""
    old = adj.get(j)
    if c.__class__ is Scattered:
        scattered.setdefault(j, []).append(c)
        if old is None or old.__class__ is Zero:
            adj[j] = None
    elif c.__class__ is Zero:
        adj.setdefault(j, c)
    else:
        adj[j] = c if old is None or old.__class__ is Zero else old + c


def _complete(h, adj, scattered, i):
    """Entry i's adjoint, now that every consumer has added to it (None: none did)."""
    if i not in adj:
        return None
    g = adj.pop(i)
    pieces = scattered.pop(i, None)
    if pieces:
        s = gathered(pieces, h.size(i), h.shape(i))
        g = s if g is None else g + s
    return g.zeros() if g.__class__ is Zero else g


class _Reader(tp.Layout):
    """Reads the entries recorded before the walk (columns as lists, shapes, extras and
    values straight from the arrays: the walk records new entries meanwhile, and
    reading must not flush them one by one).  ``needed(j)``: does buffer j lead to a
    requested input (None: all do)?  Rules compute no contribution for one that does not,
    as PyTorch runs only the Nodes the inputs need: ``grad(f(x, y), y)`` with y a step
    of a longer computation records nothing for y's history.  ``h(j)`` is the tensor that stands for
    buffer j: a leaf, constant or foreign tensor for a source entry, else a tensor
    recorded as that entry."""

    def __init__(self, t, needed=None):
        n = t.n
        self.t, self.cache, self.needed = t, {}, needed
        self.OP, self.A, self.B = t.OP[:n].tolist(), t.A[:n].tolist(), t.B[:n].tolist()
        self.C, self.C2 = t.C[:n].tolist(), t.C2[:n].tolist()
        self.OFF, self.META = t.OFF[:n].tolist(), t.META[:n].tolist()

    IAUX = property(lambda self: self.t.IAUX)     # (the arrays grow during the walk)
    V = property(lambda self: self.t.V)

    def __call__(self, j):
        x = self.cache.get(j)
        if x is None:
            t = self.t
            x = t.sources.get(j)
            if x is None:
                scalar = self.META[j] < 0 or not self.shape(j)
                x = _result(float(t.V[self.OFF[j]]) if scalar else self.value(j), t, j)
            self.cache[j] = x
        return x


def sweep_tape(t, seeds, deliveries, pending, tapes, want_at, found, observe=None):
    """``engine._sweep_tape`` with tensor adjoints (see the module docstring)."""
    from .engine import modified_saved_error
    t.flush()
    if t.released:
        raise RuntimeError(tp.SECOND_BACKWARD)
    n = t.n
    adj, scattered = {}, {}
    for e, s in seeds:
        _add(adj, scattered, e, s)
    needed = want_at.toward(t)
    h = _Reader(t, needed)
    live = np.zeros(n, np.uint8)
    OP, FLAGS = h.OP, t.FLAGS[:n].tolist()
    arrive = _Arrival(t, want_at, found)
    reads, inner = t.autograd.composite_reads, None
    ents, grads = [], []                  # the leaf entries reached, their gradients
    for i in range(max(adj), -1, -1):
        g = _complete(h, adj, scattered, i)
        if g is None:
            continue
        live[i] = 1
        op = OP[i]
        if tp.LEAF <= op <= tp.EXTERNAL:
            if op == tp.LEAF:
                ents.append(i)
                grads.append(g)
            elif op == tp.EXTERNAL:
                u, k = t.foreign[i]
                tapes[u.uid] = u
                pending.setdefault(u.uid, []).append((k, g))
            continue
        if FLAGS[i] & tp.CONSUMED:
            raise RuntimeError(tp.SECOND_BACKWARD)
        node = t.autograd.node_hooks.get(i) if t.autograd.node_hooks else None
        if node is not None and needed is not None and \
                not any(needed(b) for _, _, b in edges(t, node.key) if b >= 0):
            node = None                 # a Node the requested inputs do not need: no hooks
        if HOST_FIRST <= op <= HOST_LAST and needed is not None and \
                not any(needed(b) for b in t.autograd.functions[i].inputs):
            for e, _, _, _ in t.autograd.functions[i].outputs:
                live[e] = 1             # nor its backward
            continue
        g = arrive(i, g)
        if inner is not None and i < inner.first:
            inner = None
        if i in reads:
            inner = _Inner(t, h, i)
        if node is not None:
            contributions = _hooked_node(t, h, node, i, g, adj, scattered, live, arrive)
        elif HOST_FIRST <= op <= HOST_LAST:
            contributions = _function(t, h, i, g, adj, scattered, live, arrive)
        else:
            contributions = rule_contributions(RULES[op], t, h, i, g)
        if inner is not None:
            contributions = inner.read(contributions)
        for j, c in contributions:
            _add(adj, scattered, j, c)
    if ents:
        deliveries.append((t, ents, grads))
    if t.autograd.modified:
        err = modified_saved_error(t, live, n)
        if err is not None:
            raise err
    return t, live


class _Inner:
    """The composite (``composite.composite``) whose inner entries the walk is in: what
    they pass to its inputs is the gradient of its one PyTorch Node, which reads some of
    them (``reads``), so where it would not require grad it is ``read_with`` the first."""

    __slots__ = ("first", "ins", "s")

    def __init__(self, t, h, i):
        self.first, read = t.autograd.composite_reads[i]
        self.ins = {b[1] if b.__class__ is tuple else b for b in t.autograd.composite_inputs[i]}
        self.s = h(read[0])

    def read(self, contributions):
        return [(j, self._read(c) if j in self.ins else c) for j, c in contributions]

    def _read(self, c):
        if c.__class__ is Scattered:
            if not c.g.requires_grad:
                c.g = read_with(c.g, self.s)
        elif c.__class__ is not Zero and not c.requires_grad:
            c = read_with(c, self.s)
        return c


class _Arrival:
    """What happens to an entry's complete adjoint before its backward: its tensor hooks
    (which may replace it), ``retain_grad``, ``autograd.grad``'s capture."""

    __slots__ = ("t", "want_at", "found", "accumulate")

    def __init__(self, t, want_at, found):
        from .entry_points import accumulate_recorded
        self.t, self.want_at, self.found = t, want_at, found
        self.accumulate = accumulate_recorded

    def __call__(self, i, g):
        if g is None:
            return None
        t = self.t
        if i in t.autograd.hooks:
            g = apply_hooks(t.autograd.hooks[i], g)
        if i in t.autograd.retained:
            self.accumulate(t.autograd.retained[i], g)
        k = self.want_at.get((t.uid, i))
        if k is not None:
            found = self.found
            found[k] = g if found[k] is None else found[k] + g
        return g


def _function(t, h, i, g, adj, scattered, live, arrive):
    """A custom Function's backward on tensors, with grad mode on."""
    group = t.autograd.functions[i]
    grads = []
    for e, _, _, _ in group.outputs:
        grads.append(g if e == i else arrive(e, _complete(h, adj, scattered, e)))
        live[e] = 1
    return [(b, r) for b, r in zip(group.inputs, group.call_backward(grads)) if r is not None]


def _hooked_node(t, h, node, i, g, adj, scattered, live, arrive):
    """A node with prehooks / post hooks (``node_hooks``), recorded."""
    from .node_hooks import node_backward
    entries = node_outputs(t, node.key)[0]
    grads = [g if e == i else arrive(e, _complete(h, adj, scattered, e)) for e in entries]
    swept, sent = node_backward(t, h, node, grads)
    for e in swept:
        live[e] = 1
    return sent

"""PyTorch-style graph objects, rebuilt on demand from tape entries.

A ``Node`` is a view of one tape entry: it holds the tape weakly and is cached per
entry.  ``next_functions`` reads the entry's input buffers: a leaf's source entry shows
as its ``AccumulateGrad``, a constant as ``None``, a hidden entry (a broadcast, or an
inner step of a composite op) is looked through to the visible nodes behind it.
Nothing here computes gradients: the compiled sweep does.
"""
import weakref

import numpy as np

from ..ops.table import BY_CODE, CODE
from ..tape import CONSUMED, HIDDEN
from .saved_hooks import (disable_saved_tensors_hooks, save_on_cpu, saved_tensors_hooks,
                          unpacked_slot)

__all__ = ["AccumulateGrad", "Node", "TransposedWeight", "disable_saved_tensors_hooks", "save_on_cpu",
           "saved_tensors_hooks"]

_LEAF, _CONST, _EXTERNAL = CODE["leaf"], CODE["const"], CODE["external"]
_CAT = {CODE["cat"], CODE["stack"]}
_PIECES = {CODE["split"], CODE["unbind"]}
_FUNCTION = CODE["function"]


class Node:
    """``grad_fn`` of a recorded tensor: a view of tape entry ``_i``."""

    __slots__ = ("_tape", "_uid", "_i", "_meta", "__weakref__")

    def __init__(self, tape, i):
        self._tape = weakref.ref(tape)
        self._uid = tape.uid
        self._i = i
        self._meta = None

    def _t(self):
        t = self._tape()
        if t is None or t.uid != self._uid:
            raise RuntimeError("the tape of this Node has been freed")
        t.flush()
        return t

    def name(self):
        t = self._t()
        group = t.autograd.functions.get(self._i)
        if group is not None:         # (tapegrad's own Functions may name their Node: ``_node_name``)
            return getattr(group.cls, "_node_name", None) or f"{group.cls.__name__}Backward"
        return t.names.get(self._i) or self._op_name(t)

    def _op_name(self, t):
        i = self._i
        op = BY_CODE[t.OP[i]]
        if op.node_lconst and t.A[i] < 0:
            return op.node_lconst
        if op.node_rconst and t.B[i] < 0:
            return op.node_rconst
        return op.node

    @property
    def next_functions(self):
        return tuple((node, nr) for node, nr, _ in edges(self._t(), self._i))

    def __call__(self, *grads):
        """This Node's backward alone on the gradients of its outputs (one per output, or
        None): one gradient per ``next_functions`` edge (None where there is none), a
        tuple if there are several, as PyTorch's.  Recorded in grad mode."""
        from .node_hooks import node_gradients
        t = self._t()
        entries, positions, n = node_outputs(t, self._i)
        if len(grads) != n:
            raise TypeError(f"{self.name()} takes {n} gradient(s), got {len(grads)}")
        out = node_gradients(t, self._i, [grads[p] for p in positions])
        return out[0] if len(out) == 1 else tuple(out)

    def register_hook(self, fn):
        """``fn(grad_inputs, grad_outputs)`` after this node has computed its gradients
        (one per ``next_functions`` edge, None where there is none); it may return
        replacements.  Returns a handle with ``remove()``."""
        from .node_hooks import register
        return register(self._t(), self._i, fn, post=True)

    def register_prehook(self, fn):
        """``fn(grad_outputs)`` before this node runs; it may return replacements."""
        from .node_hooks import register
        return register(self._t(), self._i, fn, post=False)

    @property
    def metadata(self):
        if self._meta is None:
            self._meta = {}
        return self._meta

    def __getattr__(self, attr):
        if attr.startswith("_saved_"):
            t = self._t()
            op = BY_CODE[t.OP[self._i]]
            what = attr[len("_saved_"):]
            if what in op.saves:
                return _saved(t, self._i, what)
        raise AttributeError(f"'{self.name()}' object has no attribute '{attr}'")

    def __repr__(self):
        return f"<{self.name()} object at {hex(id(self))}>"


class TransposedWeight(Node):
    """The TBackward0 behind a linear layer's weight.  tapegrad's product reads the
    weight in place, transposed (no copy, no entry of its own): this node stands for the
    ``weight.t()`` that PyTorch records; ``_i`` is the weight's buffer.  Its edge on the
    layer's node carries the gradient of the transpose, as PyTorch's does."""

    __slots__ = ()

    def name(self):
        return "TBackward0"

    @property
    def next_functions(self):
        node, nr, _ = _visible(self._t(), self._i)[0]
        return ((node, nr),)

    def __call__(self, *grads):
        if len(grads) != 1:
            raise TypeError(f"TBackward0 takes 1 gradient(s), got {len(grads)}")
        return None if grads[0] is None else grads[0].t()

    def _no_hooks(self, *args):
        raise RuntimeError("hooks on the TBackward0 of a linear layer's weight are not "
                           "supported: tapegrad reads the weight in place, transposed; "
                           "register the hook on the layer's node or on the weight")

    register_hook = register_prehook = _no_hooks


def transposed_weight(t, i, b):
    """The TBackward0 (one per composite entry i) of weight buffer b."""
    node = t.autograd.views.get(("t", i))
    if node is None:
        node = t.autograd.views[("t", i)] = TransposedWeight(t, b)
    return node


def edge_gradient(node, g):
    """An edge's gradient as its node sees it: a TransposedWeight's is the transpose of
    the weight's (both ways: the transpose is its own inverse)."""
    return g.t() if g is not None and node.__class__ is TransposedWeight else g


class AccumulateGrad:
    """The node that writes a leaf's gradient into ``.grad``."""

    __slots__ = ("variable", "_meta", "_hooks", "__weakref__")

    def __init__(self, variable):
        self.variable = variable
        self._meta = None
        self._hooks = None         # NodeHooks, once a hook is registered

    def name(self):
        return "torch::autograd::AccumulateGrad"   # PyTorch's name() for this node

    next_functions = ()

    def register_hook(self, fn):
        """``fn((), (grad,))`` after the leaf's ``.grad`` is updated."""
        from .node_hooks import register_accumulate
        return register_accumulate(self, fn, post=True)

    def register_prehook(self, fn):
        """``fn((grad,))`` before accumulation (after the leaf's tensor hooks); it may
        return a replacement."""
        from .node_hooks import register_accumulate
        return register_accumulate(self, fn, post=False)

    @property
    def metadata(self):
        if self._meta is None:
            self._meta = {}
        return self._meta

    def __repr__(self):
        return f"<AccumulateGrad object at {hex(id(self))}>"


def accumulate_grad(leaf):
    """The leaf's AccumulateGrad, one per leaf (held weakly by the leaf, as in PyTorch)."""
    ref = leaf.__dict__.get("_acc")
    acc = ref() if ref is not None else None
    if acc is None:
        acc = AccumulateGrad(leaf)
        leaf._acc = weakref.ref(acc)
    return acc


def node_of(t, i):
    """The Node of entry i (the outputs of one split / unbind / custom Function share one)."""
    t.flush()
    op = t.OP[i]
    if op == _FUNCTION:
        i -= int(t.extras(i)[0])
    elif op in _PIECES:
        first = int(t.extras(i)[1 + len(t.shape(i))])
        i = i if first < 0 else first
    node = t.autograd.views.get(i)
    if node is None:
        node = t.autograd.views[i] = Node(t, i)
    return node


def node_outputs(t, key):
    """``(entries, positions, count)``: the entries whose gradients the node of entry
    ``key`` (``node_of(t, key)._i``) receives, their positions among the node's
    outputs, and the number of outputs (a custom Function's non-differentiable
    outputs have no entry)."""
    op = t.OP[key]
    if op == _FUNCTION:
        group = t.autograd.functions[key]
        return ([e for e, _, _, _ in group.outputs], [k for _, k, _, _ in group.outputs],
                group.n_outputs)
    entries = [key]
    if op in _PIECES:          # the pieces are consecutive entries naming the first
        j = key + 1
        while j < t.n and t.OP[j] == op and int(t.extras(j)[1 + len(t.shape(j))]) == key:
            entries.append(j)
            j += 1
    return entries, list(range(len(entries))), len(entries)


def _inputs(t, i):
    """Input buffers of entry i, in PyTorch's order; -1 for a Python-number operand on
    the right (a number on the left is not an input: ``3 - x`` has one next function)."""
    op = t.OP[i]
    if op == _FUNCTION:    # (read from the tape, not from its Function: an entry that a
        return t.function_inputs(i)     # Ctrl-C left without one is still on the tape)
    if op in _CAT:
        return [buf for buf, _ in t.cat_pieces(i)[1]]
    spec = BY_CODE[op]
    a, b = int(t.A[i]), int(t.B[i])
    if spec.arity == 1 or (b < 0 and not spec.const_edge):
        return [a]
    return [b] if a < 0 else [a, b]


def input_buffers(t, i):
    """Input buffers of entry i (no Python-number operands)."""
    return [j for j in _inputs(t, i) if j >= 0]


def ancestors(t, i):
    """The entries that entry i depends on, i included."""
    seen, stack = {i}, [i]
    while stack:
        for j in input_buffers(t, stack.pop()):
            if j not in seen:
                seen.add(j)
                stack.append(j)
    return seen


def edges(t, i, hidden=None):
    """``(node, input_nr, buffer)`` per ``next_functions`` edge of entry i's node, in
    PyTorch's order; buffer -1 where the edge is None.  The hidden entries looked
    through are added to the set ``hidden`` if given."""
    out = []
    declared = t.autograd.composite_inputs.get(i)
    for j in _inputs(t, i):
        if j < 0:
            out.append((None, 0, -1))
        else:
            out.extend(_visible(t, j, hidden))
    if declared is not None:   # a composite: its inputs, in order (hidden ones looked through)
        return [(transposed_weight(t, i, b[1]), 0, b[1]) if b.__class__ is tuple else
                (None, 0, -1) if b < 0 else _visible(t, b)[0] for b in declared]
    if i in t.names:   # a composite: each input once
        seen, uniq = set(), []
        for edge in out:
            key = id(edge[0])
            if edge[0] is not None and key not in seen:
                seen.add(key)
                uniq.append(edge)
        out = uniq
    return out


def _visible(t, j, hidden=None):
    """(node, input_nr, buffer) triples that buffer j stands for, looking through
    hidden entries."""
    out, stack = [], [j]
    while stack:
        j = stack.pop()
        op = t.OP[j]
        if op == _LEAF:
            out.append((accumulate_grad(t.sources[j]), 0, j))
        elif op == _CONST:
            out.append((None, 0, -1))
        elif op == _EXTERNAL:   # an entry of another tape: its own node and input_nr
            u, k = t.foreign[j]
            u.flush()
            out.extend((node, nr, j) for node, nr, _ in _visible(u, k))
        elif t.FLAGS[j] & HIDDEN:
            if hidden is not None:
                hidden.add(j)
            stack.extend(reversed([k for k in _inputs(t, j) if k >= 0]))
        elif op == _FUNCTION:   # output k of a custom Function
            k = next(k for e, k, _, _ in t.autograd.functions[j].outputs if e == j)
            out.append((node_of(t, j), k, j))
        elif op in _PIECES:     # output k of split / unbind (extras: base, strides, group)
            out.append((node_of(t, j), int(t.extras(j)[2 + len(t.shape(j))]), j))
        else:
            out.append((node_of(t, j), 0, j))
    return out


def _saved(t, i, what):
    from ..tensor import from_array
    if t.FLAGS[i] & CONSUMED and t.released:
        t.value(i)  # raises PyTorch's "freed" error
    unpacked = unpacked_slot(t, i, what)    # packed by saved_tensors_hooks
    if unpacked is not None:
        return unpacked
    if what == "result":
        j = i
    elif what == "self":     # (a composite op's: its first input, not an inner entry's)
        j = (t.autograd.composite_inputs.get(i) or [-1])[0]
        j = j[1] if isinstance(j, tuple) else j if j >= 0 else int(t.A[i])
    elif what == "other":
        j = int(t.B[i])
    else:
        return from_array(np.array(t.extras(i)))
    if j < 0:
        return t.C[i]
    src = t.sources.get(j)
    if src is not None:        # a tensor that came in from outside: the tensor itself
        return src
    return from_array(t.value(j))

"""``saved_tensors_hooks(pack_hook, unpack_hook)``: hooks on the values saved for backward.

A tape entry's saved values are the buffers its backward reads (the op table's
``saves``: its input ``self``, ``other`` or its ``result``), of those only what the
gradients of the inputs that require grad need, as PyTorch saves (``x * y`` with only x
requiring grad saves y; for elementwise ops this is read off the table's adjoint rules).
While hooks are active, each entry recorded calls ``pack_hook`` once per saved value, at
forward time, under no_grad, on a tensor standing for that value (the leaf itself for a
leaf, the unbroadcast operand of a broadcast); the packed objects are kept on the tape
(``t.autograd.packed``) and the entry is flagged ``HOOKED``.  When a backward reaches the entry,
``unpack_hook`` runs on each and the entry's backward reads the unpacked values (the
compiled sweep: written into the value arena for this entry only, then restored; the
recorded backward: the tensors themselves), so a pack/unpack pair that changes values
changes the gradient, as in PyTorch (under ``create_graph``, an unpacked value without
history is attached to the saved value's history, as PyTorch does).
``ctx.save_for_backward`` of a custom Function is packed when ``apply`` returns and
unpacked at each ``ctx.saved_tensors``.

Composite ops (softmax, var, ...) are several tape entries: each inner entry packs what
it reads, so the number of pack calls may differ from PyTorch's one node.  Integer data
a backward reads (indices, a where's condition) is tape metadata and is not packed.

Hooks are per thread, the innermost pair applies.  A tape recorded with no hooks active
pays nothing: the pack step is an observer of recording installed only while some
thread has hooks active.
"""
import re
import threading

import numpy as np

from .. import tape as tp
from ..grad_mode import STATE, no_grad
from ..ops.table import BY_CODE, CODE, EW_OF
from ..record import broadcast_shape
from ..tensor import Tensor, _norm, _result, from_array

_LOCAL = threading.local()
_LOCK = threading.Lock()
_threads_active = [0]       # threads with hooks active: the pack observer is installed while > 0
_EXPAND = CODE["expand"]
_SLOTS = ("self", "other", "result")
_VARS = {"x": "self", "y": "other", "r": "result"}
PACK_INPLACE = ("A saved tensor pack hook is modifying its input in place. Tensors provided as "
                "input to pack hook cannot be modified by in-place operations as this can lead "
                "to unexpected side-effects. Please open an issue if you need to perform "
                "in-place operations on the input to a pack hook.")


def _needs(op):
    """(saved values the gradient of input 0 needs, those input 1's gradient needs)."""
    saves = {s for s in op.saves if s in _SLOTS}
    if op.kind == "broadcast":            # the elementwise op's rules, on operands in place
        op = EW_OF[op.code]
    if op.kind == "ew":
        return tuple({_VARS[v] for v in re.findall(r"\b[xyr]\b", rule)} & saves
                     for rule in (op.gx, op.gy))
    if op.kind == "matmul":               # dx = g y^T, dy = x^T g
        return {"other"} & saves, {"self"} & saves
    return saves, saves


NEEDS = tuple(_needs(op) if op else ((), ()) for op in BY_CODE)


def _stack():
    stack = getattr(_LOCAL, "stack", None)
    if stack is None:
        stack = _LOCAL.stack = []
        _LOCAL.disabled = None
    return stack


class saved_tensors_hooks:
    """Context manager: ``pack_hook(tensor)`` for every value saved for backward in its
    scope, ``unpack_hook(packed)`` when a backward needs it (must return a tensor)."""

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook, self.unpack_hook = pack_hook, unpack_hook

    def __enter__(self):
        stack = _stack()
        if _LOCAL.disabled is not None:
            raise RuntimeError(_LOCAL.disabled)
        stack.append((self.pack_hook, self.unpack_hook))
        if len(stack) == 1:
            _count_thread(1)
        return self

    def __exit__(self, *exc):
        stack = _stack()
        stack.pop()
        if not stack:
            _count_thread(-1)
        return False


class save_on_cpu(saved_tensors_hooks):
    """PyTorch's offloading of saved values to the CPU: tapegrad runs on the CPU, so the
    values stay where they are (``pin_memory`` and ``device_type`` are accepted)."""

    def __init__(self, pin_memory=False, device_type="cuda"):
        super().__init__(lambda x: x, lambda x: x)


class disable_saved_tensors_hooks:
    """Context manager: using ``saved_tensors_hooks`` in its scope raises
    ``RuntimeError(error_message)`` (as does entering it while hooks are active)."""

    def __init__(self, error_message):
        self.error_message = error_message

    def __enter__(self):
        stack = _stack()
        if stack:
            raise RuntimeError(self.error_message)
        self._prev = _LOCAL.disabled
        _LOCAL.disabled = self.error_message
        return self

    def __exit__(self, *exc):
        _LOCAL.disabled = self._prev
        return False


def _count_thread(step):
    with _LOCK:
        _threads_active[0] += step
        if _threads_active[0] == step:        # 0 -> 1: install the observer
            tp.observe_entries("saved_tensors_hooks", _pack_entry)
        elif _threads_active[0] == 0:
            tp.observe_entries("saved_tensors_hooks", None)


def _active():
    stack = getattr(_LOCAL, "stack", None)
    return stack[-1] if stack else None


def packing():
    """Whether saved_tensors_hooks are active in this thread."""
    return _active() is not None


# -- recording ---------------------------------------------------------------------------
def _shown(t, j):
    """The buffer a saved buffer j stands for: a broadcast operand's own buffer."""
    while t.FLAGS[j] & tp.HIDDEN and t.OP[j] == _EXPAND:
        j = int(t.A[j])
    return j


def _tensor_of(t, j):
    src = t.sources.get(j)
    return src if src is not None else _result(_norm(t.value(j)), t, j)


def saved_slots(t, i):
    """``(slot, buffer, shown buffer)`` for each value entry i's backward reads."""
    need_a, need_b = NEEDS[t.OP[i]]
    if not need_a and not need_b:
        return []
    a, b = int(t.A[i]), int(t.B[i])
    wanted = set()
    if a >= 0 and t.OP[_shown(t, a)] != tp.CONST:
        wanted |= need_a
    if b >= 0 and t.OP[_shown(t, b)] != tp.CONST:
        wanted |= need_b
    bufs = {"self": a, "other": b, "result": i}
    return [(s, bufs[s], _shown(t, bufs[s])) for s in _SLOTS if s in wanted and bufs[s] >= 0]


def _pack(pack_hook, x):
    version = x._version
    with no_grad():
        packed = pack_hook(x)
    if x._version != version:
        raise RuntimeError(PACK_INPLACE)
    return packed


def _pack_entry(t, i):
    """Observer of recording: pack the values entry i saves, if hooks are active."""
    hooks = _active()
    if hooks is None:
        return
    t.flush()
    slots = saved_slots(t, i)
    if not slots:
        return
    pack_hook, unpack_hook = hooks
    t.autograd.packed[i] = [(slot, j, shown, _pack(pack_hook, _tensor_of(t, shown)), unpack_hook)
                   for slot, j, shown in slots]
    t.FLAGS[i] |= tp.HOOKED


class _Packed(tuple):
    """``ctx.save_for_backward``'s tensors, packed: (packed, unpack_hook) pairs (None for
    a None)."""


def pack_saved(tensors):
    """``ctx.to_save`` as ``apply`` keeps it: packed if hooks are active."""
    hooks = _active()
    if hooks is None:
        return tensors
    pack_hook, unpack_hook = hooks
    return _Packed(None if x is None else (_pack(pack_hook, x), unpack_hook) for x in tensors)


def unpack_saved(to_save):
    """``ctx.saved_tensors``: the saved tensors, unpacked if they were packed."""
    if to_save.__class__ is not _Packed:
        return tuple(to_save)
    return tuple(None if p is None else _unpack(p[1], p[0]) for p in to_save)


# -- backward ----------------------------------------------------------------------------
def _unpack(unpack_hook, packed):
    x = unpack_hook(packed)
    if not isinstance(x, Tensor):
        raise TypeError("Output of saved tensor unpack_hook expected to be a Tensor but got "
                        f"result of type {type(x).__name__}")
    return x


def unpacked_slot(t, i, slot):
    """The unpacked value of entry i's saved ``slot`` (``grad_fn._saved_self``), or None
    if it was not packed."""
    for s, _, _, packed, unpack_hook in t.autograd.packed.get(i, ()):
        if s == slot:
            return _unpack(unpack_hook, packed)
    return None


def _fitted_shape(t, j, x, i):
    """Check that an unpacked value broadcasts to buffer j's shape (PyTorch's errors)."""
    shape = t.shape(j)
    got = broadcast_shape(shape, tuple(x.shape))
    if got != shape:
        from .graph import node_of
        raise RuntimeError(f"Function {node_of(t, i).name()} returned an invalid gradient at "
                           f"index 0 - got {list(got)} but expected shape compatible with "
                           f"{list(shape)}")
    return shape


def write_unpacked(t, i):
    """Unpack entry i's saved values into the value arena (for the compiled sweep of this
    entry alone); returns what to pass to ``restore``."""
    old = []
    with no_grad():
        for _, j, shown, packed, unpack_hook in t.autograd.packed[i]:
            x = _unpack(unpack_hook, packed)
            _fitted_shape(t, shown, x, i)
            o, n = int(t.OFF[j]), t.size(j)
            old.append((o, t.V[o:o + n].copy()))
            t.V[o:o + n] = np.broadcast_to(np.asarray(x._arr, np.float64),
                                           t.shape(j)).reshape(-1)
    return old


def restore(t, old):
    for o, values in reversed(old):
        t.V[o:o + values.size] = values


def rule_contributions(rule, t, h, j, g):
    """``rule(j, g, h)`` (an adjoint rule on tensors) reading entry j's unpacked saved
    values if it packed any (in the current grad mode: recorded under create_graph)."""
    packed = t.autograd.packed.get(j) if t.autograd.packed else None
    if not packed:
        return rule(j, g, h)
    from ..shape_ops import broadcast_to
    swaps = []
    for _, k, shown, p, unpack_hook in packed:      # all read before any is swapped in
        x = _unpack(unpack_hook, p)
        shape = _fitted_shape(t, shown, x, j)
        if STATE.grad and x._t is None and not x._rg:
            # as PyTorch, an unpacked value without history takes the saved one's: the
            # saved tensor plus the (constant) difference
            x = h(shown) + from_array(np.asarray(x._arr, np.float64) - h.value(shown))
        if tuple(x.shape) != shape or k != shown:
            x = broadcast_to(x, h.shape(k))
        swaps.append((k, x))
    before = [(k, h.cache.get(k)) for k, _ in swaps]
    h.cache.update(swaps)
    try:
        return rule(j, g, h)
    finally:
        for k, x in reversed(before):
            if x is None:
                h.cache.pop(k, None)
            else:
                h.cache[k] = x


def drop_consumed(t, live):
    """Free the packed values of the entries a backward without retain_graph consumed
    (PyTorch frees saved values then)."""
    for e in [e for e in t.autograd.packed if e < len(live) and live[e]]:
        del t.autograd.packed[e]

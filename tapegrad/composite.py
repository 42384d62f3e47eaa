"""Composite ops: several entries shown as one Node (PyTorch's one backward op for what
tapegrad records in steps: ``var``, ``norm``, ``clamp`` with tensor bounds, the losses,
``F.linear``, ...).  The inner entries are flagged ``HIDDEN``; the graph views look
through them to the composite's inputs."""
import builtins

from .ops.table import CODE
from .tape import HIDDEN
from .tensor import Tensor, buf, recording

_SOURCE = {CODE["leaf"], CODE["const"], CODE["external"]}


def composite(node_name, fn, *inputs, transposed=None, reads=()):
    """Run ``fn()`` and show the entries it records as one Node ``node_name``: the inner
    entries are hidden, and the graph views look through them to ``inputs``.  Input
    number ``transposed`` (a weight that ``fn`` reads transposed in place) shows behind
    a TBackward0 of its own, as PyTorch records ``weight.t()``.  The inputs numbered in
    ``reads`` are those PyTorch's one backward op reads: a ``create_graph`` gradient
    through the Node requires grad if one of them does, as there, also where the inner
    entries' rules do not read it (a bias's gradient sums the incoming one)."""
    t = recording(*inputs)
    start = t.next if t is not None else 0
    out = fn()
    if t is not None and out._t is t:
        _hide(t, start, out._i)
        t.names[out._i] = node_name
        # next_functions: one edge per input, in order (None where it has no gradient)
        ins = [buf(t, x, False) if isinstance(x, Tensor) and x._rg else -1 for x in inputs]
        if transposed is not None and ins[transposed] >= 0:
            ins[transposed] = ("t", ins[transposed])
        t.autograd.composite_inputs[out._i] = ins
        read = [ins[k] for k in reads if ins[k] != -1]
        if read:
            t.autograd.composite_reads[out._i] = (start, read)
    return out


def _hide(t, start, stop):
    """Flag entries ``start .. stop - 1`` (sources excepted) HIDDEN where they are: in
    the columns, or still staged as array rows.  Staged scalar rows carry no flags, so
    only when some are in the range does the stage have to be flushed first.  (Under
    the tape's lock: a flush from another thread takes the staged rows.)"""
    with t.lock:
        rows = t.astage
        first = builtins.max(start, t.n)
        k = len(rows)
        while k and rows[k - 1][0] >= first:
            k -= 1
        staged = range(k, k + builtins.sum(1 for r in rows[k:] if r[0] < stop))
        if len(staged) != builtins.max(stop - first, 0):
            t.flush()
            staged = range(0)
        for j in range(start, builtins.min(stop, t.n)):
            if int(t.OP[j]) not in _SOURCE:
                t.FLAGS[j] |= HIDDEN
        for q in staged:
            r = rows[q]
            if r[1] not in _SOURCE:
                rows[q] = r[:6] + (r[6] | HIDDEN,) + r[7:]

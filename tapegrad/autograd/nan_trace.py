"""NaNs and infs traced to where they start, on a tape or a replay's recording.

PyTorch's anomaly mode names the backward Node that returned a NaN.  A flat tape holds
every value of the forward pass, so tapegrad can say more:

* **forward**: the first entry (in recording order, among those the output depends on)
  with a non-finite element whose own inputs are finite there: the op that *made* the
  NaN or inf, with the finite values it was given (``log(-0.5) = nan``,
  ``exp(750.0) = inf``), its Node name and the user's source line (recorded in anomaly
  mode).  Which input elements an element reads comes from the pattern rules of
  ``autograd.sparse`` (one rule per kind).
* **backward**: the entry whose backward first wrote a NaN into an adjoint (PyTorch's
  error), with the chain of entries the adjoint came down from the output.

Anomaly mode warns with the forward report when a backward starts from an output whose
forward pass holds a non-finite value, and its NaN error carries both reports
(``err.nan_report``).  ``explain_nan(tensor)`` and ``Traced.explain_nan(*args)`` answer
on demand.  With anomaly mode off, nothing here runs.
"""
import warnings

import numpy as np

from ..ops.table import BY_CODE
from ..tape import LOCATIONS
from .graph import ancestors, input_buffers as inputs, node_of
from .sparse import reads


class NanReport:
    """Where a non-finite value started.  ``phase``: "forward" (a value) or "backward" (an
    adjoint); ``entry``, ``op``, ``node``, ``location`` ((file, line) or None),
    ``expression`` (the op on the finite values it read, and what it gave), ``chain``
    (entries: for a value, from it up to the output it reached; for an adjoint, from
    the output down to it).  ``tape`` is the tape or recording, for the views of
    ``tapegrad.viz`` (a notebook shows the tape with the chain highlighted)."""

    def __init__(self, tape, phase, entry, expression, chain):
        self.tape, self.phase, self.entry = tape, phase, entry
        self.expression, self.chain = expression, list(chain)
        self.op = BY_CODE[int(tape.OP[entry])].name
        self.node = _node_name(tape, entry)
        loc = getattr(tape, "locs", {}).get(entry)
        self.location = None if loc is None else LOCATIONS[loc]

    def where(self):
        return "" if self.location is None else " at %s:%d" % self.location

    def __str__(self):
        what = "value" if self.phase == "forward" else "adjoint (a NaN)"
        path = " <- ".join(f"{e} {BY_CODE[int(self.tape.OP[e])].name}" for e in
                           (self.chain if self.phase == "backward" else self.chain[::-1]))
        return (f"The first non-finite {what} of the {self.phase} pass: entry {self.entry} "
                f"({self.op}, {self.node}){self.where()}: {self.expression}\n"
                f"  chain from the output: {path}")

    __repr__ = __str__


def _node_name(t, i):
    if hasattr(t, "autograd"):                # a tape: its Node's name, as grad_fn shows
        return node_of(t, i).name()
    return BY_CODE[int(t.OP[i])].node         # a recording: the op's Node name


def _fmt(v):
    return repr(float(v))


def _expression(t, e, k, parts):
    """``op(a, b) = r`` from the values element k of entry e read (constants included)."""
    op = BY_CODE[int(t.OP[e])]
    V, OFF = t.V, t.OFF
    result = _fmt(V[OFF[e] + k])
    if op.kind == "ew":
        args = []
        for j in ((int(t.A[e]), int(t.B[e])) if op.arity == 2 else (int(t.A[e]),)):
            if j < 0:
                args.append(_fmt(t.C[e]))
            else:
                args.append(_fmt(V[OFF[j] + (k if t.size(j) > 1 else 0)]))
        return f"{op.name}({', '.join(args)}) = {result}"
    shown = []
    for j, rows, cols in parts:
        vals = V[OFF[j] + cols[rows == k]]
        shown.append(f"{vals.size} finite value{'s' * (vals.size != 1)} of entry {j}"
                     + (f" ({', '.join(_fmt(v) for v in vals[:4])}"
                        + (", ...)" if vals.size > 4 else ")") if vals.size else ""))
    return f"{op.name} of {'; '.join(shown) or 'nothing'}: element {k} = {result}"


def _origin_at(t, e):
    """(element, parts) of the first non-finite element of entry e whose inputs are
    finite, or None (every non-finite element of e came from an input)."""
    V, OFF = t.V, t.OFF
    vals = V[OFF[e]:OFF[e] + t.size(e)]
    bad = np.flatnonzero(~np.isfinite(vals))
    if not bad.size:
        return None
    if BY_CODE[int(t.OP[e])].kind == "source":
        return int(bad[0]), []
    try:
        parts = reads(t, e)
    except NotImplementedError:               # a custom Function: its inputs as a whole
        clean = all(np.isfinite(V[OFF[j]:OFF[j] + t.size(j)]).all() for j in inputs(t, e))
        return (int(bad[0]), []) if clean else None
    tainted = np.zeros(vals.size, bool)
    for j, rows, cols in parts:
        tainted[rows[~np.isfinite(V[OFF[j] + cols])]] = True
    ok = bad[~tainted[bad]]
    return (int(ok[0]), parts) if ok.size else None


def forward_origin(t, top):
    """The forward report for buffer ``top`` of tape (or recording) ``t``, or None when
    every value it depends on is finite."""
    t.flush()
    if getattr(t, "released", False):
        raise RuntimeError("the values of this tape were freed by a backward: ask before "
                           "it (or backward with retain_graph=True)")
    n = top + 1
    OFF, sizes = t.OFF[:n], t.sizes(0, n)
    bad = np.concatenate([[0], np.cumsum(~np.isfinite(t.V[:int((OFF + sizes).max())]))])
    candidates = np.flatnonzero(bad[OFF + sizes] - bad[OFF] > 0)
    if not candidates.size:
        return None
    up = ancestors(t, top)
    for e in candidates.tolist():
        if e not in up:
            continue
        found = _origin_at(t, e)
        if found is not None:
            k, parts = found
            expr = (f"{BY_CODE[int(t.OP[e])].name} input holds {_fmt(t.V[OFF[e] + k])} at "
                    f"element {k}" if BY_CODE[int(t.OP[e])].kind == "source" else
                    _expression(t, e, k, parts))
            return NanReport(t, "forward", e, expr, _path_up(t, e, top, up))
    return None


def _consumers(t, within):
    out = {}
    for c in sorted(within):
        for j in inputs(t, c):
            out.setdefault(j, []).append(c)
    return out


def _path_up(t, e, top, within):
    """Entries from e up to top, each an input of the next (a shortest such chain)."""
    consumers = _consumers(t, within)
    back, frontier = {e: None}, [e]
    while frontier and top not in back:
        nxt = []
        for j in frontier:
            for c in consumers.get(j, ()):
                if c not in back:
                    back[c] = j
                    nxt.append(c)
        frontier = nxt
    chain, at = [], top if top in back else e
    while at is not None:
        chain.append(at)
        at = back[at]
    return chain[::-1]


def adjoint_report(t, i, live, k):
    """The backward report: entry i's backward wrote a NaN into its k-th input's adjoint;
    the chain runs from an output (a live entry no live entry consumes) down to i."""
    consumers = _consumers(t, set(np.flatnonzero(live).tolist()) | {i})
    chain, at = [i], i
    while consumers.get(at):
        at = consumers[at][0]
        chain.append(at)
    ins = inputs(t, i)
    expr = (f"its backward returned nan into the adjoint of input {k} (entry {ins[k]})"
            if k < len(ins) else "its backward returned nan")
    return NanReport(t, "backward", i, expr, chain[::-1])


class NonFiniteForwardWarning(RuntimeWarning):
    """Anomaly mode: a backward starts from an output whose forward pass made a NaN or
    an inf (the warning's text is the forward report)."""


def warn_forward(outputs):
    """Anomaly mode, at the start of a backward: warn with the forward report of each
    output that holds a non-finite value."""
    for out in outputs:
        if out._t is not None and not np.isfinite(np.asarray(out._arr, np.float64)).all():
            report = forward_origin(out._t, out._i)
            if report is not None:
                warnings.warn(str(report), NonFiniteForwardWarning, stacklevel=4)


def explain_nan(tensor):
    """Where the first non-finite value behind ``tensor`` was made (a ``NanReport``), or
    None if every value it depends on is finite.  Source lines are known for ops
    recorded in anomaly mode."""
    if tensor._t is None:
        finite = np.isfinite(np.asarray(tensor._arr, np.float64)).all()
        raise ValueError("explain_nan needs a tensor computed by recorded ops; this one has "
                         "no history (its own values are "
                         + ("all finite)" if finite else "not all finite)"))
    return forward_origin(tensor._t, tensor._i)

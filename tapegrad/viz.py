"""Seeing the tape: tables of entries and torchviz-style drawings of the graph.

``tape_rows`` / ``Tape._repr_html_`` show a tape as a table; ``to_dot`` / ``make_dot``
draw the graph behind a tensor as PyTorch shows it (Backward nodes, AccumulateGrad boxes
for leaves).  Both walk iteratively, so long graphs draw without recursion; drawings
stop expanding after ``max_nodes`` nodes and say how much was left out.
"""
import html

import numpy as np

from .autograd.graph import AccumulateGrad
from .ops.table import OPS
from .tape import HIDDEN, LOCATIONS

_COLUMNS = ("index", "op", "node", "inputs", "shape", "value", "source")


def _node_name(t, i):
    from .autograd.graph import node_of
    op = OPS[t.OP[i]]
    if op.kind == "source":
        return {"leaf": "AccumulateGrad", "const": "", "external": "(other tape)"}[op.name]
    if t.FLAGS[i] & HIDDEN:
        return "(hidden)"
    return node_of(t, i).name()


def _inputs(t, i):
    from .autograd.graph import _inputs as entry_inputs
    return [j for j in entry_inputs(t, i) if j >= 0]


def _preview(t, i, width=40):
    if t.released:
        return "(freed)"
    v = t.value(i)
    text = np.array2string(v, precision=4, separator=", ", threshold=6, edgeitems=2)
    return text if len(text) <= width else text[:width - 3] + "..."


def depends(t, i):
    """The entries of tape ``t`` that entry i depends on, i included (iterative)."""
    seen, stack = set(), [i]
    while stack:
        j = stack.pop()
        if j not in seen:
            seen.add(j)
            stack.extend(_inputs(t, j))
    return seen


def tape_rows(t, op=None, output=None, limit=None):
    """Rows (dicts) of the tape's entries: all, those of op name ``op``, and/or those the
    tensor ``output`` depends on."""
    t.flush()
    keep = None
    if output is not None:
        if output.tape is not t:
            raise ValueError("output was not recorded on this tape")
        keep = depends(t, output._i)
    rows = []
    for i in range(t.next):
        name = OPS[t.OP[i]].name
        if (op is not None and name != op) or (keep is not None and i not in keep):
            continue
        loc = t.locs.get(i)
        rows.append({"index": i, "op": name, "node": _node_name(t, i),
                     "inputs": _inputs(t, i), "shape": t.shape(i), "value": _preview(t, i),
                     "source": "" if loc is None else "%s:%d" % LOCATIONS[loc]})
        if limit is not None and len(rows) >= limit:
            break
    return rows


def rows_text(rows, total):
    lines = ["  ".join(f"{c:>5}" if c == "index" else f"{c:<14}" for c in _COLUMNS[:5])]
    for r in rows:
        lines.append(f"{r['index']:>5}  {r['op']:<14}  {r['node']:<14}  "
                     f"{str(r['inputs']):<14}  {str(r['shape']):<14}  {r['value']}")
    if total > len(rows):
        lines.append(f"  ... {total - len(rows)} more entries")
    return "\n".join(lines)


def rows_html(rows, total):
    head = "".join(f"<th>{c}</th>" for c in _COLUMNS)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(r[c]))}</td>" for c in _COLUMNS)
                   + "</tr>" for r in rows)
    more = f"<p>... {total - len(rows)} more entries</p>" if total > len(rows) else ""
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}"


def to_pandas(t, **filters):
    import pandas as pd      # optional dependency
    return pd.DataFrame(tape_rows(t, **filters), columns=list(_COLUMNS))


# -- backward, step by step -------------------------------------------------------------------
class BackwardTrace:
    """The frames of one reverse sweep, in sweep order: for each swept entry, the
    gradient that arrived and what it sent to each input (what the inputs' gradient
    buffers summed, and what AccumulateGrad wrote for leaves)."""

    def __init__(self, frames, leaf_grads):
        self.frames = frames
        self.leaf_grads = leaf_grads      # [(leaf tensor, its summed gradient)]

    def rows(self):
        return [{"step": f["step"], "entry": f["entry"], "node": f["node"],
                 "incoming": _short(f["incoming"]),
                 "sends": "; ".join(f"{to} += {_short(d)}" for _, to, d in f["sent"])}
                for f in self.frames]

    def __repr__(self):
        lines = [f"{'step':>4}  {'entry':>5}  {'node':<16}  {'incoming':<24}  sends"]
        for r in self.rows():
            lines.append(f"{r['step']:>4}  {r['entry']:>5}  {r['node']:<16}  "
                         f"{r['incoming']:<24}  {r['sends']}")
        return "\n".join(lines)

    def _repr_html_(self):
        cols = ("step", "entry", "node", "incoming", "sends")
        head = "".join(f"<th>{c}</th>" for c in cols)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(str(r[c]))}</td>" for c in cols)
                       + "</tr>" for r in self.rows())
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _short(a, width=24):
    text = np.array2string(np.asarray(a), precision=4, separator=", ", threshold=4,
                           edgeitems=1)
    return text if len(text) <= width else text[:width - 3] + "..."


def trace_backward(output, gradient=None):
    """Run the reverse sweep from ``output`` one entry at a time and record every step
    (the graph is kept and no ``.grad`` is touched: call ``backward()`` afterwards)."""
    from .autograd import engine
    frames = []

    def observe(t, i, incoming, sent):
        frames.append({"step": len(frames), "entry": i, "node": _node_name(t, i),
                       "incoming": incoming.reshape(t.shape(i)),
                       "sent": [(b, f"{_node_name(t, b) or 'const'}#{b}",
                                 d.reshape(t.shape(b))) for b, d in sent]})

    seeds = engine._seeds((output,), None if gradient is None else (gradient,))
    deliveries, _ = engine.run((output,), seeds, True, observe=observe)
    return BackwardTrace(frames, deliveries)


# -- drawings --------------------------------------------------------------------------------
def _label(node, names, show_attrs):
    if isinstance(node, AccumulateGrad):
        v = node.variable
        name = names.get(id(v), "")
        return f"{name}\n{tuple(v.shape)}".strip()
    return node.name()


def to_dot(tensor, params=None, show_saved=False, show_attrs=False, max_nodes=500):
    """DOT source of the graph that computed ``tensor``, in torchviz's style."""
    names = {id(v): k for k, v in (params or {}).items()}
    lines = ["digraph {", '  node [shape=box, style=filled, fontname="monospace", '
             'fontsize=10, fillcolor=lightgray]', "  rankdir=TB"]
    out_id = f"t{id(tensor)}"
    lines.append(f'  {out_id} [label="{tuple(tensor.shape)}", fillcolor=darkolivegreen1]')
    root = tensor.grad_fn
    if root is None:
        return "\n".join(lines + ["}"])
    ids, order, queue, cut = {}, [], [root], 0
    while queue:
        node = queue.pop()
        if id(node) in ids:
            continue
        if len(ids) >= max_nodes:
            cut += 1
            continue
        ids[id(node)] = f"n{len(ids)}"
        order.append(node)
        queue.extend(f for f, _ in reversed(node.next_functions) if f is not None)
    for node in order:
        color = "lightblue" if isinstance(node, AccumulateGrad) else "lightgray"
        label = _label(node, names, show_attrs).replace('"', "'").replace("\n", "\\n")
        lines.append(f'  {ids[id(node)]} [label="{label}", fillcolor={color}]')
        if show_saved and not isinstance(node, AccumulateGrad):
            for what in ("self", "other", "result"):
                try:
                    saved = getattr(node, f"_saved_{what}")
                except (AttributeError, RuntimeError):
                    continue
                shape = tuple(saved.shape) if hasattr(saved, "shape") else ()
                sid = f"{ids[id(node)]}_{what}"
                lines.append(f'  {sid} [label="{what}\\n{shape}", fillcolor=orange]')
                lines.append(f"  {sid} -> {ids[id(node)]} [style=dashed]")
        for f, _ in node.next_functions:
            if f is not None and id(f) in ids:
                lines.append(f"  {ids[id(f)]} -> {ids[id(node)]}")
    lines.append(f"  {ids[id(root)]} -> {out_id}")
    if cut:
        lines.append(f'  more [label="... {cut} more nodes not drawn", shape=plaintext, '
                     'style=""]')
    return "\n".join(lines + ["}"])


class Dot:
    """DOT source with a name; what ``make_dot`` returns when graphviz is not installed."""

    def __init__(self, source):
        self.source = source

    def to_dot(self):
        return self.source

    def __repr__(self):
        return self.source


def make_dot(tensor, params=None, show_saved=False, show_attrs=False, max_nodes=500):
    """A ``graphviz.Digraph`` of the graph behind ``tensor`` (a ``Dot`` holding the DOT
    source when the graphviz package is not installed)."""
    source = to_dot(tensor, params, show_saved, show_attrs, max_nodes)
    try:
        import graphviz
    except ImportError:
        return Dot(source)
    return graphviz.Source(source)

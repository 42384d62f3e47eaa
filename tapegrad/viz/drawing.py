"""Drawings of the graph behind a tensor, in the style of torchviz.

Backward nodes are grey boxes named as PyTorch names them; a leaf is a light-blue box
(its parameter name and shape) feeding its ``AccumulateGrad``; the output is green;
saved tensors (``show_saved``) are orange; ``show_attrs`` lists each node's saved
values in its box.  Edges point the way the forward pass went (torchviz's convention);
gradients flow against them.

The graph is walked breadth-first without recursion.  Above ``max_nodes`` nodes,
chains of single-input, single-consumer nodes collapse into one box that counts what
it stands for ("MulBackward0 x 99,999"); if that is still too many, the nodes farthest
from the output are left out and one box says how many.
"""
import collections
import shutil
import subprocess

from ..autograd.graph import AccumulateGrad
from ..autograd.nan_trace import NanReport
from ..ops.table import BY_CODE
from ..tensor import Tensor

_STYLE = ('node [shape=box, style=filled, fillcolor=lightgray, fontname=monospace, '
          'fontsize=10, height=0.2, align=left]', 'graph [ranksep=0.2]')


def _shape(x):
    return "(" + ", ".join(str(n) for n in x.shape) + ")"


def _quote(label):
    return '"' + label.replace('"', '\\"') + '"'


def _walk(roots):
    """All nodes reachable from ``roots`` (breadth-first; the roots first, once each) and
    the edges (next function -> node), as indices into the node list."""
    nodes, index, edges = [], {}, []
    for root in roots:
        if id(root) not in index:
            index[id(root)] = len(nodes)
            nodes.append(root)
    queue = collections.deque(nodes)
    while queue:
        node = queue.popleft()
        k = index[id(node)]
        for f, _ in node.next_functions:
            if f is None:
                continue
            j = index.get(id(f))
            if j is None:
                j = index[id(f)] = len(nodes)
                nodes.append(f)
                queue.append(f)
            edges.append((j, k))
    return nodes, edges


def _chain_label(names):
    """One box for a chain of nodes (in forward order): its nodes when few, else counts."""
    counts = collections.Counter(names).most_common()
    if len(counts) == 1:
        return f"{counts[0][0]} x {counts[0][1]:,}"
    if len(names) <= 4:
        return "\\n".join(names)
    kinds = "\\n".join(f"{n} x {c:,}" for n, c in counts[:3])
    more = "\\n..." if len(counts) > 3 else ""
    return f"chain of {len(names):,} nodes\\n{kinds}{more}"


def _collapse(nodes, edges, n_roots=1, min_run=3):
    """Replace runs of >= ``min_run`` linear nodes (one in-edge, one out-edge; not the
    first ``n_roots``) by one chain node.  Returns (items, edges): items are graph nodes
    or ("chain", label), the roots first."""
    ins, outs = collections.defaultdict(list), collections.defaultdict(list)
    for j, k in edges:
        ins[k].append(j)
        outs[j].append(k)

    def linear(k):
        return k >= n_roots and len(ins[k]) == 1 and len(outs[k]) == 1 and \
            not isinstance(nodes[k], AccumulateGrad)

    new_id, items = {}, []             # old index -> new index; the new nodes
    for k in range(len(nodes)):
        if not linear(k):
            new_id[k] = len(items)
            items.append(nodes[k])
        elif not linear(ins[k][0]):     # k starts a run: follow its consumers
            run = [k]
            while linear(outs[run[-1]][0]):
                run.append(outs[run[-1]][0])
            if len(run) >= min_run:
                new_id.update((r, len(items)) for r in run)
                items.append(("chain", _chain_label([nodes[r].name() for r in run])))
                continue
            for r in run:
                new_id[r] = len(items)
                items.append(nodes[r])
    merged = []
    for j, k in edges:
        a, b = new_id[j], new_id[k]
        if a != b:
            merged.append((a, b))
    return items, merged


def _nearest(items, edges, limit, n_roots=1):
    """The ``limit`` items nearest the outputs (the first ``n_roots`` items),
    breadth-first against the edges."""
    ins = collections.defaultdict(list)
    for j, k in edges:
        ins[k].append(j)
    keep, queue = set(range(n_roots)), collections.deque(range(n_roots))
    while queue and len(keep) < limit:
        k = queue.popleft()
        for j in ins[k]:
            if j not in keep and len(keep) < limit:
                keep.add(j)
                queue.append(j)
    return keep


def _saved(node, show_attrs):
    """(name, value) pairs of a node's saved values: tensors and numbers."""
    if isinstance(node, AccumulateGrad):
        return []
    t = node._t()
    group = t.autograd.functions.get(node._i)
    if group is not None:
        return [(f"saved_tensors[{k}]", v) for k, v in enumerate(group.ctx.saved_tensors)]
    out = []
    for what in BY_CODE[t.OP[node._i]].saves:
        try:
            out.append((what, getattr(node, f"_saved_{what}")))
        except RuntimeError:                 # freed by a backward without retain_graph
            if show_attrs:
                out.append((what, "(freed)"))
    return out


def _label(node, show_attrs):
    if isinstance(node, AccumulateGrad):
        return "AccumulateGrad"
    label = node.name()
    if show_attrs:
        attrs = [f"{name}: " + ("[saved tensor]" if isinstance(v, Tensor) else str(v))
                 for name, v in _saved(node, True)]
        if attrs:
            label += "\\n" + "-" * max(len(a) for a in attrs) + "\\n" + "\\n".join(attrs)
    return label


def statements(tensor, params=None, show_saved=False, show_attrs=False, max_nodes=500,
               highlight=None):
    """The DOT statements (attribute lines, nodes, edges) of the drawing of a tensor, or
    of a tuple or list of tensors (torchviz's several roots: one output box each).
    ``highlight``: (tape uid, entry) pairs whose nodes are filled in salmon, or a
    ``NanReport`` (its chain)."""
    if isinstance(highlight, NanReport):
        highlight = {(highlight.tape.uid, e) for e in highlight.chain}
    marked = set(highlight or ())
    names = {id(v): k for k, v in (params or {}).items()}
    tensors = list(tensor) if isinstance(tensor, (tuple, list)) else [tensor]
    outs = ["out"] if len(tensors) == 1 else [f"out{r}" for r in range(len(tensors))]
    out = list(_STYLE)
    for name, x in zip(outs, tensors):
        out.append(f"{name} [label={_quote(_shape(x))}, fillcolor=darkolivegreen1]")
    roots = [x.grad_fn for x in tensors if x.grad_fn is not None]
    if not roots:
        return out
    nodes, edges = _walk(roots)
    n_roots = len({id(r) for r in roots})
    items, cut = nodes, 0
    if len(nodes) > max_nodes:
        items, edges = _collapse(nodes, edges, n_roots)
    keep = set(range(len(items)))
    if len(items) > max_nodes:
        keep = _nearest(items, edges, max_nodes, n_roots)
        cut = len(items) - len(keep)
    for k in sorted(keep):
        item, nid = items[k], f"n{k}"
        if isinstance(item, tuple):
            out.append(f"{nid} [label={_quote(item[1])}, style=\"filled,dashed\"]")
            continue
        at = (getattr(item, "_uid", None), getattr(item, "_i", None))
        fill = ", fillcolor=salmon" if at in marked else ""
        out.append(f"{nid} [label={_quote(_label(item, show_attrs))}{fill}]")
        if isinstance(item, AccumulateGrad):
            v = item.variable
            name = names.get(id(v), "")
            label = f"{name}\\n{_shape(v)}" if name else _shape(v)
            out.append(f"v{k} [label={_quote(label)}, fillcolor=lightblue]")
            out.append(f"v{k} -> {nid}")
        elif show_saved:
            for s, (what, v) in enumerate(_saved(item, False)):
                if isinstance(v, Tensor):
                    label = _quote(what + "\\n" + _shape(v))
                    out.append(f"{nid}_s{s} [label={label}, fillcolor=orange]")
                    out.append(f"{nid}_s{s} -> {nid} [dir=none]")
    cut_into = set()
    for j, k in edges:
        if k in keep and j in keep:
            out.append(f"n{j} -> n{k}")
        elif k in keep:
            cut_into.add(k)
    if cut:
        out.append(f'more [label="... {cut:,} more nodes not drawn", style="filled,dashed"]')
        out.extend(f"more -> n{k} [style=dashed]" for k in sorted(cut_into))
    at = {id(n): k for k, n in enumerate(nodes[:n_roots])}
    for name, x in zip(outs, tensors):
        if x.grad_fn is not None:
            out.append(f"n{at[id(x.grad_fn)]} -> {name}")
    return out


def to_dot(tensor, params=None, show_saved=False, show_attrs=False, max_nodes=500,
           highlight=None):
    """DOT source of the graph that computed ``tensor``.  ``params``: {name: leaf} to
    label leaves; ``show_saved``: draw saved tensors; ``show_attrs``: list saved values
    in the nodes; ``max_nodes``: collapse / cut larger graphs; ``highlight``: a
    ``NanReport`` whose chain is filled in salmon (or (tape uid, entry) pairs)."""
    return _source(statements(tensor, params, show_saved, show_attrs, max_nodes, highlight))


def _lines(body):
    return [f"\t{s}\n" for s in body]


def _source(body):
    return "digraph {\n" + "".join(_lines(body)) + "}\n"


class Drawing:
    """DOT source that shows as SVG in a notebook when Graphviz's ``dot`` program is
    installed, and as its source otherwise."""

    def __init__(self, source):
        self.source = source

    def to_dot(self):
        return self.source

    def svg(self):
        """The drawing as SVG text (needs Graphviz's ``dot`` program)."""
        if shutil.which("dot") is None:
            raise RuntimeError("drawing SVG needs Graphviz's `dot` program on PATH "
                               "(e.g. apt-get install graphviz)")
        return subprocess.run(["dot", "-Tsvg"], input=self.source, capture_output=True,
                              text=True, check=True).stdout

    def _repr_svg_(self):
        return self.svg() if shutil.which("dot") else None

    def __repr__(self):
        return self.source


def make_dot(tensor, params=None, show_saved=False, show_attrs=False, max_nodes=500,
             highlight=None):
    """The drawing as a ``graphviz.Digraph`` when the graphviz package is installed,
    else as a ``Drawing`` (its ``.source`` is the same DOT text either way)."""
    body = statements(tensor, params, show_saved, show_attrs, max_nodes, highlight)
    try:
        import graphviz        # optional dependency
    except ImportError:
        return Drawing(_source(body))
    g = graphviz.Digraph()
    g.body.extend(_lines(body))
    return g


def _draw_report(report, output, **options):
    """``NanReport.draw(output)``: the graph behind ``output`` with the report's chain
    filled in salmon."""
    return make_dot(output, highlight=report, **options)


NanReport.draw = _draw_report


def show(tensor, params=None, show_saved=False, show_attrs=False, max_nodes=500,
         highlight=None):
    """Show the graph in a notebook: SVG with Graphviz's ``dot``, DOT text without
    (``highlight``: a ``NanReport``, as ``to_dot``)."""
    return Drawing(to_dot(tensor, params, show_saved, show_attrs, max_nodes, highlight))

"""Graph drawings: DOT text of known graphs, graphviz objects, SVG, large graphs."""
import re
import shutil
import sys

import pytest

import tapegrad as tg
from tapegrad import viz


def parse(dot):
    """{node id: label} and the set of (label, label) edges of DOT text."""
    labels = dict(re.findall(r'^\t(\w+) \[label="((?:[^"\\]|\\.)*)"', dot, re.M))
    edges = [(labels[a], labels[b]) for a, b in re.findall(r"^\t(\w+) -> (\w+)", dot, re.M)]
    return labels, edges


def seed_example():
    x = tg.tensor([2.0], requires_grad=True)
    return x, x * 3 + 5


def test_seed_example_add_mul_accumulate():
    x, z = seed_example()
    labels, edges = parse(viz.to_dot(z, params={"x": x}))
    assert sorted(labels.values()) == ["(1)", "AccumulateGrad", "AddBackward0",
                                       "MulBackward0", "x\\n(1)"]
    # torchviz draws edges the way the forward pass went: leaf -> ... -> output
    assert sorted(edges) == sorted([("x\\n(1)", "AccumulateGrad"),
                                    ("AccumulateGrad", "MulBackward0"),
                                    ("MulBackward0", "AddBackward0"),
                                    ("AddBackward0", "(1)")])


def test_product_of_two_leaves():
    x1 = tg.tensor(2.0, requires_grad=True)
    x2 = tg.tensor(3.0, requires_grad=True)
    y = x1 * x2
    labels, edges = parse(viz.to_dot(y, params={"x1": x1, "x2": x2}))
    assert list(labels.values()).count("AccumulateGrad") == 2
    assert ("x1\\n()", "AccumulateGrad") in edges and ("x2\\n()", "AccumulateGrad") in edges
    assert edges.count(("AccumulateGrad", "MulBackward0")) == 2
    same = parse(viz.to_dot(x1 * x1))[1]                  # one leaf used twice: two edges
    assert same.count(("AccumulateGrad", "MulBackward0")) == 2


def test_saved_tensors_and_attributes():
    x1 = tg.tensor([1.0, 2.0], requires_grad=True)
    x2 = tg.tensor([3.0, 4.0], requires_grad=True)
    y = (x1 * x2).exp() * 3
    plain = viz.to_dot(y)
    assert "orange" not in plain and "saved" not in plain
    labels, edges = parse(viz.to_dot(y, show_saved=True))
    saved = sorted(a for a, b in edges if a.split("\\n")[0] in ("self", "other", "result"))
    assert saved == ["other\\n(2)", "result\\n(2)", "self\\n(2)", "self\\n(2)"]
    labels = parse(viz.to_dot(y, show_attrs=True))[0]
    top = next(v for v in labels.values() if v.startswith("MulBackward0") and "3.0" in v)
    assert top.endswith("self: [saved tensor]\\nother: 3.0")


def test_custom_function_node():
    from custom_functions import Cube
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = Cube.apply(x).sum()
    labels, edges = parse(viz.to_dot(y, show_saved=True))
    assert ("AccumulateGrad", "CubeBackward") in edges
    assert ("CubeBackward", "SumBackward0") in edges
    assert ("saved_tensors[0]\\n(2)", "CubeBackward") in edges


def test_graph_across_two_tapes():
    a = tg.tensor(2.0, requires_grad=True)
    b = a * a
    with tg.Tape():
        c = b.sin()
    edges = parse(viz.to_dot(c))[1]
    assert ("MulBackward0", "SinBackward0") in edges


def test_make_dot_gives_a_graphviz_digraph():
    import graphviz
    x, z = seed_example()
    drawing = viz.make_dot(z, params={"x": x})
    assert isinstance(drawing, graphviz.Digraph)
    assert drawing.source == viz.to_dot(z, params={"x": x})


def test_make_dot_without_graphviz(monkeypatch):
    monkeypatch.setitem(sys.modules, "graphviz", None)      # import graphviz fails
    x, z = seed_example()
    drawing = viz.make_dot(z, params={"x": x})
    assert isinstance(drawing, viz.Drawing)
    assert drawing.source == drawing.to_dot() == viz.to_dot(z, params={"x": x})


def test_show_without_the_dot_program(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    drawing = viz.show(seed_example()[1])
    assert drawing._repr_svg_() is None                   # a notebook falls back to the text
    assert repr(drawing).startswith("digraph {")
    with pytest.raises(RuntimeError, match="Graphviz's `dot` program"):
        drawing.svg()


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot program is not installed")
def test_show_renders_svg_with_the_dot_program():
    svg = viz.show(seed_example()[1])._repr_svg_()
    assert "<svg" in svg and "AddBackward0" in svg and "AccumulateGrad" in svg


def test_long_chain_collapses_without_recursion():
    x = tg.tensor(0.5, requires_grad=True)
    y = x
    for _ in range(100000):
        y = y * 1.0001
    labels, edges = parse(viz.to_dot(y, max_nodes=300))
    nodes = {k: v for k, v in labels.items() if k.startswith("n")}
    assert sorted(nodes.values()) == ["AccumulateGrad", "MulBackward0", "MulBackward0 x 99,999"]
    assert ("MulBackward0 x 99,999", "MulBackward0") in edges
    assert ("AccumulateGrad", "MulBackward0 x 99,999") in edges
    small = parse(viz.to_dot(x * 2 * 3 * 4))[0]
    assert "MulBackward0 x" not in "".join(small.values())   # small graphs draw in full


def test_wide_graph_is_cut_near_the_output():
    w = tg.tensor([1.0, 2.0], requires_grad=True)
    total = (w * 0).sum()
    for i in range(1, 400):
        total = total + (w * i).sum()
    dot = viz.to_dot(total, max_nodes=50)
    labels, edges = parse(dot)
    drawn = [k for k in labels if re.fullmatch(r"n\d+", k)]
    # 399 adds, 400 muls and sums (runs of two: too short to collapse), one leaf
    assert len(drawn) == 50
    assert f"... {399 + 2 * 400 + 1 - 50:,} more nodes not drawn" in dot
    assert "more -> n" in dot
    assert labels["n0"] == "AddBackward0"


def test_mixed_chain_counts_its_nodes():
    x = tg.tensor(0.5, requires_grad=True)
    y = x
    for _ in range(1000):
        y = (y * 1.0001).sin()
    labels = parse(viz.to_dot(y, max_nodes=100))[0]
    nodes = sorted(v for k, v in labels.items() if k.startswith("n"))
    # the root, the chain below it, the leaf's AccumulateGrad
    assert nodes == ["AccumulateGrad", "SinBackward0",
                     "chain of 1,999 nodes\\nMulBackward0 x 1,000\\nSinBackward0 x 999"]

"""Tape tables and graph drawings."""
import re
import time

import pytest

import tapegrad as tg
from tapegrad import viz


def _seed_example():
    x = tg.tensor([2.0], requires_grad=True)
    with tg.Tape() as t:
        y = x * 3
        z = y + 5
    return x, y, z, t


def _nodes_and_edges(dot):
    labels = dict(re.findall(r'^\s+(n\d+) \[label="([^"]*)"', dot, re.M))
    edges = {(labels.get(a, a), labels.get(b, b))
             for a, b in re.findall(r"^\s+(n\d+) -> (n\d+)", dot, re.M)}
    return labels, edges


def test_dot_of_the_seed_example():
    x, _, z, _ = _seed_example()
    dot = viz.to_dot(z, params={"x": x})
    labels, edges = _nodes_and_edges(dot)
    assert set(labels.values()) == {"AddBackward0", "MulBackward0", "x\\n(1,)"}
    assert ("MulBackward0", "AddBackward0") in edges and ("x\\n(1,)", "MulBackward0") in edges
    drawing = viz.make_dot(z, params={"x": x})
    assert drawing.source == dot
    assert "_saved_" not in dot and "fillcolor=orange" in viz.to_dot(z, show_saved=True)


def test_tape_table_rows_text_and_html():
    x, y, z, t = _seed_example()
    rows = t.rows()
    assert [r["op"] for r in rows] == ["leaf", "mul", "add"]
    assert [r["node"] for r in rows] == ["AccumulateGrad", "MulBackward0", "AddBackward0"]
    assert rows[2]["inputs"] == [1] and rows[2]["value"] == "[11.]"
    assert len(t.rows(output=y)) == 2 and [r["index"] for r in t.rows(op="add")] == [2]
    assert t._repr_html_().count("<tr>") == 1 + len(rows)      # header + one row per entry
    assert "MulBackward0" in repr(t)
    with tg.autograd.detect_anomaly():
        with tg.Tape() as t2:
            (x * 2).sum()
    assert "test_viz.py" in t2.rows()[-1]["source"]


def test_to_pandas_when_installed():
    _, _, _, t = _seed_example()
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError):
            t.to_pandas()
        return
    assert len(t.to_pandas()) == 3


def test_large_graph_draws_collapsed_quickly():
    x = tg.tensor(0.5, requires_grad=True)
    y = x
    for _ in range(100000):
        y = y * 1.0001
    t0 = time.perf_counter()
    dot = viz.to_dot(y, max_nodes=300)
    assert time.perf_counter() - t0 < 5.0
    assert "more nodes not drawn" in dot and dot.count("MulBackward0") == 300


def test_step_by_step_backward_sums_to_the_gradients():
    import numpy as np
    w = tg.tensor([[0.5, -1.0], [2.0, 0.3]], requires_grad=True)
    x = tg.tensor([1.5, -0.5], requires_grad=True)
    h = (w @ x).tanh()
    loss = (h * h).sum() + (x * x).sum()
    trace = viz.trace_backward(loss)
    assert w.grad is None and x.grad is None                  # nothing accumulated
    t = loss.tape
    sums = {}
    for frame in trace.frames:
        for b, label, delta in frame["sent"]:
            sums[b] = sums.get(b, 0) + delta
    loss.backward()                                           # the graph was kept
    leaf_entry = {id(src): e for e, src in t.sources.items()}
    np.testing.assert_allclose(sums[leaf_entry[id(w)]], w.grad.numpy())
    np.testing.assert_allclose(sums[leaf_entry[id(x)]], x.grad.numpy())
    assert [f["node"] for f in trace.frames][0] == "AddBackward0"
    assert trace._repr_html_().count("<tr>") == 1 + len(trace.frames)
    assert "AccumulateGrad#" in repr(trace)

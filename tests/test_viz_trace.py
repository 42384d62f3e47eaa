"""Backward step by step: the recorded contributions are the gradients backward() gives."""
import numpy as np

import tapegrad as tg
from tapegrad import viz


def small_network():
    w = tg.tensor([[0.5, -1.0], [2.0, 0.3]], requires_grad=True)
    x = tg.tensor([1.5, -0.5], requires_grad=True)
    h = (w @ x).tanh()
    loss = (h * h).sum() + (x * x).sum()
    return w, x, loss


def test_contributions_sum_to_the_gradients():
    w, x, loss = small_network()
    trace = viz.trace_backward(loss)
    assert w.grad is None and x.grad is None                  # nothing accumulated
    sums = {}
    for frame in trace.frames:
        for b, _, delta in frame["sent"]:
            sums[b] = sums.get(b, 0) + delta
    loss.backward()                                           # the graph was kept
    np.testing.assert_allclose(sums[w._i], w.grad.numpy())
    np.testing.assert_allclose(sums[x._i], x.grad.numpy())
    # each swept node received what its inputs' buffers summed before it ran
    for frame in trace.frames:
        if frame["node"] != "AccumulateGrad" and frame["entry"] != loss._i:
            np.testing.assert_allclose(frame["incoming"], sums[frame["entry"]])
    # the last frames are AccumulateGrad's writes, one per leaf
    writes = {f["entry"]: f["incoming"] for f in trace.frames if f["node"] == "AccumulateGrad"}
    np.testing.assert_allclose(writes[w._i], w.grad.numpy())
    np.testing.assert_allclose(writes[x._i], x.grad.numpy())
    assert trace.frames[0]["node"] == "AddBackward0"
    assert [f["step"] for f in trace.frames] == list(range(len(trace.frames)))


def test_scalar_seed_example():
    x = tg.tensor([2.0], requires_grad=True)
    z = x * 3 + 5
    trace = viz.trace_backward(z)
    assert [f["node"] for f in trace.frames] == ["AddBackward0", "MulBackward0",
                                                 "AccumulateGrad"]
    np.testing.assert_allclose(trace.frames[-1]["incoming"], [3.0])
    assert "AccumulateGrad#0 += [3.]" in repr(trace)
    assert trace._repr_html_().count("<tr>") == 1 + len(trace.frames)


def test_static_frames():
    w, x, loss = small_network()
    trace = viz.trace_backward(loss)
    frames = trace.show(widget=False)
    assert isinstance(frames, viz.Frames) and len(frames) == len(trace.frames)
    html = frames._repr_html_()
    assert html.count("<table>") == len(trace.frames)
    assert html.count("background:#ffe9a8") == len(trace.frames)    # the current row
    text = repr(frames)
    assert text.count("step ") == len(trace.frames)
    first = trace.state(0)
    assert first[0]["buffer"] == f"AddBackward0#{loss._i} (output)"
    assert first[0]["state"] == "now" and all(r["state"] == "waiting" for r in first[1:])
    last = trace.state(len(trace.frames) - 1)
    assert all(r["state"].startswith(("done", "now")) for r in last)
    assert sum(r["state"].endswith("added into .grad") for r in last) == 2     # w and x


def test_slider_with_ipywidgets():
    import ipywidgets
    _, _, loss = small_network()
    trace = viz.trace_backward(loss)
    box = trace.show()                       # ipywidgets is installed: the slider
    assert isinstance(box, ipywidgets.VBox)
    slider, view = box.children
    assert slider.max == len(trace.frames) - 1 and view.value == trace.frame_html(0)
    slider.value = 3
    assert view.value == trace.frame_html(3) != trace.frame_html(0)

"""NaNs and infs traced to where they start: the forward origin, the backward chain, in
anomaly mode and on demand, eager and replayed, at scalar and array sizes.

Where PyTorch raises (a NaN returned by a backward Node in anomaly mode) its error text
is kept and checked against PyTorch's own; where it does not (an inf, a NaN only in the
forward pass) neither do we."""
import inspect
import warnings

import numpy as np
import pytest
import torch

import tapegrad as tg
from tapegrad.autograd import nan_trace

pytestmark = pytest.mark.usefixtures("torch_float64")
SIZES = [0, 7, 5000]


def _line():
    return inspect.currentframe().f_back.f_lineno


def _vec(n, at, value, fill=1.5):
    """A vector of n elements (a 0-d tensor for n = 0) with ``value`` at position at."""
    a = np.full(max(n, 1), fill)
    a[at if n else 0] = value
    return a.reshape(()) if n == 0 else a


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("op,value,expr", [
    ("log", -0.5, "log(-0.5) = nan"),
    ("exp", 750.0, "exp(750.0) = inf"),
    ("sqrt", -4.0, "sqrt(-4.0) = nan"),
])
def test_the_forward_origin_is_the_op_that_made_it(n, op, value, expr):
    at = 3 if n else 0
    x = tg.tensor(_vec(n, at, value), requires_grad=True)
    with tg.autograd.detect_anomaly():
        y = getattr(tg, op)(x); line = _line()  # noqa: E702
        z = (y * 2.0 + 1.0).sum()
    report = tg.autograd.explain_nan(z)
    assert report.phase == "forward" and report.op == op
    assert report.node == y.grad_fn.name()
    assert report.expression == expr
    assert report.location == (__file__, line)
    assert report.chain[0] == y._i and report.chain[-1] == z._i
    assert f"test_nan_trace.py:{line}" in str(report)


@pytest.mark.parametrize("n", SIZES)
def test_values_that_only_carry_a_nan_are_not_blamed(n):
    x = tg.tensor(_vec(n, 3 if n else 0, -1.0), requires_grad=True)
    y = tg.log(x)                    # the origin: log(-1.0)
    z = (y * 3.0).exp() + y          # nan carried on through three more ops
    report = tg.autograd.explain_nan(z.sum())
    assert report.entry == y._i and report.expression == "log(-1.0) = nan"
    assert report.location is None                # recorded outside anomaly mode


def test_an_input_that_holds_nan_is_the_origin():
    x = tg.tensor([1.0, float("nan")], requires_grad=True)
    report = tg.autograd.explain_nan((x * 2).sum())
    assert report.op == "leaf" and "nan at element 1" in report.expression


def test_reductions_and_products_that_overflow_are_named_with_their_inputs():
    big = tg.tensor([1e308, 1e308, 1.0], requires_grad=True)
    report = tg.autograd.explain_nan(big.sum() * 2)
    assert report.op == "sum" and report.expression.endswith("element 0 = inf")
    assert "3 finite values" in report.expression
    A = tg.tensor(np.full((2, 3), 1e200), requires_grad=True)
    report = tg.autograd.explain_nan((A @ A.t()).sum())
    assert report.op in ("mm", "matmul") and report.expression.endswith("= inf")
    assert tg.autograd.explain_nan((tg.tensor([1.0, 2.0], requires_grad=True) * 3).sum()) is None


def test_explain_nan_needs_a_history():
    with pytest.raises(ValueError, match="no history"):
        tg.autograd.explain_nan(tg.tensor([float("nan")]))


# -- anomaly mode: PyTorch's error, with where the NaN started -----------------------------
def _masked_log(m, n):
    """The classic: where() hides log(0) = -inf in the forward pass, but its backward
    computes 0 / 0."""
    x = m.tensor(_vec(n, 2 if n else 0, 0.0, fill=2.0), requires_grad=True)
    with m.autograd.detect_anomaly():
        y = m.where(x > 0, m.log(x), m.zeros_like(x))
        with pytest.raises(RuntimeError) as info:
            y.sum().backward()
    return info.value, x


@pytest.mark.parametrize("n", SIZES)
def test_a_nan_in_backward_raises_pytorchs_error_and_reports_both_passes(n):
    ours, x = _masked_log(tg, n)
    theirs, _ = _masked_log(torch, n)
    first = str(theirs).splitlines()[0]
    assert first == "Function 'LogBackward0' returned nan values in its 0th output."
    assert str(ours).startswith(first)
    back, fwd = ours.nan_report, ours.forward_report
    assert back.phase == "backward" and back.op == "log"
    assert back.chain[-1] == back.entry
    assert [back.tape.OP[e] for e in back.chain[:2]] == [tg.tape.CODE["sum"],
                                                         tg.tape.CODE["where"]]
    assert fwd.expression == "log(0.0) = -inf" and fwd.entry == back.entry
    assert "chain from the output" in str(ours) and "forward pass" in str(ours)


def test_an_inf_in_backward_raises_for_neither():
    for m in (torch, tg):
        x = m.tensor([0.0, 1.0], requires_grad=True)
        with m.autograd.detect_anomaly(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m.log(x).sum().backward()                # d log(x) = 1/0 = inf
        assert np.isinf(x.grad.numpy()[0])


def test_anomaly_mode_warns_when_the_output_is_not_finite():
    x = tg.tensor([0.0, 1.0], requires_grad=True)
    with tg.autograd.detect_anomaly():
        loss = tg.log(x).sum() * 2
        with pytest.warns(tg.autograd.NonFiniteForwardWarning, match=r"log\(0\.0\) = -inf"):
            loss.backward()
        fine = (x * 2).sum()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            fine.backward()


def test_with_anomaly_mode_off_nothing_is_scanned(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("scanned with anomaly mode off")
    monkeypatch.setattr(nan_trace, "forward_origin", boom)
    x = tg.tensor([0.0, 1.0], requires_grad=True)
    (tg.log(x) * tg.sqrt(x)).sum().backward()
    assert np.isnan(x.grad.numpy()[0])


# -- replays ----------------------------------------------------------------------------------
def f(x):
    return (tg.sqrt(x) * x).sum() + tg.log(x[0] + 1.0)


@pytest.mark.parametrize("n", [2, 5000])
def test_traced_explain_nan_answers_at_each_input_without_recording_again(n):
    ok = np.full(n, 2.0)
    traced = tg.trace(f, tg.tensor(ok))
    assert traced.explain_nan(tg.tensor(ok)) is None
    bad = ok.copy()
    bad[-1] = -9.0
    report = traced.explain_nan(tg.tensor(bad))
    assert report.phase == "forward" and report.expression == "sqrt(-9.0) = nan"
    zero = ok.copy()
    zero[-1] = 0.0                   # finite forward; the sqrt backward divides 0 by 0
    report = traced.explain_nan(tg.tensor(zero))
    assert report.phase == "backward" and report.op == "sqrt"
    assert report.chain[0] == max(traced.records[0].outs)
    assert len(traced.records) == 1
    # PyTorch agrees that this gradient is NaN there
    tz = torch.tensor(zero, requires_grad=True)
    ((tz.sqrt() * tz).sum() + (tz[0] + 1.0).log()).backward()
    assert np.isnan(tz.grad.numpy()[-1])


def test_a_trace_made_in_anomaly_mode_knows_its_source_lines():
    with tg.autograd.detect_anomaly():
        traced = tg.trace(f, tg.tensor([1.0, 2.0]))
    report = traced.explain_nan(tg.tensor([4.0, -2.0]))
    assert report.location == (__file__, inspect.getsourcelines(f)[1] + 1)


# -- the notebook view --------------------------------------------------------------------
def test_the_notebook_view_and_the_drawing_highlight_the_chain():
    x = tg.tensor([0.5, -0.5], requires_grad=True)
    y = tg.log(x * 2 - 0.5)
    z = (y * x).sum()
    report = tg.autograd.explain_nan(z)
    html = report._repr_html_()
    assert html.count("#ff8787") == 1 and html.count("#ffd8a8") == len(report.chain) - 1
    dot = report.draw(z).source
    assert dot.count("fillcolor=salmon") == len(report.chain)
    assert '"LogBackward0", fillcolor=salmon' in dot
    shown = tg.viz.show(z, highlight=report).source       # the same, without graphviz
    assert shown.count("fillcolor=salmon") == len(report.chain)

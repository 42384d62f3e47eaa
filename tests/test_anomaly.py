"""Anomaly mode: NaN-producing backward ops are named, with the line that recorded them."""
import inspect

import pytest
import torch

import tapegrad as tg
from tapegrad import tape as tp

pytestmark = pytest.mark.usefixtures("torch_float64")


def _line():
    return inspect.currentframe().f_back.f_lineno


@pytest.mark.parametrize("m", [torch, tg], ids=["torch", "tapegrad"])
def test_nan_is_reported_with_pytorchs_message(m):
    x = m.tensor([0.0, 1.0], requires_grad=True)
    with m.autograd.detect_anomaly():
        z = x * x.sqrt(); line = _line()  # noqa: E702
        with pytest.raises(RuntimeError, match=r"Function 'SqrtBackward0' returned nan values "
                                               r"in its 0th output\.") as info:
            z.sum().backward()
    if m is tg:
        assert f"test_anomaly.py:{line}" in str(info.value)
    assert not m.is_anomaly_enabled()
    (x * 2).sum().backward()                      # state intact afterwards
    assert x.grad.tolist() == [2.0, 2.0]


def test_scalar_path_host_function_and_check_nan_off():
    a = tg.tensor(0.0, requires_grad=True)
    with tg.autograd.detect_anomaly():
        with pytest.raises(RuntimeError, match="'SqrtBackward0' returned nan"):
            (a.sqrt() * 0.0).backward()

        class Bad(tg.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 1.0

            @staticmethod
            def backward(ctx, g):
                return g * float("nan")

        with pytest.raises(RuntimeError, match="'BadBackward' returned nan values in its 0th"):
            Bad.apply(tg.tensor([1.0], requires_grad=True)).sum().backward()
    with tg.autograd.set_detect_anomaly(True, check_nan=False):
        b = tg.tensor(0.0, requires_grad=True)
        (b.sqrt() * 0.0).backward()               # NaN allowed through
    assert b.grad.item() != b.grad.item()


def test_locations_cost_nothing_when_off():
    assert tp.Tape.append is tp._plain_append
    with tg.Tape() as t:
        (tg.tensor([1.0, 2.0], requires_grad=True) * 2).sum()
    assert t.locs == {}

    @tg.autograd.detect_anomaly()
    def recorded():
        with tg.Tape() as t2:
            (tg.tensor(1.0, requires_grad=True) * 3.0).exp()
        return t2

    assert len(recorded().locs) >= 2 and tp.Tape.append is tp._plain_append

"""Ctrl-C at any line of recording: a KeyboardInterrupt is injected at every line of the
tape's recording and flush paths (``sys.settrace``), once per run of a small program
that records scalar and array entries.  After each one the process is alive, the
interrupted graph either gives the right gradient or raises an error, and a fresh graph
on the same thread gives the right gradient (finite differences of the closed form)."""
import sys

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import elementwise
from tapegrad.tape import tape as tape_module

TARGETS = [tape_module.Tape.flush, tape_module.Tape._fill_gaps, tape_module.Tape._reserve,
           tape_module.Tape.append, tape_module.Tape.append_into, tape_module.Tape._source,
           tape_module.Tape.register, tape_module.Tape.maintain, elementwise._stage]
V0 = np.linspace(0.5, 1.5, 5000)   # large: placed into the arena as it is recorded
N_SCALAR = 1400                      # ~4,200 scalar entries: the stage flushes on its own
FIRED = set()


def _lines(fn):
    code = fn.__code__
    return sorted({line for _, _, line in code.co_lines() if line is not None
                   and line > code.co_firstlineno})


POINTS = [(fn, line) for fn in TARGETS for line in _lines(fn)]


def _program():
    """Scalar and array entries, enough to flush and grow the tape, and a tensor of
    another tape; returns the leaves and the output."""
    x = tg.tensor(0.3, requires_grad=True)
    v = tg.tensor(V0, requires_grad=True)
    with tg.Tape():
        h = x * 2.0                        # an external entry where it is used below
    s = x
    for k in range(N_SCALAR):
        s = s * 1.01 + x.sin() * 0.1
    w = (v * v).exp().sum() + (v[:100] * 3.0).sum()
    return x, v, s + w + h


def _expected():
    """The closed form of _program's gradient, by recurrence."""
    x = 0.3
    dsdx = 1.0
    for _ in range(N_SCALAR):
        dsdx = dsdx * 1.01 + np.cos(x) * 0.1
    dsdx += 2.0
    dv = 2 * V0 * np.exp(V0 * V0)
    dv[:100] += 3.0
    return dsdx, dv


class _Interrupt:
    """A trace function raising KeyboardInterrupt the first time ``line`` of ``code``
    runs."""

    def __init__(self, code, line):
        self.code, self.line, self.fired = code, line, False

    def __call__(self, frame, event, arg):
        if frame.f_code is not self.code:
            return None
        return self._local

    def _local(self, frame, event, arg):
        if event == "line" and frame.f_lineno == self.line and not self.fired:
            self.fired = True
            raise KeyboardInterrupt
        return self._local


def _check_gradient(x, v, out):
    out.backward()
    want_x, want_v = _expected()
    np.testing.assert_allclose(x.grad.item(), want_x, rtol=1e-12)
    np.testing.assert_allclose(x.grad.item() * 0 + v.grad.numpy(), want_v, rtol=1e-12)


@pytest.mark.parametrize("fn,line", POINTS, ids=[f"{f.__qualname__}:{n}" for f, n in POINTS])
def test_interrupt_at_every_line(fn, line):
    trap = _Interrupt(fn.__code__, line)
    sys.settrace(trap)
    try:
        x, v, out = _program()
        interrupted = None
    except KeyboardInterrupt:
        interrupted = True
    finally:
        sys.settrace(None)
    if interrupted is None:
        try:
            sys.settrace(trap)           # the line may run only in backward's flush
            try:
                out.backward(retain_graph=True)
            finally:
                sys.settrace(None)
        except KeyboardInterrupt:
            pass
        except RuntimeError:
            pass                         # a clear error for the interrupted graph is fine
    if trap.fired:
        FIRED.add((fn, line))
    # a fresh graph on this thread: right gradients
    _check_gradient(*_program())
    # and again after the thread's tape moved on
    _check_gradient(*_program())


def test_points_cover_the_recording_paths():
    """(Runs after the injections, in file order.)  Most lines were reached and
    interrupted; the rest are branches this program does not take (a tape past its
    rotation size, the gaps only an earlier interrupt leaves)."""
    assert len(POINTS) > 100
    assert len(FIRED) >= 0.75 * len(POINTS), sorted(
        (f.__qualname__, n) for f, n in set(POINTS) - FIRED)

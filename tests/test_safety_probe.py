"""What a safety probe of the backward and replay paths found (Ctrl-C at every line of
them, threads, crafted inputs), each case as it failed before its fix:

* a Ctrl-C in a backward between taking a tape's lock and listing it left the lock
  held: a later backward through that tape from another thread waited forever;
* a Ctrl-C in ``Function.apply`` between recording an output's entry and registering
  its Function left an entry without one: every later ``grad`` (or ``backward`` with
  ``inputs``) through that tape raised a KeyError;
* threads sharing one ``Traced`` replayed in the same arrays: one call could return
  another's values;
* factories of a nonsense size (``zeros(2**62)``, ``arange(0, inf)``, ``rand(2**50)``)
  leaked NumPy's ValueError or a MemoryError where PyTorch raises its RuntimeError.

A KeyboardInterrupt is injected at a line with ``sys.settrace``, as in
tests/test_interrupts.py; the gradients are the closed forms'."""
import inspect
import sys
import threading

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.autograd import engine, function
from tapegrad.replay import Traced

TIMEOUT = 30      # seconds a thread's backward may take before it counts as hung


class _Interrupt:
    """A trace function raising KeyboardInterrupt the first time ``line`` of ``code``
    runs."""

    def __init__(self, code, line):
        self.code, self.line, self.fired = code, line, False

    def __call__(self, frame, event, arg):
        return self._local if frame.f_code is self.code else None

    def _local(self, frame, event, arg):
        if event == "line" and frame.f_lineno == self.line and not self.fired:
            self.fired = True
            raise KeyboardInterrupt
        return self._local


def _lines(fn, leave_out=()):
    code = fn.__code__
    source, first = inspect.getsourcelines(fn)
    skipped = {first + k for k, text in enumerate(source) if any(s in text for s in leave_out)}
    return sorted({line for _, _, line in code.co_lines()
                   if line is not None and line > code.co_firstlineno} - skipped)


def _interrupted(fn, line, call):
    """Run ``call()`` with a KeyboardInterrupt at ``line`` of ``fn``; True if it fired
    (and the call raised it)."""
    trap = _Interrupt(fn.__code__, line)
    sys.settrace(trap)
    try:
        call()
    except KeyboardInterrupt:
        pass
    finally:
        sys.settrace(None)
    return trap.fired


def _in_thread(call):
    box = []
    worker = threading.Thread(target=lambda: box.append(call()), daemon=True)
    worker.start()
    worker.join(TIMEOUT)
    assert not worker.is_alive(), "the backward in another thread hung (a lock left held)"
    return box[0]


# (A trace function can raise at the line that releases the locks, before it runs; a
# Ctrl-C cannot land there: no bytecode between entering ``finally`` and the one C call
# that releases them all checks for signals.)
RUN_LINES = _lines(engine.run, leave_out=("_EXHAUST(releases)",))
FIRED = set()


@pytest.mark.parametrize("line", RUN_LINES)
def test_a_ctrl_c_in_a_backward_leaves_no_tape_locked(line):
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    with tg.Tape():
        w = x + 3.0           # a second tape: a backward locks both (w saves nothing:
                              # a backward that ran to its end leaves it sweepable)
    y = (x * x).sum() + w.sum()
    if _interrupted(engine.run, line, y.backward):
        FIRED.add(line)
    x.grad = None
    z = (x * x * x).sum() + w.sum()       # this thread's tape and the other one
    grad = _in_thread(lambda: (z.backward(retain_graph=True), x.grad.numpy().copy())[1])
    np.testing.assert_array_equal(grad, [4.0, 13.0])


def test_most_lines_of_the_backward_were_interrupted():
    """(Runs after the test above, in file order.)  The rest are branches this backward
    does not take."""
    assert len(FIRED) >= 0.7 * len(RUN_LINES), sorted(set(RUN_LINES) - FIRED)


class Cube(tg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x, x * 2

    @staticmethod
    def backward(ctx, g, h):
        x, = ctx.saved_tensors
        return 3 * x * x * g + 2 * h


APPLY_LINES = _lines(function.Function.apply.__func__)


@pytest.mark.parametrize("line", APPLY_LINES)
def test_a_ctrl_c_in_a_custom_function_leaves_the_tape_usable(line):
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    _interrupted(function.Function.apply.__func__, line, lambda: Cube.apply(x * 1.0))
    a, b = Cube.apply(x * 1.0)            # on the same tape
    y = (a + b).sum() + (x * x).sum()
    g, = tg.autograd.grad(y, x, retain_graph=True)
    np.testing.assert_array_equal(g.numpy(), [7.0, 18.0])
    y.backward(inputs=[x])
    np.testing.assert_array_equal(x.grad.numpy(), [7.0, 18.0])


def _traced_program(a, b):
    return ((a * b).sin().sum() + (a @ b).exp().sum() * 0.01) * a[0, 0]


@pytest.mark.parametrize("call", ["call", "grad"])
def test_threads_sharing_a_traced_take_turns(call):
    """Thread A is held (by a trace function) after its replay and before it reads the
    outputs; thread B calls the same Traced meanwhile.  B waits for A's call to end, and
    each gets its own inputs' result."""
    a0 = np.linspace(0.1, 0.9, 16).reshape(4, 4)
    b0 = np.linspace(-0.5, 0.5, 16).reshape(4, 4)
    tr = tg.trace(_traced_program, tg.tensor(a0), tg.tensor(b0))
    run = tr if call == "call" else tr.value_and_grad
    points = {"a": (tg.tensor(a0), tg.tensor(b0)), "b": (tg.tensor(a0 * 2), tg.tensor(b0 * 3))}

    def value(out):
        return (out if call == "call" else out[0]).numpy()

    want = {k: value(run(*p)) for k, p in points.items()}
    held, resume, got = threading.Event(), threading.Event(), {}

    def hold(frame, event, arg):
        if frame.f_code is Traced._outputs.__code__:
            held.set()
            resume.wait(TIMEOUT)
        return None

    def thread_a():
        sys.settrace(hold)
        try:
            got["a"] = value(run(*points["a"]))
        finally:
            sys.settrace(None)

    ta = threading.Thread(target=thread_a, daemon=True)
    ta.start()
    assert held.wait(TIMEOUT)
    tb = threading.Thread(target=lambda: got.setdefault("b", value(run(*points["b"]))),
                          daemon=True)
    tb.start()
    tb.join(0.3)                          # (it waits for A's turn to end)
    resume.set()
    ta.join(TIMEOUT)
    tb.join(TIMEOUT)
    assert got == want


# -- factories of a nonsense size: PyTorch's RuntimeError, not NumPy's ValueError or a
# MemoryError.  (2**50 values: past any address space, so refused whatever the system's
# overcommit policy.)
_OVERFLOWING = ["zeros(2**62)", "zeros(2**31, 2**31)", "empty(2**62)", "ones(2**62, 2**62, 0)",
                "full((2**62,), 1.0)", "randn(2**62)", "randint(0, 10, (2**62,))",
                "randperm(2**62)", "arange(2**62)", "linspace(0, 1, 2**62)", "eye(2**31)",
                "arange(0, float('inf'))", "arange(0, float('nan'))", "arange(float('-inf'), 0)"]
_REFUSED = ["zeros(2**50)", "ones(2**50)", "empty(2**50)", "rand(2**50)", "randn(2**50)",
            "full((2**50,), 1.0)", "randint(0, 5, (2**50,))", "randperm(2**50)",
            "arange(0, 2**50, 1.0)", "linspace(0, 1, 2**50)", "eye(2**25)"]


def _error(m, call):
    with pytest.raises(Exception) as info:
        eval(call, {"m": m})
    return info.type, str(info.value)


@pytest.mark.parametrize("call", _OVERFLOWING)
def test_a_factory_of_an_overflowing_size_raises_pytorchs_error(call):
    torch = pytest.importorskip("torch")
    assert _error(tg, "m." + call) == _error(torch, "m." + call)


@pytest.mark.parametrize("call", _REFUSED)
def test_a_factory_the_system_cannot_allocate_raises_pytorchs_error(call):
    torch = pytest.importorskip("torch")
    for m in (tg, torch):
        kind, text = _error(m, "m." + call)
        assert kind is RuntimeError and "DefaultCPUAllocator: can't allocate memory" in text


def test_a_dtype_view_is_refused_by_name():
    """``x.view(dtype)`` (PyTorch reads the bits as another dtype) is not supported: a
    clear error naming it, where an internal TypeError leaked from ``int(dtype)``."""
    with pytest.raises(NotImplementedError, match=r"view\(tapegrad.int32\).*not supported"):
        tg.ones(2).view(tg.int32)
    assert tg.ones(2).view(2, 1).shape == (2, 1)

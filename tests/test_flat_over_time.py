"""Flat over time: a step costs the same at step 5,000 as at step 1.  The work is
counted, never timed: the lines of tapegrad's Python run per block of steps (a scan over
live tapes or entries would grow them), and the tapes alive at the end."""
import gc
import sys

import pytest

import tapegrad as tg
from bench import soak
from tapegrad.tape import tape as tape_module

PACKAGE = tg.__file__.rsplit("/", 1)[0]
STEPS, BLOCK = 5000, 400


class _LineCounter:
    def __init__(self):
        self.n = 0

    def __call__(self, frame, event, arg):
        if not frame.f_code.co_filename.startswith(PACKAGE):
            return None
        return self._local

    def _local(self, frame, event, arg):
        if event == "line":
            self.n += 1
        return self._local


def _counted(step, k):
    counter = _LineCounter()
    sys.settrace(counter)
    try:
        for i in range(k):
            step(i)
    finally:
        sys.settrace(None)
    return counter.n


def _scalar_forward_only():
    """A scalar loop without backward whose last result stays alive."""
    x = tg.tensor(0.5, requires_grad=True)
    kept = [None]

    def step(i):
        y = x
        for _ in range(5):
            y = (y * 1.1).sin() + x
        kept[0] = y
    return step


# the soak benchmark's patterns (``python -m bench.soak``), and one without backward
PATTERNS = dict(soak.PATTERNS, scalar_forward_only=_scalar_forward_only)


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_work_per_step_does_not_grow(name, monkeypatch):
    # tapes move on every 8,192 entries here (4,096 by default): the old ones must die
    monkeypatch.setattr(tape_module, "_ROTATE_ENTRIES", 8192)
    before = len(_live_tapes()), len(tape_module._live)
    step = PATTERNS[name]()
    first = _counted(step, BLOCK)
    for i in range(STEPS - 2 * BLOCK):
        step(i)
    last = _counted(step, BLOCK)
    assert last <= 1.1 * first + 200, (first, last)
    gc.collect()
    assert len(_live_tapes()) <= before[0] + 3 and len(tape_module._live) <= before[1] + 6


def _live_tapes():
    return {id(ref()) for ref in tape_module._live.valuerefs() if ref() is not None}


def test_a_forward_only_loop_leaves_no_chain_of_tapes(monkeypatch):
    """Tapes move on every 4,096 entries here: a loop step that straddled the move
    put an external entry on the new tape, which kept the old one alive as long as the
    new one lived, and so on (18 tapes alive after 8,000 steps); none stays now."""
    monkeypatch.setattr(tape_module, "_ROTATE_ENTRIES", 4096)
    gc.collect()
    before = len(_live_tapes())
    step = soak.PATTERNS["assemble"]()
    for i in range(8000):
        step(i)
    gc.collect()
    assert len(_live_tapes()) - before <= 2


def test_an_assembling_loop_frees_its_tapes_without_the_cyclic_collector(monkeypatch):
    """A constant written in place (``s[0] = w[0] * 2``) takes a history on the tape
    that holds it as a source: the tape referred to the tensor and the tensor to the
    tape, so each tape waited for the cyclic collector (80 tapes alive after 40,000
    steps with it off; RSS x1.11 over the soak).  Now the refcount frees them."""
    monkeypatch.setattr(tape_module, "_ROTATE_ENTRIES", 4096)
    gc.collect()
    before = len(_live_tapes())
    step = soak.PATTERNS["assemble"]()
    gc.disable()
    try:
        for i in range(8000):
            step(i)
        alive = len(_live_tapes()) - before
    finally:
        gc.enable()
    assert alive <= 2


def test_a_constant_written_in_place_after_an_op_read_it():
    """The tape keeps a stand-in for the constant: an op that saved it still sees the
    change (PyTorch's error), one that saved nothing still backpropagates."""
    import torch
    results = {}
    for lib in (tg, torch):
        w = lib.tensor([1.0, 2.0], requires_grad=True)
        s = lib.tensor([3.0, 4.0])
        y = (w + s).sum() + (w * s).sum()       # mul saves s, add does not
        s[0] = w[0] * 5
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            (y + s.sum()).backward(retain_graph=True)
        w2 = lib.tensor([1.0, 2.0], requires_grad=True)
        s2 = lib.tensor([3.0, 4.0])
        y2 = (w2 + s2).sum()
        s2[0] = w2[0] * 5
        (y2 * s2.sum()).backward()
        results[lib] = w2.grad.tolist()
    assert results[tg] == results[torch]

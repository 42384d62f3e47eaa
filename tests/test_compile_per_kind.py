"""Compile per kind: each kind's reverse rule compiles on its own, the first time a sweep
meets an entry of that kind (``kernels.indirect``), and gradients are PyTorch's through
every kind whichever rules were compiled before.  And no kernel compiles twice for the
same work: a second signature of a kernel costs a whole compile (a literal argument, a
left-out default, an int16 where another caller passes an int64 all make one)."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from numba import njit
from numba.core.errors import TypingError

import tapegrad as tg
from tapegrad.autograd import engine, sweeps
from tapegrad.kernels import fused, indirect, reverse
from tapegrad.kernels import replay as replay_kernels
from tapegrad.kernels.layout import tiny_tape
from tapegrad.ops.table import CODE
from tapegrad.replay import record, vector_replay

torch = pytest.importorskip("torch")


def _every_kind(lib, x, w, b):
    """A loss whose backward meets every kind (the sweep calls the rules of products,
    broadcasts and reductions through their addresses)."""
    h = lib.tanh(x @ w + b)                                   # matmul, broadcast, ew
    s = lib.softmax(h, dim=1)                                 # softmax
    c = lib.cat([s, h[:, :1]], dim=1)                         # cat, index (a slice)
    g = c[[0, 2, 2]]                                          # gather
    m = lib.where(g > 0.2, g, g * g)                          # where
    return m.sum() + c.amax()                                 # reduce


@pytest.fixture
def compiled(monkeypatch):
    """The compiled kernels, not their twins (which run while a cold cache compiles)."""
    for group in (engine.REVERSE, fused.FUSED, record.REPLAY, vector_replay.VECTOR,
                  sweeps.TANGENT):
        monkeypatch.setattr(group, "ready", True)


def _fresh_rules(monkeypatch, forward=False):
    """A fresh table for the reverse sweep's rules (or the forward's): none compiled."""
    module, name = (replay_kernels, "FORWARD_RULES") if forward else (reverse, "RULES")
    old = getattr(module, name)
    fresh = indirect.Rules(old.kernels, old.example)
    monkeypatch.setattr(module, name, fresh)
    return fresh


def _compiled(rules):
    return {k.py_func.__module__.rsplit(".", 1)[1] + "." + k.py_func.__name__
            for k, address in zip(rules.kernels, rules.table) if address}


def test_a_sweep_compiles_the_rules_of_the_kinds_it_meets_and_no_others(monkeypatch, compiled):
    rules = _fresh_rules(monkeypatch)
    a = tg.tensor(1.5, requires_grad=True)
    (a.sin() * a).backward()                       # 0-d entries: swept in the sweep itself
    assert a.grad.item() == np.cos(1.5) * 1.5 + np.sin(1.5) and not rules.table.any()
    v = np.linspace(-1, 1, 7)
    x = tg.tensor(v, requires_grad=True)
    (x.sin() * x).sum().backward()
    assert _compiled(rules) == {"reduce.reverse"}
    xt = torch.tensor(v, requires_grad=True)
    (xt.sin() * xt).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-15, atol=0)


def test_every_kind_met_for_the_first_time_mid_sweep_gives_pytorchs_gradients(monkeypatch,
                                                                              compiled):
    rules = _fresh_rules(monkeypatch)
    rng = np.random.default_rng(3)
    vals = [rng.standard_normal(s) for s in ((3, 4), (4, 5), (5,))]
    ours = [tg.tensor(v, requires_grad=True) for v in vals]
    theirs = [torch.tensor(v, requires_grad=True) for v in vals]
    _every_kind(tg, *ours).backward()
    _every_kind(torch, *theirs).backward()
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-14)
    assert rules.table.all(), _compiled(rules)      # each stop compiled one rule, then resumed


def test_a_replay_compiles_its_kinds_rules_before_its_compiled_sweep(monkeypatch, compiled):
    """A replay's compiled call runs the sweeps with no stop to return at: every rule of
    the recording's kinds is compiled first (a missing one would leave adjoints unswept)."""
    rules = _fresh_rules(monkeypatch)
    forward_rules = _fresh_rules(monkeypatch, forward=True)
    rng = np.random.default_rng(4)
    vals = [rng.standard_normal(s) for s in ((3, 4), (4, 5), (5,))]
    traced = tg.trace(lambda x, w, b: _every_kind(tg, x, w, b), *vals)
    vals[0] = vals[0] + 0.25
    theirs = [torch.tensor(v, requires_grad=True) for v in vals]
    _every_kind(torch, *theirs).backward()
    for g, t in zip(traced.grad(*vals), theirs):
        np.testing.assert_allclose(g.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-14)
    assert rules.table.all() and forward_rules.table.all(), _compiled(forward_rules)


def test_a_replay_over_large_arrays_compiles_each_kind_where_its_forward_meets_it(
        monkeypatch, compiled):
    """Over large arrays a replay runs in segments from Python: its forward stops at the
    first entry of a kind whose rule is not compiled, compiles it and goes on."""
    forward_rules = _fresh_rules(monkeypatch, forward=True)
    rng = np.random.default_rng(5)
    vals = [rng.standard_normal(s) for s in ((300, 40), (40, 30), (30,))]
    f = lambda lib, x, w, b: (lib.tanh(x @ w + b) * 0.5).sum()      # noqa: E731
    traced = tg.trace(lambda x, w, b: f(tg, x, w, b), *vals)
    assert traced.records[0].vector
    vals[1] = vals[1] * 1.5
    theirs = [torch.tensor(v, requires_grad=True) for v in vals]
    f(torch, *theirs).backward()
    for g, t in zip(traced.grad(*vals), theirs):
        np.testing.assert_allclose(g.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-13)
    assert _compiled(forward_rules) >= {"broadcast.forward", "reduce.forward"}


def test_a_rule_asked_for_other_argument_types_is_refused_not_called():
    """An address is only ever called with the types its kernel was compiled for: a table
    asked to compile a rule for others (a float32 arena) raises instead."""
    rules = indirect.Rules(reverse.RULES.kernels, reverse.RULES.example)
    tape = tiny_tape()
    single = tape[:-1] + (tape[-1].astype(np.float32),)
    with pytest.raises(TypeError, match="internal error.*called with"):
        rules.compile_into(0, np.int64(0), single, tape[-1], tape[-1], tape[1])
    assert not rules.table.any()


def test_a_call_through_an_address_with_other_types_does_not_compile():
    """The call site is checked when it compiles: arguments of other types than the
    table's (float32 blocks for float64 rules) are a typing error, never a call."""
    @njit
    def call(table, x):
        fused._fwd(table, 0, (x, np.int64(0), x, np.int64(0), x, np.int64(0), 0.0,
                              np.int64(1), x))
    with pytest.raises(TypingError, match="its table's types"):
        call(fused.FWD.table, np.zeros(4, np.float32))


def test_a_launch_compiles_the_block_rules_of_its_ops_only(compiled):
    """Large elementwise ops: the fused kernels call each op's block rule through its
    address, compiled when a launch first runs that op (here: from a fresh table)."""
    fwd = indirect.Rules(fused.FWD.kernels, fused.FWD.example)
    v = np.linspace(0.1, 1, 3000)
    out = fused.ew_into(CODE["expm1"], v, None, 0.0, np.empty_like(v))
    np.testing.assert_allclose(out, torch.special.expm1(torch.tensor(v)).numpy(), rtol=1e-15)
    fwd.compile_slots([CODE["expm1"], CODE["mul"]])
    assert sorted(np.nonzero(fwd.table)[0].tolist()) == sorted([CODE["expm1"], CODE["mul"]])


CHILD = textwrap.dedent("""
    import numpy as np
    import tapegrad as tg
    from tapegrad.autograd import engine, sweeps
    from tapegrad.kernels import fused, reverse
    from tapegrad.ops.table import CODE
    from tapegrad.replay import record, vector_replay
    for group in (engine.REVERSE, fused.FUSED, record.REPLAY, vector_replay.VECTOR,
                  sweeps.TANGENT):
        group.ready = True                      # the compiled kernels, not their twins
    x = tg.tensor(np.linspace(0.1, 1, 600), requires_grad=True)
    (x.sin() * x).sum().backward()                           # eager map, fused reverse
    traced = tg.trace(lambda v: (v.sin() * v).sum(), np.linspace(0, 1, 600))
    traced.grad(np.linspace(0, 2, 600))                      # fused forward, replay sweep
    traced = tg.trace(lambda v: (v.sin() * v).sum(), np.linspace(0, 1, 6))
    traced.grad(np.linspace(0, 2, 6))                        # value_and_grad's sweep
    tg.autograd.functional.jacobian(lambda v: v.sin() * v, tg.tensor(np.ones(3)))
    y = tg.tensor(2.0, requires_grad=True)
    z = (y + 1).sum()
    z.backward()
    z.backward()                                 # a released tape: no value is read
    for kernel in (reverse.sweep, fused.map_part, fused.forward_part, fused.reverse_part,
                   fused.FWD.kernels[CODE["sin"]], fused.REV.kernels[CODE["mul"]]):
        index = kernel._cache._cache_file._load_index()   # every signature compiled
        print(kernel.py_func.__name__, len(index))
""")


def test_no_kernel_is_compiled_twice_for_one_work(tmp_path):
    """The sweep from the engine, from a replay, from a Jacobian's rows and over a
    released tape; the fused kernels from the eager forward, a backward and a replay: one
    signature each, in a fresh kernel cache (each compiles in this child: about 20 s)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_", "XDG_"))}
    env.update(NUMBA_CACHE_DIR=str(tmp_path / "cache"), HOME=str(tmp_path),
               TAPEGRAD_BACKGROUND_COMPILE="0",
               PYTHONPATH=os.path.dirname(os.path.dirname(tg.__file__)))
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    counts = dict(line.split() for line in out.stdout.splitlines())
    assert counts == {"sweep": "1", "map_part": "1", "forward_part": "1", "reverse_part": "1",
                      "fwd_sin": "1", "rev_mul": "1"}

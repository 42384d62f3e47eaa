"""The first gradient on a cold kernel cache (``kernels/cold.py``): small tapes are swept
by the sweep's Python twin while a background process compiles it.

The twin must be the compiled sweep bit for bit, and both must be PyTorch's gradients:
every program of the PyTorch oracle runs under each.  The background compile runs in
child interpreters with a fresh cache, as a new user's first script does."""
import functools
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import tapegrad
from tapegrad.autograd import engine
from tapegrad.kernels import cold, reverse
from tapegrad.replay import record

from test_cross_path import BINARY, UNARY
from test_cross_path import test_every_path_gives_one_answer_and_pytorchs as every_path
from test_oracle_torch import PARAMS, program_scenario, run_and_compare

PACKAGE_PARENT = os.path.dirname(os.path.dirname(tapegrad.__file__))


class _Twins(cold.Group):
    """The twins for every small tape, as while a cold cache compiles."""

    def __init__(self, compiled_on_fallback=True, like=None):
        like = like or engine.REVERSE
        super().__init__(like.name, like.kernels, like.warm)
        self.fallbacks = 0
        self.compiled_on_fallback = compiled_on_fallback

    def pick(self, kernel, work, writes):
        return functools.partial(self._twin_or_wait, kernel, writes)

    def wait(self):
        self.fallbacks += 1
        if not self.compiled_on_fallback:
            raise AssertionError("the twin fell back to the compiled sweep")


class _Compiled(cold.Group):
    def __init__(self):
        super().__init__("reverse", engine.REVERSE.kernels, engine.REVERSE.warm)
        self.ready = True


def _grads(case, dt, group, monkeypatch):
    monkeypatch.setattr(engine, "REVERSE", group)
    record, _ = program_scenario(case, dt)(tapegrad)
    return [None if g is None else g.numpy().copy() for g in record["grads"]]


@pytest.mark.usefixtures("torch_float64")
@pytest.mark.parametrize("case, dt", PARAMS)
def test_the_twin_sweeps_as_pytorch_and_as_the_compiled_sweep(case, dt, monkeypatch):
    monkeypatch.setattr(engine, "REVERSE", _Twins(compiled_on_fallback=False))
    run_and_compare(program_scenario(case, dt), tapegrad)         # against PyTorch
    twin = _grads(case, dt, _Twins(compiled_on_fallback=False), monkeypatch)
    compiled = _grads(case, dt, _Compiled(), monkeypatch)
    for a, b in zip(twin, compiled):
        assert (a is None) == (b is None)
        if a is not None:
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes()   # bit for bit


@pytest.mark.usefixtures("torch_float64")
def test_where_the_twin_raises_the_compiled_sweep_runs_on_untouched_adjoints(monkeypatch):
    """d(x ** y)/dy at x < 0 is r log(x): ``math.log`` raises in Python, compiled code
    gives nan, as PyTorch does; the adjoint of x, swept before, is not added twice."""
    twins = _Twins()
    monkeypatch.setattr(engine, "REVERSE", twins)
    results = []
    for m in (torch, tapegrad):
        x = m.tensor(-2.0, requires_grad=True)
        y = m.tensor(3.0, requires_grad=True)
        z = x * 5.0
        (z ** y + x * x).backward()
        results.append((x.grad.item(), y.grad.item()))
    assert twins.fallbacks == 1
    np.testing.assert_allclose(results[1], results[0], rtol=1e-12)
    assert np.isnan(results[1][1])


@pytest.mark.parametrize("op", UNARY + BINARY, ids=lambda op: op.name)
def test_every_path_under_the_twins_gives_one_answer_and_pytorchs(op, monkeypatch):
    """Eager (0-d, small and large arrays) and replayed, at extreme values too: the
    twins of the sweep and of the replay kernels, PyTorch's results and the compiled
    kernels' bit for bit (where a twin raises, the compiled kernel takes over)."""
    monkeypatch.setattr(engine, "REVERSE", _Twins())
    monkeypatch.setattr(record, "REPLAY", _Twins(like=record.REPLAY))
    every_path(op)


def test_an_eager_sum_under_the_twin_is_the_compiled_sum_bit_for_bit(monkeypatch):
    """A script's first sums of large arrays wait for no compile: the summation kernel's
    twin gives its results bit for bit (and PyTorch's to rounding)."""
    v = np.random.default_rng(7).standard_normal((300, 70))

    def sums():
        x = tapegrad.tensor(v)
        return [x.sum().numpy(), x.sum(0).numpy(), x.mean(1).numpy()]
    compiled = sums()
    twins = _Twins(compiled_on_fallback=False)
    picked = []
    monkeypatch.setattr(twins, "pick", lambda kernel, work, writes: picked.append(kernel) or
                        _Twins.pick(twins, kernel, work, writes))
    monkeypatch.setattr(engine, "REVERSE", twins)
    for a, b, t in zip(sums(), compiled, (v.sum(), v.sum(0), v.mean(1))):
        assert a.tobytes() == b.tobytes()
        np.testing.assert_allclose(a, t, rtol=1e-12)
    assert [k.py_func.__name__ for k in picked] == ["sum_into"] * 3


def test_the_twin_copies_back_only_what_it_changed():
    """A kernel's twin writes into copies of the arrays it writes; only the elements it
    changed reach the caller's arrays (another thread may be recording meanwhile)."""
    G = np.zeros(4)
    live = np.array([0, 0, 1, 0], np.uint8)
    OP = np.full(4, reverse.sweep.py_func.__globals__["SOURCE_FIRST"], np.int16)
    cols = [OP] + [np.zeros(4, np.int64)] * 2 + [np.zeros(4)] * 2 + \
        [np.zeros(4, np.int64)] * 3 + [np.zeros(4, np.uint8), np.zeros(4)]
    status = cold._run_twin(reverse.sweep, (2, 3), 3, tuple(cols), G, live, np.zeros(8),
                            np.zeros(4, np.int64), reverse.RULES.twin_table, 1, -1, False, 0,
                            False, 1 << 62)
    assert status == (reverse.DONE, -1) and live.tolist() == [0, 0, 1, 0]


CHILD = textwrap.dedent("""
    import os, sys
    import numpy as np
    import tapegrad as tg
    from tapegrad.autograd import engine, sweeps
    from tapegrad.replay import record, vector_replay
    GROUPS = (engine.REVERSE, engine.FUSED, record.REPLAY, vector_replay.VECTOR, sweeps.TANGENT)

    def first_uses():
        x = tg.tensor(1.3, requires_grad=True)
        (x * x + x.sin()).backward()
        assert x.grad.item() == 2 * 1.3 + np.cos(1.3)
        f = lambda a: (a * a).sum() + a.sin().sum()
        g = tg.trace(f, np.ones(5)).grad(np.full(5, 0.5))
        assert np.array_equal(g.numpy(), 2 * 0.5 + np.cos(np.full(5, 0.5)))
        _, t = tg.autograd.functional.jvp(lambda a: a * a.sin(), tg.tensor([0.5, 2.0]),
                                          tg.tensor([1.0, 1.0]))
        assert np.array_equal(t.numpy(), np.sin([0.5, 2.0]) + np.array([0.5, 2.0]) * np.cos([0.5, 2.0]))

    first_uses()
    print("compiled here:", any(k.signatures for g in GROUPS for k in g.kernels),
          "ready:", any(g.ready for g in GROUPS))

    def long_chain():               # a tape too long for the twin
        x = tg.tensor(0.5, requires_grad=True)
        y = x
        for _ in range(12000):
            y = y * 1.0001
        y.backward()
        return abs(x.grad.item() / 1.0001 ** 12000 - 1) < 1e-12

    if sys.argv[1] == "fork":
        pid = os.fork()
        if pid == 0:                # a forked child compiles for itself
            os._exit(0 if long_chain() else 3)
        assert os.waitpid(pid, 0)[1] == 0
    assert long_chain()             # waits for the background compile of the sweep
    for g in GROUPS:
        g.wait()
    first_uses()                    # now compiled, from the cache the background filled
    v = tg.tensor(np.linspace(0, 1, 300), requires_grad=True)
    (v * v).sum().backward()        # the fused sweep
    assert np.array_equal(v.grad.numpy(), 2 * np.linspace(0, 1, 300))
    g = tg.trace(lambda a: (a * a).sum(), np.ones(300)).grad(np.linspace(0, 1, 300))
    assert np.array_equal(g.numpy(), 2 * np.linspace(0, 1, 300))    # a replay in fused runs
    kernels = [k for g in GROUPS for k in g.kernels]
    print("markers:", all(os.path.exists(g.marker()) for g in GROUPS),
          "misses:", sum(sum(k.stats.cache_misses.values()) for k in kernels),
          "hits:", " ".join(sorted(k.py_func.__name__ for k in kernels if k.stats.cache_hits)))
""")


def _child(tmp_path, mode):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_", "XDG_"))}
    env.update(NUMBA_CACHE_DIR=str(tmp_path / "cache"), HOME=str(tmp_path),
               PYTHONPATH=PACKAGE_PARENT)
    out = subprocess.run([sys.executable, "-c", CHILD, mode], env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.splitlines()


def test_a_cold_first_gradient_waits_for_no_compile_and_the_next_run_is_warm(tmp_path):
    first, last = _child(tmp_path, "fork")
    assert first == "compiled here: False ready: False"     # swept by the twin
    # the large backward waited for the background process; every kernel it compiled
    # loads from the cache, with the argument types of its callers here
    want = ("markers: True misses: 0 hits: consume forward forward_part guards_hold "
            "reverse_part run_below sweep tangent value_and_grad")
    assert last == want
    first, last = _child(tmp_path, "again")                # warm: compiled from the start
    assert first == "compiled here: True ready: True" and last == want


def test_switched_off_the_background_process_never_starts(tmp_path):
    """``TAPEGRAD_BACKGROUND_COMPILE=0`` on a cold cache: no warming process, no lock
    file; the first gradient compiles in the process and is right."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_", "XDG_"))}
    env.update(NUMBA_CACHE_DIR=str(tmp_path / "cache"), HOME=str(tmp_path),
               PYTHONPATH=PACKAGE_PARENT, TAPEGRAD_BACKGROUND_COMPILE="0")
    code = textwrap.dedent("""
        import os
        import tapegrad as tg
        from tapegrad.kernels import FOLDER, cold
        x = tg.tensor(3.0, requires_grad=True)
        (x * x).backward()
        print(cold._WARMER[0], os.path.exists(os.path.join(FOLDER, "warming")), x.grad.item())
    """)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["None", "False", "6.0"]

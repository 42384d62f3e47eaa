"""Compiled tapes (llvmlite): the same values and gradients as the interpreted replay."""
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.ops.table import BINARY, UNARY
from tapegrad.replay import trace
from tapegrad.replay.llvm_tape import CompileError
from replay_checks import assert_replays_eager
from test_higher_order import _away_from_kinks
from test_op_table import STRUCTURAL, _call, _inputs
from test_replay import _random_program, piecewise

RNG = np.random.default_rng(17)


def _both(fn, example, points):
    interpreted = trace(fn, *example, compile_after=None)
    compiled = trace(fn, *example, compile_after=None)
    for p in points:                      # record every branch first, then compile
        compiled.value_and_grad(*p)
    compiled.compile()
    assert all(r.native is not None for r in compiled.records)
    for p in points:
        v1, g1 = interpreted.value_and_grad(*p)
        v2, g2 = compiled.value_and_grad(*p)
        assert v1.item() == v2.item() or (np.isnan(v1.item()) and np.isnan(v2.item()))
        for a, b in zip(g1 if isinstance(g1, tuple) else (g1,), g2 if isinstance(g2, tuple)
                        else (g2,)):
            np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("op", UNARY + BINARY, ids=lambda op: op.name)
def test_every_elementwise_op_compiles_to_the_interpreters_results(op):
    def arrays():
        a = [_inputs(op.domain, (3,))] + ([_inputs(op.domain_y, (3,))] if op.arity == 2 else [])
        return _away_from_kinks(op, a)

    def program(*vs):          # scalar code: elements of the vectors, op by op
        return sum(_call(op, *[v[k] for v in vs]) * (k + 1.0) for k in range(3))
    pts = [tuple(tg.tensor(a) for a in arrays()) for _ in range(3)]
    _both(program, pts[0], pts)


def test_python_numbers_where_comparisons_and_branches_compile():
    def f(x):
        a, b = x[0], x[1]
        y = tg.where(a > b, a * 2.0, 1.0 - b) + 3.0 / (a * a + 1.0)
        return piecewise(y) + (a ** 2.5 if a > 0 else -a)
    pts = [(tg.tensor(RNG.uniform(-2, 2, 2)),) for _ in range(8)]
    _both(f, pts[0], pts)


@pytest.mark.parametrize("seed", range(4))
def test_random_scalar_programs_compile(seed):
    rng = np.random.default_rng(seed)
    f = _random_program(rng)

    def scalar(x, w):           # the same program on 0-d values
        return f(x.reshape(1), w.reshape(1))
    pts = [(tg.tensor(rng.uniform(-1, 1)), tg.tensor(rng.uniform(-1, 1))) for _ in range(3)]
    tr = trace(scalar, *pts[0], compile_after=None)
    try:
        tr.compile()
    except CompileError:       # (the program used a vector op: the interpreter handles it)
        return
    _both(scalar, pts[0], pts)


@pytest.mark.parametrize("name", sorted(STRUCTURAL))
def test_every_structural_op_compiles_to_the_interpreters_results(name):
    shapes, fn = STRUCTURAL[name]

    def program(*xs):
        out = fn(*xs)
        w = tg.tensor(np.linspace(0.5, 1.5, out.numel()).reshape(tuple(out.shape)))
        return (out.sin() * w).sum()
    pts = [tuple(tg.tensor(RNG.uniform(-1, 1, s)) for s in shapes) for _ in range(3)]
    if name in ("max_dim", "min_dim"):       # argmax guards: refused, left interpreted
        tr = trace(program, *pts[0], compile_after=None)
        with pytest.raises(CompileError, match="value guards only"):
            tr.compile()
        assert tr.compile(strict=False) is tr and tr.records[0].native is None
        return
    _both(program, pts[0], pts)


def test_prod_with_zeros_and_ties_of_amax_compile():
    def f(x):
        return x.prod() + x.amax() * 2 + x.reshape(2, 2).prod(1).sum()
    pts = [(tg.tensor(v),) for v in ([1.0, 0.0, 3.0, 2.0], [0.0, 0.0, 2.0, 2.0],
                                      [2.0, 3.0, 4.0, 4.0])]
    _both(f, pts[0], pts)


def _counting(monkeypatch):
    """CompiledTape, counting its builds and the threads they run in."""
    from tapegrad.replay import llvm_tape
    builds = []
    real = llvm_tape.CompiledTape

    def build(r):
        builds.append(threading.current_thread())
        return real(r)

    monkeypatch.setattr(llvm_tape, "CompiledTape", build)
    return builds


def test_automatic_compilation_runs_in_the_background(monkeypatch):
    """The third replay starts the compile in another thread and returns; replays go on
    interpreted, then compiled, with the same gradients bit for bit; compile() waits for
    the thread and compiles nothing twice."""
    builds = _counting(monkeypatch)
    f = lambda x: (x * x).sin() * x.exp()
    tr = trace(f, tg.tensor(0.5), compile_after=3)
    reference = trace(f, tg.tensor(0.5), compile_after=None)
    points = np.linspace(-2.0, 2.0, 400)
    for k, p in enumerate(points):
        got = tr.grad(tg.tensor(p)).item()
        assert got == reference.grad(tg.tensor(p)).item()
        if k < 2:      # (from the third replay on, the thread may finish any time)
            assert tr.records[0].native is None and getattr(tr, "_background", None) is None
        if k == 2:
            assert tr._background is not None
    assert tr.compile() is tr and tr.records[0].native is not None
    assert len(builds) == 1 and builds[0] is not threading.main_thread()
    assert tr.grad(tg.tensor(0.3)).item() == reference.grad(tg.tensor(0.3)).item()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX-only")
def test_a_fork_during_a_background_compile_leaves_both_processes_working():
    f = lambda x: (x * x).sin() * x.exp()
    tr = trace(f, tg.tensor(0.5), compile_after=1)
    tr.grad(tg.tensor(0.5))                       # starts the compile
    pid = os.fork()
    if pid == 0:                                  # the child replays interpreted
        ok = False
        try:
            ok = all(tr.grad(tg.tensor(p)).item() == pytest.approx(
                np.cos(p * p) * 2 * p * np.exp(p) + np.sin(p * p) * np.exp(p), rel=1e-12)
                for p in np.linspace(-1, 1, 50))
            ok = ok and tr.compile().records[0].native is not None    # and compiles
        finally:
            os._exit(0 if ok else 1)
    assert os.waitpid(pid, 0)[1] == 0
    assert tr.compile().records[0].native is not None


def test_a_failed_guard_in_compiled_code_re_records():
    tr = trace(piecewise, tg.tensor(0.5), compile_after=None)
    tr.compile()
    assert tr.grad(tg.tensor(3.0)).item() == np.exp(3.0)
    assert len(tr.records) == 2


def test_a_recording_without_one_scalar_output_is_refused_with_a_clear_error():
    """(It crashed with an IndexError while lowering.)  Unstrict, it stays interpreted."""
    f = lambda x: x.sin() * x                                   # noqa: E731
    with pytest.raises(CompileError, match="one scalar output.*shapes \\[\\(3,\\)\\]"):
        tg.trace(f, tg.tensor([0.1, 0.2, 0.3])).compile()
    tr = tg.trace(f, tg.tensor([0.1, 0.2, 0.3])).compile(strict=False)
    x = np.array([0.5, -1.0, 2.0])
    value, grad = tr.vjp((tg.tensor(x),), tg.ones(3, dtype=tg.float64))
    np.testing.assert_allclose(value.numpy(), np.sin(x) * x, rtol=1e-15)
    np.testing.assert_allclose(grad.numpy(), np.cos(x) * x + np.sin(x), rtol=1e-15)


def _saved_compiled(tmp_path):
    f = lambda x: (x * x).sin().sum() * (x / 3.0).exp().sum() + x.tanh().prod()
    tr = trace(f, np.array([0.3, -0.7, 1.1]), compile_after=None).compile()
    path = tmp_path / "f.tg"
    tr.save(path)
    return tr, path


def test_a_saved_compiled_tape_loads_compiled_in_a_new_process(tmp_path):
    """Its object code comes from the cache (keyed by the IR and the CPU): nothing is
    compiled again, and the gradients are the saving process's, bit for bit."""
    tr, path = _saved_compiled(tmp_path)
    x = np.array([0.25, -1.5, 0.75])
    want = tr.grad(x).numpy()
    code = ("import sys, numpy as np; from tapegrad.replay import serialize;"
            f"t = serialize.load({str(path) + '.npz'!r}).compile(); r = t.records[0];"
            f"g = t.grad(np.array({x.tolist()!r})).numpy();"
            "print(r.native is not None, r.native.cached, g.tobytes().hex())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["True", "True", want.tobytes().hex()]


def test_a_damaged_object_file_is_compiled_again(tmp_path, monkeypatch):
    """The cached object code is checked against the hash it is stored with."""
    from tapegrad.replay import llvm_tape
    monkeypatch.setattr(llvm_tape, "_objects_folder", lambda: str(tmp_path / "tapes"))
    tr, _ = _saved_compiled(tmp_path)
    assert not tr.records[0].native.cached
    [obj] = list((tmp_path / "tapes").iterdir())
    data = bytearray(obj.read_bytes())
    data[len(data) // 2] ^= 0xFF
    obj.write_bytes(bytes(data))
    again, _ = _saved_compiled(tmp_path)
    assert not again.records[0].native.cached          # compiled, not loaded
    x = np.array([0.25, -1.5, 0.75])
    assert again.grad(x).numpy().tobytes() == tr.grad(x).numpy().tobytes()
    third, _ = _saved_compiled(tmp_path)
    assert third.records[0].native.cached               # the good one, stored again


def test_an_unoptimised_recording_compiles_and_replays_eager_bit_for_bit():
    """``trace(..., optimize=False)`` schedules its sources too: the compiled tier lowers
    the rest (it refused the recording: 'entry 0 (leaf) has no compiled lowering')."""
    def f(x, y):
        return ((x * y).sin() * x + (y - x).exp()).sum() + x[0] * y[1]
    rng = np.random.default_rng(4)
    traced = trace(f, tg.tensor(rng.normal(size=3)), tg.tensor(rng.normal(size=3)),
                   optimize=False, compile_after=None).compile()
    assert traced.records[0].native is not None
    assert_replays_eager(traced, f, [[rng.normal(size=3), rng.normal(size=3)] for _ in range(3)])

"""Replay: record once, run compiled at new inputs (tapegrad.trace and the transforms).

Every op of the table replays to the eager values and gradients; random programs too;
guards re-record when a branch changes; batches equal single replays; the tape
optimiser keeps results."""
import numpy as np
import pytest

import tapegrad as tg
from tapegrad.autograd import functional as F
from tapegrad.ops.table import BINARY, UNARY
from tapegrad.replay import GuardFailure, ReplayError, trace
from test_higher_order import _away_from_kinks
from test_op_table import STRUCTURAL, _call, _inputs
from custom_functions import Double

RNG = np.random.default_rng(7)


def _eager(fn, arrays):
    xs = [tg.tensor(a, requires_grad=True) for a in arrays]
    out = fn(*xs)
    out.backward()
    return out.item(), [x.grad.numpy() for x in xs]


def _check(fn, example, points, rtol=1e-13):
    tr = trace(fn, *[tg.tensor(a) for a in example])
    for arrays in points:
        value, grads = _eager(fn, arrays)
        v, g = tr.value_and_grad(*[tg.tensor(a) for a in arrays])
        g = g if isinstance(g, tuple) else (g,)
        np.testing.assert_allclose(v.item(), value, rtol=rtol, atol=1e-15)
        for a, b in zip(g, grads):
            np.testing.assert_allclose(a.numpy(), b, rtol=rtol, atol=1e-14)
    return tr


@pytest.mark.parametrize("op", UNARY + BINARY, ids=lambda op: op.name)
@pytest.mark.parametrize("shape", [(), (4,)], ids=str)
def test_every_elementwise_op_replays(op, shape):
    def arrays():
        a = [_inputs(op.domain, shape)] + ([_inputs(op.domain_y, shape)] if op.arity == 2 else [])
        return _away_from_kinks(op, a)
    _check(lambda *xs: (_call(op, *xs) * 1.5).sum(), arrays(), [arrays() for _ in range(3)],
           rtol=1e-12)


@pytest.mark.parametrize("name", sorted(STRUCTURAL))
def test_every_structural_op_replays(name):
    shapes, fn = STRUCTURAL[name]

    def program(*xs):
        out = fn(*xs)
        return (out * tg.tensor(np.linspace(0.5, 1.5, out.numel()).reshape(tuple(out.shape))))\
            .sum()

    def arrays():
        return [RNG.uniform(-1, 1, s) for s in shapes]
    _check(program, arrays(), [arrays() for _ in range(3)], rtol=1e-12)


def test_python_scalar_operands_and_where_constants_replay():
    def f(x):
        y = tg.where(x > 0.2, x * 3.0, 0.5)
        return (2.0 - y / 4.0 + 1.0 / (x + 2.0)).sum()
    tr = _check(f, [RNG.uniform(-1, 1, 5)], [[RNG.uniform(-1, 1, 5)] for _ in range(4)])
    assert len(tr.records) == 1          # the mask is recomputed: no re-recording


def _random_program(rng, depth=12):
    unary = ["sin", "cos", "tanh", "exp", "sigmoid", "softplus", "square", "neg"]
    steps = [(rng.choice(["u", "b", "c", "r"]), rng.choice(unary), rng.uniform(-1, 1))
             for _ in range(depth)]

    def f(x, w):
        vals = [x, w]
        for kind, name, c in steps:
            a = vals[-1]
            if kind == "u":
                vals.append(getattr(tg, name)(a * 0.5))
            elif kind == "b":
                vals.append(a * vals[-2] + c)
            elif kind == "c":
                vals.append(a / (1.5 + vals[0].abs()))
            else:
                vals.append(a.sum() * vals[0] + a)
        return vals[-1].sum()
    return f


@pytest.mark.parametrize("seed", range(6))
def test_random_programs_replay(seed):
    rng = np.random.default_rng(seed)
    f = _random_program(rng)
    pts = [[rng.uniform(-1, 1, 4), rng.uniform(-1, 1, 4)] for _ in range(4)]
    _check(f, pts[0], pts[1:], rtol=1e-12)


def piecewise(x):
    if x < 0.0:
        return x * x
    if x < 1.0:
        return x.sin()
    return x.exp() - 1.0


def test_piecewise_function_records_each_branch_once():
    tr = trace(piecewise, tg.tensor(-1.0))
    for v in (-2.0, 0.5, 3.0, -0.5, 0.7, 2.0):
        value, grads = _eager(piecewise, [np.float64(v)])
        r, g = tr.value_and_grad(tg.tensor(v))
        assert r.item() == value and g.item() == grads[0]
    assert len(tr.records) == 3
    assert any("failed" in why for why in tr.explain())


def test_loop_with_input_dependent_trip_count():
    def newton_sqrt(a):
        x = a
        while (x * x - a).abs() > 1e-10:
            x = 0.5 * (x + a / x)
        return x
    tr = trace(newton_sqrt, tg.tensor(2.0))
    for v in (2.0, 9.0, 0.3, 100.0):
        r, g = tr.value_and_grad(tg.tensor(v))
        assert r.item() == pytest.approx(np.sqrt(v))
        assert g.item() == pytest.approx(0.5 / np.sqrt(v), rel=1e-6)


def test_abs_written_with_if_never_answers_for_the_wrong_branch():
    def my_abs(x):
        return x if x > 0 else -x
    tr = trace(my_abs, tg.tensor(1.0))
    assert tr.grad(tg.tensor(-3.0)).item() == -1.0
    assert tr.grad(tg.tensor(2.0)).item() == 1.0
    strict = trace(my_abs, tg.tensor(1.0), on_guard_failure="error")
    with pytest.raises(GuardFailure, match="another path"):
        strict.grad(tg.tensor(-3.0))


def test_values_read_into_python_are_guarded():
    def f(x):
        k = int(x.item() * 2)            # the value leaves the tape
        return x * k
    tr = trace(f, tg.tensor(1.2))
    assert tr(tg.tensor(1.2)).item() == pytest.approx(2.4)
    assert tr(tg.tensor(2.6)).item() == pytest.approx(13.0)   # re-recorded, not 2.6 * 2
    assert len(tr.records) == 2


def test_argmax_positions_are_guarded():
    def f(x):
        return x[x.argmax()] * 2 + x.max(0).values
    tr = trace(f, tg.tensor([1.0, 3.0, 2.0]))
    for arr in ([1.0, 3.0, 2.0], [5.0, 1.0, 2.0], [0.0, 1.0, 4.0]):
        value, grads = _eager(f, [np.array(arr)])
        r, g = tr.value_and_grad(tg.tensor(arr))
        assert r.item() == value
        np.testing.assert_array_equal(g.numpy(), grads[0])


def test_detach_stops_the_gradient_but_replays_the_value():
    def f(x):
        return (x * x.detach()).sum()
    _check(f, [np.array([1.0, 2.0])], [[np.array([3.0, -1.0])]])


def test_batch_equals_single_replays_and_re_records_other_branches():
    tr = trace(lambda x: piecewise(x.sum()) * x.prod(), tg.tensor([0.2, 0.3]))
    X = RNG.uniform(-1.5, 1.5, (40, 2))
    values, grads, held = tr.grad_batch(X)
    assert not held.all() and held.any()
    for p in range(40):
        v, g = tr.value_and_grad(tg.tensor(X[p]))
        assert values[p] == v.item()
        np.testing.assert_array_equal(grads[p], g.numpy())


def test_jvp_vjp_hvp_match_the_functional_api():
    def f(x):
        return (x.sin() * x.exp()).sum() * x.prod()
    x = RNG.uniform(-1, 1, 3)
    v = RNG.uniform(-1, 1, 3)
    tr = trace(f, tg.tensor(x))
    for name in ("jvp", "vjp", "hvp"):
        vv = tg.tensor(1.7) if name == "vjp" else tg.tensor(v)
        ours = getattr(tr, name)((tg.tensor(x),), vv)
        theirs = getattr(F, name)(f, tg.tensor(x), vv)
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)


def test_optimiser_merges_folds_and_drops_and_keeps_results():
    c = tg.tensor(2.0)

    def f(x):
        unused = x.exp() * 3   # noqa: F841  (dead code)
        a = x.sin() * c
        b = x.sin() * c        # a common subexpression
        return (a + b + x * tg.ones(3)).sum()   # ones(3): a broadcast constant
    tr = _check(f, [np.array(0.3)], [[np.array(v)] for v in (0.1, -0.7)])
    stats = tr.records[0].stats
    assert stats["merged"] >= 2 and stats["dead"] >= 2
    plain = trace(f, tg.tensor(0.3), optimize=False)
    assert plain.records[0].schedule.size > tr.records[0].schedule.size
    # (merged entries add their adjoints in another order: equal to rounding)
    assert plain.grad(tg.tensor(0.1)).item() == pytest.approx(tr.grad(tg.tensor(0.1)).item(),
                                                              rel=1e-15)


def test_functional_transforms_cache_per_signature_and_explain():
    calls = []

    def f(x, scale):
        calls.append(1)
        return (x * scale).sin().sum()
    g = tg.grad(f)
    a = g(tg.tensor([1.0, 2.0]), 3.0)
    b = g(tg.tensor([0.5, 0.1]), 3.0)
    assert len(calls) == 1                              # replayed, not re-run
    np.testing.assert_allclose(b.numpy(), 3 * np.cos(3 * np.array([0.5, 0.1])))
    g(tg.tensor([1.0, 2.0, 3.0]), 3.0)
    assert len(calls) == 2 and "new signature" in g.explain()[-1]
    vg = tg.value_and_grad(f, argnums=(0, 1))
    v, (gx, gs) = vg(tg.tensor([1.0, 2.0]), tg.tensor(3.0))
    assert gs.item() == pytest.approx(float(np.sum(np.cos([3.0, 6.0]) * [1.0, 2.0])))
    np.testing.assert_allclose(gx.numpy(), a.numpy())


def test_static_arguments_must_match():
    tr = trace(lambda x, n: (x ** n).sum(), tg.tensor([1.0, 2.0]), 3)
    assert tr.grad(tg.tensor([1.0, 1.0]), 3).numpy().tolist() == [3.0, 3.0]
    with pytest.raises(ReplayError, match="static"):
        tr.grad(tg.tensor([1.0, 1.0]), 2)
    with pytest.raises(ReplayError, match="shapes"):
        tr.grad(tg.tensor([1.0, 1.0, 1.0]), 3)


def test_custom_functions_are_refused_clearly():
    tr = trace(lambda x: Double.apply(x).sum(), tg.tensor([1.0]))
    with pytest.raises(ReplayError, match="custom autograd.Function cannot be replayed"):
        tr.grad(tg.tensor([2.0]))


def test_tracing_leaves_eager_mode_untouched():
    x = tg.tensor([1.0, -1.0], requires_grad=True)
    m = x > 0
    assert m.grad_fn is None and m.is_leaf
    trace(lambda a: (a * (a > 0)).sum(), tg.tensor([1.0]))
    assert (x > 0).is_leaf


def test_save_load_round_trip_in_another_process(tmp_path):
    import subprocess
    import sys
    tr = trace(piecewise, tg.tensor(0.5))
    tr.grad(tg.tensor(-1.0))                    # two recordings
    path = tmp_path / "pw.npz"
    tr.save(path)
    code = ("import tapegrad as tg\n"
            f"tr = tg.load({str(path)!r})\n"
            "print(tr.grad(tg.tensor(0.25)).item(), tr.grad(tg.tensor(-2.0)).item())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert float(out[0]) == np.cos(0.25) and float(out[1]) == -4.0
    loaded = tg.load(path)
    with pytest.raises(GuardFailure, match="loaded tape cannot record"):
        loaded.grad(tg.tensor(3.0))             # a third branch: no function to record


def test_files_of_another_format_version_are_refused(tmp_path):
    import json
    tr = trace(piecewise, tg.tensor(0.5))
    path = tmp_path / "t.npz"
    tr.save(path)
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    header = json.loads(bytes(arrays["__header__"]).decode())
    header["version"] = 99
    arrays["__header__"] = np.frombuffer(json.dumps(header).encode(), np.uint8)
    np.savez(path, **arrays)
    with pytest.raises(ValueError, match="format version 99 is not supported"):
        tg.load(path)


def test_pickling_keeps_the_tapes_and_a_module_level_function():
    import pickle
    tr = trace(piecewise, tg.tensor(0.5))
    again = pickle.loads(pickle.dumps(tr))
    assert again.grad(tg.tensor(0.3)).item() == np.cos(0.3)
    assert again.grad(tg.tensor(2.0)).item() == np.exp(2.0)   # re-records: fn came along
    lam = pickle.loads(pickle.dumps(trace(lambda x: x * 3, tg.tensor(1.0))))
    assert lam.grad(tg.tensor(5.0)).item() == 3.0


def test_jvp_and_hvp_pass_over_comparisons_and_detached_values():
    def f(x):
        y = (x.sin() * x * (x > 0.2)).sum() + (x * x.detach()).sum()
        return y * 2 if y > 1.0 else y - 1
    x, v = RNG.uniform(-1, 1.5, 4), RNG.uniform(-1, 1, 4)
    tr = trace(f, tg.tensor(x))
    for name in ("jvp", "hvp"):
        ours = getattr(tr, name)((tg.tensor(x),), tg.tensor(v))
        theirs = getattr(F, name)(f, tg.tensor(x), tg.tensor(v))
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)


def _masked(x):
    m = (x > 0.5).double() * 3.0                 # a mask turned into floats, no grad
    s = tg.where(x > 1.0, 2.0, -1.0)             # a select of two numbers, no grad
    return (m * x + s * x + (2.0 - (x > 0.2).double()) * x).sum()


@pytest.mark.parametrize("shape", [(), (3,)], ids=str)
def test_values_computed_from_masks_without_grad_are_recomputed_on_replay(shape):
    """Ops whose operands need no grad but come from traced values are recorded, so a
    replay at inputs on the other side of the masks agrees with eager (not frozen)."""
    rng = np.random.default_rng(3)
    tr = trace(_masked, tg.tensor(np.full(shape, 0.1)))
    for _ in range(6):
        x = rng.uniform(-0.5, 2.0, shape)
        e = tg.tensor(x, requires_grad=True)
        want = _masked(e)
        want.backward()
        value, grad = tr.value_and_grad(tg.tensor(x))
        assert value.item() == want.item()
        np.testing.assert_array_equal(grad.numpy(), e.grad.numpy())
    assert len(tr.records) == 1                  # no guard: one recording serves all

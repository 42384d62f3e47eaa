"""Saved replay files: never a crash, never silently wrong (issue 15, items 1-3).

A deterministic mutation fuzzer over valid saved files: a scalar program with two
branches and a recorded gradient (hvp), a vector program with every structural kind
(matmul, softmax, gather, index, reduce, cat, where, comparisons, detach, log_softmax,
prod), and a program over 300 values (the fused vector replay) with an argmax guard.
Each mutation changes one thing: a number in an array (off by one, -1, 0, the entry
count, huge, negative, a flipped bit), an array's dtype or length, a member, a header
field, the header's bytes, a byte of the zip; crafted files also get every number of
each entry of their first recording changed (its inputs, offset and metadata: size,
shape, each kind's extras).  It runs in two ways:

  * damaged: the file as the mutation leaves it.  It must load as the same function
    (the same value and gradient, bit for bit, at the test inputs) or raise
    ``ReplayFileError`` at load;
  * crafted: the same file with its digest recomputed, as someone writing a file by
    hand would.  It must raise ``ReplayFileError``, load as the same function, or load
    as another well-formed one, whose replays agree with each other: a second call, the
    forward alone, ``vjp``, ``jvp`` (J v = grad . v), ``grad_batch`` and the compiled
    tape all give the same answer, and ``hvp`` runs.

Every mutation runs in this process: a crash or a write outside the tape's arrays would
end the test run.  ``test_the_fuzzer_covers_every_outcome`` checks that each outcome is
reached (run with ``-s`` for the figures).
"""
import copy
import functools
import io
import json
import pickle
import zipfile

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.ops.table import CODE, KINDS
from tapegrad.replay import ReplayError, ReplayFileError, Traced, serialize
from tapegrad.replay import validate
from tapegrad.replay.llvm_tape import CompileError

W = np.linspace(-1.0, 1.0, 8).reshape(4, 2)


def scalar_program(x, y):
    z = x * y + x.sin() - (y / 3.0).exp()
    if z > 0.0:
        return z * z + x.clamp(-1.0, 1.0)
    return z.tanh() * 2.0 - y


def vector_program(x):
    h = (x @ tg.tensor(W)).softmax(dim=1)
    c = tg.cat([x[:, 1:3].reshape(-1), x.t()[0], x[[0, 2]].sum(dim=0)])
    w = tg.where(x > 0.5, x, x * x)
    ls = x.log_softmax(dim=0)
    return ((h * h).sum() + c.sum() + w.mean() + x.amax(dim=1).sum()
            + (ls * x.detach()).sum() + x.prod())


def wide_program(x):
    return ((x.sin() * x + 1.0).exp() * 0.01).sum() + x.max(dim=1).values.sum()


def _scalar():
    tr = tg.trace(scalar_program, tg.tensor(0.9), tg.tensor(0.8))
    tr.grad(tg.tensor(-0.5), tg.tensor(0.3))                   # the other branch
    tr.hvp((tg.tensor(0.9), tg.tensor(0.8)), (tg.tensor(1.0), tg.tensor(0.5)))
    return tr, [(0.85, 0.75), (-0.45, 0.35)], (1.0, 0.5)


def _vector():
    x0 = np.linspace(0.1, 1.2, 12).reshape(3, 4)
    tr = tg.trace(vector_program, tg.tensor(x0))
    tr.hvp((tg.tensor(x0),), tg.tensor(np.ones((3, 4))))
    return tr, [(x0 + 0.01,), (x0[::-1] * 0.9,)], (np.linspace(-1, 1, 12).reshape(3, 4),)


def _wide():
    x0 = np.sin(np.arange(300.0)).reshape(2, 150)
    tr = tg.trace(wide_program, tg.tensor(x0))
    return tr, [(x0 * 1.01,)], (np.cos(np.arange(300.0)).reshape(2, 150),)


PROGRAMS = {"scalar": _scalar, "vector": _vector, "wide": _wide}
CLEAN = (ReplayError, CompileError)     # what a replay of a loaded file may raise
_SCALAR_ONLY = "grad can be implicitly created only for scalar outputs"


# -- files ---------------------------------------------------------------------------------
def _write(header, arrays, text=None):
    buf = io.BytesIO()
    text = json.dumps(header).encode() if text is None else text
    np.savez(buf, __header__=np.frombuffer(text, np.uint8), **arrays)
    return buf.getvalue()


def _sealed(header, arrays):
    """The header with its digest recomputed for ``arrays`` (as a hand-written file's):
    unchanged where the digest cannot be computed (the file is refused before)."""
    try:
        return dict(header, digest=serialize.digest(header, arrays))
    except Exception:
        return header


@functools.lru_cache(maxsize=None)
def _program(name):
    """(file bytes, header, arrays, test points, tangent, original results)."""
    tr, points, tangent = PROGRAMS[name]()
    buf = io.BytesIO()
    tr.save(buf)
    data = buf.getvalue()
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files if k != "__header__"}
        header = json.loads(bytes(z["__header__"]).decode())
    original = _results(tg.load(io.BytesIO(data)), points)
    assert all(r[0] == "ok" for r in original)
    _assert_same(original, _results(tr, points))             # the traced function's
    for p, r in zip(points, original):                       # eager tapegrad's
        args = [tg.tensor(np.asarray(a, np.float64), requires_grad=True) for a in p]
        value = tr.fn(*args)
        value.backward()
        _close(value.detach().numpy(), r[1])
        for a, g in zip(args, r[2]):
            _close(a.grad.numpy(), g)
    return data, header, arrays, points, tangent, original


def _args(point):
    return [tg.tensor(np.asarray(a, np.float64)) for a in point]


def _results(traced, points):
    """Per point: ("ok", value, grads) or ("raised", the clean error's type)."""
    out = []
    for p in points:
        try:
            v, g = traced.value_and_grad(*_args(p))
        except CLEAN as e:
            out.append(("raised", type(e).__name__))
            continue
        except RuntimeError as e:
            if _SCALAR_ONLY not in str(e):
                raise
            out.append(("raised", "not scalar"))
            continue
        gs = g if isinstance(g, tuple) else (g,)
        out.append(("ok", v.numpy().copy(), [x.numpy().copy() for x in gs]))
    return out


def _same(a, b):
    if a[0] != b[0] or a[0] == "raised":
        return a == b
    return np.array_equal(a[1], b[1], equal_nan=True) and len(a[2]) == len(b[2]) and all(
        x.shape == y.shape and np.array_equal(x, y, equal_nan=True) for x, y in zip(a[2], b[2]))


def _assert_same(a, b):
    assert len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b)), (a, b)


# -- mutations -----------------------------------------------------------------------------
_INT_ARRAYS = ("OP", "A", "B", "OFF", "META", "IAUX", "FLAGS", "schedule")


def _int_values(rng, v, arrays, prefix, header):
    n, nv, ni = len(arrays[prefix + "OP"]), len(arrays[prefix + "V"]), len(arrays[prefix + "IAUX"])
    codes = [int(c) for c in header["ops"]]
    return [v + 1, v - 1, -1, -2, 0, n, n - 1, nv, nv - 1, ni, 2 ** 31, 2 ** 62, -2 ** 62,
            -v - 1, int(rng.integers(-3, 2 * max(nv, n) + 3)), v ^ (1 << int(rng.integers(0, 62))),
            int(rng.choice(codes)), 32767, -32768, 255, 2, 4]


def _fit(value, dtype):
    """``value`` as the array's dtype would hold it (wrapped)."""
    return np.array(value).astype(np.int64).astype(dtype, casting="unsafe")


def entry_mutations(arrays, prefix, seed):
    """Each entry's own numbers, each changed three times (one more, -1 and another
    value): its A, B, OFF and META, and every value of its metadata (size, ndim, shape,
    extras)."""
    rng = np.random.default_rng(seed)
    META, IAUX = arrays[prefix + "META"], arrays[prefix + "IAUX"]
    starts = sorted(set(META[META >= 0].tolist())) + [len(IAUX)]
    places = [(prefix + col, i) for i in range(len(META)) for col in ("A", "B", "OFF", "META")]
    places += [(prefix + "IAUX", k) for m, end in zip(starts, starts[1:]) for k in range(m, end)]
    out = []
    for key, k in places:
        a = arrays[key]
        v = int(a[k])
        other = [v - 1, 0, 2 ** 40, -2 ** 40, 2 * v + 3][rng.integers(5)]
        for new_v in sorted({v + 1, -1, other} - {v}):
            new = a.copy()
            new[k] = new_v
            out.append((f"{key}[{k}] {v} -> {new_v}", None, {key: new}, None, None))
    return out


def mutations(header, arrays, seed, per_array=5):
    """[(label, header, arrays, header text or None, raw file mutator or None)]."""
    rng = np.random.default_rng(seed)
    out = []

    def arr(label, key, new):
        out.append((label, header, dict(arrays, **{key: new}), None, None))

    def head(label, fn):
        h = copy.deepcopy(header)
        fn(h)
        out.append((label, h, arrays, None, None))

    prefixes = sorted({k.split("_")[0] + "_" for k in arrays})
    for prefix in prefixes:
        for name in _INT_ARRAYS:
            key = prefix + name
            a = arrays[key]
            if a.size == 0:
                continue
            for _ in range(per_array):
                k = int(rng.integers(a.size))
                choices = _int_values(rng, int(a[k]), arrays, prefix, header)
                new = a.copy()
                new[k] = _fit(choices[int(rng.integers(len(choices)))], a.dtype)
                if new[k] != a[k]:
                    arr(f"{key}[{k}] {a[k]} -> {new[k]}", key, new)
        for name in ("C", "C2", "V"):
            key = prefix + name
            a = arrays[key]
            k = int(rng.integers(a.size))
            for value in (a[k] + 1.0, np.nan):
                new = a.copy()
                new[k] = value
                arr(f"{key}[{k}] -> {value}", key, new)
        for name in rng.choice(_INT_ARRAYS + ("V", "C"), 3, replace=False):
            key = prefix + str(name)
            a = arrays[key]
            arr(f"{key} one shorter", key, a[:-1])
            arr(f"{key} one longer", key, np.append(a, a[:1]))
            arr(f"{key} empty", key, a[:0])
            arr(f"{key} as float32", key, a.astype(np.float32))
            arr(f"{key} as int32", key, a.astype(np.int32))
            if a.size % 2 == 0:
                arr(f"{key} 2-D", key, a.reshape(2, -1))
        key = prefix + "IAUX"
        arr(f"{key} as objects", key, arrays[key].astype(object))
        arr(f"{key} as strings", key, arrays[key].astype(str))
    drop = dict(arrays)
    del drop[prefixes[0] + "A"]
    out.append(("a column missing", header, drop, None, None))
    out.append(("an extra member", header, dict(arrays, evil=np.zeros(3)), None, None))
    out.append(("an extra recording's member", header, dict(arrays, r9_OP=arrays["r0_OP"]),
                None, None))
    for label, fn in _header_mutations(header):
        head(label, fn)
    for label, text in (("header truncated", json.dumps(header).encode()[:-7]),
                        ("header not UTF-8", b"\xff\xfe" + json.dumps(header).encode()),
                        ("header a JSON list", b"[1, 2, 3]"),
                        ("header nested 100000 deep", b"[" * 100000 + b"]" * 100000),
                        ("header of 2 MB", json.dumps(dict(header, pad="x" * (2 << 20))).encode())):
        out.append((label, header, arrays, text, None))
    for k in range(12):
        pos = int(rng.integers(1 << 30))
        out.append((f"zip byte {pos} flipped", header, arrays, None,
                    lambda b, pos=pos: b[:pos % len(b)] + bytes([b[pos % len(b)] ^ 0x5A])
                    + b[pos % len(b) + 1:]))
    for cut in (0.3, 0.9, 0.999):
        out.append((f"zip cut at {cut}", header, arrays, None,
                    lambda b, cut=cut: b[:int(len(b) * cut)]))
    return out


def _header_mutations(header):
    """[(label, an edit of a copy of the header)]."""
    muts = []
    for group in ("records", "second"):
        for k, meta in enumerate(header[group]):
            at = f"{group}[{k}]"
            for field in ("ins", "outs", "grads"):
                if meta[field]:
                    for delta in (1, -1):
                        muts.append((f"{at}.{field}[0] {delta:+}",
                                     lambda m, g=group, k=k, f=field, d=delta:
                                     m[g][k][f].__setitem__(0, m[g][k][f][0] + d)))
                    muts.append((f"{at}.{field}[0] huge", lambda m, g=group, k=k, f=field:
                                 m[g][k][f].__setitem__(0, 10 ** 12)))
                    muts.append((f"{at}.{field} as a string", lambda m, g=group, k=k, f=field:
                                 m[g][k].__setitem__(f, "0")))
            muts.append((f"{at}.out_shapes with a dim", lambda m, g=group, k=k:
                         m[g][k]["out_shapes"][0].append(1)))
            muts.append((f"{at}.out_tuple flipped", lambda m, g=group, k=k:
                         m[g][k].__setitem__("out_tuple", not m[g][k]["out_tuple"])))
            muts.append((f"{at}.grads dropped", lambda m, g=group, k=k:
                         m[g][k].__setitem__("grads", None)))
            muts.append((f"{at}.stats a string", lambda m, g=group, k=k:
                         m[g][k].__setitem__("stats", "x")))
            muts.append((f"{at} without guards", lambda m, g=group, k=k: m[g][k].pop("guards")))
            for j, guard in enumerate(meta["guards"]):
                gat = f"{at}.guards[{j}]"
                muts.append((f"{gat} kind +1", lambda m, g=group, k=k, j=j:
                             m[g][k]["guards"][j].__setitem__(0, m[g][k]["guards"][j][0] + 1)))
                muts.append((f"{gat} entry -1", lambda m, g=group, k=k, j=j:
                             m[g][k]["guards"][j].__setitem__(1, m[g][k]["guards"][j][1] - 1)))
                muts.append((f"{gat} entry huge", lambda m, g=group, k=k, j=j:
                             m[g][k]["guards"][j].__setitem__(1, 2 ** 40)))
                muts.append((f"{gat} one more datum", lambda m, g=group, k=k, j=j:
                             m[g][k]["guards"][j][2].append(1.0)))
                for d in range(len(guard[2])):
                    for value in (guard[2][d] + 1, float("nan"), 1e300, -1):
                        muts.append((f"{gat} datum {d} -> {value}",
                                     lambda m, g=group, k=k, j=j, d=d, v=value:
                                     m[g][k]["guards"][j][2].__setitem__(d, v)))
                muts.append((f"{gat} loc not a place", lambda m, g=group, k=k, j=j:
                             m[g][k]["guards"][j].__setitem__(3, [1, 2])))
    muts += [
        ("shapes: a dim +1", lambda m: m["shapes"][0].append(1) if not m["shapes"][0]
         else m["shapes"][0].__setitem__(0, m["shapes"][0][0] + 1)),
        ("shapes: one more argument", lambda m: m["shapes"].append([])),
        ("shapes: negative", lambda m: m["shapes"].__setitem__(0, [-1])),
        ("version 2", lambda m: m.__setitem__("version", 2)),
        ("version '3'", lambda m: m.__setitem__("version", "3")),
        ("format", lambda m: m.__setitem__("format", "other")),
        ("argnums 7", lambda m: m.__setitem__("argnums", 7)),
        ("argnums true", lambda m: m.__setitem__("argnums", True)),
        ("argnums [-1]", lambda m: m.__setitem__("argnums", [-1])),
        ("static at 9", lambda m: m.__setitem__("static", [[9, "1"]])),
        ("static code", lambda m: m.__setitem__("static", [[1, "__import__('os')"]])),
        ("static nested", lambda m: m.__setitem__("static", [[1, "(" * 5000 + ")" * 5000]])),
        ("log not strings", lambda m: m.__setitem__("log", [1])),
        ("compile_after 1", lambda m: m.__setitem__("compile_after", 1)),
        ("compile_after -1", lambda m: m.__setitem__("compile_after", -1)),
        ("compile_after 1.5", lambda m: m.__setitem__("compile_after", 1.5)),
        ("ops: a code renamed", lambda m: m["ops"].__setitem__(next(iter(m["ops"])), "mul")),
        ("ops: a code dropped", lambda m: m["ops"].pop(next(iter(m["ops"])))),
        ("ops: a code huge", lambda m: m["ops"].__setitem__("99999999999999", "add")),
        ("ops: a code negative", lambda m: m["ops"].__setitem__("-1", "add")),
        ("ops: an unknown op", lambda m: m["ops"].__setitem__(next(iter(m["ops"])), "evil")),
        ("records: none", lambda m: m.__setitem__("records", [])),
        ("records: one dropped", lambda m: m["records"].pop()),
        ("records: one doubled", lambda m: m["records"].append(m["records"][0])),
        ("second: dropped", lambda m: m.__setitem__("second", [])),
        ("digest: a digit changed", lambda m: m.__setitem__(
            "digest", ("1" if m["digest"][0] == "0" else "0") + m["digest"][1:])),
        ("digest: missing", lambda m: m.pop("digest")),
        ("an extra field", lambda m: m.__setitem__("extra", 1)),
    ]
    for dt in ("|O", "<U4", "<M8[ns]", ">f8", "<c16", "|b1", "float64", "<f4", "<i8"):
        muts.append((f"dtypes: {dt}", lambda m, dt=dt: m["dtypes"].__setitem__(0, dt)))
    return muts


# -- checking one mutated file ---------------------------------------------------------------
def _consistent(loaded, points, tangent, got):
    """A loaded file that is not the original: its replays must agree with each other."""
    _assert_same(_results(loaded, points), got)               # a second call: no stale state
    batch = [p for p, r in zip(points, got) if r[0] == "ok"]
    for p, r in zip(points, got):
        if r[0] != "ok":
            continue
        value, grads = r[1], r[2]
        args = _args(p)
        assert np.array_equal(loaded(*args).numpy(), value, equal_nan=True)
        _, vj = loaded.vjp(tuple(args), tg.tensor(1.0))
        vj = vj if isinstance(vj, tuple) else (vj,)
        for a, b in zip(vj, grads):
            np.testing.assert_allclose(a.numpy(), b, rtol=1e-12, atol=0)
        _, jv = loaded.jvp(tuple(args), tuple(tg.tensor(np.asarray(t, float)) for t in tangent))
        want = sum(float(np.sum(g * np.asarray(t))) for g, t in zip(grads, tangent))
        scale = sum(float(np.sum(np.abs(g * np.asarray(t)))) for g, t in zip(grads, tangent))
        if all(g.dtype.kind == "f" for g in grads) and np.isfinite([want, scale]).all() and \
                np.isfinite(jv.numpy()).all():         # (gradients come in the argument dtypes)
            eps = max(np.finfo(g.dtype).eps for g in grads)
            np.testing.assert_allclose(float(jv), want, rtol=1e5 * eps, atol=1e5 * eps * scale)
        if loaded.second:
            try:
                loaded.hvp(tuple(args), tuple(tg.tensor(np.asarray(t, float)) for t in tangent))
            except CLEAN:
                pass
    if batch and len(points[0]) == 1 and not loaded.records[-1].out_tuple and \
            loaded.records[-1].size(loaded.records[-1].outs[0]) == 1:
        X = np.stack([np.asarray(p[0], float) for p in batch])
        values, grads, ok = loaded.grad_batch(X)
        for k, r in enumerate(r for r in got if r[0] == "ok"):
            if ok[k]:
                _close(values[k], r[1])
                _close(grads[k].astype(r[2][0].dtype), r[2][0])
    try:
        loaded.compile()
    except CompileError:
        return
    for a, b in zip(_results(loaded, points), got):           # the compiled tape
        assert a[0] == b[0]
        if a[0] == "raised":
            assert a == b
        else:
            _close(a[1], b[1])
            for x, y in zip(a[2], b[2]):
                _close(x, y)


def _close(a, b):
    """Equal but for rounding: the fused kernels of large recordings (libmvec) and the
    per-element ones (a batch, the compiled tape) differ in the last bit."""
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-300, equal_nan=True)


def _outcome(name, mutation, crafted):
    """'error', 'same' or 'other' (crafted files only); fails on anything else."""
    _, header, arrays, points, tangent, original = _program(name)
    label, h, a, text, raw = mutation
    if crafted:
        if text is not None or raw is not None:
            return None
        h = _sealed(h, a)
    data = _write(h, a, text)
    if raw is not None:
        data = raw(data)
    try:
        loaded = tg.load(io.BytesIO(data))
    except ReplayFileError:
        return "error"
    got = _results(loaded, points)
    if all(_same(x, y) for x, y in zip(got, original)):
        return "same"
    assert crafted, f"{label}: a damaged file loaded as another function: {got} != {original}"
    _consistent(loaded, points, tangent, got)
    return "other"


SEEDS = {"scalar": 1, "vector": 2, "wide": 3}


@functools.lru_cache(maxsize=None)
def _figures(name, crafted):
    _, header, arrays, *_ = _program(name)
    counts = {"error": 0, "same": 0, "other": 0}
    muts = mutations(header, arrays, SEEDS[name], per_array=3 if name == "wide" else 5)
    if crafted:             # (a damaged file's digest refuses these: they need a matching one)
        muts += [(label, header, dict(arrays, **new), None, None) for label, _, new, _, _ in
                 entry_mutations(arrays, "r0_", SEEDS[name])]
    for m in muts:
        try:
            outcome = _outcome(name, m, crafted)
        except Exception as e:         # (named: which program, which way, which mutation)
            raise AssertionError(f"{name}, {'crafted' if crafted else 'damaged'}: {m[0]}: "
                                 f"{type(e).__name__}: {e}") from e
        if outcome:
            counts[outcome] += 1
    return counts


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_damaged_file_loads_as_itself_or_is_refused(name):
    counts = _figures(name, False)
    print(f"{name} damaged: {counts}")
    assert counts["other"] == 0 and counts["error"] > 100


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_crafted_file_is_refused_or_replays_within_its_arrays(name):
    counts = _figures(name, True)
    print(f"{name} crafted: {counts}")
    assert counts["error"] > 50


def test_the_fuzzer_covers_every_outcome():
    """Crafted files reach each outcome: refused, the same function (a recomputed value, an
    unread number), another well-formed one (a changed constant, a guard's datum)."""
    total = {"error": 0, "same": 0, "other": 0}
    for name in PROGRAMS:
        for crafted in (False, True):
            for k, v in _figures(name, crafted).items():
                total[k] += v
    print(f"all: {total}")
    assert sum(total.values()) >= 600 and min(total.values()) >= 20


# -- named cases -------------------------------------------------------------------------------
def _crafted(name, edit):
    _, header, arrays, *_ = _program(name)
    header, arrays = copy.deepcopy(header), {k: a.copy() for k, a in arrays.items()}
    edit(header, arrays)
    return io.BytesIO(_write(_sealed(header, arrays), arrays))


def test_an_offset_pointing_outside_the_arena_is_refused():
    """The issue's write primitive: an OFF entry set to the distance to another array."""
    other = np.zeros(1000)

    def edit(header, arrays):
        V = arrays["r0_V"]
        arrays["r0_OFF"][-1] = (other.ctypes.data - V.ctypes.data) // 8

    with pytest.raises(ReplayFileError, match="outside the arena"):
        tg.load(_crafted("scalar", edit))
    assert not other.any()


def test_an_index_outside_its_input_is_refused():
    def edit(header, arrays):
        op = arrays["r0_OP"]
        i = int(np.flatnonzero(op == int(next(c for c, n in header["ops"].items()
                                               if n == "index")))[0])
        e = int(arrays["r0_META"][i]) + 2 + int(arrays["r0_IAUX"][arrays["r0_META"][i] + 1])
        arrays["r0_IAUX"][e] = 12
    with pytest.raises(ReplayFileError, match="index outside its input"):
        tg.load(_crafted("vector", edit))


def test_a_file_with_an_edited_number_is_refused_as_damaged():
    _, header, arrays, *_ = _program("scalar")
    arrays = dict(arrays, r0_C=arrays["r0_C"] + 1.0)           # another, valid, function
    with pytest.raises(ReplayFileError, match="damaged.*digest"):
        tg.load(io.BytesIO(_write(header, arrays)))


def _check(entries, IAUX, nv):
    """``check_record`` of hand-written entries ``(op, A, B, OFF, META)``; entry 0 is
    the scalar input, the last the scalar output."""
    ops, A, B, OFF, META = zip(*entries)
    n = len(entries)
    cols = dict(OP=np.array([CODE[op] for op in ops], np.int16), A=np.array(A), B=np.array(B),
                C=np.zeros(n), C2=np.zeros(n), OFF=np.array(OFF), META=np.array(META),
                FLAGS=np.zeros(n, np.uint8))
    meta = {"ins": [0], "outs": [len(entries) - 1], "out_shapes": [[]], "out_tuple": False,
            "grads": None, "stats": None, "guards": []}
    validate.check_record("a recording", cols, np.array(IAUX, np.int64), np.zeros(nv),
                          np.arange(1, len(entries), dtype=np.int64), meta, [[]], False)


def test_a_hand_written_record_passes():
    _check([("leaf", -1, -1, 0, -1), ("const", -1, -1, 1, 0), ("sum", 1, -1, 3, 3),
            ("add", 0, 2, 4, -1)], [2, 1, 2, 1, 0, 0], 5)


@pytest.mark.parametrize("case", ["empty shape", "empty product", "empty rows"])
def test_empty_buffers_with_huge_dims_are_refused(case):
    """Nothing to compute, yet the kernels' outer loops would run for hours."""
    big = 1 << 40
    if case == "empty shape":           # a sum over a (2**40, 0) constant
        entries = [("const", -1, -1, 1, 0), ("sum", 1, -1, 1, 4)]
        IAUX = [0, 2, big, 0, 1, 0, 0, 0]
    elif case == "empty product":       # product dims (nb, M, K, N) = (1, 2**40, 0, 0)
        entries = [("const", -1, -1, 1, 0), ("const", -1, -1, 1, 3), ("mm", 1, 2, 1, 6)]
        IAUX = [0, 1, 0, 0, 1, 0, 0, 1, 0, 1, big, 0, 0, 0]
    else:                               # softmax rows (2**40, 0, 1)
        entries = [("const", -1, -1, 1, 0), ("softmax", 1, -1, 1, 3)]
        IAUX = [0, 1, 0, 0, 1, 0, big, 0, 1]
    entries = [("leaf", -1, -1, 0, -1)] + entries + [("add", 0, -1, 2, -1)]
    with pytest.raises(ReplayFileError, match="empty"):
        _check(entries, IAUX, 3)
    _check(entries, [1 << 20 if v == big else v for v in IAUX], 3)     # 2**20: a short loop


def test_every_kind_has_a_load_check():
    """A kind added to the op table needs its extras checked before files may use it."""
    assert set(KINDS) - set(validate._EXTRAS) == {"host"}


# -- item 3: dtypes and sizes ----------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["|O", "<U4", "<M8[ns]", "|b1", "<c16", "|V8"])
def test_an_argument_dtype_other_than_float_or_int_is_refused(dtype):
    f = _crafted("scalar", lambda header, arrays: header["dtypes"].__setitem__(0, dtype))
    with pytest.raises(ReplayFileError, match="argument dtypes.*float and int"):
        tg.load(f)


_MARKS = []


def _mark(what):
    _MARKS.append(what)
    return what


class _Payload:
    """Unpickling this runs ``_mark``: it stands for any code a pickle may carry."""

    def __reduce__(self):
        return (_mark, ("the payload ran",))


def test_an_object_array_in_a_file_is_refused_unread():
    _, header, arrays, *_ = _program("scalar")
    payload = np.array([_Payload(), 1], dtype=object)
    for key, value in (("r0_IAUX", payload), ("evil", payload)):
        with pytest.raises(ReplayFileError):
            tg.load(io.BytesIO(_write(header, dict(arrays, **{key: value}))))
    assert _MARKS == []


def test_a_huge_header_is_refused_and_never_written():
    _, header, arrays, *_ = _program("scalar")
    big = _sealed(dict(header, log=header["log"] + ["x" * (20 << 20)]), arrays)
    with pytest.raises(ReplayFileError, match="__header__.*at most"):
        tg.load(io.BytesIO(_write(big, arrays)))
    tr = tg.load(io.BytesIO(_program("scalar")[0]))
    tr.log.append("x" * (2 << 20))
    with pytest.raises(ReplayFileError, match="header would take"):
        tr.save(io.BytesIO())


def test_a_compressed_member_is_refused():
    data = _program("scalar")[0]
    buf = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, \
            zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info))
    with pytest.raises(ReplayFileError, match="compressed"):
        tg.load(io.BytesIO(buf.getvalue()))


# -- item 2: pickles ---------------------------------------------------------------------------
def _module_function(x):
    return (x * x).sum()


def _pickled_with(state):
    """A pickle of a Traced whose state is ``state`` (what a crafted pickle holds)."""
    tr = tg.trace(_module_function, tg.tensor([1.0, 2.0]))
    tr.__getstate__ = lambda: state
    return pickle.dumps(tr)


class _OnlyTraced(pickle.Unpickler):
    """An allow-list unpickler: the Traced class and nothing else."""

    def find_class(self, module, name):
        if (module, name) == ("tapegrad.replay.traced", "Traced"):
            return Traced
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed")


def test_a_pickle_whose_nested_payload_would_run_code_does_not_run_it():
    tr = tg.trace(_module_function, tg.tensor([1.0, 2.0]))
    state = dict(tr.__getstate__(), fn=pickle.dumps(_Payload()))    # the old nested bytes
    blob = _pickled_with(state)
    with pytest.raises(ReplayFileError, match="never unpickled"):
        pickle.loads(blob)
    with pytest.raises(ReplayFileError, match="never unpickled"):
        _OnlyTraced(io.BytesIO(blob)).load()
    with pytest.raises(ReplayFileError, match="never unpickled"):
        Traced.__new__(Traced).__setstate__(state)
    assert _MARKS == []


def test_a_pickle_carries_its_function_by_reference_for_the_unpickler_to_allow():
    tr = tg.trace(_module_function, tg.tensor([1.0, 2.0]))
    assert tr.__getstate__()["fn"] is _module_function
    blob = pickle.dumps(tr)
    with pytest.raises(pickle.UnpicklingError, match="_module_function is not allowed"):
        _OnlyTraced(io.BytesIO(blob)).load()
    again = pickle.loads(blob)
    assert again.fn is _module_function
    assert again.grad(tg.tensor([3.0, 4.0])).tolist() == [6.0, 8.0]
    lam = tg.trace(lambda x: (x * 3).sum(), tg.tensor([1.0]))
    assert lam.__getstate__()["fn"] is None              # a lambda: the tapes alone travel
    assert pickle.loads(pickle.dumps(lam)).grad(tg.tensor([2.0])).tolist() == [3.0]


def test_a_pickled_traced_with_damaged_tapes_is_refused():
    tr = tg.trace(_module_function, tg.tensor([1.0, 2.0]))
    state = tr.__getstate__()
    tapes = bytearray(state["tapes"])
    tapes[len(tapes) // 2] ^= 0xFF
    with pytest.raises(ReplayFileError):
        pickle.loads(_pickled_with(dict(state, tapes=bytes(tapes))))

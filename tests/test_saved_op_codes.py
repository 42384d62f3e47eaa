"""Saved replay files name their op codes: a file written by a tapegrad whose table
assigned other codes loads as the same function, a file naming an op this version lacks
or written in the old bare-code format is refused with an error naming the problem.

The other version is simulated (the test rewrites a saved file as that version would
have written it: each code moved to another, the header's names moved with it), and real:
a copy of the package whose table numbers its ops otherwise loads a file saved here.
"""
import json
import re

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.ops.table import BANDS, BY_CODE, CODE, OPS
from test_generated_kernels import package_copy, run_copy


def f(x):
    return (tg.exp(x) * 2).sum() + (x.sin() * x).sum()


def _saved(tmp_path):
    tr = tg.trace(f, tg.tensor([0.3, 0.7]))
    path = tmp_path / "f.npz"
    tr.save(path)
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    return path, arrays, json.loads(bytes(arrays["__header__"]).decode())


def _write(path, arrays, header):
    arrays = dict(arrays, __header__=np.frombuffer(json.dumps(header).encode(), np.uint8))
    np.savez(path, **arrays)


def _reference(x):
    x = np.asarray(x, np.float64)
    value = (np.exp(x) * 2).sum() + (np.sin(x) * x).sum()
    return value, 2 * np.exp(x) + np.cos(x) * x + np.sin(x)


def test_the_header_names_every_code_the_arrays_use(tmp_path):
    _, arrays, header = _saved(tmp_path)
    used = {int(c) for k, a in arrays.items() if k.endswith("_OP") for c in a}
    assert {int(c) for c in header["ops"]} == used
    assert all(header["ops"][str(c)] == BY_CODE[c].name for c in used)


def test_a_file_from_a_table_with_other_codes_loads_as_the_same_function(tmp_path):
    path, arrays, header = _saved(tmp_path)
    # the other version: every op shifted to the far end of its kind's band, the
    # elementwise ops also in reverse order (exp and mul swap places with others)
    ew = [op for op in OPS if op.kind == "ew"]
    other = {op.code: BANDS[op.kind][1] - k for k, op in enumerate(reversed(ew))}
    for kind, (lo, hi) in BANDS.items():
        if kind != "ew":
            for k, op in enumerate(op for op in OPS if op.kind == kind):
                other[op.code] = hi - k
    assert len(set(other.values())) == len(other) and other[CODE["exp"]] != CODE["exp"]
    for k in [k for k in arrays if k.endswith("_OP")]:
        arrays[k] = np.array([other[int(c)] for c in arrays[k]], arrays[k].dtype)
    header["ops"] = {str(other[int(c)]): name for c, name in header["ops"].items()}
    _write(path, arrays, header)
    loaded = tg.load(path)
    x = np.array([1.5, -0.25])
    value, grad = loaded.value_and_grad(tg.tensor(x))
    want_v, want_g = _reference(x)
    np.testing.assert_allclose(float(value), want_v, rtol=1e-14)
    np.testing.assert_allclose(grad.numpy(), want_g, rtol=1e-14)


def _renumbered(text):
    """The table's source with exp's and log's codes swapped and sum moved to the last
    code of its band (free in this version)."""
    def code_of(name):
        return re.search(rf'Op\((\d+), "{name}",', text).group(1)
    exp, log, last = code_of("exp"), code_of("log"), BANDS["reduce"][1]
    assert last not in {op.code for op in OPS}
    for name, code in (("exp", log), ("log", exp), ("sum", last)):
        text = re.sub(rf'Op\(\d+, "{name}",', f'Op({code}, "{name}",', text)
    return text


def test_a_file_loads_in_a_tapegrad_whose_table_numbers_its_ops_otherwise(tmp_path):
    """Saved here, loaded by a copy of the package whose table gives exp, log and sum
    other codes: the same value and gradient.  (The copy runs with Numba's JIT off: its
    kernel cache would be cold, 50 s of compiling; its kernels' Python dispatches on the
    same codes.)"""
    tr = tg.trace(lambda v: (tg.exp(v) * 2).sum(), tg.tensor([0.3, 0.7]))
    tr.save(tmp_path / "f.npz")
    package_copy(tmp_path, _renumbered)
    out = run_copy(tmp_path, """
        import numpy as np
        import tapegrad as tg
        from tapegrad.ops.table import CODE
        value, grad = tg.load("f.npz").value_and_grad(tg.tensor([1.5, -0.25]))
        print(CODE["exp"], CODE["log"], CODE["sum"])
        print(repr(float(value)), *map(repr, grad.numpy().tolist()))
    """, NUMBA_DISABLE_JIT="1")
    codes, numbers = out.splitlines()[-2:]
    assert codes.split() == [str(CODE["log"]), str(CODE["exp"]), str(BANDS["reduce"][1])]
    x = np.array([1.5, -0.25])
    np.testing.assert_allclose([float(v) for v in numbers.split()],
                               [(2 * np.exp(x)).sum(), *(2 * np.exp(x))], rtol=1e-15)


def test_a_file_naming_an_op_this_version_lacks_is_refused(tmp_path):
    path, arrays, header = _saved(tmp_path)
    code = next(c for c, name in header["ops"].items() if name == "exp")
    header["ops"][code] = "exp_from_the_future"
    _write(path, arrays, header)
    with pytest.raises(ValueError, match="'exp_from_the_future'.*does not have"):
        tg.load(path)


def test_a_file_using_a_code_its_header_does_not_name_is_refused(tmp_path):
    path, arrays, header = _saved(tmp_path)
    code = next(c for c, name in header["ops"].items() if name == "exp")
    del header["ops"][code]
    _write(path, arrays, header)
    with pytest.raises(ValueError, match="op codes its header does not name"):
        tg.load(path)


def test_an_old_format_file_is_refused_naming_the_problem(tmp_path):
    path, arrays, header = _saved(tmp_path)
    header["version"] = 1
    del header["ops"]
    _write(path, arrays, header)
    with pytest.raises(ValueError, match="version 1 .*bare op codes.*record the function again"):
        tg.load(path)

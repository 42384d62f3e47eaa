"""The generated kernels are written at import from the op table: adding an op is a
table entry (and its helpers), nothing else to run.  They are written to the kernel
cache's folder, never into the package (``tests/test_kernel_cache.py``)."""
import os
import shutil
import subprocess
import sys
import textwrap

import tapegrad.kernels as kernels


def package_copy(tmp_path, edit_table):
    """A copy of the package under ``tmp_path`` (no generated kernels) whose
    ``ops/table.py`` source is ``edit_table(text)``: its folder."""
    pkg = tmp_path / "tapegrad"
    shutil.copytree(os.path.dirname(os.path.dirname(kernels.__file__)), pkg,
                    ignore=shutil.ignore_patterns("__pycache__", "generated*.py"))
    table = pkg / "ops" / "table.py"
    table.write_text(edit_table(table.read_text()))
    return pkg


def run_copy(tmp_path, code, **env):
    """Run ``code`` in a child whose ``tapegrad`` is the copy under ``tmp_path``, with a
    kernel cache there (and no background compile left running after it): its output."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(tmp_path),
               TAPEGRAD_BACKGROUND_COMPILE="0", **env)
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=tmp_path, env=env,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_a_table_entry_is_all_an_op_needs(tmp_path):
    """A copy of the package with one more op in its table: at import the kernels are
    made again, and the op runs eagerly, replayed and in its gradient (3 x^2)."""
    entry = '    Op(255, "cube", E, 1, "CubeBackward0", "x * x * x", "3.0 * g * x * x",\n' \
            '       saves=("self",)),\n    # ---- entries with no inputs'
    pkg = package_copy(tmp_path, lambda text: text.replace(
        "    # ---- entries with no inputs", entry, 1))
    out = run_copy(tmp_path, """
        import numpy as np
        import tapegrad as tg
        x = tg.tensor([0.5, -2.0, 3.0], requires_grad=True)
        tg.cube(x).sum().backward()
        assert np.array_equal(x.grad.numpy(), 3.0 * np.array([0.5, -2.0, 3.0]) ** 2)
        tr = tg.trace(lambda v: tg.cube(v).sum(), tg.tensor([1.0, 2.0]))
        value, grad = tr.value_and_grad(tg.tensor([2.0, -1.0]))
        assert value.item() == 7.0 and grad.numpy().tolist() == [12.0, 3.0]
        import tapegrad.kernels as k
        print(k.FOLDER)
        print("ok")
    """)
    assert out.split()[-1] == "ok"
    folder = out.split()[-2]
    assert folder.startswith(str(tmp_path / "cache"))
    assert not (pkg / "kernels" / "generated.py").exists()
    with open(os.path.join(folder, "generated.py")) as f:
        assert f.readline() == _stamp_of(pkg) and "# cube" in f.read()


def _stamp_of(pkg):
    ops, ker = pkg / "ops", pkg / "kernels"
    return "# made from sources " + kernels._digest(
        [ops / "table.py", ops / "scalar_math.py", ops / "rules.py", ker / "codegen.py",
         ker / "vmath.py"]) + "\n"


def test_they_are_written_to_the_given_folder_first_on_the_path(tmp_path, monkeypatch):
    monkeypatch.setattr(kernels, "__path__", list(kernels.__path__))
    folder = str(tmp_path / "key")
    kernels._ensure_generated(folder)
    assert kernels.__path__[0] == folder
    stamp = kernels.sources_stamp()
    for name in kernels.GENERATED:
        with open(os.path.join(folder, name)) as f, \
                open(os.path.join(kernels.FOLDER, name)) as g:
            assert f.readline() == stamp and f.read() == g.read().split("\n", 1)[1]
    kernels._ensure_generated(folder)               # current: left as it is, not added twice
    assert kernels.__path__.count(folder) == 1

"""The compiled-kernel cache: one folder per version of the kernel sources, wherever the
cache is, and nothing written into the installed package.

Each test runs a copy of the package in a child interpreter with every cache location
set (or cleared) explicitly, so none depends on this machine's environment; each child
compiles the kernels it needs from nothing (a few seconds)."""
import os
import shutil
import stat
import subprocess
import sys
import textwrap

import tapegrad.kernels as kernels

PACKAGE = os.path.dirname(os.path.dirname(kernels.__file__))
# the gradient of sin(x).sum(), divided by cos(x): 1.0 everywhere, by the compiled sweep
# (not by its Python twin, which runs while a cold cache compiles it in the background)
CHILD = textwrap.dedent("""
    import numpy as np
    import tapegrad as tg
    assert tg.__file__.startswith({pkg!r}), tg.__file__
    from tapegrad.autograd import engine
    engine.REVERSE.ready = True
    v = np.array([0.5, 1.0, 2.0, -3.0])
    x = tg.tensor(v, requires_grad=True)
    x.sin().sum().backward()
    print(sorted(set(np.round(x.grad.numpy() / np.cos(v), 12).tolist())))
    import tapegrad.kernels as k
    from tapegrad.kernels.reverse import sweep
    print(sum(sweep.stats.cache_misses.values()))
    print(k.FOLDER)
""")


def _copy(tmp_path):
    pkg = tmp_path / "site" / "tapegrad"
    shutil.copytree(PACKAGE, pkg, ignore=shutil.ignore_patterns("__pycache__", "generated*.py"))
    return pkg


def _run(pkg, tmp_path, **env_vars):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("NUMBA_", "XDG_", "PYTHON"))}
    env.update(HOME=str(tmp_path / "home"), PYTHONPATH=str(pkg.parent),
               PYTHONDONTWRITEBYTECODE="1",     # (Python's own .pyc files, not tapegrad's)
               TMPDIR=str(tmp_path / "tmp"),
               TAPEGRAD_BACKGROUND_COMPILE="0")   # (no process left compiling after it)
    os.makedirs(env["TMPDIR"], exist_ok=True)
    env.update({k: str(v) for k, v in env_vars.items()})
    out = subprocess.run([sys.executable, "-c", CHILD.format(pkg=str(pkg))], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    ratios, misses, folder = out.stdout.strip().splitlines()[-3:]
    _run.misses = int(misses)        # the sweep compiled here (not loaded from the cache)
    return ratios, folder, out.stderr


def _snapshot(folder):
    return {os.path.relpath(os.path.join(d, n), folder): os.stat(os.path.join(d, n)).st_mtime_ns
            for d, dirs, files in os.walk(folder) for n in dirs + files}


def test_a_changed_source_is_recompiled_under_numba_cache_dir(tmp_path):
    """The sweep (reverse.py, unchanged) calls the generated rules: a change to the op
    table must reach it, though Numba keys the sweep's cache on reverse.py alone."""
    pkg, cache = _copy(tmp_path), tmp_path / "numba"
    before = _snapshot(pkg)
    ratios, folder, _ = _run(pkg, tmp_path, NUMBA_CACHE_DIR=cache)
    assert ratios == "[1.0]" and folder.startswith(str(cache / "tapegrad") + os.sep)
    assert _snapshot(pkg) == before                 # nothing written into the package
    table = pkg / "ops" / "table.py"
    text = table.read_text()
    assert text.count('"g * math.cos(x)"') == 1
    table.write_text(text.replace('"g * math.cos(x)"', '"2.0 * g * math.cos(x)"'))
    ratios, folder2, _ = _run(pkg, tmp_path, NUMBA_CACHE_DIR=cache)
    assert ratios == "[2.0]" and folder2 != folder
    ratios, folder3, _ = _run(pkg, tmp_path, NUMBA_CACHE_DIR=cache)     # from the cache
    assert ratios == "[2.0]" and folder3 == folder2


def test_a_reinstalled_read_only_copy_starts_warm(tmp_path):
    """The same sources elsewhere, with new time stamps (a reinstall, a fresh venv from
    the same wheel), read-only, with NUMBA_CACHE_DIR set: the kernels load from the
    cache the first copy filled; nothing is compiled again."""
    cache = tmp_path / "numba"
    first = _copy(tmp_path)
    assert _run(first, tmp_path, NUMBA_CACHE_DIR=cache)[0] == "[1.0]" and _run.misses == 1
    second = tmp_path / "venv2" / "tapegrad"
    shutil.copytree(first, second)                  # new files: new time stamps
    modes = {}
    for d, _, _ in os.walk(second):
        modes[d] = os.stat(d).st_mode
        os.chmod(d, modes[d] & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    try:
        ratios, folder, _ = _run(second, tmp_path, NUMBA_CACHE_DIR=cache)
    finally:
        for d, mode in modes.items():
            os.chmod(d, mode)
    assert ratios == "[1.0]" and _run.misses == 0
    assert folder.startswith(str(cache / "tapegrad") + os.sep)


def test_nothing_is_written_into_the_package(tmp_path):
    """No NUMBA_CACHE_DIR: the user's cache folder holds the generated files and the
    compiled kernels; the package's folder is left as it was."""
    pkg = _copy(tmp_path)
    before = _snapshot(pkg)
    ratios, folder, err = _run(pkg, tmp_path, XDG_CACHE_HOME=tmp_path / "xdg")
    assert ratios == "[1.0]" and _snapshot(pkg) == before
    assert folder.startswith(str(tmp_path / "xdg" / "tapegrad") + os.sep)
    assert {"generated.py", "generated_blocks.py"} <= set(os.listdir(folder))
    compiled = set(os.listdir(os.path.join(folder, "numba-cache", "kernels")))
    assert any(n.startswith("reverse.sweep") for n in compiled)
    assert any(n.startswith("generated.ew_grad") for n in compiled)
    assert "tapegrad:" not in err


def test_a_read_only_install_with_no_writable_cache_still_works(tmp_path):
    """Every cache location unwritable (under a plain file, so even root cannot write
    there) and the package read-only: it imports and differentiates, compiling into a
    temporary folder it removes at exit, and says so in one warning."""
    pkg = _copy(tmp_path)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    modes = {}
    for d, _, _ in os.walk(pkg):
        modes[d] = os.stat(d).st_mode
        os.chmod(d, modes[d] & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    try:
        before = _snapshot(pkg)
        ratios, folder, err = _run(pkg, tmp_path, NUMBA_CACHE_DIR=blocker / "numba",
                                   XDG_CACHE_HOME=blocker / "xdg", HOME=blocker / "home")
        assert ratios == "[1.0]" and _snapshot(pkg) == before
    finally:
        for d, mode in modes.items():
            os.chmod(d, mode)
    warnings = [line for line in err.splitlines() if "tapegrad:" in line]
    assert len(warnings) == 1 and "no writable kernel cache" in warnings[0], err
    assert folder.startswith(str(tmp_path / "tmp") + os.sep) and not os.path.exists(folder)


def test_folders_of_other_keys_go_only_when_unused_for_a_month(tmp_path):
    keep, recent, old = "a" * 20, "b" * 20, "c" * 20
    for name in (keep, recent, old, "not-a-key"):
        (tmp_path / name).mkdir()
    month_ago = os.stat(tmp_path).st_mtime - 31 * 86400
    for name in (keep, old, "not-a-key"):
        os.utime(tmp_path / name, (month_ago, month_ago))
    kernels._prune(str(tmp_path), keep)
    assert sorted(os.listdir(tmp_path)) == sorted([keep, recent, "not-a-key"])

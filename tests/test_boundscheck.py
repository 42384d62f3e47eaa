"""The compiled kernels trust the tape's offsets: run the engine and per-op suites
once more with Numba's bounds checking on, so a bad offset fails as an IndexError here
instead of corrupting memory somewhere else."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(__file__)


def test_suites_pass_with_bounds_checking():
    env = dict(os.environ, NUMBA_BOUNDSCHECK="1", NUMBA_CACHE_DIR=tempfile.mkdtemp(),
               TAPEGRAD_BACKGROUND_COMPILE="0")   # (no process left compiling after it)
    suites = [os.path.join(HERE, f) for f in ("test_op_table.py", "test_engine.py",
                                                "test_oracle_torch.py", "test_indexing_fuzz.py",
                                                "test_inplace.py", "test_function.py",
                                                "test_hooks.py")]
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                           *suites], env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "passed" in proc.stdout

"""The comparison suite's smoke run, and its correctness pre-check.

``python -m bench --quick`` runs here so that the benchmarks never rot: every workload gets a
row for every framework, comparison frameworks that are not installed say "missing", and a
framework whose gradient disagrees stops the run with a nonzero exit.  The figures themselves
are measured with ``python -m bench`` (never asserted here)."""
import json
import os
import subprocess
import sys
from importlib.util import find_spec

import pytest

from bench.frameworks import DESCRIPTIONS
from bench.workloads import WORKLOADS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIBRARY = {"torch": "torch", "torch-mt": "torch", "jax": "jax", "jax-jit": "jax",
           "autograd": "autograd", "micrograd": "micrograd"}
OK = "ok"


def bench(*args, env=None):
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env={**os.environ, **(env or {})})


def missing_allowed(row):
    """Why this row may be "missing" here, or None if it must have run."""
    fw = row["framework"]
    if fw in LIBRARY and find_spec(LIBRARY[fw]) is None:
        return "not installed"
    return None


# both OpenBLAS overrides set here, whatever this machine's environment says: the run
# drops them and records what they were
OPENBLAS_SET = {"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_L2_SIZE": "524288"}


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "quick.json"
    proc = bench("--quick", "--json", str(out), "--plots", str(out.parent / "plots"),
                 env=OPENBLAS_SET)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(out.read_text()), proc


def test_quick_run_has_a_row_for_every_workload_and_framework(quick):
    rows = quick[0]["rows"]
    for name, w in WORKLOADS.items():
        seen = [r["framework"] for r in rows if r["workload"] == name]
        assert set(seen) == set(w.FRAMEWORKS), (name, seen)
    assert {f for w in WORKLOADS.values() for f in w.FRAMEWORKS} == set(DESCRIPTIONS)


def test_quick_rows_ran_or_say_why_not(quick):
    for r in quick[0]["rows"]:
        if r["status"] == "missing":
            assert missing_allowed(r), r
            assert r["message"], r
        else:
            assert r["status"] == OK, r
            assert r["repeats"] >= 1 and r["min_s"] <= r["median_s"] <= r["max_s"], r
            assert r["max_rel_err"] is not None, r


def test_quick_rows_carry_the_method_fields(quick):
    rows = [r for r in quick[0]["rows"] if r["status"] == OK]
    for r in rows:
        if r["ops"]:
            assert r["ns_per_op"] == pytest.approx(r["median_s"] * 1e9 / r["ops"])
        if r["framework"] == "torch":
            assert r["vs_torch"] == pytest.approx(1.0)
        if r["framework"] in ("jax-jit", "numba"):
            assert r["prep_s"] > 0, r           # compile time, reported apart from the runs
        if r["workload"] != "first_gradient":
            assert r["peak_rss_bytes"] is not None or not os.path.exists("/proc/self/status")
    assert any(r["peak_traced_bytes"] for r in rows)


def test_quick_run_records_the_machine(quick):
    data, proc = quick
    m = data["machine"]
    assert m["cpu"] and m["logical_cores"] >= 1 and m["python"]
    assert m["versions"]["numpy"] and m["versions"]["tapegrad"]
    assert m["openblas_env_unset_in_process"] == OPENBLAS_SET
    assert m["thread_env"]["OPENBLAS_NUM_THREADS"] == "1"
    assert "numpy_blas" in m and m["torch_threads"]["torch"] == 1
    # the console wraps its paragraph where the machine's CPU name puts the break
    assert "OpenBLAS overrides unset" in " ".join(proc.stdout.split())


def test_wrong_gradient_fails_loudly(tmp_path):
    """The --corrupt-grad test hook perturbs one framework's gradient before the check."""
    out = tmp_path / "r.json"
    proc = bench("--workloads", "scalar_chain", "--frameworks", "tapegrad,numba",
                 "--sizes", "scalar_chain:4,6", "--repeats", "2", "--corrupt-grad", "numba",
                 "--json", str(out), "--plots", str(tmp_path))
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert [(r["size"], r["framework"]) for r in rows] == [
        ("n=4", "tapegrad"), ("n=4", "numba"), ("n=6", "tapegrad"), ("n=6", "numba")]
    for r in rows:
        if r["framework"] == "numba":
            assert r["status"] == "WRONG GRADIENT" and r["median_s"] is None, r
            assert "differs from reference" in r["message"]
            assert "differs from tapegrad's" in r["message"]
        else:
            assert r["status"] == OK and r["repeats"] == 2, r
    assert "WRONG GRADIENT" in proc.stderr


def test_unknown_names_are_refused():
    proc = bench("--workloads", "scalar_chain,nope")
    assert proc.returncode != 0 and "unknown workload: nope" in proc.stderr

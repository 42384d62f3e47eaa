"""The ADBench / GradBench workloads (bench/adbench/) at their quick sizes, through the
harness: every row's value and gradient (for kmeans the Hessian-vector product too; for
nested the whole saddle-point run) must agree with PyTorch's before it is timed.  The
timings themselves are measured by ``python -m bench.adbench``, never asserted here."""
import json
import os
import subprocess
import sys

import pytest

from bench.adbench.registry import WORKLOADS
from bench.harness import TOL, Plan, run_case
from bench.workloads import WORKLOADS as MAIN_WORKLOADS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROBLEMS = ("ba", "ht", "lstm", "kmeans", "lse", "llsq", "ode", "det", "nested", "gmm")
QUICK = Plan(repeats=1, warmup=0, quick=True)


def test_registry_has_every_problem_and_stays_out_of_the_main_bench():
    assert set(WORKLOADS) == set(PROBLEMS)
    assert WORKLOADS["gmm"] is MAIN_WORKLOADS["gmm"]          # imported, not duplicated
    assert not (set(WORKLOADS) - {"gmm"}) & set(MAIN_WORKLOADS)
    for wl in WORKLOADS.values():
        assert wl.FRAMEWORKS[0] == "tapegrad" and "torch" in wl.FRAMEWORKS
        assert wl.QUICK_SIZES and wl.SIZES


def _cases():
    for name in PROBLEMS:
        wl = WORKLOADS[name]
        for size in wl.QUICK_SIZES:
            for cfg in wl.configs(size, True):
                yield pytest.param(wl, cfg, id=f"{name}-{cfg.size}")


@pytest.mark.parametrize("wl, cfg", list(_cases()))
def test_quick_rows_agree_with_pytorch(wl, cfg):
    """tapegrad (and its replay where the workload has one) and torch, each checked by the
    harness against the reference and against tapegrad's own output."""
    ref = wl.reference(cfg)
    assert ref[0] is not None and ref[1] is not None, "no reference (is PyTorch installed?)"
    fws = [fw for fw in ("tapegrad", "tapegrad-replay", "torch") if fw in wl.FRAMEWORKS]
    tapegrad_out = None
    for fw in fws:
        row, out = run_case(wl, fw, cfg, QUICK, ref, tapegrad_out)
        assert row["status"] == "ok", (fw, row["status"], row["message"])
        assert row["max_rel_err"] <= TOL[cfg.dtype], (fw, row)
        assert row["repeats"] == 1 and row["median_s"] > 0
        if fw == "tapegrad":
            tapegrad_out = out


def _adbench(*args):
    return subprocess.run([sys.executable, "-m", "bench.adbench", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_runner_checks_and_flags_a_wrong_gradient(tmp_path):
    """python -m bench.adbench: bench's options and machinery over the adbench registry;
    the --corrupt-grad hook makes the torch rows wrong, which must exit 2."""
    out = tmp_path / "r.json"
    proc = _adbench("--quick", "--workloads", "lse,kmeans", "--frameworks", "tapegrad,torch",
                    "--repeats", "1", "--corrupt-grad", "torch", "--json", str(out),
                    "--plots", str(tmp_path / "plots"))
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert [(r["workload"], r["framework"], r["status"]) for r in rows] == [
        ("lse", "tapegrad", "ok"), ("lse", "torch", "WRONG GRADIENT"),
        ("kmeans", "tapegrad", "ok"), ("kmeans", "torch", "WRONG GRADIENT")]
    assert "WRONG GRADIENT" in proc.stderr


def test_runner_refuses_main_bench_workloads():
    proc = _adbench("--workloads", "faw")
    assert proc.returncode != 0 and "unknown workload: faw" in proc.stderr

"""``python -m bench.large_arrays`` (issue 16's memory and time at scale): its smoke run,
its checks and its memory guard.  Structure only: no timing or memory figure is asserted."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from bench import large_arrays as la

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("large_arrays") / "quick.json"
    proc = subprocess.run([sys.executable, "-m", "bench.large_arrays", "--quick", "--json",
                           str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(out.read_text()), proc.stdout


def test_quick_run_measures_every_framework_twice_in_its_own_child(quick):
    data, _ = quick
    results = data["results"]
    assert data["quick"] and data["machine"]["logical_cores"] >= 1
    assert [(r["n"], r["framework"]) for r in results] == [
        (n, fw) for n in la.QUICK_SIZES for fw in la.QUICK_FRAMEWORKS]
    pids = set()
    for r in results:
        assert r["status"] == "ok", r
        assert len(r["runs"]) == 2 and r["baseline_rss_bytes"] > 0
        assert (r["threads"] is None) == (r["framework"] == "tapegrad")
        if r["framework"] == "torch":
            assert r["threads"] == 1
        for run in r["runs"]:
            assert run["forward_s"] > 0 and run["backward_s"] > 0, run
            assert isinstance(run["rss_after_del_bytes"], int)
        first = r["runs"][0]
        if os.path.exists("/proc/self/status"):
            assert first["peak_rss_growth_bytes"] is not None and first["peak_from"]
        pids.add(r["pid"])
    assert os.getpid() not in pids and len(pids) == len(results)


def test_quick_run_checked_the_value_and_the_gradient(quick):
    for r in quick[0]["results"]:
        for run in r["runs"]:
            assert run["status"] == "ok"
            assert run["grad_checked"] == la.CHECKED     # distinct indices at n = 10^5
            assert 0 <= run["grad_err"] <= la.TOL and 0 <= run["value_err"] <= la.TOL
            assert np.isfinite(run["value"])


def test_quick_run_prints_the_table_and_the_ratios(quick):
    _, stdout = quick
    lines = stdout.splitlines()
    header = next(line for line in lines if line.startswith("| n |"))
    for col in la.COLUMNS:
        assert col in header
    rows = [line for line in lines if line.startswith("| 100,000 |")]
    assert [line.split("|")[2].strip() for line in rows] == [
        *la.QUICK_FRAMEWORKS, "tapegrad / torch"]
    assert all(cell.count(" / ") == 1 for cell in rows[0].split("|")[3:8])
    assert "(target <= 1.5x)" in stdout and "machine:" in stdout


def test_analytic_gradient_is_torchs():
    x0 = np.linspace(-2.0, 2.0, 41)
    x = torch.tensor(x0, requires_grad=True)
    y = la.f(x)
    y.backward()
    np.testing.assert_allclose(la.analytic_grad(x0), x.grad.numpy(), rtol=1e-13, atol=1e-15)
    assert la.reference_value(x0, chunk=7) == pytest.approx(y.item(), rel=1e-13)


def test_check_flags_a_wrong_gradient_or_value():
    g = np.array([1.0, 2.0])
    assert la.check(3.0, 3.0, g, g)[0] == "ok"
    assert la.check(3.0, 3.0, g * (1 + 1e-6), g)[0] == "WRONG GRADIENT"
    assert la.check(3.0, 3.0, np.array([np.nan, 2.0]), g)[0] == "WRONG GRADIENT"
    assert la.check(3.1, 3.0, g, g)[0] == "WRONG VALUE"
    assert la.exit_code([{"status": "ok"}, {"status": "WRONG VALUE"}]) == 2
    assert la.exit_code([{"status": "skipped"}, {"status": "error"}]) == 1
    run = dict(forward_s=1.0, backward_s=1.0, peak_rss_growth_bytes=1, rss_after_del_bytes=1,
               value_err=0.0, grad_err=0.5, grad_checked=16)
    wrong = dict(framework="tapegrad", n=10, status="WRONG GRADIENT", note="gradient err 0.5",
                 runs=[run, run])
    row, = [line for line in la.table([wrong]).splitlines() if line.startswith("| 10 |")]
    assert "WRONG GRADIENT: gradient err 0.5" in row and "1.000" not in row   # never timed


def test_a_size_without_the_memory_is_skipped_with_a_note(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(la, "mem_available", lambda: 10 ** 9)
    spawned = []
    monkeypatch.setattr(la, "_spawn", lambda *a: spawned.append(a))
    # tapegrad 10^6: 140 MB x 3 fits in 1 GB; 10^7 needs 3 x 1.4 GB
    assert la.need_bytes("tapegrad", 10 ** 7) == 1.4e9
    out = tmp_path / "r.json"
    monkeypatch.setattr(la, "_collect", lambda proc, fw, n, timeout: dict(
        framework=fw, n=n, status="error", note="not run in this test"))
    code = la.main(["--sizes", "1e6,1e7", "--frameworks", "tapegrad", "--json", str(out)])
    assert code == 1 and [a[:2] for a in spawned] == [("tapegrad", 10 ** 6)]
    results = json.loads(out.read_text())["results"]
    assert [r["status"] for r in results] == ["error", "skipped"]
    assert "MemAvailable 1.0 GB < 3 x 1.40 GB" in results[1]["note"]
    captured = capsys.readouterr()
    assert "skipped: MemAvailable" in captured.err and "| 10,000,000 | tapegrad |" in captured.out

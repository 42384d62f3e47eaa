"""The comparison suite's smoke run: every workload, every framework, tiny sizes.

It runs in the test suite so that the benchmarks never rot; the figures themselves are
measured with ``python -m bench`` (never asserted here)."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_quick_run_has_a_row_for_every_workload_and_framework(tmp_path):
    out = tmp_path / "quick.json"
    proc = subprocess.run([sys.executable, "-m", "bench", "--quick", "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads(out.read_text())
    rows = data["rows"] if isinstance(data, dict) else data
    from bench.workloads import WORKLOADS
    for name, w in WORKLOADS.items():
        seen = {r["framework"] for r in rows if r["workload"] == name}
        assert seen == set(w.FRAMEWORKS), (name, seen)
    tapegrad_rows = [r for r in rows if r["framework"] == "tapegrad"]
    assert tapegrad_rows and all(r["status"] == "ok" for r in tapegrad_rows), tapegrad_rows

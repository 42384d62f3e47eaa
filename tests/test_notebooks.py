"""The notebooks run without error (so they cannot rot) and are committed with outputs."""
import json

import pytest

from tools.notebooks import NOTEBOOKS, execute

NAMES = ["01_tape_and_graph.ipynb", "02_training_pipeline.ipynb", "03_speed.ipynb"]


def test_the_notebooks_are_there_with_small_outputs():
    assert [p.name for p in NOTEBOOKS] == NAMES
    for path in NOTEBOOKS:
        cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
        assert sum(bool(c["outputs"]) for c in cells) > len(cells) // 2, path.name
        assert not any(o.get("output_type") == "error" for c in cells for o in c["outputs"])
        assert path.stat().st_size < 200_000, path.name


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path):
    nb = execute(path, timeout=120)
    assert not any(o.get("output_type") == "error" for c in nb.cells for o in c.get("outputs", []))


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if "matplotlib" in p.read_text()],
                         ids=lambda p: p.name)
def test_notebook_runs_without_matplotlib(path, tmp_path):
    (tmp_path / "matplotlib").mkdir()
    (tmp_path / "matplotlib" / "__init__.py").write_text(
        "raise ImportError('matplotlib is hidden for this test')\n")
    nb = execute(path, timeout=120, pythonpath=[tmp_path])
    text = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    assert "image/png" not in json.dumps(nb)
    assert "step    0  loss" in text or "matplotlib is not installed" in text

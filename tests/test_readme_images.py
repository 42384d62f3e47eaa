"""The README's pictures are made by tools.readme_images."""
import shutil

import pytest

from tools import readme_images


def test_table_svg_has_one_row_per_entry():
    tape, _, _ = readme_images.example()
    rows = tape.rows()
    svg = readme_images.table_svg(rows)
    assert svg.count("<rect y=") == 1 + len(rows)            # the header and the entries
    assert "TanhBackward0" in svg and "AccumulateGrad" in svg and "float64" in svg


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot program is not installed")
def test_main_writes_both_pictures(tmp_path, monkeypatch):
    monkeypatch.setattr(readme_images, "DOCS", tmp_path)
    readme_images.main()
    assert "<svg" in (tmp_path / "graph.svg").read_text()
    assert "AddBackward0" in (tmp_path / "tape.svg").read_text()

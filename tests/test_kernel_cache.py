"""The kernels' Numba cache is dropped when the sources they are built from change."""
import tapegrad.kernels as kernels


def test_stale_cache_is_dropped_only_when_sources_change(tmp_path, monkeypatch):
    src = tmp_path / "rules.py"
    src.write_text("A = 1\n")
    cache = tmp_path / "__pycache__"
    cache.mkdir()
    compiled = cache / "reverse.sweep-1.py311.nbi"
    monkeypatch.setattr(kernels, "_HERE", str(tmp_path))
    monkeypatch.setattr(kernels, "_SOURCES", [str(src)])

    compiled.write_text("old")
    kernels._drop_stale_cache()            # first look: no stamp yet, drop
    assert not compiled.exists() and (cache / "kernel-sources.sha1").exists()

    compiled.write_text("fresh")
    kernels._drop_stale_cache()            # same sources: keep
    assert compiled.exists()

    src.write_text("A = 2\n")
    kernels._drop_stale_cache()            # a source changed: drop
    assert not compiled.exists()

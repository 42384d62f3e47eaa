"""Compiled (Numba) kernels over the tape's flat arrays; they know no Python objects.

Numba's on-disk cache keys a compiled function on its own source file only, so a
kernel would keep stale code after a change to a file it calls into (the generated
dispatch, the op table's scalar helpers).  Before any kernel loads, the cache of this
package is dropped whenever the sources the kernels are built from have changed.
"""
import glob
import hashlib
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
_SOURCES = (sorted(glob.glob(os.path.join(_HERE, "*.py")))
            + [os.path.join(_HERE, "..", "ops", name) for name in ("table.py", "scalar_math.py")])


def _drop_stale_cache():
    digest = hashlib.sha1()
    for path in _SOURCES:
        with open(path, "rb") as f:
            digest.update(f.read())
    cache = os.path.join(_HERE, "__pycache__")
    stamp = os.path.join(cache, "kernel-sources.sha1")
    try:
        with open(stamp) as f:
            if f.read() == digest.hexdigest():
                return
    except OSError:
        pass
    try:
        os.makedirs(cache, exist_ok=True)
        for name in os.listdir(cache):
            if name.endswith((".nbi", ".nbc")):
                os.remove(os.path.join(cache, name))
        with open(stamp, "w") as f:
            f.write(digest.hexdigest())
    except OSError:   # a read-only install: Numba then caches elsewhere or not at all
        pass


_drop_stale_cache()

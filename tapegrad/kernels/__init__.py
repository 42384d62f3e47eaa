"""Compiled (Numba) kernels over the tape's flat arrays; they know no Python objects.

Two things happen before any kernel loads:

* ``generated.py`` and ``generated_blocks.py`` (the op table's rules as Numba code,
  written by ``codegen``) are written where they are missing or were made from other
  sources: each starts with a hash of the files it is made from, so adding an op to the
  table is all it takes (they are not kept in git).  Where this package's folder cannot
  be written, they go to a cache folder added to the package's path.
* Numba's on-disk cache keys a compiled function on its own source file only, so a
  kernel would keep stale code after a change to a file it calls into (the generated
  dispatch, the op table's scalar helpers): the cache of this package is dropped
  whenever the sources the kernels are built from have changed.
"""
import glob
import hashlib
import os
import tempfile

_HERE = os.path.dirname(os.path.abspath(__file__))
_OPS = os.path.join(_HERE, "..", "ops")
GENERATED = ("generated.py", "generated_blocks.py")
# what the generated files are made from
_GEN_INPUTS = ([os.path.join(_OPS, n) for n in ("table.py", "scalar_math.py", "rules.py")]
               + [os.path.join(_HERE, n) for n in ("codegen.py", "vmath.py")])


def _digest(paths):
    digest = hashlib.sha1()
    for path in paths:
        with open(path, "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()


def sources_stamp():
    """The first line of a generated file made from the current sources."""
    return f"# made from sources {_digest(_GEN_INPUTS)}\n"


def _current(folder, stamp):
    for name in GENERATED:
        try:
            with open(os.path.join(folder, name)) as f:
                if f.readline() != stamp:
                    return False
        except OSError:
            return False
    return True


def _write(folder, texts):
    os.makedirs(folder, exist_ok=True)
    for name, text in texts.items():
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, os.path.join(folder, name))     # atomic: concurrent imports agree


def _ensure_generated():
    stamp = sources_stamp()
    if _current(_HERE, stamp):
        return
    from . import codegen
    texts = codegen.render()
    try:
        _write(_HERE, texts)
    except OSError:                  # a read-only install: a cache folder of its own
        folder = os.path.join(os.environ.get("XDG_CACHE_HOME") or
                              os.path.join(os.path.expanduser("~"), ".cache"),
                              "tapegrad", stamp.split()[-1])
        if not _current(folder, stamp):
            _write(folder, texts)
        __path__.append(folder)


def _drop_stale_cache():
    digest = _digest(_SOURCES)
    cache = os.path.join(_HERE, "__pycache__")
    stamp = os.path.join(cache, "kernel-sources.sha1")
    try:
        with open(stamp) as f:
            if f.read() == digest:
                return
    except OSError:
        pass
    try:
        os.makedirs(cache, exist_ok=True)
        for name in os.listdir(cache):
            if name.endswith((".nbi", ".nbc")):
                os.remove(os.path.join(cache, name))
        with open(stamp, "w") as f:
            f.write(digest)
    except OSError:   # a read-only install: Numba then caches elsewhere or not at all
        pass


_ensure_generated()
# what the kernels are built from (the generated files included, now that they exist)
_SOURCES = (sorted(glob.glob(os.path.join(_HERE, "*.py")))
            + [os.path.join(_OPS, n) for n in ("table.py", "scalar_math.py", "rules.py")])
_drop_stale_cache()

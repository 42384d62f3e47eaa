"""Compiled (Numba) kernels over the tape's flat arrays; they know no Python objects.

Where the compiled kernels and the generated sources live (nothing is ever written into
the installed package):

* **One folder per version of the kernel sources.**  ``KEY`` is a hash of every file a
  cached kernel's code can come from (``kernels/*.py``, ``optim/_kernels.py``,
  ``tape/layout_codec.py`` (the entry layout's accessors, compiled in ``layout.py``), and
  the op table, its helpers and rule walker that ``codegen`` turns into ``generated*.py``), of
  Numba's version and of its bounds-checking switch.  Everything lives in
  ``<root>/<KEY>/``: a changed source gives another folder, so an old kernel can never
  run, wherever the cache is and whatever the files' time stamps say.  (Numba keys a
  cached function on its own file only, so a sweep calling into a changed file, such as
  the generated dispatch, would otherwise load its old code.)
* ``<root>`` is ``$NUMBA_CACHE_DIR/tapegrad`` when Numba's cache folder is set, else
  ``$XDG_CACHE_HOME/tapegrad`` (``~/.cache/tapegrad``): the first of these that can be
  written.  Where none can, the kernels compile into a temporary folder removed at exit
  (no cache across runs), with a one-line warning.  Folders of other keys unused for 30
  days are removed when a new one is made.
* ``generated.py`` and ``generated_blocks.py`` (the op table's rules as Numba code,
  written by ``codegen``) are written to ``<root>/<KEY>/`` when missing there (each starts
  with a hash of the files it is made from, checked at import), and that folder goes first
  on this package's ``__path__``: ``from .generated import ...`` loads them from there.
  Adding an op to the table is all it takes (they are not kept in git).
* Numba's index and data files go to ``<root>/<KEY>/numba-cache/<subpackage>/``: a cache
  locator, first in Numba's list, claims every cached function defined in this package's
  files or in the generated ones.  Its source stamp is ``KEY`` plus a hash of the function's own
  file, so a kernel added in a file outside the list above is still recompiled when that
  file changes.
"""
import atexit
import glob
import hashlib
import os
import shutil
import tempfile
import time
import warnings

from . import threads  # noqa: F401  (before any parallel kernel loads libgomp)

_HERE = os.path.dirname(os.path.abspath(__file__))
_PKG = os.path.dirname(_HERE)
_OPS = os.path.join(_PKG, "ops")
GENERATED = ("generated.py", "generated_blocks.py")
# what the generated files are made from
_GEN_INPUTS = ([os.path.join(_OPS, n) for n in ("table.py", "scalar_math.py", "rules.py")]
               + [os.path.join(_HERE, n) for n in ("codegen.py", "vmath.py")])
# every file a cached kernel's code can come from (the generated files are made from these)
_SOURCES = sorted({*(p for p in glob.glob(os.path.join(_HERE, "*.py"))
                     if os.path.basename(p) not in GENERATED),
                   os.path.join(_PKG, "optim", "_kernels.py"),
                   os.path.join(_PKG, "tape", "layout_codec.py"), *_GEN_INPUTS})
_UNUSED_DAYS = 30
_FILE_HASHES = {}


def _digest(paths):
    digest = hashlib.sha1()
    for path in paths:
        with open(path, "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()


def sources_stamp():
    """The first line of a generated file made from the current sources."""
    return f"# made from sources {_digest(_GEN_INPUTS)}\n"


def cache_key():
    """The name of the folder of this version of the kernels (see the module's notes)."""
    import numba
    from numba.core import config
    digest = hashlib.sha1(f"numba {numba.__version__} boundscheck {config.BOUNDSCHECK}\n"
                          .encode())
    for path in _SOURCES:
        digest.update(os.path.relpath(path, _PKG).encode() + b"\n")
        with open(path, "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()[:20]


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


def _roots():
    """The cache roots to try, in order."""
    from numba.core import config
    roots = [os.path.join(config.CACHE_DIR, "tapegrad")] if config.CACHE_DIR else []
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".cache")
    if os.path.isabs(base):
        roots.append(os.path.join(base, "tapegrad"))
    return roots


def _writable(folder):
    try:
        os.makedirs(os.path.join(folder, "numba-cache"), exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
        return True
    except OSError:
        return False


def _prune(root, keep):
    """Remove the folders of other keys that no import has used for a while."""
    cutoff = time.time() - _UNUSED_DAYS * 86400
    try:
        for name in os.listdir(root):
            path = os.path.join(root, name)
            if (name != keep and len(name) == len(keep) and os.path.isdir(path)
                    and all(c in "0123456789abcdef" for c in name)
                    and os.stat(path).st_mtime < cutoff):
                shutil.rmtree(path, ignore_errors=True)
    except OSError:
        pass


def _cache_folder(key):
    """(``<root>/<key>``, created, for the first root that can be written, True); else (a
    temporary folder of this process, False), with a warning."""
    tried = []
    for root in _roots():
        folder = os.path.join(root, key)
        if _writable(folder):
            if tried:
                warnings.warn(f"tapegrad: cannot write the kernel cache in {tried[0]}; "
                              f"using {root}", RuntimeWarning, stacklevel=3)
            return folder, True
        tried.append(root)
    folder = tempfile.mkdtemp(prefix="tapegrad-kernels-")
    atexit.register(shutil.rmtree, folder, True)
    warnings.warn(f"tapegrad: no writable kernel cache ({', '.join(tried) or 'no folder'}); "
                  "compiled kernels are not kept after this run", RuntimeWarning, stacklevel=3)
    os.makedirs(os.path.join(folder, "numba-cache"))
    return folder, False


def _ensure_generated(folder):
    """Write the generated kernels to ``folder`` where they are missing or stale there,
    and put the folder first on this package's path."""
    stamp = sources_stamp()
    if _current(folder, stamp):
        try:
            os.utime(folder)                 # in use (see _prune)
        except OSError:
            pass
    else:
        from . import codegen
        _write(folder, codegen.render())
        _prune(os.path.dirname(folder), os.path.basename(folder))
    if folder not in __path__:
        __path__.insert(0, folder)


class _Locator:
    """Numba's cache locator for the functions defined in this package and in the
    generated files: ``<FOLDER>/numba-cache/<subpackage>``, stamped with ``KEY``."""

    def __init__(self, py_func, py_file):
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        sub = (os.path.relpath(os.path.dirname(py_file), _PKG)
               if py_file.startswith(_PKG + os.sep) else "kernels")   # (the generated files)
        self._cache_path = os.path.join(CACHE, sub)

    @classmethod
    def from_function(cls, py_func, py_file):
        path = os.path.abspath(py_file)
        if not path.startswith((_PKG + os.sep, FOLDER + os.sep)):
            return None
        self = cls(py_func, path)
        try:
            self.ensure_cache_path()
        except OSError:
            return None
        return self

    def ensure_cache_path(self):
        os.makedirs(self._cache_path, exist_ok=True)

    def get_cache_path(self):
        return self._cache_path

    def get_source_stamp(self):
        if self._py_file not in _FILE_HASHES:
            with open(self._py_file, "rb") as f:
                _FILE_HASHES[self._py_file] = hashlib.sha256(f.read()).hexdigest()
        return KEY, _FILE_HASHES[self._py_file]

    def get_disambiguator(self):
        return str(self._lineno)


def _install_locator():
    from numba.core import caching, config
    impl = getattr(caching, "CacheImpl", None) or caching._CacheImpl
    impl._locator_classes[:] = [_Locator] + [         # (a module reloaded: its new one)
        c for c in impl._locator_classes
        if (getattr(c, "__module__", ""), getattr(c, "__qualname__", "")) != (__name__, "_Locator")]
    chosen = getattr(config, "CACHE_LOCATOR_CLASSES", "")     # the user's own list
    if chosen and f"{__name__}._Locator" not in chosen:
        config.CACHE_LOCATOR_CLASSES = f"{__name__}._Locator," + chosen


KEY = cache_key()
FOLDER, PERSISTENT = _cache_folder(KEY)   # (PERSISTENT: outlives the process)
CACHE = os.path.join(FOLDER, "numba-cache")
_install_locator()
_ensure_generated(FOLDER)

"""A first gradient without the compiler's wait.

Numba compiles a kernel at its first call, and the reverse sweep holds every kind's
rule: on a fresh cache that takes about 5 s, before the first gradient of a script whose
tape has three entries.  So until a ``Group`` of kernels is compiled:

* it is compiled in a background process (``warm``, run as ``python -c``), which writes
  Numba's cache and then a marker file beside it.  The process is detached: it finishes,
  and the next run starts warm, even when the script that started it has ended (a
  process, not a thread: no compile holding the interpreter's lock or Numba's, nothing
  to stop at exit, nothing held across a ``fork``);
* small work (``Group.pick``'s ``work``, up to ``TWIN_MAX``) runs each kernel's *Python
  twin*: its own source run by the interpreter, calling the twins of the kernels it
  calls.  Same IEEE operations and libm calls in the same order: the compiled kernel's
  results bit for bit (tested).  The twin writes into copies of the arrays the kernel
  writes, and only the elements it changed are copied back when it returns; where it
  raises instead of returning inf or nan as compiled code does (``math.log(0.0)``,
  ``math.exp(1000.0)``), the caller waits for the compiled kernel and runs that;
* larger work waits for the background process (the twin would take longer than the
  compile), then Numba loads the kernels from the cache.

None of this runs with a warm cache (the marker, or a process that compiled the group
itself: it writes the marker at exit), without a cache that outlives the process, in a
forked child (it compiles for itself), or with Numba's JIT disabled.
"""
import atexit
import functools
import importlib
import os
import subprocess
import sys
import threading
import types

import numpy as np
from numba.core.registry import CPUDispatcher

TWIN_MAX = 20_000     # values + entries of a tape small enough for the twins
_TWINS = {}


class _ModuleTwin:
    """A kernel module as a twin sees it: its kernels are their twins."""

    def __init__(self, module):
        self._module = module

    def __getattr__(self, name):
        value = getattr(self._module, name)
        return twin(value) if isinstance(value, CPUDispatcher) else value


def twin(kernel):
    """The Python twin of the compiled ``kernel``: its function, with the kernels it
    calls (by name, or through their kernel module) replaced by their twins."""
    found = _TWINS.get(kernel)
    if found is not None:
        return found
    f = kernel.py_func
    names = dict(f.__globals__)
    found = _TWINS[kernel] = types.FunctionType(f.__code__, names, f.__name__,
                                                f.__defaults__, f.__closure__)
    for name, value in f.__globals__.items():
        if isinstance(value, CPUDispatcher):
            names[name] = twin(value)
        elif isinstance(value, types.ModuleType) and value.__name__.startswith(__package__ + "."):
            names[name] = _ModuleTwin(value)
    return found


class _Fallback(Exception):
    """The twin raised where the compiled kernel would not."""


def _run_twin(kernel, writes, *args):
    """``kernel(*args)`` by its twin, on copies of the arguments at positions ``writes``
    (arrays, or tuples of them); the elements it changed are copied back when it returns
    (another thread may record into a tape's columns meanwhile)."""
    mine = list(args)
    for k in writes:
        mine[k] = _copy(args[k])
    try:
        with np.errstate(all="ignore"):
            out = twin(kernel)(*mine)
    except Exception as e:      # (a domain error, an overflow: compiled code gives inf/nan)
        raise _Fallback() from e
    for k in writes:
        _copy_back(mine[k], args[k])
    return out


def _copy(a):
    return tuple(map(_copy, a)) if a.__class__ is tuple else a.copy()


def _copy_back(mine, theirs):
    if mine.__class__ is tuple:
        for m, t in zip(mine, theirs):
            _copy_back(m, t)
    else:                       # (bit patterns: -0.0 == 0.0, and NaN != NaN)
        bits = f"u{mine.itemsize}"
        changed = mine.view(bits) != theirs.view(bits)
        theirs[changed] = mine[changed]


class Group:
    """``kernels`` compiled together by ``warm`` (``"module:function"``, which calls
    them with the argument types of their callers here)."""

    def __init__(self, name, kernels, warm):
        self.name = name
        self.kernels = kernels
        self.warm = warm
        self.ready = False       # call the compiled kernels
        self._proc = None        # the background compile
        self._pid = None         # ... started by this process
        self._lock = threading.Lock()

    def pick(self, kernel, work, writes):
        """``kernel``, or while it compiles in the background and ``work`` is small,
        its twin (which writes into copies of the arguments at ``writes``)."""
        if self.ready or not self._twin_for(kernel, work):
            return kernel
        return functools.partial(self._twin_or_wait, kernel, writes)

    def _twin_for(self, kernel, work):
        with self._lock:
            if self.ready:
                return False
            if self._proc is None:
                if work > TWIN_MAX or not self._start(kernel):
                    self._settled()
                    return False
            elif os.getpid() != self._pid or self._proc.poll() is not None:
                self._settled()
                return False
            if work <= TWIN_MAX:
                return True
        self.wait()
        return False

    def _twin_or_wait(self, kernel, writes, *args):
        try:
            return _run_twin(kernel, writes, *args)
        except _Fallback:
            self.wait()
            return kernel(*args)

    def wait(self):
        """Wait for the background compile, if one runs (then the kernels load from
        Numba's cache)."""
        proc = self._proc
        if proc is not None and os.getpid() == self._pid:
            proc.wait()
        with self._lock:
            self._settled()

    def _settled(self):
        if not self.ready:
            self.ready = True
            atexit.register(self._mark)

    def _marker(self):
        from . import FOLDER
        return os.path.join(FOLDER, f"warm-{self.name}")

    def _mark(self):
        """At exit: the group compiled in this process is in the cache now."""
        if all(getattr(k, "signatures", None) for k in self.kernels) and \
                not os.path.exists(self._marker()):
            _touch(self._marker())

    def _start(self, kernel):
        """Start the background compile; False where there is none to start (a warm
        cache, a temporary one, Numba's JIT off)."""
        from . import FOLDER, PERSISTENT
        if not isinstance(kernel, CPUDispatcher) or not PERSISTENT or \
                os.path.exists(self._marker()):
            return False
        from numba.core import config
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [_ROOT] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        if config.CACHE_DIR:             # (the user may have set it in code)
            env["NUMBA_CACHE_DIR"] = config.CACHE_DIR
        code = (f"from tapegrad.kernels import cold; "
                f"cold.main({self.name!r}, {self.warm!r}, {FOLDER!r})")
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", code], env=env, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        except OSError:
            return False
        self._pid = os.getpid()
        return True


_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _touch(path):
    try:
        with open(path, "w"):
            pass
    except OSError:
        pass


def main(name, warm, folder):
    """The background process: compile group ``name`` into ``folder``'s cache (the one
    of the process that started it), then write its marker."""
    from . import FOLDER
    if FOLDER != folder:
        sys.exit(f"tapegrad: kernel folder {FOLDER} is not {folder}")
    mod, fn = warm.split(":")
    getattr(importlib.import_module(mod), fn)()
    _touch(os.path.join(folder, f"warm-{name}"))

"""A first gradient without the compiler's wait.

Numba compiles a kernel at its first call, and the reverse sweep holds every kind's
rule: on a fresh cache that takes about 5 s, before the first gradient of a script whose
tape has three entries.  So on a cold cache:

* ``import tapegrad`` starts one background process (``warm_in_background``) that
  compiles the ``Group``s of kernels a first gradient needs (the sweep, the fused sweep
  of large arrays, the replay kernels, the tangent sweeps), one after the other, into
  Numba's cache, at a lower priority, writing a marker file beside it as each group is
  done.  It is detached: it finishes, and the
  next run starts warm, even when the script that started it has ended.  A process, not
  a thread: no compile holding the interpreter's lock or Numba's, nothing to stop at
  exit, nothing held across a ``fork``.  One at a time per cache folder (a lock file
  names the process at work);
* meanwhile, small work (``Group.pick``'s ``work``, up to ``TWIN_MAX``) runs each
  kernel's *Python twin*: its own source run by the interpreter, calling the twins of
  the kernels it calls.  Same IEEE operations and libm calls in the same order: the
  compiled kernel's results bit for bit (tested).  The twin writes into copies of the
  arrays the kernel writes, and only the elements it changed are copied back when it
  returns; where it raises instead of returning inf or nan as compiled code does
  (``math.log(0.0)``, ``math.exp(1000.0)``), the caller waits for the compiled kernel
  and runs that;
* larger work, or a group without twins (kernels with vector intrinsics), waits for the
  group's marker if the background process is at that group or about to start it (else
  it compiles here: a later group's turn may be a while), and Numba loads the kernels
  from the cache.

None of this runs with a warm cache (the markers; a process that compiled a group itself
writes its marker at exit), without a cache that outlives the process, in a forked child
(it compiles for itself), or with Numba's JIT disabled.
"""
import atexit
import functools
import importlib
import os
import subprocess
import sys
import threading
import time
import types

import numpy as np
from numba.core.registry import CPUDispatcher

TWIN_MAX = 250_000    # values + entries of work small enough for the twins (about 2 us of
                      # Python per scalar entry, 0.3 us per value of an array entry: the
                      # sweep's twin leaves large elementwise runs to the fused kernels)
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
    them with the argument types of their callers here); ``twins``: whether small work
    may run their Python twins meanwhile."""

    def __init__(self, name, kernels, warm, twins=True):
        self.name = name
        self.kernels = kernels
        self.warm = warm
        self.twins = twins
        self.ready = False       # call the compiled kernels
        self._lock = threading.Lock()

    def pick(self, kernel, work, writes):
        """``kernel``, or while its group compiles in the background and ``work`` is
        small, its twin (which writes into copies of the arguments at ``writes``)."""
        if self.ready or not self._twin_for(work):
            return kernel
        return functools.partial(self._twin_or_wait, kernel, writes)

    def compiling(self):
        """Is the background process yet to compile this group?  (False: its compiled
        kernels can be called; they load or compile at their first call.)"""
        if self.ready:
            return False
        with self._lock:
            if _warming() and not self._done():
                return True
            self._settled()
            return False

    def settle(self):
        """Make the compiled kernels callable: wait if the background process is at this
        group, else they compile here at their first call."""
        if not self.ready:
            self._twin_for(TWIN_MAX + 1)

    def _twin_for(self, work):
        with self._lock:
            if self.ready:
                return False
            if not _warming() or self._done():
                self._settled()
                return False
            if self.twins and work <= TWIN_MAX:
                return True
            if not self._next():
                self._settled()
                return False
        self.wait()
        return False

    def _twin_or_wait(self, kernel, writes, *args):
        try:
            return _run_twin(kernel, writes, *args)
        except _Fallback:       # (an argument made for the twin has a compiled form)
            self.wait()
            return kernel(*[a.for_compiled() if hasattr(a, "for_compiled") else a
                            for a in args])

    def wait(self):
        """Wait until the background process has compiled this group (if it is at it);
        then the kernels load from Numba's cache."""
        while _warming() and not self._done():
            time.sleep(0.005)
        with self._lock:
            self._settled()

    def _done(self):
        return os.path.exists(self.marker())

    def _next(self):
        """Is the background process at this group, or about to start it?"""
        for group in _QUEUE:
            if group is self:
                return True
            if not group._done():
                return False
        return False

    def _settled(self):
        if not self.ready:
            self.ready = True
            atexit.register(self._mark)

    def marker(self):
        from . import FOLDER
        return os.path.join(FOLDER, f"warm-{self.name}")

    def _mark(self):
        """At exit: the group compiled in this process is in the cache now."""
        if all(getattr(k, "signatures", None) for k in self.kernels) and \
                not os.path.exists(self.marker()):
            _touch(self.marker())


_WARMER = [None, None]       # the background process, and the process that started it
_QUEUE = []                  # the groups it compiles, in order


def _warming():
    """Is this process's background compile still at work?"""
    proc, pid = _WARMER
    return proc is not None and pid == os.getpid() and proc.poll() is None


def wait_background():
    """Wait for this process's background compile to end (a benchmark's cold run, before
    the next one)."""
    while _warming():
        time.sleep(0.01)


def warm_in_background(*groups):
    """Start the background compile of the ``groups`` not yet in the cache (see the
    module's notes); at import."""
    from . import FOLDER, PERSISTENT
    from numba.core import config
    todo = [g for g in groups if not os.path.exists(g.marker())]
    # (an interpreter embedded in another program: sys.executable may not be Python)
    python = os.path.basename(sys.executable or "").lower().startswith("python")
    if (not todo or not PERSISTENT or config.DISABLE_JIT or not python
            or os.environ.get("TAPEGRAD_BACKGROUND_COMPILE") == "0" or not _claim(FOLDER)):
        return
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [_ROOT] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    if config.CACHE_DIR:                 # (the user may have set it in code)
        env["NUMBA_CACHE_DIR"] = config.CACHE_DIR
    work = [(g.name, g.warm) for g in todo]
    code = f"from tapegrad.kernels import cold; cold.main({work!r}, {FOLDER!r})"
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", code], env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError:
        _release(FOLDER)
        return
    _write_pid(FOLDER, proc.pid)
    threading.Thread(target=proc.wait, daemon=True).start()    # (reaped when it ends)
    _WARMER[:] = [proc, os.getpid()]
    _QUEUE[:] = todo


_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _lock_path(folder):
    return os.path.join(folder, "warming")


def _claim(folder):
    """Take the folder's warm-up lock (the file names the process at work); False if a
    live process holds it."""
    path = _lock_path(folder)
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            if _alive(path):
                return False
            _release(folder)         # its process died: stale
            continue
        except OSError:
            return False
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
        return True
    return False


def _alive(path):
    try:
        with open(path) as f:
            os.kill(int(f.read()), 0)
    except (OSError, ValueError):
        return False
    return True


def _write_pid(folder, pid):
    try:
        with open(_lock_path(folder), "w") as f:
            f.write(str(pid))
    except OSError:
        pass


def _release(folder):
    try:
        os.remove(_lock_path(folder))
    except OSError:
        pass


def _touch(path):
    try:
        with open(path, "w"):
            pass
    except OSError:
        pass


def main(work, folder):
    """The background process: compile each (name, "module:function") of ``work`` into
    ``folder``'s cache (the one of the process that started it), writing each group's
    marker when it is done."""
    from . import FOLDER
    try:
        os.nice(10)          # a background job: the user's own work comes first
    except (AttributeError, OSError):
        pass
    try:
        if FOLDER != folder:
            sys.exit(f"tapegrad: kernel folder {FOLDER} is not {folder}")
        for name, warm in work:
            mod, fn = warm.split(":")
            getattr(importlib.import_module(mod), fn)()
            _touch(os.path.join(folder, f"warm-{name}"))
    finally:
        _release(folder)

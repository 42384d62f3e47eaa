"""Automatic compilation off the caller's thread (``trace(..., compile_after=N)``).

The N-th replay of a traced function hands its recordings to a thread that lowers them
through LLVM (``llvm_tape``); replays go on interpreted until a recording's native code
is ready, then use it (a compiled tape computes what the interpreter computes, bit for
bit).  ``Traced.compile()`` waits for that thread before compiling what is left.

* LLVM is not used from two threads at once: the thread holds Numba's compiler lock
  while it compiles a recording (Numba's own compiles wait, and it waits for theirs).
* ``fork`` waits for the recording being compiled (the lock is taken around it, so the
  child never inherits a held lock); the child has no such thread, and its recordings
  stay interpreted until compiled there.
* At interpreter exit the thread is told to stop and joined: it finishes the recording
  it is at (LLVM cannot be interrupted) and starts no other.
"""
import atexit
import os
import threading

from numba.core.compiler_lock import global_compiler_lock

_THREADS = set()
_STOP = threading.Event()


def compile_later(records):
    """Compile ``records`` (those without native code yet) in a background thread;
    returns the thread."""
    thread = threading.Thread(target=_compile, args=(list(records), os.getpid()),
                              name="tapegrad-compile", daemon=True)
    _THREADS.add(thread)
    thread.start()
    return thread


def _compile(records, pid):
    from .llvm_tape import CompileError, CompiledTape
    try:
        for r in records:
            if _STOP.is_set() or os.getpid() != pid:
                return
            if r.native is not None:
                continue
            try:
                with global_compiler_lock:
                    native = CompiledTape(r)
            except CompileError:        # (stays interpreted, as compile(strict=False))
                continue
            r.native = native
    finally:
        _THREADS.discard(threading.current_thread())


@atexit.register
def _stop():
    _STOP.set()
    for thread in list(_THREADS):
        thread.join()


def _in_child():
    global_compiler_lock.release()
    _THREADS.clear()


os.register_at_fork(before=global_compiler_lock.acquire,
                    after_in_parent=global_compiler_lock.release, after_in_child=_in_child)

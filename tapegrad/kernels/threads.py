"""How the parallel kernels share the cores with the rest of the machine.

Numba's OpenMP threads meet at a barrier after each parallel kernel, and libgomp's
threads wait there by spinning (300,000 turns by default) before they sleep.  When
another process holds one of the cores, the thread that the OS parked behind it arrives
late and the spinning one burns the other core meanwhile: on a 2-core machine with one
core busy, a 108-op chain over 200,000 values took 3x its quiet time (worse than one
thread).  A short spin keeps the quiet time and costs a busy core about its share:

    GOMP_SPINCOUNT   quiet    one core busy     (2 cores, 2 Numba threads, one run)
    300,000 (gomp)   96 ms    288-496 ms
    10,000           99 ms    174 ms
    PASSIVE policy   114 ms   145 ms
    (1 thread)       145 ms   145 ms

So tapegrad sets ``GOMP_SPINCOUNT=10000`` unless the user chose (``OMP_WAIT_POLICY`` or
``GOMP_SPINCOUNT`` set).  libgomp reads it once, when it is loaded: importing PyTorch
before tapegrad loads it first, with the user's environment as it was then.
"""
import ctypes
import os
import threading


def _gomp_loaded():
    try:
        with open("/proc/self/maps") as f:
            return any("libgomp" in line for line in f)
    except OSError:
        return False


_USERS_SPIN = "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ
# libgomp loaded before tapegrad (PyTorch imported first) spins as long as it chose then
LONG_SPIN = not _USERS_SPIN and _gomp_loaded()
if not _USERS_SPIN:
    os.environ["GOMP_SPINCOUNT"] = "10000"


# -- BLAS --------------------------------------------------------------------------------
# NumPy's OpenBLAS keeps its own pool of threads, which spin after each product as
# libgomp's do after each parallel kernel.  On 2 cores a product on 2 BLAS threads right
# after a parallel kernel waits for a core that a spinning thread holds: a 1024-wide MLP
# step took 11 ms instead of 1.3 ms once PyTorch (libgomp's default spin) was imported
# first.  So tapegrad's own products run BLAS on the calling thread (``one_blas_thread``),
# but for large ones; the user's NumPy keeps its setting.  Found by symbol in the OpenBLAS the process loaded
# (Linux); with another BLAS, or elsewhere, nothing changes (threadpoolctl's
# ``threadpool_limits(1, "blas")`` limits any of them).
_BLAS = []                    # [(get, set)] once looked up; [None] if there is none
_BLAS_LOCK = threading.Lock()
_BLAS_HELD = [0, 0]           # callers inside one_blas_thread, the count to restore


def _openblas():
    """(get_num_threads, set_num_threads) of the loaded OpenBLAS, or None."""
    try:
        with open("/proc/self/maps") as f:
            paths = sorted({line.split()[-1] for line in f
                            if "openblas" in line.lower() and line.split()[-1].startswith("/")})
    except OSError:
        return None
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix, suffix in (("scipy_", "64_"), ("", "64_"), ("scipy_", ""), ("", "")):
            get = getattr(lib, f"{prefix}openblas_get_num_threads{suffix}", None)
            put = getattr(lib, f"{prefix}openblas_set_num_threads{suffix}", None)
            if get is not None and put is not None:
                get.restype, put.argtypes = ctypes.c_int, [ctypes.c_int]
                return get, put
    return None


BLAS_PARALLEL_MIN = 1 << 23   # multiply-adds from which a product keeps BLAS's threads ...
# ... unless libgomp spins long (LONG_SPIN): a 512-wide MLP step took 10-14 ms, 6 ms on one


class one_blas_thread:
    """``with one_blas_thread(macs):`` BLAS on the calling thread alone inside, for a
    product of fewer than ``BLAS_PARALLEL_MIN`` multiply-adds (the previous count back
    after the last caller leaves; any thread may enter).  (A class, not a generator:
    it is entered at every product, and a generator's context manager cost 2 us.)"""
    __slots__ = ("blas",)

    def __init__(self, macs=0):
        self.blas = None
        if macs < BLAS_PARALLEL_MIN or LONG_SPIN:
            if not _BLAS:
                _BLAS.append(_openblas())
            self.blas = _BLAS[0]

    def __enter__(self):
        blas = self.blas
        if blas is not None:
            with _BLAS_LOCK:
                if _BLAS_HELD[0] == 0:
                    _BLAS_HELD[1] = blas[0]()
                    blas[1](1)
                _BLAS_HELD[0] += 1

    def __exit__(self, *exc):
        blas = self.blas
        if blas is not None:
            with _BLAS_LOCK:
                _BLAS_HELD[0] -= 1
                if _BLAS_HELD[0] == 0:
                    blas[1](_BLAS_HELD[1])

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
import os

if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
    os.environ["GOMP_SPINCOUNT"] = "10000"

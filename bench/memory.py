"""Peak memory of one run, two ways.

rss: growth of the process's peak resident set during the run (Linux: the peak is reset
     through /proc/self/clear_refs first).  Sees every allocator (torch, XLA, Numba), but
     memory an earlier row already mapped and freed is reused without growing the RSS.
traced: tracemalloc's peak of Python-heap and NumPy allocations made during the run.
     Deterministic, but blind to torch's and XLA's own allocators, and it slows the run,
     so it gets a run of its own.
"""
from __future__ import annotations

import tracemalloc

_STATUS = "/proc/self/status"


def _status_kb(field):
    with open(_STATUS) as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1])
    raise KeyError(field)


def peak_rss_growth(run):
    """(run(), bytes the peak RSS rose above the RSS at the start; None off Linux)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")                      # reset VmHWM to the current RSS
        before = _status_kb("VmRSS")
    except OSError:
        return run(), None
    out = run()
    return out, max(_status_kb("VmHWM") - before, 0) * 1024


def peak_traced(run):
    """(run(), peak bytes allocated through tracemalloc-visible allocators during it)."""
    tracemalloc.start()
    try:
        out = run()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

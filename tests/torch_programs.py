"""Programs that run with ``m = torch`` and with ``m = tapegrad``, for the tests that
compare the two: a registry, and a run's result as plain Python."""
import numpy as np
import torch

import tapegrad


def registry():
    """(programs by name, a decorator that adds one)."""
    programs = {}

    def program(fn):
        programs[fn.__name__] = fn
        return fn
    return programs, program


def plain(r):
    """A result as plain Python: tensors and arrays as nested lists."""
    if isinstance(r, (list, tuple)):
        return [plain(v) for v in r]
    if isinstance(r, (torch.Tensor, tapegrad.Tensor)):
        return np.asarray(r.detach().numpy(), np.float64).tolist()
    if isinstance(r, np.ndarray):
        return r.tolist()
    return r


def run(prog, m):
    """``prog(m)`` as plain Python, or ("error", its type, the start of its message)."""
    try:
        return plain(prog(m))
    except Exception as e:         # noqa: BLE001 (the error is the answer to compare)
        return ("error", type(e).__name__, str(e)[:40])

"""Shared fixtures for the tests that compare tapegrad with PyTorch."""
import pytest
import torch

import tapegrad


@pytest.fixture
def torch_float64():
    """tapegrad's contract makes float64 the default dtype (API.md): compare like with like."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(before)


@pytest.fixture
def both(torch_float64):
    """``both(program)`` runs ``program(m)`` with m = torch, then m = tapegrad."""
    return lambda program: (program(torch), program(tapegrad))

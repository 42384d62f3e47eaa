"""``tapegrad.autograd``: PyTorch's autograd entry points over the tape engine."""
from . import graph  # noqa: F401
from .engine import backward, grad
from .gradcheck import gradcheck

__all__ = ["backward", "grad", "gradcheck", "graph"]

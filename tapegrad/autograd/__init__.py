"""``tapegrad.autograd``: PyTorch's autograd entry points over the tape engine."""
from . import function, graph  # noqa: F401
from .engine import backward, grad
from .function import Function, FunctionCtx, once_differentiable
from .gradcheck import gradcheck

__all__ = ["Function", "FunctionCtx", "backward", "grad", "gradcheck", "graph",
           "once_differentiable"]

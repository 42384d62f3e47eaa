"""``tapegrad.special``: PyTorch's special functions that tapegrad composes of its
elementwise ops (``gammaln``, ``multigammaln``)."""
from .more_ops import lgamma as gammaln, multigammaln

__all__ = ["gammaln", "multigammaln"]

"""``tapegrad.optim``: SGD, Adam, AdamW and learning-rate schedulers, with PyTorch's API.

A step updates each parameter in place under no_grad with one compiled pass
(``_kernels``) over its values, gradient and state."""
from . import lr_scheduler
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["Adam", "AdamW", "Optimizer", "SGD", "lr_scheduler"]

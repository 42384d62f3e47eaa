"""``tapegrad.optim``: SGD, Adam, AdamW, RMSprop, Adagrad and learning-rate schedulers, with
PyTorch's API.

A step updates each parameter in place under no_grad with one compiled pass
(``_kernels``) over its values, gradient and state."""
from . import lr_scheduler
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .rmsprop import Adagrad, RMSprop
from .sgd import SGD

__all__ = ["Adagrad", "Adam", "AdamW", "Optimizer", "RMSprop", "SGD", "lr_scheduler"]

"""``tapegrad.nn``: modules, layers, losses, ``functional`` and ``init``, with PyTorch's API."""
from . import functional, init
from .activation import GELU, LeakyReLU, LogSoftmax, ReLU, Sigmoid, Softmax, Softplus, Tanh
from .container import Sequential
from .dropout import Dropout
from .linear import Identity, Linear
from .loss import BCEWithLogitsLoss, CrossEntropyLoss, MSELoss
from .module import Module
from .parameter import Parameter

__all__ = ["BCEWithLogitsLoss", "CrossEntropyLoss", "Dropout", "GELU", "Identity", "LeakyReLU",
           "Linear", "LogSoftmax", "MSELoss", "Module", "Parameter", "ReLU", "Sequential",
           "Sigmoid", "Softmax", "Softplus", "Tanh", "functional", "init"]

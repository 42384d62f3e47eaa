"""``tapegrad.nn``: modules, layers, losses, ``functional`` and ``init``, with PyTorch's API."""
from . import functional, init
from .activation import (ELU, GELU, Hardtanh, LeakyReLU, LogSoftmax, Mish, PReLU, ReLU, Sigmoid,
                         SiLU, Softmax, Softplus, Softsign, Tanh)
from .container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from .conv import Conv1d, Conv2d
from .dropout import Dropout
from .flatten import Flatten, Unflatten
from .linear import Identity, Linear
from .loss import (BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, KLDivLoss, L1Loss,
                   MSELoss, NLLLoss, SmoothL1Loss)
from .module import Module
from .normalization import BatchNorm1d, LayerNorm
from .parameter import Parameter
from .pooling import MaxPool1d, MaxPool2d
from .sparse import Embedding

__all__ = ["BCEWithLogitsLoss", "CrossEntropyLoss", "Dropout", "GELU", "Identity", "LeakyReLU",
           "Linear", "LogSoftmax", "MSELoss", "Module", "Parameter", "ReLU", "Sequential",
           "Sigmoid", "Softmax", "Softplus", "Tanh", "functional", "init"]
__all__ += ["BatchNorm1d", "Conv1d", "Conv2d", "Embedding", "Flatten", "LayerNorm",
            "MaxPool1d", "MaxPool2d", "Unflatten"]
__all__ += ["ModuleDict", "ModuleList", "ParameterDict", "ParameterList"]
__all__ += ["BCELoss", "ELU", "Hardtanh", "HuberLoss", "KLDivLoss", "L1Loss", "Mish", "NLLLoss",
            "PReLU", "SiLU", "SmoothL1Loss", "Softsign"]

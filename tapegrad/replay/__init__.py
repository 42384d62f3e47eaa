"""Record once, replay compiled: ``trace``, the functional ``grad`` / ``value_and_grad``."""
from .record import ReplayError
from .traced import GuardFailure, Traced, trace
from .serialize import load
from .transforms import grad, value_and_grad
from .validate import ReplayFileError
from ..tracing import TracerWarning

__all__ = ["GuardFailure", "ReplayError", "ReplayFileError", "TracerWarning", "Traced", "grad",
           "load", "trace", "value_and_grad"]

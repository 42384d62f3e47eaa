"""Record once, replay compiled: ``trace``, the functional ``grad`` / ``value_and_grad``."""
from .record import ReplayError
from .traced import GuardFailure, Traced, trace
from .transforms import grad, value_and_grad

__all__ = ["GuardFailure", "ReplayError", "Traced", "grad", "trace", "value_and_grad"]

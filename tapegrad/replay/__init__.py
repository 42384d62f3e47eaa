"""Record once, replay compiled: ``trace``, the functional ``grad`` / ``value_and_grad``."""
from .record import ReplayError
from .traced import GuardFailure, Traced, trace

__all__ = ["GuardFailure", "ReplayError", "Traced", "trace"]

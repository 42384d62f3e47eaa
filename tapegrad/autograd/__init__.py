"""``tapegrad.autograd``: PyTorch's autograd entry points over the tape engine."""
from . import anomaly, forward_ad, function, functional, graph  # noqa: F401
from .anomaly import (detect_anomaly, is_anomaly_check_nan_enabled, is_anomaly_enabled,
                      set_detect_anomaly)
from .entry_points import backward, grad
from .function import Function, FunctionCtx, once_differentiable
from .gradcheck import gradcheck, gradgradcheck
from .nan_trace import NanReport, NonFiniteForwardWarning, explain_nan
from .variable import Variable

__all__ = ["Function", "FunctionCtx", "NanReport", "NonFiniteForwardWarning", "Variable",
           "backward", "detect_anomaly", "explain_nan", "forward_ad", "functional", "grad", "gradcheck", "gradgradcheck", "graph", "is_anomaly_check_nan_enabled", "is_anomaly_enabled", "once_differentiable",
           "set_detect_anomaly"]

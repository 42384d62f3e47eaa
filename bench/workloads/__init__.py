"""Workload registry, in run order."""
from . import first_gradient, mlp, scalar_chain, small_vector_ops

WORKLOADS = {w.NAME: w for w in (scalar_chain, small_vector_ops, mlp, first_gradient)}

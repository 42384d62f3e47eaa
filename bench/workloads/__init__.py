"""Workload registry, in run order."""
from . import first_gradient, mlp, mlp_train, scalar_chain, small_vector_ops

WORKLOADS = {w.NAME: w for w in (scalar_chain, small_vector_ops, mlp, mlp_train, first_gradient)}

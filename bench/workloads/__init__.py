"""Workload registry, in run order."""
from . import (faw, first_gradient, gmm, logreg, mlp, mlp_train, replay, scalar_chain,
               small_vector_ops)

WORKLOADS = {w.NAME: w for w in (scalar_chain, faw, small_vector_ops, mlp, mlp_train, replay,
                                 first_gradient, logreg, gmm)}

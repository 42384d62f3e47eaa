"""The adbench workload registry, in run order (gmm is the main suite's, by import)."""
from ..workloads import gmm
from . import ba, det, ht, kmeans, llsq, lse, lstm, nested, ode

WORKLOADS = {w.NAME: w for w in (gmm, ba, ht, lstm, kmeans, lse, llsq, ode, det, nested)}

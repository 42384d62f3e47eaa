"""ADBench / GradBench problems as bench workloads: ``python -m bench.adbench --help``.

One module per problem, each written from the problem's published definition (the ADBench
paper, Srajer, Kalra, Fitzgibbon 2018, and GradBench's eval descriptions) in the torch API,
and each a workload in the harness's format (bench/harness.py):

  ba       bundle adjustment: sum of squared reprojection residuals, d/d cameras, points
  ht       hand tracking, simplified: skinning along a chain of posed bones, d/d angles
  lstm     ADBench's LSTM objective (2 layers, diagonal weights), d/d all weights
  kmeans   sum_i min_k |x_i - c_k|^2: gradient and a Hessian-vector product (double backward)
  lse      log-sum-exp of a vector from max, exp, sum, log
  llsq     GradBench's linear least squares, written as a loop over the rows
  ode      RK4 integration of GradBench's ODE, written with slices, d/d parameters, y(0)
  det      determinant by expansion in minors, over scalars
  nested   a saddle point by nested gradient steps: reverse over reverse
  gmm      the main suite's GMM log-likelihood (bench/workloads/gmm.py), by import

common.py holds what they share; registry.py the registry (``WORKLOADS``), kept out of this
file so that ``python -m bench.adbench`` sets up BLAS threads before NumPy loads.  Not in
``python -m bench``'s registry: the run is long.
"""


def __getattr__(name):
    if name == "WORKLOADS":
        from .registry import WORKLOADS
        return WORKLOADS
    raise AttributeError(name)

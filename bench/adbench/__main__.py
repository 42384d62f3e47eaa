"""python -m bench.adbench: the ADBench / GradBench problems (bench/adbench/), timed and
checked by the same machinery as ``python -m bench``, with the same options.

Exit status: 0 all rows ok/missing/skipped, 1 a row raised an error, 2 a framework
computed a wrong value or gradient."""
import sys

# first: bench.__main__ sets the BLAS thread variables and imports torch before NumPy loads
from ..__main__ import main as bench_main

OUTPUTS = {"json": "bench/out/adbench/results.json", "plots": "bench/out/adbench/plots",
           "publish": ("bench/adbench/RESULTS.md", "bench/adbench/figures")}


def main(argv=None):
    from .registry import WORKLOADS
    return bench_main(argv, WORKLOADS, prog="python -m bench.adbench", doc=__doc__,
                      outputs=OUTPUTS)


if __name__ == "__main__":
    sys.exit(main())

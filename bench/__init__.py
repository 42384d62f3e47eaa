"""tapegrad benchmark suite: `python -m bench --help`.

workloads/   one module per workload, each built in every framework that can express it
frameworks   framework names, imports, thread settings, JAX/Numba/trace preparation
harness      correctness pre-check, warm-up, timed repeats, memory, ratios
memory       peak RSS growth and tracemalloc peak of one run
machine      CPU, cores, library versions, BLAS and thread settings
report       console table, JSON, markdown;  plots: PNGs (matplotlib, optional)
breakdown    where tapegrad's time goes on the scalar chain (`python -m bench.breakdown`)
large_arrays time and peak/after-del RSS of one 10^5..5x10^7-element op chain, a child per
             size (`python -m bench.large_arrays`)
adbench/     the ADBench / GradBench problems, a registry of their own (`python -m bench.adbench`)
"""

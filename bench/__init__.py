"""tapegrad benchmark suite: `python -m bench --help`.

Workloads live in bench/workloads/, the shared timing/correctness harness in
bench/harness.py, machine info and table/JSON/markdown output in bench/report.py.
"""

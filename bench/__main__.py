"""python -m bench: time tapegrad against PyTorch, JAX, HIPS autograd, micrograd and
hand-written gradients; check every gradient first.

Exit status: 0 all rows ok/missing/skipped, 1 a row raised an error, 2 a framework
computed a wrong value or gradient."""
import argparse
import os
import sys

from .machine import OPENBLAS_OVERRIDES

BLAS_THREAD_VARS = ("OPENBLAS_NUM_THREADS",)  # not MKL_NUM_THREADS: torch takes its default from it


def _prepare_environment(argv):
    """Must run before numpy or torch load: BLAS thread pools and OpenBLAS's CPU detection
    read the environment once.  Drops OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE in this process
    only (children inherit that) and returns what they were, for the record."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--threads", type=int, default=1)
    threads = p.parse_known_args(argv)[0].threads
    if threads > 0:
        for var in BLAS_THREAD_VARS:
            os.environ[var] = str(threads)
    return threads, {var: os.environ.pop(var, None) for var in OPENBLAS_OVERRIDES}


_THREADS, _OPENBLAS_UNSET = _prepare_environment(sys.argv[1:])
try:
    # before tapegrad's parallel kernels start Numba's OpenMP pool: torch imported after it
    # shares that libgomp (same soname), and its set_num_threads then makes every torch op
    # wait ~2 ms (torch-mt measured 10x slower)
    import torch  # noqa: E402, F401
except ImportError:
    pass

from rich.console import Console  # noqa: E402
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn  # noqa: E402

from . import plots, report  # noqa: E402
from .frameworks import DESCRIPTIONS  # noqa: E402
from .harness import Plan, plan_cases, run_all  # noqa: E402
from .machine import machine_info  # noqa: E402
from .workloads import WORKLOADS  # noqa: E402


def _names(text, known, what):
    names = [n.strip() for n in text.split(",") if n.strip()]
    bad = [n for n in names if n not in known]
    if bad:
        raise SystemExit(f"unknown {what}: {', '.join(bad)} (known: {', '.join(known)})")
    return names


def _sizes(options, workloads):
    """--sizes 100,1000 (every workload) / --sizes faw:100,1000 (one) -> {name or None: sizes}."""
    out = {}
    for opt in options or ():
        name, _, values = opt.rpartition(":")
        if name and name not in workloads:
            raise SystemExit(f"unknown workload in --sizes: {name}")
        out[name or None] = [int(v) if v.strip().isdigit() else v.strip()
                             for v in values.split(",") if v.strip()]
    return out


# where a run writes: the JSON rows, the PNG plots, and what --publish writes
OUTPUTS = {"json": "bench/out/results.json", "plots": "bench/out/plots",
           "publish": ("bench/RESULTS.md", "bench/figures")}


def parse(argv, workloads=None, prog="python -m bench", doc=None, outputs=None):
    """The options of a run over ``workloads`` (default: the registry of bench/workloads)."""
    workloads = WORKLOADS if workloads is None else workloads
    outputs = OUTPUTS if outputs is None else outputs
    p = argparse.ArgumentParser(prog=prog, description=(doc or __doc__).split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="frameworks:\n" + "\n".join(
                                    f"  {k:18s} {v}" for k, v in DESCRIPTIONS.items()))
    p.add_argument("--workloads", default=",".join(workloads),
                   help=f"comma list of {', '.join(workloads)} (default: all)")
    p.add_argument("--frameworks", default=None, help="comma list (default: all; see below)")
    p.add_argument("--sizes", action="append", metavar="[WORKLOAD:]SIZES",
                   help="problem sizes instead of the workload's own, for every workload or "
                        "for one, repeatable: --sizes faw:100,300 --sizes first_gradient:cold")
    p.add_argument("--quick", action="store_true",
                   help="every workload at tiny sizes, few repeats: the smoke run of the tests")
    p.add_argument("--repeats", type=int, default=None,
                   help="timed repeats per row (default: adaptive, >=5 and about 1 s per row)")
    p.add_argument("--warmup", type=int, default=1, help="untimed runs after the check (default 1)")
    p.add_argument("--no-limits", action="store_true",
                   help="also run sizes above a framework's limit (JAX compile: minutes)")
    p.add_argument("--threads", type=int, default=1,
                   help="BLAS threads for the NumPy-based frameworks (default 1: tapegrad's "
                        "large elementwise kernels run on Numba's threads, all cores, and "
                        "OpenBLAS's spinning pool would compete with them); 0 = library "
                        "default. torch rows: torch = 1 thread, torch-mt = torch's default")
    p.add_argument("--json", default=outputs["json"], help="JSON output path")
    p.add_argument("--markdown", default=None, help="also write the markdown tables here")
    p.add_argument("--plots", default=outputs["plots"], help="folder for the PNG plots")
    p.add_argument("--publish", action="store_true",
                   help=f"write {outputs['publish'][0]} and {outputs['publish'][1]}/ "
                        "(the committed full run)")
    p.add_argument("--corrupt-grad", default=None, help=argparse.SUPPRESS)  # test hook
    args = p.parse_args(argv)
    if args.publish:
        args.markdown, args.plots = outputs["publish"]
    if args.repeats is not None and args.repeats < 1:
        raise SystemExit("--repeats must be >= 1")
    return args


def main(argv=None, workloads=None, prog="python -m bench", doc=None, outputs=None):
    """A run over ``workloads`` ({name: workload module}; default: bench/workloads' registry).
    bench/adbench/__main__.py passes its own registry, program name and output paths."""
    argv = sys.argv[1:] if argv is None else argv
    registry = WORKLOADS if workloads is None else workloads
    args = parse(argv, registry, prog, doc, outputs)
    workloads = [registry[n] for n in _names(args.workloads, list(registry), "workload")]
    frameworks = (set(_names(args.frameworks, list(DESCRIPTIONS), "framework"))
                  if args.frameworks else None)
    sizes = _sizes(args.sizes, registry)
    plan = Plan(args.repeats, args.warmup, args.quick, not args.no_limits, args.corrupt_grad)
    cases = plan_cases(workloads, frameworks, sizes, args.quick)
    total = sum(len(fws) for _, _, fws in cases)
    err = Console(stderr=True)
    with Progress(TextColumn("{task.description:48s}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err) as bar:
        task = bar.add_task("", total=total)
        rows = run_all(cases, plan, on_start=lambda s: bar.update(task, description=s),
                       on_done=lambda: bar.advance(task))
    info = machine_info(_THREADS, _OPENBLAS_UNSET)
    info["argv"] = argv
    report.print_console(rows, info, Console(width=None if sys.stdout.isatty() else 230))
    report.write_json(args.json, rows, info)
    err.print(f"wrote {args.json}")
    figures = plots.write_plots(rows, workloads, args.plots)
    err.print(f"wrote {len(figures)} plots to {args.plots}" if figures
              else "no plots written (matplotlib is not installed)")
    if args.markdown:
        report.write_markdown(args.markdown, rows, info, figures)
        err.print(f"wrote {args.markdown}")
    report.explain_failures(rows, err)
    return report.exit_code(rows)


if __name__ == "__main__":
    sys.exit(main())

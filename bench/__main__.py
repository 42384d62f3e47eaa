"""python -m bench [--quick] [--workloads a,b] [--frameworks x,y] [--repeats N]
                  [--threads N] [--json PATH] [--markdown PATH]"""
import argparse
import os
import sys

THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def _pin_threads(argv):
    """--threads must act before numpy/torch load their thread pools, i.e. before any import."""
    n = argparse.ArgumentParser(add_help=False)
    n.add_argument("--threads", type=int, default=1)
    threads = n.parse_known_args(argv)[0].threads
    if threads > 0:
        for var in THREAD_VARS:
            os.environ[var] = str(threads)
    return threads


_pin_threads(sys.argv[1:])

from rich.console import Console  # noqa: E402

from . import report  # noqa: E402
from .harness import Plan, run_all  # noqa: E402
from .workloads import WORKLOADS  # noqa: E402

ALL_FRAMEWORKS = sorted({f for w in WORKLOADS.values() for f in w.FRAMEWORKS})


def _names(text, known, what):
    names = [n.strip() for n in text.split(",") if n.strip()]
    bad = [n for n in names if n not in known]
    if bad:
        raise SystemExit(f"unknown {what}: {', '.join(bad)} (known: {', '.join(known)})")
    return names


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    p.add_argument("--workloads", default=",".join(WORKLOADS),
                   help=f"comma list of {', '.join(WORKLOADS)}")
    p.add_argument("--frameworks", default=None, help=f"comma list of {', '.join(ALL_FRAMEWORKS)}")
    p.add_argument("--repeats", type=int, default=None,
                   help="timed repeats per case (default: adaptive, >=5 and ~1 s per case)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch/BLAS/OpenMP threads (default 1: tapegrad is single-threaded, and on "
                        "small VMs torch's idle pool threads add ms-long wake-up stalls); "
                        "0 = library defaults")
    p.add_argument("--quick", action="store_true", help="tiny sizes, whole run well under 60 s")
    p.add_argument("--json", default="bench/out/results.json", help="JSON output path")
    p.add_argument("--markdown", default=None, help="also write a markdown results table here")
    args = p.parse_args(argv)

    workloads = [WORKLOADS[n] for n in _names(args.workloads, list(WORKLOADS), "workload")]
    frameworks = set(_names(args.frameworks, ALL_FRAMEWORKS, "framework")) if args.frameworks else None
    if args.repeats is not None and args.repeats < 1:
        raise SystemExit("--repeats must be >= 1")

    if args.threads > 0:
        try:
            import torch
            torch.set_num_threads(args.threads)
        except ImportError:
            pass
    err = Console(stderr=True)
    info = report.machine_info()
    info["threads_setting"] = args.threads or "library default"
    rows = run_all(workloads, frameworks, Plan(args.repeats, args.quick),
                   progress=lambda s: err.print(f"[dim]running {s}[/]"))
    report.print_console(rows, info)
    report.write_json(args.json, rows, info, sys.argv)
    err.print(f"wrote {args.json}")
    if args.markdown:
        report.write_markdown(args.markdown, rows, info)
        err.print(f"wrote {args.markdown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

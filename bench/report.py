"""Machine info and output: rich console table, JSON rows, markdown table."""
from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

COLUMNS = ["workload", "size", "dtype", "framework", "status", "median", "min", "max",
           "n", "ns/op", "vs torch", "vs tapegrad", "message"]


def _version(dist):
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def machine_info() -> dict:
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), platform.processor()) \
        if os.path.exists("/proc/cpuinfo") else platform.processor()
    info = dict(cpu=cpu, logical_cores=os.cpu_count(),
                usable_cores=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
                platform=platform.platform(), python=sys.version.split()[0],
                **{k: _version(k) for k in ("numpy", "numba", "llvmlite", "torch", "micrograd",
                                            "autograd", "tapegrad")},
                thread_env={v: os.environ.get(v) for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                                            "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")},
                timestamp=datetime.datetime.now().isoformat(timespec="seconds"))
    try:
        import torch
        info["torch_num_threads"] = torch.get_num_threads()
    except ImportError:
        info["torch_num_threads"] = None
    try:
        info["git"] = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True,
                                     text=True, cwd=Path(__file__).parent).stdout.strip() or None
    except OSError:
        info["git"] = None
    return info


def _time(s):
    if s is None:
        return ""
    for unit, scale in (("s", 1), ("ms", 1e-3), ("µs", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s * 1e9:.3g} ns"


def _ratio(r):
    return "" if r is None else f"{r:.3g}x"


def cells(r: dict) -> list[str]:
    return [r["workload"], r["size"], r["dtype"], r["framework"], r["status"],
            _time(r["median_s"]), _time(r["min_s"]), _time(r["max_s"]),
            str(r["repeats"] or ""), "" if r["ns_per_op"] is None else f"{r['ns_per_op']:.0f}",
            _ratio(r["vs_torch"]), _ratio(r["vs_tapegrad"]), r["message"] or r["note"]]


def print_console(rows, info):
    from rich.console import Console
    from rich.table import Table

    style = {"ok": "green", "FAIL": "bold red", "error": "red", "missing": "yellow"}
    table = Table(title="tapegrad bench (vs X = time / time of X, lower is faster)")
    for c in COLUMNS:
        table.add_column(c, overflow="fold", max_width=60 if c == "message" else None,
                         justify="right" if c in ("median", "min", "max", "n", "ns/op",
                                                  "vs torch", "vs tapegrad") else "left")
    for r in rows:
        cs = cells(r)
        cs[4] = f"[{style[r['status']]}]{r['status']}[/]"
        table.add_row(*cs)
    console = Console(width=None if sys.stdout.isatty() else 220)
    console.print(table)
    console.print(", ".join(f"{k}={v}" for k, v in info.items()), style="dim")


def write_json(path, rows, info, argv):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"machine": info, "argv": argv, "rows": rows}, indent=1))


def write_markdown(path, rows, info):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    out = ["# Benchmark results", "",
           f"Machine: {info['cpu']}, {info['usable_cores']} usable cores; Python {info['python']}, "
           f"numpy {info['numpy']}, numba {info['numba']}, torch {info['torch']} "
           f"(torch threads {info['torch_num_threads']}, --threads {info.get('threads_setting')}); tapegrad {info['tapegrad']} (git {info['git']}); "
           f"{info['timestamp']}.", "",
           "Times are medians over the repeats (n); `vs X` = this time / X's time in the same run "
           "(lower is faster). FAIL = wrong value or gradient (not timed).", ""]
    cols = [c for c in COLUMNS if c != "workload"]
    for wl in dict.fromkeys(r["workload"] for r in rows):
        out += [f"## {wl}", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        for r in rows:
            if r["workload"] == wl:
                out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells(r)[1:]) + " |")
        out.append("")
    path.write_text("\n".join(out))

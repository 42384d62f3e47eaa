"""What a result was measured on: CPU, cores, library versions, BLAS and thread settings."""
from __future__ import annotations

import datetime
import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from .frameworks import torch_default_threads

DISTRIBUTIONS = ("tapegrad", "numpy", "numba", "llvmlite", "torch", "jax", "jaxlib", "autograd",
                 "micrograd", "matplotlib", "rich", "tqdm")
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
               "NUMBA_NUM_THREADS", "XLA_FLAGS")
# OpenBLAS tuning overrides some hosts set globally: the benchmark process drops them so
# that OpenBLAS detects this CPU itself (see bench/__main__.py)
OPENBLAS_OVERRIDES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def _version(dist):
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _cpuinfo():
    """(model name, physical core count) from /proc/cpuinfo; (platform guess, None) elsewhere."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine(), None
    model, cores, phys = None, set(), None
    for line in text.splitlines():
        key, _, value = (s.strip() for s in line.partition(":"))
        if key == "model name" and model is None:
            model = value
        elif key == "physical id":
            phys = value
        elif key == "core id":
            cores.add((phys, value))
    return model or platform.machine(), len(cores) or None


def _blas():
    """numpy's BLAS as numpy reports it, and torch's parallel settings if torch was used."""
    out = {}
    try:
        import numpy as np
        deps = np.show_config(mode="dicts")["Build Dependencies"]
        out["numpy_blas"] = {k: deps["blas"].get(k) for k in ("name", "version", "openblas configuration")}
    except Exception as e:                               # older numpy: no dict mode
        out["numpy_blas"] = f"unknown ({type(e).__name__})"
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        out["torch_parallel"] = [line.strip() for line in torch.__config__.parallel_info().splitlines()
                                 if line.strip() and not line.startswith("---")]
    if "numba" in sys.modules:
        import numba
        out["numba_threading_layer"] = numba.config.THREADING_LAYER
        out["numba_num_threads"] = numba.config.NUMBA_NUM_THREADS
    return out


def machine_info(threads, openblas_unset: dict) -> dict:
    """Call after the run: torch/numba details are read only from libraries it imported."""
    cpu, physical = _cpuinfo()
    try:
        git = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True,
                             text=True, cwd=Path(__file__).parent).stdout.strip() or None
    except OSError:
        git = None
    return dict(
        cpu=cpu, logical_cores=os.cpu_count(), physical_cores=physical,
        usable_cores=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        platform=platform.platform(), python=sys.version.split()[0],
        versions={d: _version(d) for d in DISTRIBUTIONS},
        blas_threads_setting=threads or "library default",
        torch_threads={"torch": 1, "torch-mt": torch_default_threads()},
        thread_env={v: os.environ.get(v) for v in THREAD_VARS},
        openblas_env_unset_in_process=openblas_unset,
        **_blas(), git=git, timestamp=datetime.datetime.now().isoformat(timespec="seconds"))


def summary(info) -> str:
    """One paragraph for the console and RESULTS.md."""
    v = {k: x for k, x in info["versions"].items() if x}
    unset = {k: x for k, x in info["openblas_env_unset_in_process"].items() if x is not None}
    blas = info.get("numpy_blas")
    blas = f"{blas.get('name')} {blas.get('version')}" if isinstance(blas, dict) else blas
    return (f"{info['cpu']}, {info['physical_cores']} physical / {info['logical_cores']} logical "
            f"cores ({info['usable_cores']} usable); {info['platform']}; Python {info['python']}; "
            + ", ".join(f"{k} {x}" for k, x in v.items())
            + f"; numpy BLAS {blas}, BLAS threads {info['blas_threads_setting']}; torch threads "
            f"{info['torch_threads']}; numba threading {info.get('numba_threading_layer')}; "
            f"OpenBLAS overrides unset in the benchmark process: {unset or 'none were set'}; "
            f"git {info['git']}; {info['timestamp']}.")

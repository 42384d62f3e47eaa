"""Shared timing harness: framework loading, correctness check, timing loop, ratios.

A workload module provides::

    NAME, FRAMEWORKS                      # framework names it can express
    configs(quick) -> list[Config]        # sizes / dtypes to run
    reference(cfg) -> (value, grad)       # float64 numpy reference (grad may be None)
    build(fw, cfg) -> Impl                # raises Missing if fw cannot be imported
    ops(fw, cfg) -> int | None            # recorded graph ops per timed run

The harness turns every (workload, config, framework) into exactly one row:
status "ok" (timed), "FAIL" (wrong value/gradient, not timed), "error"
(exception, message recorded) or "missing" (framework not importable).
"""
from __future__ import annotations

import gc
import importlib
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

# tolerance on max|got - ref| / max|ref|, by dtype
TOL = {"float64": 1e-8, "float32": 2e-3, "default": 2e-3}  # default: framework's own


class Missing(Exception):
    """The framework is not installed / not importable."""


@dataclass
class Config:
    size: str                      # label shown in tables, e.g. "n=1000"
    dtype: str = "float64"
    params: dict = field(default_factory=dict)


@dataclass
class Impl:
    run: Callable[[], Any]                          # the timed part
    read: Callable[[Any], tuple] = lambda out: out  # run output -> (value, grad or None); untimed
    reset: Callable[[], None] | None = None         # untimed, before every run (fresh leaves etc.)
    self_timed: bool = False   # run() returns (seconds, out): use its own clock (first_gradient)
    max_repeats: int | None = None
    note: str = ""


def load(name: str):
    """Import a framework module by bench name; raise Missing if it is not importable."""
    modname = {"micrograd": "micrograd.engine", "autograd": "autograd"}.get(name, name)
    try:
        return importlib.import_module(modname)
    except ImportError as e:
        raise Missing(f"{type(e).__name__}: {e}") from e


def to_numpy(t, dtype=np.float64) -> np.ndarray:
    """Tensor-ish (torch/tapegrad tensor, numpy array, float) -> ndarray (dtype=None: keep)."""
    if t is None:
        raise ValueError(".grad is None")
    if hasattr(t, "numpy"):
        t = t.numpy()
    return np.asarray(t, dtype=dtype)


def to_float(t) -> float:
    return float(t.item()) if hasattr(t, "item") else float(t)


def leaves(m, arrays, dtype: str):
    """Fresh requires_grad leaves, torch API (used for torch and tapegrad alike)."""
    dt = getattr(m, dtype)
    return [m.tensor(a, dtype=dt, requires_grad=True) for a in arrays]


def rel_err(got, ref) -> float:
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    if got.shape != ref.shape:
        raise ValueError(f"shape {got.shape} != reference shape {ref.shape}")
    scale = max(float(np.max(np.abs(ref))) if ref.size else 0.0, 1e-300)
    return float(np.max(np.abs(got - ref))) / scale if ref.size else 0.0


def _short(e: BaseException) -> str:
    frame = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
    where = f" [{frame.filename.split('/')[-1]}:{frame.lineno}]" if frame else ""
    return f"{type(e).__name__}: {e}"[:300] + where


def _once(impl: Impl):
    """One untimed reset + one timed run (gc paused, as timeit does); returns (seconds, output).
    No gc.collect() per sample: the pause lets thread pools doze off, and with more than one
    torch thread on a small VM the next run then measured their ~4 ms-per-op wake-up."""
    if impl.reset:
        impl.reset()
    gc.disable()
    try:
        t0 = time.perf_counter()
        out = impl.run()
        dt = time.perf_counter() - t0
    finally:
        gc.enable()
    return out if impl.self_timed else (dt, out)


@dataclass
class Plan:
    repeats: int | None   # fixed count, or None = adaptive
    quick: bool

    @property
    def budget_s(self):       # adaptive: stop once this much was spent ...
        return 0.15 if self.quick else 1.0

    @property
    def bounds(self):         # ... but take at least/at most this many samples
        return (3, 20) if self.quick else (5, 100)


def run_case(wl, fw: str, cfg: Config, plan: Plan, ref) -> dict:
    row = dict(workload=wl.NAME, size=cfg.size, dtype=cfg.dtype, framework=fw,
               status="ok", median_s=None, min_s=None, max_s=None, repeats=0,
               times_s=[], ops=None, ns_per_op=None, vs_torch=None, vs_tapegrad=None,
               max_rel_err=None, message="", note="")
    try:
        impl = wl.build(fw, cfg)
    except Missing as e:
        return {**row, "status": "missing", "message": str(e)}
    except Exception as e:
        return {**row, "status": "error", "message": "build: " + _short(e)}
    row["note"] = impl.note
    stage = "check"
    gc.collect()  # once per case, so the previous case's garbage is not ours
    try:
        # correctness first: a wrong answer is reported, never timed
        t_first, out = _once(impl)
        value, grad = impl.read(out)
        ref_value, ref_grad = ref
        errs = [rel_err(value, ref_value)]
        if ref_grad is not None and grad is not None:
            errs.append(rel_err(grad, ref_grad))
        row["max_rel_err"] = max(errs)
        if row["max_rel_err"] > TOL[cfg.dtype] or not np.isfinite(row["max_rel_err"]):
            return {**row, "status": "FAIL",
                    "message": f"value/grad rel err {row['max_rel_err']:.3g} > {TOL[cfg.dtype]:g}"}
        stage = "timing"
        times = []
        if impl.self_timed:
            times.append(t_first)      # each run is its own cold/warm start; keep the check run
        else:
            _once(impl)                # warm-up (the check run was the first)
        lo, hi = plan.bounds
        n_max = plan.repeats or hi
        if impl.max_repeats:
            n_max = min(n_max, impl.max_repeats)
        n_min = min(plan.repeats or lo, n_max)
        t_start = time.perf_counter()
        while len(times) < n_max:
            if len(times) >= n_min and plan.repeats is None \
                    and time.perf_counter() - t_start > plan.budget_s:
                break
            times.append(_once(impl)[0])
        row["ops"] = wl.ops(fw, cfg)
    except Exception as e:
        return {**row, "status": "error", "message": f"{stage}: " + _short(e)}
    row.update(times_s=times, repeats=len(times), median_s=float(np.median(times)),
               min_s=min(times), max_s=max(times))
    if row["ops"]:
        row["ns_per_op"] = row["median_s"] * 1e9 / row["ops"]
    return row


def add_ratios(rows: list[dict]) -> None:
    """vs_X = median time of this row / median time of framework X, same workload/size/dtype."""
    base = {}
    for r in rows:
        if r["status"] == "ok":
            base[(r["workload"], r["size"], r["dtype"], r["framework"])] = r["median_s"]
    for r in rows:
        if r["status"] != "ok":
            continue
        for other in ("torch", "tapegrad"):
            b = base.get((r["workload"], r["size"], r["dtype"], other))
            r[f"vs_{other}"] = r["median_s"] / b if b else None


def run_all(workloads, frameworks: set | None, plan: Plan, progress=print) -> list[dict]:
    rows = []
    for wl in workloads:
        for cfg in wl.configs(plan.quick):
            fws = [f for f in wl.FRAMEWORKS if frameworks is None or f in frameworks]
            if not fws:
                continue
            ref = wl.reference(cfg)
            for fw in fws:
                progress(f"{wl.NAME:17s} {cfg.size:10s} {cfg.dtype:8s} {fw}")
                rows.append(run_case(wl, fw, cfg, plan, ref))
    add_ratios(rows)
    return rows

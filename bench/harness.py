"""Shared harness: correctness pre-check, warm-up, timed repeats, memory, ratios.

A workload module provides::

    NAME, FRAMEWORKS              # framework names it can express, "tapegrad" first
    SIZES, QUICK_SIZES            # problem sizes of the full and of the --quick run
    XLABEL                        # what a size measures (plot axis); None: sizes are labels
    LIMITS                        # {framework: (largest size it runs at, why)}
    configs(size, quick) -> list[Config]
    reference(cfg) -> (value, grad)   # independent float64 reference (grad may be None)
    build(fw, cfg) -> Impl            # raises frameworks.Missing
    ops(fw, cfg) -> int | None        # graph ops per timed run (for ns/op)

Every (workload, config, framework) becomes exactly one row, with status
  ok              checked, then timed
  WRONG GRADIENT  the gradient disagrees with the reference or with tapegrad's (not timed)
  WRONG VALUE     the function value disagrees (not timed)
  error           an exception (message recorded)
  missing         the framework, or the tapegrad feature the row needs, is not available
  skipped         the size is above the framework's limit (``--no-limits`` runs it)
"""
from __future__ import annotations

import gc
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from . import memory
from .frameworks import Missing

# tolerance on max|got - expected| / max|expected|, by dtype
TOL = {"float64": 1e-8, "float32": 2e-3, "default": 2e-3}  # default: the framework's own
WRONG = ("WRONG GRADIENT", "WRONG VALUE")


@dataclass
class Config:
    size: str                      # label shown in tables, e.g. "n=1000"
    x: float | None = None         # the size as a number (plots, limits); None for labels
    dtype: str = "float64"
    params: dict = field(default_factory=dict)


@dataclass
class Impl:
    run: Callable[[], Any]                          # the timed part
    read: Callable[[Any], tuple] = lambda out: out  # run output -> (value, grad); untimed
    reset: Callable[[], None] | None = None         # untimed, before every run (fresh leaves etc.)
    self_timed: bool = False   # run() returns (seconds, out): use its own clock (first_gradient)
    max_repeats: int | None = None
    prep_s: float | None = None  # one-off preparation: jit compile, trace, Numba compile
    note: str = ""


@dataclass
class Plan:
    repeats: int | None = None   # fixed count, or None = adaptive
    warmup: int = 1
    quick: bool = False
    limits: bool = True          # honour the workloads' LIMITS
    corrupt: str | None = None   # test hook: perturb this framework's gradient before the check

    @property
    def budget_s(self):       # adaptive: stop once this much was spent ...
        return 0.1 if self.quick else 1.0

    @property
    def bounds(self):         # ... but take at least/at most this many samples
        return (1, 20) if self.quick else (5, 100)

    @property
    def long_s(self):         # a check run longer than this: <= 3 repeats, no warm-up, no tracemalloc
        return 0.05 if self.quick else 2.0


def to_numpy(t, dtype=np.float64) -> np.ndarray:
    """Tensor-ish (torch/tapegrad tensor, numpy/jax array, float) -> ndarray (dtype=None: keep)."""
    if t is None:
        raise ValueError(".grad is None")
    if hasattr(t, "detach"):
        t = t.detach()
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
        raise ValueError(f"shape {got.shape} != expected shape {ref.shape}")
    if not ref.size:
        return 0.0
    scale = max(float(np.max(np.abs(ref))), 1e-300)
    return float(np.max(np.abs(got - ref))) / scale


def check(got, ref, tapegrad, tol):
    """Compare (value, grad) with the reference and with tapegrad's (either may be None).
    Returns (largest relative error, status, message); status is "ok" or a WRONG status."""
    worst, bad = 0.0, []
    for what, against in (("reference", ref), ("tapegrad's", tapegrad)):
        if against is None:
            continue
        for label, status, g, e in zip(("value", "gradient"), WRONG[::-1], got, against):
            if g is None or e is None:
                continue
            err = rel_err(g, e)
            worst = max(worst, err) if np.isfinite(err) else float("inf")
            if not err <= tol:
                bad.append((status, f"{label} differs from {what}: rel err {err:.3g} > {tol:g}"))
    if not bad:
        return worst, "ok", ""
    status = WRONG[0] if any(s == WRONG[0] for s, _ in bad) else WRONG[1]
    return worst, status, "; ".join(m for _, m in bad)


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


def _corrupted(value, grad):
    """The --corrupt-grad test hook: a gradient that must fail the check."""
    if grad is None:
        return np.asarray(value, np.float64) * 1.01 + 1e-3, None
    return value, np.asarray(grad, np.float64) * 1.01 + 1e-3


def new_row(wl, fw: str, cfg: Config, **fields) -> dict:
    """A result row (one JSON object).  Times in seconds: median/min/max over ``times_s``
    (``repeats`` of them); ``first_run_s`` the check run; ``prep_s`` one-off preparation;
    ``wall_s`` (added by run_all) everything the row cost.  ``ns_per_op`` = median / ``ops``;
    ``vs_torch``/``vs_tapegrad`` = median / that framework's median at the same size and
    dtype; ``max_rel_err`` the check's worst relative error; peaks in bytes (memory.py)."""
    row = dict(workload=wl.NAME, size=cfg.size, x=cfg.x, dtype=cfg.dtype, framework=fw,
               status="ok", median_s=None, min_s=None, max_s=None, repeats=0, times_s=[],
               prep_s=None, ops=None, ns_per_op=None, peak_rss_bytes=None,
               peak_traced_bytes=None, vs_torch=None, vs_tapegrad=None, max_rel_err=None,
               first_run_s=None, message="", note="")
    row.update(fields)
    return row


def run_case(wl, fw: str, cfg: Config, plan: Plan, ref, tapegrad_out=None):
    """One row, plus the checked (value, grad) output (None unless the row is ok)."""
    limit, why = getattr(wl, "LIMITS", {}).get(fw, (None, ""))
    if plan.limits and limit is not None and cfg.x is not None and cfg.x > limit:
        return new_row(wl, fw, cfg, status="skipped",
                       message=f"above its size limit {limit:g}: {why}"), None
    row = new_row(wl, fw, cfg)
    gc.collect()  # the previous case's garbage is not ours (micrograd leaves millions of cycles)
    try:
        impl = wl.build(fw, cfg)
    except Missing as e:
        return {**row, "status": "missing", "message": str(e)}, None
    except Exception as e:
        return {**row, "status": "error", "message": "build: " + _short(e)}, None
    row.update(note=impl.note, prep_s=impl.prep_s)
    stage = "check"
    try:
        # correctness first: a wrong answer is reported, never timed
        t_first, out = _once(impl)
        row["first_run_s"] = t_first     # includes first-call costs (JAX eager compiles per op)
        got = impl.read(out)
        if plan.corrupt == fw:
            got = _corrupted(*got)
        row["max_rel_err"], status, message = check(got, ref, tapegrad_out, TOL[cfg.dtype])
        if status != "ok":
            return {**row, "status": status, "message": message}, None
        stage = "timing"
        long = t_first > plan.long_s
        times = [t_first] if impl.self_timed else []  # each run is its own cold/warm start
        rss_pending = not impl.self_timed   # measured on the first run after the check

        def measured_once():
            nonlocal rss_pending
            if not rss_pending:
                return _once(impl)
            rss_pending = False
            sample, row["peak_rss_bytes"] = memory.peak_rss_growth(lambda: _once(impl))
            return sample

        for _ in range(0 if long or impl.self_timed else plan.warmup):
            measured_once()
        lo, hi = plan.bounds
        n_max = min(plan.repeats or hi, impl.max_repeats or hi)
        n_min = min(plan.repeats or (min(lo, 3) if long else lo), n_max)
        t_start = time.perf_counter()
        while len(times) < n_max:
            if len(times) >= n_min and plan.repeats is None \
                    and time.perf_counter() - t_start > plan.budget_s:
                break
            times.append(measured_once()[0])
        if not (impl.self_timed or long):
            stage = "memory"
            row["peak_traced_bytes"] = memory.peak_traced(lambda: _once(impl))[1]
        row["ops"] = wl.ops(fw, cfg)
    except Exception as e:
        return {**row, "status": "error", "message": f"{stage}: " + _short(e)}, None
    row.update(times_s=times, repeats=len(times), median_s=float(np.median(times)),
               min_s=min(times), max_s=max(times))
    if row["ops"]:
        row["ns_per_op"] = row["median_s"] * 1e9 / row["ops"]
    return row, got


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


def plan_cases(workloads, frameworks: set | None, sizes: dict, quick: bool):
    """[(workload, config, [framework, ...]), ...] in run order.  ``sizes``: {workload
    name or None (every workload): sizes to run instead of the workload's own}."""
    cases = []
    for wl in workloads:
        fws = [f for f in wl.FRAMEWORKS if frameworks is None or f in frameworks]
        default = wl.QUICK_SIZES if quick else wl.SIZES
        for size in sizes.get(wl.NAME, sizes.get(None, default)):
            for cfg in wl.configs(size, quick):
                if fws:
                    cases.append((wl, cfg, fws))
    return cases


def run_all(cases, plan: Plan, on_start=lambda label: None, on_done=lambda: None) -> list[dict]:
    rows = []
    for wl, cfg, fws in cases:
        ref = wl.reference(cfg)
        tapegrad_out = None
        for fw in fws:
            on_start(f"{wl.NAME} {cfg.size} {cfg.dtype} {fw}")
            t0 = time.perf_counter()
            row, out = run_case(wl, fw, cfg, plan, ref, tapegrad_out)
            row["wall_s"] = time.perf_counter() - t0   # everything: build, check, repeats
            if fw == "tapegrad":
                tapegrad_out = out
            rows.append(row)
            on_done()
    add_ratios(rows)
    return rows

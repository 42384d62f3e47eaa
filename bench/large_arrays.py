"""``python -m bench.large_arrays``: memory and time at scale (issue 16).

``(x.sin() * x + x.tanh()).sum()`` and ``backward()`` over one float64 vector of 10^5,
10^6, 10^7 and 5 x 10^7 elements, by
* ``tapegrad`` (its parallel kernels on every core Numba sees);
* ``torch``: PyTorch eager, 1 thread;  ``torch-mt``: PyTorch eager, its default threads.
Every (size, framework) runs in a fresh child process of its own, so that its peak RSS is
that run's alone.  The child imports the framework, warms it up once at 1,000 elements,
draws x0 (uniform in [-2, 2], seed 0) and then, twice (the first run at that size is the
one users hit; the second shows what a warm process pays):
  x = tensor(x0, float64, requires_grad=True); y = f(x); y.item()   <- forward (timed)
  y.backward(); x.grad                                               <- backward (timed)
The peak RSS growth is the rise of VmHWM (reset through /proc/self/clear_refs before the
run, as bench/memory.py does; ru_maxrss where that is refused) above the RSS before x
was made; x0 itself is made before that baseline.  "after del" is the RSS above the same
baseline ``--settle`` seconds (default 2) after ``del x, y, grad``: tapegrad gives its
pooled arenas back after 1 s unused.  Every run's value is checked against a float64
NumPy sum and its gradient, at 16 elements, against the analytic
sin(x) + x cos(x) + 1 - tanh(x)^2; a row that fails is reported without its figures.
A size is skipped (with a note) where /proc/meminfo's MemAvailable is below
``--mem-factor`` (3) times what the framework needs (tapegrad about 140 bytes per element,
7 GB at 5 x 10^7; PyTorch about 50).  ``--quick``: 10^5 only, tapegrad and torch (unless
``--frameworks`` says), their children side by side, 0.1 s settle: the smoke run of
tests/test_bench_large_arrays.py.
Exit status: 0 every row ok or skipped, 1 a child failed, 2 a wrong value or gradient.
Targets (issue 16): peak <= 1.5 x PyTorch's; ns per element flat from 10^5 to 5 x 10^7;
RSS back after del.
"""
import argparse
import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
FRAMEWORKS, QUICK_FRAMEWORKS = ("tapegrad", "torch", "torch-mt"), ("tapegrad", "torch")
SIZES, QUICK_SIZES = (10 ** 5, 10 ** 6, 10 ** 7, 5 * 10 ** 7), (10 ** 5,)
# bytes per element a child needs at its peak, x0 included (measured: tapegrad 9.1 GB at
# 5 x 10^7 before issue 16's fixes, about 7 GB after; PyTorch 2.1 GB)
NEED_BYTES_PER_ELEMENT = {"tapegrad": 140, "torch": 50, "torch-mt": 50}
WARMUP_N = 1_000
CHECKED = 16          # gradient elements checked against the analytic derivative
TOL = 1e-8            # relative, float64 (bench/harness.py's TOL["float64"])
GB = 1e9


def f(x):
    return (x.sin() * x + x.tanh()).sum()


def analytic_grad(x):
    return np.sin(x) + x * np.cos(x) + 1.0 - np.tanh(x) ** 2


def reference_value(x0, chunk=1 << 20):
    """sum(sin(x) x + tanh(x)) in float64, a chunk at a time (no n-sized temporaries)."""
    return float(sum(np.sum(np.sin(c) * c + np.tanh(c))
                     for c in (x0[i:i + chunk] for i in range(0, x0.size, chunk))))


def rel_err(got, ref):
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    return float(np.max(np.abs(got - ref)) / max(float(np.max(np.abs(ref))), 1e-300))


def check(value, ref_value, grad_at, ref_grad_at):
    """(status, value error, gradient error): "ok", "WRONG VALUE" or "WRONG GRADIENT"."""
    v_err, g_err = rel_err(value, ref_value), rel_err(grad_at, ref_grad_at)
    if not g_err <= TOL:
        return "WRONG GRADIENT", v_err, g_err
    if not v_err <= TOL:
        return "WRONG VALUE", v_err, g_err
    return "ok", v_err, g_err


# ---------------------------------------------------------------- the child process

def _status_kb(field):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field):
                return int(line.split()[1])
    raise KeyError(field)


def _reset_peak():
    """Reset VmHWM to the current RSS; False where the kernel refuses (peak: ru_maxrss)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def _peak_kb(reset_ok):
    if reset_ok:
        return _status_kb("VmHWM")
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss   # kB on Linux


def child(fw, n, settle, runs=2):
    """Measure one (framework, size) in this process; returns the JSON-able result."""
    t_import = time.perf_counter()
    if fw == "tapegrad":
        import tapegrad as m
    else:
        import torch as m
        if fw == "torch":
            m.set_num_threads(1)
    threads = m.get_num_threads() if fw != "tapegrad" else None
    t_import = time.perf_counter() - t_import

    def tensor(a):
        return m.tensor(a, dtype=m.float64, requires_grad=True)

    w = tensor(np.linspace(-2.0, 2.0, WARMUP_N))
    f(w).backward()
    del w

    rng = np.random.RandomState(0)
    x0 = rng.uniform(-2.0, 2.0, n)
    idx = np.unique(np.r_[0, n - 1, rng.randint(0, n, CHECKED - 2)])
    ref_value, ref_grad = reference_value(x0), analytic_grad(x0[idx])
    gc.collect()
    baseline_kb = _status_kb("VmRSS")
    out = dict(framework=fw, n=n, pid=os.getpid(), threads=threads, import_s=t_import,
               baseline_rss_bytes=baseline_kb * 1024, runs=[])
    for i in range(runs):
        reset_ok = _reset_peak()
        gc.disable()
        t0 = time.perf_counter()
        x = tensor(x0)
        t1 = time.perf_counter()
        y = f(x)
        value = y.item()
        t2 = time.perf_counter()
        y.backward()
        g = x.grad
        t3 = time.perf_counter()
        gc.enable()
        peak_kb = _peak_kb(reset_ok)
        grad_at = np.array(g.detach().numpy()[idx], np.float64)
        status, v_err, g_err = check(value, ref_value, grad_at, ref_grad)
        del x, y, g
        gc.collect()
        time.sleep(settle)
        after_kb = _status_kb("VmRSS")
        out["runs"].append(dict(
            make_s=t1 - t0, forward_s=t2 - t1, backward_s=t3 - t2,
            # ru_maxrss cannot be reset: a second run's peak would be the first's
            peak_rss_growth_bytes=(max(peak_kb - baseline_kb, 0) * 1024
                                   if reset_ok or i == 0 else None),
            peak_from="VmHWM" if reset_ok else "ru_maxrss",
            rss_after_del_bytes=(after_kb - baseline_kb) * 1024,
            status=status, value=value, value_err=v_err, grad_err=g_err,
            grad_checked=int(idx.size)))
    return out


# ---------------------------------------------------------------- the parent

def mem_available():
    """MemAvailable in bytes (None off Linux)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def need_bytes(fw, n):
    return NEED_BYTES_PER_ELEMENT[fw] * n


def _spawn(fw, n, settle):
    env = {**os.environ, "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1")}
    return subprocess.Popen([sys.executable, "-m", "bench.large_arrays", "--child", fw, str(n),
                             str(settle)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _collect(proc, fw, n, timeout):
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return dict(framework=fw, n=n, status="error", note=f"timed out after {timeout} s")
    if proc.returncode != 0:
        lines = (stderr or stdout).strip().splitlines() or [""]
        why = ("killed by SIGKILL (out of memory?)" if proc.returncode == -9
               else f"exit {proc.returncode}: {lines[-1]}")
        return dict(framework=fw, n=n, status="error", note=why)
    res = json.loads(stdout.strip().splitlines()[-1])
    bad = [r["status"] for r in res["runs"] if r["status"] != "ok"]
    res["status"] = bad[0] if bad else "ok"
    res["note"] = "" if not bad else (
        f"value err {max(r['value_err'] for r in res['runs']):.2g}, "
        f"gradient err {max(r['grad_err'] for r in res['runs']):.2g} (tolerance {TOL:g})")
    return res


def measure(frameworks, sizes, settle, mem_factor, parallel=False, timeout=1800,
            log=print):
    """One result per (size, framework), in that order; the children one after another
    (``parallel``: all at once, for the smoke run: then the times mean nothing)."""
    results, pending = [], []
    for n in sizes:
        for fw in frameworks:
            avail, need = mem_available(), need_bytes(fw, n)
            if avail is not None and avail < mem_factor * need:
                note = (f"skipped: MemAvailable {avail / GB:.1f} GB < {mem_factor:g} x "
                        f"{need / GB:.2f} GB needed")
                log(f"{fw} n={n:,}: {note}")
                results.append(dict(framework=fw, n=n, status="skipped", note=note))
                continue
            log(f"{fw} n={n:,} ...")
            proc = _spawn(fw, n, settle)
            if parallel:
                pending.append((len(results), proc, fw, n))
                results.append(None)
            else:
                results.append(_collect(proc, fw, n, timeout))
    for i, proc, fw, n in pending:
        results[i] = _collect(proc, fw, n, timeout)
    return results


def _ns(r):
    return (r["forward_s"] + r["backward_s"]) * 1e9 / r["n"]


COLUMNS = ("forward s", "backward s", "ns/element", "peak RSS growth GB", "RSS after del GB")
COLUMN_KEYS = ("forward_s", "backward_s", "ns", "peak_rss_growth_bytes", "rss_after_del_bytes")


def _values(res):
    """{column key: [1st run, 2nd run]} of an ok result."""
    runs = [dict(r, n=res["n"]) for r in res["runs"]]
    return {"forward_s": [r["forward_s"] for r in runs],
            "backward_s": [r["backward_s"] for r in runs],
            "ns": [_ns(r) for r in runs],
            "peak_rss_growth_bytes": [None if r["peak_rss_growth_bytes"] is None
                                      else r["peak_rss_growth_bytes"] / GB for r in runs],
            "rss_after_del_bytes": [r["rss_after_del_bytes"] / GB for r in runs]}


def _fmt(key, v):
    if v is None:
        return "n/a"
    return f"{v:,.1f}" if key == "ns" else f"{v:.3f}"


def table(results):
    """Markdown: a row per (size, framework), each cell "1st run / 2nd run", then a row of
    tapegrad / PyTorch ratios per size and PyTorch variant ("-" where PyTorch's figure is
    under 10 MB or 1 ms, so the ratio would mean nothing)."""
    head = ["n", "framework", *COLUMNS, "check"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    by = {(r["n"], r["framework"]): r for r in results}
    sizes = list(dict.fromkeys(r["n"] for r in results))
    for n in sizes:
        fws = [r["framework"] for r in results if r["n"] == n]
        for fw in fws:
            r = by[(n, fw)]
            if r["status"] != "ok":
                lines.append(f"| {n:,} | {fw} | " + " | ".join([""] * len(COLUMNS))
                             + f" | {r['status']}: {r['note']} |")
                continue
            v = _values(r)
            cells = [" / ".join(_fmt(k, x) for x in v[k]) for k in COLUMN_KEYS]
            chk = (f"{r['status']}: value {max(x['value_err'] for x in r['runs']):.1e}, "
                   f"grad {max(x['grad_err'] for x in r['runs']):.1e} "
                   f"({r['runs'][0]['grad_checked']} elements)")
            lines.append(f"| {n:,} | {fw} | " + " | ".join(cells) + f" | {chk} |")
        tg = by.get((n, "tapegrad"))
        for other in ("torch", "torch-mt"):
            o = by.get((n, other))
            if not (tg and o and tg["status"] == o["status"] == "ok"):
                continue
            a, b = _values(tg), _values(o)
            cells = []
            for k in COLUMN_KEYS:
                floor = 1e-3 if k.endswith("_s") else 0.01 if k.endswith("bytes") else 0.0
                cells.append(" / ".join(f"{x / y:.2f}x" if x is not None and y is not None
                                        and y > floor else "-" for x, y in zip(a[k], b[k])))
            lines.append(f"| {n:,} | tapegrad / {other} | " + " | ".join(cells) + " | |")
    return "\n".join(lines)


def targets(results):
    """Issue 16's three targets, as measured (lines of text; no verdict on timing noise)."""
    ok = [r for r in results if r["status"] == "ok"]
    out = []
    tg = sorted((r for r in ok if r["framework"] == "tapegrad"), key=lambda r: r["n"])
    if tg:
        big = tg[-1]
        for other in ("torch", "torch-mt"):
            o = next((r for r in ok if r["framework"] == other and r["n"] == big["n"]), None)
            if o:
                ratio = (big["runs"][0]["peak_rss_growth_bytes"]
                         / max(o["runs"][0]["peak_rss_growth_bytes"], 1))
                out.append(f"peak RSS growth at n={big['n']:,}, first run: tapegrad / {other} "
                           f"= {ratio:.2f}x (target <= 1.5x)")
        if len(tg) > 1:
            a, b = _values(tg[0])["ns"], _values(big)["ns"]
            out.append(f"tapegrad ns/element, n={big['n']:,} / n={tg[0]['n']:,}: first run "
                       f"{b[0] / a[0]:.2f}x, second run {b[-1] / a[-1]:.2f}x (target: flat)")
        out.append(f"tapegrad RSS after del at n={big['n']:,}: "
                   + " / ".join(f"{r['rss_after_del_bytes'] / GB:.3f}" for r in big["runs"])
                   + " GB (target: back to the baseline)")
    return out


def machine():
    from .machine import _cpuinfo
    cpu, physical = _cpuinfo()
    total = None
    try:
        with open("/proc/meminfo") as fh:
            total = int(next(line for line in fh if line.startswith("MemTotal:")).split()[1])
    except (OSError, StopIteration):
        pass
    return dict(cpu=cpu, physical_cores=physical, logical_cores=os.cpu_count(),
                mem_total_bytes=total * 1024 if total else None)


def exit_code(results):
    if any(r["status"].startswith("WRONG") for r in results):
        return 2
    return 1 if any(r["status"] == "error" for r in results) else 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        fw, n, settle = argv[1], int(argv[2]), float(argv[3])
        print(json.dumps(child(fw, n, settle)))
        return 0
    ap = argparse.ArgumentParser(prog="python -m bench.large_arrays",
                                 description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frameworks", default=None,
                    help=f"comma list of {', '.join(FRAMEWORKS)} (default: all; --quick: "
                         f"{', '.join(QUICK_FRAMEWORKS)})")
    ap.add_argument("--sizes", default=None, help="comma list (default: 10^5,10^6,10^7,5x10^7)")
    ap.add_argument("--quick", action="store_true",
                    help="10^5 only, children side by side, 0.1 s settle (the smoke run)")
    ap.add_argument("--settle", type=float, default=None,
                    help="seconds between del and the RSS reading (default 2; --quick 0.1)")
    ap.add_argument("--mem-factor", type=float, default=3.0,
                    help="skip a size unless MemAvailable >= this x what it needs")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per child")
    ap.add_argument("--json", default="")
    a = ap.parse_args(argv)
    fws = ([s.strip() for s in a.frameworks.split(",") if s.strip()] if a.frameworks
           else list(QUICK_FRAMEWORKS if a.quick else FRAMEWORKS))
    bad = [s for s in fws if s not in FRAMEWORKS]
    if bad:
        raise SystemExit(f"unknown framework: {', '.join(bad)} (known: {', '.join(FRAMEWORKS)})")
    sizes = ([int(float(s)) for s in a.sizes.split(",") if s.strip()] if a.sizes
             else list(QUICK_SIZES if a.quick else SIZES))
    settle = a.settle if a.settle is not None else 0.1 if a.quick else 2.0
    info = machine()
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    info["load_before"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    results = measure(fws, sizes, settle, a.mem_factor, parallel=a.quick, timeout=a.timeout,
                      log=log)
    info["load_after"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"machine: {info['cpu']}, {info['logical_cores']} logical cores, "
          f"MemTotal {(info['mem_total_bytes'] or 0) / GB:.1f} GB; 1-min load average "
          f"{info['load_before']:.2f} before, {info['load_after']:.2f} after; settle {settle:g} s"
          + ("; --quick: children side by side, times mean nothing" if a.quick else ""))
    print("each cell: first run / second run in the same process\n")
    print(table(results))
    for line in targets(results):
        print(line)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(dict(machine=info, settle_s=settle, quick=a.quick, results=results), fh,
                      indent=1)
    return exit_code(results)


if __name__ == "__main__":
    sys.exit(main())

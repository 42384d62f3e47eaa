"""``python -m bench.sparse``: sparse Jacobians of finite-difference PDE residuals.

Two residuals of u (n unknowns), written as array code with slices:
* ``pde1``: -u'' + u^3 - 1 on a line (3-point stencil; boundary rows u itself);
* ``pde2``: -laplace(u) + exp(u)/10 on a square grid (5-point stencil, interior rows).
Each at n = 10,000 and 100,000, its Jacobian by
* ``tapegrad``: ``autograd.functional.jacobian(f, u, sparse=True)``: the recording, the
  pattern from the tape, its coloring and one tangent sweep per color, every call;
* ``tapegrad-replay``: ``tapegrad.trace(f, u).jacobian(u, sparse=True)``: the pattern and
  coloring kept with the recording (its first call, with the trace, is ``prep``);
* ``torch``: ``torch.autograd.functional.jacobian(f, u, vectorize=True)``, dense (its
  fastest: one batched backward), 1 thread and the default;
* ``jax-jit``: ``jax.jit(jax.jacfwd(f))``, dense (compile time is ``prep``).
Dense rows run where the n x n matrix fits in ``--dense-max`` elements (default
10,000^2: 800 MB).  Before timing, each result is checked against tapegrad's own at the
same point on every nonzero of the pattern, and the dense ones are checked to hold no
nonzero outside it.  Medians of ``--repeats`` runs.
"""
import argparse
import json
import os
import sys
import time

import numpy as np

import tapegrad as tg
from tapegrad.autograd import functional as F


def pde1(m, u):
    h2 = (1.0 / (u.shape[0] + 1)) ** 2
    inner = (2 * u[1:-1] - u[:-2] - u[2:]) / h2 + u[1:-1] ** 3 - 1.0
    return m.cat([u[:1], inner, u[-1:]])


def pde2(m, u):
    k = int(round(u.shape[0] ** 0.5))
    U = u.reshape(k, k)
    h2 = (1.0 / (k + 1)) ** 2
    lap = (4 * U[1:-1, 1:-1] - U[:-2, 1:-1] - U[2:, 1:-1] - U[1:-1, :-2] - U[1:-1, 2:]) / h2
    return (lap + m.exp(U[1:-1, 1:-1]) / 10).reshape(-1)


PROBLEMS = {"pde1": (pde1, (10_000, 100_000)), "pde2": (pde2, (10_000, 100_489))}


def _median(run, repeats):
    out, times = run(), []
    for _ in range(repeats):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), out


def _torch(fn, u, threads):
    import torch
    torch.set_num_threads(threads)
    x = torch.tensor(u)
    return lambda: torch.autograd.functional.jacobian(lambda z: fn(torch, z), x,
                                                      vectorize=True).numpy()


def _jax(fn, u):
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    ns = type("ns", (), {"cat": staticmethod(jnp.concatenate), "exp": staticmethod(jnp.exp)})
    t0 = time.perf_counter()
    jf = jax.jit(jax.jacfwd(lambda z: fn(ns, z))).lower(u).compile()
    prep = time.perf_counter() - t0
    return (lambda: np.asarray(jf(u))), prep


def rows(problems, sizes_of, repeats, dense_max, frameworks):
    out = []
    for name in problems:
        fn, sizes = PROBLEMS[name]
        for n in sizes_of.get(name, sizes):
            u = np.random.RandomState(20).uniform(0.5, 1.5, n)
            x = tg.tensor(u)
            ref = F.jacobian(lambda z: fn(tg, z), x, sparse=True)
            mask = ref.toarray() != 0 if n * n <= dense_max else None
            for fw in frameworks:
                prep, note = 0.0, ""
                if fw == "tapegrad":
                    run = lambda: F.jacobian(lambda z: fn(tg, z), x, sparse=True)  # noqa: E731
                elif fw == "tapegrad-replay":
                    t0 = time.perf_counter()
                    traced = tg.trace(lambda z: fn(tg, z), x)
                    traced.jacobian(x, sparse=True)
                    prep = time.perf_counter() - t0
                    run = lambda: traced.jacobian(x, sparse=True)  # noqa: E731
                    note = f"{traced.records[0].sparse_plans[False].colors} colors"
                elif n * n > dense_max:
                    out.append(dict(problem=name, n=n, framework=fw, status="skipped",
                                    note=f"dense {n} x {n} above --dense-max"))
                    continue
                elif fw.startswith("torch"):
                    try:
                        import torch  # noqa: F401
                    except ImportError:
                        out.append(dict(problem=name, n=n, framework=fw, status="missing"))
                        continue
                    run = _torch(fn, u, 1 if fw == "torch" else os.cpu_count())
                else:
                    try:
                        run, prep = _jax(fn, u)
                    except ImportError:
                        out.append(dict(problem=name, n=n, framework=fw, status="missing"))
                        continue
                median, J = _median(run, repeats)
                if mask is not None:
                    J = J.toarray() if hasattr(J, "toarray") else \
                        np.asarray(J).reshape(ref.shape)
                    if np.abs(J[~mask]).max(initial=0.0) != 0.0:
                        raise SystemExit(f"{fw} {name} n={n}: a nonzero outside the pattern")
                    err = np.abs(J[mask] - ref.toarray()[mask]).max()
                else:
                    err = abs(J - ref).max()
                if not err <= 1e-9 * max(1.0, abs(ref).max()):
                    raise SystemExit(f"{fw} {name} n={n}: off by {err}")
                out.append(dict(problem=name, n=n, framework=fw, status="ok", median_s=median,
                                prep_s=prep, nnz=int(ref.nnz), note=note))
    return out


def table(results):
    lines = ["| problem | n | framework | median | vs tapegrad | prep | note |",
             "|---|---|---|---|---|---|---|"]
    base = {(r["problem"], r["n"]): r["median_s"] for r in results
            if r["framework"] == "tapegrad" and r["status"] == "ok"}
    for r in results:
        if r["status"] != "ok":
            lines.append(f"| {r['problem']} | {r['n']:,} | {r['framework']} | {r['status']} "
                         f"| | | {r.get('note', '')} |")
            continue
        b = base.get((r["problem"], r["n"]))
        ratio = f"{r['median_s'] / b:.3g}x" if b else ""
        lines.append(f"| {r['problem']} | {r['n']:,} | {r['framework']} | "
                     f"{r['median_s'] * 1e3:,.1f} ms | {ratio} | "
                     f"{r['prep_s']:.2f} s | {r['note']} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.sparse", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", default="pde1,pde2")
    ap.add_argument("--sizes", default="", help="e.g. 1000,4096 (every problem)")
    ap.add_argument("--frameworks", default="tapegrad,tapegrad-replay,torch,torch-mt,jax-jit")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--dense-max", type=int, default=10_000 ** 2 + 1)
    ap.add_argument("--json", default="")
    a = ap.parse_args(argv)
    problems = a.problems.split(",")
    sizes = {p: [int(s) for s in a.sizes.split(",")] for p in problems} if a.sizes else {}
    results = rows(problems, sizes, a.repeats, a.dense_max, a.frameworks.split(","))
    print(table(results))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

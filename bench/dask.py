"""``python -m bench.dask``: ``grad_batch`` over Dask arrays on local worker processes.

Two recordings, ``--points`` points each (default 1,000,000), in chunks of ``--chunk``:
* ``rosen``: the Rosenbrock function of 100 inputs (``scalar_chain.rosen``);
* ``faw``: the FAW graph of 1,000 ops on 100 inputs (``workloads/faw.py``).
For each, the same chunks (random points made by the task itself, a gradient mean and a
value sum kept per chunk, so memory stays at a few chunks) are run
* locally: ``grad_batch`` chunk by chunk in this process, on every core;
* on a ``LocalCluster`` of 1 and of 2 worker processes (one thread each, Numba's kernels
  on one thread: ``NUMBA_NUM_THREADS=1`` in the workers, checked).
Reported: points per second, 2 workers against 1, 2 workers against local (the overhead
of Dask on the same cores), and the time to the first chunk on fresh workers (shipping
the recording, loading it, the kernels from the cache).  Results are checked against
the local ones before any figure is printed.
"""
import argparse
import json
import os
import time

import numpy as np

import tapegrad as tg

from .workloads import faw, scalar_chain

N_INPUTS = 100


def rosen(x):
    return scalar_chain.rosen_of_vector(x)


def faw_graph(x):
    ns = faw._Torchlike(tg)
    return faw.graph(ns, ns.scalars(x), 1_000)


FUNCTIONS = {"rosen": rosen, "faw": faw_graph}


def points(seed, rows):
    """Chunk ``seed``'s points (made where the chunk is computed)."""
    return np.random.RandomState(seed).uniform(-1.0, 1.0, (rows, N_INPUTS))


def summarise(values, grads):
    """What a chunk sends back: its value sum and gradient sum (row 0 and the rest)."""
    return np.concatenate([[values.sum()], grads.sum(axis=0)])


def _local(traced, sizes):
    t0 = time.perf_counter()
    total = sum(summarise(*traced.grad_batch(points(k, rows))[:2])
                for k, rows in enumerate(sizes))
    return time.perf_counter() - t0, total


def _dask_graph(traced, sizes):
    import dask
    import dask.array as da
    blocks = [da.from_delayed(dask.delayed(points, pure=True)(k, rows), (rows, N_INPUTS),
                              np.float64) for k, rows in enumerate(sizes)]
    values, grads, _ = traced.grad_batch(da.concatenate(blocks, axis=0))
    return values.sum(), grads.sum(axis=0)


def _cluster(workers):
    """A LocalCluster of ``workers`` processes whose Numba kernels run on one thread (set
    in the environment they start with: a worker imports Numba before a cluster's
    ``env`` reaches it, when it imports this module as its parent's main one)."""
    import distributed
    before = os.environ.get("NUMBA_NUM_THREADS")
    os.environ["NUMBA_NUM_THREADS"] = "1"
    try:
        return distributed.LocalCluster(n_workers=workers, threads_per_worker=1,
                                        processes=True, dashboard_address=None,
                                        silence_logs=50)
    finally:
        if before is None:
            del os.environ["NUMBA_NUM_THREADS"]
        else:
            os.environ["NUMBA_NUM_THREADS"] = before


def _on_cluster(traced, sizes, workers):
    import dask
    import distributed
    with _cluster(workers) as cluster, distributed.Client(cluster) as client:
        assert set(client.run(_numba_threads).values()) == {1}
        t0 = time.perf_counter()
        dask.compute(*_dask_graph(traced, sizes[:1]))
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        v, g = dask.compute(*_dask_graph(traced, sizes))
        return time.perf_counter() - t0, np.concatenate([[v], g]), first


def _numba_threads():
    import numba
    return numba.get_num_threads()


def run(name, n_points, chunk):
    traced = tg.trace(FUNCTIONS[name], np.zeros(N_INPUTS))
    sizes = [chunk] * (n_points // chunk) + ([n_points % chunk] if n_points % chunk else [])
    traced.grad_batch(points(0, 10))                          # (kernels loaded)
    local_s, want = _local(traced, sizes)
    row = {"workload": name, "points": n_points, "chunk": chunk, "local_s": local_s}
    for workers in (1, 2):
        seconds, got, first = _on_cluster(traced, sizes, workers)
        if not np.allclose(got, want, rtol=1e-9, atol=1e-9 * np.abs(want).max()):
            raise SystemExit(f"{name}: {workers} worker(s) disagree with the local grad_batch")
        row[f"dask{workers}_s"], row[f"first_chunk{workers}_s"] = seconds, first
    row["two_vs_one"] = row["dask1_s"] / row["dask2_s"]
    row["dask2_vs_local"] = row["dask2_s"] / row["local_s"]
    return row


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.dask", description=__doc__.split("\n")[0])
    p.add_argument("--points", type=int, default=1_000_000)
    p.add_argument("--chunk", type=int, default=20_000)
    p.add_argument("--workloads", default="rosen,faw")
    p.add_argument("--json", help="write the rows here")
    args = p.parse_args(argv)
    rows = [run(name, args.points, args.chunk) for name in args.workloads.split(",")]
    print(f"{'workload':9} {'points':>9} {'local':>9} {'1 worker':>9} {'2 workers':>9} "
          f"{'2 vs 1':>7} {'2 vs local':>10} {'first chunk (1 / 2)':>20}")
    for r in rows:
        print(f"{r['workload']:9} {r['points']:9,d} {r['local_s']:8.2f}s {r['dask1_s']:8.2f}s "
              f"{r['dask2_s']:8.2f}s {r['two_vs_one']:6.2f}x {r['dask2_vs_local']:9.2f}x "
              f"{r['first_chunk1_s']:9.2f}s / {r['first_chunk2_s']:.2f}s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

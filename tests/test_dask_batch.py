"""``grad_batch`` over Dask arrays, on a local cluster of two worker processes: the local
``grad_batch``'s results bit for bit, chunk by chunk, whatever happens to a worker."""
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import tapegrad as tg

da = pytest.importorskip("dask.array")       # the dask extra (in the test extra)
distributed = pytest.importorskip("distributed")


def branchy(x):
    """Two branches: chunks of random points take both, so guards fail on workers."""
    s = (x * x).sum()
    return (s.sin() * x[0]) if s > 1.0 else (s.exp() - x[1] * x[2])


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        with distributed.Client(cluster) as c:
            yield c


def _points(n, dtype=np.float64, seed=0):
    return np.random.RandomState(seed).uniform(-1, 1, (n, 3)).astype(dtype)


def _local(X):
    return tg.trace(branchy, np.full(3, 0.1)).grad_batch(X)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_results_equal_the_local_grad_batch_bit_for_bit(client, dtype):
    """1,003 points in chunks of 250 (the last one 3), both branches in every chunk."""
    X = _points(1003, dtype)
    values, grads, ok = _local(X)
    assert 0 < ok.sum() < len(ok)                   # guards failed, points re-recorded
    dv, dg, dok = tg.trace(branchy, np.full(3, 0.1)).grad_batch(da.from_array(X, chunks=250))
    assert dv.chunks[0] == (250, 250, 250, 250, 3)
    got = client.compute([dv, dg, dok], sync=True)
    for a, b in zip(got, (values, grads, ok)):
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    # and PyTorch's gradient at a few points
    torch = pytest.importorskip("torch")
    for p in (0, 1, 1002):
        x = torch.tensor(X[p].astype(np.float64), requires_grad=True)
        branchy(x).backward()
        np.testing.assert_allclose(got[1][p], x.grad.numpy(), rtol=1e-12)


def test_value_batch_is_grad_batch_without_the_gradients(client):
    """Locally: grad_batch's values and flags bit for bit, and the function's own values
    (PyTorch's too); on the cluster: the local ones, bit for bit."""
    X = _points(301)
    traced = tg.trace(branchy, np.full(3, 0.1))
    values, ok = traced.value_batch(X)
    gv, _, gok = _local(X)
    assert values.tobytes() == gv.tobytes() and ok.tobytes() == gok.tobytes()
    torch = pytest.importorskip("torch")
    want = np.array([branchy(torch.tensor(x)).item() for x in X])
    np.testing.assert_allclose(values, want, rtol=1e-13)
    dv, dok = tg.trace(branchy, np.full(3, 0.1)).value_batch(da.from_array(X, chunks=100))
    got_v, got_ok = client.compute([dv, dok], sync=True)
    assert got_v.tobytes() == values.tobytes() and got_ok.tobytes() == ok.tobytes()


def test_a_worker_killed_mid_computation_leaves_the_result_complete(client):
    X = _points(40_000, seed=1)
    values, grads, ok = _local(X)
    dv, dg, dok = tg.trace(branchy, np.full(3, 0.1)).grad_batch(da.from_array(X, chunks=1000))
    pids = client.run(os.getpid)
    futures = client.compute([dv, dg, dok])
    deadline = time.time() + 60
    while not any(client.processing().values()) and time.time() < deadline:
        time.sleep(0.01)
    os.kill(next(iter(pids.values())), signal.SIGKILL)       # one worker dies mid-way
    got = client.gather(futures)
    for a, b in zip(got, (values, grads, ok)):
        assert a.tobytes() == b.tobytes()


def test_a_function_that_cannot_travel_leaves_uncovered_points_marked(client):
    lock = threading.Lock()                 # (cannot be pickled: nor can the function)

    def f(x):
        with lock:
            return branchy(x)

    X = _points(200, seed=2)
    traced = tg.trace(f, np.full(3, 0.1))   # one recording: the s <= 1 branch
    with pytest.warns(RuntimeWarning, match="cannot be sent"):
        dv, dg, dok = traced.grad_batch(da.from_array(X, chunks=64))
    values, grads, ok = client.compute([dv, dg, dok], sync=True)
    want_v, want_g, want_ok = _local(X)
    assert np.array_equal(ok, want_ok) and 0 < ok.sum() < len(ok)
    assert values[ok].tobytes() == want_v[ok].tobytes()
    assert grads[ok].tobytes() == want_g[ok].tobytes()
    assert np.isnan(values[~ok]).all() and np.isnan(grads[~ok]).all()


def test_wrong_points_fail_before_any_task():
    traced = tg.trace(branchy, np.full(3, 0.1))
    with pytest.raises(ValueError, match=r"shape \(3,\)"):
        traced.grad_batch(da.zeros((10, 4), chunks=5))
    with pytest.raises(TypeError, match="float32 or float64"):
        traced.grad_batch(da.zeros((10, 3), chunks=5, dtype=np.int64))
    two = tg.trace(lambda a, b: (a * b).sum(), np.ones(2), np.ones(2))
    with pytest.raises(NotImplementedError, match="one traced argument"):
        two.grad_batch(da.zeros((10, 2), chunks=5))


def test_the_core_never_imports_dask():
    code = ("import sys, numpy as np, tapegrad as tg;"
            "tg.trace(lambda x: (x * x).sum(), np.ones(3)).grad_batch(np.ones((4, 3)));"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr[-2000:]


def test_a_worker_without_tapegrad_is_told_which_package_is_missing():
    """A chunk's task is tapegrad's code, sent by reference: a worker that cannot import
    tapegrad fails to load it, naming the package (what Dask then reports)."""
    import pickle
    from tapegrad.replay import dask_batch
    task = pickle.dumps(dask_batch._chunk)
    out = subprocess.run([sys.executable, "-I", "-S", "-c",
                          "import pickle, sys; pickle.loads(sys.stdin.buffer.read())"],
                         input=task, capture_output=True, timeout=60)
    assert out.returncode != 0
    assert b"No module named 'tapegrad'" in out.stderr, out.stderr[-500:]

"""Threads (issue 3, item 8): each thread records on its own tape; independent graphs are
recorded and backpropagated from 8 threads at once, with the host entries of this issue
(custom Functions, tensor and Node hooks, saved-tensor hooks, create_graph) in them,
and a leaf shared by all threads accumulates every thread's gradient."""
import queue
import threading

import numpy as np
import pytest

import tapegrad as tg

THREADS, ROUNDS = 8, 25


class Cube(tg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 3 * x * x * g


def work(k, w, barrier, results, errors):
    try:
        barrier.wait()                       # all threads record and sweep at once
        tapes, hooked = set(), []
        c = 0.1 * (k + 1)
        for _ in range(ROUNDS):
            a = tg.tensor([c, 2 * c, -c], requires_grad=True)
            with tg.autograd.graph.saved_tensors_hooks(lambda t: t * 1.0, lambda p: p):
                h = Cube.apply(a * w)            # a custom Function on a shared leaf
            h.register_hook(lambda g: g * 2)       # a tensor hook
            s = h.sin()
            s.grad_fn.register_hook(lambda gi, go: hooked.append(k))   # a Node hook
            loss = s.sum() + (w * w).sum() * c
            loss.backward()                      # into the shared leaf w and into a
            tapes.add(loss.tape.uid)
            ga, = tg.autograd.grad((a * a * a).sum(), a, create_graph=True)
            gaa, = tg.autograd.grad(ga.sum(), a)
        results[k] = (a.grad.numpy(), gaa.numpy(), tapes, hooked.count(k))
    except Exception as e:   # noqa: BLE001 - reported by the test
        errors.append(e)


def expected(k, wv):
    c = 0.1 * (k + 1)
    av = np.array([c, 2 * c, -c])
    u = av * wv
    dh = 2 * np.cos(u ** 3)                  # d loss / d h, doubled by the hook
    return av, dh * 3 * u * u * wv, dh * 3 * u * u * av + 2 * wv * c


def test_eight_threads_with_host_entries_and_a_shared_leaf():
    wv = np.array([0.5, -1.0, 2.0])
    w = tg.tensor(wv, requires_grad=True)
    barrier = threading.Barrier(THREADS)
    results, errors = {}, []
    threads = [threading.Thread(target=work, args=(k, w, barrier, results, errors))
               for k in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    w_grad = np.zeros(3)
    all_tapes = set()
    for k in range(THREADS):
        av, a_grad, w_part = expected(k, wv)
        got_a, got_aa, tapes, n_hooked = results[k]
        np.testing.assert_allclose(got_a, a_grad, rtol=1e-12)
        np.testing.assert_allclose(got_aa, 6 * av, rtol=1e-12)
        assert n_hooked == ROUNDS
        assert not tapes & all_tapes             # no tape shared between threads
        all_tapes |= tapes
        w_grad += ROUNDS * w_part
    np.testing.assert_allclose(w.grad.numpy(), w_grad, rtol=1e-12)


def test_threads_record_on_distinct_tapes():
    barrier = threading.Barrier(THREADS)
    seen, grads = {}, {}

    def record(k):
        barrier.wait()
        x = tg.tensor(1.0, requires_grad=True)
        y = x * float(k)
        seen[k] = y.tape
        y.backward()
        grads[k] = x.grad.item()

    threads = [threading.Thread(target=record, args=(k,)) for k in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len({id(t) for t in seen.values()}) == THREADS
    assert grads == {k: float(k) for k in range(THREADS)}


def test_backward_in_another_thread_leaves_this_thread_recording():
    """A graph recorded here, backpropagated from another thread: this thread's later
    graphs work (the consumed tape is left by whichever thread records on it next)."""
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    worker = threading.Thread(target=y.backward)
    worker.start()
    worker.join()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0])
    for _ in range(3):
        (x * 3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [11.0, 13.0])


def _shared_graph_round(retain):
    """Five threads backpropagate through one shared non-leaf graph (PyTorch's
    test_python_thread_in_middle): with retain_graph all succeed and the gradients add
    up; without, exactly one succeeds and the others get PyTorch's error."""
    a = tg.tensor(np.linspace(0.1, 1.0, 25), requires_grad=True)
    middle = (a * 2).exp()
    out = (middle * a).sum()
    results = []

    def run():
        try:
            out.backward(retain_graph=retain)
            results.append("ok")
        except RuntimeError as e:
            results.append(str(e))

    threads = [threading.Thread(target=run) for _ in range(5)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    one = a.detach().numpy()
    return results, a.grad.numpy(), np.exp(2 * one) * (2 * one + 1)


def test_shared_graph_with_retain_graph():
    for _ in range(40):
        results, grad, each = _shared_graph_round(True)
        assert results == ["ok"] * 5
        np.testing.assert_allclose(grad, 5 * each, rtol=1e-12)


def test_shared_graph_without_retain_graph():
    for _ in range(40):
        results, grad, each = _shared_graph_round(False)
        assert results.count("ok") == 1
        assert all(r == "ok" or r.startswith("Trying to backward through the graph a second")
                   for r in results)
        np.testing.assert_allclose(grad, each, rtol=1e-12)


def test_tapegrads_products_run_blas_on_one_thread_and_give_the_count_back():
    """Inside ``one_blas_thread`` the OpenBLAS that NumPy loaded runs one thread (its
    pool would compete with the parallel kernels' for the cores); the user's count comes
    back after the last of several threads inside leaves, and products stay right."""
    from tapegrad.kernels import threads as th
    with open("/proc/self/maps") as f:
        has_openblas = any("openblas" in line.lower() for line in f)
    blas = th._openblas()
    assert (blas is not None) == has_openblas
    if blas is None:               # another BLAS: nothing is changed
        with th.one_blas_thread():
            pass
        return
    get, put = blas
    before = get()
    put(2)
    try:
        inside, barrier = [], threading.Barrier(4)

        def work():
            with th.one_blas_thread():
                barrier.wait()
                inside.append(get())
                a = np.arange(12.0).reshape(3, 4)
                np.testing.assert_array_equal(a @ a.T, np.einsum("ik,jk->ij", a, a))
                barrier.wait()
        ts = [threading.Thread(target=work) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert inside == [1, 1, 1, 1]
        assert get() == 2
        with th.one_blas_thread(th.BLAS_PARALLEL_MIN):   # a large product keeps them,
            assert get() == (1 if th.LONG_SPIN else 2)    # unless libgomp spins long
    finally:
        put(before)


def _producer_consumer(n_items, size, consumers):
    """One thread records graphs and hands them over a queue; ``consumers`` threads
    backpropagate them while it goes on recording on the same tape (PyTorch's graphs
    are immutable once built; tapegrad's tape is written by the recording thread's
    flushes while a backward reads it).  Returns the leaves and the errors."""
    x = tg.tensor(np.linspace(-1.0, 1.0, size), requires_grad=True)
    w = tg.tensor(1.5, requires_grad=True)
    q, errors = queue.Queue(maxsize=8), []

    def produce():
        try:
            for i in range(n_items):
                y = (x * w).sin().sum() + x.var() * 0.5 + w * float(i)
                q.put(y)
        except Exception as e:   # noqa: BLE001 - reported by the test
            errors.append(e)
        for _ in range(consumers):
            q.put(None)

    def consume():
        while (y := q.get()) is not None:
            try:
                y.backward()
            except Exception as e:   # noqa: BLE001 - reported by the test
                errors.append(e)

    threads = [threading.Thread(target=produce)] + [threading.Thread(target=consume)
                                                     for _ in range(consumers)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return x, w, errors


@pytest.mark.parametrize("size, consumers", [(3, 1), (3, 2), (5000, 1)])
def test_recording_goes_on_while_another_thread_backpropagates(size, consumers):
    """The gradients of every graph handed over, as the closed form gives them (before:
    an IndexError on garbage columns in about 1 backward in 15, rows staged during
    another thread's flush being lost)."""
    n_items = 300 if size < 100 else 40
    x, w, errors = _producer_consumer(n_items, size, consumers)
    assert not errors, errors[:3]
    xv, wv = np.linspace(-1.0, 1.0, size), 1.5
    dvar = (xv - xv.mean()) * 2.0 / (size - 1)
    np.testing.assert_allclose(x.grad.numpy(), n_items * (np.cos(xv * wv) * wv + 0.5 * dvar),
                               rtol=1e-10)
    np.testing.assert_allclose(w.grad.item(), n_items * np.sum(np.cos(xv * wv) * xv)
                               + n_items * (n_items - 1) / 2, rtol=1e-10)

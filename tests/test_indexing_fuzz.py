"""Indexing against PyTorch on many generated keys: values, gradients, and no stray
offsets (the gather kernels trust the offsets these keys produce)."""
import random

import numpy as np
import pytest
import torch

import tapegrad as tg

pytestmark = pytest.mark.usefixtures("torch_float64")
SHAPE = (3, 4, 5)


def _component(rng, n):
    kind = rng.choice(["int", "neg", "slice", "full", "none", "list"])
    if kind == "int":
        return rng.randrange(n)
    if kind == "neg":
        return -rng.randrange(1, n + 1)
    if kind == "slice":
        a, b = sorted(rng.sample(range(-n, n + 1), 2))
        return slice(a, b, rng.choice([None, 1, 2, 3]))
    if kind == "full":
        return slice(None)
    if kind == "none":
        return None
    return [rng.randrange(n) for _ in range(rng.randrange(1, 4))]


def _keys(count=150, seed=7):
    rng = random.Random(seed)
    keys = []
    while len(keys) < count:
        dims = list(SHAPE)
        comps, lists = [], 0
        for _ in range(rng.randrange(1, 4)):
            if not dims:
                break
            c = _component(rng, dims[0])
            if isinstance(c, list):
                lists += 1
                if lists > 1:
                    continue
            comps.append(c)
            if c is not None:
                dims.pop(0)
        if rng.random() < 0.2:
            comps.insert(rng.randrange(len(comps) + 1), Ellipsis)
        keys.append(tuple(comps))
    return keys


@pytest.mark.parametrize("key", _keys(), ids=repr)
def test_key_matches_torch(key):
    base = np.arange(np.prod(SHAPE), dtype=np.float64).reshape(SHAPE) / 7.0

    def run(m):
        x = m.tensor(base, requires_grad=True)
        y = x[key]
        w = m.tensor(np.linspace(0.5, 2.0, max(y.numel(), 1))[:y.numel()].reshape(tuple(y.shape)))
        (y * w).sum().backward()
        return np.asarray(y.detach().numpy()), np.asarray(x.grad.numpy())

    try:
        ref = run(torch)
    except (IndexError, RuntimeError, ValueError):
        with pytest.raises((IndexError, RuntimeError, ValueError)):
            run(tg)
        return
    got = run(tg)
    assert got[0].shape == ref[0].shape
    np.testing.assert_array_equal(got[0], ref[0])
    np.testing.assert_allclose(got[1], ref[1])


def test_boolean_masks_match_torch():
    base = np.random.default_rng(1).standard_normal(SHAPE)
    for mask in (base > 0, base[:, 0, 0] > 0, base[:, :, 0] > 0):
        def run(m):
            x = m.tensor(base, requires_grad=True)
            y = x[m.tensor(mask)]
            (y * y).sum().backward()
            return y.detach().numpy(), x.grad.numpy()
        ref, got = run(torch), run(tg)
        np.testing.assert_allclose(got[0], ref[0])
        np.testing.assert_allclose(got[1], ref[1])

"""A check several test files share: a traced function's replayed value and gradients
are eager tapegrad's, bit for bit."""
import numpy as np

import tapegrad as tg


def assert_replays_eager(traced, f, points):
    """At each point (a list of NumPy arrays, one per argument of ``f``), the replay
    ``traced.value_and_grad`` gives eager's value and gradients bit for bit."""
    for values in points:
        xs = [tg.tensor(v, requires_grad=True) for v in values]
        value = f(*xs)
        value.backward()
        v, grads = traced.value_and_grad(*(tg.tensor(v) for v in values))
        assert v.item() == value.item()
        for g, x in zip(grads, xs):
            np.testing.assert_array_equal(g.numpy(), x.grad.numpy())

"""Flatten / Unflatten, LayerNorm, BatchNorm1d, Embedding, Conv1d / Conv2d and
MaxPool1d / MaxPool2d against PyTorch 2.13 in float64: forward values, the gradients of
the inputs and of the parameters, the Node name of the output and the state after the
step (running statistics); gradcheck of the functional forms; construction (parameter
names, shapes, initial values, repr) and the errors of bad or unsupported arguments."""
import math

import numpy as np
import pytest
import torch

import tapegrad
from tapegrad.autograd import gradcheck, gradgradcheck

pytestmark = pytest.mark.usefixtures("torch_float64")
RTOL, ATOL = 1e-10, 1e-12


def _weights(module, seed):
    """Random values for ``module``'s state (the same for both twins): running variances
    positive, ``num_batches_tracked`` an int."""
    rng = np.random.RandomState(seed)
    out = {}
    for k, v in module.state_dict().items():
        if k.endswith("num_batches_tracked"):
            out[k] = np.array(3, np.int64)
        elif k.endswith("running_var"):
            out[k] = rng.rand(*v.shape) + 0.5
        else:
            out[k] = rng.randn(*v.shape)
    return out


def _run(m, make, inputs, extra=(), seed=0, train=True):
    """Build ``make(m.nn)``, give it the shared weights, run it on ``inputs`` (which
    require grad) and ``extra`` (which do not), backpropagate a fixed random cotangent."""
    module = make(m.nn)
    module.load_state_dict({k: m.tensor(v) for k, v in _weights(module, seed).items()})
    module.train(train)
    xs = [m.tensor(a, requires_grad=True) for a in inputs]
    out = module(*xs, *[m.tensor(e) for e in extra])
    indices = None
    if isinstance(out, tuple):
        out, indices = out
        indices = indices.numpy()
    cot = np.random.RandomState(seed + 1).randn(*out.shape)
    (out * m.tensor(cot)).sum().backward()
    return dict(out=out.detach().numpy(), name=out.grad_fn and out.grad_fn.name(),
                shape=tuple(out.shape), indices=indices,
                x_grads=[x.grad.numpy() for x in xs],
                p_grads={n: p.grad.numpy() for n, p in module.named_parameters()
                         if p.grad is not None},
                state={k: v.numpy() for k, v in module.state_dict().items()})


def _close(b, a, msg=""):
    np.testing.assert_allclose(b, a, rtol=RTOL, atol=ATOL, err_msg=msg)


def _compare(a, b):
    assert b["shape"] == a["shape"]
    _close(b["out"], a["out"])
    assert b["name"] == a["name"]
    if a["indices"] is not None:
        np.testing.assert_array_equal(b["indices"], a["indices"])
    for ga, gb in zip(a["x_grads"], b["x_grads"]):
        _close(gb, ga)
    assert a["p_grads"].keys() == b["p_grads"].keys()
    for k in a["p_grads"]:
        _close(b["p_grads"][k], a["p_grads"][k], k)
    assert list(a["state"]) == list(b["state"])
    for k in a["state"]:
        assert b["state"][k].dtype == a["state"][k].dtype, k
        _close(b["state"][k], a["state"][k], k)


R = np.random.RandomState(11)
X3 = R.randn(2, 3, 8)
X4 = R.randn(2, 3, 4, 5)
IMG = R.randn(2, 4, 7, 6)
SEQ = R.randn(3, 4, 10)
TIES = np.round(R.randn(2, 3, 6, 6))                  # many equal maxima: the first wins
INFS = np.where(R.rand(2, 3, 7) < 0.5, -np.inf, R.randn(2, 3, 7))   # windows of -inf only
IDS = np.array([[1, 0, 4, 4], [9, 2, 0, 7]])
LAYERS = {
    # Flatten / Unflatten
    "flatten": (lambda nn: nn.Flatten(), [X4]),
    "flatten-all": (lambda nn: nn.Flatten(0, -1), [X4]),
    "flatten-mid": (lambda nn: nn.Flatten(1, 2), [X4]),
    "flatten-one-dim": (lambda nn: nn.Flatten(1, 1), [X4]),     # the input itself
    "unflatten": (lambda nn: nn.Unflatten(2, (2, 4)), [X3]),
    "unflatten-infer": (lambda nn: nn.Unflatten(-1, (-1, 2)), [X3]),
    # LayerNorm
    "layernorm": (lambda nn: nn.LayerNorm(8), [X3 * 3 + 1]),
    "layernorm-2d-shape": (lambda nn: nn.LayerNorm([3, 8], eps=1e-3), [X3]),
    "layernorm-no-affine": (lambda nn: nn.LayerNorm(8, elementwise_affine=False), [X3]),
    "layernorm-no-bias": (lambda nn: nn.LayerNorm(5, bias=False), [X4]),
    # BatchNorm1d
    "batchnorm-2d": (lambda nn: nn.BatchNorm1d(3), [X3[:, :, 0] * 2 + 1]),
    "batchnorm-3d": (lambda nn: nn.BatchNorm1d(3, eps=1e-3, momentum=0.3), [X3]),
    "batchnorm-no-affine": (lambda nn: nn.BatchNorm1d(3, affine=False), [X3]),
    "batchnorm-no-bias": (lambda nn: nn.BatchNorm1d(3, bias=False), [X3]),
    "batchnorm-cumulative": (lambda nn: nn.BatchNorm1d(3, momentum=None), [X3]),
    "batchnorm-untracked": (lambda nn: nn.BatchNorm1d(3, track_running_stats=False), [X3]),
    "batchnorm-eval-2d": (lambda nn: nn.BatchNorm1d(3).eval(), [X3[:, :, 1]]),
    "batchnorm-eval-3d": (lambda nn: nn.BatchNorm1d(3, affine=False).eval(), [X3]),
    "batchnorm-eval-untracked": (lambda nn: nn.BatchNorm1d(3, track_running_stats=False)
                                 .eval(), [X3]),
    # Conv1d
    "conv1d": (lambda nn: nn.Conv1d(4, 5, 3), [SEQ]),
    "conv1d-stride-pad": (lambda nn: nn.Conv1d(4, 6, 4, stride=3, padding=2), [SEQ]),
    "conv1d-dilation": (lambda nn: nn.Conv1d(4, 2, 3, dilation=3, padding=(1,)), [SEQ]),
    "conv1d-groups": (lambda nn: nn.Conv1d(4, 6, 3, groups=2, bias=False), [SEQ]),
    "conv1d-depthwise": (lambda nn: nn.Conv1d(4, 4, 3, groups=4, padding=1), [SEQ]),
    "conv1d-same-even": (lambda nn: nn.Conv1d(4, 3, 4, padding="same", dilation=1), [SEQ]),
    "conv1d-same-dilated": (lambda nn: nn.Conv1d(4, 3, 3, padding="same", dilation=2), [SEQ]),
    "conv1d-valid": (lambda nn: nn.Conv1d(4, 3, 5, padding="valid"), [SEQ]),
    "conv1d-unbatched": (lambda nn: nn.Conv1d(4, 3, 3, padding=1), [SEQ[0]]),
    "conv1d-reflect": (lambda nn: nn.Conv1d(4, 3, 3, padding=2, padding_mode="reflect"),
                       [SEQ]),
    "conv1d-replicate": (lambda nn: nn.Conv1d(4, 3, 3, padding=3, padding_mode="replicate"),
                         [SEQ]),
    "conv1d-circular": (lambda nn: nn.Conv1d(4, 3, 3, padding="same", dilation=2,
                                             padding_mode="circular"), [SEQ]),
    # Conv2d
    "conv2d": (lambda nn: nn.Conv2d(4, 5, 3), [IMG]),
    "conv2d-rect": (lambda nn: nn.Conv2d(4, 5, (3, 2), stride=(2, 1), padding=(1, 2)), [IMG]),
    "conv2d-dilation": (lambda nn: nn.Conv2d(4, 3, 2, dilation=(2, 3), padding=1), [IMG]),
    "conv2d-groups": (lambda nn: nn.Conv2d(4, 6, 3, groups=2, stride=2, padding=1), [IMG]),
    "conv2d-same": (lambda nn: nn.Conv2d(4, 3, (4, 3), padding="same"), [IMG]),
    "conv2d-1x1-nobias": (lambda nn: nn.Conv2d(4, 7, 1, bias=False), [IMG]),
    "conv2d-batch1": (lambda nn: nn.Conv2d(4, 3, 3, padding=1), [IMG[:1]]),
    "conv2d-unbatched": (lambda nn: nn.Conv2d(4, 3, 3, stride=2), [IMG[0]]),
    "conv2d-reflect": (lambda nn: nn.Conv2d(4, 3, 3, padding=(2, 1), padding_mode="reflect"),
                       [IMG]),
    "conv2d-replicate": (lambda nn: nn.Conv2d(4, 2, 3, padding=2, groups=2,
                                              padding_mode="replicate"), [IMG]),
    "conv2d-circular": (lambda nn: nn.Conv2d(4, 3, 3, padding=1, padding_mode="circular"),
                        [IMG]),
    # MaxPool1d / MaxPool2d
    "maxpool1d": (lambda nn: nn.MaxPool1d(2), [SEQ]),
    "maxpool1d-stride-pad": (lambda nn: nn.MaxPool1d(3, stride=2, padding=1), [SEQ]),
    "maxpool1d-dilation-ceil": (lambda nn: nn.MaxPool1d(3, 2, 1, dilation=2, ceil_mode=True),
                                [SEQ]),
    "maxpool1d-indices": (lambda nn: nn.MaxPool1d(4, 3, 2, return_indices=True,
                                                  ceil_mode=True), [SEQ]),
    "maxpool1d-unbatched": (lambda nn: nn.MaxPool1d(3), [SEQ[0]]),
    "maxpool1d-minus-inf": (lambda nn: nn.MaxPool1d(2, 1, 1, return_indices=True), [INFS]),
    "maxpool2d": (lambda nn: nn.MaxPool2d(2), [IMG]),
    "maxpool2d-rect": (lambda nn: nn.MaxPool2d((3, 2), stride=(2, 1), padding=(1, 0)), [IMG]),
    "maxpool2d-dilation": (lambda nn: nn.MaxPool2d(2, 1, dilation=(2, 3)), [IMG]),
    "maxpool2d-ceil": (lambda nn: nn.MaxPool2d(3, 2, 1, ceil_mode=True), [IMG]),
    "maxpool2d-indices": (lambda nn: nn.MaxPool2d(3, 2, return_indices=True), [IMG]),
    "maxpool2d-unbatched": (lambda nn: nn.MaxPool2d(2, return_indices=True), [IMG[0]]),
    "maxpool2d-ties": (lambda nn: nn.MaxPool2d(3, 1, 1, return_indices=True), [TIES]),
    # a small network of them
    "cnn": (lambda nn: nn.Sequential(
        nn.Conv2d(4, 6, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Unflatten(1, (6, 9)), nn.BatchNorm1d(6), nn.LayerNorm(9), nn.Flatten(),
        nn.Linear(54, 3)), [IMG]),
    "cnn1d": (lambda nn: nn.Sequential(
        nn.Conv1d(4, 8, 3, padding="same"), nn.Tanh(), nn.MaxPool1d(2),
        nn.Conv1d(8, 4, 3, groups=2), nn.BatchNorm1d(4), nn.Flatten(), nn.Linear(12, 2)),
        [SEQ]),
}


@pytest.mark.parametrize("name", LAYERS)
def test_layer_matches_torch(both, name):
    make, inputs = LAYERS[name]
    _compare(*both(lambda m: _run(m, make, inputs)))


def test_network_in_eval_mode_matches_torch(both):
    make, inputs = LAYERS["cnn"]
    _compare(*both(lambda m: _run(m, make, inputs, train=False)))


EMBEDDINGS = {
    "embedding": (lambda nn: nn.Embedding(10, 3), IDS),
    "embedding-padding": (lambda nn: nn.Embedding(10, 3, padding_idx=4), IDS),
    "embedding-padding-negative": (lambda nn: nn.Embedding(10, 3, padding_idx=-3), IDS),
    "embedding-padding-unused": (lambda nn: nn.Embedding(10, 3, padding_idx=5), IDS),
    "embedding-int32": (lambda nn: nn.Embedding(10, 3), IDS.astype(np.int32)),
    "embedding-0d": (lambda nn: nn.Embedding(10, 3), np.array(7)),
    "embedding-3d": (lambda nn: nn.Embedding(10, 2, padding_idx=0), IDS.reshape(2, 2, 2)),
    "embedding-max-norm": (lambda nn: nn.Embedding(10, 3, max_norm=1.0), IDS),
    "embedding-max-norm-p1": (lambda nn: nn.Embedding(10, 3, max_norm=0.5, norm_type=1.0,
                                                      padding_idx=0), IDS),
}


@pytest.mark.parametrize("name", EMBEDDINGS)
def test_embedding_matches_torch(both, name):
    make, ids = EMBEDDINGS[name]
    a, b = both(lambda m: _run(m, make, [], extra=[ids]))
    _compare(a, b)
    if "padding" in name and "unused" not in name:
        pad = make(torch.nn).padding_idx
        assert (b["p_grads"]["weight"][pad] == 0).all()
        assert (b["out"][ids == pad] != 0).all()      # the padding row is read as it is


def _bn_steps(m, make, batches):
    """Train steps of a BatchNorm1d on ``batches``, then its state and an eval forward."""
    module = make(m.nn)
    module.load_state_dict({k: m.tensor(v) for k, v in _weights(module, 3).items()})
    states = []
    for x in batches:
        module(m.tensor(x, requires_grad=True)).sum().backward()
        states.append({k: v.numpy().copy() for k, v in module.state_dict().items()})
    module.eval()
    x = m.tensor(batches[0], requires_grad=True)
    out = module(x)
    (out * out).sum().backward()
    return states, out.detach().numpy(), x.grad.numpy(), \
        {k: p.grad.numpy() for k, p in module.named_parameters()}


@pytest.mark.parametrize("momentum", [0.1, 0.35, None])
@pytest.mark.parametrize("shape", [(5, 3), (4, 3, 6), (2, 3, 1)])
def test_batchnorm_running_stats_match_torch(both, momentum, shape):
    rng = np.random.RandomState(5)
    batches = [rng.randn(*shape) * (k + 1) + k for k in range(4)]
    a, b = both(lambda m: _bn_steps(m, lambda nn: nn.BatchNorm1d(3, momentum=momentum),
                                    batches))
    for sa, sb in zip(a[0], b[0]):
        assert list(sa) == list(sb)
        for k in sa:
            _close(sb[k], sa[k], k)
    assert b[0][-1]["num_batches_tracked"] == 3 + len(batches)
    for va, vb in zip(a[1:3], b[1:3]):
        _close(vb, va)
    for k in a[3]:
        _close(b[3][k], a[3][k], k)


def test_batchnorm_state_objects_updated_in_place():
    bn = tapegrad.nn.BatchNorm1d(2)
    mean, var, count = bn.running_mean, bn.running_var, bn.num_batches_tracked
    bn(tapegrad.tensor([[1.0, 2.0], [3.0, 6.0]]))
    assert bn.running_mean is mean and bn.running_var is var and \
        bn.num_batches_tracked is count
    np.testing.assert_allclose(mean.numpy(), [0.2, 0.4])
    np.testing.assert_allclose(var.numpy(), [0.9 + 0.1 * 2.0, 0.9 + 0.1 * 8.0])
    assert count.item() == 1 and count.dtype is tapegrad.int64
    bn.eval()
    bn(tapegrad.tensor([[1.0, 2.0]]))                     # eval: nothing changes
    assert count.item() == 1
    np.testing.assert_allclose(mean.numpy(), [0.2, 0.4])
    bn.reset_running_stats()
    assert count.item() == 0 and (mean.numpy() == 0).all() and (var.numpy() == 1).all()


def test_batchnorm_loads_state_dict_without_num_batches_tracked():
    """As PyTorch loads a dict without version metadata (an old checkpoint): a missing
    num_batches_tracked keeps its value."""
    for m in (torch, tapegrad):
        bn = m.nn.BatchNorm1d(3)
        bn.num_batches_tracked.add_(2)
        sd = {k: v for k, v in bn.state_dict().items() if k != "num_batches_tracked"}
        assert not m.nn.BatchNorm1d(3).load_state_dict(sd).missing_keys
        assert bn.load_state_dict(sd) is not None and bn.num_batches_tracked.item() == 2


# -- the functional forms ------------------------------------------------------------------

def _grads(m, f, arrays):
    xs = [m.tensor(a, requires_grad=True) for a in arrays]
    out = f(m, *xs)
    cot = np.random.RandomState(2).randn(*out.shape)
    (out * m.tensor(cot)).sum().backward()
    return out.detach().numpy(), [x.grad.numpy() for x in xs]


FUNCTIONAL = {
    "conv1d": (lambda m, x, w, b: m.nn.functional.conv1d(x, w, b, stride=2, padding=1,
                                                         dilation=2), [SEQ, R.randn(3, 4, 3),
                                                                       R.randn(3)]),
    "conv1d-groups-tuple": (lambda m, x, w: m.nn.functional.conv1d(
        x, w, None, (1,), (2,), (1,), 2), [SEQ, R.randn(4, 2, 5)]),
    "conv2d": (lambda m, x, w, b: m.nn.functional.conv2d(x, w, b, (2, 1), (1, 0), (1, 2)),
               [IMG, R.randn(2, 4, 3, 2), R.randn(2)]),
    "conv2d-same": (lambda m, x, w: m.nn.functional.conv2d(x, w, padding="same", groups=4),
                    [IMG, R.randn(8, 1, 2, 3)]),
    "layer_norm": (lambda m, x, w, b: m.nn.functional.layer_norm(x, (4, 5), w, b, 1e-4),
                   [X4, R.randn(4, 5), R.randn(4, 5)]),
    "layer_norm-plain": (lambda m, x: m.nn.functional.layer_norm(x, [5]), [X4]),
    "batch_norm-train": (lambda m, x, w, b: m.nn.functional.batch_norm(
        x, None, None, w, b, training=True, eps=1e-3), [X4, R.randn(3), R.randn(3)]),
    "batch_norm-eval": (lambda m, x, w: m.nn.functional.batch_norm(
        x, m.tensor(np.arange(3.0)), m.tensor(np.arange(1.0, 4.0)), w), [X3, R.randn(3)]),
    "embedding": (lambda m, w: m.nn.functional.embedding(m.tensor(IDS), w, padding_idx=2),
                  [R.randn(10, 4)]),
    "max_pool1d": (lambda m, x: m.nn.functional.max_pool1d(x, 3, 2, 1, 1, True), [SEQ]),
    "max_pool2d": (lambda m, x: m.nn.functional.max_pool2d(x, (2, 3), padding=1), [IMG]),
}


@pytest.mark.parametrize("name", FUNCTIONAL)
def test_functional_matches_torch(both, name):
    f, arrays = FUNCTIONAL[name]
    (oa, ga), (ob, gb) = both(lambda m: _grads(m, f, arrays))
    _close(ob, oa)
    for x, y in zip(ga, gb):
        _close(y, x)


def test_functional_batch_norm_updates_given_running_stats(both):
    def program(m):
        mean, var = m.zeros(3), m.ones(3)
        for k in range(3):
            m.nn.functional.batch_norm(m.tensor(X4 + k), mean, var, training=True,
                                       momentum=0.2)
        return mean.numpy(), var.numpy()
    (ma, va), (mb, vb) = both(program)
    _close(mb, ma)
    _close(vb, va)


def test_functional_max_pool_indices_match_torch(both):
    def program(m):
        F = m.nn.functional
        return (F.max_pool1d(m.tensor(SEQ), 3, 2, 1, return_indices=True)[1].numpy(),
                F.max_pool2d_with_indices(m.tensor(TIES), 2, ceil_mode=True)[1].numpy(),
                F.max_pool2d(m.tensor(IMG), 3, 2, 1, 2, return_indices=True)[1].numpy())
    for ia, ib in zip(*both(program)):
        np.testing.assert_array_equal(ib, ia)


# gradcheck: small sizes, distinct well-separated values where a max is taken
GR = np.random.RandomState(3)
POOL_X = GR.permutation(2 * 2 * 5 * 5).reshape(2, 2, 5, 5) * 0.1
GRADCHECK = {
    "conv1d": (lambda x, w, b: tapegrad.nn.functional.conv1d(x, w, b, 2, 1, 2),
               [GR.randn(2, 2, 7), GR.randn(3, 2, 2), GR.randn(3)]),
    "conv1d-groups": (lambda x, w: tapegrad.nn.functional.conv1d(x, w, padding="same",
                                                                 groups=2),
                      [GR.randn(1, 4, 5), GR.randn(4, 2, 3)]),
    "conv2d": (lambda x, w, b: tapegrad.nn.functional.conv2d(x, w, b, (2, 1), 1, (1, 2)),
               [GR.randn(2, 2, 4, 5), GR.randn(3, 2, 2, 2), GR.randn(3)]),
    "conv2d-unbatched": (lambda x, w: tapegrad.nn.functional.conv2d(x, w, groups=2),
                         [GR.randn(2, 3, 3), GR.randn(4, 1, 2, 2)]),
    "layer_norm": (lambda x, w, b: tapegrad.nn.functional.layer_norm(x, (3,), w, b),
                   [GR.randn(2, 4, 3), GR.randn(3), GR.randn(3)]),
    "batch_norm-train": (lambda x, w, b: tapegrad.nn.functional.batch_norm(
        x, None, None, w, b, True), [GR.randn(3, 2, 4), GR.randn(2), GR.randn(2)]),
    "batch_norm-eval": (lambda x, w, b: tapegrad.nn.functional.batch_norm(
        x, tapegrad.tensor([0.5, -1.0]), tapegrad.tensor([2.0, 0.5]), w, b),
        [GR.randn(3, 2), GR.randn(2), GR.randn(2)]),
    # (the padding row's zero gradient is by design not the finite differences': 3 unused)
    "embedding": (lambda w: tapegrad.nn.functional.embedding(tapegrad.tensor(IDS % 5), w,
                                                             padding_idx=3),
                  [GR.randn(5, 3)]),
    "max_pool1d": (lambda x: tapegrad.nn.functional.max_pool1d(x, 3, 2, 1), [POOL_X[0]]),
    "max_pool2d": (lambda x: tapegrad.nn.functional.max_pool2d(x, 2, 2, 1, ceil_mode=True),
                   [POOL_X]),
}


@pytest.mark.parametrize("name", GRADCHECK)
def test_gradcheck(name):
    f, arrays = GRADCHECK[name]
    assert gradcheck(f, [tapegrad.tensor(a, requires_grad=True) for a in arrays])


GRADGRADCHECK = {
    "conv2d": (lambda x, w, b: tapegrad.nn.functional.conv2d(x, w, b, 2, 1, groups=2),
               [GR.randn(1, 2, 4, 4), GR.randn(2, 1, 2, 2), GR.randn(2)]),
    "layer_norm": (lambda x, w, b: tapegrad.nn.functional.layer_norm(x, (3,), w, b),
                   [GR.randn(2, 3), GR.randn(3), GR.randn(3)]),
    "batch_norm": (lambda x, w, b: tapegrad.nn.functional.batch_norm(x, None, None, w, b,
                                                                     True),
                   [GR.randn(3, 2), GR.randn(2), GR.randn(2)]),
    "max_pool1d": (lambda x: tapegrad.nn.functional.max_pool1d(x, 2, 1, 1), [POOL_X[0, 0]]),
}


@pytest.mark.parametrize("name", GRADGRADCHECK)
def test_gradgradcheck(name):
    f, arrays = GRADGRADCHECK[name]
    assert gradgradcheck(f, [tapegrad.tensor(a, requires_grad=True) for a in arrays])


def test_traced_network_replays():
    tapegrad.manual_seed(1)
    nn = tapegrad.nn
    net = nn.Sequential(nn.Conv1d(4, 3, 3, padding=1), nn.Tanh(), nn.Flatten(),
                        nn.LayerNorm(30), nn.Linear(30, 1))

    def loss(x):
        return net(x).sum()
    traced = tapegrad.trace(loss, tapegrad.tensor(SEQ))
    x = tapegrad.tensor(SEQ[::-1].copy() * 2, requires_grad=True)
    value, grads = traced.value_and_grad(x)
    expected = loss(x)
    expected.backward()
    _close(float(value), float(expected))
    _close(np.asarray(grads.numpy() if hasattr(grads, "numpy") else grads), x.grad.numpy())
    assert traced.explain() == ["first call"]            # no guard: replayed as recorded


def test_conv_is_one_gather_and_one_product():
    """The tape of a convolution does not grow with its size (no per-element Python)."""
    def entries(n, hw):
        x = tapegrad.randn(n, 3, hw, hw, requires_grad=True)
        w = tapegrad.randn(8, 3, 3, 3, requires_grad=True)
        with tapegrad.Tape() as tape:
            tapegrad.nn.functional.conv2d(x, w, padding=1)
            tapegrad.nn.functional.max_pool2d(x, 3, 2, 1)
        return tape.next
    assert entries(1, 5) == entries(4, 24)


# -- construction: parameters, buffers, initial values, repr ---------------------------

MODULES = [
    lambda nn: nn.Conv1d(4, 6, 3),
    lambda nn: nn.Conv1d(4, 6, 3, stride=2, padding="valid", groups=2, bias=False),
    lambda nn: nn.Conv2d(3, 8, (3, 2), padding="same", dilation=2, padding_mode="reflect"),
    lambda nn: nn.Conv2d(4, 4, 5, 2, 1, groups=4),
    lambda nn: nn.LayerNorm((3, 4)),
    lambda nn: nn.LayerNorm(4, elementwise_affine=False),
    lambda nn: nn.BatchNorm1d(5),
    lambda nn: nn.BatchNorm1d(5, affine=False, track_running_stats=False, momentum=None),
    lambda nn: nn.Embedding(7, 3, padding_idx=-2, max_norm=2.0, norm_type=1.0),
    lambda nn: nn.MaxPool1d(3),
    lambda nn: nn.MaxPool2d((2, 3), stride=1, padding=1, dilation=2, ceil_mode=True),
    lambda nn: nn.Flatten(0, 2),
    lambda nn: nn.Unflatten(1, (2, 3)),
]


@pytest.mark.parametrize("make", MODULES)
def test_construction_matches_torch(make):
    a, b = make(torch.nn), make(tapegrad.nn)
    assert repr(b) == repr(a)
    sa, sb = a.state_dict(), b.state_dict()
    assert list(sb) == list(sa)
    for k in sa:
        assert tuple(sb[k].shape) == tuple(sa[k].shape), k
        assert str(sb[k].dtype).split(".")[1] == str(sa[k].dtype).split(".")[1], k
    assert [n for n, p in b.named_parameters()] == [n for n, p in a.named_parameters()]
    assert [n for n, _ in b.named_buffers()] == [n for n, _ in a.named_buffers()]
    for k, p in a.named_parameters():
        assert getattr(b, k).requires_grad == p.requires_grad
    for attr in ("kernel_size", "stride", "padding", "dilation", "groups", "padding_mode",
                 "output_padding", "normalized_shape", "eps", "momentum", "padding_idx",
                 "max_norm", "norm_type", "return_indices", "ceil_mode", "start_dim",
                 "unflattened_size"):
        if hasattr(a, attr):
            assert getattr(b, attr) == getattr(a, attr), attr


def test_initial_values():
    tapegrad.manual_seed(0)
    nn = tapegrad.nn
    conv = nn.Conv2d(16, 32, 3, groups=2)
    bound = 1 / math.sqrt(8 * 9)                        # fan_in = in / groups * kernel
    w, b = conv.weight.detach().numpy(), conv.bias.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.95 * bound
    assert np.abs(b).max() <= bound and b.std() > 0.3 * bound
    assert abs(w.mean()) < 0.05 * bound and abs(w.std() - bound / math.sqrt(3)) < 0.05 * bound
    emb = nn.Embedding(200, 50, padding_idx=3)
    e = emb.weight.detach().numpy()
    assert (e[3] == 0).all()
    assert abs(e.mean()) < 0.05 and abs(e.std() - 1) < 0.05
    ln, bn = nn.LayerNorm(6), nn.BatchNorm1d(6)
    for p, v in ((ln.weight, 1), (ln.bias, 0), (bn.weight, 1), (bn.bias, 0),
                 (bn.running_mean, 0), (bn.running_var, 1), (bn.num_batches_tracked, 0)):
        assert (p.detach().numpy() == v).all()


def test_embedding_from_pretrained():
    w = tapegrad.randn(4, 3)
    emb = tapegrad.nn.Embedding.from_pretrained(w)
    assert not emb.weight.requires_grad and emb.num_embeddings == 4
    np.testing.assert_array_equal(emb(tapegrad.tensor([2, 0])).numpy(), w.numpy()[[2, 0]])
    assert tapegrad.nn.Embedding.from_pretrained(w, freeze=False).weight.requires_grad


def test_flatten_one_dim_is_the_input():
    x = tapegrad.randn(2, 3)
    assert tapegrad.nn.Flatten()(x) is x
    assert tapegrad.nn.Flatten()(tapegrad.tensor(2.0)).shape == (1,)


# -- errors ---------------------------------------------------------------------------------

ERRORS = {
    "conv-same-strided": lambda m: m.nn.Conv1d(3, 4, 3, stride=2, padding="same"),
    "conv-bad-padding-string": lambda m: m.nn.Conv2d(3, 4, 3, padding="full"),
    "conv-in-groups": lambda m: m.nn.Conv1d(3, 4, 3, groups=2),
    "conv-out-groups": lambda m: m.nn.Conv1d(4, 3, 3, groups=2),
    "conv-padding-mode": lambda m: m.nn.Conv2d(3, 4, 3, padding_mode="mirror"),
    "conv-channels": lambda m: m.nn.functional.conv1d(m.zeros(2, 3, 8), m.zeros(4, 5, 3)),
    "conv-kernel-too-big": lambda m: m.nn.functional.conv1d(m.zeros(2, 3, 8),
                                                            m.zeros(4, 3, 30)),
    "conv-negative-padding": lambda m: m.nn.functional.conv2d(m.zeros(1, 3, 6, 6),
                                                              m.zeros(4, 3, 3, 3), padding=-1),
    "conv-input-dims": lambda m: m.nn.functional.conv1d(m.zeros(2, 3, 4, 5),
                                                        m.zeros(4, 3, 3)),
    "conv-stride-zero": lambda m: m.nn.functional.conv2d(m.zeros(1, 3, 6, 6),
                                                         m.zeros(4, 3, 3, 3), stride=0),
    "conv-bias-size": lambda m: m.nn.functional.conv2d(m.zeros(1, 3, 6, 6),
                                                       m.zeros(4, 3, 3, 3), bias=m.zeros(3)),
    "conv-same-strided-functional": lambda m: m.nn.functional.conv1d(
        m.zeros(1, 3, 8), m.zeros(4, 3, 3), stride=2, padding="same"),
    "conv-reflect-too-wide": lambda m: m.nn.Conv1d(3, 4, 3, padding=2,
                                                   padding_mode="reflect")(m.zeros(1, 3, 2)),
    "conv2d-reflect-too-wide": lambda m: m.nn.Conv2d(3, 4, 3, padding=(1, 2),
                                                     padding_mode="reflect")(m.zeros(3, 4, 2)),
    "conv-circular-too-wide": lambda m: m.nn.Conv1d(3, 4, 3, padding=3,
                                                    padding_mode="circular")(m.zeros(1, 3, 2)),
    "pool-padding": lambda m: m.nn.functional.max_pool2d(m.zeros(1, 1, 6, 6), 3, padding=2),
    "pool-too-small": lambda m: m.nn.functional.max_pool2d(m.zeros(1, 3, 6, 6), 7),
    "pool-dims": lambda m: m.nn.functional.max_pool1d(m.zeros(1, 3, 6, 6), 2),
    "pool2d-dims": lambda m: m.nn.functional.max_pool2d(m.zeros(6, 6), 2),
    "pool-stride-zero": lambda m: m.nn.functional.max_pool2d(m.zeros(1, 1, 6, 6), 2, 0),
    "batchnorm-dims": lambda m: m.nn.BatchNorm1d(3)(m.zeros(2, 3, 4, 5)),
    "batchnorm-one-value": lambda m: m.nn.BatchNorm1d(3)(m.zeros(1, 3)),
    "batchnorm-features": lambda m: m.nn.BatchNorm1d(3)(m.zeros(2, 4)),
    "batchnorm-eval-no-stats": lambda m: m.nn.functional.batch_norm(m.zeros(2, 3), None, None),
    "layernorm-shape": lambda m: m.nn.LayerNorm(8)(m.zeros(2, 7)),
    "layernorm-weight": lambda m: m.nn.functional.layer_norm(m.zeros(2, 7), (7,),
                                                             weight=m.zeros(6)),
    "embedding-range": lambda m: m.nn.Embedding(5, 3)(m.tensor([5])),
    "embedding-negative": lambda m: m.nn.Embedding(5, 3)(m.tensor([-1])),
    "embedding-float-ids": lambda m: m.nn.Embedding(5, 3)(m.tensor([1.0])),
    "embedding-padding-idx": lambda m: m.nn.Embedding(5, 3, padding_idx=5),
    "embedding-padding-idx-negative": lambda m: m.nn.Embedding(5, 3, padding_idx=-6),
    "unflatten-sizes": lambda m: m.nn.Unflatten(1, (2, 2))(m.zeros(2, 3)),
    "unflatten-infer": lambda m: m.nn.Unflatten(1, (4, -1))(m.zeros(2, 6)),
    "unflatten-int": lambda m: m.nn.Unflatten(1, 5),
    "unflatten-element": lambda m: m.nn.Unflatten(1, (2.0, 3)),
    "flatten-order": lambda m: m.nn.Flatten(2, 1)(m.zeros(2, 3, 4)),
}


@pytest.mark.parametrize("name", ERRORS)
def test_errors_match_torch(name):
    program = ERRORS[name]
    with pytest.raises(Exception) as ea:
        program(torch)
    with pytest.raises(type(ea.value)) as eb:
        program(tapegrad)
    first = str(ea.value).split("\n")[0]
    assert str(eb.value).split("\n")[0] == first.replace("torch.Size", "tapegrad.Size") or \
        name in _MESSAGE_DIFFERS, (str(eb.value), first)


# messages that print a set, whose order varies from run to run in PyTorch
_MESSAGE_DIFFERS = {"conv-padding-mode", "conv-bad-padding-string"}


UNSUPPORTED = {
    "embedding-scale-grad-by-freq": (lambda: tapegrad.nn.Embedding(5, 3,
                                                                   scale_grad_by_freq=True),
                                     "scale_grad_by_freq"),
    "embedding-sparse": (lambda: tapegrad.nn.Embedding(5, 3, sparse=True), "sparse"),
    "functional-embedding-sparse": (lambda: tapegrad.nn.functional.embedding(
        tapegrad.tensor([1]), tapegrad.randn(5, 3), sparse=True), "sparse"),
    "functional-embedding-freq": (lambda: tapegrad.nn.functional.embedding(
        tapegrad.tensor([1]), tapegrad.randn(5, 3), scale_grad_by_freq=True),
        "scale_grad_by_freq"),
    "unflatten-named": (lambda: tapegrad.nn.Unflatten("features", (("C", 2), ("L", 3))),
                        "named tensors"),
}


@pytest.mark.parametrize("name", UNSUPPORTED)
def test_unsupported_options_raise_clearly(name):
    program, words = UNSUPPORTED[name]
    with pytest.raises(NotImplementedError, match=words):
        program()

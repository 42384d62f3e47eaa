"""Every layer and loss module against PyTorch 2.13 in float64: forward values, the
gradients of the inputs and of the parameters, and the Node name of the output."""
import numpy as np
import pytest
import torch

import tapegrad

pytestmark = pytest.mark.usefixtures("torch_float64")
RTOL, ATOL = 1e-10, 1e-12


def _weights(module, seed):
    """Random values for ``module``'s state, as numpy arrays (the same for both twins)."""
    rng = np.random.RandomState(seed)
    return {k: rng.randn(*v.shape) for k, v in module.state_dict().items()}


def _run(m, make, inputs, extra=(), seed=0):
    """Build ``make(m.nn)``, give it the shared weights, run it on ``inputs`` (which
    require grad) and ``extra`` (which do not), backpropagate a fixed random cotangent."""
    module = make(m.nn)
    module.load_state_dict({k: m.tensor(v) for k, v in _weights(module, seed).items()})
    xs = [m.tensor(a, requires_grad=True) for a in inputs]
    out = module(*xs, *[m.tensor(e) for e in extra])
    cot = np.random.RandomState(seed + 1).randn(*out.shape)
    (out * m.tensor(cot)).sum().backward()
    return dict(out=out.detach().numpy(), name=out.grad_fn and out.grad_fn.name(),
                x_grads=[x.grad.numpy() for x in xs],
                p_grads={n: p.grad.numpy() for n, p in module.named_parameters()})


def _compare(a, b):
    np.testing.assert_allclose(b["out"], a["out"], rtol=RTOL, atol=ATOL)
    assert b["name"] == a["name"]
    for ga, gb in zip(a["x_grads"], b["x_grads"]):
        np.testing.assert_allclose(gb, ga, rtol=RTOL, atol=ATOL)
    assert a["p_grads"].keys() == b["p_grads"].keys()
    for k in a["p_grads"]:
        np.testing.assert_allclose(b["p_grads"][k], a["p_grads"][k], rtol=RTOL, atol=ATOL,
                                   err_msg=k)


R = np.random.RandomState(7)
X54 = R.randn(5, 4) * 2
LAYERS = {
    "linear": (lambda nn: nn.Linear(4, 3), [X54]),
    "linear-nobias": (lambda nn: nn.Linear(4, 3, bias=False), [X54]),
    "linear-3d": (lambda nn: nn.Linear(4, 3), [R.randn(2, 5, 4)]),
    "linear-1d": (lambda nn: nn.Linear(4, 3), [R.randn(4)]),
    "tanh": (lambda nn: nn.Tanh(), [X54]),
    "relu": (lambda nn: nn.ReLU(), [np.r_[X54.ravel(), 0.0].reshape(3, 7)]),
    "sigmoid": (lambda nn: nn.Sigmoid(), [X54 * 10]),
    "gelu": (lambda nn: nn.GELU(), [X54]),
    "gelu-tanh": (lambda nn: nn.GELU(approximate="tanh"), [X54]),
    "softplus": (lambda nn: nn.Softplus(), [X54 * 8]),
    "softplus-beta": (lambda nn: nn.Softplus(beta=2.0, threshold=3.0), [X54]),
    "leaky-relu": (lambda nn: nn.LeakyReLU(0.2), [np.r_[X54.ravel(), 0.0].reshape(3, 7)]),
    "softmax": (lambda nn: nn.Softmax(dim=1), [X54]),
    "log-softmax": (lambda nn: nn.LogSoftmax(dim=0), [X54 * 30]),
    "identity": (lambda nn: nn.Identity(), [X54]),
    "dropout-eval": (lambda nn: nn.Dropout(0.5).eval(), [X54]),
    "mlp": (lambda nn: nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 8), nn.Tanh(),
                                     nn.Linear(8, 2), nn.LogSoftmax(dim=1)), [X54]),
}


@pytest.mark.parametrize("name", LAYERS)
def test_layer_matches_torch(both, name):
    make, inputs = LAYERS[name]
    _compare(*both(lambda m: _run(m, make, inputs)))


LOGITS = R.randn(6, 4) * 3
CLASSES = np.array([0, 3, 1, 1, 2, 0])
PROBS = np.exp(R.randn(6, 4))
PROBS /= PROBS.sum(1, keepdims=True)
BINARY = (R.rand(6, 4) > 0.5).astype(float)
EXTREME = np.array([[-800.0, -30.0, -1.0, 0.0], [1e-3, 2.0, 40.0, 900.0]])
LOSSES = {
    "mse": (lambda nn: nn.MSELoss(), [X54, R.randn(5, 4)], []),
    "mse-sum": (lambda nn: nn.MSELoss(reduction="sum"), [X54, R.randn(5, 4)], []),
    "mse-none": (lambda nn: nn.MSELoss(reduction="none"), [X54], [R.randn(5, 4)]),
    "ce": (lambda nn: nn.CrossEntropyLoss(), [LOGITS], [CLASSES]),
    "ce-sum": (lambda nn: nn.CrossEntropyLoss(reduction="sum"), [LOGITS], [CLASSES]),
    "ce-none": (lambda nn: nn.CrossEntropyLoss(reduction="none"), [LOGITS], [CLASSES]),
    "ce-ignore": (lambda nn: nn.CrossEntropyLoss(ignore_index=1), [LOGITS], [CLASSES]),
    "ce-ignore-none": (lambda nn: nn.CrossEntropyLoss(ignore_index=0, reduction="none"),
                       [LOGITS], [CLASSES]),
    "ce-smoothing": (lambda nn: nn.CrossEntropyLoss(label_smoothing=0.2, ignore_index=3),
                     [LOGITS], [CLASSES]),
    "ce-smoothing-sum": (lambda nn: nn.CrossEntropyLoss(label_smoothing=0.1, reduction="sum"),
                         [LOGITS], [CLASSES]),
    "ce-spatial": (lambda nn: nn.CrossEntropyLoss(), [R.randn(2, 3, 4, 5)],
                   [R.randint(0, 3, (2, 4, 5))]),
    "ce-unbatched": (lambda nn: nn.CrossEntropyLoss(), [R.randn(5)], [np.array(2)]),
    "ce-probs": (lambda nn: nn.CrossEntropyLoss(), [LOGITS], [PROBS]),
    "ce-probs-none": (lambda nn: nn.CrossEntropyLoss(reduction="none", label_smoothing=0.3),
                      [LOGITS], [PROBS]),
    "ce-extreme": (lambda nn: nn.CrossEntropyLoss(), [EXTREME], [np.array([0, 3])]),
    "bce": (lambda nn: nn.BCEWithLogitsLoss(), [LOGITS], [BINARY]),
    "bce-sum-soft": (lambda nn: nn.BCEWithLogitsLoss(reduction="sum"), [LOGITS, PROBS], []),
    "bce-none": (lambda nn: nn.BCEWithLogitsLoss(reduction="none"), [LOGITS], [BINARY]),
    "bce-extreme": (lambda nn: nn.BCEWithLogitsLoss(), [EXTREME],
                    [np.array([[0, 1, 0, 1], [1, 0, 1, 0.0]])]),
}


def _weighted(name):
    """Losses with class / element weights: PyTorch takes them as constructor tensors."""
    def make(m):
        w = m.tensor([0.5, 2.0, 1.0, 3.0])
        return {"ce-weight": lambda nn: nn.CrossEntropyLoss(weight=w),
                "ce-weight-ignore-smoothing": lambda nn: nn.CrossEntropyLoss(
                    weight=w, ignore_index=1, label_smoothing=0.25),
                "ce-weight-probs": lambda nn: nn.CrossEntropyLoss(weight=w),
                "bce-weights": lambda nn: nn.BCEWithLogitsLoss(weight=w, pos_weight=w * 3)}[name]
    return make


WEIGHTED = {"ce-weight": ([LOGITS], [CLASSES]),
            "ce-weight-ignore-smoothing": ([LOGITS], [CLASSES]),
            "ce-weight-probs": ([LOGITS], [PROBS]),
            "bce-weights": ([LOGITS, PROBS], [])}


@pytest.mark.parametrize("name", LOSSES)
def test_loss_matches_torch(both, name):
    make, inputs, extra = LOSSES[name]
    _compare(*both(lambda m: _run(m, make, inputs, [e for e in extra])))


@pytest.mark.parametrize("name", WEIGHTED)
def test_weighted_loss_matches_torch(both, name):
    inputs, extra = WEIGHTED[name]
    _compare(*both(lambda m: _run(m, _weighted(name)(m), inputs, extra)))


def test_integer_targets_stay_integer():
    """The class targets above go through m.tensor: make sure they really are int64."""
    assert tapegrad.tensor(CLASSES).dtype is tapegrad.int64
    assert torch.tensor(CLASSES).dtype is torch.int64


def test_linear_default_initialisation():
    """kaiming_uniform_(a=sqrt(5)) weight and U(-1/sqrt(fan_in), 1/sqrt(fan_in)) bias: both
    bounded by 1/sqrt(in_features) and spread over that range (as PyTorch's)."""
    tapegrad.manual_seed(1)
    lin = tapegrad.nn.Linear(400, 300)
    bound = 1 / np.sqrt(400)
    for p in (lin.weight, lin.bias):
        v = p.detach().numpy()
        assert np.abs(v).max() <= bound and np.abs(v).max() > 0.95 * bound
        assert abs(v.mean()) < 0.05 * bound and abs(v.std() - bound / np.sqrt(3)) < 0.05 * bound
    assert lin.weight.requires_grad and lin.weight.is_leaf and lin.weight._version == 1
    t = torch.nn.Linear(400, 300)
    assert abs(t.weight.detach().std().item() - lin.weight.detach().numpy().std()) < 0.03 * bound

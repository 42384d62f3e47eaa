"""The ADBench LSTM objective (ADBench's ``lstm``; GradBench's ``lstm``): a stacked LSTM
whose weight "matrices" are diagonal (one weight per gate entry), run over a sequence,
predicting each next symbol, scored by a log-softmax.

Parameters: main (2 L, 4 b): per layer a weight row and a bias row over the four gates;
extra (3, b): input scale, output scale, output bias.  Constant state (2 L, b): per layer
the initial hidden and cell vectors; sequence (c, b).  A layer step, from input u:

    g = cat(u, h, u, h) * weight + bias
    forget, in, out = sigmoid(g[:b]), sigmoid(g[b:2b]), sigmoid(g[2b:3b])
    cell = cell * forget + in * tanh(g[3b:]);   h = out * tanh(cell)

A prediction feeds x_t * extra[0] through the layers and gives y = h_L * extra[1] +
extra[2]; the loss is -(1 / ((c - 1) b)) sum_t sum(x_{t+1} * (y - log(sum(exp(y)) + 2)))
(ADBench's log-normaliser, "+ 2" included).  Timed: the loss and its gradient with
respect to main and extra.  Reference: PyTorch, float64.  Inputs (seed 18): L = 2 layers,
b = 14, all arrays ~ U(-1, 1).  --quick: c = 4, b = 4.
"""
import numpy as np

from ..harness import Config
from .common import STANDARD, standard

NAME = "lstm"
FRAMEWORKS = STANDARD
SIZES, QUICK_SIZES = (128, 1_024), (4,)
XLABEL = "sequence length c (2 layers, b = 14)"
LAYERS, B = 2, 14
LIMITS = {"jax-jit": (1_024, "jax-jit unrolls the sequence loop: compile time grows with c")}


def objective(m, consts, main, extra):
    state, seq = consts
    b = seq[0].shape[0]
    weights = [(main[2 * i], main[2 * i + 1]) for i in range(len(state) // 2)]
    hidden, cell = list(state[0::2]), list(state[1::2])
    total = 0.0
    for t in range(len(seq) - 1):
        u = seq[t] * extra[0]
        for i, (w, bias) in enumerate(weights):
            g = m.cat([u, hidden[i], u, hidden[i]]) * w + bias
            forget, ingate = m.sigmoid(g[:b]), m.sigmoid(g[b:2 * b])
            outgate, change = m.sigmoid(g[2 * b:3 * b]), m.tanh(g[3 * b:])
            cell[i] = cell[i] * forget + ingate * change
            hidden[i] = outgate * m.tanh(cell[i])
            u = hidden[i]
        y = u * extra[1] + extra[2]
        total = total + m.sum(seq[t + 1] * (y - m.log(m.sum(m.exp(y)) + 2.0)))
    return total * (-1.0 / ((len(seq) - 1) * b))


def configs(c, quick):
    return [Config(f"c={c}", c, "float64", {"c": c, "b": 4 if quick else B})]


def _data(cfg):
    c, b = cfg.params["c"], cfg.params["b"]
    r = np.random.RandomState(18)
    main = r.uniform(-1, 1, (2 * LAYERS, 4 * b))
    extra = r.uniform(-1, 1, (3, b))
    state = r.uniform(-1, 1, (2 * LAYERS, b))
    seq = r.uniform(-1, 1, (c, b))
    return (list(state), list(seq)), [main, extra]


standard(globals())

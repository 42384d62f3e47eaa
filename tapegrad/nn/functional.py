"""``tapegrad.nn.functional``: PyTorch's functional names for ops of the table."""
from ..elementwise import FUNCTIONS, where

relu = FUNCTIONS["relu"]
sigmoid = FUNCTIONS["sigmoid"]
tanh = FUNCTIONS["tanh"]


def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta x)) / beta, and x itself where beta x > threshold."""
    if beta == 1.0 and threshold == 20.0:
        return FUNCTIONS["softplus"](input)
    scaled = input * beta
    return where(scaled > threshold, input, FUNCTIONS["softplus"](scaled) / beta)

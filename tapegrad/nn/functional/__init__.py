"""``tapegrad.nn.functional``: PyTorch's functional forms, composed from the op table's
ops (numerically stable forms; each shows as PyTorch's Node in graph views)."""
from .activation import (elu, gelu, hardtanh, leaky_relu, mish, prelu, relu, sigmoid, silu,
                         softplus, softsign, tanh)
from .conv import conv1d, conv2d
from .layers import dropout, linear
from .loss import (binary_cross_entropy, binary_cross_entropy_with_logits, cross_entropy,
                   huber_loss, kl_div, l1_loss, mse_loss, nll_loss, smooth_l1_loss)
from .normalization import batch_norm, layer_norm
from .pooling import (max_pool1d, max_pool1d_with_indices, max_pool2d,
                      max_pool2d_with_indices)
from .sparse import embedding
from ...softmax_ops import log_softmax, logsumexp, softmax

__all__ = ["binary_cross_entropy_with_logits", "cross_entropy", "dropout", "gelu",
           "leaky_relu", "linear", "log_softmax", "logsumexp", "mse_loss", "nll_loss", "relu",
           "sigmoid", "softmax", "softplus", "tanh"]
__all__ += ["batch_norm", "conv1d", "conv2d", "embedding", "layer_norm", "max_pool1d",
            "max_pool1d_with_indices", "max_pool2d", "max_pool2d_with_indices"]
__all__ += ["binary_cross_entropy", "elu", "hardtanh", "huber_loss", "kl_div", "l1_loss", "mish",
            "prelu", "silu", "smooth_l1_loss", "softsign"]

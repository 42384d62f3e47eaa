"""embedding: one gather of the weight's rows (``EmbeddingBackward0``)."""
import numpy as np

from ...composite import composite
from ...grad_mode import no_grad
from ...inplace import set_value_
from ...shape_ops import cat


def _renorm_(weight, rows, max_norm, norm_type):
    """PyTorch's ``embedding_renorm_``: the rows in ``rows`` whose ``norm_type``-norm
    exceeds ``max_norm`` are scaled by max_norm / (norm + 1e-7), in place, unrecorded."""
    w = np.array(weight._arr)
    rows = np.unique(rows)
    norms = np.linalg.norm(w[rows], ord=norm_type, axis=1)
    big = norms > max_norm
    if big.any():
        w[rows[big]] *= (max_norm / (norms[big] + 1e-7))[:, None]
        with no_grad():
            set_value_(weight, w)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """``weight[input]``; the row at ``padding_idx`` gets no gradient.  With ``max_norm``
    the rows looked up are first renormalised in place, as in PyTorch."""
    if scale_grad_by_freq:
        raise NotImplementedError("tapegrad's embedding does not support "
                                  "scale_grad_by_freq=True")
    if sparse:
        raise NotImplementedError("tapegrad has no sparse gradients: embedding with "
                                  "sparse=True is not supported")
    idx = input._arr
    if idx.dtype not in (np.int64, np.int32):
        name = {"float64": "Double", "float32": "Float", "float16": "Half", "int16": "Short",
                "int8": "Char", "uint8": "Byte", "bool": "Bool"}.get(input.dtype.name, "")
        raise RuntimeError("Expected tensor for argument #1 'indices' to have one of the "
                           f"following scalar types: Long, Int; but got torch.{name}Tensor "
                           "instead (while checking arguments for embedding)")
    if weight.ndim != 2:
        raise RuntimeError("'weight' must be 2-D")
    num = weight.shape[0]
    if idx.size and (idx.min() < 0 or idx.max() >= num):
        raise IndexError("index out of range in self")
    if padding_idx is not None:
        if padding_idx < 0:
            if padding_idx < -num:
                raise AssertionError("Padding_idx must be within num_embeddings")
            padding_idx += num
        elif padding_idx >= num:
            raise AssertionError("Padding_idx must be within num_embeddings")
    if max_norm is not None:
        _renorm_(weight, idx.reshape(-1), max_norm, norm_type)
    idx = idx.astype(np.int64)

    def body():
        if padding_idx is None or not (idx == padding_idx).any():
            return weight[idx]
        # the padding row is read from a detached copy appended to the weight
        rows = cat([weight, weight[padding_idx:padding_idx + 1].detach()])
        return rows[np.where(idx == padding_idx, num, idx)]
    return composite("EmbeddingBackward0", body, weight)

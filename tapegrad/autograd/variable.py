"""``torch.autograd.Variable``: the legacy name.  As in PyTorch, every tensor is a
Variable, and ``Variable(t, requires_grad=...)`` returns a tensor sharing t's value."""
from ..tensor import Tensor


class _VariableMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor)


class Variable(metaclass=_VariableMeta):
    def __new__(cls, data, requires_grad=False, volatile=False):
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        out = data.detach()
        if requires_grad:
            out.requires_grad_()
        return out

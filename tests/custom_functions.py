"""Custom autograd Functions shared by the tests."""
import tapegrad as tg


class Cube(tg.autograd.Function):
    """x ** 3 with a differentiable backward (it saves x)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 3 * x ** 2 * g


class Double(tg.autograd.Function):
    """2 x, saving nothing."""

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2

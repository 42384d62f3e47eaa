"""Grad modes and the current tape, per thread (as PyTorch's grad mode is thread-local).

``no_grad`` outputs are ordinary tensors that can be used in grad mode later;
``inference_mode`` outputs are marked as inference tensors, which can never be saved
for backward (see the seed's comparison table).
"""
import functools
import inspect
import threading


class _State(threading.local):
    def __init__(self):
        self.grad = True        # is_grad_enabled()
        self.inference = False  # is_inference_mode_enabled()
        self.tape = None        # the current tape; created lazily by tape.current_tape()
        self.trace = None       # the tracing.Recording in progress, if any


STATE = _State()

# forward AD's open dual levels (``autograd.forward_ad``), each id(dual) -> (weakref, tangent):
# kept here for ``tensor._leaf`` to mark values computed under no_grad inside one
DUAL_LEVELS = []


def is_grad_enabled():
    return STATE.grad


def is_inference_mode_enabled():
    return STATE.inference


class _Mode:
    """Base for grad-mode context managers that also work as decorators."""

    def __call__(self, fn):
        if inspect.isgeneratorfunction(fn):
            return self._generator(fn)

        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with self.__class__(*self._args):
                return fn(*args, **kwargs)
        return wrapped

    def _generator(self, fn):
        """A generator function decorated: the mode holds while the generator runs, and
        the caller's mode while it is suspended (as PyTorch's decorators)."""
        mode = self.__class__

        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with mode(*self._args):
                gen = fn(*args, **kwargs)
            try:
                with mode(*self._args):
                    response = gen.send(None)
                while True:
                    try:
                        request = yield response
                    except GeneratorExit:
                        with mode(*self._args):
                            gen.close()
                        raise
                    except BaseException as exc:
                        with mode(*self._args):
                            response = gen.throw(exc)
                    else:
                        with mode(*self._args):
                            response = gen.send(request)
            except StopIteration as stop:
                return stop.value
        return wrapped

    _args = ()

    def __exit__(self, *exc):
        STATE.grad, STATE.inference = self._prev
        return False

    def _enter(self, grad, inference):
        self._prev = (STATE.grad, STATE.inference)
        STATE.grad, STATE.inference = grad, inference
        return None


class _NoArgMode(_Mode):
    """A mode without arguments, which PyTorch also takes as a bare decorator
    (``@no_grad`` as well as ``@no_grad()``)."""

    def __new__(cls, fn=None):
        mode = super().__new__(cls)
        return mode if fn is None else mode(fn)


class no_grad(_NoArgMode):
    def __enter__(self):
        return self._enter(False, STATE.inference)


class enable_grad(_NoArgMode):
    def __enter__(self):
        return self._enter(True, STATE.inference)


class set_grad_enabled(_Mode):
    def __init__(self, mode):
        self._args = (mode,)
        self._mode = bool(mode)
        # PyTorch's set_grad_enabled also acts as a plain function call.
        self._prev = (STATE.grad, STATE.inference)
        STATE.grad = self._mode

    def __enter__(self):
        return None

    def __call__(self, fn):
        STATE.grad, STATE.inference = self._prev  # used as a decorator: undo __init__'s switch
        return super().__call__(fn)


class inference_mode(_Mode):
    def __init__(self, mode=True):
        self._args = (mode,)
        self._mode = bool(mode)

    def __enter__(self):
        if self._mode:
            return self._enter(False, True)
        return self._enter(STATE.grad, False)

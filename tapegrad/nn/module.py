"""``nn.Module``: parameters, buffers and submodules registered by attribute assignment.

Assigning a Parameter, a Module or (to a registered name) a buffer files it in
``_parameters`` / ``_modules`` / ``_buffers``, as PyTorch does; attribute lookup falls
back to those dicts.  The walks (``named_parameters``, ``named_modules``, ...), the
state dict and its strict loading follow PyTorch's order, keys and error messages.
"""
import collections

from .. import devices
from ..autograd.hooks import RemovableHandle
from ..dtypes import dtype as _dtype, type_name
from ..grad_mode import no_grad
from ..tensor import Tensor
from .parameter import Parameter


def typename(obj):
    """PyTorch's ``torch.typename``: 'torch.DoubleTensor' for a float64 tensor."""
    if isinstance(obj, Tensor):
        return type_name(obj.dtype)
    cls = type(obj)
    return cls.__qualname__ if cls.__module__ == "builtins" else \
        f"{cls.__module__}.{cls.__qualname__}"


class _IncompatibleKeys(collections.namedtuple("IncompatibleKeys",
                                               ["missing_keys", "unexpected_keys"])):
    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _check_name(name, what, table, owner, dot=""):
    if not isinstance(name, str):
        raise TypeError(f"{what} name should be a string. Got {typename(name)}")
    if hasattr(owner, name) and name not in table:
        raise KeyError(f"attribute '{name}' already exists")
    if "." in name:
        raise KeyError(f"{what} name can't contain \".\"{dot}")
    if name == "":
        raise KeyError(f"{what} name can't be empty string \"\"")


def zero_grads(params, set_to_none):
    """``zero_grad`` of Module and Optimizer: drop the gradients, or zero them in place."""
    for p in params:
        g = p.grad
        if g is None:
            continue
        if set_to_none:
            p.grad = None
        else:
            if g.grad_fn is not None:
                g.detach_()
            else:
                g.requires_grad_(False)
            g.zero_()


def _addindent(text, spaces):
    lines = text.split("\n")
    return lines[0] if len(lines) == 1 else \
        "\n".join([lines[0]] + [" " * spaces + line for line in lines[1:]])


class Module:
    training: bool

    def __init__(self):
        for name, value in (("training", True), ("_parameters", {}), ("_buffers", {}),
                            ("_non_persistent_buffers_set", set()), ("_modules", {}),
                            ("_forward_pre_hooks", {}), ("_forward_hooks", {}),
                            ("_hooks_with_kwargs", set())):
            object.__setattr__(self, name, value)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args, **kwargs):
        d = self.__dict__
        if not (d.get("_forward_pre_hooks") or d.get("_forward_hooks")):
            return self.forward(*args, **kwargs)
        with_kwargs = self._hooks_with_kwargs
        for key, hook in list(self._forward_pre_hooks.items()):
            if key in with_kwargs:
                result = hook(self, args, kwargs)
                if result is not None:
                    if not (isinstance(result, tuple) and len(result) == 2):
                        raise RuntimeError("forward pre-hook must return None or a tuple of "
                                           f"(new_args, new_kwargs), but got {result}.")
                    args, kwargs = result
            else:
                result = hook(self, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        output = self.forward(*args, **kwargs)
        for key, hook in list(self._forward_hooks.items()):
            result = hook(self, args, kwargs, output) if key in with_kwargs else \
                hook(self, args, output)
            if result is not None:
                output = result
        return output

    # -- forward hooks -----------------------------------------------------------------
    def _add_hook(self, table, hook, prepend, with_kwargs):
        hooks = getattr(self, table)
        handle = RemovableHandle(hooks)
        later = {}
        if prepend:                 # first, in the same dict (the handles hold it)
            later = dict(hooks)
            hooks.clear()
        hooks[handle.id] = hook
        hooks.update(later)
        if with_kwargs:
            self._hooks_with_kwargs.add(handle.id)
        return handle

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """``hook(module, args)`` (or ``(module, args, kwargs)``) runs before ``forward``;
        a result other than None replaces the arguments (a non-tuple is one argument;
        with kwargs, a tuple ``(args, kwargs)``)."""
        return self._add_hook("_forward_pre_hooks", hook, prepend, with_kwargs)

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False):
        """``hook(module, args, output)`` (or ``(module, args, kwargs, output)``) runs
        after ``forward``; a result other than None replaces the output."""
        return self._add_hook("_forward_hooks", hook, prepend, with_kwargs)

    # -- registration ------------------------------------------------------------------
    def register_parameter(self, name, param):
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        _check_name(name, "parameter", self._parameters, self)
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{typename(param)}' object to parameter '{name}' "
                            "(torch.nn.Parameter or None required)")
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        _check_name(name, "buffer", self._buffers, self)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{typename(tensor)}' object to buffer '{name}' "
                            "(torch Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{typename(module)} is not a Module subclass")
        _check_name(name, "module", self._modules, self, f", got: {name}")
        self._modules[name] = module

    register_module = add_module

    def __getattr__(self, name):
        d = self.__dict__
        for table in ("_parameters", "_buffers", "_modules"):
            if table in d and name in d[table]:
                return d[table][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name, value):
        d = self.__dict__
        params, modules, buffers = d.get("_parameters"), d.get("_modules"), d.get("_buffers")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._forget(name, d, buffers, modules, self._non_persistent_buffers_set)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{typename(value)}' as parameter '{name}' "
                                "(torch.nn.Parameter or None expected)")
            self.register_parameter(name, value)
        elif isinstance(value, Module):
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._forget(name, d, params, buffers, self._non_persistent_buffers_set)
            modules[name] = value
        elif modules is not None and name in modules:
            if value is not None:
                raise TypeError(f"cannot assign '{typename(value)}' as child module '{name}' "
                                "(torch.nn.Module or None expected)")
            modules[name] = value
        elif buffers is not None and name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{typename(value)}' as buffer '{name}' "
                                "(torch.nn.Buffer, torch.Tensor or None expected)")
            buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    @staticmethod
    def _forget(name, *tables):
        for t in tables:
            if t is not None and name in t:
                t.remove(name) if isinstance(t, set) else t.pop(name)

    def __delattr__(self, name):
        for table in (self._parameters, self._buffers, self._modules):
            if name in table:
                del table[name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    # -- walks -------------------------------------------------------------------------
    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        if memo is None:
            memo = set()
        if self in memo:
            return
        if remove_duplicate:
            memo.add(self)
        yield prefix, self
        for name, module in self._modules.items():
            if module is not None:
                sub = prefix + ("." if prefix else "") + name
                yield from module.named_modules(memo, sub, remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, module in self._modules.items():
            if module is not None and module not in seen:
                seen.add(module)
                yield name, module

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named_members(self, table, prefix, recurse, remove_duplicate):
        seen = set()
        walk = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) \
            if recurse else [(prefix, self)]
        for mod_prefix, module in walk:
            for name, value in getattr(module, table).items():
                if value is None or value in seen:
                    continue
                if remove_duplicate:
                    seen.add(value)
                yield mod_prefix + ("." if mod_prefix else "") + name, value

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def apply(self, fn):
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # -- modes and gradients -----------------------------------------------------------
    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        zero_grads(self.parameters(), set_to_none)

    # -- dtype -------------------------------------------------------------------------
    def to(self, *args, dtype=None, **kwargs):
        """Cast floating-point parameters and buffers to ``dtype`` (devices: CPU only)."""
        for a in (*args, kwargs.get("device")):
            if a is not None and not isinstance(a, (_dtype, Tensor, bool)):
                devices.check(a)         # the CPU only: anything else is a clear error
        dtype = next((a for a in args if isinstance(a, _dtype)), dtype)
        if dtype is None:
            return self
        with no_grad():
            for module in self.modules():
                for table in (module._parameters, module._buffers):
                    for t in table.values():
                        if t is not None and t.dtype.is_floating_point:
                            t.data = t.to(dtype)
                            if t.grad is not None:
                                t.grad = t.grad.to(dtype)
        return self

    def cuda(self, device=None):
        devices.check("cuda" if device is None else device)   # a clear error: CPU only

    def cpu(self):
        return self

    def double(self):
        from ..dtypes import float64
        return self.to(float64)

    def float(self):
        from ..dtypes import float32
        return self.to(float32)

    # -- state dict --------------------------------------------------------------------
    def state_dict(self, *, destination=None, prefix="", keep_vars=False):
        if destination is None:
            destination = collections.OrderedDict()
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".",
                                  keep_vars=keep_vars)
        return destination

    def _load_local(self, state_dict, prefix, missing, unexpected, errors):
        local = {k: v for k, v in self._parameters.items() if v is not None}
        local.update((k, v) for k, v in self._buffers.items()
                     if v is not None and k not in self._non_persistent_buffers_set)
        for name, param in local.items():
            key = prefix + name
            if key not in state_dict:
                missing.append(key)
                continue
            value = state_dict[key]
            if not isinstance(value, Tensor):
                errors.append(f'While copying the parameter named "{key}", expected '
                              "torch.Tensor or Tensor-like object from checkpoint but "
                              f"received {type(value)}")
                continue
            if param.ndim == 0 and value.shape == (1,):
                value = value[0]
            if value.shape != param.shape:
                errors.append(f"size mismatch for {key}: copying a param with shape "
                              f"{value.shape} from checkpoint, the shape in current model is "
                              f"{param.shape}.")
                continue
            with no_grad():
                param.copy_(value)
        for key in state_dict:
            if key.startswith(prefix):
                name = key[len(prefix):].split(".", 1)[0]
                if name not in self._modules and name not in local:
                    unexpected.append(key)

    def load_state_dict(self, state_dict, strict=True):
        if not isinstance(state_dict, collections.abc.Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing, unexpected, errors = [], [], []

        def load(module, local_state, prefix):
            module._load_local(local_state, prefix, missing, unexpected, errors)
            for name, child in module._modules.items():
                if child is not None:
                    child_prefix = prefix + name + "."
                    load(child, {k: v for k, v in local_state.items()
                                 if k.startswith(child_prefix)}, child_prefix)

        load(self, dict(state_dict), "")
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected)))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in missing)))
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                type(self).__name__, "\n\t".join(errors)))
        return _IncompatibleKeys(missing, unexpected)

    # -- printing ----------------------------------------------------------------------
    def extra_repr(self):
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        extra = self.extra_repr()
        lines = extra.split("\n") if extra else []
        for name, module in self._modules.items():
            lines.append(f"({name}): " + _addindent(repr(module), 2))
        if not self._modules and len(lines) <= 1:
            return f"{self._get_name()}({lines[0] if lines else ''})"
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"

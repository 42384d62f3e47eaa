"""The containers: ``Sequential`` (modules applied in order), ``ModuleList``,
``ModuleDict``, ``ParameterList``, ``ParameterDict``, with PyTorch's indexing, keys,
registration (their entries are the module's parameters and submodules) and printing."""
import collections
import itertools
import operator

from ..tensor import Tensor
from .module import Module, _addindent, typename
from .parameter import Parameter


class Sequential(Module):
    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], collections.OrderedDict):
            for name, module in args[0].items():
                self.add_module(name, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    def _key(self, idx):
        n = len(self)
        if not -n <= idx < n:
            raise IndexError(f"index {idx} is out of range")
        return next(itertools.islice(iter(self._modules), idx % n, None))

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return Sequential(collections.OrderedDict(list(self._modules.items())[idx]))
        return self._modules[self._key(idx)]

    def __setitem__(self, idx, module):
        setattr(self, self._key(idx), module)

    def __delitem__(self, idx):
        keys = list(self._modules)[idx] if isinstance(idx, slice) else [self._key(idx)]
        for k in keys:
            del self._modules[k]
        self._modules = collections.OrderedDict(   # renumber, as PyTorch does
            (str(i), m) for i, m in enumerate(self._modules.values()))

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def forward(self, input):
        for module in self:
            input = module(input)
        return input


def _abs_index(container, idx):
    """The position ``idx`` (negative from the end) as the string key, PyTorch's error
    where it is out of range."""
    idx = operator.index(idx)
    n = len(container)
    if not -n <= idx < n:
        raise IndexError(f"index {idx} is out of range")
    return str(idx % n)


class ModuleList(Module):
    """Modules in a list, registered as submodules "0", "1", ... (no ``forward``)."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[_abs_index(self, idx)]

    def __setitem__(self, idx, module):
        setattr(self, _abs_index(self, idx), module)

    def __delitem__(self, idx):
        keys = list(self._modules)[idx] if isinstance(idx, slice) else [_abs_index(self, idx)]
        for k in keys:
            del self._modules[k]
        self._modules = collections.OrderedDict(   # renumbered, as PyTorch's
            (str(i), m) for i, m in enumerate(self._modules.values()))

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __iadd__(self, modules):
        return self.extend(modules)

    def __add__(self, other):
        return type(self)(itertools.chain(self, other))

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        if not isinstance(modules, collections.abc.Iterable):
            raise TypeError(f"ModuleList.extend should be called with an iterable, but got "
                            f"{type(modules).__name__}")
        for module in modules:
            self.append(module)
        return self

    def insert(self, index, module):
        modules = list(self._modules.values())
        modules.insert(index, module)
        self._modules = collections.OrderedDict()
        self.extend(modules)

    def pop(self, key):
        module = self[key]
        del self[key]
        return module

    def __repr__(self):
        """A run of equal children is one line, ``(0-2): 3 x Linear(...)``, as PyTorch's."""
        reprs = [repr(m) for m in self]
        if not reprs:
            return self._get_name() + "()"
        lines, start = [], 0
        for k in range(1, len(reprs) + 1):
            if k == len(reprs) or reprs[k] != reprs[start]:
                text = _addindent(reprs[start], 2)
                lines.append(f"({start}): {text}" if k - start == 1 else
                             f"({start}-{k - 1}): {k - start} x {text}")
                start = k
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"


class ModuleDict(Module):
    """Modules by name, registered as submodules in insertion order (no ``forward``)."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def clear(self):
        self._modules.clear()

    def pop(self, key):
        module = self[key]
        del self[key]
        return module

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules):
        for key, module in _pairs(modules, "ModuleDict", "ModuleDict.update", False):
            self[key] = module


def _pairs(entries, name, what, sort_dicts):
    """The (key, value) pairs of a mapping (a plain dict's sorted by key where
    ``sort_dicts``, as ParameterDict's update sorts them) or of an iterable of pairs,
    with PyTorch's errors."""
    if not isinstance(entries, collections.abc.Iterable):
        raise TypeError(f"{what} should be called with an iterable of key/value pairs, but got "
                        f"{type(entries).__name__}")
    if isinstance(entries, (collections.OrderedDict, ModuleDict, ParameterDict)):
        return list(entries.items())
    if isinstance(entries, collections.abc.Mapping):
        return sorted(entries.items()) if sort_dicts else list(entries.items())
    pairs = []
    for j, pair in enumerate(entries):
        if not isinstance(pair, collections.abc.Iterable):
            raise TypeError(f"{name} update sequence element #{j} should be Iterable; is"
                            f"{type(pair).__name__}")
        if len(pair) != 2:
            raise ValueError(f"{name} update sequence element #{j} has length {len(pair)}; 2 "
                             "is required")
        pairs.append(tuple(pair))
    return pairs


def _as_parameter(value):
    """A tensor stored in a ParameterList / ParameterDict becomes a Parameter."""
    return Parameter(value) if isinstance(value, Tensor) and not isinstance(value,
                                                                            Parameter) else value


def _entry_repr(key, value, type_name):
    if not isinstance(value, Tensor):
        return f"  ({key}): Object of type: {type(value).__name__}"
    size = "x".join(str(n) for n in value.shape)
    kind = "Parameter" if isinstance(value, Parameter) else "Tensor"
    return f"  ({key}): {kind} containing: [{type_name(value)} of size {size}]"


class ParameterList(Module):
    """Parameters in a list, registered as "0", "1", ...; a tensor appended becomes a
    Parameter, any other object is kept as an attribute."""

    def __init__(self, values=None):
        super().__init__()
        self._size = 0
        if values is not None:
            self.extend(values)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(self[i] for i in range(len(self))[idx])
        return getattr(self, _abs_index(self, idx))

    def __setitem__(self, idx, value):
        setattr(self, _abs_index(self, idx), _as_parameter(value))

    def __len__(self):
        return self._size

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __iadd__(self, values):
        return self.extend(values)

    def append(self, value):
        self._size += 1
        self[self._size - 1] = value
        return self

    def extend(self, values):
        if not isinstance(values, collections.abc.Iterable) or isinstance(values, Tensor):
            raise TypeError(f"ParameterList.extend should be called with an iterable, but got "
                            f"{type(values).__name__}")
        for value in values:
            self.append(value)
        return self

    def __call__(self, *args, **kwargs):
        raise RuntimeError("ParameterList should not be called.")

    def extra_repr(self):
        return "\n".join(_entry_repr(k, p, lambda t: f"torch.{t.dtype.name}")
                         for k, p in enumerate(self))


class ParameterDict(Module):
    """Parameters by (string) name, in insertion order; a tensor stored becomes a
    Parameter, any other object is kept as an attribute."""

    def __init__(self, parameters=None):
        super().__init__()
        self._keys = {}
        if parameters is not None:
            self.update(parameters)

    @staticmethod
    def _attr(key):
        if not isinstance(key, str):
            raise TypeError(f"Index given to ParameterDict cannot be used as a key as it is not "
                            f"a string (type is '{type(key).__name__}'). Open an issue on "
                            "github if you need non-string keys.")
        return key

    def __getitem__(self, key):
        return getattr(self, self._attr(key))

    def __setitem__(self, key, value):
        attr = self._attr(key)
        self._keys[key] = None
        setattr(self, attr, _as_parameter(value))

    def __delitem__(self, key):
        del self._keys[key]
        delattr(self, self._attr(key))

    def __len__(self):
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __reversed__(self):
        return reversed(list(self._keys))

    def __contains__(self, key):
        return key in self._keys

    def copy(self):
        return ParameterDict(collections.OrderedDict(self.items()))

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def clear(self):
        for key in list(self._keys):
            del self[key]

    def pop(self, key):
        value = self[key]
        del self[key]
        return value

    def popitem(self):
        key = next(reversed(self._keys))
        return key, self.pop(key)

    def get(self, key, default=None):
        return self[key] if key in self else default

    def fromkeys(self, keys, default=None):
        return ParameterDict((k, default) for k in keys)

    def keys(self):
        return self._keys.keys()

    def items(self):
        return ((k, self[k]) for k in self._keys)

    def values(self):
        return (self[k] for k in self._keys)

    def update(self, parameters):
        for key, value in _pairs(parameters, "ParameterDict", "ParametersDict.update", True):
            self[key] = value

    def __call__(self, input):
        raise RuntimeError("ParameterDict should not be called.")

    def extra_repr(self):
        return "\n".join(_entry_repr(k, p, typename) for k, p in self.items())

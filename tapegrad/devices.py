"""``tapegrad.device``: PyTorch's device objects, for a library that runs on the CPU only.

A device of any of PyTorch's types can be made and compared (``device("cuda:1")``), so
code written for PyTorch reads the same; creating a tensor on a device other than the
CPU, moving one there (``.to``) or making one the default raises a RuntimeError that
says so.  Every tensor's ``.device`` is ``device(type='cpu')``.
"""
import re

# PyTorch's device types, in the order its error message names them
_TYPES = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve",
          "fpga", "maia", "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia", "privateuseone")
_SPEC = re.compile(r"([a-zA-Z_]+)(?::(0|[1-9][0-9]*))?")
_MISSING = object()


class device:
    """``device("cpu")``, ``device("cuda:1")``, ``device("cuda", 1)``, ``device(other)``."""

    __slots__ = ("_type", "_index")

    def __init__(self, type=_MISSING, index=None):
        if isinstance(type, device) and index is None:
            self._type, self._index = type._type, type._index
            return
        if isinstance(type, int) and not isinstance(type, bool) and index is None:
            raise RuntimeError("Cannot access accelerator device when none is available.")
        if not isinstance(type, str):
            got = "" if type is _MISSING else _typename(type)
            raise TypeError(f"device() received an invalid combination of arguments - got "
                            f"({got}), but expected one of:\n * (torch.device device)\n"
                            " * (str type, int index = -1)\n")
        if index is not None and (not isinstance(index, int) or isinstance(index, bool)):
            raise TypeError(f"device(): argument 'index' (position 2) must be int, not "
                            f"{_typename(index)}")
        if not type:
            raise RuntimeError("Device string must not be empty")
        m = _SPEC.fullmatch(type)
        if m is None:
            raise RuntimeError(f"Invalid device string: '{type}'")
        kind, idx = m.group(1), m.group(2)
        if kind not in _TYPES:
            raise RuntimeError(f"Expected one of {', '.join(_TYPES)} device type at start of "
                               f"device string: {kind}")
        if idx is not None and index is not None:
            raise RuntimeError(f"type (string) must not include an index because index was "
                               f"passed explicitly: {type}")
        if idx is not None:
            index = int(idx)
        if index is not None and index < 0:
            raise RuntimeError("Device index must not be negative")
        self._type, self._index = kind, index

    @property
    def type(self):
        return self._type

    @property
    def index(self):
        return self._index

    def __eq__(self, other):
        if not isinstance(other, device):
            return False
        return self._type == other._type and self._index == other._index

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash((self._type, self._index))

    def __repr__(self):
        if self._index is None:
            return f"device(type='{self._type}')"
        return f"device(type='{self._type}', index={self._index})"

    def __str__(self):
        return self._type if self._index is None else f"{self._type}:{self._index}"

    def __reduce__(self):
        return (device, (str(self),))

    # ``with tapegrad.device("cpu"):`` as PyTorch's (the only default there is)
    def __enter__(self):
        check(self)
        return self

    def __exit__(self, *exc):
        return False


def _typename(v):
    return "NoneType" if v is None else v.__class__.__name__


CPU = device("cpu")


def check(d):
    """The device argument ``d`` (None, a string, an int, a device) as a device; a
    RuntimeError for anything but the CPU."""
    if d is None:
        return CPU
    if not isinstance(d, (device, str, int)) and isinstance(getattr(d, "type", None), str):
        d = str(d)                           # another library's device object (PyTorch's)
    d = d if isinstance(d, device) else device(d)
    if d._type != "cpu":
        raise RuntimeError(f"tapegrad runs on the CPU only: device '{d}' is not available "
                           "(use device='cpu' or leave the device out)")
    return d


def set_default_device(device):
    """Only the CPU (or None, which means the CPU) can be the default device."""
    check(device)


def get_default_device():
    return CPU

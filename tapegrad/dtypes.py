"""dtypes: PyTorch's names over NumPy's types."""
import numpy as np


class dtype:
    __slots__ = ("name", "np", "is_floating_point", "itemsize", "_rank")

    def __init__(self, name, np_type, rank):
        self.name = name
        self.np = np.dtype(np_type)
        self.is_floating_point = self.np.kind == "f"
        self.itemsize = self.np.itemsize
        self._rank = rank  # promotion order within and across categories

    def __repr__(self):
        return f"tapegrad.{self.name}"

    def __reduce__(self):
        return (_by_name, (self.name,))


bool_ = dtype("bool", np.bool_, 0)
uint8 = dtype("uint8", np.uint8, 1)
int8 = dtype("int8", np.int8, 2)
int16 = dtype("int16", np.int16, 3)
int32 = dtype("int32", np.int32, 4)
int64 = dtype("int64", np.int64, 5)
float16 = dtype("float16", np.float16, 10)
float32 = dtype("float32", np.float32, 11)
float64 = dtype("float64", np.float64, 12)

ALL = (bool_, uint8, int8, int16, int32, int64, float16, float32, float64)

# PyTorch's names of a dtype: its ScalarType, and its C++ type (in mm's message)
TORCH_NAMES = {"bool": ("Bool", "bool"), "uint8": ("Byte", "unsigned char"),
               "int8": ("Char", "signed char"), "int16": ("Short", "short int"),
               "int32": ("Int", "int"), "int64": ("Long", "long int"),
               "float16": ("Half", "c10::Half"), "float32": ("Float", "float"),
               "float64": ("Double", "double")}
_FROM_NP = {d.np: d for d in ALL}


def type_name(d):
    """PyTorch's name of the tensor type of dtype ``d`` (``Tensor.type()``,
    ``torch.typename``): 'torch.DoubleTensor' for float64, as programs compare it."""
    return f"torch.{TORCH_NAMES[d.name][0]}Tensor"


def from_type_name(name):
    """The dtype of a tensor type's name ('torch.FloatTensor'; 'torch.Tensor' is the
    default dtype's), else None."""
    if name == "torch.Tensor":
        return get_default_dtype()
    return next((d for d in ALL if type_name(d) == name), None)


def _by_name(name):
    return next(d for d in ALL if d.name == name)


def from_np(np_dtype):
    try:
        return _FROM_NP[np.dtype(np_dtype)]
    except KeyError:
        raise TypeError(f"can't convert np.ndarray of type {np.dtype(np_dtype)}. The only supported "
                        "types are: float64, float32, float16, int64, int32, int16, int8, uint8, "
                        "and bool.") from None


def to_np(d):
    if d is None:
        return None
    if isinstance(d, dtype):
        return d.np
    return from_np(d).np


def category(d):
    return 2 if d.is_floating_point else (0 if d is bool_ else 1)


_default = [float64]


def get_default_dtype():
    return _default[0]


def set_default_dtype(d):
    if not isinstance(d, dtype) or not d.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    _default[0] = d


_C_NAMES = {"int64": "int64_t", "int32": "int", "int16": "int16_t", "int8": "int8_t",
            "uint8": "uint8_t"}


def scalar_in(value, np_dtype):
    """A Python number as a value of an array of ``np_dtype`` (a fill), as PyTorch checks
    and converts it (``refuse_overflow``, its error naming C's type)."""
    if isinstance(value, int) and not isinstance(value, bool) and \
            not -2 ** 63 <= value < 2 ** 64:
        raise OverflowError("int too big to convert")         # (whatever the dtype)
    if np_dtype.kind not in "iu" or isinstance(value, (bool, np.bool_)):
        return value
    refuse_overflow(value, np_dtype, _C_NAMES[np_dtype.name])
    return np.array(value).astype(np_dtype)[()] if isinstance(value, (int, np.integer)) \
        else value


def refuse_overflow(values, np_dtype, name):
    """PyTorch's error where Python numbers (``values``: one, or their array) do not fit
    the integer dtype ``np_dtype`` (c10's checked conversion), C's cast giving garbage
    there: a float out of its range (nan, inf; compared as a double: int64's 2 ** 63 is
    in); an int out of it, an unsigned dtype taking -max .. max (a negative one wraps
    round: -1 is 255 in uint8).  ``name``: the type the message names."""
    info = np.iinfo(np_dtype)
    a = np.asarray(values)
    lo = -info.max if info.min == 0 and a.dtype.kind in "iu" else info.min
    with np.errstate(invalid="ignore"):
        if not ((a >= lo) & (a <= info.max)).all():           # (nan compares false)
            raise RuntimeError(f"value cannot be converted to type {name} without overflow")

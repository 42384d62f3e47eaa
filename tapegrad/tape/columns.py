"""The tape's columns and the entry layout (``Layout``): what entry i is, where its
values and metadata are."""
import numpy as np

from . import layout_codec as codec
from .layout_codec import SINGLE, Y_TRANSPOSED

CONSUMED = 1     # FLAGS: swept by a backward without retain_graph
HIDDEN = 2       # an internal step of a composite op (a broadcast)
HOOKED = 4       # hooks wait for this entry: the sweep stops there
_COLUMNS = (("OP", np.int16), ("A", np.int64), ("B", np.int64), ("C", np.float64),
            ("C2", np.float64), ("OFF", np.int64), ("META", np.int64), ("FLAGS", np.uint8),
            ("IAUX", np.int64))
COLUMNS = tuple(name for name, _ in _COLUMNS if name != "IAUX")   # per-entry columns


def y_blocks(flat, nb, K, N, transposed):
    """A product's y values (``flat``) as its (nb, K, N) operand: a view either way."""
    return flat.reshape(nb, N, K).transpose(0, 2, 1) if transposed else flat.reshape(nb, K, N)


def strided_offsets(shape, strides, base=0):
    """Linear-index -> offset map of a C-ordered ``shape`` read with ``strides``."""
    off = np.full(tuple(shape), base, np.int64)
    for d, (n, s) in enumerate(zip(shape, strides)):
        axis = [1] * len(shape)
        axis[d] = n
        off += np.arange(n, dtype=np.int64).reshape(axis) * int(s)
    return off.reshape(-1)


class Layout:
    """The entry layout, read in Python (``layout_codec``'s functions, which
    ``kernels/layout.py`` compiles): entry i's values at ``V[OFF[i]:]``; unless it is a 0-d
    scalar (``META[i] < 0``), ``IAUX[META[i]:]`` holds ``[size, ndim, *shape, *extras]``.
    One reader for the tape, a frozen recording (``replay.record.Record``) and
    ``create_graph``'s walk."""

    def size(self, i):
        """Number of values in buffer ``i``."""
        return int(codec.size_of(self.META, self.IAUX, i))

    def sizes(self, lo, hi):
        """The sizes of buffers ``lo..hi-1``, as an array."""
        m = self.META[lo:hi]
        return np.where(m < 0, 1, codec.size_at(self.IAUX, np.maximum(m, 0)))

    def shape(self, i):
        m = self.META[i]
        if m < 0:
            return ()
        s = codec.shape_at(m)
        return tuple(self.IAUX[s:s + codec.ndim_at(self.IAUX, m)].tolist())

    def extras(self, i):
        """The kind-specific extras of entry ``i`` (a view of the rest of IAUX)."""
        return self.IAUX[codec.extras_at(self.META, self.IAUX, i):]

    # (a kind's extras below: read from ``extras``, a view that starts at them)
    def cat_pieces(self, i):
        """(outer, [(buffer, inner), ...]) of a concatenation entry."""
        ex = self.extras(i)
        outer, n = codec.cat_dims(ex, 0)
        return int(outer), [tuple(int(v) for v in codec.cat_piece(ex, 0, j)) for j in range(n)]

    def function_inputs(self, i):
        """The input buffers of a custom Function's output entry."""
        ex = self.extras(i)
        return [int(ex[codec.function_input_at(0, j)])
                for j in range(codec.function_inputs(ex, 0))]

    def gather_sources(self, i):
        """Per output element of gather entry i, the input element it reads (extras:
        the base offset, then a stride per output dim)."""
        ex, shape = self.extras(i), self.shape(i)
        return strided_offsets(shape, ex[1:1 + len(shape)], int(ex[0]))

    def index_sources(self, i):
        """Per output element of index entry i, the input element it reads."""
        return self.extras(i)[:self.size(i)]

    def condition(self, i):
        """The buffer holding a ``where`` entry's condition."""
        return int(self.extras(i)[0])

    def reduce_targets(self, i):
        """Per input element of reduction entry i, the output element it feeds (extras:
        an output stride per input dim, 0 along the reduced dims)."""
        shape = self.shape(int(self.A[i]))
        return strided_offsets(shape, self.extras(i)[:len(shape)])

    def softmax_dims(self, i):
        """(outer, n, inner) of a softmax entry: rows of n values, ``inner`` apart."""
        outer, n, inner = (int(v) for v in codec.softmax_rows(self.extras(i), 0))
        return outer, n, inner

    def broadcast_loops(self, i):
        """(s0..s3, a0..a3, b0..b3) of a broadcast entry."""
        return tuple(int(v) for v in codec.broadcast_loops(self.extras(i), 0))

    def product(self, i):
        """(nb, M, K, N, dtype, y_transposed) of a matrix-product entry, x (nb, M, K) @
        y (nb, K, N): the dtype its BLAS runs in, and whether y's values are stored as
        (nb, N, K) (a weight read in place, transposed)."""
        nb, M, K, N, mode = (int(v) for v in codec.product_dims(self.extras(i), 0))
        return nb, M, K, N, np.float32 if mode & SINGLE else np.float64, bool(mode & Y_TRANSPOSED)

    def value(self, i):
        """The recorded value of buffer ``i`` as a float64 array (a copy)."""
        o = self.OFF[i]
        return self.V[o:o + self.size(i)].reshape(self.shape(i)).copy()

    def arrays(self):
        """The arrays the compiled sweeps read, as one value (``kernels.layout.TAPE``).
        Values released after a backward are shared read-only zeros: the sweeps get
        writable zeros instead (a read-only array is another type to Numba: the sweep
        would compile a second time, for a backward that reads no value)."""
        V = self.V
        if not V.flags.writeable:
            V = np.zeros(V.shape[0])
        return (self.OP, self.A, self.B, self.C, self.C2, self.OFF, self.META, self.IAUX,
                self.FLAGS, V)

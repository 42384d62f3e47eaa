"""The tape's columns and the entry layout (``Layout``): what entry i is, where its
values and metadata are."""
import numpy as np

CONSUMED = 1     # FLAGS: swept by a backward without retain_graph
HIDDEN = 2       # an internal step of a composite op (a broadcast)
HOOKED = 4       # hooks wait for this entry: the sweep stops there
_COLUMNS = (("OP", np.int16), ("A", np.int64), ("B", np.int64), ("C", np.float64),
            ("C2", np.float64), ("OFF", np.int64), ("META", np.int64), ("FLAGS", np.uint8),
            ("IAUX", np.int64))
COLUMNS = tuple(name for name, _ in _COLUMNS if name != "IAUX")   # per-entry columns
SINGLE, Y_TRANSPOSED = 1, 2   # a product's mode bits (extras[4]): float32 BLAS; y stored (N, K)


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
    """The entry layout, read in Python (``kernels/layout.py`` reads it in compiled code):
    entry i's values at ``V[OFF[i]:]``; unless it is a 0-d scalar (``META[i] < 0``),
    ``IAUX[META[i]:]`` holds ``[size, ndim, *shape, *extras]``.  One reader for the tape,
    a frozen recording (``replay.record.Record``) and ``create_graph``'s walk."""

    def size(self, i):
        """Number of values in buffer ``i``."""
        m = self.META[i]
        return 1 if m < 0 else int(self.IAUX[m])

    def shape(self, i):
        m = self.META[i]
        if m < 0:
            return ()
        IAUX = self.IAUX
        return tuple(IAUX[m + 2:m + 2 + IAUX[m + 1]].tolist())

    def extras(self, i):
        """The kind-specific extras of entry ``i`` (a view of the rest of IAUX)."""
        m = self.META[i]
        return self.IAUX[m + 2 + self.IAUX[m + 1]:]

    def cat_pieces(self, i):
        """(outer, [(buffer, inner), ...]) of a concatenation entry."""
        ex = self.extras(i)
        return int(ex[0]), [(int(ex[2 + 2 * j]), int(ex[3 + 2 * j])) for j in range(int(ex[1]))]

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
        outer, n, inner = (int(v) for v in self.extras(i)[:3])
        return outer, n, inner

    def product(self, i):
        """(nb, M, K, N, dtype, y_transposed) of a matrix-product entry, x (nb, M, K) @
        y (nb, K, N): the dtype its BLAS runs in, and whether y's values are stored as
        (nb, N, K) (a weight read in place, transposed)."""
        nb, M, K, N, mode = (int(v) for v in self.extras(i)[:5])
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

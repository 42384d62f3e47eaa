"""The checks a saved recording passes before any compiled code reads it.

The compiled kernels index the value arena, the metadata and the columns with numbers
they read from those same arrays, and check no bound (a bounds check in the sweeps'
inner loops would cost every replay).  A recording made by tapegrad keeps the invariants
below by construction; a file can say anything.  So ``check_record`` holds every number
a kernel will compute an index from to what the op table and the arena allow, in Python
and NumPy, before the first compiled call: op codes and kinds, each kind's inputs
(earlier entries of the right sizes), the layout (``[size, ndim, *shape, *extras]`` in
``IAUX``, sizes equal to their shapes), every buffer inside the arena and no two
overlapping, each kind's extras (gather offsets and reduction strides inside their
buffers, index lists inside their input, product and concatenation sizes consistent,
softmax rows, broadcast loops inside their operands), flags, the schedule (increasing,
closed under inputs), the inputs, outputs and recorded gradient against the argument
shapes, and the guards' data.

What passes is a well-formed recording: replaying it reads and writes only its own
buffers, and its forward, reverse and tangent sweeps agree with each other.  Whether it
is the recording that was saved is the digest's business (``serialize``).

Each kind's extras have one rule here (``_EXTRAS``): a kind added to the op table has
none until one is written, and entries of it are refused meanwhile.
"""
import math

import numpy as np

from .. import dtypes
from ..ops.table import BY_CODE, KINDS
from ..tape import HIDDEN
from ..tape import layout_codec as codec
from ..tracing import G_ARGMAX, G_ARGMIN, G_EQUAL, G_TRUTH

MAX_NDIM = 64                       # dims a buffer may have (PyTorch's limit)
# The kernels loop over the dims of a buffer before its first zero: a (10**12, 0) shape
# holds no value and would loop for hours.  Dims of an empty buffer (and the loop counts
# of an empty product, softmax, concatenation or argmax) span at most this many elements.
EMPTY_MOST = 1 << 24
_META_KEYS = {"ins", "outs", "out_shapes", "out_tuple", "grads", "stats", "guards"}
_OUT_DTYPES = {d.np.str for d in dtypes.ALL}     # a traced output's dtype
_KIND = {kind: k for k, kind in enumerate(KINDS)}
# per op code: its kind's index (-1: a free code) and its arity
_KIND_OF = np.array([_KIND[op.kind] if op else -1 for op in BY_CODE], np.int64)
_ARITY = np.array([op.arity if op else 0 for op in BY_CODE], np.int64)


class ReplayFileError(ValueError):
    """A saved replay file (or a pickled ``Traced``) that tapegrad refuses to load: it is
    not one, it is damaged, or it describes something a replay cannot run safely.  The
    message names what is wrong."""


def _int(x):
    return type(x) is int


def _ints(xs):
    return type(xs) is list and all(_int(x) for x in xs)


class _Checker:
    """One recording's arrays and the facts derived from them as the checks go."""

    def __init__(self, where, cols, IAUX, V, schedule):
        self.where = where
        self.OP, self.A, self.B = cols["OP"], cols["A"], cols["B"]
        self.OFF, self.META, self.FLAGS = cols["OFF"], cols["META"], cols["FLAGS"]
        self.IAUX, self.V, self.schedule = IAUX, V, schedule
        self.n = len(self.OP)
        self.nv, self.ni = len(V), len(IAUX)
        if any(len(c) != self.n for c in cols.values()):
            self.fail("its columns have different lengths "
                      f"({', '.join(f'{k}: {len(c)}' for k, c in cols.items())})")
        if self.n == 0:
            self.fail("it has no entries")

    def fail(self, what):
        raise ReplayFileError(f"{self.where}: {what}")

    def fail_at(self, bad, what):
        """Refuse if ``bad`` (a mask over the entries) holds anywhere; names the first."""
        idx = np.flatnonzero(bad)
        if idx.size:
            i = int(idx[0])
            more = f" (and {idx.size - 1} more entries)" if idx.size > 1 else ""
            self.fail(f"entry {i} ({self.name(i)}): {what}{more}")

    def name(self, i):
        code = int(self.OP[i])
        op = BY_CODE[code] if 0 <= code < len(BY_CODE) else None
        return op.name if op else f"op code {code}"

    # -- per entry, vectorised ------------------------------------------------------------
    def kinds(self):
        OP = self.OP.astype(np.int64)
        self.fail_at((OP < 0) | (OP >= len(BY_CODE)), "unknown op code")
        self.kind = _KIND_OF[OP]
        self.fail_at(self.kind < 0, "unknown op code")
        self.fail_at(self.kind == _KIND["host"], "a custom autograd.Function's output, which "
                     "a replay cannot run (its forward and backward are Python)")
        self.arity = _ARITY[OP]

    def is_kind(self, *kinds):
        table = np.zeros(len(KINDS), bool)
        table[[_KIND[k] for k in kinds]] = True
        return table[self.kind]

    def layout(self):
        """Entry i's metadata ``IAUX[m:]`` = ``[size, ndim, *shape, *extras]`` inside IAUX
        with its size the product of its shape; ``-1`` for a 0-d scalar (size 1)."""
        META, IAUX, ni = self.META, self.IAUX, self.ni
        arr = META >= 0
        self.fail_at((META < -1) | (arr & (META > ni - 2)),
                     f"a metadata position (META) outside IAUX (length {ni})")
        m = np.where(arr, META, 0)
        nd = np.where(arr, codec.ndim_at(IAUX, m) if ni >= 2 else 0, 0)
        shp = codec.shape_at(m)
        self.fail_at(arr & ((nd < 0) | (nd > MAX_NDIM)), f"a number of dims outside 0..{MAX_NDIM}")
        self.fail_at(arr & (shp + nd > ni), "a shape that runs past the end of IAUX")
        size = np.where(arr, codec.size_at(IAUX, m) if ni else 1, 1)
        prod, loops = np.ones(self.n), np.ones(self.n)
        for d in range(int(nd.max(initial=0))):
            dim = np.where(arr & (d < nd), IAUX[np.minimum(shp + d, ni - 1)], 1)
            self.fail_at(dim < 0, "a negative dim in its shape")
            prod *= dim.astype(np.float64)       # exact up to 2**53, past which it is too big
            loops *= np.maximum(dim, 1).astype(np.float64)
        self.fail_at(arr & ((size < 0) | (size > self.nv) | (prod != size)),
                     "a size that is not its shape's number of elements, or more than the "
                     f"arena holds ({self.nv} values)")
        self.fail_at(arr & (size == 0) & (loops > EMPTY_MOST),
                     f"an empty shape whose other dims span more than {EMPTY_MOST} elements")
        self.size, self.nd = size, nd
        self.ex = np.where(arr, shp + nd, ni)       # (the extras follow the shape)
        self.sizes = size.tolist()          # (Python ints: products of them cannot wrap)
        self.fail_at(~arr & self.is_kind("where", "gather", "index", "reduce", "matmul", "cat",
                                          "softmax", "broadcast"),
                     "no metadata, which an entry of its kind needs")

    def arena(self):
        """Buffers inside the value arena, no two sharing a value."""
        OFF, size = self.OFF, self.size
        self.fail_at((OFF < 0) | (OFF > self.nv - size),
                     f"values outside the arena of {self.nv} (its offset OFF plus its size)")
        held = np.flatnonzero(size > 0)
        order = held[np.argsort(OFF[held], kind="stable")]
        reach = np.maximum.accumulate(OFF[order] + size[order])   # the end of all before
        overlap = np.zeros(self.n, bool)
        overlap[order[1:][OFF[order[1:]] < reach[:-1]]] = True
        self.fail_at(overlap, "values that overlap another entry's")

    def flags(self):
        self.fail_at((self.FLAGS & ~np.uint8(HIDDEN)) != 0,
                     "flags a saved recording never has (consumed by a backward, or hooked)")

    def inputs(self):
        """Operands as each kind takes them: earlier entries (or -1, a constant, where
        the kind allows one), of the sizes the kind reads."""
        A, B, arity = self.A, self.B, self.arity
        before = np.arange(self.n)
        earlier_a, earlier_b = (A >= 0) & (A < before), (B >= 0) & (B < before)
        none_a, none_b = A == -1, B == -1
        either = (earlier_a | none_a) & (earlier_b | none_b)
        binary = self.is_kind("ew", "compare") & (arity == 2)
        ok = np.select(
            [self.is_kind("source", "where"), binary, self.is_kind("ew") & (arity == 1),
             self.is_kind("matmul", "broadcast"), self.is_kind("cat"),
             self.is_kind("gather", "reshape", "index", "reduce", "softmax", "stop")],
            [either, either & ~(none_a & none_b), earlier_a & none_b, earlier_a & earlier_b,
             none_a & none_b, earlier_a & none_b], False)
        self.fail_at(~ok, "inputs that are not earlier entries (or -1 where its kind "
                          "takes a constant)")
        size = self.size
        same = self.is_kind("ew", "compare", "where", "reshape", "stop")
        self.fail_at(same & ~self.is_kind("source") & (
            (earlier_a & (size[np.maximum(A, 0)] != size)) |
            (earlier_b & (size[np.maximum(B, 0)] != size))),
            "an input whose size is not its own")

    # -- per kind: the extras ------------------------------------------------------------
    def extras(self):
        for kind, rule in _EXTRAS.items():
            for i in np.flatnonzero(self.kind == _KIND[kind]).tolist() if rule else ():
                rule(self, i)

    def extra(self, i, count):
        """The first ``count`` extras of entry i as Python ints (refused if IAUX ends
        first)."""
        e = int(self.ex[i])
        if count < 0 or e + count > self.ni:
            self.fail(f"entry {i} ({self.name(i)}): its extras run past the end of IAUX")
        return self.IAUX[e:e + count].tolist()

    def shape(self, i):
        if self.META[i] < 0:
            return []
        s = codec.shape_at(int(self.META[i]))
        return self.IAUX[s:s + int(self.nd[i])].tolist()

    def entry(self, i, j, what):
        """``j`` must be an entry before i."""
        if not 0 <= j < i:
            self.fail(f"entry {i} ({self.name(i)}): {what} {j} is not an earlier entry")

    def loops(self, i, dims, what):
        """``dims`` of loops nested in a kernel: if one is 0 (nothing is computed), the
        others must not loop long (``EMPTY_MOST``)."""
        if 0 in dims and math.prod(d for d in dims if d) > EMPTY_MOST:
            self.fail(f"entry {i} ({self.name(i)}): empty {what} {tuple(dims)} whose other dims "
                      f"span more than {EMPTY_MOST} elements")

    def within(self, i, shape, strides, base, limit, what):
        """Offsets ``base + sum(k_d * strides[d])`` over the indices of ``shape`` must lie in
        ``[0, limit)`` (exact integers: no stride can wrap around)."""
        if math.prod(shape) == 0:
            return
        lo = hi = base
        for s, t in zip(shape, strides):
            lo += min(0, (s - 1) * t)
            hi += max(0, (s - 1) * t)
        if lo < 0 or hi >= limit:
            self.fail(f"entry {i} ({self.name(i)}): {what} reach offsets {lo}..{hi}, outside "
                      f"its buffer of {limit} values")

    def check_where(self, i):
        (cond,) = self.extra(i, 1)
        self.entry(i, cond, "the condition")
        if self.sizes[cond] != self.sizes[i]:
            self.fail(f"entry {i} (where): a condition of {self.sizes[cond]} values for "
                      f"{self.sizes[i]}")

    def check_gather(self, i):
        shape = self.shape(i)
        base, *strides = self.extra(i, 1 + len(shape))
        self.within(i, shape, strides, base, self.sizes[self.A[i]], "its base and strides")

    def check_index(self, i):
        a, n, e = int(self.A[i]), self.sizes[i], int(self.ex[i])
        if e + n > self.ni:
            self.fail(f"entry {i} ({self.name(i)}): its index list runs past the end of IAUX")
        idx = self.IAUX[e:e + n]
        if n and (idx.min() < 0 or idx.max() >= self.sizes[a]):
            self.fail(f"entry {i} ({self.name(i)}): an index outside its input's "
                      f"{self.sizes[a]} values")

    def check_reduce(self, i):
        a = int(self.A[i])
        shape = self.shape(a)
        strides = self.extra(i, len(shape))
        self.within(i, shape, strides, 0, self.sizes[i], "its input's elements")

    def check_matmul(self, i):
        nb, M, K, N, mode = self.extra(i, 5)
        if min(nb, M, K, N) < 0 or mode not in range(4):
            self.fail(f"entry {i} ({self.name(i)}): product dims {(nb, M, K, N, mode)}")
        self.loops(i, (nb, M, K, N), "product dims")
        want = (nb * M * K, nb * K * N, nb * M * N)
        got = (self.sizes[self.A[i]], self.sizes[self.B[i]], self.sizes[i])
        if got != want:
            self.fail(f"entry {i} ({self.name(i)}): product dims (nb, M, K, N) = "
                      f"{(nb, M, K, N)} need sizes {want} (x, y, result), not {got}")

    def check_cat(self, i):
        outer, nin = self.extra(i, 2)
        if outer < 0 or not 1 <= nin <= (self.ni - int(self.ex[i])) // 2:
            self.fail(f"entry {i} ({self.name(i)}): {nin} pieces of {outer} rows")
        flat = self.extra(i, 2 + 2 * nin)[2:]
        total = 0
        for buf, inner in zip(flat[::2], flat[1::2]):
            self.entry(i, buf, "the piece")
            if inner < 0 or self.sizes[buf] != outer * inner:
                self.fail(f"entry {i} ({self.name(i)}): piece {buf} has {self.sizes[buf]} "
                          f"values, not {outer} rows of {inner}")
            total += inner
        if self.sizes[i] != outer * total:
            self.fail(f"entry {i} ({self.name(i)}): {self.sizes[i]} values for pieces of "
                      f"{outer * total}")
        if outer * nin > max(self.sizes[i], EMPTY_MOST):      # (rows of empty pieces)
            self.fail(f"entry {i} ({self.name(i)}): {outer} rows of {nin} pieces for "
                      f"{self.sizes[i]} values")

    def check_broadcast(self, i):
        """Loops (s0..s3) of the entry's size; each operand's offsets along them inside
        the operand."""
        ex = self.extra(i, 12)
        loops = ex[:4]
        if min(ex) < 0 or math.prod(loops) != self.sizes[i]:
            self.fail(f"entry {i} ({self.name(i)}): loops {tuple(loops)} (with strides "
                      f"{tuple(ex[4:])}) for {self.sizes[i]} values")
        self.loops(i, loops, "loops")
        for j, strides in ((int(self.A[i]), ex[4:8]), (int(self.B[i]), ex[8:12])):
            self.within(i, loops, strides, 0, self.sizes[j], "an operand's offsets")

    def check_softmax(self, i):
        outer, n, inner = self.extra(i, 3)
        rows = outer * n * inner
        out = outer * inner if self.name(i) == "logsumexp" else rows
        if min(outer, n, inner) < 0 or out != self.sizes[i] or rows != self.sizes[self.A[i]]:
            self.fail(f"entry {i} ({self.name(i)}): rows (outer, n, inner) = "
                      f"{(outer, n, inner)} for {self.sizes[i]} values")
        self.loops(i, (outer, n, inner), "rows")

    # -- the schedule ----------------------------------------------------------------------
    def check_schedule(self, roots):
        """Increasing entries; every input of a scheduled entry (and every root) is
        scheduled or a source, so the forward sweep recomputes all that the outputs,
        the recorded gradient and the guards read."""
        s = self.schedule
        if s.size and (s.min() < 0 or s.max() >= self.n or (np.diff(s) <= 0).any()):
            self.fail("its schedule is not increasing entries of the recording")
        ready = self.is_kind("source")
        ready[s] = True
        on = np.zeros(self.n, bool)
        on[s] = True
        for i in np.flatnonzero(on & self.is_kind("cat")).tolist():
            outer, nin = self.extra(i, 2)
            bufs = self.extra(i, 2 + 2 * nin)[2::2]
            if not ready[bufs].all():
                self.fail(f"entry {i} ({self.name(i)}): a piece is not scheduled")
        for i in np.flatnonzero(on & self.is_kind("where")).tolist():
            if not ready[self.extra(i, 1)[0]]:
                self.fail(f"entry {i} (where): its condition is not scheduled")
        for col in (self.A, self.B):
            self.fail_at(on & (col >= 0) & ~ready[np.maximum(col, 0)],
                         "an input that the schedule does not recompute")
        missing = [r for r in roots if not ready[r]]
        if missing:
            self.fail(f"entry {missing[0]}, which an output, gradient or guard reads, is not "
                      "scheduled")


# each kind's check of its extras; None: the kind reads none (sources, elementwise ops,
# comparisons, reshapes and detaches)
_EXTRAS = {"source": None, "ew": None, "where": _Checker.check_where,
           "gather": _Checker.check_gather, "reshape": None, "index": _Checker.check_index,
           "reduce": _Checker.check_reduce, "matmul": _Checker.check_matmul,
           "cat": _Checker.check_cat, "softmax": _Checker.check_softmax, "compare": None,
           "stop": None, "broadcast": _Checker.check_broadcast}


def check_record(where, cols, IAUX, V, schedule, meta, shapes, second):
    """Refuse (``ReplayFileError``) a recording that a replay could not run within its
    own arrays, or whose parts disagree (see the module docstring).  ``cols``: the
    per-entry columns, op codes already this version's; ``meta``: the header's entry
    for it; ``shapes``: the traced arguments' shapes; ``second``: a recording of the
    gradient too (hvp)."""
    c = _Checker(where, cols, IAUX, V, schedule)
    c.kinds()
    unruled = [k for k in KINDS if k not in _EXTRAS and k != "host"]
    c.fail_at(c.is_kind(*unruled), "an op of a kind the loader has no check for")
    c.layout()
    c.arena()
    c.flags()
    c.inputs()
    c.extras()
    roots = _check_meta(c, meta, shapes, second)
    c.check_schedule(roots)


def _check_meta(c, meta, shapes, second):
    """The header's part: inputs, outputs, recorded gradient, guards.  Returns the
    entries they read."""
    if type(meta) is not dict or set(meta) - {"out_dtypes", "compiled"} != _META_KEYS:
        c.fail(f"its header entry is not a dict of {sorted(_META_KEYS)} (and out_dtypes, "
               "compiled)")
    if type(meta.get("compiled", False)) is not bool:
        c.fail("its 'compiled' is not true or false")
    ins, outs, grads = meta["ins"], meta["outs"], meta["grads"]
    if not _ints(ins) or len(ins) != len(shapes) or len(set(ins)) != len(ins):
        c.fail(f"its inputs {ins!r} are not one entry per traced argument")
    for e, shape in zip(ins, shapes):
        if not 0 <= e < c.n or c.kind[e] != _KIND["source"] or c.name(e) != "leaf":
            c.fail(f"input {e} is not a leaf entry")
        if c.shape(e) != list(shape):
            c.fail(f"input {e} has shape {tuple(c.shape(e))}, the argument {tuple(shape)}")
    if not _ints(outs) or not outs or type(meta["out_tuple"]) is not bool or (
            len(outs) > 1 and not meta["out_tuple"]):
        c.fail(f"its outputs {outs!r} are not a list of entries")
    out_shapes = meta["out_shapes"]
    if type(out_shapes) is not list or len(out_shapes) != len(outs):
        c.fail("its output shapes do not match its outputs")
    for e, shape in zip(outs, out_shapes):
        if not 0 <= e < c.n or not _ints(shape) or c.shape(e) != shape:
            c.fail(f"output {e} is not an entry of shape {shape!r}")
    out_dtypes = meta.get("out_dtypes", ["<f8"] * len(outs))
    if type(out_dtypes) is not list or len(out_dtypes) != len(outs) or any(
            d not in _OUT_DTYPES for d in out_dtypes):
        c.fail(f"its output dtypes {str(out_dtypes)[:200]} are not a dtype per output")
    if second != (grads is not None):
        c.fail("a recorded gradient where none belongs, or none where one does")
    if grads is not None:
        if not _ints(grads) or len(grads) != len(ins):
            c.fail(f"its recorded gradient {grads!r} is not one entry per input")
        for e, shape in zip(grads, shapes):
            if not 0 <= e < c.n or c.shape(e) != list(shape):
                c.fail(f"gradient entry {e} is not an entry of shape {tuple(shape)}")
    stats = meta["stats"]
    if stats is not None and not (type(stats) is dict and _ints(list(stats.values()))):
        c.fail("its stats are not a dict of counts")
    roots = list(outs) + list(grads or [])
    guards = meta["guards"]
    if type(guards) is not list:
        c.fail("its guards are not a list")
    for g in guards:
        roots += _check_guard(c, g)
    return roots


def _check_guard(c, g):
    """One guard ``[kind, entry, data, [file, line]]``; returns the entries it reads."""
    if not (type(g) is list and len(g) == 4 and _int(g[0]) and _int(g[1])
            and type(g[2]) is list and all(type(v) is float for v in g[2])
            and type(g[3]) is list and len(g[3]) == 2 and type(g[3][0]) is str
            and _int(g[3][1])):
        c.fail(f"a guard that is not [kind, entry, data, [file, line]]: {str(g)[:200]}")
    kind, e, data, _ = g
    if not 0 <= e < c.n:
        c.fail(f"a guard on entry {e}, which it does not have")
    n = c.sizes[e]
    if kind == G_EQUAL and len(data) == n:
        return [e]
    if kind == G_TRUTH and len(data) == 1 and n == 1:
        return [e]
    if kind in (G_ARGMAX, G_ARGMIN) and len(data) == 4 and all(
            math.isfinite(v) and v.is_integer() for v in data):
        src, outer, rows, inner = (int(v) for v in data)
        if (c.META[e] >= 0 and src == c.A[e] and 0 <= src < e and min(outer, rows, inner) >= 0
                and outer * inner == n and outer * rows * inner == c.sizes[src]
                and (rows >= 1 or n == 0) and int(c.ex[e]) + n <= c.ni):
            c.loops(e, (outer, rows, inner), "argmax rows")
            return [e, src]
    c.fail(f"a guard (kind {kind}) on entry {e} of {n} values with data "
           f"{str(data)[:200]} that does not fit it")

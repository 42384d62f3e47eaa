"""``tapegrad.trace``: record a function once, then run it and its derivatives at new
inputs entirely in compiled code.

A call loads the new inputs into a recording's value arena, recomputes every entry
with the compiled forward sweep, checks the recording's guards, and runs the compiled
reverse (or tangent) sweep: no Python per op.  When a guard fails (the inputs take
another branch than the recording saw), the function is recorded again at these
inputs and both recordings are kept (``on_guard_failure='retrace'``), or
``GuardFailure`` is raised (``'error'``): a replay never answers for the wrong branch.
"""
import functools
import sys
import threading

import numba
import numpy as np

from ..autograd import sweeps
from ..kernels.replay import FORWARD_RULES, compile_rules, grad_batch
from ..kernels.reverse import DONE, NAN, RULES, sweep, sweep_compiling
from ..tensor import Tensor, _leaf, from_array
from . import dask_batch, vector_replay
from .background import compile_later
from .record import ReplayError, record

NO_HOST = np.iinfo(np.int64).max


_BATCH = threading.Lock()


class GuardFailure(ReplayError):
    pass


def _in_turn(method):
    """A call of a ``Traced`` that replays: its recordings' arrays (values, adjoints,
    scratch) are the replay's work space, so threads that share one ``Traced`` take
    turns (each call is the one-thread result; a thread of its own replays in parallel
    with its own ``Traced``: trace again, or ``load`` a saved one)."""
    @functools.wraps(method)
    def in_turn(self, *args, **kwargs):
        with self._turn:
            return method(self, *args, **kwargs)
    return in_turn


def _split_args(args):
    """(traced float64 arrays, their dtypes, static (position, value) pairs)."""
    arrays, dtypes, static = [], [], []
    for k, a in enumerate(args):
        if isinstance(a, Tensor):
            arrays.append(np.asarray(a._arr, np.float64))
            dtypes.append(a.dtype.np)
        elif isinstance(a, (float, np.ndarray, np.floating)):
            arrays.append(np.asarray(a, np.float64))
            dtypes.append(np.float64)
        else:
            static.append((k, a))
    return arrays, dtypes, static


def _points(batches):
    """(each argument's batch as a float64 array, the points as rows: the arguments'
    values flattened and concatenated)."""
    arrays = [np.asarray(b._arr if isinstance(b, Tensor) else b, np.float64) for b in batches]
    nb = arrays[0].shape[0]
    return arrays, np.concatenate([a.reshape(nb, -1) for a in arrays], axis=1)


def _tensor(a, dtype=np.float64):
    return from_array(np.asarray(a, dtype))


class Traced:
    """A replayable recording of ``fn`` (see the module docstring).

    ``traced(*args)``, ``.grad``, ``.value_and_grad``, ``.vjp``, ``.jvp``, ``.hvp`` take
    arguments of the example's shapes; tensors and floats are traced, other arguments
    are static (they must equal the example's).  Threads may share one: its calls take
    turns (``_in_turn``)."""

    def __new__(cls, *args, **kwargs):
        self = super().__new__(cls)       # (also for a loaded, copied or unpickled Traced)
        self._turn = threading.RLock()    # (re-entered: grad_batch replays point by point)
        return self

    def __init__(self, fn, *example_args, on_guard_failure="retrace", argnums=None,
                 optimize=True, compile_after=1000):
        if on_guard_failure not in ("retrace", "error"):
            raise ValueError("on_guard_failure must be 'retrace' or 'error'")
        self.fn = fn
        self.on_guard_failure = on_guard_failure
        self.optimize = optimize
        self.compile_after = compile_after     # replays before a recording is compiled
        self.replays = 0
        arrays, self.dtypes, self.static = _split_args(example_args)
        if not arrays:
            raise ReplayError("trace needs at least one tensor (or float) argument to trace")
        self.shapes = [a.shape for a in arrays]
        self.argnums = argnums
        self.records = []            # newest first
        self.second = []             # recordings with their gradient (for hvp)
        self.log = []                # why each recording was made
        self._record(arrays, "first call", self.records, False)

    # -- recordings ------------------------------------------------------------------
    def _record(self, arrays, why, into, second_order):
        if self.fn is None:
            raise GuardFailure(f"{why}, and a loaded tape cannot record its function again")
        r = record(self.fn, arrays, self.static, second_order, self.dtypes)
        if self.optimize:
            from .optimize import optimize
            optimize(r)
        r.settle_guards(arrays)
        into.insert(0, r)
        self.log.append(why)
        return r

    def _arrays(self, args):
        arrays, _, static = _split_args(args)
        if [p for p, _ in static] != [p for p, _ in self.static] or any(
                a is not b and a != b for (_, a), (_, b) in zip(static, self.static)):
            raise ReplayError("static (untraced) arguments differ from the traced example's; "
                              "trace again (tapegrad.grad does this for you)")
        shapes = [a.shape for a in arrays]
        if shapes != self.shapes:
            raise ReplayError(f"traced for argument shapes {self.shapes}, called with {shapes}")
        return arrays

    def _ready(self, arrays, second_order=False):
        """A recording whose guards hold at ``arrays``, with its forward sweep done."""
        pool = self.second if second_order else self.records
        for r in pool:
            r.load(arrays)
            if r.run_forward():
                return r
        if pool:
            where = pool[0].failed_guard()
            why = (f"guard at {where[0]}:{where[1]} failed" if where
                   else "guards failed")
            if self.fn is None:
                raise GuardFailure(f"the inputs take another path than the recordings ({why}), "
                                   "and a loaded tape cannot record its function again")
            if self.on_guard_failure == "error":
                raise GuardFailure(f"the inputs take another path than the recording: {why}")
        else:
            why = "first hvp (records the gradient too)"
        r = self._record(arrays, why, pool, second_order)
        r.load(arrays)
        r.run_forward()
        return r

    def _wrt(self):
        n = len(self.shapes)
        nums = range(n) if self.argnums is None else (
            (self.argnums,) if isinstance(self.argnums, int) else tuple(self.argnums))
        return list(nums), self.argnums is None and n == 1 or isinstance(self.argnums, int)

    def _outputs(self, r):
        outs = [_leaf(float(r.V[r.OFF[e]])) if r.META[e] < 0 and d == "<f8" else
                _tensor(r.value(e), d) for e, d in zip(r.outs, r.out_dtypes)]
        return tuple(outs) if r.out_tuple else outs[0]

    # -- the calls -------------------------------------------------------------------
    @_in_turn
    def __call__(self, *args):
        return self._outputs(self._ready(self._arrays(args)))

    @_in_turn
    def value_and_grad(self, *args):
        nums, single = self._wrt()
        value, grads = self._value_and_grads(args, nums)
        return value, grads[0] if single else tuple(grads)

    def _value_and_grads(self, args, nums):
        arrays = self._arrays(args)
        x = np.concatenate([a.reshape(-1) for a in arrays]) if len(arrays) > 1 else \
            arrays[0].reshape(-1)
        self.replays += 1
        if self.compile_after is not None and self.replays == self.compile_after:
            self._background = compile_later(self.records)     # (replays go on meanwhile)
        for attempt in range(2):
            for r in self.records:
                if r.out_tuple or r.size(r.outs[0]) != 1:
                    raise RuntimeError("grad can be implicitly created only for scalar outputs")
                flat = np.empty(r.n_in)
                native = r.native
                if native is not None:
                    value = native(x, flat)
                    if value is not None:
                        return _tensor(value, r.out_dtypes[0]), self._split(flat, arrays, nums)
                elif r.value_and_grad(x, flat):
                    return self._outputs(r), self._split(flat, arrays, nums)
            self._ready(arrays)          # records this branch (or raises GuardFailure)
        raise ReplayError("internal error: a fresh recording failed its own guards")

    def _split(self, flat, arrays, nums):
        grads, pos = [], 0
        for k, s in enumerate(self.shapes):
            size = arrays[k].size
            if k in nums:
                grads.append(_tensor(flat[pos:pos + size].reshape(s), self.dtypes[k]))
            pos += size
        return grads

    @_in_turn
    def compile(self, strict=True):
        """Lower each recording to native code through LLVM (see ``llvm_tape``); later
        gradients run it.  ``strict``: raise ``CompileError`` for a recording the
        compiled tier cannot lower (else it stays interpreted).  Returns ``self``;
        ``compile_seconds`` says how long it took."""
        import time
        from .llvm_tape import CompiledTape, CompileError
        t0 = time.perf_counter()
        if getattr(self, "_background", None) is not None:   # compile_after's thread
            self._background.join()
        for r in self.records:
            if r.native is None:
                try:
                    r.native = CompiledTape(r)
                except CompileError:
                    if strict:
                        raise
        self.compile_seconds = time.perf_counter() - t0
        return self

    def grad(self, *args):
        return self.value_and_grad(*args)[1]

    @_in_turn
    def vjp(self, args, v):
        """``(outputs, v^T J)`` with ``v`` shaped like the outputs."""
        r = self._ready(self._arrays(args))
        vs = v if isinstance(v, tuple) else (v,)
        G = self._reverse(r, [np.asarray(x._arr if isinstance(x, Tensor) else x, np.float64)
                              for x in vs])
        grads = [_tensor(G[r.OFF[e]:r.OFF[e] + r.size(e)].reshape(s), d)
                 for e, s, d in zip(r.ins, self.shapes, self.dtypes)]
        return self._outputs(r), grads[0] if len(grads) == 1 else tuple(grads)

    def _reverse(self, r, seeds):
        G = np.zeros(r.nv)
        live = np.zeros(r.n, np.uint8)
        for e, s in zip(r.outs, seeds):
            G[r.OFF[e]:r.OFF[e] + s.size] += s.reshape(-1)
            live[e] = 1
        status, _ = vector_replay.sweep_down(r, max(r.outs), G, live)
        if status != DONE:
            raise ReplayError("this recording needs Python during its backward (a custom "
                              "Function or a hook) and cannot be replayed")
        return G

    @_in_turn
    def jvp(self, args, v):
        """``(outputs, J v)`` with ``v`` shaped like the traced arguments."""
        r = self._ready(self._arrays(args))
        vs = v if isinstance(v, tuple) else (v,)
        seeds = {e: np.asarray(x._arr if isinstance(x, Tensor) else x, np.float64)
                 for e, x in zip(r.ins, vs)}
        tans = sweeps.tangents(r, seeds, r.outs)
        res = [_tensor(np.zeros(s) if tan is None else tan) for tan, s in zip(tans, r.out_shapes)]
        return self._outputs(r), tuple(res) if r.out_tuple else res[0]

    @_in_turn
    def hvp(self, args, v):
        """``(output, H v)``: a tangent sweep over the recorded gradient."""
        r = self._ready(self._arrays(args), second_order=True)
        vs = v if isinstance(v, tuple) else (v,)
        seeds = {e: np.asarray(x._arr if isinstance(x, Tensor) else x, np.float64)
                 for e, x in zip(r.ins, vs)}
        tans = sweeps.tangents(r, seeds, r.grads)
        res = [_tensor(np.zeros(s) if tan is None else tan, d)
               for tan, s, d in zip(tans, self.shapes, self.dtypes)]
        return self._outputs(r), res[0] if len(res) == 1 else tuple(res)

    @_in_turn
    def jacobian(self, *args, sparse=False):
        """The Jacobian of the outputs (rows: all their elements, flattened and
        concatenated) w.r.t. the traced arguments (columns, likewise): a 2-D tensor, or
        with ``sparse=True`` a SciPy CSR array whose pattern and coloring are worked out
        once per recording and reused at every input its guards admit."""
        r = self._ready(self._arrays(args))
        ins = [r.ins[k] for k in self._wrt()[0]]
        return self._matrix(r, r.outs, ins, sparse, symmetric=False)

    @_in_turn
    def hessian(self, *args, sparse=False):
        """The Hessian of a scalar output w.r.t. the traced arguments (flattened and
        concatenated): a 2-D tensor, or with ``sparse=True`` a SciPy CSR array from a
        star coloring of its pattern (worked out once per recording), one
        forward-over-reverse sweep per color."""
        r = self._ready(self._arrays(args), second_order=True)
        if len(r.outs) != 1 or r.size(r.outs[0]) != 1:
            raise ReplayError("hessian needs a function with a single scalar output")
        return self._matrix(r, r.grads, r.ins, sparse, symmetric=True)

    def _matrix(self, r, outs, ins, sparse, symmetric):
        from ..autograd import sparse as sparse_rules
        if not sparse:      # one sweep per row or per column, whichever are fewer
            rows = sum(r.size(e) for e in outs) < sum(r.size(e) for e in ins)
            J = sweeps.jacobian_rows(r, outs, ins) if rows else None
            return _tensor(sweeps.jacobian_columns(r, ins, outs) if J is None else J)
        plan = r.sparse_plans.get(symmetric)
        if plan is None:
            P = sparse_rules.pattern(r, outs, ins)
            if symmetric:
                P = (P + P.T).tocsr()
                P.sort_indices()
            plan = r.sparse_plans[symmetric] = sparse_rules.Plan(P, symmetric)
        return plan.evaluate(r, outs, ins)

    @_in_turn
    def explain_nan(self, *args):
        """Where the first NaN or inf starts at these inputs (``autograd.nan_trace``):
        the first non-finite value of the replayed forward pass, else the first entry
        whose backward writes a NaN into an adjoint, as a ``NanReport``; None if both
        passes are finite.  Replayed from the recording (source lines are known when it
        was traced in anomaly mode)."""
        from ..autograd import nan_trace
        r = self._ready(self._arrays(args))
        report = nan_trace.forward_origin(r, max(r.outs))
        if report is not None:
            return report
        G = np.zeros(r.nv)
        live = np.zeros(r.n, np.uint8)
        for e in r.outs:
            G[r.OFF[e]:r.OFF[e] + r.size(e)] = 1.0
            live[e] = 1
        status, i = sweep_compiling(sweep, max(r.outs), r.arrays(), G, live,
                                    np.empty(2 * r.max_size), np.empty(r.max_size, np.int64),
                                    NO_HOST, -1, True, 0, False, NO_HOST)
        if status != NAN:
            return None
        ins = nan_trace.inputs(r, i)
        k = next(k for k, b in enumerate(ins) if np.isnan(G[r.OFF[b]:r.OFF[b] + r.size(b)]).any())
        return nan_trace.adjoint_report(r, i, live, k)

    @_in_turn
    def grad_batch(self, *batches):
        """Values and gradients at many points: each argument with a leading batch axis.
        Runs the points in parallel; points whose guards fail under the recording are
        recorded again one by one.  Returns ``(values, grads, guards_held)``.  A Dask
        array (one traced argument) gives Dask arrays, computed chunk by chunk on its
        scheduler (``dask_batch``)."""
        if len(batches) == 1 and dask_batch.is_dask_array(batches[0]):
            return dask_batch.batch(self, batches[0])
        arrays, X = _points(batches)
        nb = X.shape[0]
        values, grads, ok = self._batch(X)
        for p in np.flatnonzero(~ok):             # another branch: one by one
            values[p], grads[p] = self._point(arrays, p)
        out = []
        pos = 0
        for k, s in enumerate(self.shapes):
            size = int(np.prod(s))
            out.append(grads[:, pos:pos + size].reshape((nb,) + s))
            pos += size
        return values, out[0] if len(out) == 1 else tuple(out), ok

    @_in_turn
    def value_batch(self, *batches):
        """Values at many points, as ``grad_batch`` without the gradients (no reverse
        sweep): ``(values, guards_held)``; a Dask array gives Dask arrays."""
        if len(batches) == 1 and dask_batch.is_dask_array(batches[0]):
            values, _, ok = dask_batch.batch(self, batches[0], with_grad=False)
            return values, ok
        arrays, X = _points(batches)
        values, _, ok = self._batch(X, with_grad=False)
        for p in np.flatnonzero(~ok):             # another branch: one by one
            values[p] = self._value_at(arrays, p)
        return values, ok

    def _batch(self, X, with_grad=True):
        """(values, flat gradients, guards held) at the rows of ``X`` (the inputs'
        values, flattened and concatenated) under the first recording, in parallel
        (``with_grad`` False: no gradients, an empty array of them)."""
        nb = X.shape[0]
        r = self.records[-1]                      # the first recording
        if r.out_tuple or r.size(r.outs[0]) != 1:
            raise RuntimeError("grad can be implicitly created only for scalar outputs")
        values = np.empty(nb)
        wants = np.array(r.ins if with_grad else [], np.int64)
        grads = np.empty((nb, sum(r.size(e) for e in wants)))
        ok = np.zeros(nb, np.bool_)
        compile_rules(r.OP, r.n)
        with _BATCH:              # (one parallel launch at a time: it takes every core)
            grad_batch(X, np.array(r.ins, np.int64), np.array(r.outs, np.int64), wants,
                       r.schedule, r.arrays(), r.max_size, r.GK, r.GE, r.GS, r.GN, r.GV, values,
                       grads, ok, RULES.table, FORWARD_RULES.table,
                       max(1, min(numba.get_num_threads(), nb)))
        return values, grads, ok

    def _point(self, arrays, p):
        """(value, flat gradient) at point ``p`` of ``arrays`` by the other recordings,
        or recorded again."""
        val, gs = self._value_and_grads(self._with_static([a[p] for a in arrays]),
                                        range(len(arrays)))
        return val.item(), np.concatenate([np.asarray(x._arr).reshape(-1) for x in gs])

    def _value_at(self, arrays, p):
        """The value at point ``p`` of ``arrays`` (by another recording, or recorded again)."""
        return float(np.asarray(self(*self._with_static([a[p] for a in arrays]))._arr))

    def _with_static(self, arrays):
        args = list(arrays)
        for pos, value in self.static:
            args.insert(pos, value)
        return args

    def explain(self):
        """Why each recording was made, oldest first."""
        return list(self.log)

    # -- persistence -----------------------------------------------------------------
    @_in_turn
    def save(self, path):
        """Write the recordings to ``path`` (``.npz``); ``tapegrad.load`` reads them back,
        checking all of it.  A saved file holds data only: the safe way to ship a tape
        (a pickle is code)."""
        from .serialize import save
        save(self, path)

    @_in_turn
    def __getstate__(self):
        """Pickled as its recordings (a saved file's bytes, checked again on unpickling)
        and its function as pickle holds any function: by reference (module and
        qualified name), looked up by whoever unpickles.  A function with no name to
        look up (a lambda, a local function, a callable object) is left out: the
        unpickled ``Traced`` then replays as a loaded file does.

        A pickle is code: unpickling one runs whatever it names.  Ship tapes as saved
        files (``save`` / ``tapegrad.load``), which hold data only and are checked on
        load.  The function is never nested as pickled bytes, so an unpickler that
        admits only some names decides about it too."""
        from .serialize import to_bytes
        return {"tapes": to_bytes(self), "fn": _by_reference(self.fn),
                "mode": self.on_guard_failure}

    def __setstate__(self, st):
        from .serialize import from_bytes
        from .validate import ReplayFileError
        self._turn = threading.RLock()    # (pickle's protocols 0 and 1 skip __new__)
        if type(st) is not dict or set(st) != {"tapes", "fn", "mode"} or \
                type(st["tapes"]) is not bytes or st["mode"] not in ("retrace", "error"):
            raise ReplayFileError("not the pickled state of a tapegrad Traced")
        if st["fn"] is not None and not callable(st["fn"]):
            raise ReplayFileError(
                f"the pickled Traced carries its function as a {type(st['fn']).__name__}, "
                "not a function (an older tapegrad nested it as pickled bytes, which are "
                "never unpickled): pickle it again, or ship it with save / tapegrad.load")
        from_bytes(self, st["tapes"])
        self.fn = st["fn"]
        if self.fn is not None:
            self.on_guard_failure, self.optimize = st["mode"], True


def _by_reference(fn):
    """``fn`` if pickle stores it by reference (its module, imported, holds it under its
    qualified name), else None."""
    module = getattr(fn, "__module__", None)
    name = getattr(fn, "__qualname__", None)
    obj = sys.modules.get(module) if type(module) is str else None
    if obj is None or type(name) is not str:
        return None
    for part in name.split("."):
        obj = getattr(obj, part, None)
    return fn if obj is fn else None


def trace(fn, *example_args, on_guard_failure="retrace", argnums=None, optimize=True,
          compile_after=1000):
    """Record ``fn`` at ``example_args`` for replay: see ``Traced``."""
    return Traced(fn, *example_args, on_guard_failure=on_guard_failure, argnums=argnums,
                  optimize=optimize, compile_after=compile_after)

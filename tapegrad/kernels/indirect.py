"""Calls from one compiled kernel to another through its address: compile per kind.

Numba compiles a caller together with the code of every kernel it calls (it links their
modules in and optimises the whole again), so a sweep that calls each kind's rule
directly compiles every rule of every kind, again, before its first run: about 7 s on a
fresh cache, for a tape that may hold one kind.  A kind's rule called through its
address instead compiles on its own, once, the first time a sweep reaches an entry of
that kind, and the sweep compiles with none of them.

A table of addresses (``Rules``) belongs to one set of argument types: an address is
only ever called with the types its kernel was compiled for (``compile_into`` types the
arguments the sweep passes, once per kind).  The addresses are data passed at each call,
never constants in the cached code, so they need no fixing up in another process.

``Rules.call(table, slot, args)`` is the call: in compiled code a call through
``table[slot]``, checked when it compiles to pass the table's types.  A sweep run by
Python (its twin while it compiles, ``cold``) is passed ``Rules.twin_table`` instead,
and runs the twin of the slot's kernel.
"""
import numba
import numpy as np
from numba import types
from numba.core.errors import TypingError
from numba.extending import intrinsic, overload

from . import cold
from ..ops.table import BANDS


@intrinsic
def _call_at(typingctx, address, args):
    """Call the compiled kernel at ``address`` (an int64) with the tuple ``args`` (Numba's
    own calling convention: the kernel was compiled for exactly these types)."""
    def codegen(context, builder, signature, llargs):
        argtys = list(args.types)
        values = [builder.extract_value(llargs[1], k) for k in range(len(argtys))]
        fnty = context.call_conv.get_function_type(types.none, argtys)
        fn = builder.inttoptr(llargs[0], fnty.as_pointer())
        context.call_conv.call_function(builder, fn, types.none, argtys, values)
        return context.get_dummy_value()
    return types.none(address, args), codegen


def slots(kinds):
    """Per op code, the slot of its kind's rule among ``kinds`` (kind names, in slot
    order; the op table's bands), or -1."""
    slot = np.full(max(hi for _, hi in BANDS.values()) + 1, -1, np.int8)
    for k, kind in enumerate(kinds):
        slot[BANDS[kind][0]:BANDS[kind][1] + 1] = k
    return slot


class Rules:
    """The addresses of one sweep's rules (``kernels``: the rule of each slot, or None),
    for one set of argument types, those of ``example()``'s arguments.  ``table[slot]``
    is 0 until the slot's kernel is compiled.  ``call(table, slot, args)`` is the call in
    compiled code (bound to a module-level name there)."""

    def __init__(self, kernels, example):
        self.kernels = kernels
        self.example = example
        self.table = np.zeros(len(kernels), np.int64)
        self.twin_table = _TwinTable(self)
        self.call = _caller(self)

    def types(self):
        if not hasattr(self, "_sig"):
            self._sig = _abi(tuple(numba.typeof(a) for a in self.example()))
        return self._sig

    def compile_into(self, slot, *args):
        """Compile (or load from the cache) the kernel of ``slot`` for the types of
        ``args`` (the table's), and enter its address."""
        if self.table[slot]:
            return
        kernel = self.kernels[slot]
        if not hasattr(kernel, "compile"):      # (Numba's JIT switched off: a function)
            self.table[slot] = 1
            return
        sig = tuple(numba.typeof(a) for a in args)
        if _abi(sig) != self.types():
            raise TypeError(f"tapegrad internal error: {kernel.py_func.__name__} called with "
                            f"{sig}, its table's types are {self.types()}")
        kernel.compile(sig)
        found = kernel.overloads[sig]
        self.table[slot] = found.library.get_pointer_to_function(found.fndesc.llvm_func_name)

    def compile_slots(self, slots):
        """``table``, the kernels of ``slots`` compiled (or loaded from the cache; a slot
        of -1 names none): before compiled code that calls them runs."""
        table = self.table
        for slot in slots:
            if slot >= 0 and not table[slot]:
                self.compile_into(slot, *self.example())
        return table

    def compile_all(self):
        for slot, kernel in enumerate(self.kernels):
            if kernel is not None:
                self.compile_into(slot, *self.example())
        return self.table

    def twin_for(self, slots):
        """``twin_table`` for a twin that calls only the kernels of ``slots``: where it
        gives way to the compiled kernel, only those are compiled."""
        return _TwinTable(self, slots)


def _abi(tys):
    """Types as a call passes them: a read-only array is passed as a writable one (the
    same fields; a rule only reads what it is given read-only)."""
    return tuple(_abi(t.types) if isinstance(t, types.BaseTuple) else
                 t.copy(readonly=False) if isinstance(t, types.Array) and not t.mutable else t
                 for t in tys)


class _TwinTable:
    """What a twin's sweep is passed for a table: no slot waits for a compile.  Where
    the twin gives way to the compiled kernel (``cold``), that is passed ``for_compiled()``:
    the table, every rule compiled (or loaded from the cache the background filled)."""

    def __init__(self, rules, slots=None):
        self.for_compiled = rules.compile_all if slots is None else \
            (lambda: rules.compile_slots(slots))

    def __getitem__(self, slot):
        return 1


def _caller(rules):
    """``call(table, slot, args)`` for ``rules``: run by Python (a twin's sweep, ``table``
    a ``_TwinTable``), the twin of the slot's kernel (with Numba's JIT switched off, the
    kernel, a function); compiled, a call through
    ``table[slot]``, which compiles only where ``args`` have the table's types (a call
    with others would pass its arguments where the kernel does not look for them)."""
    def call(table, slot, args):
        kernel = rules.kernels[slot]       # (a table when Numba's JIT is switched off)
        (cold.twin(kernel) if isinstance(table, _TwinTable) else kernel)(*args)

    @overload(call, inline="always")
    def _compiled(table, slot, args):
        if _abi(tuple(args.types)) != rules.types():
            raise TypingError(f"a rule called with {args.types}: its table's types are "
                              f"{rules.types()}")

        def impl(table, slot, args):
            _call_at(table[slot], args)
        return impl
    return call

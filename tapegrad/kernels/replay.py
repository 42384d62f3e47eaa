"""The compiled forward sweep: recompute every entry of a tape from its inputs.

Replay writes new input values into the source entries of a recorded tape, runs
``forward`` over it (every kind has a forward rule here; elementwise ops and
comparisons come from the op table's generated dispatch), checks the tape's guards
with ``guards_hold`` and then runs the reverse sweep as usual.  ``grad_batch`` does all
three for many points at once, in parallel over the points.
"""
import numpy as np
from numba import njit, prange

from . import broadcast, indirect, matmul, reduce, reverse, softmax, structural
from .generated import (CAT_FIRST, CAT_LAST, COMPARE_FIRST, COMPARE_LAST, EW_LAST, GATHER_FIRST,
                        HOST_FIRST, HOST_LAST, INDEX_LAST, OP_WHERE, SOFTMAX_FIRST, SOFTMAX_LAST,
                        SOURCE_FIRST, SOURCE_LAST, STOP_FIRST, STOP_LAST, cmp_fwd, ew_fwd)
from .layout import extras_at, size_of, tiny_tape
from .reverse import COMPILE, DONE, HOST, RULE, sweep_all

_JIT = dict(cache=True, error_model="numpy")
# guard kinds: a value equals what the recording saw; a truth value; an argmax / argmin
G_EQUAL, G_TRUTH, G_ARGMAX, G_ARGMIN = 0, 1, 2, 3
# the large kinds' forward rules, called through their addresses (``indirect``: each
# compiles when a forward first meets its kind); SLOT[op]: the slot of op's rule, or -1
_KINDS = {"reduce": reduce.forward, "matmul": matmul.forward, "broadcast": broadcast.forward}
FORWARD_RULES = indirect.Rules(tuple(_KINDS.values()),
                               lambda: (lambda t: (np.int64(0), t, t[1]))(tiny_tape()))
_rule = FORWARD_RULES.call
SLOT = indirect.slots(_KINDS)


@njit(**_JIT)
def forward(schedule, tape, omap, rules):
    """Recompute the entries of ``schedule`` (increasing entry indices) in order; the
    rules of products, broadcasts and reductions are called through ``rules``
    (``FORWARD_RULES.table``, as the reverse sweep's).  Returns ``(DONE, -1)``,
    ``(HOST, i)`` at a host entry i (a custom Function, which has no compiled forward),
    or ``(COMPILE, p)`` at ``schedule[p]``, of a kind whose rule is not compiled yet
    (``forward_compiling``)."""
    p = 0
    while True:
        status, k = _walk(schedule, p, tape, omap, rules)
        if status != RULE:
            return status, k
        _rule(rules, SLOT[tape[0][schedule[k]]], (schedule[k], tape, omap))
        p = k + 1


@njit(inline="always", **_JIT)
def _walk(schedule, start, tape, omap, rules):
    """``forward``'s loop from ``schedule[start]`` up to an entry whose rule is called
    through its address, ``(RULE, p)`` (as the reverse sweep's ``_walk``)."""
    OP, A, B, C, C2, OFF, META, IAUX, FLAGS, V = tape
    for p in range(start, schedule.shape[0]):
        i = schedule[p]
        op = OP[i]
        if SOURCE_FIRST <= op <= SOURCE_LAST:
            continue
        a, b = A[i], B[i]
        oi = OFF[i]
        n = size_of(META, IAUX, i)
        if op <= EW_LAST and META[i] < 0:     # the scalar hot path
            V[oi] = ew_fwd(op, V[OFF[a]] if a >= 0 else C[i], V[OFF[b]] if b >= 0 else C[i],
                           C2[i])
        elif op <= EW_LAST or COMPARE_FIRST <= op <= COMPARE_LAST:
            oa = OFF[a] if a >= 0 else 0
            ob = OFF[b] if b >= 0 else 0
            c, c2 = C[i], C2[i]
            for k in range(n):
                x = V[oa + k] if a >= 0 else c
                y = V[ob + k] if b >= 0 else c
                V[oi + k] = ew_fwd(op, x, y, c2) if op <= EW_LAST else cmp_fwd(op, x, y)
        elif structural.is_element(i, op, META, IAUX):     # (before the calls: inline)
            V[oi] = V[structural.element_at(i, a, OFF, META, IAUX)]
        elif op == OP_WHERE:
            structural.where_forward(i, A, B, C, OFF, META, IAUX, V)
        elif GATHER_FIRST <= op <= INDEX_LAST or STOP_FIRST <= op <= STOP_LAST:
            structural.move(i, op, a, OFF, META, IAUX, V, omap, C)
        elif CAT_FIRST <= op <= CAT_LAST:
            structural.concatenate(i, OFF, META, IAUX, V, FLAGS[:0])
        elif SOFTMAX_FIRST <= op <= SOFTMAX_LAST:
            softmax.forward(i, op, OFF[a], oi, META, IAUX, V)
        elif HOST_FIRST <= op <= HOST_LAST:
            return HOST, i
        elif SLOT[op] >= 0:
            if rules[SLOT[op]] == 0:
                return COMPILE, p
            return RULE, p
    return DONE, -1


@njit(**_JIT)
def guards_hold(GK, GE, GS, GN, GV, OFF, META, IAUX, V):
    """Do the recorded guards hold for the values in ``V``?  Guard g: kind ``GK[g]`` on
    entry ``GE[g]`` with its data at ``GV[GS[g]:GS[g] + GN[g]]``:
    ``G_EQUAL``  the entry's values equal the data (NaN equals NaN);
    ``G_TRUTH``  the entry's value is non-zero exactly when the data says so;
    ``G_ARGMAX`` / ``G_ARGMIN``  the data is (input entry, outer, n, inner) of a
        max/min along a dim whose recorded first positions are at entry GE[g]'s
        index list: they must still be the first extreme positions."""
    for g in range(GK.shape[0]):
        kind, e, s = GK[g], GE[g], GS[g]
        o = OFF[e]
        if kind == G_EQUAL:
            for k in range(GN[g]):
                x, want = V[o + k], GV[s + k]
                if x != want and not (x != x and want != want):
                    return False
        elif kind == G_TRUTH:
            if (V[o] != 0.0) != (GV[s] != 0.0):
                return False
        else:
            src = OFF[int(GV[s])]
            outer, n, inner = int(GV[s + 1]), int(GV[s + 2]), int(GV[s + 3])
            idx = extras_at(META, IAUX, e)
            for p in range(outer):
                for q in range(inner):
                    best = 0
                    bv = V[src + p * n * inner + q]
                    for j in range(1, n):
                        x = V[src + (p * n + j) * inner + q]
                        if bv == bv and (x != x or (x > bv if kind == G_ARGMAX else x < bv)):
                            best, bv = j, x
                    if IAUX[idx + p * inner + q] != (p * n + best) * inner + q:
                        return False
    return True


@njit(**_JIT)
def value_and_grad(x, ins, out, schedule, tape, G, live, scratch, omap, GK, GE, GS, GN, GV,
                   grad, rules, frules):
    """One replayed gradient in one call: load ``x`` (the inputs' values, flattened and
    concatenated) into the inputs' entries, recompute, check the guards, sweep back
    from entry ``out`` and write the inputs' adjoints into ``grad``.  Returns False (and
    computes nothing more) if a guard fails.  ``rules``, ``frules``: the sweep's and the
    forward's, every one of the recording's kinds compiled (``compile_rules``)."""
    OP, A, B, C, C2, OFF, META, IAUX, FLAGS, V = tape
    pos = 0
    for e in ins:
        o = OFF[e]
        for k in range(size_of(META, IAUX, e)):
            V[o + k] = x[pos]
            pos += 1
    status, _ = forward(schedule, tape, omap, frules)
    if status != DONE or not guards_hold(GK, GE, GS, GN, GV, OFF, META, IAUX, V):
        return False
    for i in schedule:        # the last sweep's marks (each adjoint it reaches, it zeroes
        live[i] = 0           # first: only an input it may not reach is cleared here)
    for e in ins:
        live[e] = 0
        for k in range(size_of(META, IAUX, e)):
            G[OFF[e] + k] = 0.0
    G[OFF[out]] = 1.0
    live[out] = 1
    sweep_all(out, tape, G, live, scratch, omap, rules)
    pos = 0
    for e in ins:
        o = OFF[e]
        for k in range(size_of(META, IAUX, e)):
            grad[pos] = G[o + k]
            pos += 1
    return True


@njit(parallel=True, **_JIT)
def grad_batch(X, ins, outs, wants, schedule, tape, max_size, GK, GE, GS, GN, GV, values, grads,
               ok, rules, frules, threads):
    """Value and gradient at each row of ``X`` (the inputs' values, flattened and
    concatenated), the rows split over ``threads``: ``values[r]`` the output (``outs[0]``'s
    first element), ``grads[r]`` the adjoints of ``wants``, ``ok[r]`` whether the guards
    held (if not, the row's results are not valid); no ``wants``, no reverse sweep.  Each thread has its own values and
    adjoints, made once: a row loads its inputs, recomputes the schedule and clears the
    adjoints its sweep touched (not a fresh copy of the arena per row: that was the
    memory traffic that kept two threads no faster than one)."""
    OP, A, B, C, C2, OFF, META, IAUX, FLAGS, V = tape
    top = outs[0]
    n = X.shape[0]
    per = (n + threads - 1) // threads
    for t in prange(threads):
        Vr = V.copy()
        G = np.zeros(V.shape[0])
        live = np.zeros(OP.shape[0], np.uint8)
        omap = np.empty(max_size, np.int64)
        scratch = np.empty(2 * max_size)
        tr = (OP, A, B, C, C2, OFF, META, IAUX, FLAGS, Vr)       # this thread's own values
        for r in range(t * per, min(n, (t + 1) * per)):
            pos = 0
            for e in ins:
                for k in range(size_of(META, IAUX, e)):
                    Vr[OFF[e] + k] = X[r, pos]
                    pos += 1
            forward(schedule, tr, omap, frules)
            ok[r] = guards_hold(GK, GE, GS, GN, GV, OFF, META, IAUX, Vr)
            values[r] = Vr[OFF[top]]
            if wants.shape[0] == 0:             # values only (value_batch)
                continue
            G[OFF[top]] = 1.0
            live[top] = 1
            sweep_all(top, tr, G, live, scratch, omap, rules)
            pos = 0
            for w in wants:
                for k in range(size_of(META, IAUX, w)):
                    grads[r, pos] = G[OFF[w] + k]
                    pos += 1
            for i in range(top + 1):            # clear what the sweep touched
                if live[i]:
                    live[i] = 0
                    for k in range(size_of(META, IAUX, i)):
                        G[OFF[i] + k] = 0.0

def warm():
    """Compile ``forward``, ``guards_hold`` and ``value_and_grad`` for a ``Record``'s
    argument types (``cold``'s background process): a recording of one input."""
    tape = tiny_tape()
    i, f = tape[1], tape[-1]
    none, nothing = np.zeros(0, np.int64), np.zeros(0)
    forward(none, tape, i, FORWARD_RULES.table)
    guards_hold(none, none, none, none, nothing, i, i, i, f)
    value_and_grad(f, i, 0, none, tape, f, tape[8], f, i, none, none, none, none,
                   nothing, f, reverse.RULES.table, FORWARD_RULES.table)


def warm_rules():
    """Compile every kind's forward rule (``cold``'s background process, near the end)."""
    FORWARD_RULES.compile_all()


def forward_compiling(run, schedule, tape, omap):
    """``run`` (``forward``, or its twin) over ``schedule``, compiling each kind's rule
    (or loading it from the cache) where it first meets the kind, and resuming there."""
    rules = FORWARD_RULES.table if run is forward else FORWARD_RULES.twin_table
    while True:
        status, k = run(schedule, tape, omap, rules)
        if status != COMPILE:
            return status, k
        FORWARD_RULES.compile_into(SLOT[tape[0][schedule[k]]], np.int64(0), tape, omap)
        schedule = schedule[k:]


def compile_rules(OP, n):
    """Compile the forward and reverse rules of every kind of the first ``n`` entries
    (op codes ``OP``): before a compiled replay (``value_and_grad``, ``grad_batch``),
    whose sweeps have no stop to return to Python at."""
    reverse.compile_rules(OP, n)
    FORWARD_RULES.compile_slots(np.unique(SLOT[OP[:n]]).tolist())

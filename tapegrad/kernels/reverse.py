"""The compiled reverse sweep over a tape's flat arrays.

``sweep`` walks a tape's entries from the last to the first, adding each entry's adjoint
contributions into its inputs' adjoints.
Adjoints live in ``G``, an arena with the same layout as the value arena ``V``.
Nothing here knows a Python object, and nothing raises: the engine validates first.
Each kind's rule is in the kind's own module (``elementwise``, ``structural``,
``reduce``, ``matmul``, ``softmax``, ``broadcast``).  The sweep calls the large ones
(``_KINDS``, one signature) through their address (``indirect``: each compiles when a
sweep first meets its kind, not with the sweep) and the small ones directly, each with
only the arrays it reads.
"""
import numpy as np
from numba import njit

from . import broadcast, elementwise, indirect, matmul, reduce, softmax, structural
from .generated import (CAT_FIRST, CAT_LAST, EW_LAST, GATHER_FIRST, GATHER_LAST, HOST_FIRST,
                        HOST_LAST, INDEX_FIRST, INDEX_LAST, MATMUL_FIRST, MATMUL_LAST, OP_CONST,
                        OP_WHERE, RESHAPE_FIRST, RESHAPE_LAST, SOFTMAX_FIRST, SOFTMAX_LAST,
                        SOURCE_FIRST, SOURCE_LAST, ew_grad)
from .layout import (cat_dims, cat_piece, extras_at, mark_reached, product_dims, size_of,
                     tiny_tape, wants, zero)

_JIT = dict(cache=True, error_model="numpy")
DONE, CONSUMED, HOST, HOOK, NAN, FUSE, COMPILE = 0, 1, 2, 3, 4, 5, 6      # how a sweep ended
RULE = 7                # (inside the sweep: call entry i's rule)
NEVER = 1 << 62         # a size no entry reaches (no host products, no fused runs)
# each kind's rule, by slot; SLOT[op]: the slot of op's rule (-1: none, or in the sweep)
# (the other kinds' rules are small, or run on scalars' entries, where a call through an
# address costs more than the rule: the sweep calls them directly, each with only the
# arrays it reads: passing all the tape's costs 5 % of a scalar replay)
_KINDS = {"reduce": reduce.reverse, "matmul": matmul.reverse, "broadcast": broadcast.reverse}
RULES = indirect.Rules(tuple(_KINDS.values()),
                       lambda: (lambda t: (np.int64(0), t, t[-1], t[-1], t[1]))(tiny_tape()))
_rule = RULES.call
SLOT = indirect.slots(_KINDS)


@njit(**_JIT)
def sweep(top, tape, G, live, scratch, omap, rules, host_min, hooked_done, check_nan, lo, prune,
          fuse_min):
    """Reverse sweep of ``tape`` (its arrays, ``layout.TAPE``) over entries ``top`` down
    to ``lo`` from the entries pre-marked in ``live`` (all at or below ``top``), last to
    first.  An entry is swept if a swept entry uses it: liveness is marked
    as the sweep goes, so only the output's subgraph is visited, in one pass.  Each
    kind's rule is called through ``rules`` (``RULES.table``, ``indirect``).

    Returns ``(status, i)``: ``(DONE, -1)``; ``(CONSUMED, i)`` when a needed entry was
    consumed by an earlier backward (the caller discards ``G``: nothing else has been
    written); ``(HOST, i)`` at a host entry (a custom Function's output, or a matrix
    product of at least ``host_min`` multiply-adds), which the caller computes in Python
    before resuming below it;
    ``(HOOK, i)`` when entry i's adjoint is complete and tensor hooks wait for it: the
    caller runs them and resumes at ``i`` with ``hooked_done = i``; ``(NAN, i)`` in
    anomaly mode (``check_nan``) when entry i's backward left a NaN in an input's
    adjoint; ``(FUSE, i)`` at an elementwise entry of at least ``fuse_min`` elements,
    which the caller sweeps with the run below it by the fused kernels; ``(COMPILE, i)``
    at the first entry of a kind whose rule is not compiled yet (``sweep_compiling``
    compiles it and resumes at i with the same ``hooked_done``).  ``prune``: an input of a concatenation
    whose adjoint stays zero is not marked (a Jacobian row seeds one element of a
    stacked output: only that element's subgraph is swept).  (No argument has a default:
    a call that left one out would compile the sweep a second time.)"""
    start = top
    while True:
        status, i = _walk(start, tape, G, live, omap, rules, host_min, hooked_done, check_nan,
                          lo, prune, fuse_min)
        if status != RULE:
            return status, i
        _rule(rules, SLOT[tape[0][i]], (i, tape, G, scratch, omap))
        if check_nan and nan_in_inputs(i, tape[0], tape[1], tape[2], tape[5], tape[6], tape[7],
                                       G):
            return NAN, i
        start = i - 1


@njit(inline="always", **_JIT)
def _walk(top, tape, G, live, omap, rules, host_min, hooked_done, check_nan, lo, prune,
          fuse_min):
    """The sweep's loop, up to an entry whose rule is called through its address:
    ``(RULE, i)``, and the sweep calls it outside this loop (the call passes the tape's
    arrays field by field: inside the loop, all of them would be live across it)."""
    OP, A, B, C, C2, OFF, META, IAUX, FLAGS, V = tape
    for i in range(top, lo - 1, -1):
        if live[i] == 0:
            continue
        op = OP[i]
        if SOURCE_FIRST <= op <= SOURCE_LAST:
            continue
        if FLAGS[i] & 1:
            return CONSUMED, i
        if FLAGS[i] & 4 and i != hooked_done:
            return HOOK, i
        a, b = A[i], B[i]
        if op <= EW_LAST and META[i] < 0:
            # 0-d: the scalar hot path.  An input's first contribution is added to 0.0
            # (mark_reached's zero, folded in: the same bits, without the zero's store);
            # an adjoint into a constant is harmless
            oi = OFF[i]
            x = V[OFF[a]] if a >= 0 else C[i]
            y = V[OFF[b]] if b >= 0 else C[i]
            gx, gy = ew_grad(op, x, y, V[oi], G[oi], C2[i])
            for j, g in ((a, gx), (b, gy)):
                if j >= 0:
                    if live[j]:
                        G[OFF[j]] += g
                    else:
                        live[j] = 1
                        G[OFF[j]] = 0.0 + g
            if check_nan and nan_in_inputs(i, OP, A, B, OFF, META, IAUX, G):
                return NAN, i
            continue
        if op <= EW_LAST and size_of(META, IAUX, i) >= fuse_min:
            return FUSE, i     # (its run marks its inputs: fused.run_below)
        for j in (a, b):       # mark_reached, written out (called here, even inlined, it
            if j >= 0 and live[j] == 0:       # made a scalar replay up to 4x slower)
                live[j] = 1
                if META[j] < 0:
                    G[OFF[j]] = 0.0
                elif OP[j] != OP_CONST:
                    zero(G, OFF[j], size_of(META, IAUX, j))
        slot = -1
        if op <= EW_LAST:
            elementwise.reverse(i, op, OP, A, B, C, C2, OFF, META, IAUX, V, G)
        elif structural.is_element(i, op, META, IAUX):     # (before the calls: inline)
            G[structural.element_at(i, a, OFF, META, IAUX)] += G[OFF[i]]
        elif GATHER_FIRST <= op <= GATHER_LAST:
            structural.gather_reverse(i, A, OFF, META, IAUX, G, omap)
        elif RESHAPE_FIRST <= op <= RESHAPE_LAST:
            oa, oi = OFF[a], OFF[i]
            for k in range(size_of(META, IAUX, i)):
                G[oa + k] += G[oi + k]
        elif INDEX_FIRST <= op <= INDEX_LAST:
            structural.index_reverse(i, A, OFF, META, IAUX, G)
        elif op == OP_WHERE:
            structural.where_reverse(i, OP, A, B, OFF, META, IAUX, V, G)
        elif SOFTMAX_FIRST <= op <= SOFTMAX_LAST:
            softmax.reverse(i, op, OFF[a], OFF[i], META, IAUX, V, G)
        elif CAT_FIRST <= op <= CAT_LAST:
            e = extras_at(META, IAUX, i)
            for j in range(cat_dims(IAUX, e)[1]):    # zeroed first, marked once known (prune)
                buf = cat_piece(IAUX, e, j)[0]
                if live[buf] == 0:
                    mark_reached(buf, OP, OFF, META, IAUX, G, live)
                    live[buf] = 0
            structural.cat_reverse(i, OFF, META, IAUX, G)
            for j in range(cat_dims(IAUX, e)[1]):
                buf = cat_piece(IAUX, e, j)[0]
                if not prune or _nonzero(buf, OFF, META, IAUX, G):
                    live[buf] = 1
        elif MATMUL_FIRST <= op <= MATMUL_LAST:
            nb, M, K, N, _ = product_dims(IAUX, extras_at(META, IAUX, i))
            if nb * M * K * N >= host_min:
                return HOST, i
            slot = SLOT[op]
        elif HOST_FIRST <= op <= HOST_LAST:
            return HOST, i
        else:
            slot = SLOT[op]
        if slot >= 0:
            if rules[slot] == 0:
                return COMPILE, i
            return RULE, i
        if check_nan and nan_in_inputs(i, OP, A, B, OFF, META, IAUX, G):
            return NAN, i
    return DONE, -1


@njit(inline="always", **_JIT)
def sweep_all(top, tape, G, live, scratch, omap, rules):
    """``sweep`` with no stops (a replay's: every rule of its kinds compiled first,
    ``compile_rules``).  Compiled code calling a kernel with constants compiles it again
    for those literal values; the ``np.`` casts keep this call's types those of the
    engine's, so one compile of ``sweep`` serves both (and inlined, this wrapper is not
    one more level that compiles the sweep again)."""
    return sweep(top, tape, G, live, scratch, omap, rules, np.int64(NEVER), np.int64(-1),
                 np.bool_(False), np.int64(0), np.bool_(False), np.int64(NEVER))


@njit(**_JIT)
def _nonzero(j, OFF, META, IAUX, G):
    o = OFF[j]
    for k in range(size_of(META, IAUX, j)):
        if G[o + k] != 0.0:
            return True
    return False


@njit(**_JIT)
def _nan_in(j, OFF, META, IAUX, G):
    o = OFF[j]
    for k in range(size_of(META, IAUX, j)):
        if G[o + k] != G[o + k]:
            return True
    return False


@njit(**_JIT)
def nan_in_inputs(i, OP, A, B, OFF, META, IAUX, G):
    """Anomaly mode: is there a NaN in the adjoint of an input of entry i (a constant's
    is no gradient: PyTorch computes none)?"""
    if wants(A[i], OP) and _nan_in(A[i], OFF, META, IAUX, G):
        return True
    if wants(B[i], OP) and _nan_in(B[i], OFF, META, IAUX, G):
        return True
    if CAT_FIRST <= OP[i] <= CAT_LAST:
        e = extras_at(META, IAUX, i)
        for j in range(cat_dims(IAUX, e)[1]):
            buf = cat_piece(IAUX, e, j)[0]
            if wants(buf, OP) and _nan_in(buf, OFF, META, IAUX, G):
                return True
    return False


@njit(**_JIT)
def consume(n, OP, A, B, FLAGS, live, NEED):
    """Mark the swept entries that read recorded values consumed (a backward without
    retain_graph): ``NEED[op]`` bit 1, the adjoint of the first input reads a value; bit
    2, the second's; bit 4, the entry saves one (other kinds).  An input that is a
    constant wants no adjoint.  Returns how many entries that read values are left
    unconsumed (0: the values can go)."""
    left = 0
    for i in range(n):
        op = OP[i]
        if SOURCE_FIRST <= op <= SOURCE_LAST:
            continue
        k = NEED[op]
        need = k & 4 != 0
        if not need and k & 1 and A[i] >= 0 and OP[A[i]] != OP_CONST:
            need = True
        if not need and k & 2 and B[i] >= 0 and OP[B[i]] != OP_CONST:
            need = True
        if not need:
            continue
        if live[i]:
            FLAGS[i] |= 1
        elif not FLAGS[i] & 1:
            left += 1
    return left


@njit(**_JIT)
def reach(n, A, B, LISTED, INS, seed):
    """Which of entries 0..n-1 lead to a ``seed``ed one (an input asked for), in place:
    one pass up the tape, as an entry's inputs come before it.  An entry's inputs are
    its A and B columns (>= 0), or, where ``LISTED[j] >= 0`` (a cat's pieces, a custom
    Function's inputs), ``INS[LISTED[j]:]`` up to a -1.  An input at or after its entry
    (no recording makes one) counts as leading there: more Nodes run, never fewer."""
    for j in range(n):
        if seed[j]:
            continue
        k = LISTED[j]
        if k < 0:
            a, b = A[j], B[j]
            if (a >= 0 and (a >= j or seed[a])) or (b >= 0 and (b >= j or seed[b])):
                seed[j] = 1
            continue
        while INS[k] >= 0:
            if INS[k] >= j or seed[INS[k]]:
                seed[j] = 1
                break
            k += 1


def rules_for(run, kernel):
    """The rules table for ``run``: the compiled ``kernel`` (which calls the sweep), or
    its twin (``cold``), which runs the rules' twins."""
    return RULES.table if run is kernel else RULES.twin_table


def sweep_compiling(run, top, tape, G, live, scratch, omap, *stops):
    """``run`` (the sweep, or its twin) from ``top`` until it stops at other than a kind
    whose rule is not compiled: each such rule compiles (or loads from the cache) when
    the sweep first reaches its kind, and the sweep resumes there."""
    rules = rules_for(run, sweep)
    while True:
        status, i = run(top, tape, G, live, scratch, omap, rules, *stops)
        if status != COMPILE:
            return status, i
        RULES.compile_into(SLOT[tape[0][i]], np.int64(i), tape, G, scratch, omap)
        top = i


def compile_rules(OP, n):
    """Compile the rule of every kind of the first ``n`` entries (op codes ``OP``):
    before compiled code runs the sweep with no stop to return to Python at
    (``sweep_all``)."""
    RULES.compile_slots(np.unique(SLOT[OP[:n]]).tolist())


def warm():
    """Compile ``sweep``, ``consume`` and ``reach`` for the engine's argument types
    (``cold``'s background process): a tape of one unused entry."""
    tape = tiny_tape()
    OP, A, B, C, C2, OFF, META, IAUX, FLAGS, f = tape
    sweep(-1, tape, f, FLAGS, f, A, RULES.table, 1, -1, False, 0, False, 1)
    consume(0, OP, A, B, FLAGS, FLAGS, FLAGS)
    reach(0, A, B, A, A, FLAGS)


def warm_rules():
    """Compile every kind's rule (``cold``'s background process, after the sweeps: a
    sweep that meets a kind first compiles its rule itself, ``sweep_compiling``), and the
    broadcast kind's forward for eager ops (``elementwise``: NumPy's until then)."""
    RULES.compile_all()
    f = np.zeros(1)
    broadcast.apply(0, f, 0, f, 0, f, 0, (1,) * 4 + (0,) * 8)

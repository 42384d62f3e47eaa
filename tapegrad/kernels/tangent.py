"""The compiled tangent sweep (forward mode) and many-seed sweeps for Jacobians.

``tangent`` walks entries first to last and computes each entry's tangent ``T`` from
its inputs' tangents.  No new rules are needed: an elementwise op's Jacobian is
diagonal, so its tangent is its reverse rule applied to the input tangents
(``ew_grad`` with ``g = dx`` for x's part, ``g = dy`` for y's); every other kind is
linear in its inputs' values or uses the same bookkeeping as the reverse sweep.

``has[i]``: 0 no tangent reaches entry i, 1 computed here, 2 seeded by the caller.
``reverse_rows`` / ``tangent_columns`` run one sweep per one-hot seed inside one
compiled call and collect the rows (or columns) of a Jacobian.
"""
import numpy as np
from numba import njit

from . import broadcast, elementwise, fused, matmul, reduce, softmax, structural
from .generated import (BROADCAST_FIRST, BROADCAST_LAST, CAT_FIRST, CAT_LAST, COMPARE_FIRST,
                        EW_LAST, GATHER_FIRST, HOST_FIRST, HOST_LAST, INDEX_LAST, MATMUL_FIRST,
                        MATMUL_LAST, OP_WHERE, REDUCE_FIRST, REDUCE_LAST, SOFTMAX_FIRST,
                        SOFTMAX_LAST, SOURCE_FIRST, SOURCE_LAST, STOP_LAST)
from .layout import (cat_dims, cat_piece, extras_at, function_input_at, function_inputs, size_of,
                     tiny_tape)
from .reverse import DONE, HOST, NEVER, RULE, RULES, sweep

_JIT = dict(cache=True, error_model="numpy")


@njit(**_JIT)
def tangent(lo, hi, tape, T, has, scratch, omap, rev, fuse_min):
    """Tangents of entries ``lo..hi`` in order.  Returns ``(DONE, -1)`` or ``(HOST, i)``
    at a host entry that a tangent reaches (custom Functions have no tangent rule).  An
    elementwise entry of ``fuse_min`` elements or more is swept block by block by its
    op's reverse block rule (``fused.tangent_entry``; ``rev``: ``fused.REV.table``, those
    ops compiled, ``fused.large_ops``)."""
    OP, A, B, C, C2, OFF, META, IAUX, FLAGS, V = tape
    start = lo
    while True:
        status, i = _walk(start, hi, tape, T, has, scratch, omap, fuse_min)
        if status != RULE:
            return status, i
        fused.tangent_entry(i, size_of(META, IAUX, i), OP, A, B, C, C2, OFF, V, T, has, rev)
        start = i + 1


@njit(inline="always", **_JIT)
def _walk(lo, hi, tape, T, has, scratch, omap, fuse_min):
    """The tangent sweep's loop, up to a large elementwise entry: ``(RULE, i)``, its
    tangent computed outside the loop (a call through an address, as ``reverse``)."""
    OP, A, B, C, C2, OFF, META, IAUX, FLAGS, V = tape
    for i in range(lo, hi + 1):
        op = OP[i]
        if has[i] == 2 or SOURCE_FIRST <= op <= SOURCE_LAST:
            continue
        if COMPARE_FIRST <= op <= STOP_LAST:   # comparisons and detached copies: no tangent
            has[i] = 0
            continue
        a, b = A[i], B[i]
        reached = (a >= 0 and has[a] != 0) or (b >= 0 and has[b] != 0)
        if CAT_FIRST <= op <= CAT_LAST:
            e = extras_at(META, IAUX, i)
            for j in range(cat_dims(IAUX, e)[1]):
                if has[cat_piece(IAUX, e, j)[0]]:
                    reached = True
        elif HOST_FIRST <= op <= HOST_LAST:
            e = extras_at(META, IAUX, i)
            for j in range(function_inputs(IAUX, e)):
                if has[IAUX[function_input_at(e, j)]]:
                    return HOST, i
            has[i] = 0
            continue
        if not reached:
            has[i] = 0
            continue
        has[i] = 1
        oi = OFF[i]
        if op <= EW_LAST:
            if size_of(META, IAUX, i) >= fuse_min:
                return RULE, i
            elementwise.tangent(i, op, A, B, C, C2, OFF, META, IAUX, V, T, has)
        elif op == OP_WHERE:
            structural.where_tangent(i, A, B, OFF, META, IAUX, V, T, has)
        elif structural.is_element(i, op, META, IAUX):     # (inline: cheaper than a call)
            T[oi] = T[structural.element_at(i, a, OFF, META, IAUX)]
        elif GATHER_FIRST <= op <= INDEX_LAST:
            structural.move(i, op, a, OFF, META, IAUX, T, omap, C)
        elif REDUCE_FIRST <= op <= REDUCE_LAST:
            reduce.tangent(i, op, A, OFF, META, IAUX, V, T, has, scratch, omap)
        elif MATMUL_FIRST <= op <= MATMUL_LAST:
            matmul.tangent(i, A, B, OFF, META, IAUX, V, T, has)
        elif SOFTMAX_FIRST <= op <= SOFTMAX_LAST:
            softmax.tangent(i, op, OFF[a], oi, META, IAUX, V, T)
        elif BROADCAST_FIRST <= op <= BROADCAST_LAST:
            broadcast.tangent(i, op, A, B, OFF, META, IAUX, V, T, has)
        elif CAT_FIRST <= op <= CAT_LAST:
            structural.concatenate(i, OFF, META, IAUX, T, has)
    return DONE, -1


@njit(**_JIT)
def reverse_rows(r0, r1, outs, top, tape, G, live, scratch, omap, host_min, wants, J, rules,
                 color):
    """Rows ``r0..r1-1`` of a (row-compressed) Jacobian by reverse sweeps: row r seeds a
    one in every element k of the outputs (buffers ``outs``, flattened in order) with
    ``color[k] == r`` (one element each for a dense Jacobian: ``color`` = 0, 1, ...) and
    reads the adjoints of the buffers ``wants`` into ``J[r - r0]``.  Returns
    ``(DONE, -1)``, or the sweep's stop (status, entry) to leave the rest to Python.
    ``rules``: the sweep's, every one of the tape's kinds compiled
    (``reverse.compile_rules``)."""
    OFF, META, IAUX = tape[5], tape[6], tape[7]
    for r in range(r0, r1):
        pos = 0
        for e in outs:
            s = size_of(META, IAUX, e)
            live[e] = 1
            for k in range(s):
                if color[pos + k] == r:
                    G[OFF[e] + k] = 1.0
            pos += s
        status, i = sweep(top, tape, G, live, scratch, omap, rules, host_min, np.int64(-1),
                          np.bool_(False), np.int64(0), np.bool_(True), np.int64(NEVER))
        if status != DONE:
            return status, i
        pos = 0
        for w in wants:
            s = size_of(META, IAUX, w)
            for k in range(s):
                J[r - r0, pos + k] = G[OFF[w] + k] if w >= 0 and live[w] else 0.0
            pos += s
        for i in range(top + 1):            # clear what this sweep touched
            if live[i]:
                live[i] = 0
                o = OFF[i]
                for k in range(size_of(META, IAUX, i)):
                    G[o + k] = 0.0
    return DONE, -1


@njit(**_JIT)
def tangent_columns(c0, c1, ins, lo, hi, tape, T, has, scratch, omap, rev, fuse_min, outs, J,
                    color):
    """Columns ``c0..c1-1`` of a (column-compressed) Jacobian by tangent sweeps: column c
    seeds a one in every element k of the inputs (buffers ``ins``) with ``color[k] == c``
    and reads the tangents of ``outs``."""
    OFF, META, IAUX = tape[5], tape[6], tape[7]
    for c in range(c0, c1):
        for i in range(lo, hi + 1):
            has[i] = 0
        pos = 0
        for e in ins:
            s = size_of(META, IAUX, e)
            has[e] = 2
            for k in range(s):
                T[OFF[e] + k] = 1.0 if color[pos + k] == c else 0.0
            pos += s
        status, i = tangent(lo, hi, tape, T, has, scratch, omap, rev, fuse_min)
        if status != DONE:
            return status, i
        pos = 0
        for w in outs:
            s = size_of(META, IAUX, w)
            for k in range(s):
                J[pos + k, c - c0] = T[OFF[w] + k] if has[w] else 0.0
            pos += s
    return DONE, -1


def warm():
    """Compile the three sweeps above for the argument types of ``autograd.sweeps``
    (``cold``'s background process): no seeds."""
    import numpy as np
    tape = tiny_tape()
    i, u, f, J = tape[1], tape[8], tape[9], np.zeros((1, 1))
    rev, big = fused.REV.table, np.int64(fused.FUSE_MIN)
    tangent(0, -1, tape, f, u, f, i, rev, big)
    reverse_rows(0, 0, i, 0, tape, f, u, f, i, 1, i, J, RULES.table, i)
    tangent_columns(0, 0, i, 0, -1, tape, f, u, f, i, rev, big, i, J, i)

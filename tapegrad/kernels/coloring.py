"""Greedy colorings of a sparsity pattern, for compressed Jacobians and Hessians.

A Jacobian J whose columns are split into groups ("colors") such that no two columns of a
group have a nonzero in the same row is recovered from the products J s_c, one per group
(s_c: ones on the group's columns): entry (i, j) is row i of J s_color(j).  ``columns``
colors the columns so (a distance-2 coloring of the bipartite row/column graph); rows
are colored by passing the transposed pattern.

A Hessian is symmetric, and a *star* coloring of its adjacency graph (proper, and no path
on four vertices in two colors) lets every nonzero be read directly from H s_c, from
either of its two sides (Gebremedhin, Manne and Pothen, "What color is your Jacobian?
Graph coloring for computing derivatives", SIAM Review 47, 2005): an arrow pattern takes
2 colors where a column coloring takes n.  ``star`` is a greedy star coloring.

Vertices are taken in the order given (the caller tries two).  The
patterns come as CSR arrays (``indptr``, ``indices``); nothing here raises.
"""
import numpy as np
from numba import njit

_JIT = dict(cache=True)


@njit(**_JIT)
def columns(order, c_ptr, c_rows, r_ptr, r_cols):
    """Colors of the columns of a pattern given both ways (CSC: column -> rows, and CSR:
    row -> columns), such that columns sharing a row differ."""
    n = c_ptr.shape[0] - 1
    color = np.full(n, -1, np.int64)
    forbidden = np.full(n + 1, -1, np.int64)   # forbidden[c] == j: color c is taken near j
    for j in order:
        for p in range(c_ptr[j], c_ptr[j + 1]):
            r = c_rows[p]
            for q in range(r_ptr[r], r_ptr[r + 1]):
                k = r_cols[q]
                if color[k] >= 0:
                    forbidden[color[k]] = j
        c = 0
        while forbidden[c] == j:
            c += 1
        color[j] = c
    return color


@njit(**_JIT)
def _has_other(ptr, adj, color, x, c, w):
    """Does vertex x have a neighbor other than w with color c?"""
    for q in range(ptr[x], ptr[x + 1]):
        y = adj[q]
        if y != w and y != x and color[y] == c:
            return True
    return False


@njit(**_JIT)
def star(order, ptr, adj):
    """A star coloring of the symmetric graph ``ptr, adj`` (CSR; a self loop is ignored).
    Vertex v takes the least color that neither makes it equal to a neighbor nor ends or
    completes a two-colored path on four vertices:
      v - w - x - y with color(v) = color(x): forbidden when x has a neighbor y != w of
        w's color;
      w - v - x - y with color(w) = color(x), color(v) = color(y): two neighbors of one
        color forbid the colors of those neighbors' other neighbors."""
    n = ptr.shape[0] - 1
    color = np.full(n, -1, np.int64)
    forbidden = np.full(n + 1, -1, np.int64)
    seen = np.zeros(n + 1, np.int64)           # neighbors of v per color
    for v in order:
        for p in range(ptr[v], ptr[v + 1]):
            w = adj[p]
            if w != v and color[w] >= 0:
                forbidden[color[w]] = v
                seen[color[w]] += 1
        for p in range(ptr[v], ptr[v + 1]):
            w = adj[p]
            if w == v or color[w] < 0:
                continue
            twice = seen[color[w]] >= 2
            for q in range(ptr[w], ptr[w + 1]):
                x = adj[q]
                if x == v or x == w or color[x] < 0:
                    continue
                if twice or _has_other(ptr, adj, color, x, color[w], w):
                    forbidden[color[x]] = v
        for p in range(ptr[v], ptr[v + 1]):
            w = adj[p]
            if w != v and color[w] >= 0:
                seen[color[w]] = 0
        c = 0
        while forbidden[c] == v:
            c += 1
        color[v] = c
    return color

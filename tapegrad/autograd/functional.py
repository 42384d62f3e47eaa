"""``tapegrad.autograd.functional``: vjp, jvp, jacobian, hessian, hvp, vhp (PyTorch's API).

The function is recorded once on a tape of its own.  Without ``create_graph`` the
products and matrices come from compiled sweeps over that tape: a Jacobian's rows are
one reverse sweep per output element and its columns one tangent sweep per input
element, all inside one compiled call (never one Python-level backward per row); a
Hessian is the Jacobian of the recorded gradient; ``jvp`` and ``hvp`` are tangent
sweeps (``hvp`` forward over the recorded reverse).  With ``create_graph`` the results
must carry a history, and everything goes through ``grad(create_graph=True)``.

``sparse=True`` (tapegrad's, not PyTorch's) reads the Jacobian's exact pattern from the
tape and computes it with one sweep per color of a coloring of that pattern
(``autograd.sparse``); each (output, input) block is a SciPy CSR array of shape
(output elements, input elements).  ``sparsity`` gives the pattern alone.
"""
import numpy as np

from ..grad_mode import enable_grad
from ..tape import Tape
from ..tensor import Tensor, from_array
from . import sparse as _sparse
from . import sweeps
from .entry_points import grad as _grad


def _as_tuple(x, arg_name, fn_name):
    is_tuple = isinstance(x, tuple)
    xs = x if is_tuple else (x,)
    for k, el in enumerate(xs):
        if not isinstance(el, Tensor):
            where = f"the value at index {k}" if is_tuple else f"the given {arg_name}"
            raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a "
                            f"tuple of Tensors but {where} has type {type(el)}.")
    return is_tuple, xs


def _unpack(res, is_tuple):
    return res if is_tuple else res[0]


def _unpack2(res, outer_tuple, inner_tuple):
    if not inner_tuple:
        res = tuple(r[0] for r in res)
    return res if outer_tuple else res[0]


def _prepare(inputs, create_graph):
    """New tensor objects for the inputs: views keeping their history under
    ``create_graph``, else detached leaves that require grad."""
    return tuple(x.view_as(x) if create_graph and x.requires_grad
                 else x.detach().requires_grad_(True) for x in inputs)


def _validate_v(v, other, is_other_tuple, fn_name):
    _, v = _as_tuple(v, "v", fn_name)
    if len(v) != len(other):
        if is_other_tuple:
            raise RuntimeError(f"v is a tuple of invalid length: should be {len(other)} but got "
                               f"{len(v)}.")
        raise RuntimeError("The given v should contain a single Tensor.")
    for k, (a, b) in enumerate(zip(v, other)):
        if a.shape != b.shape:
            prefix = f"Entry {k} in " if is_other_tuple else ""
            raise RuntimeError(f"{prefix}v has invalid size: should be {b.shape!r} but got "
                               f"{a.shape!r}.")
    return v


def _check_outputs(outputs, strict):
    if strict:
        for k, o in enumerate(outputs):
            if not o.requires_grad:
                raise RuntimeError(f"Output {k} of the user-provided function does not require "
                                   "gradients. The outputs must be computed in a differentiable "
                                   "manner from the input when running in strict mode.")


def _fill_zeros(grads, refs, strict):
    out = []
    for k, (g, x) in enumerate(zip(grads, refs)):
        if g is None:
            if strict:
                raise RuntimeError(f"The output of the user-provided function is independent of "
                                   f"input {k}. This is not allowed in strict mode.")
            g = from_array(np.zeros(tuple(x.shape), x.dtype.np))
        out.append(g)
    return tuple(out)


def _post(tensors, create_graph):
    return tuple(x if create_graph else x.detach() for x in tensors)


def _single_element_v(inputs, what):
    if len(inputs) != 1 or inputs[0].numel() != 1:
        raise RuntimeError(f"The vector v can only be None if {what} a single Tensor with a "
                           "single element.")
    return (from_array(np.ones(tuple(inputs[0].shape), inputs[0].dtype.np)),)


def _entries(t, tensors):
    """Tape entry of each tensor on ``t`` (None where the tensor is not there)."""
    return [x._i if x._tid == t.uid else None for x in tensors]


def _array(a, like):
    return from_array(np.asarray(a, like.dtype.np).reshape(tuple(like.shape)))


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), v^T J)``."""
    with enable_grad():
        is_in, xs = _as_tuple(inputs, "inputs", "vjp")
        xs = _prepare(xs, create_graph)
        is_out, outs = _as_tuple(func(*xs), "outputs of the user-provided function", "vjp")
        _check_outputs(outs, strict)
        v = (_validate_v(v, outs, is_out, "vjp") if v is not None
             else _single_element_v(outs, "the user-provided function returns"))
        grads = _grad([o for o in outs if o.requires_grad], xs,
                      [g for g, o in zip(v, outs) if o.requires_grad], create_graph=create_graph,
                      allow_unused=True) if any(o.requires_grad for o in outs) else [None] * len(xs)
        vj = _fill_zeros(grads, xs, strict)
    return _unpack(_post(outs, create_graph), is_out), _unpack(_post(vj, create_graph), is_in)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), J v)``: one compiled tangent sweep."""
    with enable_grad():
        is_in, xs = _as_tuple(inputs, "inputs", "jvp")
        xs = _prepare(xs, create_graph)
        v = (_validate_v(v, xs, is_in, "jvp") if v is not None
             else _single_element_v(xs, "the input to the user-provided function is"))
        if create_graph:
            return _jvp_by_double_backward(func, xs, v, strict)
        with Tape() as t:
            is_out, outs = _as_tuple(func(*xs), "outputs of the user-provided function", "jvp")
        _check_outputs(outs, strict)
        if t.autograd.functions:    # a custom Function: through its backward, twice (as
            _, jv = _jvp_by_double_backward(func, xs, v, strict, outs)   # PyTorch's jvp)
            return _unpack(_post(outs, False), is_out), _unpack(_post(jv, False), is_out)
        seeds = {e: np.asarray(vk._arr, np.float64) for e, vk in zip(_entries(t, xs), v)
                 if e is not None}
        ents = _entries(t, outs)
        found = sweeps.tangents(t, seeds, [e for e in ents if e is not None]) if seeds else []
        found = iter(found)
        res = []
        for o, e in zip(outs, ents):
            tan = next(found) if e is not None else None
            if tan is None and strict:
                raise RuntimeError("The output of the user-provided function is independent of "
                                   "input. This is not allowed in strict mode.")
            res.append(_array(np.zeros(tuple(o.shape)) if tan is None else tan, o))
    return _unpack(_post(outs, False), is_out), _unpack(tuple(res), is_out)


def _jvp_by_double_backward(func, xs, v, strict, outs=None):
    """J v as d/du <J^T u, v> with u a dummy: differentiable to higher order.  ``outs``:
    func's outputs already computed (a tuple; the results are tuples then)."""
    if outs is None:
        is_out, outs = _as_tuple(func(*xs), "outputs of the user-provided function", "jvp")
        _check_outputs(outs, strict)
    else:
        is_out = True
    us = [from_array(np.zeros(tuple(o.shape), o.dtype.np), rg=True) for o in outs]
    diff = [(o, u) for o, u in zip(outs, us) if o.requires_grad]
    if not diff:
        return _unpack(outs, is_out), _unpack(_fill_zeros([None] * len(outs), outs, strict),
                                              is_out)
    gx = _grad([o for o, _ in diff], xs, [u for _, u in diff], create_graph=True,
               allow_unused=True)
    pairs = [(g, vk) for g, vk in zip(gx, v) if g is not None and g.requires_grad]
    jv = _grad([g for g, _ in pairs], us, [vk for _, vk in pairs], create_graph=True,
               allow_unused=True) if pairs else [None] * len(us)
    return _unpack(outs, is_out), _unpack(_fill_zeros(jv, outs, strict), is_out)


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy="reverse-mode", sparse=False):
    """The Jacobian of ``func`` at ``inputs``: a tensor of shape out.shape + in.shape per
    (output, input) pair, nested as PyTorch nests them.  ``sparse=True``: each block a
    SciPy CSR array (out.numel(), in.numel()) from the tape's pattern and a coloring
    (forward or reverse sweeps, whichever takes fewer; ``strategy`` is not used)."""
    _no_history(sparse, create_graph, "jacobian")
    if sparse:
        return _recorded(func, inputs, "jacobian", lambda t, outs, xs: _sparse_blocks(
            t, outs, xs, symmetric=False))
    if strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode". '
                             'Hint: If your function has more outputs than inputs, '
                             '"forward-mode" tends to be more performant. Otherwise, prefer to '
                             'use "reverse-mode".')
    if strategy == "forward-mode":
        if create_graph:
            raise NotImplementedError('torch.autograd.functional.jacobian: `create_graph=True` '
                                      'and `strategy="forward-mode"` are not supported together '
                                      '(yet). Please either set `create_graph=False` or '
                                      '`strategy="reverse-mode"`.')
        if not vectorize:
            raise NotImplementedError('Computing Jacobian using forward-AD or forward-over-reverse '
                                      'Hessian is only implemented for `vectorize=True`.')
    with enable_grad():
        is_in, xs = _as_tuple(inputs, "inputs", "jacobian")
        xs = _prepare(xs, create_graph)
        with Tape() as t:
            is_out, outs = _as_tuple(func(*xs), "outputs of the user-provided function",
                                     "jacobian")
        _check_outputs(outs, strict)
        blocks = _blocks(t, outs, xs, create_graph, strict, strategy == "forward-mode")
    return _unpack2(blocks, is_out, is_in)


def _no_history(sparse, create_graph, fn_name):
    if sparse and create_graph:
        raise ValueError(f"{fn_name}: sparse=True gives SciPy arrays, which carry no history; "
                         "create_graph=True needs sparse=False")


def _recorded(func, inputs, fn_name, blocks):
    """``blocks(t, outputs, inputs)`` nested as PyTorch nests a Jacobian, with ``func``
    recorded on its own tape t."""
    with enable_grad():
        is_in, xs = _as_tuple(inputs, "inputs", fn_name)
        xs = _prepare(xs, False)
        with Tape() as t:
            is_out, outs = _as_tuple(func(*xs), "outputs of the user-provided function",
                                     fn_name)
        return _unpack2(blocks(t, outs, xs), is_out, is_in)


def _sparse_blocks(t, outs, xs, symmetric, values=True):
    """The (output, input) blocks as SciPy CSR arrays: the values, or (``values``
    False) the boolean pattern.  ``symmetric``: ``outs`` is the gradient of a scalar
    w.r.t. ``xs`` (a Hessian, star-colored)."""
    sp = _sparse.scipy_sparse()
    out_e, in_e = _entries(t, outs), _entries(t, xs)
    rows = [k for k, e in enumerate(out_e) if e is not None]
    cols = [k for k, e in enumerate(in_e) if e is not None]
    if symmetric:                   # the same buffers index rows and columns
        rows = cols = [k for k in cols if out_e[k] is not None]
    full = None
    if rows and cols:
        o_ents, i_ents = [out_e[k] for k in rows], [in_e[k] for k in cols]
        P = _sparse.pattern(t, o_ents, i_ents)
        if symmetric:
            P = (P + P.T).tocsr()
            P.sort_indices()
        full = P if not values else _sparse.Plan(P, symmetric).evaluate(t, o_ents, i_ents)
    r_at = dict(zip(rows, np.cumsum([0] + [outs[k].numel() for k in rows])))
    c_at = dict(zip(cols, np.cumsum([0] + [xs[k].numel() for k in cols])))
    res = []
    for a, o in enumerate(outs):
        row = []
        for b, x in enumerate(xs):
            shape = (o.numel(), x.numel())
            if a in r_at and b in c_at:
                block = full[r_at[a]:r_at[a] + shape[0], c_at[b]:c_at[b] + shape[1]]
            else:
                block = sp.csr_array(shape, dtype=np.float64 if values else bool)
            row.append(block.astype(o.dtype.np) if values else block)
        res.append(tuple(row))
    return tuple(res)


def sparsity(func, inputs):
    """The pattern of ``jacobian(func, inputs)``, read from the tape (no derivative is
    computed): which output element depends on which input element, as boolean SciPy
    CSR blocks nested as ``jacobian`` nests its blocks.  Exact for the recorded path: a
    derivative that vanishes only at some points (relu's) is in it."""
    return _recorded(func, inputs, "sparsity", lambda t, outs, xs: _sparse_blocks(
        t, outs, xs, symmetric=False, values=False))


def _blocks(t, outs, xs, create_graph, strict, forward):
    """The (output, input) blocks of the Jacobian of ``outs`` (recorded on ``t``)
    w.r.t. ``xs``, reshaped to out.shape + in.shape."""
    out_e, in_e = _entries(t, outs), _entries(t, xs)
    J = None
    fast = not create_graph and None not in out_e and any(e is not None for e in in_e)
    if fast:
        used = [e for e in in_e if e is not None]
        J = (sweeps.jacobian_columns(t, used, out_e) if forward
             else sweeps.jacobian_rows(t, out_e, used))
    if J is None:
        return _blocks_by_grad(outs, xs, create_graph, strict)
    res, r = [], 0
    for o in outs:
        row, c = [], 0
        for x, e in zip(xs, in_e):
            block = np.zeros((o.numel(), x.numel()))
            if e is not None:
                block = J[r:r + o.numel(), c:c + x.numel()]
                c += x.numel()
            row.append(from_array(block.reshape(tuple(o.shape) + tuple(x.shape))
                                  .astype(o.dtype.np)))
        res.append(tuple(row))
        r += o.numel()
    return tuple(res)


def _blocks_by_grad(outs, xs, create_graph, strict):
    """The general path: one ``grad`` per output element (hooks, custom Functions,
    create_graph)."""
    from ..shape_ops import stack
    res = []
    for o in outs:
        rows = [[] for _ in xs]
        flat = o.reshape(-1)
        for k in range(o.numel()):
            gs = (_grad(flat[k], xs, retain_graph=True, create_graph=create_graph,
                        allow_unused=True) if o.requires_grad else [None] * len(xs))
            for j, g in enumerate(_fill_zeros(gs, xs, strict)):
                rows[j].append(g)
        res.append(tuple(stack(r).reshape(tuple(o.shape) + tuple(x.shape)) if r else
                         from_array(np.zeros(tuple(o.shape) + tuple(x.shape)))
                         for r, x in zip(rows, xs)))
    return tuple(res)


def _scalar_function(func, fn_name, strict):
    def single(*xs):
        out = func(*xs)
        is_tuple, outs = _as_tuple(out, "outputs of the user-provided function", fn_name)
        _check_outputs(outs, strict)
        if is_tuple:
            raise RuntimeError(f"The function given to {fn_name} should return a single Tensor")
        if out.numel() != 1:
            raise RuntimeError(f"The Tensor returned by the function given to {fn_name} should "
                               "contain a single element")
        return out.reshape(())
    return single


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode", sparse=False):
    """The Hessian of a scalar function: the Jacobian of its recorded gradient.
    ``sparse=True``: SciPy CSR blocks, from a star coloring of the symmetric pattern and
    one forward-over-reverse sweep per color."""
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode".')
    _no_history(sparse, create_graph, "hessian")
    single = _scalar_function(func, "hessian", strict)
    with enable_grad():
        is_in, xs = _as_tuple(inputs, "inputs", "hessian")
        xs = _prepare(xs, create_graph)
        with Tape() as t:
            out = single(*xs)
            grads = (_fill_zeros(_grad(out, xs, create_graph=True, allow_unused=True), xs, strict)
                     if out.requires_grad else _fill_zeros([None] * len(xs), xs, strict))
        blocks = (_sparse_blocks(t, grads, xs, symmetric=True) if sparse else
                  _blocks(t, grads, xs, create_graph, strict,
                          outer_jacobian_strategy == "forward-mode" and vectorize))
    return _unpack2(blocks, is_in, is_in)


def _gradient_and_v(func, inputs, v, fn_name, strict, create_graph):
    single = _scalar_function(func, fn_name, strict)
    is_in, xs = _as_tuple(inputs, "inputs", fn_name)
    xs = _prepare(xs, create_graph)
    v = (_validate_v(v, xs, is_in, fn_name) if v is not None
         else _single_element_v(xs, "the input to the user-provided function is"))
    with Tape() as t:
        out = single(*xs)
        grads = (_grad(out, xs, create_graph=True, allow_unused=True) if out.requires_grad
                 else [None] * len(xs))
    return is_in, xs, v, t, out, grads


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), v^T H)`` by a second reverse pass over the recorded gradient."""
    with enable_grad():
        is_in, xs, v, _, out, grads = _gradient_and_v(func, inputs, v, "vhp", strict,
                                                      create_graph)
        pairs = [(g, vk) for g, vk in zip(grads, v) if g is not None and g.requires_grad]
        res = (_grad([g for g, _ in pairs], xs, [vk for _, vk in pairs],
                     create_graph=create_graph, allow_unused=True)
               if pairs else [None] * len(xs))
        res = _fill_zeros(res, xs, strict)
    return _post((out,), create_graph)[0], _unpack(_post(res, create_graph), is_in)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), H v)``: a tangent sweep over the recorded gradient (forward over
    reverse), compiled; by double backward under ``create_graph``."""
    if create_graph:
        return vhp(func, inputs, v, create_graph, strict)   # H is symmetric
    with enable_grad():
        is_in, xs, v, t, out, grads = _gradient_and_v(func, inputs, v, "hvp", strict, False)
        seeds = {e: np.asarray(vk._arr, np.float64) for e, vk in zip(_entries(t, xs), v)
                 if e is not None}
        ents = [g._i if g is not None and g._tid == t.uid else None for g in grads]
        targets = [e for e in ents if e is not None]
        found = iter(sweeps.tangents(t, seeds, targets) if seeds and targets else [])
        res = [next(found) if e is not None else None for e in ents]
        res = _fill_zeros([None if r is None else _array(r, x) for r, x in zip(res, xs)], xs,
                          strict)
    return out.detach(), _unpack(res, is_in)

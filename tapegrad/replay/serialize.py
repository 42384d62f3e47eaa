"""Saving and loading replayable recordings: ``traced.save(path)`` / ``tapegrad.load(path)``.

A file is a NumPy ``.npz`` of each recording's flat arrays plus a small JSON header
(format version, argument shapes and dtypes, where inputs and outputs sit, guards, and
the name of every op code the arrays use).  Op codes are written as this version's, and
read back through their names: a later tapegrad maps each name to its own code, and a
file that names an op it lacks is refused with an error naming that op, so a file never
loads as another function.
A loaded ``Traced`` replays in any process; it cannot record its function again (it
has none), so inputs that fail every guard raise ``GuardFailure``.  Pickling uses the
same state.
"""
import io
import json

import numpy as np

from ..ops.table import BY_CODE, CODE
from .record import _COLS, Record

FORMAT_VERSION = 2     # 2: the header names the op codes (1 stored bare list positions)
_ARRAYS = _COLS + ("IAUX", "V", "schedule")


def _record_state(r, prefix, arrays):
    for name in _ARRAYS:
        arrays[f"{prefix}{name}"] = getattr(r, name)
    return {"ins": r.ins, "outs": r.outs, "out_shapes": r.out_shapes, "out_tuple": r.out_tuple,
            "grads": r.grads, "stats": getattr(r, "stats", None),
            "guards": [[k, e, list(d), list(loc)] for k, e, d, loc in r.guard_list]}


def _op_names(records):
    """{code: op name} for every op code the records use."""
    codes = set()
    for r in records:
        codes.update(int(c) for c in np.unique(r.OP))
    return {str(c): BY_CODE[c].name for c in sorted(codes)}


def _code_map(names):
    """old code -> this version's code, from a file's {code: name}; refuses unknown ops."""
    table = np.full(max([int(c) for c in names] + [0]) + 1, -1, np.int64)
    for c, name in names.items():
        if name not in CODE:
            raise ValueError(f"the replay file uses the op '{name}', which this version of "
                             "tapegrad does not have; record the function again")
        table[int(c)] = CODE[name]
    return table


def _remap(op, table):
    op = np.asarray(op)
    if op.size and (op.min() < 0 or op.max() >= table.size or (table[op] < 0).any()):
        raise ValueError("the replay file uses op codes its header does not name")
    return table[op].astype(op.dtype) if op.size else op.copy()


def _load_record(meta, prefix, arrays, table):
    cols = {name: arrays[f"{prefix}{name}"] for name in _COLS}
    cols["OP"] = _remap(cols["OP"], table)
    r = Record(cols, arrays[f"{prefix}IAUX"], arrays[f"{prefix}V"].copy(), meta["ins"],
               meta["outs"], meta["out_shapes"], meta["out_tuple"],
               [(k, e, tuple(d), tuple(loc)) for k, e, d, loc in meta["guards"]], meta["grads"])
    r.schedule = arrays[f"{prefix}schedule"]
    if meta["stats"] is not None:
        r.stats = meta["stats"]
    return r


def state(traced):
    """(header dict, arrays dict) of a Traced."""
    arrays = {}
    header = {"format": "tapegrad-replay", "version": FORMAT_VERSION,
              "shapes": [list(s) for s in traced.shapes],
              "dtypes": [np.dtype(d).str for d in traced.dtypes],
              "static": [[p, repr(v)] for p, v in traced.static],
              "argnums": traced.argnums, "log": traced.log,
              "compile_after": traced.compile_after,
              "ops": _op_names(list(traced.records) + list(traced.second)),
              "records": [_record_state(r, f"r{k}_", arrays) for k, r in enumerate(traced.records)],
              "second": [_record_state(r, f"s{k}_", arrays) for k, r in enumerate(traced.second)]}
    return header, arrays


def restore(traced, header, arrays):
    if header.get("format") != "tapegrad-replay":
        raise ValueError("not a tapegrad replay file")
    if header.get("version") != FORMAT_VERSION:
        raise ValueError(f"tapegrad replay file format version {header.get('version')} is not "
                         f"supported by this tapegrad (it reads version {FORMAT_VERSION}; "
                         "version 1 files stored bare op codes, which later versions "
                         "renumbered): record the function again")
    table = _code_map(header["ops"])
    traced.fn = None
    traced.on_guard_failure = "error"
    traced.optimize = False
    traced.replays, traced.compile_after = 0, header.get("compile_after", 1000)
    traced.shapes = [tuple(s) for s in header["shapes"]]
    traced.dtypes = [np.dtype(d) for d in header["dtypes"]]
    traced.static = [(p, _literal(v)) for p, v in header["static"]]
    traced.argnums = header["argnums"]
    traced.log = list(header["log"])
    traced.records = [_load_record(m, f"r{k}_", arrays, table)
                      for k, m in enumerate(header["records"])]
    traced.second = [_load_record(m, f"s{k}_", arrays, table)
                     for k, m in enumerate(header["second"])]


def _literal(text):
    import ast
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise ValueError(f"a static argument ({text}) cannot be restored from a file") from None


def save(traced, path):
    header, arrays = state(traced)
    np.savez(path, __header__=np.frombuffer(json.dumps(header).encode(), np.uint8), **arrays)


def load(path):
    """A ``Traced`` from a file written by ``Traced.save``."""
    from .traced import Traced
    with np.load(path, allow_pickle=False) as data:
        header = json.loads(bytes(data["__header__"]).decode())
        arrays = {k: data[k] for k in data.files if k != "__header__"}
    traced = Traced.__new__(Traced)
    restore(traced, header, arrays)
    return traced


def to_bytes(traced):
    buf = io.BytesIO()
    save(traced, buf)
    return buf.getvalue()


def from_bytes(traced, data):
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        header = json.loads(bytes(z["__header__"]).decode())
        restore(traced, header, {k: z[k] for k in z.files if k != "__header__"})

"""Saving and loading replayable recordings: ``traced.save(path)`` / ``tapegrad.load(path)``.

A file is a NumPy ``.npz`` of each recording's flat arrays plus a small JSON header
(format version, argument shapes and dtypes, where inputs and outputs sit, guards, the
name of every op code the arrays use, and a digest of all of it).  Op codes are written
as this version's, and read back through their names: a later tapegrad maps each name to
its own code, and a file that names an op it lacks is refused with an error naming that
op, so a file never loads as another function.

A file holds data only, and loading one trusts none of it (``ReplayFileError`` names what
is wrong):
  * the container is read defensively (``npz``): expected members only, exact dtypes,
    sizes within the file, a header of at most ``MAX_HEADER_BYTES``, no pickles;
  * the header's fields are checked for type and range, argument dtypes against the
    float and int dtypes a traced argument can have;
  * the digest (SHA-256 of the header and every array, op codes as names) must match:
    a damaged file (a flipped bit, a truncated array, an edited number) is refused
    instead of loading as another function;
  * every recording passes ``validate.check_record`` before any compiled code reads it,
    so that even a crafted file with a matching digest replays inside its own arrays.
This makes the ``.npz`` the safe way to ship tapes; a pickle is code (see
``Traced.__getstate__``).

A loaded ``Traced`` replays in any process; it cannot record its function again (it
has none), so inputs that fail every guard raise ``GuardFailure``.
"""
import ast
import hashlib
import io
import json
import re

import numpy as np

from .. import dtypes
from ..ops.table import BY_CODE, CODE
from ..tape.columns import _COLUMNS
from . import npz
from .background import compile_later
from .record import _COLS, Record
from .validate import MAX_NDIM, ReplayFileError, check_record

FORMAT_VERSION = 3     # 3: a digest of the content; 2: op codes named; 1: bare op codes
MAX_HEADER_BYTES = 1 << 20
_DTYPES = dict(_COLUMNS, V=np.float64, schedule=np.int64)   # each recording's arrays
_ARRAYS = _COLS + ("IAUX", "V", "schedule")
_ARG_DTYPES = {d.np.str: d.np for d in dtypes.ALL if d.np.kind in "fiu"}
_HEADER = {"format": str, "version": int, "shapes": list, "dtypes": list, "static": list,
           "argnums": (type(None), int, list), "log": list,
           "compile_after": (type(None), int), "ops": dict, "records": list, "second": list,
           "digest": str}


def _record_state(r, prefix, arrays):
    for name in _ARRAYS:
        arrays[f"{prefix}{name}"] = getattr(r, name)
    return {"ins": r.ins, "outs": r.outs, "out_shapes": r.out_shapes, "out_tuple": r.out_tuple,
            "out_dtypes": r.out_dtypes, "compiled": r.native is not None,
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
            raise ReplayFileError(f"the replay file uses the op '{name}', which this version "
                                  "of tapegrad does not have; record the function again")
        table[int(c)] = CODE[name]
    return table


def _remap(op, table):
    if op.size and (op.min() < 0 or op.max() >= table.size or (table[op] < 0).any()):
        raise ReplayFileError("the replay file uses op codes its header does not name")
    return table[op].astype(op.dtype)


def digest(header, arrays):
    """SHA-256 (hex) of a file's content: the header but its digest and op names, and
    every array, op codes as the names the header gives them, so that a version that
    numbers ops otherwise writes the same digest for the same recording."""
    h = hashlib.sha256()
    body = {k: v for k, v in header.items() if k not in ("digest", "ops")}
    h.update(json.dumps(body, sort_keys=True).encode())
    for key in sorted(arrays):
        a = np.ascontiguousarray(arrays[key])
        if key.endswith("_OP"):
            codes = np.unique(a)
            h.update(json.dumps([header["ops"][str(c)] for c in codes.tolist()]).encode())
            a = np.searchsorted(codes, a)          # each entry's op: its place in that list
        h.update(f"{key} {a.dtype.str} {a.shape}".encode())
        h.update(memoryview(a).cast("B"))
    return h.hexdigest()


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
    header = json.loads(json.dumps(header))      # as a reader will see it
    header["digest"] = digest(header, arrays)
    return header, arrays


def _check_header(header):
    """The header's fields, each of its type and in range (the recordings' own parts are
    ``check_record``'s)."""
    if type(header) is not dict or header.get("format") != "tapegrad-replay":
        raise ReplayFileError("not a tapegrad replay file")
    if header.get("version") != FORMAT_VERSION:
        raise ReplayFileError(
            f"tapegrad replay file format version {header.get('version')} is not supported "
            f"by this tapegrad (it reads version {FORMAT_VERSION}; version 1 files stored "
            "bare op codes, which later versions renumbered, and version 2 files carry no "
            "digest of their content): record the function again")
    if set(header) != set(_HEADER) or any(
            not isinstance(header[k], t) or type(header[k]) is bool for k, t in _HEADER.items()):
        raise ReplayFileError("the replay file's header does not have the fields of format "
                              f"version {FORMAT_VERSION}, each of its type")
    shapes, names = header["shapes"], header["dtypes"]
    if not shapes or not all(type(s) is list and len(s) <= MAX_NDIM and
                             all(type(n) is int and n >= 0 for n in s) for s in shapes):
        raise ReplayFileError(f"the replay file's argument shapes {str(shapes)[:200]} are "
                              "not lists of sizes")
    if len(names) != len(shapes) or not all(type(d) is str and d in _ARG_DTYPES
                                            for d in names):
        raise ReplayFileError(f"the replay file's argument dtypes {str(names)[:200]} are not "
                              f"one per argument from {sorted(_ARG_DTYPES)} (the float and "
                              "int dtypes a traced argument has)")
    static = header["static"]
    places = [p[0] for p in static if type(p) is list and len(p) == 2 and type(p[0]) is int
              and type(p[1]) is str]
    if len(places) != len(static) or places != sorted(set(places)) or (
            places and not 0 <= places[0] <= places[-1] < len(shapes) + len(static)):
        raise ReplayFileError("the replay file's static arguments are not [position, repr] "
                              "pairs in order")
    argnums = header["argnums"]
    nums = [argnums] if type(argnums) is int else argnums or []
    if not all(type(k) is int and 0 <= k < len(shapes) for k in nums):
        raise ReplayFileError(f"the replay file's argnums {argnums!r} are not argument "
                              "positions")
    if not all(type(s) is str for s in header["log"]):
        raise ReplayFileError("the replay file's log is not a list of strings")
    if header["compile_after"] is not None and header["compile_after"] < 0:
        raise ReplayFileError("the replay file's compile_after is negative")
    if not all(re.fullmatch(r"[0-9]{1,5}", c) and int(c) < 1 << 15 and type(n) is str
               for c, n in header["ops"].items()):
        raise ReplayFileError("the replay file's op names are not {code: name}")
    if not header["records"]:
        raise ReplayFileError("the replay file holds no recording")
    if not re.fullmatch(r"[0-9a-f]{64}", header["digest"]):
        raise ReplayFileError("the replay file's digest is not a SHA-256 in hex")


def _members(header):
    """{member name: dtype} of the arrays a file with this header holds."""
    groups = (("r", len(header["records"])), ("s", len(header["second"])))
    return {f"{group}{k}_{name}": _DTYPES[name]
            for group, count in groups for k in range(count) for name in _ARRAYS}


def restore(traced, header, arrays):
    """Fill ``traced`` from a file's checked header and its arrays, checking them first."""
    table = _code_map(header["ops"])
    ours = {k: _remap(a, table) if k.endswith("_OP") else a for k, a in arrays.items()}
    if digest(header, arrays) != header["digest"]:
        raise ReplayFileError("the replay file is damaged: its content does not match the "
                              "digest its header records")
    records = [_load_record(m, "r", k, ours, header["shapes"])
               for k, m in enumerate(header["records"])]
    second = [_load_record(m, "s", k, ours, header["shapes"])
              for k, m in enumerate(header["second"])]
    static = [(p, _literal(v)) for p, v in header["static"]]
    traced.fn = None
    traced.on_guard_failure = "error"
    traced.optimize = False
    traced.replays, traced.compile_after = 0, header["compile_after"]
    traced.shapes = [tuple(s) for s in header["shapes"]]
    traced.dtypes = [_ARG_DTYPES[d] for d in header["dtypes"]]
    traced.static = static
    traced.argnums = header["argnums"]
    traced.log = list(header["log"])
    traced.records, traced.second = records, second
    compiled = [r for r, m in zip(records, header["records"]) if m.get("compiled")]
    if compiled:        # compiled when saved: again here (from the object cache if it has it)
        traced._background = compile_later(compiled)


def _load_record(meta, group, k, arrays, shapes):
    """Recording k of ``group`` ("r": the recordings, "s": those with their gradient)."""
    cols = {name: arrays[f"{group}{k}_{name}"] for name in _COLS}
    IAUX, V, schedule = (arrays[f"{group}{k}_{name}"] for name in ("IAUX", "V", "schedule"))
    where = f"the replay file's {'gradient ' if group == 's' else ''}recording {k}"
    check_record(where, cols, IAUX, V, schedule, meta, shapes, group == "s")
    r = Record(cols, IAUX, V, meta["ins"], meta["outs"], meta["out_shapes"], meta["out_tuple"],
               [(kind, e, tuple(d), tuple(loc)) for kind, e, d, loc in meta["guards"]],
               meta["grads"])
    r.schedule = schedule
    if "out_dtypes" in meta:          # (files saved before it was noted: float64)
        r.out_dtypes = meta["out_dtypes"]
    if meta["stats"] is not None:
        r.stats = meta["stats"]
    return r


def _literal(text):
    try:
        return ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise ReplayFileError(f"a static argument ({text[:200]}) cannot be restored from "
                              "a file") from None


def save(traced, path):
    """Write ``traced``'s recordings to ``path`` (a path or a binary file)."""
    header, arrays = state(traced)
    text = json.dumps(header).encode()
    if len(text) > MAX_HEADER_BYTES:
        raise ReplayFileError(f"the recording's header would take {len(text)} bytes, more than "
                              f"a saved replay's {MAX_HEADER_BYTES} (its guards hold whole "
                              "tensors the function turned into Python values)")
    npz.write(path, dict(__header__=np.frombuffer(text, np.uint8), **arrays))


def _read(source):
    """(header, arrays) of the file at ``source``: its header read and checked, then the
    arrays that header names, and no other member."""
    with npz.Archive(source) as z:
        if "__header__" not in z.names:
            raise ReplayFileError("not a tapegrad replay file (it has no header)")
        text = bytes(z.array("__header__", np.uint8, MAX_HEADER_BYTES))
        try:
            header = json.loads(text.decode())
        except (ValueError, RecursionError) as e:
            raise ReplayFileError(f"the replay file's header is not JSON ({e})") from None
        _check_header(header)
        members = _members(header)
        odd = sorted((z.names - {"__header__"}) ^ set(members))
        if odd:
            raise ReplayFileError(f"the replay file's arrays do not match its header's "
                                  f"recordings: {odd[0]!r} is "
                                  f"{'extra' if odd[0] in z.names else 'missing'}")
        return header, {name: z.array(name, dtype) for name, dtype in members.items()}


def load(path):
    """A ``Traced`` from a file written by ``Traced.save`` (a path or a binary file);
    ``ReplayFileError`` if the file is not one, is damaged, or does not check out."""
    from .traced import Traced
    traced = Traced.__new__(Traced)
    restore(traced, *_read(path))
    return traced


def to_bytes(traced):
    buf = io.BytesIO()
    save(traced, buf)
    return buf.getvalue()


def from_bytes(traced, data):
    restore(traced, *_read(io.BytesIO(data)))

"""A tape as a table: one row per entry (index, op, Node name, inputs, output, shape,
dtype, a value preview, the source line), all entries or filtered by op name and/or by
the sub-graph an output depends on.

``TapeTable`` shows the rows as text (``repr``), as HTML in notebooks and as a pandas
DataFrame when pandas is installed.  ``Tape.__repr__`` / ``_repr_html_`` / ``rows`` /
``to_pandas`` are built from the functions here.
"""
import html

import numpy as np

from .. import dtypes
from ..ops.table import BY_CODE, CODE
from ..autograd.graph import ancestors as depends, input_buffers as inputs
from ..autograd.nan_trace import NanReport
from ..tape import HIDDEN, LOCATIONS, Tape

COLUMNS = ("index", "op", "node", "inputs", "output", "shape", "dtype", "value", "source")
_FUNCTION, _TO_COPY = CODE["function"], CODE["to_copy"]
_FLOATS = [d for d in dtypes.ALL if d.is_floating_point]


def node_name(t, i):
    """What PyTorch calls entry i's node: a Backward name, AccumulateGrad for a leaf."""
    from ..autograd.graph import node_of
    op = BY_CODE[t.OP[i]]
    if op.kind == "source":
        return {"leaf": "AccumulateGrad", "const": "", "external": "(other tape)"}[op.name]
    if t.FLAGS[i] & HIDDEN:
        return f"({op.name}, hidden)"
    return node_of(t, i).name()


def operands(t, i):
    """Entry i's operands in order: buffer indices (int) and Python-number constants
    (float), so ``x * 3`` shows as ``[0, 3.0]``."""
    op = BY_CODE[t.OP[i]]
    if op.kind == "ew" and op.arity == 2:
        a, b, c = int(t.A[i]), int(t.B[i]), float(t.C[i])
        return [a if a >= 0 else c, b if b >= 0 else c]
    return inputs(t, i)


# -- dtypes ------------------------------------------------------------------------------
def _fits(values, d):
    """Whether float64 ``values`` are exactly values of float dtype ``d``."""
    with np.errstate(over="ignore"):
        return np.array_equal(values.astype(d.np).astype(np.float64), values, equal_nan=True)


def _promoted(t, ins, known):
    """PyTorch's promotion of the inputs' dtypes; a broadcast (hidden expand) of a 0-d
    tensor still counts as 0-d, as it did when the op ran."""
    from ..elementwise import result_dtype
    from ..tensor import _leaf, _norm
    stand_ins = []
    for j in ins:
        k = j
        while t.FLAGS[k] & HIDDEN and BY_CODE[t.OP[k]].name == "expand":
            k = inputs(t, k)[0]
        stand_ins.append(_leaf(_norm(np.zeros((1,) * len(t.shape(k)), known[j].np))))
    return result_dtype(*stand_ins)


def entry_dtypes(t, upto):
    """dtypes of entries 0..upto (None where unknown).

    The tape keeps every value as float64 and records no dtype, so: leaves, constants
    and custom Function outputs give theirs exactly, a scalar fast-path entry is
    float64, and any other entry gets PyTorch's promotion of its inputs' dtypes, checked
    against its recorded values.  A ``.to()`` between float dtypes is the one whose
    values name it, where only one float dtype other than its input's holds them; it
    and whatever depends on it is None where they do not decide."""
    t.flush()
    known = []
    for i in range(upto + 1):
        known.append(_entry_dtype(t, i, known))
    return known


def _entry_dtype(t, i, known):
    code = t.OP[i]
    if t.META[i] < 0:
        return dtypes.float64
    if BY_CODE[code].kind == "source":
        return t.sources[i].dtype
    if code == _FUNCTION:
        return next(dtypes.from_np(d) for e, _, d, _ in t.autograd.functions[i].outputs if e == i)
    ins = inputs(t, i)
    if any(known[j] is None for j in ins):
        return None
    values = None if t.released else t.value(i).reshape(-1)
    if code == _TO_COPY:
        fits = [d for d in _FLOATS if d is not known[ins[0]]
                and values is not None and _fits(values, d)]
        return fits[0] if len(fits) == 1 else None
    first = known[ins[0]]
    d = first if all(known[j] is first for j in ins) else _promoted(t, ins, known)
    return d if values is None or _fits(values, d) else None


# -- rows --------------------------------------------------------------------------------
def short(a, width=40):
    """An array as one line of at most ``width`` characters."""
    text = np.array2string(np.asarray(a), precision=4, separator=", ", threshold=6,
                           edgeitems=2)
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 3] + "..."


def preview(t, i):
    return "(freed)" if t.released else short(t.value(i))


def tape_rows(t, op=None, output=None, limit=None):
    """Rows (dicts) of the tape's entries: all, those of op name ``op``, and/or those the
    tensor ``output`` depends on; at most ``limit``."""
    t.flush()
    keep = None
    if output is not None:
        if output._t is not t:
            raise ValueError("output was not recorded on this tape")
        keep = depends(t, output._i)
    picked = []
    for i in range(t.next):
        if (op is None or BY_CODE[t.OP[i]].name == op) and (keep is None or i in keep):
            picked.append(i)
            if limit is not None and len(picked) >= limit:
                break
    kinds = entry_dtypes(t, picked[-1]) if picked else []
    rows = []
    for i in picked:
        loc = t.locs.get(i)
        rows.append({"index": i, "op": BY_CODE[t.OP[i]].name, "node": node_name(t, i),
                     "inputs": operands(t, i), "output": i, "shape": t.shape(i),
                     "dtype": "?" if kinds[i] is None else kinds[i].name,
                     "value": preview(t, i),
                     "source": "" if loc is None else "%s:%d" % LOCATIONS[loc]})
    return rows


def count(t, op=None, output=None):
    """How many entries the filters select (what a limited table leaves out)."""
    if op is None and output is None:
        return t.next
    keep = depends(t, output._i) if output is not None else range(t.next)
    return sum(1 for i in keep if op is None or BY_CODE[t.OP[i]].name == op)


def cell(value):
    if isinstance(value, list):
        return ", ".join(map(str, value))
    return str(value)


def rows_text(rows, total):
    cols = [c for c in COLUMNS if c != "source" or any(r["source"] for r in rows)]
    cells = [[cell(r[c]) for c in cols] for r in rows]
    widths = [max([len(c)] + [len(row[k]) for row in cells]) for k, c in enumerate(cols)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in cells]
    if total > len(rows):
        lines.append(f"... {total - len(rows)} more entries")
    return "\n".join(lines)


def rows_html(rows, total, marks=None):
    """The rows as an HTML table; ``marks``: {entry: CSS background} to highlight."""
    head = "".join(f"<th>{c}</th>" for c in COLUMNS)
    marks = marks or {}
    body = "".join(
        (f'<tr style="background:{marks[r["index"]]}">' if r["index"] in marks else "<tr>")
        + "".join(f"<td>{html.escape(cell(r[c]))}</td>" for c in COLUMNS) + "</tr>"
        for r in rows)
    more = f"<p>... {total - len(rows)} more entries</p>" if total > len(rows) else ""
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}"


def to_pandas(t, op=None, output=None, limit=None):
    import pandas as pd      # optional dependency
    return pd.DataFrame(tape_rows(t, op=op, output=output, limit=limit), columns=list(COLUMNS))


class TapeTable:
    """A slice of a tape as a table: ``table(tape, op="mul")``, ``table(tape, output=loss)``.
    Prints as text, shows as HTML in a notebook, ``to_pandas()`` with pandas."""

    def __init__(self, t, op=None, output=None, limit=200):
        self.rows = tape_rows(t, op=op, output=output, limit=limit)
        self.total = count(t, op, output)
        what = [f"op={op}"] * (op is not None) + ["the entries the output depends on"] * \
            (output is not None)
        self.title = f"Tape {t.uid}: {self.total} of {t.next} entries" + \
            (f" ({', '.join(what)})" if what else "")

    def __len__(self):
        return len(self.rows)

    def __repr__(self):
        return self.title + "\n" + rows_text(self.rows, self.total)

    def _repr_html_(self):
        return f"<p>{html.escape(self.title)}</p>" + rows_html(self.rows, self.total)

    def to_pandas(self):
        import pandas as pd      # optional dependency
        return pd.DataFrame(self.rows, columns=list(COLUMNS))


def _install():
    """The tape's tables, as methods of ``Tape`` (the tape itself knows no viz)."""
    def rows(self, op=None, output=None, limit=None):
        """The entries as dicts (index, op, node, inputs, shape, value, source), all or
        those of one op name and/or those the tensor ``output`` depends on."""
        return tape_rows(self, op=op, output=output, limit=limit)

    def tape_to_pandas(self, op=None, output=None):
        return to_pandas(self, op=op, output=output)

    def text(self):
        return f"<Tape {self.uid}: {self.next} entries>\n" + rows_text(self.rows(limit=20),
                                                                       self.next)

    def notebook(self):
        return (f"<p>Tape {self.uid}: {self.next} entries</p>"
                + rows_html(self.rows(limit=200), self.next))

    Tape.rows, Tape.to_pandas, Tape.__repr__, Tape._repr_html_ = rows, tape_to_pandas, text, \
        notebook
    NanReport._repr_html_ = nan_report_html


def nan_report_html(report, limit=200):
    """A NaN report in a notebook: its text, then the entries the output depends on with
    the chain highlighted (the entry where the NaN or inf starts in red)."""
    text = f"<pre>{html.escape(str(report))}</pre>"
    t = report.tape
    if not isinstance(t, Tape) or t.released:
        return text
    top = max(report.chain)
    keep = sorted(depends(t, top))[-limit:]
    rows = [r for r in tape_rows(t) if r["index"] in set(keep)]
    marks = {e: "#ffd8a8" for e in report.chain}
    marks[report.entry] = "#ff8787"
    return text + rows_html(rows, len(keep), marks)


_install()

"""Seeing the tape: tables of its entries, torchviz-style drawings of the graph, and the
reverse sweep step by step.

- ``table(tape, op=None, output=None)``: the entries as a table (``print(tape)`` and a
  tape in a notebook show the same); ``Tape.to_pandas()`` with pandas;
- ``make_dot(loss, params=...)`` / ``to_dot`` / ``show``: the graph behind a tensor;
- ``trace_backward(loss)``: what each swept node received and sent, as a table and as
  frames (a slider with ipywidgets).
"""
from .backward_trace import BackwardTrace, Frames, trace_backward
from .drawing import Drawing, make_dot, show, to_dot
from .tape_table import TapeTable, depends, entry_dtypes, rows_html, rows_text, tape_rows, to_pandas


def table(tape, op=None, output=None, limit=200):
    """The entries of ``tape`` as a table: all, those of op name ``op`` and/or those the
    tensor ``output`` depends on (its sub-graph), the first ``limit`` shown."""
    return TapeTable(tape, op=op, output=output, limit=limit)


__all__ = ["BackwardTrace", "Drawing", "Frames", "TapeTable", "depends", "entry_dtypes",
           "make_dot", "rows_html", "rows_text", "show", "table", "tape_rows", "to_dot",
           "to_pandas", "trace_backward"]

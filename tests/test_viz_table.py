"""Tape tables: rows, columns, dtypes, filters, text / HTML / pandas."""
import pytest

import tapegrad as tg
from tapegrad import viz


def seed_example():
    """The seed write-ups' first example: z = x * 3 + 5."""
    x = tg.tensor([2.0], requires_grad=True)
    with tg.Tape() as t:
        y = x * 3
        z = y + 5
    return x, y, z, t


def test_rows_of_the_seed_example():
    _, _, _, t = seed_example()
    rows = t.rows()
    assert list(rows[0]) == ["index", "op", "node", "inputs", "output", "shape", "dtype",
                             "value", "source"]
    assert [r["op"] for r in rows] == ["leaf", "mul", "add"]
    assert [r["node"] for r in rows] == ["AccumulateGrad", "MulBackward0", "AddBackward0"]
    assert [r["inputs"] for r in rows] == [[], [0, 3.0], [1, 5.0]]   # constants inline
    assert [r["output"] for r in rows] == [0, 1, 2]
    assert [r["shape"] for r in rows] == [(1,)] * 3
    assert [r["dtype"] for r in rows] == ["float64"] * 3
    assert [r["value"] for r in rows] == ["[2.]", "[6.]", "[11.]"]
    assert [r["source"] for r in rows] == [""] * 3                   # only in anomaly mode


def test_number_on_the_left_keeps_its_place():
    x = tg.tensor([2.0], requires_grad=True)
    with tg.Tape() as t:
        3 - x
    assert t.rows()[-1]["inputs"] == [3.0, 0]


def test_filters_by_op_and_by_subgraph():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    w = tg.tensor([0.5, -1.0], requires_grad=True)
    with tg.Tape() as t:
        a = x * 2
        b = (w * w).sum()           # not something ``c`` depends on
        c = (a + 1).sum()
    muls = t.rows(op="mul")
    assert [r["index"] for r in muls] == [a._i, b._i - 1]
    assert [r["inputs"] for r in muls] == [[0, 2.0], [b._i - 2, b._i - 2]]   # w * w
    sub = t.rows(output=c)
    assert {r["index"] for r in sub} == viz.depends(t, c._i)
    assert [r["op"] for r in sub] == ["leaf", "mul", "add", "sum"]
    assert b._i not in {r["index"] for r in sub}
    assert [r["index"] for r in t.rows(op="sum", output=c)] == [c._i]
    with pytest.raises(ValueError, match="not recorded on this tape"):
        t.rows(output=(x * 1))


def test_html_has_one_row_per_entry_and_text_all_columns():
    _, y, _, t = seed_example()
    html = t._repr_html_()
    assert html.count("<tr>") == 1 + len(t)          # the header and one row per entry
    assert html.count("<th>") == 9
    text = repr(t)
    assert text.splitlines()[1].split() == ["index", "op", "node", "inputs", "output",
                                            "shape", "dtype", "value"]
    assert "MulBackward0" in text
    sliced = viz.table(t, output=y)
    assert len(sliced) == 2 and sliced._repr_html_().count("<tr>") == 3
    assert "2 of 3 entries" in repr(sliced)


def test_long_tapes_show_a_limited_table():
    x = tg.tensor(1.0, requires_grad=True)
    with tg.Tape() as t:
        y = x
        for _ in range(500):
            y = y * 1.5
    table = viz.table(t, limit=10)
    assert len(table) == 10 and "491 more entries" in repr(table)
    assert "481 more entries" in repr(t)                  # print(tape) shows 20 rows
    assert viz.table(t, op="mul", limit=None).total == 500


def test_source_lines_in_anomaly_mode():
    x = tg.tensor([2.0], requires_grad=True)
    with tg.autograd.detect_anomaly():
        with tg.Tape() as t:
            (x * 2).sum()
    assert "test_viz_table.py:" in t.rows()[-1]["source"]
    assert "source" in repr(t).splitlines()[1]


def test_dtypes_match_the_tensors():
    """The tape keeps no dtype: the table's is derived and must match every tensor's."""
    f32 = tg.tensor([1.1, -2.3, 3.7], dtype=tg.float32, requires_grad=True)
    f64 = tg.tensor([0.1, 0.2, 0.3], requires_grad=True)
    with tg.Tape() as t:
        results = [
            f32 * 2.5,                                   # a Python number keeps float32
            f32 * tg.tensor(0.1),                        # a 0-d float64 tensor too
            f32 + tg.tensor([1, 2, 3]),                  # an int64 constant too
            f32 * f64,                                   # float64 wins
            (f32 * 3).exp().sum(),
            f32.double() * 1.1,                          # to(): the values decide
            f64.float() * 0.3,
            tg.cat([f32, f32]),
            tg.where(f64 > 0.15, f32, f32 * 2),
        ]
    kinds = viz.entry_dtypes(t, t.next - 1)
    for r in results:
        assert kinds[r._i] is r.dtype, (r.grad_fn.name(), kinds[r._i], r.dtype)
    assert {row["dtype"] for row in t.rows()} == {"float32", "float64", "int64"}


def test_dtype_is_unknown_where_the_values_do_not_decide():
    x = tg.tensor([0.5, 2.0], requires_grad=True)
    with tg.Tape() as t:
        h = x.half()           # 0.5 and 2.0 are float16 and float32 values alike
        y = h * 2
    kinds = viz.entry_dtypes(t, y._i)
    assert kinds[h._i] is None and kinds[y._i] is None
    assert t.rows(output=y)[-1]["dtype"] == "?"


def test_to_pandas_when_installed():
    _, _, _, t = seed_example()
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError):
            t.to_pandas()
        return
    frame = t.to_pandas()
    assert list(frame["node"]) == ["AccumulateGrad", "MulBackward0", "AddBackward0"]


def test_a_consumed_tape_still_shows_its_structure():
    x = tg.tensor([2.0], dtype=tg.float32, requires_grad=True)
    with tg.Tape() as t:
        z = (x * 3).exp().sum()
    z.backward()                                   # frees the values
    rows = t.rows()
    assert [r["value"] for r in rows] == ["(freed)"] * 4
    assert [r["dtype"] for r in rows] == ["float32"] * 4
    assert [r["node"] for r in rows][1:] == ["MulBackward0", "ExpBackward0", "SumBackward0"]

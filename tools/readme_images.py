"""The README's pictures: ``python -m tools.readme_images`` writes docs/graph.svg (a
drawing by tapegrad.viz, rendered by Graphviz's ``dot`` program) and docs/tape.svg (the
tape of the same example as a table)."""
import html
from pathlib import Path

import numpy as np

import tapegrad as torch
from tapegrad import viz
from tapegrad.viz.tape_table import COLUMNS, cell

DOCS = Path(__file__).resolve().parent.parent / "docs"
CHAR_W, ROW_H, PAD = 7.2, 20, 8      # 12px monospace


def example():
    """A neuron: tanh(w . x + b), its parameters named."""
    w = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    b = torch.tensor(0.1, requires_grad=True)
    x = torch.tensor(np.array([1.0, 2.0, 3.0]))
    with torch.Tape() as tape:
        out = ((w * x).sum() + b).tanh()
    return tape, out, {"w": w, "b": b}


def table_svg(rows):
    """A table of tape rows as SVG text (no fonts or tools needed to make it)."""
    cols = [c for c in COLUMNS if any(cell(r[c]) for r in rows)]
    cells = [[c for c in cols]] + [[cell(r[c]) for c in cols] for r in rows]
    widths = [max(len(row[k]) for row in cells) * CHAR_W + 2 * PAD for k in range(len(cols))]
    xs = np.concatenate([[0], np.cumsum(widths)])
    width, height = xs[-1], ROW_H * len(cells)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height}" '
           f'font-family="monospace" font-size="12">',
           f'<rect width="{width:.0f}" height="{height}" fill="white"/>']
    for r, row in enumerate(cells):
        fill = "#dde4ee" if r == 0 else ("#f4f6f9" if r % 2 == 0 else "white")
        out.append(f'<rect y="{r * ROW_H}" width="{width:.0f}" height="{ROW_H}" fill="{fill}"/>')
        weight = ' font-weight="bold"' if r == 0 else ""
        for k, text in enumerate(row):
            out.append(f'<text x="{xs[k] + PAD:.0f}" y="{r * ROW_H + 14}"{weight}>'
                       f'{html.escape(text)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    DOCS.mkdir(exist_ok=True)
    tape, out, params = example()
    (DOCS / "tape.svg").write_text(table_svg(tape.rows()))
    (DOCS / "graph.svg").write_text(viz.show(out, params=params, show_attrs=True).svg())
    print("wrote", DOCS / "tape.svg", "and", DOCS / "graph.svg")


if __name__ == "__main__":
    main()

"""Backward, step by step: ``trace_backward(loss)`` runs the reverse sweep one entry at
a time and records, for each swept entry in order, the gradient that arrived and what it
sent to each input (what the inputs' gradient buffers summed, PyTorch's InputBuffer),
then what AccumulateGrad would write into each leaf's ``.grad``.

``BackwardTrace`` shows as a table; ``show()`` gives the frames (the state of every
gradient buffer after each step) behind an ipywidgets slider when ipywidgets is
installed, or all of them one after another otherwise.
"""
import html

import numpy as np

from .tape_table import node_name, short


def _short(a):
    return short(a, 24)


def _table_html(cols, rows, mark=None):
    """An HTML table; the row with index ``mark`` is highlighted."""
    head = "".join(f"<th>{c}</th>" for c in cols)
    body = "".join(("<tr style='background:#ffe9a8'>" if k == mark else "<tr>")
                   + "".join(f"<td>{html.escape(str(r[c]))}</td>" for c in cols) + "</tr>"
                   for k, r in enumerate(rows))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _table_text(cols, rows):
    cells = [[str(r[c]) for c in cols] for r in rows]
    widths = [max([len(c)] + [len(row[k]) for row in cells]) for k, c in enumerate(cols)]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip()
                     for row in [list(cols)] + cells)


class BackwardTrace:
    """The frames of one reverse sweep, in order.  Each frame is a dict: ``step``,
    ``entry`` (tape index), ``node``, ``incoming`` (the gradient that arrived) and
    ``sent`` ([(input buffer, its label, what was added to it)]); the last frames are
    AccumulateGrad's, whose ``incoming`` is what it adds into the leaf's ``.grad``."""

    COLUMNS = ("step", "entry", "node", "incoming", "sends")
    _STATE_COLUMNS = ("buffer", "gradient so far", "state")

    def __init__(self, frames, seeds):
        self.frames = frames
        self.seeds = seeds            # {entry: (its label, the seed gradient)}

    def rows(self):
        return [{"step": f["step"], "entry": f["entry"], "node": f["node"],
                 "incoming": _short(f["incoming"]),
                 "sends": "; ".join(f"{to} += {_short(d)}" for _, to, d in f["sent"])}
                for f in self.frames]

    def __repr__(self):
        return _table_text(self.COLUMNS, self.rows())

    def _repr_html_(self):
        return _table_html(self.COLUMNS, self.rows())

    # -- frames: the state of the gradient buffers after each step -----------------------
    def state(self, step):
        """Rows (buffer, gradient so far, state) after frame ``step``: each buffer that
        received a gradient so far, and whether its node was swept, is being swept now
        or is still waiting for inputs from nodes above it."""
        sums = {e: seed for e, (_, seed) in self.seeds.items()}
        labels = {e: label for e, (label, _) in self.seeds.items()}
        swept = {f["entry"]: f["step"] for f in self.frames[:step + 1]}
        for f in self.frames[:step + 1]:
            for b, label, delta in f["sent"]:
                sums[b] = sums[b] + delta if b in sums else delta
                labels[b] = label
        rows = []
        for b, g in sums.items():
            at = swept.get(b)
            if labels[b].startswith("const"):
                state = "dropped (a constant)"
            else:
                state = "waiting" if at is None else ("now" if at == step else "done")
            if labels[b].startswith("AccumulateGrad") and at is not None:
                state += ": added into .grad"
            rows.append({"buffer": labels[b], "gradient so far": _short(g), "state": state})
        return rows

    def frame_text(self, step):
        return self._caption(step) + "\n" + _table_text(self._STATE_COLUMNS, self.state(step))

    def frame_html(self, step):
        rows = self.state(step)
        mark = next((k for k, r in enumerate(rows) if r["state"].startswith("now")), None)
        return (f"<p><b>{html.escape(self._caption(step))}</b></p>"
                + _table_html(self._STATE_COLUMNS, rows, mark))

    def _caption(self, step):
        f = self.frames[step]
        head = f"step {step + 1}/{len(self.frames)}: {f['node']} (entry {f['entry']}) " \
               f"received {_short(f['incoming'])}"
        if f["node"] == "AccumulateGrad":
            return head + " and adds it into the leaf's .grad"
        return head + "".join(f"; sends {to} += {_short(d)}" for _, to, d in f["sent"])

    def show(self, widget=None):
        """The frames behind a slider (``widget=True``; the default when ipywidgets is
        installed), or all of them one after another (``widget=False``)."""
        if widget is None:
            try:
                import ipywidgets  # noqa: F401
                widget = True
            except ImportError:
                widget = False
        if not widget:
            return Frames(self)
        import ipywidgets as w
        slider = w.IntSlider(value=0, min=0, max=len(self.frames) - 1, description="step")
        view = w.HTML(self.frame_html(0))
        slider.observe(lambda change: setattr(view, "value", self.frame_html(change["new"])),
                       names="value")
        return w.VBox([slider, view])


class Frames:
    """Every frame of a ``BackwardTrace``, one after another (no widgets needed)."""

    def __init__(self, trace):
        self.trace = trace

    def __len__(self):
        return len(self.trace.frames)

    def __repr__(self):
        return "\n\n".join(self.trace.frame_text(k) for k in range(len(self)))

    def _repr_html_(self):
        return "".join(self.trace.frame_html(k) for k in range(len(self)))


def trace_backward(output, gradient=None):
    """Run the reverse sweep from ``output`` one entry at a time and record every step.
    The graph is kept and no ``.grad`` is touched: call ``backward()`` afterwards."""
    from ..autograd import entry_points
    frames = []

    def observe(t, i, incoming, sent):
        frames.append({"step": len(frames), "entry": i, "node": node_name(t, i),
                       "incoming": incoming.reshape(t.shape(i)),
                       "sent": [(b, f"{node_name(t, b) or 'const'}#{b}",
                                 d.reshape(t.shape(b))) for b, d in sent]})

    seeds = entry_points._seeds((output,), None if gradient is None else (gradient,))
    deliveries, _ = entry_points.sweep((output,), seeds, True, observe=observe)
    uid = None if output._t is None else output._t.uid
    for leaf, g in deliveries:
        frames.append({"step": len(frames), "entry": leaf._i if leaf._tid == uid else -1,
                       "node": "AccumulateGrad", "incoming": np.array(g), "sent": []})
    t, e = output._t, output._i
    label = f"{node_name(t, e)}#{e} (output)" if t is not None else "output"
    return BackwardTrace(frames, {e: (label, seeds[0].reshape(output.shape))})

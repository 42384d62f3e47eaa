"""PNG plots (matplotlib, optional): per workload, time vs problem size per framework on
log axes next to the speed-up over PyTorch (torch's time / this time, same run); workloads
whose sizes are labels (first_gradient) get grouped bars instead."""
from __future__ import annotations

import io
from pathlib import Path

from .frameworks import DESCRIPTIONS

DPI = 100
SIZE = (10, 3.8)


def _ok(rows, wl):
    return [r for r in rows if r["workload"] == wl and r["status"] == "ok"]


def _series(rows):
    """{(framework, dtype): [(x, row), ...] sorted by x}, for rows with a numeric size."""
    out = {}
    for r in rows:
        if r["x"] is not None:
            out.setdefault((r["framework"], r["dtype"]), []).append((r["x"], r))
    return {k: sorted(v, key=lambda p: p[0]) for k, v in out.items()}


def _color(fw):
    """The same colour for a framework in every plot: tab10 in DESCRIPTIONS order, then greys."""
    names = list(DESCRIPTIONS)
    i = names.index(fw) if fw in names else len(names)
    return f"C{i}" if i < 10 else ("black", "grey", "silver")[min(i - 10, 2)]


def _label(fw, dtype, dtypes):
    return fw if len(dtypes) == 1 else f"{fw} ({dtype})"


def _size_plot(plt, wl, rows, xlabel):
    series = _series(rows)
    dtypes = sorted({dt for _, dt in series})
    fig, (ax_t, ax_s) = plt.subplots(1, 2, figsize=SIZE)
    torch = {(x, r["dtype"]): r["median_s"] for (fw, _), pts in series.items() if fw == "torch"
             for x, r in pts}
    for (fw, dt), pts in sorted(series.items()):
        style = dict(marker="o", ms=4, color=_color(fw), ls="--" if dt == "float32" else "-",
                     label=_label(fw, dt, dtypes))
        xs = [x for x, _ in pts]
        ax_t.plot(xs, [r["median_s"] for _, r in pts], **style)
        speed = [(x, torch[(x, dt)] / r["median_s"]) for x, r in pts if (x, dt) in torch]
        if speed and fw != "torch":
            ax_s.plot(*zip(*speed), **style)
    ax_t.set(xscale="log", yscale="log", xlabel=xlabel, ylabel="seconds per run (median)",
             title=f"{wl}: time")
    ax_s.set(xscale="log", yscale="log", xlabel=xlabel, ylabel="torch time / time",
             title=f"{wl}: speed-up over PyTorch (1 thread)")
    ax_s.axhline(1.0, color="grey", lw=0.8)
    for ax in (ax_t, ax_s):
        ax.grid(True, which="major", alpha=0.3)
    ax_t.legend(fontsize=7, ncol=2)
    return fig


def _label_plot(plt, wl, rows):
    """Grouped horizontal bars: one group per size label, one bar per framework."""
    labels = list(dict.fromkeys(r["size"] for r in rows))
    fws = list(dict.fromkeys(r["framework"] for r in rows))
    fig, ax = plt.subplots(figsize=(SIZE[0] / 2, SIZE[1]))
    height = 0.8 / max(len(fws), 1)
    for i, fw in enumerate(fws):
        med = {r["size"]: r["median_s"] for r in rows if r["framework"] == fw}
        ys = [j + i * height for j, lab in enumerate(labels) if lab in med]
        ax.barh(ys, [med[lab] for lab in labels if lab in med], height, label=fw, color=_color(fw))
    ax.set_yticks([j + 0.4 - height / 2 for j in range(len(labels))], labels)
    ax.set(xlabel="seconds (median)", title=wl)
    ax.legend(fontsize=7)
    return fig


def _save_small(fig, path):
    """A 256-colour palette PNG: about a third of matplotlib's RGBA file."""
    from PIL import Image               # Pillow: a dependency of matplotlib
    buf = io.BytesIO()
    fig.savefig(buf, dpi=DPI)
    Image.open(buf).convert("RGB").quantize(256).save(path, optimize=True)


def write_plots(rows, workloads, outdir) -> list[Path]:
    """One PNG per workload with ok rows; [] (and no error) when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    paths = []
    for wl in workloads:
        ok = _ok(rows, wl.NAME)
        if not ok:
            continue
        fig = _size_plot(plt, wl.NAME, ok, wl.XLABEL) if wl.XLABEL else _label_plot(plt, wl.NAME, ok)
        fig.tight_layout()
        path = outdir / f"{wl.NAME}.png"
        _save_small(fig, path)
        plt.close(fig)
        paths.append(path)
    return paths

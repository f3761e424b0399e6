"""The shared plot style of the notebooks: figures a reader can read at a glance.

Every notebook draws with matplotlib and then calls a few of these helpers, so all of them
look alike and avoid the usual traps: engine names overlapping on an x axis, a legend on
top of the data, a log axis over less than a decade (ticks like ``9x10^-1``), a linear axis
that squashes everything beside a 70x outlier, a reference line outside the y-range that
shows in the legend but not on the plot, point labels running into the title.

>>> from lob.studies import plots
>>> fig, ax = plots.subplots()                       # the style applied, constrained layout
>>> frame.plot.bar(ax=ax)                            # any matplotlib/pandas drawing
>>> plots.category_axis(ax)                          # engine names rotated/wrapped to fit
>>> plots.value_axis(ax, frame.to_numpy())           # log only if the data span > a decade
>>> plots.reference(ax, 42.0, "seed 000 (Rust)")     # y-range extended so the line shows
>>> plots.legend_outside(ax)                         # legend right of the axes
>>> plots.label_points(ax, xs, ys, ["called", "noise"])  # labels kept inside, under the title
>>> assert not plots.overlaps(fig)                   # no two texts collide

Or, for the common "one value per engine (and workload)" chart, all of the above at once:

>>> fig, ax = plots.subplots()
>>> plots.bars(ax, frame, ylabel="ns/op", title="cost per op", refs={"seed 000": 42.0})

Values with intervals (or any values a log axis would draw as bars from an arbitrary floor)
go in a dot plot instead: a dot per value, its interval as a line through it, so no length is
drawn that means nothing:

>>> plots.dots(ax, frame, low=lo_frame, high=hi_frame, ylabel="commands/s")

Save with :func:`lob.studies.nb.save_figure` (``bbox_inches="tight"`` keeps an outside
legend in the PNG). Do not call ``fig.tight_layout()`` on a figure from :func:`subplots`:
it already uses matplotlib's constrained layout, which keeps titles, labels and outside
legends apart.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Iterable, Sequence

import numpy as np

__all__ = ["STYLE", "bars", "category_axis", "dots", "label_points", "legend_outside", "overlaps",
           "reference", "span_decades", "subplots", "use", "value_axis"]

STYLE = {
    "figure.dpi": 100,
    "savefig.dpi": 110,
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.titlepad": 8,
    "axes.labelsize": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.grid.axis": "y",
    "grid.alpha": 0.3,
    "legend.frameon": False,
    "legend.fontsize": 9,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
}
DECADE = 10.0  # a log axis only when max/min of the (positive) data exceeds this


def use() -> None:
    """Apply :data:`STYLE` to matplotlib's rcParams (idempotent)."""
    import matplotlib as mpl

    mpl.rcParams.update(STYLE)


def subplots(nrows: int = 1, ncols: int = 1, *, panel: tuple[float, float] = (5.5, 3.6),
             **kwargs):
    """``plt.subplots`` with the style applied, constrained layout and a size per panel.

    ``panel``: (width, height) in inches of one panel; ``figsize`` in ``kwargs`` wins.
    Returns ``(fig, axes)`` exactly as ``plt.subplots`` does (``squeeze`` applies).
    """
    import matplotlib.pyplot as plt

    use()
    kwargs.setdefault("figsize", (panel[0] * ncols, panel[1] * nrows))
    kwargs.setdefault("layout", "constrained")
    return plt.subplots(nrows, ncols, **kwargs)


# --- axes ----------------------------------------------------------------------------------

def _renderer(fig):
    """Lay the figure out (positions, constrained layout, text extents) without rasterizing
    it - a full Agg draw costs ~3x more - and return the renderer that measured it."""
    fig.draw_without_rendering()
    return fig.canvas.get_renderer()


def _shown_ticklabels(ax, axis: str) -> list:
    """Tick labels matplotlib actually draws: visible, non-empty, inside the view limits."""
    a = ax.xaxis if axis == "x" else ax.yaxis
    lo, hi = sorted(a.get_view_interval())
    tol = 1e-9 * max(abs(lo), abs(hi), 1.0)
    out = []
    for t in a.get_ticklabels(which="both"):
        pos = t.get_position()[0 if axis == "x" else 1]
        if t.get_visible() and t.get_text() and lo - tol <= pos <= hi + tol:
            out.append(t)
    return out


def _tick_labels_overlap(ax, axis: str, pad: float = 2.0, renderer=None) -> bool:
    """Do neighbouring tick labels of ``axis`` collide (rotation taken into account)?

    Rotated labels are parallel slanted strips: two neighbours ``d`` pixels apart are clear
    when ``d * sin(angle)`` is at least the text height. ``renderer``: one from a draw of
    the figure as it stands (else the figure is drawn: a draw is most of the cost).
    """
    r = renderer or _renderer(ax.figure)
    labels = _shown_ticklabels(ax, axis)
    if len(labels) < 2:
        return False
    boxes = [(t, t.get_window_extent(r)) for t in labels]
    key = (lambda tb: tb[1].x0) if axis == "x" else (lambda tb: tb[1].y0)
    boxes.sort(key=key)
    for (ta, a), (tb, b) in zip(boxes, boxes[1:], strict=False):
        rot = ta.get_rotation() % 180
        if axis == "x" and rot:
            d = abs((b.x0 + b.x1) - (a.x0 + a.x1)) / 2 if rot == 90 else abs(b.x1 - a.x1)
            lines = max(ta.get_text().count("\n"), tb.get_text().count("\n")) + 1
            h = ta.get_fontsize() * ax.figure.dpi / 72 * 1.2 * lines
            if d * math.sin(math.radians(rot)) < h + pad / 2:
                return True
        elif (axis == "x" and a.x1 + pad > b.x0) or (axis == "y" and a.y1 + pad > b.y0):
            return True
    return False


def _wrap(label: str, width: int) -> str:
    # break engine names at their natural joints: "v0+pool@numba" -> "v0+pool\n@numba"
    if len(label) <= width:
        return label
    spaced = label.replace("+", " +").replace("@", " @").replace("_", "_ ")
    lines = textwrap.wrap(spaced, width, break_long_words=True, break_on_hyphens=True)
    return "\n".join(line.replace(" +", "+").replace(" @", "@").replace("_ ", "_")
                     for line in lines)


def category_axis(ax, labels: Sequence[str] | None = None, axis: str = "x",
                  wrap: int = 10) -> str:
    """Make the category tick labels of ``axis`` readable; return what was done.

    ``labels`` replaces the current tick texts (positions kept). When neighbours collide
    they are wrapped at ``+``/``@``/``_`` and spaces to ``wrap`` characters a line
    ("v0+pool@numba" -> "v0+pool" over "@numba"); if that is not enough (x axis) the
    unwrapped labels are rotated by the smallest of 30, 45 and 90 degrees that clears them,
    right-aligned so each ends under its tick. Returns ``"plain"``, ``"wrapped"`` or
    ``"rotated"``.
    """
    a = ax.xaxis if axis == "x" else ax.yaxis
    ticks = list(a.get_ticklocs())
    texts = list(labels) if labels is not None else [t.get_text() for t in a.get_ticklabels()]
    ticks = ticks[:len(texts)]
    setter = ax.set_xticks if axis == "x" else ax.set_yticks
    ha = "center" if axis == "x" else "right"
    setter(ticks, texts, rotation=0, ha=ha)
    if not _tick_labels_overlap(ax, axis):
        return "plain"
    setter(ticks, [_wrap(t, wrap) for t in texts], rotation=0, ha=ha)
    if axis == "y" or not _tick_labels_overlap(ax, axis):
        return "wrapped"
    for rot in (30, 45, 90):
        setter(ticks, texts, rotation=rot, ha="right" if rot < 90 else "center",
               rotation_mode="anchor" if rot < 90 else "default")
        if not _tick_labels_overlap(ax, axis):
            break
    return "rotated"


def span_decades(values) -> float:
    """log10(max/min) of the positive finite values (0.0 when fewer than two)."""
    v = np.asarray(values, dtype=float).ravel()
    v = v[np.isfinite(v) & (v > 0)]
    if len(v) < 2:
        return 0.0
    return float(math.log10(v.max() / v.min()))


def _si(x: float, _pos=None) -> str:
    """Tick text without exponents: 0.5, 2, 300, 4k, 50k, 6M, 7G."""
    if x == 0:
        return "0"
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:g}{suffix}"
    return f"{x:g}"


def value_axis(ax, values=None, axis: str = "y", decade: float = DECADE) -> str:
    """Log scale on ``axis`` only when ``values`` span more than a factor ``decade``.

    ``values``: the plotted numbers (default: the data limits of the axis). Non-positive
    values force a linear axis. A log axis gets plain tick texts (``300``, ``4k``, ``2M``,
    never ``9x10^-1``), with labelled minor ticks when it covers less than two decades.
    Returns ``"log"`` or ``"linear"``.
    """
    from matplotlib import ticker

    if values is None:
        lim = ax.dataLim
        values = [lim.y0, lim.y1] if axis == "y" else [lim.x0, lim.x1]
    v = np.asarray(values, dtype=float).ravel()
    v = v[np.isfinite(v)]
    log = len(v) >= 2 and (v > 0).all() and v.max() / v.min() > decade
    set_scale = ax.set_yscale if axis == "y" else ax.set_xscale
    a = ax.yaxis if axis == "y" else ax.xaxis
    if not log:
        set_scale("linear")
        a.set_major_formatter(ticker.FuncFormatter(_si))
        return "linear"
    set_scale("log")
    a.set_major_locator(ticker.LogLocator(base=10))
    a.set_major_formatter(ticker.FuncFormatter(_si))
    if span_decades(v) < 2:  # few majors: label 2x and 5x too
        a.set_minor_locator(ticker.LogLocator(base=10, subs=(2.0, 5.0)))
        a.set_minor_formatter(ticker.FuncFormatter(_si))
    else:
        a.set_minor_formatter(ticker.NullFormatter())
    return "log"


def reference(ax, value: float, label: str | None = None, axis: str = "y", *,
              extend: bool = True, **style):
    """A reference line at ``value`` that is visible whenever it is drawn.

    Inside the current range it is drawn as is. Outside, ``extend=True`` widens the range
    to include it (with a small margin), ``extend=False`` leaves it out (returns None, so it
    never shows in a legend without showing on the plot). A non-positive or non-finite
    value on a log axis is left out. Returns the Line2D or None.
    """
    if value is None or not np.isfinite(value):
        return None
    log = (ax.get_yscale() if axis == "y" else ax.get_xscale()) == "log"
    if log and value <= 0:
        return None
    get_lim = ax.get_ylim if axis == "y" else ax.get_xlim
    set_lim = ax.set_ylim if axis == "y" else ax.set_xlim
    lo, hi = sorted(get_lim())
    if not lo <= value <= hi:
        if not extend:
            return None
        if log:
            lo2, hi2 = min(lo, value / 1.3), max(hi, value * 1.3)
        else:
            pad = 0.05 * (max(hi, value) - min(lo, value))
            lo2 = min(lo, value - pad) if value < lo else lo
            hi2 = max(hi, value + pad) if value > hi else hi
        set_lim(lo2, hi2)
    style = {"color": "k", "ls": "--", "lw": 0.9, **style}
    draw = ax.axhline if axis == "y" else ax.axvline
    return draw(value, label=label, **style)


def legend_outside(target, *, title: str | None = None, **kwargs):
    """A legend right of the axes (or of the figure), never over the data.

    ``target``: an Axes (its own handles) or a Figure (the unique handles of all its axes,
    one legend for the figure). Returns the Legend, or None when nothing is labelled.
    """
    from matplotlib.figure import Figure

    if isinstance(target, Figure):
        seen: dict[str, object] = {}
        for ax in target.axes:
            for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
                seen.setdefault(lab, h)
            if ax.get_legend():
                ax.get_legend().remove()
        if not seen:
            return None
        loc = "outside right upper" if target.get_layout_engine() is not None else "center left"
        kw = {} if loc.startswith("outside") else {"bbox_to_anchor": (1.0, 0.5)}
        return target.legend(list(seen.values()), list(seen), loc=loc, title=title,
                             **kw, **kwargs)
    handles, labels = target.get_legend_handles_labels()
    if not handles:
        return None
    return target.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                         borderaxespad=0.0, title=title, **kwargs)


def label_points(ax, xs: Iterable[float], ys: Iterable[float], texts: Iterable[str], *,
                 offset: tuple[float, float] = (0, 6), **kwargs) -> list:
    """Text labels just above points, kept inside the axes (so never on the title).

    Each label is an annotation ``offset`` points from its point; after placing them the
    y range grows until every label lies inside the axes box. Returns the annotations.
    """
    out = [ax.annotate(t, (x, y), xytext=offset, textcoords="offset points", ha="center",
                       va="bottom", fontsize=kwargs.pop("fontsize", 8), **kwargs)
           for x, y, t in zip(xs, ys, texts, strict=True)]
    if not out:
        return out
    fig = ax.figure
    for _ in range(6):  # grow the top until the labels fit (a few steps converge)
        r = _renderer(fig)
        box = ax.get_window_extent(r)
        top = max(a.get_window_extent(r).y1 for a in out)
        if top <= box.y1 - 1:
            break
        lo, hi = ax.get_ylim()
        frac = (top - box.y1 + 4) / max(box.height, 1.0)
        if ax.get_yscale() == "log":
            ax.set_ylim(lo, hi * 10 ** (frac * math.log10(hi / lo) * 1.5))
        else:
            ax.set_ylim(lo, hi + frac * (hi - lo) * 1.5)
    return out


def bars(ax, frame, *, ylabel: str = "", title: str = "", refs: dict | None = None,
         legend_title: str | None = None, decade: float = DECADE):
    """Grouped bars of a frame (index: categories, e.g. engines; columns: series).

    Applies :func:`category_axis`, :func:`value_axis` (log only beyond a decade; bars on a
    log axis start at the smallest value's decade), the ``refs`` lines (label -> value, via
    :func:`reference`) and :func:`legend_outside` when there is more than one series or a
    reference. A Series is drawn as one series without a legend.
    """
    import pandas as pd

    if isinstance(frame, pd.Series):
        frame = frame.to_frame()
    frame.plot.bar(ax=ax, rot=0, legend=False, width=0.8)
    ax.set(ylabel=ylabel, title=title, xlabel="")
    vals = frame.to_numpy(dtype=float)
    if value_axis(ax, vals, decade=decade) == "log":
        pos = vals[np.isfinite(vals) & (vals > 0)]
        ax.set_ylim(10 ** math.floor(math.log10(pos.min())), pos.max() * 1.5)
    category_axis(ax, [str(i) for i in frame.index])
    styles = iter(({"color": "k", "ls": "--"}, {"color": "C3", "ls": ":"},
                   {"color": "C2", "ls": "-."}, {"color": "grey", "ls": "--"}))
    for lab, v in (refs or {}).items():
        reference(ax, v, lab, **next(styles, {}))
    if frame.shape[1] > 1 or refs:
        legend_outside(ax, title=legend_title)
    return ax


def dots(ax, frame, low=None, high=None, *, ylabel: str = "", title: str = "",
         refs: dict | None = None, legend_title: str | None = None, decade: float = DECADE,
         hollow=None, markers: Sequence[str] = ("o", "s", "D", "^", "v")):
    """A dot plot of a frame (index: categories; columns: series), each dot with its interval.

    The dot-plot twin of :func:`bars`: a dot per value, the series of a category side by
    side, and where ``low``/``high`` (frames or Series of the same shape; NaN: no interval)
    give an interval, a line with caps from ``low`` to ``high``. No bar rises from a floor,
    so a log axis (:func:`value_axis`, over the values and the interval ends) draws no
    length that means nothing. ``hollow``: a boolean frame of the same shape; True draws the
    dot hollow (e.g. a value the method could not establish). Series take the markers in
    order. Applies :func:`category_axis`, the ``refs`` lines and :func:`legend_outside` when
    there is more than one series or a reference.
    """
    import pandas as pd

    def frame_of(x):
        if x is None:
            return pd.DataFrame(np.nan, index=frame.index, columns=frame.columns)
        x = x.to_frame() if isinstance(x, pd.Series) else x
        return x.reindex(index=frame.index).set_axis(frame.columns, axis=1)

    if isinstance(frame, pd.Series):
        frame = frame.to_frame()
    lo, hi = frame_of(low).astype(float), frame_of(high).astype(float)
    hol = frame_of(hollow).eq(True)  # a missing flag (NaN) is not hollow
    n = frame.shape[1]
    width = 0.6 if n > 1 else 0.0
    xs = np.arange(len(frame), dtype=float)
    for j, col in enumerate(frame.columns):
        x = xs + (j - (n - 1) / 2) * (width / max(n - 1, 1))
        y = frame[col].to_numpy(dtype=float)
        color = f"C{j}"
        have = np.isfinite(lo[col].to_numpy()) & np.isfinite(hi[col].to_numpy())
        if have.any():
            ax.errorbar(x[have], y[have], yerr=[y[have] - lo[col].to_numpy()[have],
                                                hi[col].to_numpy()[have] - y[have]],
                        fmt="none", ecolor=color, capsize=3, lw=1.2)
        mk = markers[j % len(markers)]
        h = hol[col].to_numpy()
        ax.plot(x[~h], y[~h], mk, color=color, ms=6, zorder=3, label=str(col))
        if h.any():
            ax.plot(x[h], y[h], mk, color=color, mfc="none", ms=6, zorder=3)
    ax.set(ylabel=ylabel, title=title, xlabel="")
    ax.set_xticks(xs)
    ax.set_xlim(-0.6, len(xs) - 0.4)
    value_axis(ax, [*frame.to_numpy(dtype=float).ravel(), *lo.to_numpy().ravel(),
                    *hi.to_numpy().ravel()], decade=decade)
    category_axis(ax, [str(i) for i in frame.index])
    styles = iter(({"color": "k", "ls": "--"}, {"color": "C3", "ls": ":"},
                   {"color": "C2", "ls": "-."}, {"color": "grey", "ls": "--"}))
    for lab, v in (refs or {}).items():
        reference(ax, v, lab, **next(styles, {}))
    if n > 1 or refs:
        legend_outside(ax, title=legend_title)
    return ax


# --- checks --------------------------------------------------------------------------------

def _texts(fig, r):
    """(description, bbox) of every visible text a reader sees in ``fig``."""
    out = []
    for i, ax in enumerate(fig.axes):
        if not ax.get_visible() or not ax.axison:
            continue
        for which, t in (("title", ax.title), ("title", ax._left_title),
                         ("title", ax._right_title), ("xlabel", ax.xaxis.label),
                         ("ylabel", ax.yaxis.label)):
            if t.get_visible() and t.get_text():
                out.append((f"axes {i} {which} {t.get_text()!r}", t.get_window_extent(r)))
        for axis_name in ("x", "y"):
            for t in _shown_ticklabels(ax, axis_name):
                out.append((f"axes {i} {axis_name}tick {t.get_text()!r}",
                            t.get_window_extent(r)))
        for t in ax.texts:
            if t.get_visible() and t.get_text():
                out.append((f"axes {i} text {t.get_text()!r}", t.get_window_extent(r)))
        leg = ax.get_legend()
        if leg is not None and leg.get_visible():
            out.append((f"axes {i} legend", leg.get_window_extent(r)))
    if fig._suptitle is not None and fig._suptitle.get_text():
        out.append(("suptitle", fig._suptitle.get_window_extent(r)))
    for leg in fig.legends:
        out.append(("figure legend", leg.get_window_extent(r)))
    return out


def overlaps(fig, pad: float = 0.5) -> list[tuple[str, str]]:
    """Pairs of visible texts (titles, axis labels, tick labels, annotations, legends) of
    ``fig`` whose boxes overlap by more than ``pad`` pixels; empty when the figure reads
    cleanly. A legend is also reported when it covers a data point of its own axes."""
    r = _renderer(fig)
    items = _texts(fig, r)
    hits = []
    for i, (na, a) in enumerate(items):
        for nb_, b in items[i + 1:]:
            if _same_axes_ticks(na, nb_):  # neighbours: checked with rotation below
                continue
            if (min(a.x1, b.x1) - max(a.x0, b.x0) > pad
                    and min(a.y1, b.y1) - max(a.y0, b.y0) > pad):
                hits.append((na, nb_))
    for i, ax in enumerate(fig.axes):
        for axis_name in ("x", "y"):
            if ax.get_visible() and ax.axison and _tick_labels_overlap(ax, axis_name,
                                                                       renderer=r):
                hits.append((f"axes {i} {axis_name}tick labels", "each other"))
        leg = ax.get_legend()
        if leg is None or not leg.get_visible():
            continue
        box = leg.get_window_extent(r)
        pts = _data_points(ax)
        xy = ax.transData.transform(pts) if len(pts) else np.empty((0, 2))
        inside = ((xy[:, 0] > box.x0) & (xy[:, 0] < box.x1) & (xy[:, 1] > box.y0)
                  & (xy[:, 1] < box.y1))
        if inside.any():
            hits.append((f"axes {i} legend", f"axes {i} data"))
    return hits


def _same_axes_ticks(a: str, b: str) -> bool:
    # "axes 0 xtick 'v1'" and "axes 0 ytick '2'": tick labels of one axes; the x/y pair can
    # only meet at the corner, where matplotlib's own layout keeps them apart
    pa, pb = a.split(" ", 3), b.split(" ", 3)
    return pa[:2] == pb[:2] and pa[2].endswith("tick") and pb[2].endswith("tick")


def _data_points(ax) -> np.ndarray:
    pts = []
    for line in ax.get_lines():
        xy = np.asarray(line.get_xydata(), dtype=float)
        tr = line.get_transform()
        if tr != ax.transData:  # axhline/axvline live partly in axes coordinates
            continue
        pts.append(xy)
    for coll in ax.collections:
        off = np.asarray(coll.get_offsets(), dtype=float)
        if off.size:
            pts.append(off.reshape(-1, 2))
    for p in ax.patches:
        bb = p.get_bbox() if hasattr(p, "get_bbox") else None
        if bb is not None:
            pts.append(np.array([[bb.x0 + bb.width / 2, bb.y1]]))
    if not pts:
        return np.empty((0, 2))
    allp = np.vstack(pts)
    return allp[np.isfinite(allp).all(axis=1)]

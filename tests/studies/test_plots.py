"""lob.studies.plots: the shared style keeps figures readable (checked on synthetic data)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from lob.studies import plots  # noqa: E402

ENGINES = ["v0", "v0+pool", "v0+bitmap", "v1", "v2", "v3", "v0+pool@numba", "v1@numba",
           "v2@numba", "v3@numba", "v3v0+pool@numba"]


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def test_long_engine_names_do_not_overlap():
    fig, ax = plots.subplots(panel=(4.0, 3.0))
    ax.bar(range(len(ENGINES)), np.arange(1, len(ENGINES) + 1))
    ax.set_xticks(range(len(ENGINES)), ENGINES)
    assert plots._tick_labels_overlap(ax, "x")  # the trap is real at this width
    how = plots.category_axis(ax)
    assert how in ("rotated", "wrapped")
    assert not plots._tick_labels_overlap(ax, "x")
    assert not plots.overlaps(fig)


def test_few_short_names_stay_plain():
    fig, ax = plots.subplots()
    ax.bar(range(3), [1, 2, 3])
    assert plots.category_axis(ax, ["v0", "v1", "v2"]) == "plain"
    assert [t.get_text() for t in ax.get_xticklabels()][:3] == ["v0", "v1", "v2"]


@pytest.mark.parametrize("values, scale", [([0.9, 1.0, 1.2], "linear"),
                                           ([100, 900], "linear"),
                                           ([1.0, 70.0], "log"),      # a 70x outlier
                                           ([-1.0, 100.0], "linear"),  # not positive
                                           ([5.0], "linear")])
def test_log_axis_only_beyond_a_decade(values, scale):
    fig, ax = plots.subplots()
    ax.plot(range(len(values)), values, "o")
    assert plots.value_axis(ax, values) == scale
    assert ax.get_yscale() == scale


def test_log_ticks_have_no_exponents():
    fig, ax = plots.subplots()
    ax.plot([0, 1], [300.0, 40_000.0], "o")
    assert plots.value_axis(ax) == "log"
    fig.canvas.draw()
    texts = [t.get_text() for t in ax.get_yticklabels(which="both") if t.get_text()]
    assert texts and not any("10^" in t or "times" in t or "×" in t for t in texts), texts
    assert "1k" in texts and "10k" in texts


def test_reference_outside_range_is_shown_or_left_out():
    fig, ax = plots.subplots()
    ax.plot([0, 1, 2], [200.0, 300.0, 400.0], "o")
    ax.set_ylim(150, 450)
    line = plots.reference(ax, 50.0, "closed-loop p50")
    lo, hi = ax.get_ylim()
    assert line is not None and lo < 50.0 < hi  # extended: drawn and visible

    fig, ax = plots.subplots()
    ax.plot([0, 1, 2], [200.0, 300.0, 400.0], "o")
    ax.set_ylim(150, 450)
    assert plots.reference(ax, 50.0, "gone", extend=False) is None
    assert "gone" not in ax.get_legend_handles_labels()[1]
    assert ax.get_ylim() == (150, 450)

    ax.set_yscale("log")
    assert plots.reference(ax, 0.0, "zero on log") is None


def test_legend_outside_covers_no_data():
    fig, ax = plots.subplots()
    x = np.linspace(0, 1, 50)
    for i in range(4):
        ax.plot(x, x * (i + 1), label=f"engine {i}")
    ax.legend(loc="center")  # the trap: a legend over the lines
    assert ("axes 0 legend", "axes 0 data") in plots.overlaps(fig)
    plots.legend_outside(ax)
    assert not plots.overlaps(fig)


def test_figure_legend_collects_unique_labels():
    fig, axes = plots.subplots(1, 2)
    for ax in axes:
        ax.plot([0, 1], [0, 1], label="v0")
        ax.plot([0, 1], [1, 0], label="v1")
    leg = plots.legend_outside(fig)
    assert [t.get_text() for t in leg.get_texts()] == ["v0", "v1"]
    assert not plots.overlaps(fig)


def test_point_labels_stay_under_the_title():
    fig, ax = plots.subplots(panel=(4.0, 2.5))
    y = np.arange(5)
    ax.errorbar([1.0, 2.0, 0.5, 1.1, 3.0], y, fmt="o")
    ax.set(title="attribution per step")
    assert plots.value_axis(ax, [0.5, 3.0], axis="x") == "linear"
    ax.set_ylim(-0.5, 4.2)  # the top label would reach the title
    plots.label_points(ax, [1.0, 2.0, 0.5, 1.1, 3.0], y, ["called", "noise"] * 2 + ["called"])
    assert not plots.overlaps(fig)


def test_bars_with_refs_and_overlap_detector():
    frame = pd.DataFrame({"limit_only": np.linspace(100, 9000, len(ENGINES)),
                          "comprehensive": np.linspace(150, 12000, len(ENGINES))},
                         index=ENGINES)
    fig, ax = plots.subplots(panel=(6.0, 3.5))
    plots.bars(ax, frame, ylabel="ns/op", title="cost per op",
               refs={"seed 001 (C++)": 20.0, "nan": float("nan")})
    assert ax.get_yscale() == "log"
    assert ax.get_ylim()[0] < 20.0
    assert "nan" not in ax.get_legend_handles_labels()[1]
    assert not plots.overlaps(fig)
    # the detector is not blind: a title forced onto the tick labels is caught
    ax.set_title("collide", y=-0.2)
    assert plots.overlaps(fig)


def test_dots_draw_values_with_their_intervals_and_no_bars():
    frame = pd.DataFrame({"a": [1e3, 2e5], "b": [5e3, np.nan]}, index=["x", "y"])
    high = pd.DataFrame({"a": [2e3, np.nan], "b": [6e3, np.nan]}, index=["x", "y"])
    fig, ax = plots.subplots()
    plots.dots(ax, frame, low=frame, high=high, ylabel="rate",
               hollow=pd.DataFrame({"a": [False, True], "b": [False, False]},
                                   index=["x", "y"]))
    assert not ax.patches and ax.get_yscale() == "log"  # 1e3 .. 2e5: beyond a decade
    segs = sorted(tuple(s[:, 1]) for c in ax.collections for s in c.get_segments())
    assert segs == [(1e3, 2e3), (5e3, 6e3)]  # no interval where high is NaN
    hollow = [ln for ln in ax.lines if ln.get_markerfacecolor() == "none"]
    assert [list(ln.get_ydata()) for ln in hollow] == [[2e5]]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["a", "b"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["x", "y"]
    assert not plots.overlaps(fig)
    fig2, ax2 = plots.subplots()  # one series, no interval: no legend, a linear axis
    plots.dots(ax2, pd.Series([3.0, 4.0], index=["p", "q"]))
    assert ax2.get_legend() is None and ax2.get_yscale() == "linear" and not ax2.collections
    plt.close("all")

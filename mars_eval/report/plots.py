"""The report's plots: matplotlib figures returned as inline SVG text.

SVG keeps the page self-contained and sharp at any zoom. Text stays text (`svg.fonttype`
"none": smaller files, searchable labels) and the ids matplotlib writes are salted with a fixed
string, so the same runs give the same page byte for byte.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")  # no display: files only

import matplotlib.pyplot as plt  # noqa: E402

STYLE = {"svg.fonttype": "none", "svg.hashsalt": "mars-eval", "font.size": 9, "axes.spines.top": False}
STYLE["axes.spines.right"] = False
STYLE["text.parse_math"] = False  # labels are model and task names (data): "$" is not mathtext


def _svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = buf.getvalue()
    text = text[text.index("<svg") :]  # drop the XML prolog and doctype: it is inlined in HTML
    return re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.DOTALL)


def bar_chart(
    groups: Sequence[str],
    series: dict[str, Sequence[float | None]],
    lows: dict[str, Sequence[float | None]],
    highs: dict[str, Sequence[float | None]],
    ylabel: str,
    title: str = "",
    ymax: float | None = 100.0,
) -> str:
    """Grouped bars (one group per label in `groups`, one bar per series) with error bars.

    A group holds only the series that have a value there, centred (a model not run on a task
    leaves no gap); each series keeps its colour and legend entry across groups.
    """
    xs_of, width = bar_positions(len(groups), series)
    most = round(0.8 / width)
    flat = horizontal(len(groups), most)
    with plt.rc_context(STYLE):
        if flat:  # many bars: one row each, labels on the left, taller with every group
            fig, ax = plt.subplots(figsize=(7.0, _rows_height(groups, most)))
        else:  # wider with more bars, up to what a page shows at full size (text stays legible)
            width_in = min(9.5, max(4.0, 1.2 * len(groups) * most * 0.6 + 2))
            fig, ax = plt.subplots(figsize=(width_in, 3.2))
        _draw_bars(ax, series, lows, highs, xs_of, width, flat=flat)
        if flat:
            ax.set_yticks(range(len(groups)), list(groups))
            ax.set_ylim(len(groups) - 0.5, -0.5)  # the first group on top
            ax.set_xlabel(ylabel)
            if ymax is not None:
                ax.set_xlim(0, ymax)
        else:
            ax.set_xticks(range(len(groups)), list(groups), **_tick_layout(groups, width_in))
            ax.set_ylabel(ylabel)
            if ymax is not None:
                ax.set_ylim(0, ymax)
        if title:
            ax.set_title(title)
        if len(series) > 1:
            ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        return _svg(fig)


HORIZONTAL_FROM = 9  # groups (or 2x this many bars): past it, labels under vertical bars pile up


def horizontal(n_groups: int, per_group: int) -> bool:
    """Whether bars are drawn as rows (labels stacked on the left, readable at 30 rows and
    more) rather than columns (labels side by side under them, which overlap when many)."""
    return n_groups >= HORIZONTAL_FROM or n_groups * per_group >= 2 * HORIZONTAL_FROM


def _rows_height(groups: Sequence[str], per_group: int) -> float:
    """Figure height for bars as rows: each group gets room for its bars and its label's lines."""
    lines = max((str(g).count("\n") + 1 for g in groups), default=1)
    return 0.8 + len(groups) * max(0.2 * lines + 0.1, 0.18 * per_group + 0.1)


def _draw_bars(ax, series, lows, highs, xs_of, width, colors=None, flat: bool = False) -> None:
    """One bar per (series, group) with a value, with its interval as error bars (`flat`: rows)."""
    for k, name in enumerate(series):
        xs, ys, err_lo, err_hi = [], [], [], []
        for g, v in enumerate(series[name]):
            if v is None:
                continue
            lo, hi = lows[name][g], highs[name][g]
            xs.append(xs_of[name][g])
            ys.append(v)
            err_lo.append(max(0.0, v - lo) if lo is not None else 0.0)
            err_hi.append(max(0.0, hi - v) if hi is not None else 0.0)
        color = colors[k % len(colors)] if colors else None
        if flat:
            ax.barh(
                xs, ys, width * 0.95, label=name, xerr=[err_lo, err_hi], capsize=3, ecolor="#333", color=color
            )
        else:
            ax.bar(
                xs, ys, width * 0.95, label=name, yerr=[err_lo, err_hi], capsize=3, ecolor="#333", color=color
            )


Panel = tuple[
    str,
    dict[str, Sequence[float | None]],
    dict[str, Sequence[float | None]],
    dict[str, Sequence[float | None]],
    tuple[float, float] | None,
]


def panel_bars(groups: Sequence[str], panels: Sequence[Panel], legend: bool = False) -> str:
    """Grouped bars in stacked panels sharing the groups (x axis), one panel per measure:
    (ylabel, series, lows, highs, ylim). Each series keeps its colour in every panel, and the
    legend (with more than one series, or `legend`) and group labels are drawn once."""
    first = panels[0][1]
    # A bar's place is where the model has a row, even if one measure is missing there (no win
    # rate in a cooperative game): the panels' bars line up.
    anywhere = {
        name: [
            next((p[1][name][g] for p in panels if p[1][name][g] is not None), None)
            for g in range(len(groups))
        ]
        for name in first
    }
    xs_of, width = bar_positions(len(groups), anywhere)
    most = round(0.8 / width)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    if horizontal(len(groups), most):
        return _panel_rows(groups, panels, xs_of, width, most, colors, legend)
    with plt.rc_context(STYLE):
        width_in = min(9.5, max(4.0, 1.2 * len(groups) * most * 0.6 + 2))
        fig, axes = plt.subplots(
            len(panels), 1, figsize=(width_in, 1.9 * len(panels) + 0.8), sharex=True, squeeze=False
        )
        for ax, (ylabel, series, lows, highs, ylim) in zip(axes[:, 0], panels, strict=True):
            _draw_bars(ax, series, lows, highs, xs_of, width, colors)
            ax.set_ylabel(ylabel, fontsize=8)
            if ylim is not None:
                ax.set_ylim(*ylim)
            else:
                ax.axhline(0, color="#555", linewidth=0.8)  # signed values: where zero is
        last = axes[-1, 0]
        last.set_xticks(range(len(groups)), list(groups), **_tick_layout(groups, width_in))
        if len(first) > 1 or legend:
            axes[0, 0].legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        return _svg(fig)


def _panel_rows(groups, panels, xs_of, width, most, colors, legend: bool = False) -> str:
    """`panel_bars` with many groups: the panels side by side, sharing the groups as rows."""
    first = panels[0][1]
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(
            1,
            len(panels),
            figsize=(2.4 * len(panels) + 2.5, _rows_height(groups, most)),
            sharey=True,
            squeeze=False,
        )
        for ax, (label, series, lows, highs, xlim) in zip(axes[0], panels, strict=True):
            _draw_bars(ax, series, lows, highs, xs_of, width, colors, flat=True)
            ax.set_xlabel(label, fontsize=8)
            if xlim is not None:
                ax.set_xlim(*xlim)
            else:
                ax.axvline(0, color="#555", linewidth=0.8)  # signed values: where zero is
        axes[0, 0].set_yticks(range(len(groups)), list(groups))
        axes[0, 0].set_ylim(len(groups) - 0.5, -0.5)  # the first group on top
        if len(first) > 1 or legend:
            axes[0, -1].legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        return _svg(fig)


def delta_bars(
    labels: Sequence[str],
    deltas: Sequence[float],
    lows: Sequence[float | None],
    highs: Sequence[float | None],
    ylabel: str,
) -> str:
    """One bar per label (a system) for a signed difference, with its interval as error bars
    and a line at zero."""
    with plt.rc_context(STYLE):
        width_in = min(9.5, max(4.0, 0.9 * len(labels) + 1.5))
        fig, ax = plt.subplots(figsize=(width_in, 3.0))
        err_lo = [max(0.0, d - lo) if lo is not None else 0.0 for d, lo in zip(deltas, lows, strict=True)]
        err_hi = [max(0.0, hi - d) if hi is not None else 0.0 for d, hi in zip(deltas, highs, strict=True)]
        colors = ["#2a7" if d >= 0 else "#c44" for d in deltas]
        ax.bar(range(len(labels)), deltas, 0.6, yerr=[err_lo, err_hi], capsize=3, ecolor="#333", color=colors)
        ax.axhline(0, color="#555", linewidth=0.8)
        ax.set_xticks(range(len(labels)), list(labels), **_tick_layout(labels, width_in))
        ax.set_ylabel(ylabel)
        return _svg(fig)


def bar_positions(
    n_groups: int, series: dict[str, Sequence[float | None]]
) -> tuple[dict[str, list[float | None]], float]:
    """Each series' bar centre per group (None where it has no value) and the bar width: the
    bars present in a group sit side by side, centred on the group's tick."""
    present = [[n for n in series if series[n][g] is not None] for g in range(n_groups)]
    width = 0.8 / max([1, *(len(p) for p in present)])
    xs: dict[str, list[float | None]] = {}
    for name in series:
        xs[name] = [
            g - width * len(present[g]) / 2 + width * (present[g].index(name) + 0.5)
            if name in present[g]
            else None
            for g in range(n_groups)
        ]
    return xs, width


def _tick_layout(labels: Sequence[str], width_in: float) -> dict[str, object]:
    """Horizontal centred tick labels when they fit under their group, else slanted ones
    anchored at their right end (long game · opponent · seat labels would overlap)."""
    longest = max((len(line) for label in labels for line in str(label).split("\n")), default=0)
    room = (width_in - 1.0) / max(1, len(labels))  # inches per group
    if longest * 0.075 <= room:  # about 0.075 in per character at 9 pt
        return {"rotation": 0, "ha": "center"}
    return {"rotation": 25, "ha": "right", "rotation_mode": "anchor"}


def _whole_steps(ax, xs: Sequence[float]) -> None:
    """Training steps are whole numbers: ticks at integers only (no "2.5" between steps 2 and 3)."""
    if xs and all(float(x).is_integer() for x in xs):
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def curves(
    lines: dict[str, Sequence[tuple[float, float, float | None, float | None]]],
    xlabel: str,
    ylabel: str,
    title: str = "",
    ylim: tuple[float, float] | None = None,
) -> str:
    """Lines of (x, y, low, high) points; the interval, where given, as a shaded band."""
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(5.2, 3.0))
        for name, points in lines.items():
            pts = sorted(points)
            xs = [p[0] for p in pts]
            ys = [p[1] for p in pts]
            ax.plot(xs, ys, marker="o", markersize=3, label=name)
            if all(p[2] is not None and p[3] is not None for p in pts):
                ax.fill_between(xs, [p[2] for p in pts], [p[3] for p in pts], alpha=0.2)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        _whole_steps(ax, [p[0] for points in lines.values() for p in points])
        if ylim is not None:
            ax.set_ylim(*ylim)
        if title:
            ax.set_title(title)
        if len(lines) > 1:
            ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        return _svg(fig)


def small_multiples(panels: dict[str, Sequence[tuple[float, float]]], xlabel: str = "step") -> str:
    """One small line plot per metric (training curves), up to four per row."""
    names = list(panels)
    cols = min(4, max(1, len(names)))
    rows = (len(names) + cols - 1) // cols
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(rows, cols, figsize=(3.0 * cols, 2.2 * rows), squeeze=False)
        for k, ax in enumerate(axes.flat):
            if k >= len(names):
                ax.axis("off")
                continue
            pts = sorted(panels[names[k]])
            ax.plot([p[0] for p in pts], [p[1] for p in pts], linewidth=1.2)
            _whole_steps(ax, [p[0] for p in pts])
            ax.set_title(names[k], fontsize=8)
            ax.set_xlabel(xlabel, fontsize=8)
        fig.tight_layout()
        return _svg(fig)

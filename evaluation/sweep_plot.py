"""The sweep's plot: what each vector budget saves in latency against what it costs, one
labelled point per budget. Drawn on matplotlib's Agg canvas directly (no pyplot, so no
global figure state and no display needed)."""

from collections.abc import Sequence
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from evaluation.sweep import (
    MAX_RECALL_LOSS,
    BudgetFigures,
    latency_saved_ms,
)


def plot_sweep(
    path: Path,
    reference: BudgetFigures,
    budgets: Sequence[BudgetFigures],
    *,
    title: str,
    recommended_ms: float | None = None,
) -> None:
    """Two panels against the p99 latency saved: fallback share, and recall loss."""
    figure = Figure(figsize=(11, 4.8), layout="constrained")
    FigureCanvasAgg(figure)
    saved = [latency_saved_ms(reference, figures) for figures in budgets]
    share, loss = figure.subplots(1, 2)
    _points(share, saved, [f.fallback_share for f in budgets], budgets, recommended_ms)
    share.set_ylabel("fallback share (not answered hybrid)")
    _points(loss, saved, [f.recall_loss or 0.0 for f in budgets], budgets, recommended_ms)
    loss.set_ylabel("recall@10 loss against unbounded")
    loss.axhline(MAX_RECALL_LOSS, linestyle="--", color="tab:red", linewidth=1)
    loss.annotate(
        "the rule's limit",
        (0, MAX_RECALL_LOSS),
        xycoords=("axes fraction", "data"),
        xytext=(4, 4),
        textcoords="offset points",
        fontsize=8,
        color="tab:red",
    )
    figure.suptitle(title)
    figure.savefig(path, format="png", dpi=120)


def _points(
    axes: Axes,
    saved: Sequence[float],
    values: Sequence[float],
    budgets: Sequence[BudgetFigures],
    recommended_ms: float | None,
) -> None:
    # Points, not a line: latency saved need not grow with the budget, and a line drawn
    # in budget order zig-zags across the panel.
    axes.scatter(saved, values, color="tab:blue")
    for x, y, figures in zip(saved, values, budgets, strict=True):
        chosen = figures.vector_budget_ms == recommended_ms
        axes.annotate(
            f"{figures.vector_budget_ms:g} ms" + (" (recommended)" if chosen else ""),
            (x, y),
            textcoords="offset points",
            xytext=(6, 6),
            fontsize=9,
            fontweight="bold" if chosen else "normal",
        )
    axes.set_xlabel("p99 latency saved against the unbounded run (ms)")
    axes.grid(alpha=0.3)

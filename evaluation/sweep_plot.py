"""The sweep's plot: what each vector budget saves in latency against what it costs, one
labelled point per budget. Drawn on matplotlib's Agg canvas directly (no pyplot, so no
global figure state and no display needed)."""

from collections.abc import Sequence
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from evaluation.sweep import BudgetFigures, latency_saved_ms


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
    panels = (
        ("fallback share (not answered hybrid)", [f.fallback_share for f in budgets]),
        ("recall@10 loss against unbounded", [f.recall_loss or 0.0 for f in budgets]),
    )
    for axes, (label, values) in zip(figure.subplots(1, 2), panels, strict=True):
        axes.plot(saved, values, marker="o", linestyle="-", color="tab:blue")
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
        axes.set_ylabel(label)
        axes.grid(alpha=0.3)
    figure.suptitle(title)
    figure.savefig(path, format="png", dpi=120)

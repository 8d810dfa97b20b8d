"""`manage.py sweep_budgets --collection NAME [--base-url URL] [--budgets 5,10,20,40,60,100]
[--concurrency 8] [--rounds 1] [--ingest-rate 0] [--out DIR] [--max-seconds 1800]`

Runs an evaluation set's judged queries against the running system over HTTP (loopback
only), unbounded and then at each vector budget, optionally while a stream of editorial
records is ingested at `--ingest-rate` listings/s through the real workers; reports per
budget latency p50/p95/p99, fallback share by mode and by reason, the exhausted-budget
ratio, recall@10 and its loss against the unbounded run; writes DIR/sweep.json and
DIR/sweep.png; and recommends a budget by the rule it prints (evaluation.sweep.RULE). In
short: a budget passes with a recall@10 loss of at most 0.01 and at most 5 % of its
started vector stages out of budget; the stable region is the passing budgets from the
largest down to the first that fails; the recommendation is the region's second-smallest
budget, so the one below it passes too and a budget just past a sharp knee is never
chosen.
"""

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from evaluation.models import EvaluationSet
from evaluation.paths import UNBOUNDED
from evaluation.sweep import RULE, BudgetFigures
from evaluation.sweep_plot import plot_sweep
from evaluation.sweep_run import SweepOptions, SweepReport, run_sweep


def _budgets(raw: str) -> tuple[float, ...]:
    try:
        budgets = tuple(sorted({float(part) for part in raw.split(",") if part.strip()}))
    except ValueError:
        raise CommandError(f"--budgets: {raw!r} is not a comma-separated list of ms") from None
    if not budgets or not all(0 < budget <= UNBOUNDED.objective_ms for budget in budgets):
        raise CommandError(
            f"--budgets: each must be more than 0 and at most {UNBOUNDED.objective_ms:g} ms"
        )
    return budgets


class Command(BaseCommand):
    help = (
        "Sweep vector budgets over HTTP against the running system (loopback only) and"
        " recommend one from a stable region; writes sweep.json and sweep.png."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--collection", required=True, help="the evaluation set's name")
        parser.add_argument("--base-url", default="http://127.0.0.1:8000")
        parser.add_argument("--budgets", type=_budgets, default=_budgets("5,10,20,40,60,100"))
        parser.add_argument("--concurrency", type=int, default=8)
        parser.add_argument("--rounds", type=int, default=1, help="passes over the queries")
        parser.add_argument("--ingest-rate", type=float, default=0.0, help="listings/s")
        parser.add_argument("--out", type=Path, default=Path("sweep"))
        parser.add_argument("--max-seconds", type=float, default=1800.0)

    def handle(self, *args: Any, **options: Any) -> None:
        for name, low, high in (("concurrency", 1, 256), ("rounds", 1, 100)):
            if not low <= options[name] <= high:
                raise CommandError(f"--{name} must be from {low} to {high}")
        if not 0 <= options["ingest_rate"] <= 2000:
            raise CommandError("--ingest-rate must be from 0 to 2000 listings/s")
        if not 0 < options["max_seconds"] <= 24 * 3600:
            raise CommandError("--max-seconds must be more than 0 and at most a day")
        try:
            evaluation_set = EvaluationSet.objects.get(name=options["collection"])
        except EvaluationSet.DoesNotExist:
            known = ", ".join(EvaluationSet.objects.values_list("name", flat=True)) or "none"
            raise CommandError(f"no evaluation set {options['collection']!r} ({known})") from None
        sweep_options = SweepOptions(
            base_url=options["base_url"],
            budgets=options["budgets"],
            concurrency=options["concurrency"],
            rounds=options["rounds"],
            ingest_rate=options["ingest_rate"],
            max_seconds=options["max_seconds"],
        )
        try:
            report = run_sweep(evaluation_set, sweep_options)
        except ValueError as error:  # not loopback, or a stream source that is public
            raise CommandError(str(error)) from error
        if report.reference is None:
            raise CommandError(
                f"stopped after {sweep_options.max_seconds:g} s, before the unbounded run ended"
            )
        out: Path = options["out"]
        out.mkdir(parents=True, exist_ok=True)
        (out / "sweep.json").write_text(json.dumps(report.as_json(), indent=2) + "\n")
        self._print(report)
        if report.budgets:
            plot_sweep(
                out / "sweep.png",
                report.reference,
                report.budgets,
                title=(
                    f"{report.collection}: concurrency {sweep_options.concurrency},"
                    f" ingest {sweep_options.ingest_rate:g} listings/s"
                ),
                recommended_ms=report.recommendation.vector_budget_ms,
            )
        self.stdout.write(
            f"wrote {out / 'sweep.json'}" + (f" and {out / 'sweep.png'}" if report.budgets else "")
        )

    def _print(self, report: SweepReport) -> None:
        assert report.reference is not None
        self.stdout.write(
            f"{report.collection}: {report.queries} judged queries x {report.options.rounds}"
            f" round(s), concurrency {report.options.concurrency}"
        )
        header = f"{'budget':>9} {'p50':>7} {'p95':>7} {'p99':>7} {'fallback':>8}"
        self.stdout.write(header + f" {'exhausted':>9} {'503':>5} {'recall':>7} {'loss':>7}")
        for figures in (report.reference, *report.budgets):
            self.stdout.write(_row(figures, unbounded=figures is report.reference))
        for figures in report.budgets:
            outcomes = ", ".join(f"{m} {s:.1%}" for m, s in figures.outcomes.items())
            reasons = ", ".join(f"{r} {s:.1%}" for r, s in figures.reasons.items()) or "none"
            self.stdout.write(
                f"  {figures.vector_budget_ms:g} ms: modes {outcomes}; reasons {reasons}"
            )
        if report.ingest is not None:
            ingest = report.ingest
            self.stdout.write(
                f"ingest stream: asked {ingest.rate_asked:g}/s, achieved"
                f" {ingest.rate_achieved:.1f}/s ({ingest.accepted} of {ingest.posted} records"
                f" in {ingest.seconds:.0f} s, {ingest.failed_posts} failed posts,"
                f" {ingest.embedded} embedded before removal)"
            )
        if report.stopped_early:
            self.stdout.write(
                f"stopped early at --max-seconds: {len(report.budgets)} of"
                f" {len(report.options.budgets)} budgets done"
            )
        recommendation = report.recommendation
        self.stdout.write("rule: " + RULE)
        for verdict in recommendation.verdicts:
            self.stdout.write(f"  {verdict.vector_budget_ms:g} ms: {verdict.why}")
        if recommendation.vector_budget_ms is None:
            self.stdout.write("recommendation: none (no budget is in a stable region)")
        else:
            self.stdout.write(f"recommendation: {recommendation.vector_budget_ms:g} ms")
        if recommendation.warning:
            self.stdout.write("warning: " + recommendation.warning)


def _row(figures: BudgetFigures, *, unbounded: bool) -> str:
    budget = "unbounded" if unbounded else f"{figures.vector_budget_ms:g} ms"
    latency = " ".join(f"{figures.latency_ms[p]:>7.1f}" for p in ("p50", "p95", "p99"))
    exhausted = "-" if figures.exhausted_ratio is None else f"{figures.exhausted_ratio:.1%}"
    loss = "-" if figures.recall_loss is None else f"{figures.recall_loss:+.3f}"
    return (
        f"{budget:>9} {latency} {figures.fallback_share:>8.1%} {exhausted:>9}"
        f" {figures.unavailable:>5} {figures.recall:>7.3f} {loss:>7}"
    )

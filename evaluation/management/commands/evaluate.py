"""`manage.py evaluate --collection NAME [--k 10] [--json] [--last]`: every search path's
recall@k, nDCG@10 and MRR@10 on an evaluation set's judged queries, with its slices."""

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from evaluation.metrics import MRR_AT_10, NDCG_AT_10, recall_at
from evaluation.models import EvaluationRun, EvaluationSet
from evaluation.paths import ALL_PATHS, NoEvaluationGenerationError
from evaluation.runs import evaluate


class Command(BaseCommand):
    help = (
        "Score the search paths (lexical, vector, hybrid, lexical_fallback, cache_fallback)"
        " on an evaluation set's judged queries; --last shows the latest recall guardrail."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--collection", help="the evaluation set's name")
        parser.add_argument("--k", type=int, default=10, help="the recall cutoff (default 10)")
        parser.add_argument("--json", action="store_true", help='print {"paths", "slices"}')
        parser.add_argument(
            "--fresh-minutes",
            type=float,
            help="fresh: documents ingested in the last N minutes (default: the newest tenth)",
        )
        parser.add_argument(
            "--last", action="store_true", help="show the latest guardrail run, run nothing"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["last"]:
            self._show_last(options["collection"], as_json=options["json"])
            return
        if not options["collection"]:
            raise CommandError("--collection NAME is required (or --last)")
        if not 1 <= options["k"] <= 50:
            raise CommandError("--k must be from 1 to 50")
        evaluation_set = _evaluation_set(options["collection"])
        try:
            report = evaluate(
                evaluation_set, k=options["k"], fresh_minutes=options["fresh_minutes"]
            )
        except NoEvaluationGenerationError as error:
            raise CommandError(str(error)) from error
        failed = {path: n for path, n in report.failures.items() if n}
        if options["json"]:
            self.stdout.write(json.dumps(report.as_json(), indent=2))
            if failed:
                self.stderr.write(f"queries not answered in their path's mode: {failed}")
            return
        self.stdout.write(
            f"{report.evaluation_set}: {report.queries} queries, k={report.k},"
            f" {report.fresh_documents} fresh documents"
            f" ({_fresh_band(options['fresh_minutes'])})\n"
        )
        self.stdout.write(_table("all queries", report.paths | report.slices["variants"]))
        for label, row in sorted(report.slices["query_class"].items()):
            self.stdout.write(_table(f"query class {label} ({row['queries']})", row))
        for band, row in report.slices["freshness"].items():
            if row:
                self.stdout.write(_table(f"{band} documents' judgments ({row['queries']})", row))
        self.stdout.write(
            "failed (scored 0): " + (", ".join(f"{p}={n}" for p, n in failed.items()) or "none")
        )

    def _show_last(self, name: str | None, *, as_json: bool) -> None:
        runs = EvaluationRun.objects.filter(kind=EvaluationRun.Kind.GUARDRAIL)
        if name:
            runs = runs.filter(evaluation_set=_evaluation_set(name))
        last = runs.select_related("evaluation_set").order_by("-finished_at").first()
        if last is None:
            raise CommandError("no recall guardrail has run yet")
        if as_json:
            self.stdout.write(json.dumps(last.figures, indent=2))
            return
        self.stdout.write(
            f"recall guardrail on {last.evaluation_set.name} at {last.finished_at:%Y-%m-%d %H:%M}"
            f" UTC: {last.query_count} queries, k={last.k}\n"
        )
        # jsonb keeps no key order: the paths' and the figures' own, as `evaluate` prints.
        figures = last.figures["paths"]
        columns = (recall_at(last.k), NDCG_AT_10, MRR_AT_10)
        rows = {p: {c: figures[p][c] for c in columns} for p in ALL_PATHS if p in figures}
        self.stdout.write(_table("sampled queries", rows))


def _fresh_band(minutes: float | None) -> str:
    return "the newest tenth" if minutes is None else f"ingested in the last {minutes:g} minutes"


def _evaluation_set(name: str) -> EvaluationSet:
    try:
        return EvaluationSet.objects.get(name=name)
    except EvaluationSet.DoesNotExist:
        known = ", ".join(EvaluationSet.objects.values_list("name", flat=True)) or "none"
        raise CommandError(f"no evaluation set {name!r} (imported: {known})") from None


def _table(title: str, rows: dict[str, Any]) -> str:
    """One row per path: its figures in columns, in the order the figures come."""
    paths = {path: figures for path, figures in rows.items() if isinstance(figures, dict)}
    if not paths:
        return ""
    columns = list(next(iter(paths.values())))
    width = max(map(len, paths))
    lines = [title, f"  {'path':<{width}}  " + "  ".join(f"{c:>9}" for c in columns)]
    for path, figures in paths.items():
        cells = "  ".join(f"{figures[c]:>9.3f}" for c in columns)
        lines.append(f"  {path:<{width}}  {cells}")
    return "\n".join(lines) + "\n"

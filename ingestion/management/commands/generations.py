"""Index generations from the command line: list, build (with progress), activate, roll
back, retire."""

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ingestion import generations, indexing, tasks
from ingestion.embedding import DIMENSIONS, MODEL_NAME
from ingestion.models import IndexGeneration


class Command(BaseCommand):
    help = "Manage index generations."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        sub.add_parser("list")
        build = sub.add_parser("build", help="build a new generation and show its progress")
        build.add_argument(
            "--inline", action="store_true", help="embed in this process instead of workers"
        )
        build.add_argument("--activate", action="store_true", help="activate when complete")
        build.add_argument(
            "--copy",
            action="store_true",
            help="copy the active generation's vectors, building only a new index over them "
            "(a change of SEARCH_VECTOR_TYPE or the graph's settings, not of model or text)",
        )
        for name in ("activate", "retire"):
            sub.add_parser(name).add_argument("generation", type=int)
        sub.add_parser("rollback")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            getattr(self, f"_{options['action']}")(options)
        except (ValueError, IndexGeneration.DoesNotExist) as exc:
            raise CommandError(str(exc)) from exc

    def _list(self, options: dict[str, Any]) -> None:
        # One query for the whole list, not a progress query per generation.
        for generation in generations.with_progress(IndexGeneration.objects.order_by("pk")):
            self.stdout.write(
                f"{generation.pk:>4}  {generation.state:<9} {generation.embedding_model} "
                f"{generation.dimensions}d pipeline v{generation.text_pipeline_version}  "
                f"{generation.embedded}/{generation.active_listings} embedded"
            )

    def _build(self, options: dict[str, Any]) -> None:
        active = generations.active_generation()
        if not options["copy"]:
            generation = generations.create_generation(MODEL_NAME, DIMENSIONS)
        elif active is None:
            raise ValueError("no active generation to copy the vectors of")
        else:
            generation = generations.copy_build(active)
        self.stdout.write(f"building generation {generation.pk}")
        if not options["inline"]:
            tasks.schedule_embedding()
        while True:
            done, total = generations.progress(generation)
            self._bar(done, total)
            if done >= total:
                break
            if options["inline"]:
                indexing.embed_pending_batch()
            else:
                time.sleep(1.0)  # workers do the embedding; just watch
        self.stdout.write("")
        generations.mark_ready(generation)
        if options["activate"]:
            generation.refresh_from_db()
            generations.activate(generation)
            self.stdout.write(f"generation {generation.pk} is active")

    def _bar(self, done: int, total: int, width: int = 40) -> None:
        share = done / total if total else 1.0
        filled = int(share * width)
        bar = f"[{'#' * filled}{'.' * (width - filled)}]"
        self.stdout.write(f"\r{bar} {share:6.1%} {done}/{total}", ending="")
        self.stdout.flush()

    def _activate(self, options: dict[str, Any]) -> None:
        generation = IndexGeneration.objects.get(pk=options["generation"])
        done, total = generations.progress(generation)
        if done < total:
            raise CommandError(f"generation {generation.pk} is not built: {done}/{total}")
        generations.activate(generation)
        self.stdout.write(f"generation {generation.pk} is active")

    def _rollback(self, options: dict[str, Any]) -> None:
        generation = generations.rollback()
        self.stdout.write(f"generation {generation.pk} is active again")

    def _retire(self, options: dict[str, Any]) -> None:
        generation = IndexGeneration.objects.get(pk=options["generation"])
        generations.retire(generation)
        self.stdout.write(f"generation {generation.pk} retired; its vectors are dropped")

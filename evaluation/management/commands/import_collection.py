"""`manage.py import_collection PATH`: a judged collection into an evaluation set."""

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from evaluation.collections import CollectionError
from evaluation.importing import DOCUMENT_COUNTS, import_collection


class Command(BaseCommand):
    help = (
        "Load a judged collection (BEIR or SMART folder): its documents as editorial records"
        " of an evaluation source, embedded inline, and its queries and judgments."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path)
        parser.add_argument("--name", help="the evaluation set's name (default: folder name)")
        parser.add_argument("--queries", type=Path, help="a query file in place of the folder's")
        parser.add_argument("--qrels", type=Path, help="a judgment file in place of the folder's")
        parser.add_argument("--qids", type=Path, help="a file of the query ids to keep")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            report = import_collection(
                options["path"],
                name=options["name"],
                queries=options["queries"],
                qrels=options["qrels"],
                qids=options["qids"],
                progress=options["verbosity"] > 0,
            )
        except CollectionError as error:
            raise CommandError(str(error)) from error
        documents = " ".join(f"{name}={report.documents[name]}" for name in DOCUMENT_COUNTS)
        skipped = report.skipped
        self.stdout.write(
            f"{report.evaluation_set.name} ({report.evaluation_set.layout}):"
            f" documents {documents}; queries={report.queries}"
            f" judged_pairs={report.judged_pairs}; skipped judgments:"
            f" unknown_documents={skipped.unknown_documents}"
            f" unknown_queries={skipped.unknown_queries}"
        )

"""Create a bearer token for an upstream editorial system (shown once)."""

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from ingestion.models import Source
from ingestion.tokens import create_token


class Command(BaseCommand):
    help = "Create an editorial API token; records posted with it go to SOURCE."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--source", required=True, help="editorial source name")

    def handle(self, *args: Any, **options: Any) -> None:
        source, _ = Source.objects.get_or_create(
            name=options["source"], defaults={"kind": Source.Kind.EDITORIAL}
        )
        token = create_token(options["name"], source)
        self.stdout.write(f"token for {options['name']!r} (shown once): {token}")

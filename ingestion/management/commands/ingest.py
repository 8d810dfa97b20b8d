"""Ingest local files synchronously through the same pipeline as polling."""

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from ingestion.models import Poll, Source
from ingestion.polling import ingest_payload
from ingestion.tasks import schedule_embedding
from resilience.redis_clients import get_redis


class Command(BaseCommand):
    help = "Ingest feed, calendar or editorial files; print per-file counts."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--kind", required=True, choices=[k.value for k in Source.Kind])
        parser.add_argument("paths", nargs="+", type=Path)
        parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
        parser.add_argument(
            "--no-embed", action="store_true", help="don't queue embedding of the new listings"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        files = [self._ingest(options["kind"], path) for path in options["paths"]]
        totals = {name: sum(f[name] for f in files) for name in Poll.COUNTS}
        totals["errors"] = sum(1 for f in files if f["error"])
        if not options["no_embed"] and (totals["new"] or totals["updated"]):
            _queue_embedding(self.stderr)
        if options["json"]:
            self.stdout.write(json.dumps({"files": files, "totals": totals}, indent=2))
            return
        for f in files:
            counts = " ".join(f"{name}={f[name]}" for name in Poll.COUNTS)
            self.stdout.write(
                f"{f['path']}: {counts}" + (f" error={f['error']}" if f["error"] else "")
            )
        self.stdout.write("total: " + " ".join(f"{k}={v}" for k, v in totals.items()))

    def _ingest(self, kind: str, path: Path) -> dict[str, Any]:
        resolved = path.resolve()
        source, _ = Source.objects.get_or_create(
            name=f"file:{resolved}"[:200],
            defaults={"kind": kind, "url": str(resolved), "active": False},
        )
        try:
            payload = resolved.read_bytes()
        except OSError as exc:
            return {
                "path": str(path),
                **dict.fromkeys(Poll.COUNTS, 0),
                "error": exc.strerror or str(exc),
            }
        poll = ingest_payload(source, payload, started_at=timezone.now(), name_hint=path.name)
        error = poll.error if poll.status == Poll.Status.REJECTED else None
        return {
            "path": str(path),
            **{name: getattr(poll, name) for name in Poll.COUNTS},
            "error": error,
        }


def _queue_embedding(stderr: Any) -> None:
    try:
        get_redis().ping()
    except Exception:
        stderr.write("Redis unreachable: embedding will be picked up by the next sweep.")
        return
    schedule_embedding()

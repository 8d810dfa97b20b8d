"""Print the URLs of the services this installation uses, and whether they answer."""

from typing import Any

import psycopg
import redis
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = (
        "Print DATABASE_URL, SEARCH_REPLICA_URLS and REDIS_URL for the running services,"
        " and their health."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(f"DATABASE_URL={settings.DATABASE_URL}")
        if settings.SEARCH_REPLICA_URLS:
            self.stdout.write(f"SEARCH_REPLICA_URLS={settings.SEARCH_REPLICA_URLS}")
        self.stdout.write(f"REDIS_URL={settings.REDIS_URL}")
        healthy = _postgres(self, "postgres", settings.DATABASE_URL, _VERSION)
        for number, url in enumerate(settings.SEARCH_REPLICA_URLS.split(","), start=1):
            if url.strip():
                healthy &= _postgres(self, f"replica-{number}", url.strip(), _REPLAY)
        try:
            info = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=3).info("server")
            version = info.get("valkey_version") or info.get("redis_version")
            self.stdout.write(f"redis: ok (version {version})")
        except redis.RedisError as exc:
            healthy = False
            self.stdout.write(f"redis: unreachable ({exc})")
        if not healthy:
            raise CommandError("some services are not running (start them with `make run`)")


_VERSION = "SELECT 'PostgreSQL ' || current_setting('server_version')"
# How long ago the replica replayed the last transaction it has (the primary may simply
# have written nothing since).
_REPLAY = (
    "SELECT CASE WHEN pg_is_in_recovery() THEN 'replaying, last transaction '"
    " || coalesce(round(extract(epoch FROM now() - pg_last_xact_replay_timestamp()))::text"
    " || ' s ago', 'none yet') ELSE 'not a replica' END"
)


def _postgres(command: BaseCommand, name: str, url: str, about: str) -> bool:
    """Print whether the server at `url` answers, and `about` it."""
    try:
        with psycopg.connect(url, connect_timeout=3) as conn:
            row = conn.execute(about).fetchone()
    except psycopg.Error as exc:
        command.stdout.write(f"{name}: unreachable ({str(exc).strip().splitlines()[0]})")
        return False
    command.stdout.write(f"{name}: ok ({row[0] if row else '?'})")
    return True

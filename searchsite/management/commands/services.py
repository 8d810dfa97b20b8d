"""Print the URLs of the services this installation uses, and whether they answer."""

from typing import Any

import psycopg
import redis
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Print DATABASE_URL and REDIS_URL for the running services, and their health."

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(f"DATABASE_URL={settings.DATABASE_URL}")
        self.stdout.write(f"REDIS_URL={settings.REDIS_URL}")
        healthy = True
        try:
            with psycopg.connect(settings.DATABASE_URL, connect_timeout=3) as conn:
                row = conn.execute("SHOW server_version").fetchone()
            self.stdout.write(f"postgres: ok (PostgreSQL {row[0] if row else '?'})")
        except psycopg.Error as exc:
            healthy = False
            self.stdout.write(f"postgres: unreachable ({str(exc).strip().splitlines()[0]})")
        try:
            info = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=3).info("server")
            version = info.get("valkey_version") or info.get("redis_version")
            self.stdout.write(f"redis: ok (version {version})")
        except redis.RedisError as exc:
            healthy = False
            self.stdout.write(f"redis: unreachable ({exc})")
        if not healthy:
            raise CommandError("some services are not running (start them with `make run`)")

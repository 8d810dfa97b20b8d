"""Prepare a fresh or existing installation: schema, static assets, an admin user, an
active index generation, and a stack warmed before it takes traffic. Safe to run on every
start."""

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand

from ingestion import generations, tasks
from ingestion.demo import load_demo_sources
from ingestion.embedding import DIMENSIONS, MODEL_NAME
from retrieval.warming import warm_up
from searchsite.env import env_bool, env_optional, env_str


class Command(BaseCommand):
    help = (
        "Migrate, collect the static assets, create an admin user if none exists, ensure an "
        "active index generation, load the demo sources on first run, warm the stack up."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        # The pages name their assets by the manifest this writes (searchsite/settings.py);
        # it runs before the web server starts, so no page names an asset not yet there.
        call_command("collectstatic", interactive=False, verbosity=0)
        self._ensure_admin()
        generation = generations.ensure_active_generation(MODEL_NAME, DIMENSIONS)
        self.stdout.write(
            f"active index generation: {generation.pk} ({generation.embedding_model})"
        )
        if env_bool("DEMO_DATA", True):
            for poll in load_demo_sources():
                self.stdout.write(
                    f"demo source {poll.source.name}: {poll.items} items, {poll.new} new, "
                    f"{poll.updated} merged into another source's listing, "
                    f"{poll.quarantined} quarantined"
                )
            tasks.schedule_embedding()
        # Last, and before `make run` or compose starts the web server: what the searches
        # read is in memory, and /healthz/ready says so.
        warmed = warm_up.warm_up()
        blocks = sum(warmed.prewarmed.values())
        self.stdout.write(
            f"warmed up: {len(warmed.prewarmed)} relations ({blocks} blocks) read, "
            f"warm-up searches {', '.join(warmed.modes)}"
        )

    def _ensure_admin(self) -> None:
        users = get_user_model()
        if users.objects.filter(is_superuser=True).exists():
            return
        username = env_str("ADMIN_USERNAME", "admin")
        password = env_optional("ADMIN_PASSWORD")
        generated = password is None
        password = password or secrets.token_urlsafe(12)
        users.objects.create_superuser(username, env_str("ADMIN_EMAIL", ""), password)
        if generated:
            # Printed once, never stored: set ADMIN_PASSWORD to choose it instead.
            self.stdout.write(f"created admin user {username!r} with password {password!r}")
        else:
            self.stdout.write(f"created admin user {username!r} (password from ADMIN_PASSWORD)")

"""The record of intake from sources: each poll and what became of its items, the items
that could not be ingested (quarantine), and the API tokens editorial systems post with."""

from django.db import models
from django.db.models import Q

from ingestion.models.listings import Source


class Poll(models.Model):
    """One poll of a source and what became of every input item."""

    class Status(models.TextChoices):
        OK = "ok"
        NOT_MODIFIED = "not_modified"
        SKIPPED = "skipped", "Skipped (breaker open)"
        FAILED = "failed", "Fetch failed"
        REJECTED = "rejected", "Payload rejected"

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="polls")
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()
    status = models.CharField(max_length=16, choices=Status.choices)
    items = models.PositiveIntegerField(default=0)
    new = models.PositiveIntegerField(default=0)
    updated = models.PositiveIntegerField(default=0)
    unchanged = models.PositiveIntegerField(default=0)
    withdrawn = models.PositiveIntegerField(default=0)
    quarantined = models.PositiveIntegerField(default=0)
    # The count columns, as the command line, the API and the admin show them.
    COUNTS = ("items", "new", "updated", "unchanged", "withdrawn", "quarantined")
    error = models.TextField(blank=True)

    class Meta:
        indexes = [models.Index(fields=["source", "-started_at"], name="poll_source_recent")]

    def __str__(self) -> str:
        return f"poll of {self.source_id} at {self.started_at:%Y-%m-%d %H:%M:%S} ({self.status})"


class QuarantinedItem(models.Model):
    """An input item (or a whole payload) that could not be ingested, and why."""

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="quarantine")
    poll = models.ForeignKey(Poll, on_delete=models.SET_NULL, null=True, blank=True)
    position = models.IntegerField(null=True, blank=True)
    external_id = models.CharField(max_length=1000, blank=True)
    reason = models.TextField()
    permanent = models.BooleanField(default=True)
    excerpt = models.TextField(blank=True)
    # Editorial records keep their full JSON here, so an editor can correct it and retry.
    raw = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    retry_requested_at = models.DateTimeField(null=True, blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    # Why an editor dismissed it (resolved without ingesting); empty for any other item.
    dismissal_note = models.TextField(blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["source"], condition=Q(resolved_at=None), name="quarantine_open")
        ]

    def __str__(self) -> str:
        return f"{self.source_id}#{self.position}: {self.reason[:60]}"


class ApiToken(models.Model):
    """A bearer token for an upstream editorial system; records it posts go to `source`.
    Only a hash is stored: the token itself is shown once, when it is created."""

    name = models.CharField(max_length=200, unique=True)
    source = models.ForeignKey(Source, on_delete=models.CASCADE)
    token_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked = models.BooleanField(default=False)

    def __str__(self) -> str:
        return self.name

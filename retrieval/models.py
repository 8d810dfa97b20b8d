"""What the search path reads of the database besides listings: the budgets in force and a
canary of other budgets (ops/canary.py starts, promotes and rolls one back)."""

from django.conf import settings
from django.db import models
from django.db.models import Q


class Canary(models.Model):
    """Candidate budgets enforced on a share of readers, against a control that keeps the
    budgets in force; kept after it ends as the audit record of its decision. The budgets
    in force are the last promoted canary's candidate, or the settings' when none was."""

    class State(models.TextChoices):
        RUNNING = "running"
        PROMOTED = "promoted"
        ROLLED_BACK = "rolled_back"

    class Why(models.TextChoices):
        """Why it ended."""

        OPERATOR = "operator"  # promoted or rolled back by an ops member
        FALLBACK_SHARE = "fallback_share"  # its fallback share over the objective, sustained
        P99 = "p99"  # its p99 over the latency objective, sustained

    vector_budget_ms = models.FloatField()
    deadline_ms = models.FloatField()
    share = models.FloatField()  # of readers, by a stable hash of the reader
    # The control's budgets while it ran: those in force when it started.
    control_vector_budget_ms = models.FloatField()
    control_deadline_ms = models.FloatField()
    state = models.CharField(max_length=16, choices=State.choices, default=State.RUNNING)
    started_at = models.DateTimeField(auto_now_add=True)
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    ended_at = models.DateTimeField(null=True, blank=True)
    ended_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    ended_because = models.CharField(max_length=16, choices=Why.choices, blank=True)
    # Each arm's figures when it ended, as the ops page compared them.
    figures = models.JSONField(default=dict, blank=True)
    # The latest recall guardrail run under each arm's budgets (evaluation/guardrail.py):
    # {"control": recall@10, "canary": recall@10, "queries": n, "at": ISO time}.
    guardrail = models.JSONField(default=dict, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["state"], condition=Q(state="running"), name="one_running_canary"
            ),
            models.CheckConstraint(
                condition=Q(share__gt=0) & Q(share__lt=1), name="canary_share_a_fraction"
            ),
        ]
        permissions = [("run_canary", "Can start, promote and roll back a budget canary")]

    def __str__(self) -> str:
        return (
            f"canary {self.pk}: vector {self.vector_budget_ms:g} ms, deadline"
            f" {self.deadline_ms:g} ms, {self.share:.0%} of readers ({self.state})"
        )


class BudgetConditions(models.Model):
    """What the search ran on when its budgets were last chosen or looked at again: a
    canary promoted, an ops member's review, or, with nothing on record, the first look
    (ops/review.py). A later generation, or listings, replicas or a declared capacity
    that moved by more than SEARCH_REVIEW_FRACTION since, asks for another look."""

    class Why(models.TextChoices):
        FIRST_SEEN = "first_seen"
        PROMOTED = "promoted"
        REVIEWED = "reviewed"

    recorded_at = models.DateTimeField(auto_now_add=True)
    why = models.CharField(max_length=16, choices=Why.choices)
    by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    generation_id = models.BigIntegerField(null=True)  # the active public generation's
    listings = models.PositiveIntegerField()  # active public listings
    replicas = models.PositiveSmallIntegerField()  # configured (SEARCH_REPLICA_URLS)
    capacity_per_s = models.FloatField(null=True)  # declared (SEARCH_CAPACITY_PER_S)

    def __str__(self) -> str:
        return f"conditions of {self.recorded_at:%Y-%m-%d %H:%M} ({self.why})"

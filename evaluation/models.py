"""Evaluation sets: a judged collection's queries and judgments, beside the documents
that came in as editorial records of the set's own evaluation-audience source.

Judgments name documents by their external id (the record id in the set's source), not
by listing: a document the ingestion path quarantined still has its judgments, and a
search path scored against them counts it as missed, as it should."""

from django.db import models

from ingestion.models import Source


class EvaluationSet(models.Model):
    name = models.CharField(max_length=200, unique=True)
    layout = models.CharField(max_length=32)  # the reader's name: "beir", "cranfield", …
    # PROTECT: deleting the source would silently take the set's documents with it.
    source = models.OneToOneField(Source, on_delete=models.PROTECT, related_name="evaluation_set")
    imported_at = models.DateTimeField()
    # As last imported, for listing sets without counting rows.
    document_count = models.PositiveIntegerField(default=0)
    query_count = models.PositiveIntegerField(default=0)
    judgment_count = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return self.name

    def relevant_documents(self) -> dict[str, set[str]]:
        """Query id -> the documents judged relevant to it, for the queries that have any."""
        relevant: dict[str, set[str]] = {}
        pairs = self.judgments.filter(relevant=True).values_list("query_id", "document_id")
        for query_id, document_id in pairs:
            relevant.setdefault(query_id, set()).add(document_id)
        return relevant


class EvaluationQuery(models.Model):
    evaluation_set = models.ForeignKey(
        EvaluationSet, on_delete=models.CASCADE, related_name="queries"
    )
    external_id = models.CharField(max_length=1000)
    text = models.TextField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["evaluation_set", "external_id"], name="evaluation_query_per_set"
            )
        ]

    def __str__(self) -> str:
        return f"{self.evaluation_set_id}:{self.external_id}"


class Judgment(models.Model):
    evaluation_set = models.ForeignKey(
        EvaluationSet, on_delete=models.CASCADE, related_name="judgments"
    )
    query_id = models.CharField(max_length=1000)
    document_id = models.CharField(max_length=1000)
    relevant = models.BooleanField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["evaluation_set", "query_id", "document_id"],
                name="judgment_per_set_query_document",
            )
        ]

    def __str__(self) -> str:
        return f"{self.evaluation_set_id}:{self.query_id}:{self.document_id}"


class EvaluationRun(models.Model):
    """One evaluation's figures, as `evaluate --json` prints them ({"paths", "slices"}),
    kept so `evaluate --last` and the metrics can show the latest without re-running."""

    class Kind(models.TextChoices):
        EVALUATE = "evaluate"  # `manage.py evaluate`: every judged query
        GUARDRAIL = "guardrail"  # the periodic task: a sample, against the live system

    evaluation_set = models.ForeignKey(EvaluationSet, on_delete=models.CASCADE, related_name="runs")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    finished_at = models.DateTimeField()
    k = models.PositiveSmallIntegerField()
    query_count = models.PositiveIntegerField()
    figures = models.JSONField()
    # Path -> queries it could not answer in its own mode (scored 0, never excused).
    failures = models.JSONField(default=dict)

    class Meta:
        indexes = [models.Index(fields=["kind", "-finished_at"], name="evaluation_run_latest")]

    def __str__(self) -> str:
        return f"{self.evaluation_set_id}:{self.kind}:{self.finished_at:%Y-%m-%d %H:%M}"

from django.db import models


class MetricRollup(models.Model):
    """One minute's increase of one series of one process's metrics (ops/rollups.py):
    how many searches answered in a mode, how many fell in a latency bucket, ... Rows of
    the same minute and series from several processes (or several flushes) add up; a
    gauge's rows (the vector breaker) are read with max. Rows older than the retention
    are deleted by the flushes themselves (ops/rollup_writer.py)."""

    id = models.BigAutoField(primary_key=True)
    minute = models.DateTimeField()
    metric = models.CharField(max_length=100)  # a sample name: retrieval_completed_total
    labels = models.JSONField(default=dict)  # label values from the metric's fixed sets
    value = models.FloatField()

    class Meta:
        # The table and its index keep the names they were made with (the model moved
        # here from retrieval; ops/migrations/0001 says how).
        db_table = "retrieval_metric_rollup"
        indexes = [models.Index(fields=["minute"], name="retrieval_rollup_minute")]
        # The ops page is no model; its permission sits on the figures it shows.
        permissions = [("view_ops_page", "Can view the ops page")]

    def __str__(self) -> str:
        return f"{self.metric}{self.labels} at {self.minute:%H:%M}: {self.value:g}"

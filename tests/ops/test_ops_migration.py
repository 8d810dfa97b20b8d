"""The metric roll-ups and the ops page's permission move to the ops app with what they
hold: a database migrated from before the move keeps its roll-up rows, readable through
the ops app's model, and every group that could see the ops page still can, through the
ops app's permission; the ingestion permission it had is gone."""

from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import Group, Permission
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from ops.models import MetricRollup

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("retrieval", "0006_warm_up"), ("ops", None)]
MINUTE = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _migrate(targets: "list[tuple[str, str | None]] | list[tuple[str, str]]") -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return executor


def _latest() -> list[tuple[str, str]]:
    return list(MigrationExecutor(connection).loader.graph.leaf_nodes())


def test_a_database_from_before_the_move_keeps_its_rows_and_grants() -> None:
    latest = _latest()
    executor = _migrate(BEFORE)
    try:
        # Every other app as it is, retrieval before the move, no ops app.
        before = [n for n in latest if n[0] not in {"ops", "retrieval"}]
        old = executor.loader.project_state([*before, ("retrieval", "0006_warm_up")]).apps
        old.get_model("retrieval", "MetricRollup").objects.create(
            minute=MINUTE, metric="retrieval_completed_total", labels={"mode": "hybrid"}, value=3
        )
        permission = old.get_model("auth", "Permission").objects.get(
            codename="view_ops_page", content_type__app_label="ingestion"
        )
        group = old.get_model("auth", "Group").objects.create(name="ops-before-the-move")
        group.permissions.add(permission)
    finally:
        _migrate(latest)

    row = MetricRollup.objects.get(minute=MINUTE)
    assert (row.metric, row.labels, row.value) == (
        "retrieval_completed_total",
        {"mode": "hybrid"},
        3,
    )
    granted = Group.objects.get(name="ops-before-the-move").permissions.get()
    assert (granted.content_type.app_label, granted.codename) == ("ops", "view_ops_page")
    assert not Permission.objects.filter(
        codename="view_ops_page", content_type__app_label="ingestion"
    ).exists()

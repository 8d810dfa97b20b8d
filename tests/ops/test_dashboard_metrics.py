"""Every metric the alert rules and the dashboard name is one the running app exports (or a
recording rule of rules.yml): a renamed metric or a typo fails here, not as an alert that
never fires or a panel that stays empty."""

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from evaluation.guardrail import MODES
from evaluation.models import EvaluationRun, EvaluationSet
from ingestion.indexing import embed_pending_batch
from ingestion.models import Source
from ingestion.polling import ingest_payload
from tests.deploy_files import (
    dashboard,
    dashboard_expressions,
    dashboard_panels,
    metric_names,
    rules,
)
from tests.factories import source
from tests.feeds import rss

# The samples each type of metric family exports under its own name: a labelled counter or
# histogram has none until its first event, but its family is declared from the start.
_SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "summary": ("", "_count", "_sum", "_created"),
}


def _exported(text: str) -> set[str]:
    return {
        family.name + suffix
        for family in text_string_to_metric_families(text)
        for suffix in _SUFFIXES.get(family.type, ("",))
    }


def _ingest_and_guard() -> None:
    """An ingestion through the pipeline, embedded, and a recall-guardrail run (the gauges
    of the latest run exist only once one has finished)."""
    feed = source("Listings feed")
    ingest_payload(feed, rss([("a", "Jazz quartet", "Bebop.")]), started_at=timezone.now())
    while embed_pending_batch():
        pass
    judged = EvaluationSet.objects.create(
        name="guarded",
        layout="beir",
        source=source("evaluation: guarded", kind=Source.Kind.EDITORIAL),
        imported_at=timezone.now(),
    )
    EvaluationRun.objects.create(
        evaluation_set=judged,
        kind=EvaluationRun.Kind.GUARDRAIL,
        finished_at=timezone.now(),
        k=10,
        query_count=1,
        figures={"paths": {mode: {"recall@10": 1.0} for mode in MODES}},
    )


def test_metric_names_are_the_selectors_not_functions_labels_or_keywords() -> None:
    expr = (
        'sum by (kind, le) (rate(a_bucket{le="0.15",mode!~"x|y"}[$__rate_interval]))'
        " / ignoring(mode) group_left sum(increase(b_total[1h] offset 5m))"
        " > bool 0.1 unless on() (c or vector(0)) and changes(max(d_open)[1h:])"
        " or rec:ratio:rate5m > 14.4 * 0.01"
    )

    assert metric_names(expr) == {"a_bucket", "b_total", "c", "d_open", "rec:ratio:rate5m"}


def test_every_panel_reads_the_chosen_data_source() -> None:
    variables = dashboard()["templating"]["list"]
    assert {"name": "datasource", "type": "datasource", "query": "prometheus"}.items() <= (
        variables[0].items()
    )
    panels = dashboard_panels()
    assert len({panel["id"] for panel in panels}) == len(panels)
    for panel in panels:
        for target in panel.get("targets", []):
            assert (
                panel["datasource"]
                == target["datasource"]
                == {
                    "type": "prometheus",
                    "uid": "${datasource}",
                }
            ), panel["title"]


@pytest.mark.django_db(transaction=True)  # the lexical lag is recorded on commit
async def test_every_metric_the_rules_and_the_dashboard_use_is_exported(
    async_client: AsyncClient, warmed_up: None
) -> None:
    # Whatever its outcome on a busy machine (a fallback, even a 503): the metrics it
    # records are declared either way.
    await async_client.get("/api/search", {"q": "organ recital"})
    await sync_to_async(_ingest_and_guard)()
    response = await async_client.get("/metrics")
    assert response.status_code == 200

    exported = _exported(response.content.decode())
    recorded = {rule["record"] for rule in rules() if "record" in rule}
    used = {
        name
        for expr in [rule["expr"] for rule in rules()] + dashboard_expressions()
        for name in metric_names(expr)
    }
    # The reading of the expressions found names at all, from both files.
    assert {"retrieval_request_seconds_bucket", "evaluation_guardrail_recall_at_10"} <= used
    assert sorted(used - recorded - exported) == []

"""The budgets looked at again after a change (ops/review.py): a new active generation, or
listings grown by more than the set fraction, since the budgets were chosen makes the ops
page say so, until an ops member records a review (an editor cannot)."""

import pytest
from django.test import Client

from ingestion import generations
from ingestion.embedding import DIMENSIONS, MODEL_NAME
from ingestion.models import Listing
from ops import review
from retrieval.models import BudgetConditions
from tests import editor_personas, ops_personas

pytestmark = pytest.mark.django_db


def _notice(client: Client) -> str | None:
    html = client.get("/ops/").content.decode()
    if 'id="budgets-review"' not in html:
        return None
    start = html.index('id="budgets-review"')
    return html[start : html.index("</div>", start)]


def test_a_new_generation_and_more_listings_ask_for_a_review(client: Client) -> None:
    first = generations.ensure_active_generation(MODEL_NAME, DIMENSIONS)
    Listing.objects.bulk_create([Listing(title=f"Talk {n}") for n in range(4)])
    client.force_login(ops_personas.ops_member())
    assert _notice(client) is None  # first seen: the baseline
    assert BudgetConditions.objects.get().why == BudgetConditions.Why.FIRST_SEEN

    Listing.objects.bulk_create([Listing(title=f"Walk {n}") for n in range(2)])  # +50 %
    newer = generations.create_generation(MODEL_NAME, DIMENSIONS)
    generations.activate(newer)

    said = _notice(client)
    assert said is not None
    assert f"the active generation is {newer.pk}, not {first.pk}" in said
    assert "active listings: 6 against 4" in said

    client.post("/ops/budgets/reviewed/")
    assert _notice(client) is None
    assert BudgetConditions.objects.latest("pk").why == BudgetConditions.Why.REVIEWED


def test_a_small_move_asks_for_nothing() -> None:
    then = review.record(BudgetConditions.Why.REVIEWED, None, review.Conditions(1, 100, 0, 90.0))
    assert review.changes(then, review.Conditions(1, 120, 0, 80.0), 0.25) == []
    assert review.changes(then, review.Conditions(1, 100, 1, 50.0), 0.25) == [
        "replicas: 1 against 0",
        "the capacity limit (searches/s): 50 against 90",
    ]


def test_an_editor_cannot_record_a_review(client: Client) -> None:
    client.force_login(editor_personas.editor())
    assert client.post("/ops/budgets/reviewed/").status_code == 403
    assert not BudgetConditions.objects.filter(why=BudgetConditions.Why.REVIEWED).exists()

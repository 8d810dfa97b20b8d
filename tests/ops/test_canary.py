"""Budget canaries: readers assigned to arms by a stable hash, the search path running
each arm by its budgets as Postgres says (so they survive a restart), the ops page's
start, promote and roll back for ops members only, and the automatic rollback driven by
an injected clock over roll-ups written as the processes would."""

from datetime import datetime, timedelta

import pytest
from django.test import Client, RequestFactory
from prometheus_client import REGISTRY

from ingestion.embedding import DIMENSIONS, MODEL_NAME
from ingestion.generations import ensure_active_generation
from ops import canary
from ops.canary import Minute, verdict
from ops.models import MetricRollup
from retrieval.bounds.arms import CanaryBudgets, InForce, arm_of, budgets_for
from retrieval.models import Canary
from retrieval.pg.budgets import BudgetsLookup
from retrieval.service import budgets
from retrieval.web.api import request_deadline
from retrieval.web.reader import READER_COOKIE
from tests import editor_personas, ops_personas

CANDIDATE = CanaryBudgets(id=7, vector_budget_ms=30.0, deadline_ms=150.0, share=0.1)


def test_a_reader_stays_in_one_arm_and_the_share_is_kept() -> None:
    readers = [f"reader-{n}" for n in range(10_000)]
    arms = [arm_of(CANDIDATE, reader) for reader in readers]
    assert arms == [arm_of(CANDIDATE, reader) for reader in readers]  # stable
    assert 0.09 <= arms.count("canary") / len(readers) <= 0.11
    # Another canary draws its arm afresh: not the same readers again.
    other = CanaryBudgets(8, 30.0, 150.0, 0.1)
    again = {r for r in readers if arm_of(other, r) == "canary"}
    first = {r for r, arm in zip(readers, arms, strict=True) if arm == "canary"}
    assert len(again & first) < 0.2 * len(first)


def test_each_arm_searches_by_its_budgets() -> None:
    in_force = InForce(40.0, 150.0, CANDIDATE)
    reader = next(r for r in (f"r{n}" for n in range(1000)) if arm_of(CANDIDATE, r) == "canary")
    control = next(r for r in (f"r{n}" for n in range(1000)) if arm_of(CANDIDATE, r) == "control")
    assert budgets_for(in_force, reader) == ("canary", 30.0, 150.0)
    assert budgets_for(in_force, control) == ("control", 40.0, 150.0)
    assert budgets_for(InForce(40.0, 150.0, None), reader) == ("none", 40.0, 150.0)


@pytest.mark.django_db(transaction=True)  # the lookup reads through the search path's pool
async def test_the_search_path_reads_the_canary_from_postgres_and_exports_it() -> None:
    from asgiref.sync import sync_to_async

    @sync_to_async
    def started() -> Canary:
        return canary.start(ops_personas.ops_member(), 25.0, 150.0, 0.5)

    running = await started()
    lookup = BudgetsLookup()  # a process started now: nothing read yet
    value = await lookup.refresh()
    assert value == InForce(40.0, 150.0, CanaryBudgets(running.pk, 25.0, 150.0, 0.5))
    labels = {"arm": "canary", "budget": "vector"}
    assert REGISTRY.get_sample_value("retrieval_budget_ms", labels) == 25.0
    assert REGISTRY.get_sample_value("retrieval_canary_share") == 0.5
    # The process's own lookup, as a request reads it: each reader in its arm, by its
    # cookie, the arm's budgets planned into its deadline.
    await budgets().refresh()
    for reader, arm, vector_ms in (("r-canary", "canary", 25.0), ("r-control", "control", 40.0)):
        while arm_of(value.canary, reader) != arm:  # type: ignore[arg-type]
            reader += "+"
        request = RequestFactory().get("/api/search", {"q": "jazz"})
        request.COOKIES[READER_COOKIE] = reader
        deadline = request_deadline(request, None)
        assert deadline.arm == arm
        assert deadline.vector is not None
        assert deadline.vector.at - deadline.started_at == pytest.approx(vector_ms / 1000)


def test_verdict_rolls_back_only_on_a_sustained_breach() -> None:
    over = Minute(answers=20, fallbacks=5, over_objective=0)  # 25 % fallbacks
    fine = Minute(answers=20, fallbacks=1, over_objective=0)
    slow = Minute(answers=20, fallbacks=0, over_objective=2)  # 10 % past the objective
    assert verdict([over] * 5, 0.10, 50) == Canary.Why.FALLBACK_SHARE
    assert verdict([over, over, fine, over, over], 0.10, 50) is None  # not sustained
    assert verdict([over, over], 0.10, 50) is None  # 40 searches say nothing yet
    assert verdict([slow] * 3, 0.10, 50) == Canary.Why.P99
    assert verdict([Minute(0, 0, 0), over, over, over], 0.10, 50) == Canary.Why.FALLBACK_SHARE


def _rollup(minute: datetime, metric: str, value: float, **labels: str) -> MetricRollup:
    return MetricRollup(minute=minute, metric=metric, labels=labels, value=value)


@pytest.mark.django_db
def test_a_canary_over_its_fallback_objective_for_the_window_is_rolled_back(
    client: Client,
) -> None:
    member = ops_personas.ops_member()
    running = canary.start(member, 5.0, 150.0, 0.2)
    began = running.started_at.replace(second=0, microsecond=0)
    rows = []
    for n in range(5):
        minute = began + timedelta(minutes=n)
        rows += [
            _rollup(minute, "retrieval_arm_answers_total", 15, arm="canary", mode="hybrid"),
            _rollup(
                minute, "retrieval_arm_answers_total", 5, arm="canary", mode="lexical_fallback"
            ),
            _rollup(minute, "retrieval_arm_answers_total", 80, arm="control", mode="hybrid"),
        ]
    MetricRollup.objects.bulk_create(rows)

    # Four minutes in, the window is not yet over: nothing happens.
    assert canary.watch(began + timedelta(minutes=4, seconds=30)) is None
    rolled = canary.watch(began + timedelta(minutes=5, seconds=30))

    assert rolled is not None
    assert (rolled.state, rolled.ended_because, rolled.ended_by) == (
        Canary.State.ROLLED_BACK,
        Canary.Why.FALLBACK_SHARE,
        None,
    )
    assert rolled.figures["canary"]["answers"] == 100
    assert rolled.figures["canary"]["fallback_share"]["value"] == pytest.approx(0.25)
    assert rolled.figures["control"]["fallback_share"]["value"] == 0.0
    assert canary.in_force().vector_budget_ms == 40.0  # the control's, as before
    # The ops page keeps the decision with the figures it was taken on.
    client.force_login(member)
    ended = client.get("/ops/").content.decode().split('id="canary-ended"')[1].split("</table>")[0]
    assert "<td>Rolled Back</td><td>Fallback Share</td><td>automatic</td>" in ended
    assert "<td>400 / 100</td><td>0.0% / 25.0%</td>" in ended


@pytest.mark.django_db
def test_an_ops_member_starts_promotes_and_the_budgets_are_in_force(client: Client) -> None:
    ensure_active_generation(MODEL_NAME, DIMENSIONS)  # the what-if is of its searches
    client.force_login(ops_personas.ops_member())
    response = client.post(
        "/ops/canary/", {"vector_budget_ms": "30", "deadline_ms": "150", "share_percent": "10"}
    )
    assert response.status_code == 302
    running = canary.running()
    assert running is not None
    assert (running.vector_budget_ms, running.share, running.control_vector_budget_ms) == (
        30.0,
        0.1,
        40.0,
    )
    page = client.get("/ops/").content.decode()
    assert 'id="canary-arms"' in page
    assert "Promote" in page

    client.post(f"/ops/canary/{running.pk}/promoted/")

    running.refresh_from_db()
    assert (running.state, running.ended_because) == (Canary.State.PROMOTED, Canary.Why.OPERATOR)
    assert running.ended_by is not None
    assert canary.in_force().vector_budget_ms == 30.0
    page = client.get("/ops/").content.decode()
    assert "promoted from canary" in page
    # The what-if is of the budget now in force.
    assert "30 ms (in force)" in page


@pytest.mark.django_db
def test_an_ops_member_rolls_back(client: Client) -> None:
    member = ops_personas.ops_member()
    running = canary.start(member, 30.0, 150.0, 0.1)
    client.force_login(member)
    client.post(f"/ops/canary/{running.pk}/rolled_back/")
    running.refresh_from_db()
    assert running.state == Canary.State.ROLLED_BACK
    assert canary.in_force().vector_budget_ms == 40.0


@pytest.mark.django_db
@pytest.mark.parametrize("persona", [editor_personas.editor, ops_personas.staff_without_ops])
def test_others_can_neither_start_nor_end_a_canary(client: Client, persona: object) -> None:
    running = canary.start(ops_personas.ops_member(), 30.0, 150.0, 0.1)
    client.force_login(persona())  # type: ignore[operator]
    assert client.post(f"/ops/canary/{running.pk}/promoted/").status_code == 403
    assert client.post("/ops/canary/", {"vector_budget_ms": "30"}).status_code == 403
    running.refresh_from_db()
    assert running.state == Canary.State.RUNNING


@pytest.mark.django_db
def test_a_second_canary_and_budgets_no_search_can_run_by_are_refused() -> None:
    member = ops_personas.ops_member()
    with pytest.raises(ValueError, match="vector budget must be at least"):
        canary.start(member, 150.0, 150.0, 0.1)
    with pytest.raises(ValueError, match="one of the what-if's"):
        canary.start(member, 33.0, 150.0, 0.1)
    with pytest.raises(ValueError, match="share"):
        canary.start(member, 30.0, 150.0, 0.9)
    canary.start(member, 30.0, 150.0, 0.1)
    with pytest.raises(ValueError, match="running already"):
        canary.start(member, 20.0, 150.0, 0.1)

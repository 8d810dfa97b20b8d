"""Whether the budgets in force were chosen under other conditions than today's: another
active generation, or listings, replicas or the declared capacity limit moved by more
than SEARCH_REVIEW_FRACTION since they were chosen (a canary promoted), looked at again
(an ops member's review), or, with nothing on record, first seen. The ops page then says
so beside the what-if, which reads the active generation's searches alone: the new
distribution."""

from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.models import User

from ingestion import generations
from ingestion.models import Audience, Listing
from retrieval.models import BudgetConditions
from retrieval.pg import route


@dataclass(frozen=True)
class Conditions:
    generation_id: int | None
    listings: int
    replicas: int
    capacity_per_s: float | None


def now() -> Conditions:
    active = generations.active_generation()
    return Conditions(
        generation_id=active.pk if active else None,
        listings=Listing.objects.filter(
            status=Listing.Status.ACTIVE, audience=Audience.PUBLIC
        ).count(),
        replicas=len(route.replicas()),
        capacity_per_s=settings.SEARCH_CAPACITY_PER_S,
    )


def record(why: str, by: User | None, conditions: Conditions | None = None) -> BudgetConditions:
    seen = conditions or now()
    return BudgetConditions.objects.create(
        why=why,
        by=by,
        generation_id=seen.generation_id,
        listings=seen.listings,
        replicas=seen.replicas,
        capacity_per_s=seen.capacity_per_s,
    )


def baseline(today: Conditions) -> BudgetConditions:
    """The latest conditions on record; today's, recorded as first seen, when none are."""
    latest = BudgetConditions.objects.order_by("-recorded_at", "-pk").first()
    return latest or record(BudgetConditions.Why.FIRST_SEEN, None, today)


def changes(then: BudgetConditions, today: Conditions, fraction: float) -> list[str]:
    """What moved enough since `then` to look at the budgets again, as the page says it."""
    said = []
    if today.generation_id != then.generation_id:
        said.append(f"the active generation is {today.generation_id}, not {then.generation_id}")
    for what, before, after in (
        ("active listings", then.listings, today.listings),
        ("replicas", then.replicas, today.replicas),
        ("the capacity limit (searches/s)", then.capacity_per_s, today.capacity_per_s),
    ):
        if before is None or after is None:
            continue
        if _moved(before, after, fraction):
            said.append(f"{what}: {after:,g} against {before:,g}")
    return said


def _moved(before: float, after: float, fraction: float) -> bool:
    if before == 0:
        return after != 0
    return abs(after - before) / before > fraction

"""The ops page's budget canary actions (ops/canary.py): start, promote, roll back. POST
only, for ops members (permission `retrieval.run_canary`), each back to the ops page with
what happened; anyone else who may see the page sees the canary but no buttons."""

from django.contrib import messages
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponseRedirect
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from ops import canary, review
from retrieval.models import BudgetConditions, Canary

PERMISSION = "retrieval.run_canary"


def may_run(user: object) -> bool:
    return isinstance(user, User) and user.has_perm(PERMISSION)


def _runner(request: HttpRequest) -> User:
    if not may_run(request.user):
        raise PermissionDenied
    assert isinstance(request.user, User)
    return request.user


def _back() -> HttpResponseRedirect:
    return HttpResponseRedirect(reverse("ops-page") + "#canary-heading")


@require_POST
def start(request: HttpRequest) -> HttpResponseRedirect:
    by = _runner(request)
    try:
        started = canary.start(
            by,
            float(request.POST["vector_budget_ms"]),
            float(request.POST["deadline_ms"]),
            float(request.POST["share_percent"]) / 100,
        )
    except (KeyError, ValueError) as exc:
        messages.error(request, f"No canary started: {exc}")
    else:
        messages.success(request, f"Started {started}.")
    return _back()


@require_POST
def end(request: HttpRequest, pk: int, state: str) -> HttpResponseRedirect:
    by = _runner(request)
    if state not in (Canary.State.PROMOTED, Canary.State.ROLLED_BACK):
        raise PermissionDenied
    try:
        ended = canary.end(
            Canary.objects.get(pk=pk), state, by, Canary.Why.OPERATOR, timezone.now()
        )
    except (Canary.DoesNotExist, ValueError) as exc:
        messages.error(request, f"Nothing changed: {exc}")
    else:
        messages.success(request, f"{ended}: {ended.get_state_display().lower()}.")
    return _back()


@require_POST
def reviewed(request: HttpRequest) -> HttpResponseRedirect:
    """The budgets stay as they are, looked at under today's conditions."""
    review.record(BudgetConditions.Why.REVIEWED, _runner(request))
    messages.success(request, "Recorded: the budgets were reviewed under today's conditions.")
    return _back()

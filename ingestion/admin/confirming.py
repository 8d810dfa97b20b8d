"""Admin actions that ask first: a page saying what the action will do (and, for some, a
form asking why), posted back to the same action with the same selection. Nothing is
changed until that second post, the one with the confirm button's name in it."""

from collections.abc import Iterable
from typing import Any, TypeVar

from django import forms
from django.contrib import admin
from django.contrib.admin import helpers
from django.db.models import Model
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import reverse

CONFIRM = "confirmed"

F = TypeVar("F", bound=forms.Form)


def is_confirmed(request: HttpRequest) -> bool:
    return CONFIRM in request.POST


def answered(request: HttpRequest, form_class: type[F]) -> F:
    """The action's form: bound to what was typed once the page was confirmed, unbound
    (and so never valid) on the action's first post from the changelist."""
    return form_class(request.POST if is_confirmed(request) else None)


def ask(
    model_admin: "admin.ModelAdmin[Any]",
    request: HttpRequest,
    *,
    action: str,
    selected: Iterable[Model],
    template: str,
    title: str,
    form: forms.Form | None = None,
    **context: object,
) -> TemplateResponse:
    """The confirmation page of `action` for the `selected` rows, from `template` (which
    extends admin/ingestion/confirm_action.html and says what will happen)."""
    opts = model_admin.model._meta
    return TemplateResponse(
        request,
        template,
        {
            **model_admin.admin_site.each_context(request),
            "title": title,
            "opts": opts,
            "action": action,
            "selected": [row.pk for row in selected],
            "checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "confirm": CONFIRM,
            "form": form,
            "changelist_url": reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist"),
            **context,
        },
    )

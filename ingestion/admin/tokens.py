"""Editorial API tokens: added with the token shown once, listed by digest, revoked."""

from typing import Any
from weakref import WeakKeyDictionary

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from ingestion.models import ApiToken
from ingestion.tokens import issue_token

# The token issued while a request adds one, for that request's response alone.
_issued: WeakKeyDictionary[HttpRequest, str] = WeakKeyDictionary()
# After creation only a token's name may change: one moved to another source, or revoked
# and brought back, would grant what nobody issued; its hash is what the token is.
_FIXED_ONCE_ADDED = ("token_hash", "created_at", "revoked")


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin[ApiToken]):
    list_display = ("name", "source", "created_at", "revoked")
    list_filter = ("revoked", "source")
    search_fields = ("name",)
    actions = ("revoke_selected",)

    def get_fields(self, request: HttpRequest, obj: ApiToken | None = None) -> tuple[str, ...]:
        added = ("name", "source")
        return added if obj is None else (*added, *_FIXED_ONCE_ADDED)

    def get_readonly_fields(
        self, request: HttpRequest, obj: ApiToken | None = None
    ) -> tuple[str, ...]:
        return () if obj is None else ("source", *_FIXED_ONCE_ADDED)

    def save_model(
        self, request: HttpRequest, obj: ApiToken, form: "forms.ModelForm[ApiToken]", change: bool
    ) -> None:
        if not change:
            _issued[request] = issue_token(obj)
        super().save_model(request, obj, form, change)

    def response_add(
        self, request: HttpRequest, obj: ApiToken, post_url_continue: str | None = None
    ) -> HttpResponse:
        token = _issued.pop(request, None)
        if token is None:
            return super().response_add(request, obj, post_url_continue)
        context: dict[str, Any] = {
            **self.admin_site.each_context(request),
            "title": f"Token for {obj.name}",
            "api_token": obj,
            "token": token,
        }
        # The token's one copy; admin_view has already marked every admin page no-store.
        return TemplateResponse(request, "admin/ingestion/apitoken/issued.html", context)

    @admin.action(description="Revoke selected tokens", permissions=["change"])
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        revoked = queryset.filter(revoked=False).update(revoked=True)
        self.message_user(request, f"Revoked {revoked} token(s): refused from the next request.")

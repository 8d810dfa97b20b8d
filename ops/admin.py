"""The ops page on the admin's index and sidebar, for those who may see it: an entry of
its own after the apps' (the page is no model, so no ModelAdmin can list it). The admin
imports this module itself (autodiscovery), so it needs no line in anyone's admin."""

from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.urls import reverse

from ops.page import may_see

_apps_of = admin.site.get_app_list


def _with_ops_page(request: HttpRequest, app_label: str | None = None) -> list[dict[str, Any]]:
    apps = _apps_of(request, app_label)
    if app_label is None and may_see(request.user):
        url = reverse("ops-page")
        page = {"name": "Ops page", "object_name": "OpsPage", "admin_url": url, "view_only": True}
        apps.append({"name": "Operations", "app_label": "ops", "app_url": url, "models": [page]})
    return apps


admin.site.get_app_list = _with_ops_page  # type: ignore[method-assign]  # the one hook AdminSite has for its index

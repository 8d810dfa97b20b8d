from django.contrib import admin
from django.urls import include, path

from ingestion.api import post_records
from searchsite import health, openapi, static_files
from searchsite.metrics_view import metrics

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("healthz/ready", health.ready, name="healthz-ready"),
    path("healthz/live", health.live, name="healthz-live"),
    path("metrics", metrics, name="metrics"),
    path("admin/", admin.site.urls),
    path("static/<path:path>", static_files.serve, name="static"),
    path("api/editorial/records", post_records, name="editorial-records"),
    path("", include("evaluation.urls")),
    path("", include("retrieval.web.urls")),
    path("", include("ops.urls")),
    # After the search's own patterns, so resolving a search tries not one more.
    path("api/schema", openapi.schema, name="api-schema"),
    path("api/docs", openapi.docs, name="api-docs"),
]

handler500 = "searchsite.errors.handler500"

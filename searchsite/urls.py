from django.contrib import admin
from django.urls import include, path

from searchsite.health import healthz

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("", include("django_prometheus.urls")),
    path("", include("retrieval.urls")),
]

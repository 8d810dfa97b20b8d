from django.urls import path

from ops import canary_views, page

urlpatterns = [
    path("ops/", page.ops_page, name="ops-page"),
    path("ops/canary/", canary_views.start, name="ops-canary-start"),
    path("ops/budgets/reviewed/", canary_views.reviewed, name="ops-budgets-reviewed"),
    path("ops/canary/<int:pk>/<str:state>/", canary_views.end, name="ops-canary-end"),
]

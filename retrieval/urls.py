from django.urls import path

from retrieval import ops_page, page, views

urlpatterns = [
    path("", page.search_page, name="search-page"),
    path("api/search", views.search_api, name="search-api"),
    path("ops/", ops_page.ops_page, name="ops-page"),
]

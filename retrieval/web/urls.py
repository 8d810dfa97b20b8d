from django.urls import path

from retrieval.web import api as views
from retrieval.web import page

urlpatterns = [
    path("", page.search_page, name="search-page"),
    path("api/search", views.search_api, name="search-api"),
    path("api/suggest", views.suggest_api, name="suggest-api"),
]

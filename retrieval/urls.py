from django.urls import path

from retrieval import page, views

urlpatterns = [
    path("", page.search_page, name="search-page"),
    path("api/search", views.search_api, name="search-api"),
]

from django.urls import path

from retrieval import views

urlpatterns = [
    path("", views.search_page, name="search-page"),
    path("api/search", views.search_api, name="search-api"),
]

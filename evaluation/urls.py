from django.urls import path

from evaluation import views

urlpatterns = [
    path("api/evaluation/search", views.search, name="evaluation-search"),
]

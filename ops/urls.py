from django.urls import path

from ops import page

urlpatterns = [path("ops/", page.ops_page, name="ops-page")]

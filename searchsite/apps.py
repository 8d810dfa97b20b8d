from django.apps import AppConfig


class SearchsiteConfig(AppConfig):
    name = "searchsite"

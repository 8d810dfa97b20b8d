from django.apps import AppConfig


class SearchsiteConfig(AppConfig):
    name = "searchsite"

    def ready(self) -> None:
        from searchsite import checks  # noqa: F401  (registers the system checks)

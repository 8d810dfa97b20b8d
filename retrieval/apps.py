from django.apps import AppConfig


class RetrievalConfig(AppConfig):
    name = "retrieval"

    def ready(self) -> None:
        from retrieval.bounds import checks  # noqa: F401  (registers the system checks)

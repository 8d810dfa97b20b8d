from django.apps import AppConfig
from django.db.backends.base.base import BaseDatabaseWrapper

from resilience.backend_priority import BACKEND_SQL, client_niceness, lower_backend


class SearchsiteConfig(AppConfig):
    name = "searchsite"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created

        from searchsite import checks  # noqa: F401  (registers the system checks)

        connection_created.connect(_backend_at_client_priority)


def _backend_at_client_priority(connection: BaseDatabaseWrapper, **_: object) -> None:
    """A worker at WORKER_NICE has Postgres do its work at that priority too."""
    niceness = client_niceness()
    if niceness > 0:
        with connection.cursor() as cursor:
            cursor.execute(BACKEND_SQL)
            pid, data_directory = cursor.fetchone()
        lower_backend(pid, data_directory, niceness)

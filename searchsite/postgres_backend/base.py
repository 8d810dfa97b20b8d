"""Django's PostgreSQL backend, with every round trip watched for a stalled server
(searchsite/stalled_database.py): statements, commits, rollbacks and the health check of
a reused connection."""

from typing import Any

from django.db.backends.postgresql import base

from searchsite.stalled_database import watched


class DatabaseWrapper(base.DatabaseWrapper):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.execute_wrappers.append(self._watched_statement)

    def _watched_statement(
        self, execute: Any, sql: str, params: Any, many: bool, context: dict[str, Any]
    ) -> Any:
        with watched(self.connection):
            return execute(sql, params, many, context)

    def is_usable(self) -> bool:
        with watched(self.connection):
            usable: bool = super().is_usable()
        return usable

    def _commit(self) -> None:
        with watched(self.connection):
            super()._commit()  # type: ignore[misc]  # private, so not in django-stubs

    def _rollback(self) -> None:
        with watched(self.connection):
            super()._rollback()  # type: ignore[misc]  # private, so not in django-stubs

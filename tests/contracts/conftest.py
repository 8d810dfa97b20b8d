import pytest


@pytest.fixture(
    params=["fake", pytest.param("postgres", marks=pytest.mark.django_db(transaction=True))]
)
def database_url(request: pytest.FixtureRequest) -> str | None:
    """Each index contract runs twice: against the fake (None: it needs no database) and
    against Postgres (the test database's URL; the database is open to the test, which may
    commit, and emptied after it)."""
    if request.param == "fake":
        return None
    url: str = request.getfixturevalue("test_database_url")
    return url

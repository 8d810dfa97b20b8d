"""No Docker engine runs here, so check docker-compose.yml's shape instead of running it."""

from pathlib import Path
from typing import Any

import yaml

COMPOSE = Path(__file__).resolve().parents[1] / "docker-compose.yml"


def _compose() -> dict[str, Any]:
    compose: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return compose


def test_it_names_every_service_with_a_health_check() -> None:
    services = _compose()["services"]
    assert {"postgres", "valkey", "web", "worker", "beat"} <= set(services)
    for name in ("postgres", "valkey", "web", "worker", "beat"):
        assert services[name]["healthcheck"]["test"], name


def test_it_runs_pgvector_on_postgres_18_and_persists_data() -> None:
    compose = _compose()
    assert compose["services"]["postgres"]["image"] == "pgvector/pgvector:pg18"
    assert "--appendonly" in compose["services"]["valkey"]["command"]
    assert {"pgdata", "valkeydata"} <= set(compose["volumes"])


def test_the_application_services_share_one_image_and_environment() -> None:
    services = _compose()["services"]
    for name in ("web", "worker", "beat"):
        assert services[name]["build"] == "."
        assert "DATABASE_URL" in services[name]["environment"]
        assert "REDIS_URL" in services[name]["environment"]
        assert services[name]["depends_on"]["migrate"]["condition"] == (
            "service_completed_successfully"
        )

"""No Docker engine runs here, so check docker-compose.yml's shape instead of running it:
that it runs what `make run` runs (searchsite/supervisor.py), with the processes' metrics
in one place, and that Prometheus and Grafana get the files of deploy/."""

import re
import sys
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from searchsite import supervisor
from searchsite.embedded import replica
from tests.deploy_files import DASHBOARD, PROMETHEUS, ROOT

COMPOSE = ROOT / "docker-compose.yml"
GRAFANA_PROVISIONING = ROOT / "deploy" / "grafana" / "provisioning"
APPLICATION = ("migrate", "web", "beat", *(worker.name for worker in supervisor.WORKERS))
# `${NAME:-default}` and `${NAME:?message}`: compose's interpolation, which yaml leaves be.
_VARIABLE = re.compile(r"\$\{(\w+)(?::-([^}]*)|:\?[^}]*)?\}")


def _compose() -> dict[str, Any]:
    compose: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return compose


def _services() -> dict[str, Any]:
    services: dict[str, Any] = _compose()["services"]
    return services


def _with_defaults(value: str) -> str:
    """A value as compose reads it with none of its variables set but the defaulted ones."""
    return _VARIABLE.sub(lambda match: match.group(2) or "", value)


def _mounts(service: dict[str, Any]) -> dict[str, str]:
    """Where each of a service's volumes is mounted: source -> target."""
    return {
        source: target
        for source, target, *_ in (volume.split(":") for volume in service["volumes"])
    }


def _host_path(service: dict[str, Any], container_path: str) -> Path:
    """The file of the repository a bind mount puts at container_path."""
    path = PurePosixPath(container_path)
    for source, target in _mounts(service).items():
        if source.startswith("./") and path.is_relative_to(target):
            return ROOT / source / path.relative_to(target)
    raise AssertionError(f"nothing of the repository is mounted at {container_path}")


def _normalised(argv: list[str]) -> list[str]:
    """A command with what differs between a container and `make run` named, not given: the
    interpreter, the address web listens on, beat's schedule file."""
    named = ["python" if arg == sys.executable else arg for arg in argv]
    if "--host" in named:
        named[named.index("--host") + 1] = "<host>"
    return [re.sub(r"^--schedule=.*", "--schedule=<file>", arg) for arg in named]


def test_it_names_every_service_with_a_health_check() -> None:
    services = _services()
    for name in ("postgres", "valkey", "web", "beat", *(w.name for w in supervisor.WORKERS)):
        assert services[name]["healthcheck"]["test"], name


def test_it_runs_pgvector_on_postgres_18_and_persists_data() -> None:
    compose = _compose()
    assert compose["services"]["postgres"]["image"] == "pgvector/pgvector:pg18"
    assert "--appendonly" in compose["services"]["valkey"]["command"]
    assert {"pgdata", "valkeydata"} <= set(compose["volumes"])


def test_the_application_services_share_one_image_and_environment() -> None:
    services = _services()
    for name in APPLICATION:
        assert services[name]["build"] == ".", name
        assert "DATABASE_URL" in services[name]["environment"], name
        assert "REDIS_URL" in services[name]["environment"], name
    for name in set(APPLICATION) - {"migrate"}:
        assert services[name]["depends_on"]["migrate"]["condition"] == (
            "service_completed_successfully"
        ), name


def test_every_process_make_run_starts_has_a_service_with_its_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("WEB_PROCESSES", raising=False)  # the default process count, both sides
    services = _services()
    for name, argv, added_env in supervisor.commands(port=8000):
        command = [_with_defaults(arg) for arg in services[name]["command"]]
        assert _normalised(command) == _normalised(argv), name
        # Its connections carry its name, as the supervisor's children's do; and it gets
        # what else the supervisor gives it (the embedding worker's lower CPU priority).
        environment = services[name]["environment"]
        assert environment["SEARCHSITE_ROLE"] == name
        assert {key: str(environment.get(key)) for key in added_env} == added_env, name


def test_web_listens_beyond_loopback_and_publishes_only_on_it() -> None:
    web = _services()["web"]
    assert web["command"][web["command"].index("--host") + 1] == "0.0.0.0"  # noqa: S104  # other containers reach it
    assert all(port.startswith("127.0.0.1:") for port in web["ports"])


def test_the_embedding_worker_weighs_less_than_web_when_both_want_the_cpu() -> None:
    services = _services()
    web_weight = services["web"].get("cpu_shares", 1024)  # cgroups' default weight
    assert services["embed-worker"]["cpu_shares"] * 2 <= web_weight


def test_each_worker_health_check_pings_that_worker() -> None:
    services = _services()
    for worker in supervisor.WORKERS:
        check = " ".join(services[worker.name]["healthcheck"]["test"])
        assert f"-d {worker.name}@$$HOSTNAME" in check, worker.name


def test_every_application_process_writes_its_metrics_into_one_directory() -> None:
    compose = _compose()
    services = compose["services"]
    for name in APPLICATION:
        directory = services[name]["environment"]["PROMETHEUS_MULTIPROC_DIR"]
        assert _mounts(services[name])["metrics"] == directory, name
        # One pid namespace: prometheus_client's per-pid file names stay unique across the
        # containers, and web's sweep sees which of those pids are alive.
        assert services[name]["pid"] == "service:process-namespace", name
    assert "pid" not in services["process-namespace"]
    # Empty at every start, as `make run` empties its directory.
    assert compose["volumes"]["metrics"]["driver_opts"]["type"] == "tmpfs"


def test_prometheus_loads_every_rules_file_and_scrapes_web_with_the_token() -> None:
    compose = _compose()
    prometheus = compose["services"]["prometheus"]
    (config_flag,) = [arg for arg in prometheus["command"] if arg.startswith("--config.file=")]
    config_path = config_flag.removeprefix("--config.file=")
    config_file = _host_path(prometheus, config_path)
    assert config_file == PROMETHEUS / "prometheus.yml"
    config = yaml.safe_load(config_file.read_text())

    rule_files = {PROMETHEUS / name for name in config["rule_files"]}
    # The files with rule groups; the others are promtool's tests of them.
    with_groups = {
        path for path in PROMETHEUS.glob("*.yml") if "groups" in yaml.safe_load(path.read_text())
    }
    assert with_groups
    assert rule_files == with_groups

    (job,) = config["scrape_configs"]
    (target,) = [t for static in job["static_configs"] for t in static["targets"]]
    host, port = target.split(":")
    web = compose["services"][host]
    assert web["command"][web["command"].index("--port") + 1] == port
    assert host in _with_defaults(web["environment"]["DJANGO_ALLOWED_HOSTS"]).split(",")
    assert job["metrics_path"] == "/metrics"

    # The token file Prometheus reads is the secret compose makes of METRICS_BEARER_TOKEN,
    # the variable web checks the token against.
    credentials = PurePosixPath(job["authorization"]["credentials_file"])
    assert credentials.parent == PurePosixPath("/run/secrets")
    assert credentials.name in prometheus["secrets"]
    variable = compose["secrets"][credentials.name]["environment"]
    assert web["environment"]["METRICS_BEARER_TOKEN"].startswith(f"${{{variable}:?")


def test_grafana_is_provisioned_with_prometheus_and_the_dashboard() -> None:
    services = _services()
    grafana = services["grafana"]
    assert _host_path(grafana, "/etc/grafana/provisioning") == GRAFANA_PROVISIONING

    providers = yaml.safe_load(
        (GRAFANA_PROVISIONING / "dashboards" / "listings-search.yml").read_text()
    )
    (provider,) = providers["providers"]
    assert _host_path(grafana, provider["options"]["path"]) == DASHBOARD.parent
    assert DASHBOARD.is_file()

    sources = yaml.safe_load((GRAFANA_PROVISIONING / "datasources" / "prometheus.yml").read_text())
    (source,) = sources["datasources"]
    url = urlsplit(source["url"])
    assert url.hostname in services
    assert f"127.0.0.1:{url.port}:{url.port}" in services[url.hostname]["ports"]


def test_published_ports_are_bound_to_loopback() -> None:
    for name, service in _services().items():
        for port in service.get("ports", []):
            assert port.startswith("127.0.0.1:"), (name, port)


def test_no_secret_has_a_default() -> None:
    text = COMPOSE.read_text()
    for variable in ("DJANGO_SECRET_KEY", "METRICS_BEARER_TOKEN", "GRAFANA_ADMIN_PASSWORD"):
        assert f"${{{variable}:?" in text, variable
        assert f"${{{variable}:-" not in text, variable


def test_the_replica_is_a_hot_standby_of_postgres_set_as_make_runs_are() -> None:
    """The `replica` profile's postgres-replica: a base backup of `postgres` that streams
    (-R), started with the settings the embedded replicas get, and a primary that lets it
    connect for replication."""
    services = _services()
    replica_service = services["postgres-replica"]
    assert replica_service["profiles"] == ["replica"]
    assert replica_service["image"] == services["postgres"]["image"]
    script = replica_service["command"][-1]
    assert "pg_basebackup -h postgres" in script
    assert " -R " in script
    for name, value in replica.REPLICA_SETTINGS.items():
        assert f"-c {name}={value}" in script, name
    hba = _host_path(services["postgres"], "/docker-entrypoint-initdb.d/allow-replication.sh")
    assert "host replication all all scram-sha-256" in hba.read_text()
    for name in APPLICATION:
        assert _with_defaults(services[name]["environment"]["SEARCH_REPLICA_URLS"]) == "", name


def test_every_worker_can_be_scaled_to_several_containers() -> None:
    """`docker compose up --scale embed-worker=2`: no fixed container name (compose would
    refuse a second), and a Celery node name of each container's own (%h: its host name),
    which its health check pings."""
    services = _services()
    for worker in supervisor.WORKERS:
        service = services[worker.name]
        assert "container_name" not in service, worker.name
        assert f"--hostname={worker.name}@%h" in service["command"], worker.name

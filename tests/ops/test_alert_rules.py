"""deploy/prometheus: the alert rules are valid, their promtool unit tests pass, and each
alert is labelled, linked to its runbook section and shown both firing and not firing;
the dashboard's queries are valid PromQL too.

promtool comes with Debian's `prometheus` package (`.ci/run` installs it); without it the
promtool tests skip and say so, and the checks of the files themselves still run."""

import re
from pathlib import Path
from typing import Any

import yaml

from tests.deploy_files import PROMETHEUS, ROOT, RULES, dashboard_expressions, promtool, rules

RULE_TESTS = (PROMETHEUS / "rules_test.yml", PROMETHEUS / "rules_budget_test.yml")
RUNBOOK = ROOT / "docs" / "runbook.md"
RUNBOOK_LINK = "docs/runbook.md#"
SEVERITIES = {"page", "ticket"}


def _alerts() -> list[dict[str, Any]]:
    return [rule for rule in rules() if "alert" in rule]


def _alert_cases() -> list[dict[str, Any]]:
    return [
        case
        for path in RULE_TESTS
        for test in yaml.safe_load(path.read_text())["tests"]
        for case in test.get("alert_rule_test", [])
    ]


def _heading_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives headings: lower case, punctuation dropped, spaces to '-'."""
    headings = re.findall(r"^#+\s+(.+?)\s*$", markdown, flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading).lower().replace(" ", "-") for heading in headings}


def test_the_rules_are_valid() -> None:
    checked = promtool("check", "rules", RULES.name)

    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_rules_pass_their_unit_tests() -> None:
    tested = promtool("test", "rules", *(path.name for path in RULE_TESTS))

    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_the_prometheus_configuration_is_valid() -> None:
    # Syntax only: the bearer token file it names exists in the container, not here.
    checked = promtool("check", "config", "--syntax-only", "prometheus.yml")

    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_every_dashboard_query_is_valid_promql(tmp_path: Path) -> None:
    """Each query as a recording rule, which promtool parses; Grafana's interval variable
    stands for a duration."""
    queries = [expr.replace("$__rate_interval", "1m") for expr in dashboard_expressions()]
    recorded = [{"record": f"dashboard:query:{n}", "expr": expr} for n, expr in enumerate(queries)]
    path = tmp_path / "dashboard_rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": recorded}]}))

    checked = promtool("check", "rules", str(path))

    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_every_alert_has_a_severity_a_summary_and_a_runbook_section() -> None:
    anchors = _heading_anchors(RUNBOOK.read_text())

    for alert in _alerts():
        name = alert["alert"]
        assert alert["labels"]["severity"] in SEVERITIES, name
        assert alert["annotations"]["summary"], name
        runbook = alert["annotations"]["runbook"]
        assert runbook.startswith(RUNBOOK_LINK), name
        assert runbook.removeprefix(RUNBOOK_LINK) in anchors, name


def test_every_alert_is_tested_firing_and_not_firing() -> None:
    cases = _alert_cases()

    for name in (alert["alert"] for alert in _alerts()):
        outcomes = {bool(case.get("exp_alerts")) for case in cases if case["alertname"] == name}
        assert outcomes == {True, False}, name

"""deploy/prometheus: the alert rules are valid, their promtool unit tests pass, and each
alert is labelled, linked to its runbook section and shown both firing and not firing.

promtool comes with Debian's `prometheus` package (`.ci/run` installs it); without it the
promtool tests skip and say so, and the checks of the files themselves still run."""

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PROMETHEUS = ROOT / "deploy" / "prometheus"
RULES = PROMETHEUS / "rules.yml"
RULE_TESTS = (PROMETHEUS / "rules_test.yml", PROMETHEUS / "rules_budget_test.yml")
RUNBOOK = ROOT / "docs" / "runbook.md"
RUNBOOK_LINK = "docs/runbook.md#"
SEVERITIES = {"page", "ticket"}
# The 7 h and 3 d series take promtool tens of seconds on a busy machine.
PROMTOOL_TIMEOUT_S = 600


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed: apt-get install prometheus")
    return subprocess.run(
        [promtool, *args],
        capture_output=True,
        text=True,
        timeout=PROMTOOL_TIMEOUT_S,
        check=False,
        cwd=PROMETHEUS,
    )


def _alerts() -> list[dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


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
    checked = _promtool("check", "rules", RULES.name)

    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_rules_pass_their_unit_tests() -> None:
    tested = _promtool("test", "rules", *(path.name for path in RULE_TESTS))

    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_the_prometheus_configuration_is_valid() -> None:
    # Syntax only: the bearer token file it names exists in the container, not here.
    checked = _promtool("check", "config", "--syntax-only", "prometheus.yml")

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

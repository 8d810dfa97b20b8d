"""Reading deploy/ in tests: the alert rules, the dashboard, the PromQL in both, and promtool
(Debian's `prometheus` package; a test that needs it skips without it)."""

import json
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
DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "listings-search.json"
# The 7 h and 3 d series of the rules' tests take promtool tens of seconds on a busy machine.
PROMTOOL_TIMEOUT_S = 600

# PromQL's words that look like metric names: binary operators, modifiers, literals.
# Functions and aggregations need no list: they are always followed by "(".
_WORDS = frozenset(
    {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring"}
    | {"group_left", "group_right", "inf", "nan"}
)
_STRING = re.compile(r""""(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'""")
_MATCHERS = re.compile(r"\{[^}]*\}")
_RANGE = re.compile(r"\[[^\]]*\]")  # ranges and subqueries, with Grafana's $__rate_interval
_LABEL_LIST = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENTIFIER = re.compile(r"(?<![\w:$])[A-Za-z_:][\w:]*(?![\w:])(?!\s*\()")


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    """promtool run in deploy/prometheus (where the rules' files name each other)."""
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("promtool not installed: apt-get install prometheus")
    return subprocess.run(
        [found, *args],
        capture_output=True,
        text=True,
        timeout=PROMTOOL_TIMEOUT_S,
        check=False,
        cwd=PROMETHEUS,
    )


def rules() -> list[dict[str, Any]]:
    """Every recording and alerting rule of rules.yml."""
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def dashboard_panels() -> list[dict[str, Any]]:
    """Every panel, those inside collapsed rows too."""
    top = dashboard()["panels"]
    return [*top, *(inner for panel in top for inner in panel.get("panels", []))]


def dashboard_expressions() -> list[str]:
    return [target["expr"] for panel in dashboard_panels() for target in panel.get("targets", [])]


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: what is left of its identifiers once
    strings, label matchers, ranges, label lists, functions and keywords are taken out."""
    for removed in (_STRING, _MATCHERS, _RANGE, _LABEL_LIST):
        expr = removed.sub(" ", expr)
    return set(_IDENTIFIER.findall(expr)) - _WORDS

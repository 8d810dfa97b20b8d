"""The import graph is layered: `searchsite` wires the domain on top, `ops` (what
operators watch) under it, then `evaluation` (which measures the search paths),
`retrieval` above `ingestion`, and `resilience` below both. No import runs back up,
wherever it stands in a module (inside a function too). Read from the source, so nothing
is imported to check."""

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Each package, with the top-level packages it must never import.
NEVER_IMPORTS = {
    "resilience": {"searchsite", "ops", "ingestion", "retrieval", "evaluation"},
    "ingestion": {"searchsite", "ops", "retrieval", "evaluation"},
    "retrieval": {"searchsite", "ops", "evaluation"},
    "evaluation": {"searchsite", "ops"},
    "ops": {"searchsite"},
}


def imported_packages(source: str) -> Iterator[tuple[int, str]]:
    """(line, top-level package) of every absolute import in `source`. A relative import
    is left out: it cannot leave the package it is written in."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name.partition(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module.partition(".")[0]


def upward_imports(package: str) -> list[str]:
    modules = sorted((ROOT / package).rglob("*.py"))
    assert modules, f"no modules under {package}/"
    return [
        f"{path.relative_to(ROOT)}:{line} imports {imported}"
        for path in modules
        for line, imported in imported_packages(path.read_text())
        if imported in NEVER_IMPORTS[package]
    ]


@pytest.mark.parametrize("package", sorted(NEVER_IMPORTS))
def test_no_import_runs_back_up(package: str) -> None:
    assert upward_imports(package) == []


def test_imports_inside_functions_count_and_relative_ones_do_not() -> None:
    source = (
        "import os.path\n"
        "from . import sibling\n"
        "def late():\n"
        "    from searchsite.celery import app\n"
        "    import retrieval.service, redis\n"
    )
    assert sorted(imported_packages(source)) == [
        (1, "os"),
        (4, "searchsite"),
        (5, "redis"),
        (5, "retrieval"),
    ]

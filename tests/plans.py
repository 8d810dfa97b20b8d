"""Reading a plan Postgres gave as `EXPLAIN (FORMAT JSON)`."""

from collections.abc import Iterator
from typing import Any


def nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The plan node and every node under it, depth first."""
    yield plan
    for child in plan.get("Plans", []):
        yield from nodes(child)

"""Realistic listing records for benchmarks: Open House London venues and events from
../shared/data when present, otherwise generated ones."""

import json
import random
from collections.abc import Iterator
from pathlib import Path

_WORDS = [
    "jazz",
    "quartet",
    "choir",
    "organ",
    "recital",
    "gallery",
    "tour",
    "workshop",
    "family",
    "festival",
    "lecture",
    "market",
    "theatre",
    "comedy",
    "poetry",
    "cinema",
    "screening",
    "dance",
    "ballet",
    "opera",
    "garden",
    "walk",
    "history",
    "architecture",
    "science",
    "robots",
    "pottery",
    "painting",
    "photography",
    "night",
    "morning",
    "riverside",
    "church",
    "hall",
    "library",
    "museum",
    "tower",
    "bridge",
    "park",
    "studio",
    "warehouse",
]


_VENUE_KINDS = ("Hall", "House", "Arts Centre")


def _open_house(data_dir: Path) -> Iterator[dict[str, object]]:
    for path in sorted((data_dir / "listings/open-house-london/data/2026").glob("*.json")):
        venue = json.loads(path.read_text())
        for event in venue.get("events") or [{}]:
            yield {
                "title": f"{venue['name']}: {event.get('name') or 'Open day'}",
                "venue": venue["name"],
                "description": (venue.get("description") or "")[:600],
            }


def _generated(rng: random.Random) -> Iterator[dict[str, object]]:
    while True:
        title = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 7))).capitalize()
        yield {
            "title": title,
            "venue": f"{rng.choice(_WORDS).capitalize()} {rng.choice(_VENUE_KINDS)}",
            "description": " ".join(rng.choice(_WORDS) for _ in range(rng.randint(15, 60))),
        }


def real_records(data_dir: Path) -> list[dict[str, object]]:
    """Every Open House London venue's events as they are, none repeated."""
    return list(_open_house(data_dir))


def records(count: int, data_dir: Path | None, seed: int = 7) -> list[dict[str, object]]:
    """`count` editorial records with unique ids; real texts first, then generated ones."""
    rng = random.Random(seed)
    source: list[dict[str, object]] = []
    if data_dir is not None and data_dir.exists():
        source = list(_open_house(data_dir))
    out = []
    generated = _generated(rng)
    for number in range(count):
        base = source[number % len(source)] if source else next(generated)
        suffix = f" ({number // len(source) + 1})" if source and number >= len(source) else ""
        out.append({"id": f"bench-{number}", **base, "title": f"{base['title']}{suffix}"})
    return out

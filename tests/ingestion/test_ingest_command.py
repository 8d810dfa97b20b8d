"""`manage.py ingest`: local files through the pipeline, per-file counts, --json."""

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from ingestion.demo import DEMO_DIR

pytestmark = pytest.mark.django_db


def _ingest_json(kind: str, *paths: Path) -> dict[str, Any]:
    out = io.StringIO()
    call_command("ingest", "--kind", kind, "--json", "--no-embed", *map(str, paths), stdout=out)
    report: dict[str, Any] = json.loads(out.getvalue())
    return report


def test_it_prints_per_file_counts_and_totals(tmp_path: Path) -> None:
    broken = tmp_path / "broken.xml"
    broken.write_bytes(b"this is not a feed")
    report = _ingest_json("feed", DEMO_DIR / "publisher-feed.xml", broken, tmp_path / "absent.xml")
    good, bad, absent = report["files"]
    assert (good["items"], good["new"], good["error"]) == (4, 4, None)
    assert bad["error"]
    assert (bad["items"], bad["quarantined"]) == (1, 1)
    assert absent["error"]
    assert absent["items"] == 0
    assert report["totals"]["items"] == 5
    assert report["totals"]["errors"] == 2
    assert set(good) == {
        "path",
        "items",
        "new",
        "updated",
        "unchanged",
        "withdrawn",
        "quarantined",
        "error",
    }


def test_a_second_run_finds_everything_unchanged() -> None:
    _ingest_json("editorial", DEMO_DIR / "editorial.json")
    again = _ingest_json("editorial", DEMO_DIR / "editorial.json")["files"][0]
    assert (again["items"], again["unchanged"]) == (3, 3)


def test_the_plain_output_is_one_line_per_file() -> None:
    out = io.StringIO()
    call_command(
        "ingest",
        "--kind",
        "calendar",
        "--no-embed",
        str(DEMO_DIR / "venue-calendar.ics"),
        stdout=out,
    )
    lines = out.getvalue().splitlines()
    assert lines[0].startswith(str(DEMO_DIR / "venue-calendar.ics"))
    assert lines[-1].startswith("total: items=")

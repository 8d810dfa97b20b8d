"""SMART tagged text, as the Cranfield, CISI and CACM files are written: a record starts
with a line `.I <id>`; each field starts with a line holding only its tag (`.T`, `.W`,
...) and runs to the next tag line. Which tags mean what is the caller's business."""

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from evaluation.collections import CollectionError, numbered_lines

# Tag lines may carry trailing blanks (CISI writes ".T "); a field's text never starts a
# line with a lone tag, so a line that does is a tag.
RECORD_START = re.compile(r"\.I\s+(\S+)\s*")
FIELD_START = re.compile(r"\.([A-Z])\s*")


@dataclass(frozen=True)
class TaggedRecord:
    """A record's id as written, and each field's lines; a tag that appears twice in one
    record (some Cranfield records have two `.W` or `.A`) keeps both parts, in order."""

    id: str
    source: str
    fields: Mapping[str, list[str]]

    def lines(self, tag: str) -> list[str]:
        return self.fields.get(tag, [])


def read_tagged(path: Path) -> list[TaggedRecord]:
    records: list[TaggedRecord] = []
    current: dict[str, list[str]] | None = None
    tag: str | None = None
    for number, line in numbered_lines(path):
        if record := RECORD_START.fullmatch(line):
            current, tag = {}, None
            records.append(TaggedRecord(record[1], f"{path}:{number}", current))
        elif field_start := FIELD_START.fullmatch(line):
            if current is None:
                raise CollectionError(f"{path}:{number}: field .{field_start[1]} before any .I")
            tag = field_start[1]
            current.setdefault(tag, [])
        elif current is not None and tag is not None:
            current[tag].append(line)
        elif line.strip():
            raise CollectionError(f"{path}:{number}: text outside any field")
    return records

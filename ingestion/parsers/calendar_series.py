"""A recurring calendar event as one draft: its series (issue 33).

A UID with an RRULE or RDATE, or with RECURRENCE-ID overrides, is one event that
happens on several dates: readers expect it once, with its next date, not once per date.
Its occurrences in the window become the draft's `occurrences`, an override that moves
one at its new time, a cancelled one (an override with STATUS:CANCELLED; EXDATE is the
expansion's) left out. The series' words are its master's: an override that retitles one
date does not make a listing of its own. A series whose every date is cancelled is
withdrawn, as a cancelled one-off is.

The rule is put in words where a reader can take it in at a glance ("every Tuesday",
"every other Saturday", "every weekday", "first Friday of the month"); any other rule,
or dates given one by one (RDATE), leaves `recurrence` blank, and the page lists dates.
"""

from dataclasses import replace
from datetime import date

from icalendar import Component

from ingestion.drafts import ListingDraft

_DAYS = {
    "MO": "Monday",
    "TU": "Tuesday",
    "WE": "Wednesday",
    "TH": "Thursday",
    "FR": "Friday",
    "SA": "Saturday",
    "SU": "Sunday",
}
_ORDER = list(_DAYS)
_WEEKDAYS = {"MO", "TU", "WE", "TH", "FR"}
_NTH = {1: "first", 2: "second", 3: "third", 4: "fourth", -1: "last"}
# Rule parts that change which dates a simple description names; any other makes it
# something words at a glance would get wrong (BYSETPOS, BYMONTH, BYHOUR...).
_PLAIN = {"FREQ", "INTERVAL", "BYDAY", "UNTIL", "COUNT", "WKST"}
_EVERY = {1: "every", 2: "every other"}


def one_series(
    uid: str, drafts: list[ListingDraft], template: ListingDraft, recurrence: str
) -> ListingDraft:
    """The series' draft from its occurrences' (`drafts`, each as if it were a one-off)
    and `template`, the occurrence whose words are the master's."""
    live = sorted((d.starts_at, d.ends_at) for d in drafts if not d.withdrawn)
    occurrences = tuple((start, end) for start, end in live if start and end)
    if not occurrences:
        return replace(template, external_id=uid, withdrawn=True)
    return replace(
        template,
        external_id=uid,
        starts_at=occurrences[0][0],
        ends_at=max(end for _, end in occurrences),
        withdrawn=False,
        occurrences=occurrences,
        recurrence=recurrence,
    )


def rule_in_words(master: Component | None, first_start: date) -> str:
    """The master's RRULE in words, or "" when it has none or it is not simple.
    `first_start` is its DTSTART, local: the day a weekly rule without BYDAY repeats."""
    if master is None or "RDATE" in master:
        return ""
    rule = master.get("RRULE")
    if rule is None or isinstance(rule, list) or set(rule) - _PLAIN:
        return ""
    if _one(rule, "COUNT") == "1":  # a single date: nothing recurs to put in words
        return ""
    frequency = _one(rule, "FREQ")
    every = _EVERY.get(int(_one(rule, "INTERVAL") or 1))
    days = [str(day).upper() for day in rule.get("BYDAY", [])]
    if every is None:
        return ""
    if frequency == "DAILY" and not days:
        return f"{every} day"
    if frequency == "WEEKLY":
        days = days or [_ORDER[first_start.weekday()]]
        if not set(days) <= set(_DAYS):  # "1TU" in a weekly rule: not simple
            return ""
        if set(days) == _WEEKDAYS and every == "every":
            return "every weekday"
        names = [_DAYS[day] for day in sorted(set(days), key=_ORDER.index)]
        return f"{every} {_listed(names)}"
    if frequency == "MONTHLY" and every == "every" and len(days) == 1:
        nth, day = days[0][:-2], days[0][-2:]
        position = _NTH.get(int(nth)) if nth.lstrip("+-").isdigit() else None
        if position and day in _DAYS:
            return f"{position} {_DAYS[day]} of the month"
    return ""


def _one(rule: Component, name: str) -> str:
    values = rule.get(name) or [""]
    return str(values[0]).upper()


def _listed(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]

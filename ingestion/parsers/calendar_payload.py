"""An iCalendar payload read whole, or refused whole: its VCALENDARs, once the payload is
known to be neither empty, nor too large, nor junk, nor truncated (a BEGIN without its
END, which icalendar would silently drop). What is wrong inside one event is the calendar
parser's (ingestion/parsers/calendar.py), and costs only that event."""

import re

from icalendar import Calendar

from ingestion.drafts import EXCERPT_CHARS, PayloadError

_BEGIN = re.compile(rb"^BEGIN:(VCALENDAR|VEVENT)\s*?$", re.I | re.M)


def whole_calendars(payload: bytes, max_items: int) -> list[Calendar]:
    """The payload's VCALENDARs, or PayloadError when it isn't a whole iCalendar stream."""
    if not payload.strip():
        raise PayloadError("empty payload")
    begun = [match.group(1).upper() for match in _BEGIN.finditer(payload)]
    if begun.count(b"VEVENT") > max_items:
        raise PayloadError(f"{begun.count(b'VEVENT')} events, more than the {max_items} allowed")
    excerpt = payload[:EXCERPT_CHARS].decode(errors="replace")
    try:
        components = Calendar.from_ical(payload, multiple=True)
    except OSError as error:  # zoneinfo opening a TZID that names a tzdata directory
        reason = f"not iCalendar: a TZID names no time zone ({type(error).__name__})"
        raise PayloadError(reason, excerpt=excerpt) from error
    except Exception as error:  # icalendar raises ValueError, IndexError, TypeError... on junk
        raise PayloadError(f"not iCalendar: {error}", excerpt=excerpt) from error
    if any(component.name != "VCALENDAR" for component in components):
        raise PayloadError("not iCalendar: no VCALENDAR at the top level", excerpt=excerpt)
    # icalendar silently drops a component whose END is missing (a truncated download).
    events = sum(len(calendar.walk("VEVENT")) for calendar in components)
    if len(components) != begun.count(b"VCALENDAR") or events != begun.count(b"VEVENT"):
        # Worth another poll: the next download may well arrive whole.
        reason = "truncated or mis-nested: a BEGIN without its END"
        raise PayloadError(reason, permanent=False, excerpt=excerpt)
    if not components:
        raise PayloadError("not iCalendar: no VCALENDAR", excerpt=excerpt)
    return components

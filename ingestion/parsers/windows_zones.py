"""Windows time zones as Outlook and Exchange name them in TZIDs, mapped to IANA zones.

Outlook names a zone in one of two ways: by its Windows id ("Eastern Standard Time"), or
by the display name Windows shows for it ("(UTC-05:00) Eastern Time (US & Canada)").
icalendar maps ids itself, with CLDR's windowsZones table (`WINDOWS_TO_OLSON`); this
module maps display names to ids, and both through that one table, so the two forms of
a name always agree on the zone (and follow CLDR when icalendar updates it).

A name is matched on its place list alone: the "(UTC-05:00)" prefix changes when a
country changes its offset and older Outlooks wrote "(GMT-05.00)", and Windows dropped
its "(RTZ n)" suffixes; case, accents and runs of spaces don't count either. No two
names of the table share a place list (a test holds it to that).

Where the names come from:
  - `NAMES_FROM_CLDR`: generated from the XML comments of CLDR's windowsZones.xml,
    which give each Windows zone's display name (Windows 10's of about 2016), as
    google-cloud-sdk 528.0.0 keeps them (Apache-2.0): each "# (UTC...) name" comment of
    IANA_TO_WINDOWS in googlecloudsdk/core/util/times_data.py, with the Windows id of
    the entries under it. tests/ingestion/test_calendar_parser.py re-derives it where that is.
  - `NAMES_BY_HAND`: what that copy lacks, typed by hand from the names Windows 10 and 11
    show (`tzutil /l`), not checked against a file: "(UTC-08:00) Baja California",
    whose id that copy lost, the zones Windows added after 2016, and the names it
    changed since. A mistyped name only fails to match: its events are then read by
    their VTIMEZONE, or quarantined without one, as before.
"""

import re
import unicodedata
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from icalendar.timezone.windows_to_olson import WINDOWS_TO_OLSON

NAMES_FROM_CLDR = {
    "(UTC-12:00) International Date Line West": "Dateline Standard Time",
    "(UTC-11:00) Coordinated Universal Time-11": "UTC-11",
    "(UTC-10:00) Hawaii": "Hawaiian Standard Time",
    "(UTC-09:00) Alaska": "Alaskan Standard Time",
    "(UTC-08:00) Pacific Time (US & Canada)": "Pacific Standard Time",
    "(UTC-07:00) Arizona": "US Mountain Standard Time",
    "(UTC-07:00) Chihuahua, La Paz, Mazatlan": "Mountain Standard Time (Mexico)",
    "(UTC-07:00) Mountain Time (US & Canada)": "Mountain Standard Time",
    "(UTC-06:00) Central America": "Central America Standard Time",
    "(UTC-06:00) Central Time (US & Canada)": "Central Standard Time",
    "(UTC-06:00) Guadalajara, Mexico City, Monterrey": "Central Standard Time (Mexico)",
    "(UTC-06:00) Saskatchewan": "Canada Central Standard Time",
    "(UTC-05:00) Bogota, Lima, Quito, Rio Branco": "SA Pacific Standard Time",
    "(UTC-05:00) Chetumal": "Eastern Standard Time (Mexico)",
    "(UTC-05:00) Eastern Time (US & Canada)": "Eastern Standard Time",
    "(UTC-05:00) Indiana (East)": "US Eastern Standard Time",
    "(UTC-04:30) Caracas": "Venezuela Standard Time",
    "(UTC-04:00) Asuncion": "Paraguay Standard Time",
    "(UTC-04:00) Atlantic Time (Canada)": "Atlantic Standard Time",
    "(UTC-04:00) Cuiaba": "Central Brazilian Standard Time",
    "(UTC-04:00) Georgetown, La Paz, Manaus, San Juan": "SA Western Standard Time",
    "(UTC-03:30) Newfoundland": "Newfoundland Standard Time",
    "(UTC-03:00) Brasilia": "E. South America Standard Time",
    "(UTC-03:00) Cayenne, Fortaleza": "SA Eastern Standard Time",
    "(UTC-03:00) City of Buenos Aires": "Argentina Standard Time",
    "(UTC-03:00) Greenland": "Greenland Standard Time",
    "(UTC-03:00) Montevideo": "Montevideo Standard Time",
    "(UTC-03:00) Salvador": "Bahia Standard Time",
    "(UTC-03:00) Santiago": "Pacific SA Standard Time",
    "(UTC-02:00) Coordinated Universal Time-02": "UTC-02",
    "(UTC-01:00) Azores": "Azores Standard Time",
    "(UTC-01:00) Cabo Verde Is.": "Cape Verde Standard Time",
    "(UTC) Casablanca": "Morocco Standard Time",
    "(UTC) Coordinated Universal Time": "UTC",
    "(UTC) Dublin, Edinburgh, Lisbon, London": "GMT Standard Time",
    "(UTC) Monrovia, Reykjavik": "Greenwich Standard Time",
    "(UTC+01:00) Amsterdam, Berlin, Bern, Rome, Stockholm, Vienna": "W. Europe Standard Time",
    "(UTC+01:00) Belgrade, Bratislava, Budapest, Ljubljana, Prague": "Central Europe Standard Time",
    "(UTC+01:00) Brussels, Copenhagen, Madrid, Paris": "Romance Standard Time",
    "(UTC+01:00) Sarajevo, Skopje, Warsaw, Zagreb": "Central European Standard Time",
    "(UTC+01:00) West Central Africa": "W. Central Africa Standard Time",
    "(UTC+01:00) Windhoek": "Namibia Standard Time",
    "(UTC+02:00) Amman": "Jordan Standard Time",
    "(UTC+02:00) Athens, Bucharest": "GTB Standard Time",
    "(UTC+02:00) Beirut": "Middle East Standard Time",
    "(UTC+02:00) Cairo": "Egypt Standard Time",
    "(UTC+02:00) Damascus": "Syria Standard Time",
    "(UTC+02:00) E. Europe": "E. Europe Standard Time",
    "(UTC+02:00) Harare, Pretoria": "South Africa Standard Time",
    "(UTC+02:00) Helsinki, Kyiv, Riga, Sofia, Tallinn, Vilnius": "FLE Standard Time",
    "(UTC+02:00) Istanbul": "Turkey Standard Time",
    "(UTC+02:00) Jerusalem": "Israel Standard Time",
    "(UTC+02:00) Kaliningrad (RTZ 1)": "Kaliningrad Standard Time",
    "(UTC+02:00) Tripoli": "Libya Standard Time",
    "(UTC+03:00) Baghdad": "Arabic Standard Time",
    "(UTC+03:00) Kuwait, Riyadh": "Arab Standard Time",
    "(UTC+03:00) Minsk": "Belarus Standard Time",
    "(UTC+03:00) Moscow, St. Petersburg, Volgograd (RTZ 2)": "Russian Standard Time",
    "(UTC+03:00) Nairobi": "E. Africa Standard Time",
    "(UTC+03:30) Tehran": "Iran Standard Time",
    "(UTC+04:00) Abu Dhabi, Muscat": "Arabian Standard Time",
    "(UTC+04:00) Baku": "Azerbaijan Standard Time",
    "(UTC+04:00) Izhevsk, Samara (RTZ 3)": "Russia Time Zone 3",
    "(UTC+04:00) Port Louis": "Mauritius Standard Time",
    "(UTC+04:00) Tbilisi": "Georgian Standard Time",
    "(UTC+04:00) Yerevan": "Caucasus Standard Time",
    "(UTC+04:30) Kabul": "Afghanistan Standard Time",
    "(UTC+05:00) Ashgabat, Tashkent": "West Asia Standard Time",
    "(UTC+05:00) Ekaterinburg (RTZ 4)": "Ekaterinburg Standard Time",
    "(UTC+05:00) Islamabad, Karachi": "Pakistan Standard Time",
    "(UTC+05:30) Chennai, Kolkata, Mumbai, New Delhi": "India Standard Time",
    "(UTC+05:30) Sri Jayawardenepura": "Sri Lanka Standard Time",
    "(UTC+05:45) Kathmandu": "Nepal Standard Time",
    "(UTC+06:00) Astana": "Central Asia Standard Time",
    "(UTC+06:00) Dhaka": "Bangladesh Standard Time",
    "(UTC+06:00) Novosibirsk (RTZ 5)": "N. Central Asia Standard Time",
    "(UTC+06:30) Yangon (Rangoon)": "Myanmar Standard Time",
    "(UTC+07:00) Bangkok, Hanoi, Jakarta": "SE Asia Standard Time",
    "(UTC+07:00) Krasnoyarsk (RTZ 6)": "North Asia Standard Time",
    "(UTC+08:00) Beijing, Chongqing, Hong Kong, Urumqi": "China Standard Time",
    "(UTC+08:00) Irkutsk (RTZ 7)": "North Asia East Standard Time",
    "(UTC+08:00) Kuala Lumpur, Singapore": "Singapore Standard Time",
    "(UTC+08:00) Perth": "W. Australia Standard Time",
    "(UTC+08:00) Taipei": "Taipei Standard Time",
    "(UTC+08:00) Ulaanbaatar": "Ulaanbaatar Standard Time",
    "(UTC+08:30) Pyongyang": "North Korea Standard Time",
    "(UTC+09:00) Osaka, Sapporo, Tokyo": "Tokyo Standard Time",
    "(UTC+09:00) Seoul": "Korea Standard Time",
    "(UTC+09:00) Yakutsk (RTZ 8)": "Yakutsk Standard Time",
    "(UTC+09:30) Adelaide": "Cen. Australia Standard Time",
    "(UTC+09:30) Darwin": "AUS Central Standard Time",
    "(UTC+10:00) Brisbane": "E. Australia Standard Time",
    "(UTC+10:00) Canberra, Melbourne, Sydney": "AUS Eastern Standard Time",
    "(UTC+10:00) Guam, Port Moresby": "West Pacific Standard Time",
    "(UTC+10:00) Hobart": "Tasmania Standard Time",
    "(UTC+10:00) Magadan": "Magadan Standard Time",
    "(UTC+10:00) Vladivostok, Magadan (RTZ 9)": "Vladivostok Standard Time",
    "(UTC+11:00) Chokurdakh (RTZ 10)": "Russia Time Zone 10",
    "(UTC+11:00) Solomon Is., New Caledonia": "Central Pacific Standard Time",
    "(UTC+12:00) Anadyr, Petropavlovsk-Kamchatsky (RTZ 11)": "Russia Time Zone 11",
    "(UTC+12:00) Auckland, Wellington": "New Zealand Standard Time",
    "(UTC+12:00) Coordinated Universal Time+12": "UTC+12",
    "(UTC+12:00) Fiji": "Fiji Standard Time",
    "(UTC+13:00) Nuku'alofa": "Tonga Standard Time",
    "(UTC+13:00) Samoa": "Samoa Standard Time",
    "(UTC+14:00) Kiritimati Island": "Line Islands Standard Time",
}

NAMES_BY_HAND = {
    "(UTC-10:00) Aleutian Islands": "Aleutian Standard Time",
    "(UTC-09:30) Marquesas Islands": "Marquesas Standard Time",
    "(UTC-09:00) Coordinated Universal Time-09": "UTC-09",
    "(UTC-08:00) Baja California": "Pacific Standard Time (Mexico)",
    "(UTC-08:00) Coordinated Universal Time-08": "UTC-08",
    "(UTC-07:00) La Paz, Mazatlan": "Mountain Standard Time (Mexico)",
    "(UTC-07:00) Yukon": "Yukon Standard Time",
    "(UTC-06:00) Easter Island": "Easter Island Standard Time",
    "(UTC-05:00) Haiti": "Haiti Standard Time",
    "(UTC-05:00) Havana": "Cuba Standard Time",
    "(UTC-05:00) Turks and Caicos": "Turks And Caicos Standard Time",
    "(UTC-03:00) Araguaina": "Tocantins Standard Time",
    "(UTC-03:00) Punta Arenas": "Magallanes Standard Time",
    "(UTC-03:00) Saint Pierre and Miquelon": "Saint Pierre Standard Time",
    "(UTC+00:00) Sao Tome": "Sao Tome Standard Time",
    "(UTC+02:00) Chisinau": "E. Europe Standard Time",
    "(UTC+02:00) Gaza, Hebron": "West Bank Standard Time",
    "(UTC+02:00) Juba": "South Sudan Standard Time",
    "(UTC+02:00) Khartoum": "Sudan Standard Time",
    "(UTC+03:00) Moscow, St. Petersburg": "Russian Standard Time",
    "(UTC+03:00) Volgograd": "Volgograd Standard Time",
    "(UTC+04:00) Astrakhan, Ulyanovsk": "Astrakhan Standard Time",
    "(UTC+04:00) Saratov": "Saratov Standard Time",
    "(UTC+05:00) Qyzylorda": "Qyzylorda Standard Time",
    "(UTC+06:00) Omsk": "Omsk Standard Time",
    "(UTC+07:00) Barnaul, Gorno-Altaysk": "Altai Standard Time",
    "(UTC+07:00) Hovd": "W. Mongolia Standard Time",
    "(UTC+07:00) Tomsk": "Tomsk Standard Time",
    "(UTC+08:45) Eucla": "Aus Central W. Standard Time",
    "(UTC+09:00) Chita": "Transbaikal Standard Time",
    "(UTC+10:00) Vladivostok": "Vladivostok Standard Time",
    "(UTC+10:30) Lord Howe Island": "Lord Howe Standard Time",
    "(UTC+11:00) Bougainville Island": "Bougainville Standard Time",
    "(UTC+11:00) Norfolk Island": "Norfolk Standard Time",
    "(UTC+11:00) Sakhalin": "Sakhalin Standard Time",
    "(UTC+12:45) Chatham Islands": "Chatham Islands Standard Time",
    "(UTC+13:00) Coordinated Universal Time+13": "UTC+13",
}

# "(UTC-05:00) ", "(UTC) ", "(GMT-05.00) ": the offset Windows printed when it named the zone.
_OFFSET_PREFIX = re.compile(r"^\(\s*(?:utc|gmt)\s*(?:[+-]\s*\d{1,2}(?:[:.]\d{2})?)?\s*\)")
_RTZ_SUFFIX = re.compile(r"\(\s*rtz\s*\d+\s*\)$")  # "Ekaterinburg (RTZ 4)"


def place_key(name: str) -> str:
    """What identifies a Windows zone name: its words, without offset, case or accents."""
    folded = unicodedata.normalize("NFKD", name).casefold()
    text = "".join(char for char in folded if not unicodedata.combining(char))
    text = _RTZ_SUFFIX.sub("", _OFFSET_PREFIX.sub("", text.strip()).strip())
    return " ".join(text.split())


# Windows ids by place key, for display names and (spaced or cased oddly) ids alike.
WINDOWS_IDS = {
    place_key(name): windows_id
    for name, windows_id in [*NAMES_FROM_CLDR.items(), *NAMES_BY_HAND.items()]
    + [(windows_id, windows_id) for windows_id in WINDOWS_TO_OLSON]
}


@lru_cache(maxsize=512)  # bounded: the names come from payloads
def windows_zone(name: str) -> ZoneInfo | None:
    """The IANA zone of a Windows zone, named by its id or its display name, or None."""
    windows_id = WINDOWS_IDS.get(place_key(name))
    if windows_id not in WINDOWS_TO_OLSON:
        return None
    try:
        return ZoneInfo(WINDOWS_TO_OLSON[windows_id])
    except ZoneInfoNotFoundError:  # CLDR newer than the tzdata installed
        return None

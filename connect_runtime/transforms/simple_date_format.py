"""Java's ``SimpleDateFormat`` patterns, in UTC, for TimestampConverter and TimestampRouter.

Connect configs carry ``java.text.SimpleDateFormat`` patterns
(``yyyy-MM-dd'T'HH:mm:ss.SSSZ``); this module formats and parses them the same
way, always in UTC (Connect sets UTC on every format these transforms use).

Supported letters: ``G y M L d D E u a H k K h m s S z Z X`` and quoted text
(``'T'``, ``''`` for a quote). Java's other letters (``Y w W F``: week-based
fields) raise ConfigException, as do letters Java rejects.

Parsing follows ``DateFormat.parse(String)``: it reads from the start of the
text and ignores what follows a complete match; it is lenient like Java's
default (``2024-13-01`` is 2025-01-01); a numeric field directly followed by
another numeric field takes exactly as many digits as its letters
(``yyyyMMdd``); ``yy`` with two digits picks the century that puts the year
within 80 years before and 20 after today; a zone or offset in the text
(``Z``, ``+02:00``, ``UTC``, ``GMT+2``) is applied. Times are epoch milliseconds.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterator
from dataclasses import dataclass

from connect_runtime.errors import ConfigException, DataException

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_EPOCH_ORDINAL = _EPOCH.date().toordinal()
_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December"]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
_SUPPORTED = set("GyMLdDEuaHkKhmsSzZX")
_JAVA_ONLY = {"Y": "week year", "w": "week in year", "W": "week in month",
              "F": "day of week in month"}
_NUMERIC = set("yMLdDuHkKhmsS")
_ZONE = (r"(Z|[+-]\d{2}(?::?\d{2})?|UTC|GMT(?:[+-]\d{1,2}(?::?\d{2})?)?"
         r"|Coordinated Universal Time)")


@dataclass(frozen=True)
class _Field:
    letter: str
    count: int

    @property
    def numeric(self) -> bool:
        return self.letter in _NUMERIC and not (self.letter in "ML" and self.count >= 3)


class ParseError(DataException):
    """The text does not match the pattern."""


class SimpleDateFormat:
    """One compiled pattern; ConfigException from the constructor if it is not valid."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self._tokens: list[_Field | str] = list(_tokenize(pattern))
        self._regex = re.compile(_parse_regex(self._tokens), re.IGNORECASE)

    def format(self, millis: int) -> str:
        """``millis`` (epoch ms) as text in UTC."""
        moment = _EPOCH + datetime.timedelta(milliseconds=millis)
        return "".join(t if isinstance(t, str) else _format_field(t, moment, millis)
                       for t in self._tokens)

    def parse(self, text: str) -> int:
        """Epoch milliseconds of ``text``; ParseError if it does not match."""
        match = self._regex.match(text)
        if match is None:
            raise ParseError(f"Unparseable date: {text!r}")
        fields = [t for t in self._tokens if isinstance(t, _Field)]
        values = {f.letter: (f, raw) for f, raw in zip(fields, match.groups(), strict=True)}
        try:
            return _resolve(values)
        except (ValueError, OverflowError) as e:
            raise ParseError(f"Unparseable date: {text!r} ({e})") from None


def _tokenize(pattern: str) -> Iterator[_Field | str]:
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "'":
            end, text = _quoted(pattern, i)
            yield text
            i = end
        elif c.isascii() and c.isalpha():
            if c not in _SUPPORTED:
                what = _JAVA_ONLY.get(c)
                reason = (f"pattern letter '{c}' ({what}) is not supported" if what
                          else f"Illegal pattern character '{c}'")
                raise ConfigException(f"{reason} in {pattern!r}")
            count = 1
            while i + count < len(pattern) and pattern[i + count] == c:
                count += 1
            yield _Field(c, count)
            i += count
        else:
            yield c
            i += 1


def _quoted(pattern: str, start: int) -> tuple[int, str]:
    """The literal text of the quote at ``start`` and the index after it."""
    if pattern.startswith("''", start):
        return start + 2, "'"
    out, i = [], start + 1
    while i < len(pattern):
        if pattern[i] == "'":
            if pattern.startswith("''", i):
                out.append("'")
                i += 2
                continue
            return i + 1, "".join(out)
        out.append(pattern[i])
        i += 1
    raise ConfigException(f"Unterminated quote in {pattern!r}")


def _format_field(field: _Field, moment: datetime.datetime, millis: int) -> str:
    letter, n = field.letter, field.count
    hour = moment.hour
    if letter in "ML" and n >= 3:
        name = _MONTHS[moment.month - 1]
        return name if n >= 4 else name[:3]
    if letter == "E":
        name = _DAYS[moment.weekday()]
        return name if n >= 4 else name[:3]
    if letter == "y" and n == 2:
        return f"{moment.year % 100:02d}"
    text = {"G": "AD", "a": "PM" if hour >= 12 else "AM",
            "z": "Coordinated Universal Time" if n >= 4 else "UTC", "Z": "+0000",
            "X": "Z"}.get(letter)
    if text is not None:
        return text
    number = {"y": moment.year, "M": moment.month, "L": moment.month, "d": moment.day,
              "D": moment.timetuple().tm_yday, "u": moment.isoweekday(), "H": hour,
              "k": hour or 24, "K": hour % 12, "h": hour % 12 or 12, "m": moment.minute,
              "s": moment.second, "S": millis % 1000}[letter]
    return str(number).zfill(n)


def _parse_regex(tokens: list[_Field | str]) -> str:
    parts = []
    for i, token in enumerate(tokens):
        if isinstance(token, str):
            parts.append(re.escape(token))
            continue
        following = tokens[i + 1] if i + 1 < len(tokens) else None
        abutting = isinstance(following, _Field) and following.numeric
        parts.append(_field_regex(token, abutting))
    return "".join(parts)


def _field_regex(field: _Field, abutting: bool) -> str:
    if field.numeric:
        return f"(\\d{{{field.count}}})" if abutting else "(\\d+)"
    if field.letter in "ML":
        names = sorted(_MONTHS + [m[:3] for m in _MONTHS], key=len, reverse=True)
    elif field.letter == "E":
        names = sorted(_DAYS + [d[:3] for d in _DAYS], key=len, reverse=True)
    elif field.letter == "a":
        names = ["AM", "PM"]
    elif field.letter == "G":
        names = ["AD"]
    else:
        return _ZONE
    return f"({'|'.join(names)})"


def _resolve(values: dict[str, tuple[_Field, str]]) -> int:
    """Epoch ms from the parsed fields, lenient like Java's Calendar."""
    def number(letter: str, default: int) -> int:
        return int(values[letter][1]) if letter in values else default

    year = number("y", 1970)
    if "y" in values and values["y"][0].count <= 2 and len(values["y"][1]) == 2:
        year = _two_digit_year(year)
    month = _month(values.get("M") or values.get("L"))
    days = _days_since_epoch(year, month) + number("d", 1) - 1
    if "D" in values:
        days = _days_since_epoch(year, 1) + number("D", 1) - 1
    minutes = (days * 24 + _hour(values)) * 60 + number("m", 0)
    millis = (minutes * 60 + number("s", 0)) * 1000 + number("S", 0)
    for letter in "zZX":
        if letter in values:
            millis -= _offset_minutes(values[letter][1]) * 60_000
    return millis


def _hour(values: dict[str, tuple[_Field, str]]) -> int:
    pm = "a" in values and values["a"][1].upper() == "PM"
    if "H" in values:
        return int(values["H"][1])
    if "k" in values:
        return int(values["k"][1]) % 24
    if "h" in values:
        return int(values["h"][1]) % 12 + (12 if pm else 0)
    if "K" in values:
        return int(values["K"][1]) + (12 if pm else 0)
    return 12 if pm else 0


def _two_digit_year(yy: int) -> int:
    start = datetime.datetime.now(datetime.UTC).year - 80
    year = start // 100 * 100 + yy
    return year + 100 if year < start else year


def _month(parsed: tuple[_Field, str] | None) -> int:
    if parsed is None:
        return 1
    field, raw = parsed
    if field.numeric:
        return int(raw)
    return next(i for i, m in enumerate(_MONTHS, 1) if m[:3].lower() == raw[:3].lower())


def _days_since_epoch(year: int, month: int) -> int:
    """Days from 1970-01-01 to the first of ``month`` of ``year`` (month may overflow)."""
    year += (month - 1) // 12
    month = (month - 1) % 12 + 1
    return datetime.date(year, month, 1).toordinal() - _EPOCH_ORDINAL


def _offset_minutes(zone: str) -> int:
    """Minutes east of UTC of a parsed zone (``Z``, ``+0200``, ``GMT-5``, ``UTC``)."""
    match = re.search(r"([+-])(\d{1,2}):?(\d{2})?$", zone)
    if match is None:
        return 0
    sign = -1 if match.group(1) == "-" else 1
    return sign * (int(match.group(2)) * 60 + int(match.group(3) or 0))

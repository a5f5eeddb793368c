"""Java SimpleDateFormat patterns in UTC (connect_runtime.transforms.simple_date_format)."""

from __future__ import annotations

import datetime

import pytest

from connect_runtime.errors import ConfigException
from connect_runtime.transforms.simple_date_format import ParseError, SimpleDateFormat

MILLIS = 1_483_405_323_004  # 2017-01-03T01:02:03.004Z, a Tuesday


@pytest.mark.parametrize(("pattern", "text"), [
    ("yyyy-MM-dd'T'HH:mm:ss.SSSZ", "2017-01-03T01:02:03.004+0000"),
    ("yyyy-MM-dd'T'HH:mm:ss.SSSXXX", "2017-01-03T01:02:03.004Z"),
    ("yyyyMMdd", "20170103"),
    ("yy/M/d h:m:s a", "17/1/3 1:2:3 AM"),
    ("EEE, d MMM yyyy kk:mm z", "Tue, 3 Jan 2017 01:02 UTC"),
    ("EEEE MMMM dd G", "Tuesday January 03 AD"),
    ("D u K zzzz", "3 2 1 Coordinated Universal Time"),
    ("'at' HH 'o''clock'", "at 01 o'clock"),
    ("S SSSS", "4 0004"),
])
def test_format(pattern: str, text: str) -> None:
    assert SimpleDateFormat(pattern).format(MILLIS) == text


@pytest.mark.parametrize(("pattern", "text", "millis"), [
    ("yyyy-MM-dd'T'HH:mm:ss.SSSZ", "2017-01-03T01:02:03.004+0000", MILLIS),
    ("yyyy-MM-dd'T'HH:mm:ss.SSSXXX", "2017-01-03T03:02:03.004+02:00", MILLIS),
    ("yyyy-MM-dd HH:mm:ss.SSS z", "2017-01-03 00:02:03.004 GMT-01:00", MILLIS),
    ("yyyyMMddHHmmssSSS", "20170103010203004", MILLIS),
    ("d MMM yyyy", "3 jan 2017", 1_483_401_600_000),
    ("hh:mm a", "12:30 PM", 45_000_000),
    ("hh:mm a", "12:30 AM", 1_800_000),
    ("yyyy-MM-dd", "2017-01-03T99:99", 1_483_401_600_000),  # trailing text is ignored
    ("yyyy-MM-dd", "2016-13-03", 1_483_401_600_000),  # lenient, like Java's default
])
def test_parse(pattern: str, text: str, millis: int) -> None:
    assert SimpleDateFormat(pattern).parse(text) == millis


def test_two_digit_years_land_within_80_years_before_and_20_after_today() -> None:
    this_year = datetime.datetime.now(datetime.UTC).year
    fmt = SimpleDateFormat("yy")
    for offset in (-79, -1, 0, 19):
        year = this_year + offset
        parsed = datetime.datetime.fromtimestamp(fmt.parse(f"{year % 100:02d}") / 1000,
                                                 datetime.UTC)
        assert parsed.year == year


@pytest.mark.parametrize(("pattern", "message"), [
    ("yyyy-qq", "Illegal pattern character 'q'"),
    ("YYYY", "pattern letter 'Y' \\(week year\\) is not supported"),
    ("HH 'x", "Unterminated quote"),
])
def test_bad_patterns(pattern: str, message: str) -> None:
    with pytest.raises(ConfigException, match=message):
        SimpleDateFormat(pattern)


def test_text_that_does_not_match() -> None:
    with pytest.raises(ParseError, match="Unparseable date"):
        SimpleDateFormat("yyyy-MM-dd").parse("03/01/2017")

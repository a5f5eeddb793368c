"""Java's text and bytes for Connect's values, as Kafka Connect's converters write them.

Pure functions, shared by the JSON, String and SimpleHeader converters:

* ``double_text`` / ``float_text``: ``Double.toString`` / ``Float.toString`` as
  JDK 19 and later define them (JDK-4511638): the shortest decimal that rounds
  to the value, the closest of those, plain between 10^-3 and 10^7
  (``1234.5``, ``0.001``) and computerized scientific outside (``1.0E7``,
  ``1.0E-4``); ``NaN``, ``Infinity``, ``-Infinity``. JDK 17's older algorithm
  prints a few values with a different, longer digit string (``1.0E23`` as
  ``9.999999999999999E22``): both read back as the same number.
* ``decimal_unscaled`` / ``decimal_text`` / ``decimal_bytes``: a Decimal at its
  schema's scale as ``BigDecimal.toString`` and ``BigInteger.toByteArray`` give it.
* ``epoch_days`` / ``millis_of_day`` / ``epoch_millis``: Connect's Date, Time and
  Timestamp numbers; ``date_millis`` the ``java.util.Date`` of any of the three.
* ``date_to_string`` (``java.util.Date.toString``) and ``values_date_text``
  (``Values.convertToString`` of a Date): in UTC, where Connect uses the JVM's
  default zone (UTC in Kafka's images), with Java's calendar, which is Julian
  before 1582-10-15.
"""

from __future__ import annotations

import datetime
import decimal
import functools
import math
import struct

_FLOAT32 = struct.Struct("<f")
_FLOAT32_BITS = struct.Struct("<I")
_MIN_NORMAL_DOUBLE = 2.2250738585072014e-308
# Plenty for the exact arithmetic on a double's or float's decimal expansion.
_EXACT = decimal.Context(prec=1200, Emin=-99999, Emax=99999)


def to_float32(x: float) -> float:
    """``(float) x`` in Java: ``x`` rounded to the nearest float32. OverflowError if
    ``x`` is finite but beyond the float32 range (Java would give an infinity)."""
    result: float = _FLOAT32.unpack(_FLOAT32.pack(x))[0]
    return result


def double_text(x: float) -> str:
    """``Double.toString(x)`` (see the module docstring)."""
    if 1e-3 <= x < 1e7 or -1e7 < x <= -1e-3:
        return repr(x)  # Python's shortest repr, in the same plain notation here
    if x != x:
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0.0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    magnitude = abs(x)
    if magnitude < _MIN_NORMAL_DOUBLE:
        digits, exponent = _shortest(magnitude, math.nextafter(magnitude, 0.0),
                                     math.nextafter(magnitude, math.inf),
                                     _even_double(magnitude))
    else:
        digits, exponent = _repr_digits(repr(magnitude))
    return ("-" if x < 0 else "") + _layout(digits, exponent, magnitude)


def float_text(x: float) -> str:
    """``Float.toString((float) x)``; OverflowError beyond the float32 range."""
    f = to_float32(x)
    if f != f:
        return "NaN"
    if math.isinf(f):
        return "Infinity" if f > 0 else "-Infinity"
    if f == 0.0:
        return "-0.0" if math.copysign(1.0, f) < 0 else "0.0"
    text = _float32_text(_FLOAT32_BITS.unpack(_FLOAT32.pack(abs(f)))[0])
    return "-" + text if f < 0 else text


# Keyed by the bits, not the float: -0.0 == 0.0 would share a cache entry.
@functools.lru_cache(maxsize=4096)
def _float32_text(bits: int) -> str:
    """``Float.toString`` of the positive, finite float32 with these bits."""
    magnitude = _FLOAT32.unpack(_FLOAT32_BITS.pack(bits))[0]
    below = _FLOAT32.unpack(_FLOAT32_BITS.pack(bits - 1))[0]
    above = _FLOAT32.unpack(_FLOAT32_BITS.pack(bits + 1))[0]  # inf past the largest
    digits, exponent = _shortest(magnitude, below, above, bits % 2 == 0)
    return _layout(digits, exponent, magnitude)


def _even_double(x: float) -> bool:
    return struct.unpack("<Q", struct.pack("<d", x))[0] % 2 == 0


def _repr_digits(text: str) -> tuple[str, int]:
    """(significant digits, exponent of the first) of a positive float's repr."""
    mantissa, _, exp = text.partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    leading_zeros = len(whole + fraction) - len(digits)  # only in 0.000ddd
    exponent = int(exp or 0) + len(whole) - 1 - leading_zeros
    return digits.rstrip("0") or "0", exponent


def _shortest(x: float, below: float, above: float, even: bool) -> tuple[str, int]:
    """Java's choice of decimal for ``x`` > 0 whose neighbours are ``below`` and
    ``above`` (JDK 19's rule: among the shortest decimals that round to ``x``, or
    those of 1 and 2 digits when 1 suffices, the closest; ties to an even digit)."""
    exact = _EXACT.create_decimal(x)
    low = _EXACT.divide(_EXACT.add(exact, _EXACT.create_decimal(below)), 2)
    # Past the largest finite value, the next one would be as far above as ``below`` is under.
    next_up = (_EXACT.create_decimal(above) if math.isfinite(above)
               else _EXACT.subtract(_EXACT.multiply(exact, 2), _EXACT.create_decimal(below)))
    high = _EXACT.divide(_EXACT.add(exact, next_up), 2)

    def inside(d: decimal.Decimal) -> bool:
        return low < d < high or (even and d in (low, high))

    for length in range(1, 20):
        found = _candidates(exact, length, inside)
        if found:
            if length == 1:
                found += _candidates(exact, 2, inside)
            best = min(found, key=lambda c: (abs(_EXACT.subtract(c, exact)),
                                             int(c.as_tuple().digits[-1]) % 2))
            _, digit_tuple, exponent = best.normalize(_EXACT).as_tuple()
            digits = "".join(map(str, digit_tuple))
            assert isinstance(exponent, int)
            return digits, exponent + len(digits) - 1
    raise AssertionError(f"no decimal found for {x!r}")


def _candidates(exact: decimal.Decimal, length: int, inside: object) -> list[decimal.Decimal]:
    quantum = exact.adjusted() - (length - 1)
    nearest = int(_EXACT.scaleb(exact, -quantum).to_integral_value(decimal.ROUND_HALF_EVEN))
    out = []
    for c in (nearest - 1, nearest, nearest + 1):
        if c > 0:
            d = _EXACT.scaleb(decimal.Decimal(c), quantum)
            if inside(d):  # type: ignore[operator]
                out.append(d)
    return out


def _layout(digits: str, exponent: int, magnitude: float) -> str:
    """Java's notation for the decimal ``0.digits * 10^(exponent+1)`` of ``magnitude``."""
    if 1e-3 <= magnitude < 1e7:
        if exponent >= 0:
            whole = digits[:exponent + 1].ljust(exponent + 1, "0")
            return f"{whole}.{digits[exponent + 1:] or '0'}"
        return "0." + "0" * (-exponent - 1) + digits
    return f"{digits[0]}.{digits[1:] or '0'}E{exponent}"


# Decimals --------------------------------------------------------------------


def decimal_unscaled(value: decimal.Decimal, scale: int) -> int:
    """The unscaled integer of ``value`` at ``scale``; ValueError if ``value`` is not
    finite or has more than ``scale`` decimal places (trailing zeros are fine)."""
    sign, digit_tuple, exponent = value.as_tuple()
    if not isinstance(exponent, int):
        raise ValueError(f"{value} is not a finite number")
    unscaled = int("".join(map(str, digit_tuple))) if digit_tuple else 0
    shift = exponent + scale
    if shift >= 0:
        unscaled *= 10 ** shift
    else:
        unscaled, rest = divmod(unscaled, 10 ** -shift)
        if rest:
            raise ValueError(f"{value} has more than {scale} decimal places (the schema's "
                             "scale)")
    return -unscaled if sign else unscaled


def decimal_text(unscaled: int, scale: int) -> str:
    """``new BigDecimal(BigInteger.valueOf(unscaled), scale).toString()``."""
    digits = tuple(int(d) for d in str(abs(unscaled)))
    # Python's str follows the same "to scientific string" rules as BigDecimal.
    return str(decimal.Decimal((1 if unscaled < 0 else 0, digits, -scale)))


def decimal_bytes(unscaled: int) -> bytes:
    """``BigInteger.toByteArray()``: minimal big-endian two's complement."""
    return unscaled.to_bytes((unscaled + (unscaled < 0)).bit_length() // 8 + 1, "big",
                             signed=True)


# Dates -----------------------------------------------------------------------

MILLIS_PER_DAY = 86_400_000
_EPOCH_DATE = datetime.date(1970, 1, 1)
_EPOCH_NAIVE = datetime.datetime(1970, 1, 1)
_EPOCH_UTC = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def epoch_days(value: datetime.date) -> int:
    """Connect's Date: days since 1970-01-01."""
    return (value - _EPOCH_DATE).days


def millis_of_day(value: datetime.time) -> int:
    """Connect's Time: milliseconds since midnight (UTC for a time with an offset)."""
    millis = ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 \
        + value.microsecond // 1000
    offset = value.utcoffset()
    if offset is not None:
        millis = (millis - offset // datetime.timedelta(milliseconds=1)) % MILLIS_PER_DAY
    return millis


def epoch_millis(value: datetime.datetime) -> int:
    """Connect's Timestamp: milliseconds since the epoch (floored); naive means UTC."""
    delta = value - (_EPOCH_NAIVE if value.utcoffset() is None else _EPOCH_UTC)
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def date_millis(value: datetime.date | datetime.time) -> int:
    """The ``java.util.Date`` (epoch milliseconds) Connect holds for a Date, Time or
    Timestamp value."""
    if isinstance(value, datetime.datetime):
        return epoch_millis(value)
    if isinstance(value, datetime.date):
        return epoch_days(value) * MILLIS_PER_DAY
    return millis_of_day(value)


# java.util.GregorianCalendar switches from the Julian calendar on this instant.
_GREGORIAN_CUTOVER_MILLIS = -12_219_292_800_000
_DAYS = ("Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _calendar(millis: int) -> tuple[int, int, int, int, int, int, int, int]:
    """(year, month, day, hour, minute, second, millisecond, weekday 0=Sunday) in UTC."""
    days, millis_in_day = divmod(millis, MILLIS_PER_DAY)
    julian_day = days + 2_440_588
    if millis >= _GREGORIAN_CUTOVER_MILLIS:
        day = datetime.date.fromordinal(days + _EPOCH_DATE.toordinal())
        year, month, dom = day.year, day.month, day.day
    else:  # the Julian calendar (Richards' algorithm)
        c = julian_day + 32_082
        d = (4 * c + 3) // 1461
        e = c - 1461 * d // 4
        m = (5 * e + 2) // 153
        dom = e - (153 * m + 2) // 5 + 1
        month = m + 3 - 12 * (m // 10)
        year = d - 4800 + m // 10
    seconds, milli = divmod(millis_in_day, 1000)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    return year, month, dom, hour, minute, second, milli, (julian_day + 1) % 7


def date_to_string(millis: int) -> str:
    """``new java.util.Date(millis).toString()`` in UTC: ``Tue Jan 02 03:04:05 UTC 2024``."""
    year, month, day, hour, minute, second, _, weekday = _calendar(millis)
    return (f"{_DAYS[weekday]} {_MONTHS[month - 1]} {day:02d} {hour:02d}:{minute:02d}:"
            f"{second:02d} UTC {year}")


def values_date_text(millis: int) -> str:
    """``Values.convertToString`` of a ``java.util.Date``, in UTC. Connect picks the
    format from the number alone: below one day (any instant before 1970-01-02)
    ``HH:mm:ss.SSS'Z'``, a whole number of days ``yyyy-MM-dd``, else both."""
    year, month, day, hour, minute, second, milli, _ = _calendar(millis)
    time_text = f"{hour:02d}:{minute:02d}:{second:02d}.{milli:03d}Z"
    if millis < MILLIS_PER_DAY:
        return time_text
    date_text = f"{year:04d}-{month:02d}-{day:02d}"
    return date_text if millis % MILLIS_PER_DAY == 0 else f"{date_text}T{time_text}"

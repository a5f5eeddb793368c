"""TimestampConverter (connect_runtime.transforms.timestamps)."""

from __future__ import annotations

import datetime

import pytest
from smt_records import configured, record

from connect_runtime.api.schema import Schema, SchemaType, Struct
from connect_runtime.errors import ConfigException, DataException
from connect_runtime.transforms.timestamps import TimestampConverter

UTC = datetime.UTC
# 2017-01-03 01:02:03.004 UTC, as in Connect's own tests of this transform.
MILLIS = 1_483_405_323_004
STAMP = datetime.datetime(2017, 1, 3, 1, 2, 3, 4000, tzinfo=UTC)
DATE = datetime.date(2017, 1, 3)
TIME = datetime.time(1, 2, 3, 4000)
FORMAT = "yyyy MM dd HH mm ss SSS z"
FORMATTED = "2017 01 03 01 02 03 004 UTC"


def convert(target: str, value: object, schema: Schema | None = None, **extra: str) -> object:
    xform = configured(TimestampConverter.Value, {"target.type": target, **extra})
    return xform.apply(record(value, value_schema=schema)).value


@pytest.mark.parametrize(("target", "expected"), [
    ("Timestamp", STAMP), ("Date", DATE), ("Time", TIME), ("unix", MILLIS),
    ("string", FORMATTED),
])
def test_schemaless_values_of_every_source_type(target: str, expected: object) -> None:
    for source in (STAMP, MILLIS, FORMATTED):
        assert convert(target, source, format=FORMAT) == expected
    date_expected = {"Timestamp": datetime.datetime(2017, 1, 3, tzinfo=UTC), "Date": DATE,
                     "Time": datetime.time(0), "unix": 1_483_401_600_000,
                     "string": "2017 01 03 00 00 00 000 UTC"}[target]
    assert convert(target, DATE, format=FORMAT) == date_expected
    time_expected = {"Timestamp": datetime.datetime(1970, 1, 1, 1, 2, 3, 4000, tzinfo=UTC),
                     "Date": datetime.date(1970, 1, 1), "Time": TIME, "unix": 3_723_004,
                     "string": "1970 01 01 01 02 03 004 UTC"}[target]
    assert convert(target, TIME, format=FORMAT) == time_expected


@pytest.mark.parametrize(("schema", "value"), [
    (Schema.timestamp(), STAMP), (Schema.INT64, MILLIS), (Schema.STRING, FORMATTED),
])
def test_with_schema_the_source_type_comes_from_the_schema(schema: Schema,
                                                           value: object) -> None:
    xform = configured(TimestampConverter.Value, {"target.type": "Date", "format": FORMAT})
    out = xform.apply(record(value, value_schema=schema.replace(optional=True)))
    assert (out.value, out.value_schema) == (DATE, Schema.date(optional=True))
    unix = configured(TimestampConverter.Value, {"target.type": "unix", "format": FORMAT})
    out = unix.apply(record(value, value_schema=schema))
    assert (out.value, out.value_schema) == (MILLIS, Schema.INT64)


def test_naive_datetimes_are_utc() -> None:
    assert convert("unix", STAMP.replace(tzinfo=None)) == MILLIS


@pytest.mark.parametrize(("precision", "unix"), [
    ("seconds", 1_483_405_323), ("milliseconds", MILLIS), ("microseconds", MILLIS * 1000),
    ("nanoseconds", MILLIS * 1_000_000),
])
def test_unix_precision_in_both_directions(precision: str, unix: int) -> None:
    assert convert("unix", STAMP, **{"unix.precision": precision}) == unix
    back = convert("Timestamp", unix, **{"unix.precision": precision})
    assert back == (STAMP if precision != "seconds" else STAMP.replace(microsecond=0))


def test_unix_precision_truncates_toward_zero_like_java() -> None:
    before_epoch = datetime.datetime(1969, 12, 31, 23, 59, 58, 500_000, tzinfo=UTC)  # -1500 ms
    assert convert("unix", before_epoch, **{"unix.precision": "seconds"}) == -1
    # -1500.999 ms truncates to -1500 ms (flooring would give -1501).
    assert convert("Timestamp", -1_500_999, **{"unix.precision": "microseconds"}) == \
        before_epoch


def test_a_field_schemaless_and_with_schema() -> None:
    xform = configured(TimestampConverter.Value, {"field": "ts", "target.type": "string",
                                                  "format": "yyyy-MM-dd"})
    out = xform.apply(record({"ts": MILLIS, "other": "x"}))
    assert out.value == {"ts": "2017-01-03", "other": "x"}
    assert xform.apply(record({"other": "x"})).value == {"other": "x", "ts": None}
    schema = Schema.struct({"ts": Schema.timestamp(optional=True), "other": Schema.STRING},
                           name="event", version=4)
    out = xform.apply(record(Struct(schema, ts=STAMP, other="x"), value_schema=schema))
    expected = Schema.struct({"ts": Schema.OPTIONAL_STRING, "other": Schema.STRING},
                             name="event", version=4)
    assert out.value_schema == expected
    assert out.value == Struct(expected, ts="2017-01-03", other="x")
    tombstone = xform.apply(record(None, value_schema=schema))
    assert (tombstone.value, tombstone.value_schema) == (None, expected)


def test_key_variant_and_nulls() -> None:
    xform = configured(TimestampConverter.Key, {"target.type": "Timestamp"})
    out = xform.apply(record({"v": 1}, key=MILLIS))
    assert (out.key, out.value) == (STAMP, {"v": 1})
    assert xform.apply(record(None, key=None)).key is None
    assert xform.apply(record(None, key=None, key_schema=Schema.OPTIONAL_INT64)).key_schema == \
        Schema.timestamp(optional=True)


@pytest.mark.parametrize(("value", "configs", "message"), [
    (1.5, {}, "does not support float values as timestamps"),
    ("2017-01-03", {"format": "yyyy MM dd"},
     r"Could not parse timestamp: value \(2017-01-03\) does not match pattern \(yyyy MM dd\)"),
    ("2017-01-03", {}, "needs 'format'"),
])
def test_unconvertible_values_name_alias_and_topic(value: object, configs: dict[str, str],
                                                   message: str) -> None:
    xform = configured(TimestampConverter.Value, {"target.type": "unix", **configs})
    xform.bind("ts", "transforms.ts.")
    with pytest.raises(DataException, match=message) as caught:
        xform.apply(record(value))
    assert str(caught.value).startswith("transform 'ts' (org.apache.kafka.connect.transforms."
                                        "TimestampConverter$Value) failed on a record for "
                                        "topic 'orders'")


def test_a_schema_that_is_no_timestamp_is_refused() -> None:
    with pytest.raises(DataException, match="a boolean schema does not correspond to a known "
                                            "timestamp type format"):
        convert("unix", True, Schema.BOOLEAN)


@pytest.mark.parametrize(("configs", "key", "message"), [
    ({"target.type": "string"}, "transforms.ts.format", "requires format option"),
    ({"target.type": "string", "format": "yyyy-qq"}, "transforms.ts.format",
     "Illegal pattern character 'q'"),
    ({"target.type": "epoch"}, "transforms.ts.target.type", "String must be one of"),
    ({"target.type": "unix", "unix.precision": "days"}, "transforms.ts.unix.precision",
     "String must be one of"),
])
def test_config_errors_name_the_full_key(configs: dict[str, str], key: str,
                                         message: str) -> None:
    xform = TimestampConverter.Value()
    xform.bind("ts", "transforms.ts.")
    with pytest.raises(ConfigException, match=message) as caught:
        xform.configure(configs)
    assert caught.value.name == key


def test_time_and_date_schemas_are_their_logical_types() -> None:
    xform = configured(TimestampConverter.Value, {"target.type": "Time"})
    out = xform.apply(record(STAMP, value_schema=Schema.timestamp()))
    assert out.value_schema == Schema.time() and out.value == TIME
    assert out.value_schema.type is SchemaType.INT32

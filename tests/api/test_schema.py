"""Connect schemas in Python: building, validating, and deriving them from classes."""

from __future__ import annotations

import dataclasses
import datetime
import json
import re
from decimal import Decimal
from typing import Annotated, Any, NotRequired, TypedDict

import pytest

from connect_runtime import (
    DataException,
    Schema,
    SchemaType,
    Struct,
    connect_schema,
    schema_of,
)
from connect_runtime.api.schema import DATE, DECIMAL, TIMESTAMP, infer
from connect_runtime.converters import JsonConverter


def test_constants_match_connects_ready_made_schemas() -> None:
    assert Schema(SchemaType.INT32) == Schema.INT32
    assert Schema.OPTIONAL_STRING.optional and Schema.OPTIONAL_STRING.type is SchemaType.STRING
    assert not Schema.BYTES.optional


def test_logical_types_carry_connects_names_and_parameters() -> None:
    d = Schema.decimal(2, optional=True)
    assert (d.type, d.name, d.version, dict(d.parameters or {}), d.optional) == (
        SchemaType.BYTES, DECIMAL, 1, {"scale": "2"}, True)
    assert d.scale == 2
    assert Schema.date().name == DATE and Schema.date().type is SchemaType.INT32
    assert Schema.timestamp().type is SchemaType.INT64 and Schema.timestamp().name == TIMESTAMP


def test_schemas_are_immutable_values() -> None:
    a = Schema.struct({"id": Schema.INT64, "tags": Schema.array(Schema.STRING, default=["x"])})
    b = Schema.struct([("id", Schema.INT64), ("tags", Schema.array(Schema.STRING, default=["x"]))])
    assert a == b and hash(a) == hash(b)
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.name = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        Schema.decimal(2).parameters["scale"] = "3"  # type: ignore[index]
    assert a.replace(name="n").name == "n" and a.name is None


@pytest.mark.parametrize(("bad", "message"), [
    (lambda: Schema(SchemaType.MAP, key_schema=Schema.STRING), "key schema and a value schema"),
    (lambda: Schema(SchemaType.ARRAY), "value schema"),
    (lambda: Schema.struct([("a", Schema.INT8), ("a", Schema.INT8)]), "duplicate field"),
    (lambda: Schema(SchemaType.INT8, default=1000), "out of range"),
])
def test_malformed_schemas_are_refused(bad: object, message: str) -> None:
    with pytest.raises(DataException, match=message):
        bad()  # type: ignore[operator]


def test_validation_names_the_offending_place() -> None:
    line = Schema.struct({"sku": Schema.STRING, "price": Schema.decimal(2)}, name="Line")
    order = Schema.struct({"id": Schema.INT32, "lines": Schema.array(line)}, name="Order")
    good = Struct(order, id=1, lines=[Struct(line, sku="a", price=Decimal("1.50"))])
    order.validate(good)
    bad = Struct(order, id=1, lines=[Struct(line, sku="a", price=Decimal("1.50")),
                                     Struct(line, sku="b", price=1.5)])
    with pytest.raises(DataException, match=r"field 'lines\[1\]\.price'.*float.*decimal\.Decimal"):
        order.validate(bad)
    with pytest.raises(DataException, match=r"field 'id': null for a required int32"):
        Struct(order, lines=[]).validate()
    with pytest.raises(DataException, match="out of range for int32"):
        Struct(order, id=2**31, lines=[]).validate()
    with pytest.raises(DataException, match="more than 2 decimal places"):
        line.validate(Struct(line, sku="a", price=Decimal("1.505")))
    with pytest.raises(DataException, match="bool True does not match int32"):
        Schema.INT32.validate(True)


def test_struct_fields_are_checked_by_name() -> None:
    schema = Schema.struct({"id": Schema.INT64, "n": Schema(SchemaType.INT32, default=7)})
    s = Struct(schema, {"id": 1})
    assert s["n"] is None and s.get("n") == 7 and s.as_dict() == {"id": 1, "n": 7}
    with pytest.raises(DataException, match=r"'nope' is not a field.*fields: id, n"):
        s["nope"] = 1
    assert s.put("n", 3) is s and s["n"] == 3
    assert s == Struct(schema, id=1, n=3) and s != Struct(schema, id=2, n=3)


@dataclasses.dataclass
class Line:
    sku: str
    price: Annotated[Decimal, Schema.decimal(2)]


@dataclasses.dataclass
class Order:
    id: int
    placed: datetime.datetime
    lines: list[Line]
    attrs: dict[str, str]
    note: str | None = None
    qty: Annotated[int, Schema.INT32] = 1
    day: datetime.date | None = None


def test_schema_of_a_dataclass() -> None:
    schema = schema_of(Order)
    assert [(f.name, f.schema) for f in schema.fields] == [
        ("id", Schema.INT64), ("placed", Schema.timestamp()),
        ("lines", Schema.array(Schema.struct({"sku": Schema.STRING,
                                              "price": Schema.decimal(2)}))),
        ("attrs", Schema.map(Schema.STRING, Schema.STRING)),
        ("note", Schema.OPTIONAL_STRING), ("qty", Schema(SchemaType.INT32, default=1)),
        ("day", Schema.date(optional=True)),
    ]
    assert schema_of(Order) is schema  # derived once per class
    assert schema_of(Order, name="shop.Order").name == "shop.Order"


def test_a_dataclass_value_becomes_a_struct_of_its_schema() -> None:
    order = Order(1, datetime.datetime(2024, 1, 2), [Line("a", Decimal("2.00"))], {"k": "v"})
    schema, value = infer(order)
    assert schema == schema_of(Order) and isinstance(value, Struct)
    value.validate()
    assert value["lines"][0]["price"] == Decimal("2.00")
    assert infer({"plain": 1}) == (None, {"plain": 1})


class Event(TypedDict):
    id: int
    kind: NotRequired[str]


def test_schema_of_a_typeddict() -> None:
    assert schema_of(Event) == Schema.struct({"id": Schema.INT64, "kind": Schema.OPTIONAL_STRING})


def test_types_without_a_schema_are_named() -> None:
    @dataclasses.dataclass
    class Bad:
        amount: Decimal

    with pytest.raises(TypeError, match=r"Bad.amount: a Decimal needs its scale"):
        schema_of(Bad)

    @dataclasses.dataclass
    class Union:
        v: int | str

    with pytest.raises(TypeError, match=r"Union.v: a union"):
        schema_of(Union)


def test_a_struct_schema_may_default_to_a_struct_of_its_type() -> None:
    point = Schema.struct({"x": Schema.INT32, "y": Schema.INT32})
    origin = Struct(point, x=0, y=0)
    with_default = point.replace(optional=True, default=origin)
    with_default.validate(Struct(point, x=1, y=2))
    with_default.validate(None)
    other = Schema.struct({"x": Schema.INT32}, name="Other")
    with pytest.raises(DataException, match="a Struct of schema"):
        with_default.validate(Struct(other, x=1))


# Naming a class's schema: connect_schema ------------------------------------------

@connect_schema("com.example.shop.Item", version=2, doc="One line of an order")
@dataclasses.dataclass(frozen=True, slots=True)
class Item:
    sku: str


@connect_schema("com.example.shop.Basket")
@dataclasses.dataclass
class Basket:
    items: list[Item]


def test_connect_schema_names_the_schema_derived_for_a_value() -> None:
    schema, struct = infer(Basket([Item("a")]))
    assert schema is not None and (schema.name, schema.version, schema.doc) == (
        "com.example.shop.Basket", None, None)
    items = schema.fields[0].schema.value_schema
    assert items is not None and (items.name, items.version, items.doc) == (
        "com.example.shop.Item", 2, "One line of an order")
    assert struct["items"][0].schema is items
    # schema_of's own arguments win over the class's.
    assert schema_of(Item, name="other.Item").name == "other.Item"
    assert schema_of(Item, doc="d").version == 2


def test_connect_schema_writes_the_name_into_the_json_envelope() -> None:
    c = JsonConverter()
    c.configure({"schemas.enable": "true"}, is_key=False)
    out = c.from_connect("orders", None, Basket([Item("a")]))
    assert out is not None
    envelope = json.loads(out)
    assert envelope["payload"] == {"items": [{"sku": "a"}]}
    assert envelope["schema"]["type"] == "struct"
    assert envelope["schema"]["name"] == "com.example.shop.Basket"
    item = envelope["schema"]["fields"][0]["items"]
    assert (item["name"], item["version"], item["doc"]) == (
        "com.example.shop.Item", 2, "One line of an order")


def test_a_subclass_does_not_inherit_its_bases_schema_name() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class PricedItem(Item):
        price: Annotated[Decimal, Schema.decimal(2)]

    assert schema_of(PricedItem).name is None
    assert [f.name for f in schema_of(PricedItem).fields] == ["sku", "price"]


def test_connect_schema_names_a_typeddict_too() -> None:
    @connect_schema("com.example.Event")
    class Named(TypedDict):
        id: int

    assert schema_of(Named).name == "com.example.Event"


@pytest.mark.parametrize(("args", "error", "message"), [
    (("",), ValueError, "the name must not be empty"),
    (("  ",), ValueError, "the name must not be empty"),
    ((None,), TypeError, "the name must be a str, not NoneType None"),
    ((42,), TypeError, "the name must be a str, not int 42"),
    ((DECIMAL,), ValueError, f"{DECIMAL!r} is the name of Connect's logical type Decimal"),
    (("ok", {"version": "1"}), TypeError, "the version must be an int, not str '1'"),
    (("ok", {"version": True}), TypeError, "the version must be an int, not bool"),
    (("ok", {"doc": 3}), TypeError, "the doc must be a str, not int 3"),
])
def test_an_invalid_schema_name_is_refused_naming_the_class(
        args: tuple[Any, ...], error: type[Exception], message: str) -> None:
    *positional, keywords = args if isinstance(args[-1], dict) else (*args, {})
    with pytest.raises(error, match=r"^The Connect schema of .*\.Bad: " + re.escape(message)):
        @connect_schema(*positional, **keywords)
        @dataclasses.dataclass
        class Bad:
            x: int


def test_connect_schema_belongs_above_the_dataclass_decorator() -> None:
    with pytest.raises(TypeError, match=r"on .*Plain: .*put it above @dataclass"):
        @connect_schema("com.example.Plain")
        class Plain:
            x: int


def test_schema_of_refuses_an_invalid_name_naming_the_class() -> None:
    with pytest.raises(ValueError, match=r"^The Connect schema of test_schema\.Item: the name "
                                         r"must not be empty"):
        schema_of(Item, name="")

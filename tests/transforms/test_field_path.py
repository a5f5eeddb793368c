"""KIP-821 field paths (connect_runtime.transforms.field_path), Connect's cases."""

from __future__ import annotations

import pytest

from connect_runtime.api.schema import Schema, Struct
from connect_runtime.errors import ConfigException, DataException
from connect_runtime.transforms.field_path import FieldPath, FieldSyntaxVersion

V1, V2 = FieldSyntaxVersion.V1, FieldSyntaxVersion.V2


@pytest.mark.parametrize("path", ["foo.bar.baz", "foo`bar`", "foo.`bar.baz`"])
def test_v1_is_one_step(path: str) -> None:
    assert FieldPath.parse(path, V1).steps == (path,)


@pytest.mark.parametrize(("path", "steps"), [
    ("", ()), ("foobarbaz", ("foobarbaz",)), ("foo.bar.baz", ("foo", "bar", "baz")),
    ("..", ("", "", "")), ("foo..", ("foo", "", "")), (".bar.", ("", "bar", "")),
    ("..baz", ("", "", "baz")), ("foo`bar`baz", ("foo`bar`baz",)),
    ("`foo.bar.baz`", ("foo.bar.baz",)), ("foo.`bar.baz`", ("foo", "bar.baz")),
    ("`foo.bar`.baz", ("foo.bar", "baz")), ("foo.`bar`.baz", ("foo", "bar", "baz")),
    ("foo.``bar.baz`", ("foo", "`bar.baz")), ("foo.`bar.baz``", ("foo", "bar.baz`")),
    ("foo.`ba`r.baz`", ("foo", "ba`r.baz")), ("foo.ba`r.baz", ("foo", "ba`r", "baz")),
    ("foo.``bar``.baz", ("foo", "`bar`", "baz")), ("``foo.bar.baz``", ("`foo.bar.baz`",)),
    ("foo.`bar\\`.baz`", ("foo", "bar`.baz")), ("foo.`bar.`baz`", ("foo", "bar.`baz")),
    ("foo.`bar\\`.`baz`", ("foo", "bar`.`baz")),
    ("foo.`bar\\\\`.\\`baz`", ("foo", "bar\\`.\\`baz")),
])
def test_v2_steps(path: str, steps: tuple[str, ...]) -> None:
    assert FieldPath.parse(path, V2).steps == steps


@pytest.mark.parametrize(("path", "position"), [
    ("`foo.bar.baz", 0), ("foo.`bar.baz", 4), ("foo.bar.`baz", 8), ("foo.bar.`baz\\`", 8),
])
def test_v2_unclosed_backticks(path: str, position: int) -> None:
    with pytest.raises(ConfigException) as caught:
        FieldPath.parse(path, V2)
    assert str(caught.value) == (f"Incomplete backtick pair in path: [{path}], consider adding "
                                 f"a backslash before backtick at position {position} to "
                                 "escape it")


def test_reading_nested_values() -> None:
    inner = Schema.struct({"b": Schema.OPTIONAL_INT32})
    outer = Schema.struct({"a": inner.replace(optional=True), "s": Schema.OPTIONAL_STRING})
    path = FieldPath.parse("a.b", V2)
    assert path.field_from(outer).schema == Schema.OPTIONAL_INT32
    assert path.field_from(Schema.struct({"a": Schema.STRING})) is None
    assert path.value_from_struct(Struct(outer, a=Struct(inner, b=3)), True) == 3
    assert path.value_from_struct(Struct(outer, a=None), True) is None
    assert path.value_from_map({"a": {"b": 3}}) == 3
    assert path.value_from_map({"x": 1}) is None
    with pytest.raises(DataException, match="nested field access"):
        FieldPath.parse("s.b", V2).value_from_map({"s": "text"})

"""The java.util.Properties parser (worker files, credentials files, file provider secrets)."""

from __future__ import annotations

import pytest

from connect_runtime.errors import ConfigException
from connect_runtime.java_properties import parse_properties


def test_comments_blank_lines_and_separators() -> None:
    text = "\n".join([
        "# comment",
        "! also a comment",
        "   ",
        "a=1",
        "b: 2",
        "c 3",
        "d   =   4",
        "e=x=y",
        "f",
        "g=",
        "  h = trailing kept ",
    ])
    assert parse_properties(text) == {
        "a": "1", "b": "2", "c": "3", "d": "4", "e": "x=y", "f": "", "g": "",
        "h": "trailing kept ",
    }


def test_continuation_lines() -> None:
    text = "list=a,\\\n    b,\\\n    c\nnext=1\nlit=ends with backslash\\\\\nafter=2\n"
    assert parse_properties(text) == {
        "list": "a,b,c", "next": "1", "lit": "ends with backslash\\", "after": "2"}


def test_continuation_line_starting_with_hash_is_not_a_comment() -> None:
    assert parse_properties("k=one\\\n  #two") == {"k": "one#two"}


def test_escapes() -> None:
    text = "tab=a\\tb\nnl=a\\nb\nuni=\\u0041\\u00e9\nkey\\=with\\:seps\\ inside=v\npath=C:\\\\dir"
    assert parse_properties(text) == {
        "tab": "a\tb", "nl": "a\nb", "uni": "A\u00e9", "key=with:seps inside": "v",
        "path": "C:\\dir",
    }


def test_escaped_backslash_before_separator() -> None:
    # java.util.Properties: "a\\=b" is key "a\" and value "b".
    assert parse_properties("a\\\\=b") == {"a\\": "b"}


def test_line_with_value_but_no_key_names_file_and_line() -> None:
    with pytest.raises(ConfigException, match=r"w\.properties:2"):
        parse_properties("ok=1\n=orphan", "w.properties")

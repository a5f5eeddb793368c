"""Java regular expressions run with Python's re (connect_runtime.transforms.java_regex)."""

from __future__ import annotations

import pytest

from connect_runtime.errors import ConfigException
from connect_runtime.transforms.java_regex import (
    Replacement,
    compile_java,
    replace_first,
    translate,
)


@pytest.mark.parametrize(("java", "python"), [
    ("(?<year>\\d{4})-\\k<year>", "(?P<year>\\d{4})-(?P=year)"),
    ("(?<=a)b(?<!c)", "(?<=a)b(?<!c)"),
    ("\\Qa.b*\\E+", "a\\.b\\*+"),
    ("end\\z", "end\\Z"),
    ("[\\p{Upper}_]+\\P{Digit}", "[A-Z_]+[^0-9]"),
    ("[(?<x>)]", "[(?<x>)]"),  # inside a class nothing is a group
    ("[]a]", "[]a]"),
    ("a++b*+(?>c)", "a++b*+(?>c)"),
])
def test_translation(java: str, python: str) -> None:
    assert translate(java) == python


@pytest.mark.parametrize("java", ["\\p{L}", "[a-z&&[^b]]", "\\G", "[\\P{Alpha}]"])
def test_java_only_syntax_is_refused_not_misread(java: str) -> None:
    with pytest.raises(ConfigException):
        compile_java(java)


def test_java_z_matches_before_a_final_newline() -> None:
    assert compile_java("a\\Z").search("a\n") and not compile_java("a\\z").search("a\n")


@pytest.mark.parametrize(("template", "expected"), [
    ("$1/$2", "b/c"), ("${x}!", "b!"), ("\\$1\\\\", "$1\\"), ("$22", "c2"), ("-$0-", "-abc-"),
])
def test_replacements(template: str, expected: str) -> None:
    pattern = compile_java("a(?<x>b)(c)")
    replacement = Replacement.parse(template, pattern)
    assert replace_first(pattern, "abc abc", replacement) == expected + " abc"


@pytest.mark.parametrize(("template", "message"), [
    ("$", "group index is missing"), ("$x", "Illegal group reference"), ("$3", "No group 3"),
    ("${y}", "No group with name {y}"), ("${1a}", "bad group name"),
    ("\\", "character to be escaped is missing"),
])
def test_bad_replacements(template: str, message: str) -> None:
    with pytest.raises(ConfigException, match=message.replace("{", "\\{").replace("}", "\\}")):
        Replacement.parse(template, compile_java("a(?<x>b)(c)"))

"""Java regular expressions and replacement strings, run with Python's ``re``.

Connect's ``RegexRouter`` and ``TopicNameMatches`` take ``java.util.regex``
patterns, and configs written for Connect must keep working. The two dialects
agree on almost everything (classes, quantifiers, possessive quantifiers and
atomic groups since Python 3.11, anchors, flags such as ``(?i)``); what differs
is translated:

==========================  ======================================
Java                        Python
==========================  ======================================
``(?<name>...)``            ``(?P<name>...)``
``\\k<name>``               ``(?P=name)``
``\\Q...\\E`` (quoting)     the escaped text
``\\z`` / ``\\Z``           ``\\Z`` / ``(?=\\n?\\Z)``
``\\h``, ``\\R``            their character sets
``\\p{Alpha}`` and the
other POSIX classes         their ASCII ranges
==========================  ======================================

Anything else Java-only (Unicode ``\\p{..}`` categories, class unions and
intersections such as ``[a-z&&[^b]]``, ``\\G``) is refused with a
ConfigException, never silently read differently.

Replacement strings follow ``java.util.regex.Matcher``: ``$n`` and ``${name}``
are groups (``$12`` is group 12 only if the pattern has 12 groups, else group 1
followed by ``2``), ``\\`` escapes the next character, and an unmatched group
inserts nothing.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from connect_runtime.errors import ConfigException

_POSIX = {
    "Lower": "a-z", "Upper": "A-Z", "ASCII": "\\x00-\\x7f", "Alpha": "a-zA-Z",
    "Digit": "0-9", "Alnum": "a-zA-Z0-9", "Punct": "!-/:-@\\[-`{-~", "Graph": "!-~",
    "Print": " -~", "Blank": " \\t", "Cntrl": "\\x00-\\x1f\\x7f", "XDigit": "0-9a-fA-F",
    "Space": " \\t\\n\\x0b\\f\\r",
}
_HORIZONTAL = " \\t\\xa0\\u1680\\u180e\\u2000-\\u200a\\u202f\\u205f\\u3000"
_LINEBREAK = "(?:\\r\\n|[\\n\\x0b\\f\\r\\x85\\u2028\\u2029])"
_GROUP_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_DIGITS = "0123456789"


@functools.lru_cache(maxsize=256)
def compile_java(pattern: str) -> re.Pattern[str]:
    """The Python pattern for Java ``pattern``; ConfigException saying why if there is none."""
    try:
        return re.compile(translate(pattern))
    except re.error as e:
        raise ConfigException(f"{e} in {pattern!r}") from None


def translate(pattern: str) -> str:
    """Java regex syntax -> Python ``re`` syntax (see the module docstring)."""
    out: list[str] = []
    i, in_class = 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            text, i = _escape(pattern, i + 1, in_class)
            out.append(text)
            continue
        if in_class:
            if c == "[" or pattern.startswith("&&", i):
                raise ConfigException(f"character class unions and intersections are not "
                                      f"supported (index {i}) in {pattern!r}")
            in_class = c != "]"
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            out.append(c)
            i += 1
            # A ']' right after '[' or '[^' is a literal in both dialects.
            for lead in ("^", "]"):
                if pattern.startswith(lead, i):
                    out.append(lead)
                    i += 1
            continue
        if pattern.startswith("(?<", i) and pattern[i + 3:i + 4] not in ("=", "!"):
            out.append("(?P<")
            i += 3
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _escape(pattern: str, i: int, in_class: bool) -> tuple[str, int]:
    """Translate the escape whose letter is at ``pattern[i]``; (text, next index)."""
    if i >= len(pattern):
        raise ConfigException(f"unexpected end of pattern after '\\' in {pattern!r}")
    c = pattern[i]
    if c == "Q":
        end = pattern.find("\\E", i + 1)
        quoted = pattern[i + 1:] if end < 0 else pattern[i + 1:end]
        return re.escape(quoted), len(pattern) if end < 0 else end + 2
    if c in "pP":
        return _posix(pattern, i, in_class)
    if c == "k" and pattern.startswith("<", i + 1) and not in_class:
        end = pattern.find(">", i)
        if end < 0:
            raise ConfigException(f"named group reference is missing '>' in {pattern!r}")
        return f"(?P={pattern[i + 2:end]})", end + 1
    if c == "h":
        return (_HORIZONTAL if in_class else f"[{_HORIZONTAL}]"), i + 1
    if not in_class and c in "zZR":
        return {"z": "\\Z", "Z": "(?=\\n?\\Z)", "R": _LINEBREAK}[c], i + 1
    if c in "GHVX":
        raise ConfigException(f"\\{c} is not supported in {pattern!r}")
    return "\\" + c, i + 1


def _posix(pattern: str, i: int, in_class: bool) -> tuple[str, int]:
    negate = pattern[i] == "P"
    if pattern.startswith("{", i + 1):
        end = pattern.find("}", i)
        name = pattern[i + 2:end] if end > 0 else ""
        nxt = end + 1
    else:
        name, nxt = pattern[i + 1:i + 2], i + 2
    name = name.removeprefix("Is") if name.removeprefix("Is") in _POSIX else name
    ranges = _POSIX.get(name)
    if ranges is None or (negate and in_class):
        raise ConfigException(f"\\{pattern[i]}{{{name}}} is not supported (the POSIX classes "
                              f"{', '.join(_POSIX)} are) in {pattern!r}")
    if in_class:
        return ranges, nxt
    return f"[{'^' if negate else ''}{ranges}]", nxt


@dataclass(frozen=True)
class Replacement:
    """A parsed Java replacement string: literal text and group references."""

    parts: tuple[str | int | tuple[str], ...]

    @classmethod
    def parse(cls, template: str, pattern: re.Pattern[str]) -> Replacement:
        """Parse ``template`` for ``pattern``; ConfigException for a reference to no group."""
        parts: list[str | int | tuple[str]] = []
        i = 0
        while i < len(template):
            c = template[i]
            if c == "\\":
                if i + 1 >= len(template):
                    raise ConfigException("character to be escaped is missing")
                parts.append(template[i + 1])
                i += 2
            elif c == "$":
                ref, i = _group_reference(template, i + 1, pattern)
                parts.append(ref)
            else:
                parts.append(c)
                i += 1
        return cls(tuple(parts))

    def expand(self, match: re.Match[str]) -> str:
        """The replacement text for ``match`` (an unmatched group inserts nothing)."""
        out = []
        for part in self.parts:
            if isinstance(part, str):
                out.append(part)
            else:
                group = match.group(part if isinstance(part, int) else part[0])
                out.append(group or "")
        return "".join(out)


def _group_reference(template: str, i: int,
                     pattern: re.Pattern[str]) -> tuple[int | tuple[str], int]:
    """The group ``$`` refers to at ``template[i:]``; (reference, next index)."""
    if i >= len(template):
        raise ConfigException("Illegal group reference: group index is missing")
    if template[i] == "{":
        end = template.find("}", i)
        name = template[i + 1:end] if end > 0 else ""
        if end < 0 or not _GROUP_NAME.fullmatch(name):
            raise ConfigException(f"Illegal group reference: bad group name in {template!r}")
        if name not in pattern.groupindex:
            raise ConfigException(f"No group with name {{{name}}}")
        return (name,), end + 1
    if template[i] not in _DIGITS:
        raise ConfigException("Illegal group reference")
    number, i = int(template[i]), i + 1
    # Like Java: take more digits only while they still name an existing group.
    while i < len(template) and template[i] in _DIGITS \
            and number * 10 + int(template[i]) <= pattern.groups:
        number, i = number * 10 + int(template[i]), i + 1
    if number > pattern.groups:
        raise ConfigException(f"No group {number}")
    return number, i


def replace_first(pattern: re.Pattern[str], text: str, replacement: Replacement) -> str:
    """Java's ``Matcher.replaceFirst``: the first match (a search) replaced."""
    return pattern.sub(replacement.expand, text, count=1)

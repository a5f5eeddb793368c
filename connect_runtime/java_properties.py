"""java.util.Properties text: the format of Connect's files.

``key=value`` or ``key: value``, ``#``/``!`` comments, ``\\`` line continuations
and the usual escapes (java.util.Properties rules, minus unicode escapes in
keys, which nobody uses). Three readers share it: the worker config files
(``config/``), the basic-auth credentials file and the file config provider's
secrets (``security/``). It is a part of its own, below both, because
``config/`` calls into ``security/`` and so cannot also be imported by it; it
reads no file and imports only :mod:`connect_runtime.errors`.
"""

from __future__ import annotations

from connect_runtime.errors import ConfigException

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and i + 5 < len(text):
                out.append(chr(int(text[i + 2 : i + 6], 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Join continuation lines; returns (first physical line number, logical line)."""
    lines: list[tuple[int, str]] = []
    pending: str | None = None
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.lstrip()
        if pending is None:
            if not line or line[0] in "#!":
                continue
            start = number
        # An odd number of trailing backslashes continues the line.
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending = (pending or "") + line[:-1]
            continue
        lines.append((start, (pending or "") + line))
        pending = None
    if pending is not None:
        lines.append((start, pending))
    return lines


def _split(line: str) -> tuple[str, str]:
    """Split a logical line at its first unescaped ``=``, ``:`` or whitespace."""
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2  # whatever follows a backslash is part of the key
            continue
        if ch in "=:":
            return line[:i], line[i + 1 :].lstrip()
        if ch.isspace():
            rest = line[i:].lstrip()
            if rest[:1] in ("=", ":"):
                rest = rest[1:].lstrip()
            return line[:i], rest
        i += 1
    return line, ""


def parse_properties(text: str, source: str = "<string>", *,
                     quote_lines: bool = True) -> dict[str, str]:
    """Parse java.util.Properties text. Raises ConfigException naming file and line.

    ``quote_lines=False`` keeps the offending line's text out of the message: a
    file of secrets (the file config provider's) must not leak one into an error.
    """
    props: dict[str, str] = {}
    for number, line in _logical_lines(text):
        raw_key, raw_value = _split(line)
        quoted = f": {line!r}" if quote_lines else ""
        try:
            key, value = _unescape(raw_key.strip()), _unescape(raw_value)
        except ValueError as e:
            raise ConfigException(f"{source}:{number}: malformed \\uXXXX escape{quoted}") from e
        if not key:
            raise ConfigException(f"{source}:{number}: a line has a value but no key{quoted}")
        props[key] = value
    return props

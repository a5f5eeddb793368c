"""Keeping secret values out of status traces, validate answers and log lines.

What a user submitted is shown as submitted (placeholders, as Connect shows
them); what is hidden is the *value* behind it: whatever a config provider
supplied, and the value of every key a connector defines as PASSWORD. Code that
holds resolved configs builds a :class:`Redactor` from them and passes every
text it did not write itself (a connector's exception, a traceback) through
:meth:`Redactor.scrub` before it becomes a trace, a message or a log line.

Invariant: a value shorter than :data:`MIN_SECRET_LENGTH` is not scrubbed. A
secret that short protects nothing, and replacing "1" or "on" wherever it
occurs would make every trace unreadable.

A secret is hidden in every form the runtime and its libraries print it
(:func:`printed_forms`): as it is, as Python's ``repr`` and ``ascii`` write it
inside either quote (a backslash doubled: a connector's exception that shows
a config dict), as JSON writes it, and URL-encoded (an HTTP library's error
naming a URL). Before, a secret with a backslash reached statuses, the
dashboard and the log in its ``repr`` form.
"""

from __future__ import annotations

import json
import logging
import traceback
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, quote_plus

from connect_runtime.api.config_def import HIDDEN, ConfigDef, Type

MIN_SECRET_LENGTH = 4


def printed_forms(secret: str) -> set[str]:
    """``secret`` as it is and as each printer the runtime's texts pass through
    writes it: ``repr``/``ascii`` (their escapes, the quotes unescaped, and each
    quote escaped, as a string holding both quotes prints), JSON (ASCII-only
    and not) and URL encoding (path and form)."""
    forms = {secret}
    for python in (repr(secret)[1:-1], ascii(secret)[1:-1]):
        # repr escapes the quote it chose only when both occur: as printed, with
        # neither quote escaped, and with each escaped (inside a longer string
        # the choice of quote is that string's).
        plain = python.replace("\\'", "'").replace('\\"', '"')
        forms |= {python, plain, plain.replace("'", "\\'"), plain.replace('"', '\\"')}
    forms |= {json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]}
    forms |= {quote(secret, safe=""), quote(secret), quote_plus(secret, safe="")}
    return forms


def password_keys(config_def: ConfigDef) -> frozenset[str]:
    """The keys ``config_def`` defines as PASSWORD."""
    return frozenset(name for name, key in config_def.config_keys.items()
                     if key.type is Type.PASSWORD)


class Redactor:
    """A set of secret strings, and :meth:`scrub` to replace them in a text by ``[hidden]``.

    Thread-safe for readers once filled; fill it before handing it out.
    """

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: set[str] = set()
        self.add(secrets)

    def add(self, secrets: Iterable[str]) -> None:
        """Hide each of ``secrets`` from now on, in each of its :func:`printed_forms`;
        also its text without the surrounding whitespace (a secret file's trailing
        newline is rarely part of the message)."""
        for secret in secrets:
            for text in {secret, secret.strip()}:
                if len(text) >= MIN_SECRET_LENGTH:
                    self._secrets |= printed_forms(text)

    def add_values(self, keys: Iterable[str], *configs: Mapping[str, Any]) -> None:
        """Hide the values ``configs`` hold for ``keys`` (a connector's PASSWORD keys)."""
        wanted = set(keys)
        self.add(str(value) for config in configs for key, value in config.items()
                 if key in wanted and value is not None)

    def scrub(self, text: str) -> str:
        """``text`` with every secret replaced by ``[hidden]``, longest first (a secret
        that contains another is hidden whole)."""
        for secret in sorted(self._secrets, key=len, reverse=True):
            if secret in text:
                text = text.replace(secret, HIDDEN)
        return text

    def format_exception(self, error: BaseException) -> str:
        """The traceback of ``error`` (its causes included), scrubbed."""
        return self.scrub("".join(traceback.format_exception(error)))

    def log_exception(self, logger: logging.Logger, level: int, error: BaseException,
                      message: str, *args: object, extra: Mapping[str, object] | None = None,
                      ) -> None:
        """``logger.log(level, message, *args, exc_info=error)``, with the traceback
        scrubbed. ``message`` and ``args`` are the caller's own text (names, not
        values): they are not scrubbed.

        The scrubbed traceback goes where logging puts one (``exc_text``), so the
        text and JSON formats show it as they show any other.
        """
        if not logger.isEnabledFor(level):
            return
        record = logger.makeRecord(logger.name, level, "(unknown file)", 0, message, args,
                                   None, extra=dict(extra) if extra else None)
        record.exc_text = self.format_exception(error).rstrip("\n")
        logger.handle(record)

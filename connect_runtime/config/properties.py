"""Reading worker configuration the Kafka Connect way.

* ``.properties`` files, in java.util.Properties syntax
  (:mod:`connect_runtime.java_properties`).
* ``CONNECT_``-prefixed environment variables override file keys, with the
  Confluent image convention: ``CONNECT_BOOTSTRAP_SERVERS`` -> ``bootstrap.servers``;
  a single ``_`` is a ``.``, ``__`` is a literal ``_``, ``___`` is a ``-``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from connect_runtime.errors import ConfigException
from connect_runtime.java_properties import parse_properties

ENV_PREFIX = "CONNECT_"

_JAVA_TRIMMED = "".join(chr(code) for code in range(0x21))


def java_trim(text: str) -> str:
    """Java ``String.trim``: strips every character up to U+0020, not just whitespace.

    For text Connect trims that way (connector names in REST bodies, log levels).
    """
    return text.strip(_JAVA_TRIMMED)


def load_properties_file(path: str | Path) -> dict[str, str]:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigException(f"cannot read worker config file {p}: {e.strerror}") from e
    return parse_properties(text, str(p))


def env_key_to_property(env_name: str) -> str:
    """``CONNECT_OFFSET_FLUSH_INTERVAL_MS`` -> ``offset.flush.interval.ms``."""
    body = env_name[len(ENV_PREFIX) :].lower()
    # Order matters: the longest underscore runs are the special ones.
    return body.replace("___", "\x00").replace("__", "\x01").replace("_", ".").replace(
        "\x00", "-"
    ).replace("\x01", "_")


def env_overrides(environ: Mapping[str, str]) -> dict[str, str]:
    return {
        env_key_to_property(name): value
        for name, value in environ.items()
        if name.startswith(ENV_PREFIX) and len(name) > len(ENV_PREFIX)
    }

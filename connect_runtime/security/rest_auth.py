"""REST authentication settings, read as Kafka Connect's BasicAuthSecurityRestExtension does.

Connect enables HTTP Basic authentication with
``rest.extension.classes=org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension``
and a JAAS file (the JVM's ``java.security.auth.login.config``, usually set in
``KAFKA_OPTS``) whose ``KafkaConnect`` entry names ``PropertyFileLoginModule``
and its credentials file::

    KafkaConnect {
      org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule required
      file="/etc/connect/credentials.properties";
    };

The credentials file is Java properties, one ``user: password`` (or
``user=password``) per line. The same two files work here unchanged. The JAAS
file's path comes from the worker property ``java.security.auth.login.config``
or, as for Connect, from ``-Djava.security.auth.login.config=...`` in
``KAFKA_OPTS``. Everything is read when the worker config loads, so a missing
or malformed file stops the worker at start, naming the key.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from pathlib import Path

from connect_runtime.errors import ConfigException
from connect_runtime.java_properties import parse_properties

BASIC_AUTH_EXTENSION = (
    "org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension")
PROPERTY_FILE_LOGIN_MODULE = (
    "org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule")
REST_EXTENSIONS_CONFIG = "rest.extension.classes"
JAAS_CONFIG = "java.security.auth.login.config"
LOGIN_ENTRY = "KafkaConnect"

_ENTRY = re.compile(r"(?P<name>[\w.\-]+)\s*\{(?P<body>.*?)\}\s*;", re.DOTALL)
_MODULE = re.compile(r"\s*(?P<class>[\w.$]+)\s+(?P<flag>required|requisite|sufficient|optional)"
                     r"(?P<options>[^;]*);", re.DOTALL)
_OPTION = re.compile(r'([\w.\-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|(\S+))')


def jaas_path(worker: Mapping[str, str], environ: Mapping[str, str] = os.environ) -> str | None:
    """The JAAS file: the worker property, else ``-Djava.security.auth.login.config`` in
    ``KAFKA_OPTS`` (as a Connect deployment sets it)."""
    if worker.get(JAAS_CONFIG):
        return worker[JAAS_CONFIG]
    for arg in shlex.split(environ.get("KAFKA_OPTS", "")):
        if arg.startswith(f"-D{JAAS_CONFIG}="):
            return arg.split("=", 1)[1]
    return None


def basic_auth_credentials(extensions: list[str], jaas: str | None) -> dict[str, str] | None:
    """The users and passwords REST accepts; None when Basic authentication is off.

    An empty dict means the credentials file is empty: Connect then lets every
    request through, and so does this worker (it logs a warning at start).
    Raises ConfigException naming the key for an unknown extension, a missing
    JAAS file or entry, another login module, or an unreadable credentials file.
    """
    unknown = [e for e in extensions if e != BASIC_AUTH_EXTENSION]
    if unknown:
        raise ConfigException(f"REST extension(s) {', '.join(unknown)} are not available in "
                              f"connect-runtime; only {BASIC_AUTH_EXTENSION} is",
                              name=REST_EXTENSIONS_CONFIG, value=",".join(extensions))
    if not extensions:
        return None
    if not jaas:
        raise ConfigException(
            f"{BASIC_AUTH_EXTENSION} needs a JAAS file with a {LOGIN_ENTRY} entry: set "
            f"{JAAS_CONFIG} in the worker config (or -D{JAAS_CONFIG}=... in KAFKA_OPTS)",
            name=JAAS_CONFIG)
    try:
        text = Path(jaas).read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigException(f"cannot read the JAAS file: {e.strerror}", name=JAAS_CONFIG,
                              value=jaas) from None
    text = re.sub(r"//[^\n]*|/\*.*?\*/", "", text, flags=re.DOTALL)
    entries = {m["name"]: m["body"] for m in _ENTRY.finditer(text)}
    if LOGIN_ENTRY not in entries:
        raise ConfigException(f"the JAAS file has no {LOGIN_ENTRY} entry "
                              f"(entries: {', '.join(entries) or 'none'})",
                              name=JAAS_CONFIG, value=jaas)
    modules = list(_MODULE.finditer(entries[LOGIN_ENTRY]))
    if len(modules) != 1 or modules[0]["class"] != PROPERTY_FILE_LOGIN_MODULE:
        found = ", ".join(m["class"] for m in modules) or "none"
        raise ConfigException(f"the {LOGIN_ENTRY} entry must name exactly one login module, "
                              f"{PROPERTY_FILE_LOGIN_MODULE} (found: {found})",
                              name=JAAS_CONFIG, value=jaas)
    options = {m[1]: m[2] if m[2] is not None else m[3]
               for m in _OPTION.finditer(modules[0]["options"])}
    file = options.get("file")
    if not file:
        raise ConfigException(f"{PROPERTY_FILE_LOGIN_MODULE} needs file=\"<credentials "
                              "file>\"", name=JAAS_CONFIG, value=jaas)
    try:
        return parse_properties(Path(file).read_text(encoding="latin-1"), file)
    except OSError as e:
        raise ConfigException(f"cannot read the credentials file {file}: {e.strerror}",
                              name=JAAS_CONFIG, value=jaas) from None

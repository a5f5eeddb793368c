"""The Schema Registry as a converter sees it: a schema id per (subject, schema).

Built on confluent-kafka's ``SchemaRegistryClient`` (its URL failover, basic
auth, retries with backoff, and caches); what is added here:

* **one registry call per schema and subject**, ever, for the task's life: the
  id is kept by ``(subject, schema text)`` (``max.schemas.per.subject`` of them),
  so the record path never reaches the client's own caches, which hash the
  schema on every call;
* **errors that say what to do**, named after the subject, the versions and the
  URL (see :meth:`Registry.schema_id`), in the runtime's error tree: a registry
  that cannot be reached is a
  :class:`~connect_runtime.errors.ServiceUnavailableException` (retried, never
  tolerated: the record is not at fault), a refused login a
  :class:`~connect_runtime.errors.ServiceException`, a schema the subject's
  compatibility refuses a :class:`~connect_runtime.errors.DataException`;
* TLS from Connect-style stores (PKCS12 or PEM, ``schema.registry.ssl.*``), set
  on the client's HTTP session, since the client itself takes only PEM paths.

Not thread-safe: one converter (one task thread) owns each instance.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from connect_runtime.converters.registry.config import RegistrySettings
from connect_runtime.errors import DataException, ServiceException, ServiceUnavailableException

if TYPE_CHECKING:
    from confluent_kafka.schema_registry import SchemaRegistryClient

log = logging.getLogger(__name__)

# Statuses after which the same request may succeed later: the client has retried
# them already; the task may retry again (errors.retry.timeout) or restart.
_UNAVAILABLE = {408, 429, 500, 502, 503, 504}


class Registry:
    """Schema ids for one converter (see the module docstring)."""

    def __init__(self, settings: RegistrySettings) -> None:
        self.settings = settings
        self._client: SchemaRegistryClient | None = None
        # (subject, schema text) -> id; the text is the exact string registered.
        self._ids: dict[tuple[str, str], int] = {}
        # subject -> (id, schema text) of its latest version (use.latest.version).
        self._latest: dict[str, tuple[int, str]] = {}

    @property
    def where(self) -> str:
        """The registry's URL(s), for messages."""
        return ", ".join(_without_credentials(u) for u in self.settings.urls)

    def client(self) -> SchemaRegistryClient:
        """confluent-kafka's client, made on first use: ``configure`` never calls the
        registry (validation and task startup stay fast and offline)."""
        if self._client is None:
            from confluent_kafka.schema_registry import SchemaRegistryClient

            client = SchemaRegistryClient(self.settings.client_conf())
            if self.settings.tls is not None:
                _use_tls(client, self.settings.tls.context())
            self._client = client
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def schema_id(self, subject: str, text: str, schema_type: str) -> int:
        """The id of schema ``text`` (of ``schema_type``: AVRO, PROTOBUF, JSON) under
        ``subject``: registered if ``auto.register.schemas``, else looked up.

        Raises DataException (the subject's compatibility refuses it, naming the
        subject, its versions and the registry's message; or not registered with
        ``auto.register.schemas=false``), ServiceUnavailableException (cannot
        reach the registry, naming the URL) or ServiceException (it refused the
        credentials or the request)."""
        key = (subject, text)
        found = self._ids.get(key)
        if found is not None:
            return found
        from confluent_kafka.schema_registry import Schema

        schema = Schema(text, schema_type)
        normalize = self.settings.normalize
        if self.settings.auto_register:
            schema_id = int(self._call(
                f"register a schema under subject {subject!r}", subject,
                lambda c: c.register_schema(subject, schema, normalize_schemas=normalize),
                incompatible=True))
        else:
            registered = self._call(
                f"look up a schema under subject {subject!r}", subject,
                lambda c: c.lookup_schema(subject, schema, normalize_schemas=normalize),
                missing=(f"the schema is not registered under subject {subject!r}, and "
                         "auto.register.schemas=false forbids registering it; register it "
                         "first or set auto.register.schemas=true"))
            schema_id = int(registered.schema_id)
        if len(self._ids) >= self.settings.cache_size:
            self._ids.clear()
        self._ids[key] = schema_id
        return schema_id

    def latest(self, subject: str, text: str, schema_type: str) -> tuple[int, str]:
        """(id, schema text) of ``subject``'s latest version, for use.latest.version.
        With ``latest.compatibility.strict`` the registry must find the record's
        schema ``text`` compatible with it, or DataException."""
        found = self._latest.get(subject)
        if found is not None:
            return found
        from confluent_kafka.schema_registry import Schema

        latest = self._call(f"read the latest version of subject {subject!r}", subject,
                            lambda c: c.get_latest_version(subject),
                            missing=f"subject {subject!r} has no version to use "
                                    "(use.latest.version=true)")
        if self.settings.latest_strict:
            schema = Schema(text, schema_type)
            compatible = self._call(
                f"check a schema against the latest version of {subject!r}", subject,
                lambda c: c.test_compatibility(subject, schema, "latest"))
            if not compatible:
                raise DataException(
                    f"The record's schema is not compatible with version {latest.version} "
                    f"(id {latest.schema_id}) of subject {subject!r}, the latest, which "
                    "use.latest.version would write it with (latest.compatibility.strict="
                    f"true; registry {self.where})")
        result = (int(latest.schema_id), str(latest.schema.schema_str))
        self._latest[subject] = result
        return result

    def _call(self, what: str, subject: str, call: Any, *, incompatible: bool = False,
              missing: str | None = None) -> Any:
        """``call(client)``, its errors translated (see :meth:`schema_id`)."""
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        try:
            return call(self.client())
        except SchemaRegistryError as e:
            status = e.http_status_code
            message = e.error_message
            if status in _UNAVAILABLE:
                raise ServiceUnavailableException(
                    f"Schema Registry at {self.where} could not {what}: HTTP {status} "
                    f"{message} (after {self.settings.max_retries} retries per URL)") from None
            if status in (401, 403):
                raise ServiceException(
                    f"Schema Registry at {self.where} refused to {what}: HTTP {status} "
                    f"{message}; check basic.auth.credentials.source and "
                    "basic.auth.user.info") from None
            if incompatible and status == 409:
                raise DataException(self._incompatible(subject, message)) from None
            if missing is not None and status == 404:
                raise DataException(f"Schema Registry at {self.where}: {missing} "
                                    f"({message})") from None
            if status == 422 or status == 409:
                raise DataException(f"Schema Registry at {self.where} refused to {what}: "
                                    f"{message} (HTTP {status})") from None
            raise ServiceException(f"Schema Registry at {self.where} could not {what}: "
                                   f"HTTP {status} {message}") from None
        except (DataException, ServiceException):
            raise
        except Exception as e:  # httpx's TransportError, after the client's retries
            if _is_transport_error(e):
                raise ServiceUnavailableException(
                    f"Schema Registry at {self.where} could not be reached to {what}, after "
                    f"{self.settings.max_retries} retries per URL: "
                    f"{type(e).__name__}: {e}") from None
            raise

    def _incompatible(self, subject: str, message: str) -> str:
        """The message for a schema the subject's compatibility refused: the subject,
        its versions (if the registry still answers) and the registry's words."""
        versions = ""
        try:
            listed = self.client().get_versions(subject)
            level = _compatibility(self.client(), subject)
            versions = (f" (registered versions {listed}, compatibility {level}; this one "
                        f"would have been version {max(listed, default=0) + 1})")
        except Exception:  # the message stands without them
            log.debug("Could not list the versions of subject %s", subject, exc_info=True)
        return (f"Schema being registered is incompatible with an earlier schema for subject "
                f"{subject!r}{versions}; Schema Registry at {self.where} said: {message}")


def _compatibility(client: Any, subject: str) -> str:
    try:
        return str(client.get_compatibility(subject))
    except Exception:  # no subject-level setting: the global one
        return str(client.get_compatibility())


def _is_transport_error(e: Exception) -> bool:
    """httpx's TransportError, whichever httpx the client runs on (httpx or httpx2)."""
    return any(cls.__name__ == "TransportError" for cls in type(e).__mro__)


def _without_credentials(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    host, slash, path = rest.partition("/")
    return f"{scheme}{sep}{host.rpartition('@')[2]}{slash}{path}"


def _use_tls(client: Any, context: Any) -> None:
    """Give ``client`` an HTTP session that uses ``context`` (the client builds its
    session from PEM file paths only). Pinned by
    tests/converters/test_registry_converters.py::test_https_with_a_pkcs12_truststore_and_basic_auth."""
    rest = client._rest_client
    rest.verify = context
    old = rest.session
    rest.session = type(old)(verify=context, auth=rest.auth, proxy=rest.proxy,
                             timeout=rest.timeout)
    old.close()

"""Single Message Transforms and predicates: the contracts a user's own must meet.

Kafka Connect's ``Transformation`` and ``Predicate`` interfaces, in Python. A
class only has to have these methods (no base class); configure it with
``transforms.<alias>.type=my_package.module.MyTransform`` or register it under
the entry point group ``connect_runtime.transforms`` (``connect_runtime.predicates``
for predicates). The bundled ones (``org.apache.kafka.connect.transforms.*``)
live in ``connect_runtime.transforms``.

Invariants every implementation keeps:

* The class has a no-argument constructor; the framework makes one instance
  per stage of the chain, in the task's process, calls ``configure`` once with
  the plugin's own keys (``transforms.<alias>.*`` or ``predicates.<alias>.*``
  of the connector config, prefix stripped, values as given: strings), then
  ``apply``/``test`` per record, then ``close`` once when the task ends.
* ``apply`` never mutates the record it is given (the framework holds it until
  its transaction commits): it returns a new one (``dataclasses.replace``), the
  same one unchanged, or None to drop it. A dropped record is not produced,
  and its source offset still advances.
* ``config_def()`` describes every key ``configure`` reads; validation
  (``PUT .../config/validate``) and ``GET /connector-plugins/<class>/config``
  show it.
* Errors: a bad configuration raises :class:`~connect_runtime.errors.ConfigException`;
  a record the plugin cannot handle raises
  :class:`~connect_runtime.errors.DataException` (``errors.tolerance=all`` skips
  that record, ``none`` fails the task; a
  :class:`~connect_runtime.errors.RetriableException` is retried while
  ``errors.retry.timeout`` allows).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from connect_runtime.api.config_def import ConfigDef
    from connect_runtime.api.record import SourceRecord


class Transformation(Protocol):
    """Kafka Connect's ``Transformation``: changes, reroutes or drops one record."""

    def config_def(self) -> ConfigDef:
        """The keys ``configure`` reads (static or class method in practice)."""
        ...

    def configure(self, configs: dict[str, str]) -> None:
        """Read the plugin's keys (prefix stripped); ConfigException if they are bad."""
        ...

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        """The transformed record (a new one, or ``record`` unchanged), or None to drop it."""
        ...

    def close(self) -> None:
        """Release resources; called once, when the task stops."""
        ...


class Predicate(Protocol):
    """Kafka Connect's ``Predicate``: decides whether a transformation applies to a record."""

    def config_def(self) -> ConfigDef:
        """The keys ``configure`` reads (static or class method in practice)."""
        ...

    def configure(self, configs: dict[str, str]) -> None:
        """Read the plugin's keys (prefix stripped); ConfigException if they are bad."""
        ...

    def test(self, record: SourceRecord) -> bool:
        """True if the record matches; must not change it."""
        ...

    def close(self) -> None:
        """Release resources; called once, when the task stops."""
        ...

"""The connector side: :class:`SourceConnector` splits work into task configs.

A ``SourceConnector`` instance lives on the leader worker (the Spark driver).
It never touches records; it decides how many tasks run and what each reads.

Invariants:

* Each source partition is assigned to at most one task at a time; otherwise
  exactly-once delivery cannot hold (KIP-618 "Limitations").
* ``task_configs`` returns at most ``max_tasks`` plain ``dict[str, str]`` maps.
  They are written to the config topic and shipped to executors, so they must
  be JSON-serializable strings (and therefore picklable).
* When the source's shape changes (a new table, a new file), call
  ``self.context.request_task_reconfiguration()``; the framework calls
  ``task_configs`` again and, if the result differs, fences the old generation
  of tasks before the new one starts.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from enum import Enum
from typing import TYPE_CHECKING, Protocol

from connect_runtime.api.config_def import Config, ConfigDef
from connect_runtime.api.record import SourceOffset, SourcePartition

if TYPE_CHECKING:
    from connect_runtime.api.task import OffsetStorageReader, SourceTask


class ExactlyOnceSupport(Enum):
    """Whether a connector can deliver exactly once with a given configuration."""

    SUPPORTED = "SUPPORTED"
    UNSUPPORTED = "UNSUPPORTED"


class ConnectorTransactionBoundaries(Enum):
    """Whether a connector can define its own transaction boundaries."""

    SUPPORTED = "SUPPORTED"
    UNSUPPORTED = "UNSUPPORTED"


class ConnectorContext(Protocol):
    """What the framework gives a running connector."""

    def request_task_reconfiguration(self) -> None:
        """Ask the framework to call ``task_configs`` again soon."""
        ...

    def raise_error(self, error: BaseException) -> None:
        """Fail the connector (status FAILED with this error's trace)."""
        ...

    @property
    def offset_storage_reader(self) -> OffsetStorageReader:
        """Committed source offsets of this connector's tasks (KIP-618's combined view)."""
        ...


class SourceConnector(ABC):
    """Base class of every source connector.

    Subclasses must have a no-argument constructor. ``start`` receives the
    connector's whole configuration as ``dict[str, str]`` (framework keys such as
    ``name``, ``connector.class`` and ``tasks.max`` included).
    """

    context: ConnectorContext

    def initialize(self, context: ConnectorContext) -> None:
        """Called by the framework before ``start``; keeps ``context``."""
        self.context = context

    def version(self) -> str:
        """The connector's version, shown by ``GET /connector-plugins``."""
        return "unknown"

    @abstractmethod
    def start(self, config: dict[str, str]) -> None:
        """Prepare to hand out task configs."""

    @abstractmethod
    def task_class(self) -> type[SourceTask]:
        """The :class:`SourceTask` subclass that runs this connector's work."""

    @abstractmethod
    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        """At most ``max_tasks`` task configurations, one per task to run.

        ``max_tasks`` is the connector's ``tasks.max``, which the framework has
        already validated to be at least 1.
        """

    @abstractmethod
    def stop(self) -> None:
        """Release resources; called when the connector is stopped or deleted."""

    def config_def(self) -> ConfigDef:
        """The connector's own keys; drives validation and the plugin config endpoint."""
        return ConfigDef()

    def validate(self, config: dict[str, str]) -> Config:
        """Validate ``config`` against ``config_def()``; override to add cross-key checks."""
        return Config(self.config_def().validate(config))

    def exactly_once_support(self, config: dict[str, str]) -> ExactlyOnceSupport | None:
        """Whether this connector delivers exactly once with ``config``.

        None means "cannot tell", which fails ``exactly.once.support=required``.
        """
        return None

    def can_define_transaction_boundaries(
        self, config: dict[str, str]
    ) -> ConnectorTransactionBoundaries:
        """Whether tasks use ``TransactionContext`` with ``config``.

        Must be SUPPORTED for ``transaction.boundary=connector`` to be accepted.
        """
        return ConnectorTransactionBoundaries.UNSUPPORTED

    def alter_offsets(
        self, config: dict[str, str],
        offsets: Sequence[tuple[SourcePartition, SourceOffset | None]],
    ) -> bool:
        """Consulted before a user's offsets are written (KIP-875).

        Called on a fresh instance (``start`` is not called) on the leader when
        someone alters (``PATCH /connectors/<name>/offsets``) or resets
        (``DELETE``) the offsets of this connector while it is STOPPED, or creates
        it with ``initial_offsets`` (``POST /connectors``, KIP-995; refusing then
        creates nothing).
        ``offsets`` lists ``(source partition, offset)`` pairs exactly as they will
        be written and as tasks will read them back; an offset of None removes the
        partition's offset (every pair of a reset has None).

        * Raise (any exception; its message reaches the user in a 400) to refuse
          the request, e.g. for a partition or offset this connector could not
          resume from. Nothing is written then.
        * Return True if the connector keeps no offsets of its own outside the
          framework, or has applied the change there too: the user is told the
          offsets were altered.
        * Return False (the default, as in Kafka Connect) if the connector does not
          know: the framework still writes the offsets, and the user is told that
          offsets the connector manages elsewhere must be changed there by hand.
        """
        return False

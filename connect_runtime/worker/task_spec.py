"""Everything a Spark executor needs to run one connector task.

A :class:`TaskSpec` is built on the driver and pickled into the Spark job's
closure, so it holds plain data only (strings, ints, dicts of strings): no
clients, locks or connector instances. The executor rebuilds everything from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class TaskSpec:
    connector: str
    task: int
    # Config-topic offset of the commit record of this task generation; a task
    # whose startup read finds a larger one belongs to a dead generation.
    generation: int
    task_config: dict[str, str]
    connector_config: dict[str, str]
    # Worker settings the executor needs.
    bootstrap_servers: str
    group_id: str
    config_topic: str
    status_topic: str
    global_offsets_topic: str
    worker_url: str
    worker_id: str
    eos_support: str
    offset_flush_interval_ms: int
    graceful_timeout_ms: int
    # At-least-once tasks only: how long one offset flush may take.
    offset_flush_timeout_ms: int = 5000
    producer_overrides: dict[str, str] = field(default_factory=dict)
    consumer_overrides: dict[str, str] = field(default_factory=dict)
    admin_overrides: dict[str, str] = field(default_factory=dict)
    worker_converters: dict[str, str] = field(default_factory=dict)
    offsets_topic_partitions: int = 25
    offsets_topic_replication_factor: int = -1
    # Session key for signing internal requests (fence), base64; None: unsigned.
    session_key: str | None = None
    session_key_algorithm: str = "HmacSHA256"

    @property
    def transactional_id(self) -> str:
        """KIP-618: ``<group.id>-<connector>-<task>``; users cannot override it."""
        return f"{self.group_id}-{self.connector}-{self.task}"

    @property
    def task_label(self) -> str:
        return f"{self.connector}-{self.task}"

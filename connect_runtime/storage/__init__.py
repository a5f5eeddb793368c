"""The runtime's state in Kafka, in Kafka Connect's formats.

* :mod:`~connect_runtime.storage.offsets`: source offsets (global and
  per-connector offsets topics, KIP-618's combined view and mirroring).
* :mod:`~connect_runtime.storage.status_store`: connector and task statuses.
* :mod:`~connect_runtime.storage.config_store`: connector configs, task configs,
  target states, task-count records and the session key; leader-only,
  transactional writes.

Records written here are readable by Kafka Connect (Java) and vice versa.
"""

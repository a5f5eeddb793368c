"""Thin, typed helpers over confluent-kafka for the runtime's internal topics.

* :mod:`~connect_runtime.kafka.clients`: client factories with the runtime's
  defaults, and end-offset listing through the admin client.
* :mod:`~connect_runtime.kafka.topics`: creating the internal topics (and
  per-connector offsets topics) the way Kafka Connect does.
* :mod:`~connect_runtime.kafka.log`: :class:`KafkaBasedLog`, a background
  reader that keeps an in-memory view of a compacted topic and can "read to the
  end" on demand, waiting for open transactions to resolve.
* :mod:`~connect_runtime.kafka.produce`: :func:`produce_waiting`, queueing one
  message with a full queue waited out and any other error translated: what a
  task's send path and the offsets mirror fall back on.

``confluent_kafka.KafkaException`` never leaves this package untranslated: it
becomes a :class:`~connect_runtime.errors.KafkaClientError` subclass here.
"""

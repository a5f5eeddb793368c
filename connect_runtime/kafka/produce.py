"""Queueing one message with a producer: the one place a full queue is waited out.

Every produce the runtime makes on a task's behalf (its records, its source
offsets, the offsets mirror's copies to the global topic) that cannot go
straight into librdkafka's queue ends here: :func:`produce_waiting` waits for
room when the queue is full and translates every other client error once.
The task plane's fast paths call ``producer.produce`` directly in their loops
and come here only for the message that failed (see
:mod:`~connect_runtime.task.record_sender`), so the hot path pays nothing for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from connect_runtime.errors import translate_kafka_error

if TYPE_CHECKING:
    from collections.abc import Callable

    from confluent_kafka import Producer

# librdkafka raises BufferError when its local queue is full
# (queue.buffering.max.messages/kbytes). Serving delivery reports for this long
# lets acknowledged messages leave the queue before the next try, so a full
# queue is waited out, never spun on.
QUEUE_FULL_BACKOFF_S = 0.05


def produce_waiting(producer: Producer, topic: str, value: bytes | None,
                    key: bytes | None = None, partition: int = -1,
                    callback: Callable[[Any, Any], None] | None = None, timestamp: int = 0,
                    headers: list[tuple[str, Any]] | None = None, *, context: str,
                    refused: Exception | None = None) -> None:
    """Queue one message, as ``producer.produce`` with these arguments would.

    Contract: returns once the message is queued (its delivery report, if
    ``callback`` is given, comes from a later ``poll`` or ``flush``); while the
    queue is full it serves delivery reports (``poll``) for
    :data:`QUEUE_FULL_BACKOFF_S` and tries again, for as long as it takes; any
    other error is raised as a :class:`~connect_runtime.errors.KafkaClientError`
    whose message starts with ``context`` (what was being done, for whom: it
    leads a failed task's trace), ``from`` the client's exception.
    ``partition`` -1 lets the partitioner choose; ``timestamp`` 0 means now.

    ``refused`` is what the caller's own ``producer.produce`` of this message
    raised, for callers that try first in a loop of their own (the task's fast
    paths): a BufferError is waited out as above, anything else is translated
    at once, without another try.
    """
    if refused is not None:
        if not isinstance(refused, BufferError):
            raise translate_kafka_error(refused, context) from refused
        producer.poll(QUEUE_FULL_BACKOFF_S)
    while True:
        try:
            # Positional, in confluent-kafka's order: topic, value, key, partition,
            # callback, on_delivery (an alias, read only when callback is not given
            # at all, so the callback goes first), timestamp, headers.
            producer.produce(topic, value, key, partition, callback, None, timestamp, headers)
            return
        except BufferError:
            producer.poll(QUEUE_FULL_BACKOFF_S)
        except Exception as e:
            raise translate_kafka_error(e, context) from e

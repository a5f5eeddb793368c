"""Leader election through Kafka's group membership.

Every worker joins the consumer group ``group.id``, subscribed to the config
topic, which has exactly one partition: whoever is assigned partition 0 leads.
The broker's group coordinator does the hard parts — a worker that dies
(SIGKILL) or stalls (SIGSTOP) stops heartbeating and is expelled after
``session.timeout.ms``, and the partition moves to another member.

Leadership alone is not trusted for writes: the new leader's
``init_transactions()`` on ``connect-cluster-<group.id>`` fences the previous
leader's producer, so a stalled leader that wakes up cannot write to the config
topic even before it notices it lost the partition.

The consumer never reads records for anyone (``assign``-only readers do that);
polling it keeps the membership alive and delivers the rebalance callbacks.

Under static membership (``group.instance.id``, KIP-345) a member that closes
does not leave: the coordinator keeps its place and its assignment until
``session.timeout.ms`` runs out, and a consumer joining under the same
instance id gets them back without a rebalance. So a restarted leader is the
leader again, and a restarted follower moves nothing. A second live consumer
under the same instance id fences the first one for good (a fatal error):
the membership then ends, and :attr:`GroupMembership.failure` says why.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition

log = logging.getLogger(__name__)

POLL_INTERVAL_S = 0.2


class GroupMembership:
    """Runs the member's consumer on a thread; calls back on election and demotion.

    ``on_elected`` and ``on_demoted`` run on a separate thread (they may block on
    Kafka or on stopping tasks); the membership keeps heartbeating meanwhile.
    """

    def __init__(self, consumer_config: dict[str, Any], config_topic: str,
                 on_elected: Callable[[], None], on_demoted: Callable[[], None],
                 on_rebalance: Callable[[], None] | None = None) -> None:
        self._conf = {
            **consumer_config,
            "enable.auto.commit": False,
            "auto.offset.reset": "latest",
            # Cooperative-sticky assigns the single partition to exactly one
            # member and leaves it there when others join: leadership moves
            # only when its holder leaves or is expelled. With "range" it went
            # to whichever member id sorted first, so every join could move it
            # and fence a leader in the middle of a request.
            "partition.assignment.strategy": "cooperative-sticky",
            "enable.partition.eof": False,
        }
        self._topic = config_topic
        self._on_elected = on_elected
        self._on_demoted = on_demoted
        self._on_rebalance = on_rebalance  # every completed rebalance; must not block
        self._leader = False
        # Set once, by the poll thread, when the consumer hit a fatal error.
        self._failure: str | None = None
        self._stop = threading.Event()
        self._changes: list[bool] = []
        self._changed = threading.Condition()
        self._poller = threading.Thread(target=self._run, name="group-membership", daemon=True)
        self._dispatcher = threading.Thread(target=self._dispatch, name="leadership",
                                            daemon=True)

    @property
    def is_leader(self) -> bool:
        return self._leader

    @property
    def failure(self) -> str | None:
        """Why the membership ended on its own (a fatal consumer error, such as
        another worker joining under this ``group.instance.id``); None while it
        runs or after :meth:`stop`."""
        return self._failure

    def start(self) -> None:
        self._poller.start()
        self._dispatcher.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Leave the group (a clean leave triggers an immediate rebalance elsewhere)."""
        self._stop.set()
        with self._changed:
            self._changed.notify_all()
        self._poller.join(timeout)
        self._dispatcher.join(timeout)

    def _set(self, leader: bool) -> None:
        if leader == self._leader:
            return
        self._leader = leader
        with self._changed:
            self._changes.append(leader)
            self._changed.notify_all()

    # Cooperative rebalancing hands over increments: an assignment without
    # partition 0 does not demote, a revocation of other partitions does not
    # either (there are none, but the protocol allows empty increments).
    def _on_assign(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        # Called once per completed rebalance, with an empty increment if nothing moved.
        if self._on_rebalance is not None:
            self._on_rebalance()
        if any(tp.partition == 0 for tp in partitions):
            self._set(True)

    def _on_revoke(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        if any(tp.partition == 0 for tp in partitions):
            self._set(False)

    def _on_lost(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        self._set(False)

    def _run(self) -> None:
        consumer = Consumer(self._conf)
        consumer.subscribe([self._topic], on_assign=self._on_assign,
                           on_revoke=self._on_revoke, on_lost=self._on_lost)
        try:
            while not self._stop.is_set():
                msg = consumer.poll(POLL_INTERVAL_S)
                err = msg.error() if msg is not None else None
                if err is None or err.code() == KafkaError._PARTITION_EOF:
                    continue
                if err.fatal() or err.code() == KafkaError._FATAL:
                    self._failure = self._describe_fatal(err)
                    log.error("group membership ended: %s", self._failure)
                    break
                log.warning("group membership: %s", err)
        finally:
            self._set(False)
            # Leaves the group now rather than after the session timeout; under
            # group.instance.id the place is kept for the session timeout instead.
            consumer.close()

    def _describe_fatal(self, err: KafkaError) -> str:
        group, instance = self._conf.get("group.id"), self._conf.get("group.instance.id")
        if instance is None:
            return f"fatal Kafka consumer error in group {group!r}: {err.str()}"
        # librdkafka reports the fencing as _FATAL, its cause only in the text.
        return (f"fatal Kafka consumer error in group {group!r} under group.instance.id "
                f"{instance!r} (another worker joining under the same group.instance.id "
                f"fences this one; it must be unique per worker): {err.str()}")

    def _dispatch(self) -> None:
        """Deliver leadership changes in order, one at a time, off the poll thread."""
        while True:
            with self._changed:
                self._changed.wait_for(lambda: bool(self._changes) or self._stop.is_set())
                if not self._changes:
                    return
                leader = self._changes.pop(0)
            try:
                # The lifecycle lines (leader_elected, leadership_lost) are the
                # herder's, once it has taken over or stepped down.
                if leader:
                    log.info("assigned the config topic's partition: taking over as leader")
                    self._on_elected()
                else:
                    log.info("the config topic's partition was revoked or lost: stepping down")
                    self._on_demoted()
            except Exception:
                log.exception("leadership change handler failed")

"""Connectors that misbehave on purpose, for end-to-end tests of failure handling.

Importable on Spark executors because the test harness puts this folder on the
workers' PYTHONPATH.
"""

from __future__ import annotations

import hashlib

from connect_runtime import (
    ConfigDef,
    ConfigException,
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    Importance,
    SourceConnector,
    SourceRecord,
    SourceTask,
    Type,
)


class _OneTaskConnector(SourceConnector):
    def start(self, config: dict[str, str]) -> None:
        self.config = dict(config)

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.config)]

    def stop(self) -> None:
        pass

    def exactly_once_support(self, config: dict[str, str]) -> ExactlyOnceSupport:
        return ExactlyOnceSupport.SUPPORTED


class FailingTask(SourceTask):
    """Emits ``fail.after`` records (committed), then raises from poll: a RuntimeError
    whose message is ``fail.message`` when set (the dashboard test puts HTML in it)."""

    def start(self, config: dict[str, str]) -> None:
        self.topic = config["topic"]
        self.fail_after = int(config.get("fail.after", "10"))
        self.fail_message = config.get("fail.message")
        offset = self.context.offset_storage_reader.offset({"source": "failing"})
        self.next = int(offset["seq"]) if offset else 0  # type: ignore[arg-type]

    def poll(self) -> list[SourceRecord] | None:
        if self.next >= self.fail_after:
            raise RuntimeError(self.fail_message or
                               f"boom: failing task gave up at seq {self.next}")
        batch = [SourceRecord({"source": "failing"}, {"seq": n + 1}, self.topic,
                              value={"partition": 0, "seq": n})
                 for n in range(self.next, self.fail_after)]
        self.next = self.fail_after
        return batch

    def stop(self) -> None:
        pass


class FailingSourceConnector(_OneTaskConnector):
    def task_class(self) -> type[SourceTask]:
        return FailingTask


class FlakyTask(SourceTask):
    """Numbered records (``{"partition": <flaky.index>, "seq": n}``, resumed from its
    committed offset); each of its first ``fail.times`` starts fails after
    ``fail.after`` records of its own, later starts run for good. Starts are counted
    in the file ``fail.state.file``, which outlives task instances and processes."""

    def start(self, config: dict[str, str]) -> None:
        from pathlib import Path

        self.topic = config["topic"]
        self.index = int(config.get("flaky.index", "0"))
        self.partition = {"source": f"flaky-{self.index}"}
        state = Path(config["fail.state.file"])
        self.starts = (int(state.read_text()) if state.exists() else 0) + 1
        state.write_text(str(self.starts))
        self.fails = self.starts <= int(config.get("fail.times", "3"))
        self.fail_after = int(config.get("fail.after", "20"))
        self.sent = 0
        offset = self.context.offset_storage_reader.offset(self.partition)
        self.next = int(offset["seq"]) if offset else 0  # type: ignore[arg-type]

    def poll(self) -> list[SourceRecord] | None:
        import time

        if self.fails and self.sent >= self.fail_after:
            raise RuntimeError(f"flaky: start {self.starts} gave up at seq {self.next}")
        time.sleep(0.05)
        batch = [SourceRecord(self.partition, {"seq": n + 1}, self.topic,
                              value={"partition": self.index, "seq": n})
                 for n in range(self.next, self.next + 10)]
        self.next += 10
        self.sent += 10
        return batch

    def stop(self) -> None:
        pass


class FlakySourceConnector(_OneTaskConnector):
    def task_class(self) -> type[SourceTask]:
        return FlakyTask


class FlakyPairConnector(_OneTaskConnector):
    """Two FlakyTasks: task 0 never fails, task 1 fails ``fail.times`` times
    (each counts its starts in ``fail.state.file`` + ``.<index>``)."""

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        state = self.config["fail.state.file"]
        return [{**self.config, "flaky.index": "0", "fail.times": "0",
                 "fail.state.file": f"{state}.0"},
                {**self.config, "flaky.index": "1", "fail.state.file": f"{state}.1"}]

    def task_class(self) -> type[SourceTask]:
        return FlakyTask


class BadOffsetTask(SourceTask):
    """Returns a record whose source offset holds a list: not a primitive."""

    def start(self, config: dict[str, str]) -> None:
        self.topic = config["topic"]
        self.sent = False

    def poll(self) -> list[SourceRecord] | None:
        if self.sent:
            return None
        self.sent = True
        return [SourceRecord({"source": "bad"}, {"seq": 1}, self.topic, value={"seq": 0}),
                SourceRecord({"source": "bad"}, {"positions": [1, 2]}, self.topic,
                             value={"seq": 1})]

    def stop(self) -> None:
        pass


class BadOffsetSourceConnector(_OneTaskConnector):
    def task_class(self) -> type[SourceTask]:
        return BadOffsetTask


class StuckTask(SourceTask):
    """poll() never returns and stop() does not help: only a forced cancel ends it."""

    def start(self, config: dict[str, str]) -> None:
        pass

    def poll(self) -> list[SourceRecord] | None:
        import time

        while True:
            time.sleep(1)

    def stop(self) -> None:
        pass


class StuckSourceConnector(_OneTaskConnector):
    def task_class(self) -> type[SourceTask]:
        return StuckTask


SECRET_KEYS = ("file.secret", "env.secret")


def check_secrets(config: dict[str, str], where: str) -> None:
    """Each PASSWORD key of SECRET_KEYS that has a ``<key>.sha256`` must hash to it: proof
    that what reached ``where`` is the resolved secret, not its placeholder. The message
    names keys only."""
    for key in SECRET_KEYS:
        digest = config.get(f"{key}.sha256")
        if digest is None:
            continue
        got = hashlib.sha256(config.get(key, "").encode()).hexdigest()
        if got != digest:
            raise ConfigException(f"{where}: {key} is not the expected secret (SHA-256 "
                                  f"{got[:12]}..., expected {digest[:12]}...)")


class SecretsTask(SourceTask):
    """Checks its secrets on the executor (see ``check_secrets``), then sends numbered
    records holding no secret. With ``fail.after``, raises after that many records with
    a message quoting every secret it holds, as a careless driver would."""

    def start(self, config: dict[str, str]) -> None:
        check_secrets(config, "task")
        self.config = dict(config)
        self.topic = config["topic"]
        self.fail_after = int(config.get("fail.after", "-1"))
        offset = self.context.offset_storage_reader.offset({"source": "secrets"})
        self.next = int(offset["seq"]) if offset else 0  # type: ignore[arg-type]

    def poll(self) -> list[SourceRecord] | None:
        import time

        if 0 <= self.fail_after <= self.next:
            quoted = ", ".join(f"{k}={self.config.get(k)}" for k in SECRET_KEYS)
            raise RuntimeError(f"login refused with {quoted}")
        time.sleep(0.1)
        batch = [SourceRecord({"source": "secrets"}, {"seq": n + 1}, self.topic,
                              value={"seq": n}) for n in range(self.next, self.next + 5)]
        self.next += 5
        return batch

    def stop(self) -> None:
        pass


class SecretsSourceConnector(_OneTaskConnector):
    """``file.secret`` and ``env.secret`` are PASSWORD keys, checked against their
    ``.sha256`` keys on the worker that starts the connector and again in the task."""

    def start(self, config: dict[str, str]) -> None:
        check_secrets(config, "connector")
        super().start(config)

    def config_def(self) -> ConfigDef:
        d = ConfigDef().define("topic", Type.STRING, importance=Importance.HIGH)
        for key in SECRET_KEYS:
            d.define(key, Type.PASSWORD, None, importance=Importance.HIGH)
            d.define(f"{key}.sha256", Type.STRING, None, importance=Importance.LOW)
        return d

    def task_class(self) -> type[SourceTask]:
        return SecretsTask


class GroupedTask(SourceTask):
    """Records ``{"partition": 0, "seq": n}`` for n below ``total``, two a poll, in
    groups of ``group.size`` that consumers must see whole (transaction.boundary=
    connector: commit after each group's last record). Resumes from its committed
    offset; each start appends the offset it read to ``<state.dir>/starts``.

    ``rewind.at``: the first instance asks to rewind in the poll returning that seq
    (once: ``<state.dir>/rewound`` marks it). ``late.from`` and ``late.by.ms``: seqs
    from ``late.from`` on exist only ``late.by.ms`` after the first start, so until
    then a task has a group open and nothing to read.
    """

    def start(self, config: dict[str, str]) -> None:
        import json
        import time
        from pathlib import Path

        self.topic = config["topic"]
        self.total = int(config.get("total", "12"))
        self.group = int(config.get("group.size", "4"))
        self.state = Path(config["state.dir"])
        rewind = config.get("rewind.at")
        self.rewind_at = (int(rewind) if rewind and not (self.state / "rewound").exists()
                          else None)
        first = self.state / "first-start"
        if not first.exists():
            first.write_text(str(time.time()))
        self.late_from = int(config.get("late.from", str(self.total)))
        self.late_at = float(first.read_text()) + int(config.get("late.by.ms", "0")) / 1000
        offset = self.context.offset_storage_reader.offset({"source": "grouped"})
        with (self.state / "starts").open("a") as f:
            f.write(json.dumps(offset) + "\n")
        self.next = int(offset["seq"]) if offset else 0  # type: ignore[arg-type]
        self.txn = self.context.transaction_context()
        if self.txn is None:
            raise ConfigException("GroupedTask needs transaction.boundary=connector")

    def poll(self) -> list[SourceRecord] | None:
        import time

        available = self.total if time.time() >= self.late_at else self.late_from
        end = min(self.next + 2, available)
        if end <= self.next:
            time.sleep(0.05)
            return None
        batch = [SourceRecord({"source": "grouped"}, {"seq": n + 1}, self.topic,
                              value={"partition": 0, "seq": n}, key=str(n))
                 for n in range(self.next, end)]
        self.next = end
        assert self.txn is not None
        for record in batch:
            if (record.value["seq"] + 1) % self.group == 0:
                self.txn.commit_transaction(record)
        if self.rewind_at is not None and batch[0].value["seq"] <= self.rewind_at < end:
            # Give up the open group: after this poll, a new instance of the task
            # reads it again from the last committed offset.
            self.txn.rewind_transaction()
            self.rewind_at = None
            (self.state / "rewound").write_text("")  # once, across instances
        return batch

    def stop(self) -> None:
        pass


class GroupedSourceConnector(_OneTaskConnector):
    def task_class(self) -> type[SourceTask]:
        return GroupedTask

    def can_define_transaction_boundaries(
            self, config: dict[str, str]) -> ConnectorTransactionBoundaries:
        return ConnectorTransactionBoundaries.SUPPORTED


class BlockingTask(SourceTask):
    """poll() blocks reading a socket to ``blocking.port`` (a server the test runs)
    until that server sends a byte or closes; after that it returns nothing, every
    0.1 s. stop() shuts the socket down, which ends a blocked read."""

    def start(self, config: dict[str, str]) -> None:
        import socket

        self._sock = socket.create_connection(("127.0.0.1", int(config["blocking.port"])), 10)
        self._sock.settimeout(None)
        self._released = False

    def poll(self) -> list[SourceRecord] | None:
        import time

        if not self._released:
            self._sock.recv(1)  # BLOCKING-RECV: the stall test finds this line
            self._released = True
        time.sleep(0.1)
        return None

    def stop(self) -> None:
        import contextlib
        import socket

        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)


class BlockingSourceConnector(_OneTaskConnector):
    def task_class(self) -> type[SourceTask]:
        return BlockingTask


class SharingTask(SourceTask):
    """Task ``share.index`` of :class:`SharingSourceConnector`: a record
    ``{"partition": <index>, "seq": n, "pid": <its process>}`` every 20 ms, resumed
    from its committed offset. The task numbered ``share.block`` blocks forever in
    its first poll() (stop() does not wake it); the one numbered
    ``share.block.commit`` in commit() once it has made 5 records; the one numbered
    ``share.block.stop`` in stop(); the one numbered ``share.fail`` raises after 5
    records, in its first instance only (one that starts from a committed offset
    runs on)."""

    def start(self, config: dict[str, str]) -> None:
        import os

        self.topic = config["topic"]
        self.index = int(config["share.index"])
        self.pid = os.getpid()
        self.blocks = config.get("share.block") == str(self.index)
        self.blocks_commit = config.get("share.block.commit") == str(self.index)
        self.blocks_stop = config.get("share.block.stop") == str(self.index)
        offset = self.context.offset_storage_reader.offset({"share": self.index})
        self.next = int(offset["seq"]) if offset else 0  # type: ignore[arg-type]
        self.fail_at = 5 if config.get("share.fail") == str(self.index) and not offset else None

    def poll(self) -> list[SourceRecord] | None:
        import threading
        import time

        if self.blocks:
            threading.Event().wait()  # forever: nothing sets it
        if self.fail_at is not None and self.next >= self.fail_at:
            raise RuntimeError(f"sharing task {self.index} fails at seq {self.next}")
        time.sleep(0.02)
        record = SourceRecord({"share": self.index}, {"seq": self.next + 1}, self.topic,
                              value={"partition": self.index, "seq": self.next,
                                     "pid": self.pid})
        self.next += 1
        return [record]

    def commit(self) -> None:
        import threading

        if self.blocks_commit and self.next >= 5:
            threading.Event().wait()  # forever: nothing sets it

    def stop(self) -> None:
        import threading

        if self.blocks_stop:
            threading.Event().wait()  # forever: nothing sets it


class SharingSourceConnector(SourceConnector):
    """``tasks.max`` tasks (:class:`SharingTask`), for tests of tasks sharing a process."""

    def start(self, config: dict[str, str]) -> None:
        self.config = dict(config)

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{**self.config, "share.index": str(i)} for i in range(max_tasks)]

    def task_class(self) -> type[SourceTask]:
        return SharingTask

    def stop(self) -> None:
        pass

    def exactly_once_support(self, config: dict[str, str]) -> ExactlyOnceSupport:
        return ExactlyOnceSupport.SUPPORTED

"""Connectors that misbehave on purpose, for end-to-end tests of failure handling.

Importable on Spark executors because the test harness puts this folder on the
workers' PYTHONPATH.
"""

from __future__ import annotations

from connect_runtime import ExactlyOnceSupport, SourceConnector, SourceRecord, SourceTask


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

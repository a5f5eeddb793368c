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

"""KIP-875's decisions, without Kafka: what is refused, in which order, and the
messages. The writes themselves are proven on a real broker in
``tests/e2e/test_offsets_alteration.py``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from connect_runtime import ConfigException, SourceConnector
from connect_runtime.cluster.fencing import ZombieFencer
from connect_runtime.cluster.offset_alteration import (
    OffsetAlteration,
    OffsetTopics,
    modified_message,
    normalize,
)
from connect_runtime.connectors.file import FileStreamSourceConnector
from connect_runtime.connectors.sequence import SequenceSourceConnector
from connect_runtime.errors import BadRequestException, NotFoundException


class View:
    """A config-topic view holding one connector."""

    def __init__(self, target: str = "STOPPED", tasks: int = 0) -> None:
        self.target, self.tasks = target, tasks

    def connector_config(self, name: str) -> dict[str, Any] | None:
        return {"connector.class": "X", "name": name} if name == "c" else None

    def target_state(self, name: str) -> str:
        return self.target

    def task_count(self, name: str) -> int:
        return self.tasks

    def contains(self, name: str) -> bool:
        return name == "c"

    def pending_fencing(self, name: str) -> bool:
        return False

    def config_generation(self, name: str) -> int:
        return 1

    def task_count_record(self, name: str) -> int | None:
        return 0


class Refusing(FileStreamSourceConnector):
    def alter_offsets(self, config: dict[str, str], offsets: Sequence[Any]) -> bool:
        raise ValueError("offsets before 2020 are gone")


def alteration(view: View, connector: SourceConnector, events: list[str]) -> OffsetAlteration:
    def read() -> View:
        events.append("read")
        return view

    def producer_config(name: str, config: dict[str, str]) -> dict[str, Any]:
        events.append("producer")
        return {}

    fencer = ZombieFencer("g", read, lambda ids: events.append("fence"),
                          lambda name, count: events.append("record"))
    return OffsetAlteration(
        exactly_once=True, group_id="g", fencer=fencer, read_config=read,
        current_partitions=lambda name, config: [],
        connector=lambda config: connector,
        producer_config=producer_config,
        ensure_topic=lambda topic: events.append("topic"),
        topics=lambda config: OffsetTopics("global", None))


def test_unknown_and_running_connectors_are_refused_before_any_fencing() -> None:
    events: list[str] = []
    with pytest.raises(NotFoundException, match="Connector d not found"):
        alteration(View(), FileStreamSourceConnector(), events).alter("d", [({"a": 1}, None)])
    with pytest.raises(BadRequestException, match="must be in the STOPPED state"):
        alteration(View("STARTED"), FileStreamSourceConnector(), events).reset("c")
    with pytest.raises(BadRequestException, match="must be in the STOPPED state"):
        alteration(View("STOPPED", tasks=1), FileStreamSourceConnector(), events).reset("c")
    assert events == ["read", "read", "read"]


def test_a_refusal_by_the_connector_writes_nothing() -> None:
    events: list[str] = []
    with pytest.raises(BadRequestException,
                       match="the connector refused them: offsets before 2020 are gone"):
        alteration(View(), Refusing(), events).alter(
            "c", [({"filename": "a"}, {"position": 1})])
    # Checked, fenced (nothing pending: no fence, no record), checked again; no write.
    assert events == ["read", "read", "read"]


def test_a_reset_with_no_offsets_succeeds_without_writing() -> None:
    events: list[str] = []
    message = alteration(View(), FileStreamSourceConnector(), events).reset("c")
    assert message == "The offsets for this connector have been reset successfully"
    assert "producer" not in events and "topic" not in events


def test_normalize_round_trips_and_names_bad_entries() -> None:
    assert normalize([({"b": 1, "a": 2.5}, {"x": True}), ({"k": "v"}, None),
                      ({"a": 2.5, "b": 1}, {"x": False})]) == [
        ({"a": 2.5, "b": 1}, {"x": False}), ({"k": "v"}, None)]
    with pytest.raises(BadRequestException, match=r"offsets\[1\].*'p'.*list"):
        normalize([({"a": 1}, None), ({"a": 2}, {"p": [1]})])
    with pytest.raises(BadRequestException, match=r"offsets\[0\].*null"):
        normalize([(None, {"p": 1})])
    with pytest.raises(BadRequestException, match=r"64-bit"):
        normalize([({"a": 2**70}, None)])


def test_messages_say_whether_the_connector_acknowledged() -> None:
    assert modified_message(True, reset=False) == \
        "The offsets for this connector have been altered successfully"
    assert modified_message(False, reset=True).startswith(
        "The Connect framework-managed offsets for this connector have been reset "
        "successfully. However, if this connector manages offsets externally")


def test_default_hook_does_not_acknowledge() -> None:
    class Plain(FileStreamSourceConnector):
        alter_offsets = SourceConnector.alter_offsets

    assert Plain().alter_offsets({}, [({"filename": "a"}, None)]) is False


@pytest.mark.parametrize(("connector", "good", "bad"), [
    (FileStreamSourceConnector(), [({"filename": "a"}, {"position": 0}), ({"filename": "b"}, None)],
     [({"file": "a"}, {"position": 0}), ({"filename": "a"}, {"position": -1}),
      ({"filename": "a"}, {"position": True}), ({"filename": "a"}, {"position": "1"})]),
    (SequenceSourceConnector(), [({"sequence.partition": 0}, {"seq": 5}),
                                 ({"sequence.partition": 1}, None)],
     [({"sequence.partition": -1}, {"seq": 0}), ({"sequence.partition": 0}, {"seq": 1.5}),
      ({"partition": 0}, {"seq": 0}), ({"sequence.partition": 0}, {"next": 1})]),
])
def test_bundled_connectors_check_their_offsets(connector: SourceConnector, good: list[Any],
                                                bad: list[Any]) -> None:
    assert connector.alter_offsets({}, good) is True
    for pair in bad:
        with pytest.raises(ConfigException):
            connector.alter_offsets({}, [pair])

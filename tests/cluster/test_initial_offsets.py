"""Creating a connector with initial offsets (KIP-995, beyond Connect 4.1), without Kafka.

The herder runs for real over in-memory stores (``tests/support/memory_herder.py``); the one
step that needs a broker, writing the offsets records, is replaced by a recorder
that also notes what the config topic held at that moment. What is tested is the
order: config validated, offsets checked by the connector, offsets written, and
only then the config; and that every refusal leaves nothing written. The writes
themselves, and a task starting from them, are proven on a real broker in
``tests/e2e/test_create_with_offsets.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from support.memory_herder import leading_herder

from connect_runtime.cluster.herder import DistributedHerder
from connect_runtime.cluster.offset_alteration import OffsetTopics
from connect_runtime.connectors.sequence import SequenceSourceConnector
from connect_runtime.errors import (
    AlreadyExistsException,
    BadRequestException,
    NotLeaderException,
)

SEQ = "SequenceSourceConnector"
CONFIG = {"connector.class": SEQ, "topic": "out", "tasks.max": "2"}
OFFSETS: list[tuple[dict[str, Any], dict[str, Any] | None]] = [
    ({"sequence.partition": 0}, {"seq": 500}), ({"sequence.partition": 1}, {"seq": 7})]


class Recorded:
    """What ``_write_records`` was asked to write, and whether the config topic already
    held the connector then."""

    def __init__(self, herder: DistributedHerder) -> None:
        self.writes: list[tuple[str, dict[str, str], list[Any], bool]] = []
        self._herder = herder

    def __call__(self, name: str, config: dict[str, str], offsets: list[Any],
                 deadline: float) -> OffsetTopics:
        created = name in self._herder.config_store.snapshot().connectors()
        self.writes.append((name, dict(config), list(offsets), created))
        return OffsetTopics("o", None)


@pytest.fixture
def herder() -> Iterator[DistributedHerder]:
    herder = leading_herder()
    yield herder


@pytest.fixture
def recorded(herder: DistributedHerder, monkeypatch: pytest.MonkeyPatch) -> Recorded:
    recorder = Recorded(herder)
    monkeypatch.setattr(herder._offsets, "_write_records", recorder)
    return recorder


def test_offsets_are_written_before_the_config(herder: DistributedHerder,
                                               recorded: Recorded) -> None:
    info = herder.create_connector("c", CONFIG, "PAUSED", OFFSETS)
    assert info.name == "c" and info.config == {**CONFIG, "name": "c"}
    [(name, config, offsets, created)] = recorded.writes
    assert (name, config, offsets) == ("c", {**CONFIG, "name": "c"}, OFFSETS)
    assert created is False  # no task could have started before the offsets were there
    snap = herder.config_store.snapshot()
    assert snap.connector_config("c") == {**CONFIG, "name": "c"}
    assert snap.target_state("c") == "PAUSED"


def test_offsets_the_connector_refuses_write_nothing(herder: DistributedHerder,
                                                     recorded: Recorded) -> None:
    with pytest.raises(BadRequestException) as refused:
        herder.create_connector("c", CONFIG, None, [({"sequence.partition": 0}, {"seq": -1})])
    assert str(refused.value).startswith(
        "Invalid value for field 'initial_offsets': connector c cannot take initial offsets: "
        "the connector refused them: ")
    assert "'seq' with an integer >= 0" in str(refused.value)
    assert recorded.writes == [] and "c" not in herder.config_store.snapshot().connectors()


def test_offsets_that_are_not_flat_primitives_write_nothing(herder: DistributedHerder,
                                                            recorded: Recorded) -> None:
    with pytest.raises(BadRequestException, match=r"^Invalid initial_offsets\[1\]: .*'seq'"):
        herder.create_connector("c", CONFIG, None,
                                [OFFSETS[0], ({"sequence.partition": 1}, {"seq": [1]})])
    assert recorded.writes == [] and "c" not in herder.config_store.snapshot().connectors()


def test_an_invalid_config_writes_nothing_and_never_asks_the_connector(
        herder: DistributedHerder, recorded: Recorded, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    monkeypatch.setattr(herder._offsets, "_consult",
                        lambda *args, **kwargs: asked.append("consulted"))
    with pytest.raises(BadRequestException, match="topic"):
        herder.create_connector("c", {"connector.class": SEQ}, None, OFFSETS)
    assert asked == [] and recorded.writes == []
    assert "c" not in herder.config_store.snapshot().connectors()


def test_an_existing_connector_keeps_its_offsets(herder: DistributedHerder,
                                                 recorded: Recorded) -> None:
    herder.create_connector("c", CONFIG)
    with pytest.raises(AlreadyExistsException, match="Connector c already exists"):
        herder.create_connector("c", CONFIG, None, OFFSETS)
    assert recorded.writes == []


def test_a_follower_writes_nothing(herder: DistributedHerder, recorded: Recorded) -> None:
    herder._leadership.leader = False
    with pytest.raises(NotLeaderException):
        herder.create_connector("c", CONFIG, None, OFFSETS)
    assert recorded.writes == []


def test_a_connector_without_the_hook_cannot_take_initial_offsets(
        herder: DistributedHerder, recorded: Recorded) -> None:
    config = {**CONFIG, "connector.class": f"{__name__}.NoHook"}
    with pytest.raises(BadRequestException, match="doesn't support external modification"):
        herder.create_connector("c", config, None, OFFSETS)
    assert recorded.writes == [] and "c" not in herder.config_store.snapshot().connectors()


def test_without_initial_offsets_nothing_is_written_to_the_offsets(
        herder: DistributedHerder, recorded: Recorded) -> None:
    herder.create_connector("c", CONFIG)
    assert recorded.writes == [] and "c" in herder.config_store.snapshot().connectors()


class NoHook(SequenceSourceConnector):
    """A connector whose ``alter_offsets`` says it cannot take offsets from outside."""

    def alter_offsets(self, config: dict[str, str], offsets: Any) -> bool:
        raise NotImplementedError

"""The declared connectors' pass, on a fake config topic (pure logic: what it writes)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from connect_runtime.cluster.declared_connectors import (
    DeclaredConnectors,
    DeclaredWrites,
    DirectoryFiles,
)
from connect_runtime.config.validation import ConfigInfos
from connect_runtime.errors import ConfigException
from connect_runtime.protocol.states import TargetState
from connect_runtime.storage.config_store import ClusterConfigState, DeclaredOwner


class FakeTopic:
    """Connector configs, target states and owners, as the config topic would hold them."""

    def __init__(self) -> None:
        self.configs: dict[str, dict[str, str]] = {}
        self.targets: dict[str, str] = {}
        self.owners: dict[str, DeclaredOwner] = {}
        self.validated: list[str] = []
        self.writes: list[tuple[Any, ...]] = []

    def snapshot(self) -> ClusterConfigState:
        return ClusterConfigState(_connector_configs=dict(self.configs),
                                  _target_states=dict(self.targets), _declared=dict(self.owners))

    def validate(self, config: dict[str, str]) -> ConfigInfos:
        self.validated.append(config["name"])
        if config.get("tasks.max", "1") != "1":
            raise ConfigException("Not a number of type INT", "tasks.max", config["tasks.max"])
        return ConfigInfos(config["connector.class"], 0, [], [])

    def put(self, name: str, config: dict[str, str], target: TargetState | None,
            owner: DeclaredOwner) -> None:
        self.writes.append(("put", name))
        self.configs[name], self.owners[name] = config, owner
        if target is not None:
            self.targets[name] = target.value

    def set_target(self, name: str, target: TargetState) -> None:
        self.writes.append(("target", name, target.value))
        self.targets[name] = target.value

    def delete(self, name: str) -> None:
        self.writes.append(("delete", name))
        del self.configs[name]
        self.owners.pop(name, None)


def declared(tmp_path: Path, topic: FakeTopic) -> DeclaredConnectors:
    writes = DeclaredWrites(topic.snapshot, topic.validate, topic.put, topic.set_target,
                            topic.delete, lambda: True)
    return DeclaredConnectors(DirectoryFiles(str(tmp_path)), writes, 60, threading.Event())


def write(path: Path, body: dict[str, Any]) -> None:
    path.write_text(json.dumps(body))


def test_create_then_nothing_until_the_file_changes(tmp_path: Path) -> None:
    topic = FakeTopic()
    passes = declared(tmp_path, topic)
    write(tmp_path / "a.json", {"name": "a", "config": {"connector.class": "X"},
                                "initial_state": "STOPPED"})
    report = passes.reconcile_once()
    assert [f.status for f in report.files] == ["APPLIED"]
    assert topic.writes == [("put", "a")] and topic.targets == {"a": "STOPPED"}
    assert topic.owners["a"] == DeclaredOwner("a.json", None)
    passes.reconcile_once()
    assert topic.writes == [("put", "a")] and topic.validated == ["a"]
    write(tmp_path / "a.json", {"name": "a", "config": {"connector.class": "X", "k": "v"},
                                "state": "RUNNING"})
    passes.reconcile_once()
    # initial_state applied once; a declared state is enforced.
    assert topic.writes[1:] == [("put", "a"), ("target", "a", "STARTED")]


def test_an_invalid_config_is_validated_once_per_version_and_changes_nothing(
        tmp_path: Path) -> None:
    topic = FakeTopic()
    topic.configs["a"] = {"name": "a", "connector.class": "X"}
    topic.owners["a"] = DeclaredOwner("a.json")
    passes = declared(tmp_path, topic)
    write(tmp_path / "a.json", {"name": "a", "config": {"connector.class": "X",
                                                        "tasks.max": "many"}})
    for _ in range(3):
        report = passes.reconcile_once()
    assert topic.validated == ["a"] and topic.writes == []
    (entry,) = report.files
    assert entry.status == "INVALID" and entry.error is not None
    assert entry.error.startswith("a.json") and "tasks.max" in entry.error


def test_removed_renamed_and_broken_files(tmp_path: Path) -> None:
    topic = FakeTopic()
    topic.configs["rest"] = {"name": "rest", "connector.class": "X"}  # created by REST
    passes = declared(tmp_path, topic)
    for name in ("a", "b", "c"):
        write(tmp_path / f"{name}.json", {"name": name, "config": {"connector.class": "X"}})
    passes.reconcile_once()
    assert set(topic.configs) == {"rest", "a", "b", "c"}
    (tmp_path / "a.json").unlink()  # removed: deleted
    write(tmp_path / "b.json", {"name": "b2", "config": {"connector.class": "X"}})  # renamed
    (tmp_path / "c.json").write_text("{")  # broken: c stays
    report = passes.reconcile_once()
    assert set(topic.configs) == {"rest", "b2", "c"}
    assert {f.file: f.status for f in report.files} == {"b.json": "APPLIED",
                                                        "c.json": "INVALID"}
    (tmp_path / "c.json").unlink()
    passes.reconcile_once()
    assert set(topic.configs) == {"rest", "b2"}


def test_a_file_naming_a_rest_connector_takes_it_over(tmp_path: Path) -> None:
    topic = FakeTopic()
    topic.configs["rest"] = {"name": "rest", "connector.class": "X"}
    passes = declared(tmp_path, topic)
    write(tmp_path / "r.json", {"name": "rest", "config": {"connector.class": "X"}})
    passes.reconcile_once()
    assert topic.writes == [("put", "rest")] and topic.owners["rest"].file == "r.json"

"""Connector files: the forms connect-standalone reads, and errors that name file and key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from connect_runtime.config.connector_files import (
    MAX_FILE_BYTES,
    ParsedFiles,
    load_connector_file,
    load_connector_files,
    scan_directory,
)
from connect_runtime.config.worker_config import STANDALONE_DEFAULTS, standalone_props
from connect_runtime.errors import ConfigException


def test_properties_json_map_and_request_body_forms(tmp_path: Path) -> None:
    (tmp_path / "a.properties").write_text("name=a\nconnector.class=X\ntasks.max=2\n")
    (tmp_path / "b.json").write_text(json.dumps({"name": "b", "connector.class": "X",
                                                 "tasks.max": 2, "flag": True}))
    (tmp_path / "c.json").write_text(json.dumps({
        "name": "c", "config": {"connector.class": "X"}, "initial_state": "stopped",
        "state": "PAUSED"}))
    a = load_connector_file(tmp_path / "a.properties")
    assert (a.name, a.config, a.state) == ("a", {"name": "a", "connector.class": "X",
                                                 "tasks.max": "2"}, None)
    b = load_connector_file(tmp_path / "b.json")
    assert b.config == {"name": "b", "connector.class": "X", "tasks.max": "2", "flag": "true"}
    c = load_connector_file(tmp_path / "c.json")
    assert (c.name, c.config, c.initial_state, c.state) == (
        "c", {"connector.class": "X", "name": "c"}, "STOPPED", "PAUSED")
    assert a.digest != load_connector_file(tmp_path / "b.json").digest


@pytest.mark.parametrize(("text", "expected"), [
    ('{"name": "c", "config": {"connector.class": "X"}, "extra": 1}', "unknown key(s) 'extra'"),
    ('{"name": "c", "config": {"name": "d"}}', "is not the connector's 'name' (c)"),
    ('{"name": "c", "config": {"k": null}}', "config key 'k' must be a string, not null"),
    ('{"name": "c", "config": {}, "state": "GONE"}', "'state' must be one of"),
    ('{"name": "c",\n "config": {', "f.json:2:"),
    ("[1]", "a JSON object, not list"),
    ('{"connector.class": "X"}', "missing the mandatory 'name'"),
])
def test_bad_json_files_are_named_with_the_key_or_line(tmp_path: Path, text: str,
                                                       expected: str) -> None:
    path = tmp_path / "f.json"
    path.write_text(text)
    with pytest.raises(ConfigException) as e:
        load_connector_file(path, "f.json")
    assert str(e.value).startswith("f.json") and expected in str(e.value), str(e.value)


def test_two_files_of_one_connector_are_refused(tmp_path: Path) -> None:
    for f in ("a.properties", "b.properties"):
        (tmp_path / f).write_text("name=same\nconnector.class=X\n")
    with pytest.raises(ConfigException, match="already declared by"):
        load_connector_files([str(tmp_path / "a.properties"), str(tmp_path / "b.properties")])
    scan = scan_directory(tmp_path)
    assert scan.connectors == () and {e.file for e in scan.errors} == {"a.properties",
                                                                       "b.properties"}


def test_a_directory_scan_skips_hidden_and_other_files(tmp_path: Path) -> None:
    # A ConfigMap volume: keys are symlinks into a hidden timestamped directory.
    data = tmp_path / "..2026_11_27"
    data.mkdir()
    (data / "a.properties").write_text("name=a\nconnector.class=X\n")
    (tmp_path / "..data").symlink_to(data.name)
    (tmp_path / "a.properties").symlink_to(Path("..data") / "a.properties")
    (tmp_path / "README.md").write_text("not a connector")
    (tmp_path / ".a.json.tmp").write_text("{")
    (tmp_path / "broken.json").write_text("{")
    scan = scan_directory(tmp_path)
    assert [d.name for d in scan.connectors] == ["a"]
    assert [e.file for e in scan.errors] == ["broken.json"]
    assert scan.files == {"a.properties", "broken.json"}


def test_standalone_defaults_fill_what_connect_standalone_files_leave_out() -> None:
    props = standalone_props({"bootstrap.servers": "b:9092",
                              "offset.storage.file.filename": "/tmp/offsets",
                              "group.id": "mine"})
    assert "offset.storage.file.filename" not in props
    assert props["group.id"] == "mine"
    assert props["offset.storage.topic"] == STANDALONE_DEFAULTS["offset.storage.topic"]


def test_a_file_over_the_limit_is_an_error_without_being_read(tmp_path: Path) -> None:
    """60 MB in declared.connectors.dir: before, re-read and re-parsed on every
    poll (82% of a core, 160 to 624 MB of memory)."""
    big = tmp_path / "big.json"
    with big.open("wb") as f:
        f.truncate(60 * 1024 * 1024)  # sparse: 60 MB of size, no disk
    (tmp_path / "ok.properties").write_text("name=ok\nconnector.class=X\n")
    scan = scan_directory(tmp_path)
    assert [d.name for d in scan.connectors] == ["ok"]
    [error] = scan.errors
    assert error.file == "big.json"
    assert f"is {60 * 1024 * 1024} bytes, over the {MAX_FILE_BYTES}" in error.message


def test_an_unchanged_file_is_parsed_once_and_a_changed_one_again(tmp_path: Path) -> None:
    cache = ParsedFiles()
    path = tmp_path / "c.properties"
    path.write_text("name=c\nconnector.class=X\n")
    (tmp_path / "bad.json").write_text("{not json")
    first, again = scan_directory(tmp_path, cache), scan_directory(tmp_path, cache)
    assert again.connectors[0] is first.connectors[0]  # the same object: not parsed again
    assert again.errors == first.errors and "not valid JSON" in first.errors[0].message
    path.write_text("name=c\nconnector.class=Y\n")
    changed = scan_directory(tmp_path, cache)
    assert changed.connectors[0].config["connector.class"] == "Y"
    path.unlink()
    assert scan_directory(tmp_path, cache).connectors == ()

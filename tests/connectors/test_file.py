"""FileStreamSourceConnector/Task against real files, with an in-memory offsets reader."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from support.fakes import FakeReader

from connect_runtime.api.connector import ConnectorTransactionBoundaries, ExactlyOnceSupport
from connect_runtime.api.record import RecordBatch, SourceRecord
from connect_runtime.config.validation import validate_connector_config
from connect_runtime.connectors.file import FileStreamSourceConnector, FileStreamSourceTask
from connect_runtime.errors import ConfigException, DataException, InvalidOffsetException
from connect_runtime.task.batches import check, expand
from connect_runtime.task.startup import TaskContext


def task_for(files: list[Path], offsets: dict[str, dict[str, Any]] | None = None,
             **overrides: str) -> FileStreamSourceTask:
    connector = FileStreamSourceConnector()
    connector.start({"name": "f", "topic": "out", "files": ",".join(map(str, files)),
                     "poll.idle.ms": "1", **overrides})
    config = connector.task_configs(1)[0]
    task = FileStreamSourceTask()
    task.initialize(TaskContext(config, FakeReader(offsets, key=lambda p: p["filename"])))
    task.start(config)
    return task


def rows(polled: list[RecordBatch] | None) -> list[SourceRecord]:
    """The records a poll's batches stand for (each row carries its batch's offset)."""
    out: list[SourceRecord] = []
    for batch in polled or []:
        check(batch, "f-0")
        out += expand(batch)
    return out


def drain(task: FileStreamSourceTask, polls: int = 5) -> list[SourceRecord]:
    out: list[SourceRecord] = []
    for _ in range(polls):
        out += rows(task.poll())
    return out


def test_lines_become_records_with_byte_positions_as_offsets(tmp_path: Path) -> None:
    f = tmp_path / "in.txt"
    f.write_bytes(b"alpha\r\nbeta\n\ngamma\n")
    polled = task_for([f]).poll()
    assert polled is not None and all(isinstance(b, RecordBatch) for b in polled)
    records = rows(polled)
    assert [r.value for r in records] == ["alpha", "beta", "", "gamma"]
    # One batch per block read; its offset is the position after its last line.
    assert [b.source_offset for b in polled] == [{"position": 19}]
    assert [r.source_offset for r in records] == [{"position": 19}] * 4
    assert {str(r.source_partition["filename"]) for r in records} == {str(f)}
    assert all(r.topic == "out" and r.key is None for r in records)


def test_an_unfinished_last_line_waits_for_its_end(tmp_path: Path) -> None:
    f = tmp_path / "in.txt"
    f.write_bytes(b"one\ntw")
    task = task_for([f])
    first = drain(task)
    assert [r.value for r in first] == ["one"]
    assert first[-1].source_offset == {"position": 4}
    with f.open("ab") as out:
        out.write(b"o\nthree\n")
    records = drain(task)
    assert [r.value for r in records] == ["two", "three"]
    assert records[-1].source_offset == {"position": f.stat().st_size}


def test_resumes_after_the_committed_position(tmp_path: Path) -> None:
    f = tmp_path / "in.txt"
    f.write_bytes(b"a\nb\nc\n")
    task = task_for([f], {str(f): {"position": 2}})
    assert [r.value for r in drain(task)] == ["b", "c"]


def test_batch_size_bounds_a_poll_and_files_take_turns(tmp_path: Path) -> None:
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("".join(f"a{i}\n" for i in range(5)))
    b.write_text("".join(f"b{i}\n" for i in range(5)))
    task = task_for([a, b], **{"batch.size": "3"})
    first = rows(task.poll())
    assert [r.value for r in first] == ["a0", "a1", "a2"]
    assert first[-1].source_offset == {"position": 9}
    second = rows(task.poll())
    assert [r.value for r in second] == ["b0", "b1", "b2"]
    rest = drain(task)
    assert sorted(r.value for r in rest) == ["a3", "a4", "b3", "b4"]


def test_a_missing_file_is_waited_for(tmp_path: Path) -> None:
    f = tmp_path / "later.txt"
    task = task_for([f])
    assert task.poll() is None
    f.write_text("x\n")
    assert [r.value for r in drain(task)] == ["x"]


def test_a_position_beyond_the_end_fails_with_the_file_named(tmp_path: Path) -> None:
    f = tmp_path / "in.txt"
    f.write_text("short\n")
    task = task_for([f], {str(f): {"position": 100}})
    with pytest.raises(InvalidOffsetException, match="beyond its end"):
        task.poll()


def test_a_malformed_offset_fails_at_start(tmp_path: Path) -> None:
    f = tmp_path / "in.txt"
    f.write_text("x\n")
    with pytest.raises(InvalidOffsetException, match="position"):
        task_for([f], {str(f): {"position": "7"}})


def test_invalid_bytes_fail_naming_file_and_position(tmp_path: Path) -> None:
    f = tmp_path / "in.txt"
    f.write_bytes(b"ok\n\xff\xfe\n")
    task = task_for([f])
    with pytest.raises(DataException, match=r"in.txt: the line at byte position 3"):
        drain(task)


def test_files_are_spread_over_tasks_and_one_is_required() -> None:
    connector = FileStreamSourceConnector()
    connector.start({"topic": "t", "file": "/x", "files": "/y,/z,/x"})
    configs = connector.task_configs(2)
    assert [c["file.task.files"] for c in configs] == ["/x,/z", "/y"]
    assert len(connector.task_configs(8)) == 3  # no task without a file
    with pytest.raises(ConfigException, match="'file' or 'files'"):
        FileStreamSourceConnector().start({"topic": "t"})
    with pytest.raises(ConfigException, match="encoding"):
        FileStreamSourceConnector().start({"topic": "t", "file": "/x", "encoding": "nope"})


def test_capabilities_and_validation() -> None:
    connector = FileStreamSourceConnector()
    assert connector.exactly_once_support({}) is ExactlyOnceSupport.SUPPORTED
    assert connector.can_define_transaction_boundaries({}) is \
        ConnectorTransactionBoundaries.UNSUPPORTED
    infos = validate_connector_config(connector, {
        "name": "f", "connector.class": "FileStreamSourceConnector", "batch.size": "0"},
        "enabled")
    text = " ".join(infos.error_messages())
    assert "topic" in text and "batch.size" in text, text
    # A connector-defined boundary is refused: the file source defines none.
    infos = validate_connector_config(connector, {
        "name": "f", "connector.class": "FileStreamSourceConnector", "topic": "t",
        "file": "/x", "transaction.boundary": "connector"}, "enabled")
    assert "transaction.boundary" in " ".join(infos.error_messages())


@pytest.mark.parametrize("batch_size", ["1", "3", "2000"])
def test_lines_across_read_chunks_and_non_ascii_text_keep_exact_positions(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch_size: str) -> None:
    # Small chunks make lines straddle reads; non-ASCII lines take the per-line
    # decode path, ASCII blocks the whole-block one; a lone \r stays in its line.
    import connect_runtime.connectors.file as file_module

    monkeypatch.setattr(file_module, "CHUNK_BYTES", 7)
    lines = ["plain", "naïve café", "", "a\rb", "crlf\r", "日本語のテキスト", "z" * 20]
    data = "\n".join(lines).encode() + b"\n"
    f = tmp_path / "in.txt"
    f.write_bytes(data)
    task = task_for([f], **{"batch.size": batch_size})
    batches = [b for _ in range(30) for b in task.poll() or []]
    records = [r for b in batches for r in rows([b])]
    assert [r.value for r in records] == ["plain", "naïve café", "", "a\rb", "crlf",
                                          "日本語のテキスト", "z" * 20]
    expected_ends, position = [], 0
    for raw in data.split(b"\n")[:-1]:
        position += len(raw) + 1
        expected_ends.append({"position": position})
    # Each batch's offset is the exact position after its own last line.
    last_rows = list(itertools.accumulate(len(b) for b in batches))
    assert [b.source_offset for b in batches] == [expected_ends[i - 1] for i in last_rows]
    if batch_size == "1":
        assert [r.source_offset for r in records] == expected_ends

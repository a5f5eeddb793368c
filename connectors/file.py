"""A source of lines from files: each line of a file becomes a record.

Kafka Connect's ``FileStreamSourceConnector``, with the same keys and offsets,
plus several files spread over tasks:

* ``file`` (one path) and/or ``files`` (a comma-separated list): the inputs.
  Files are split round-robin over at most ``tasks.max`` tasks.
* Source partition ``{"filename": <path as configured>}``; source offset
  ``{"position": <byte position just after the line>}``, so a restarted task
  resumes exactly after the last committed line.
* Value: the line as a string, without its line ending (``\\n`` or ``\\r\\n``);
  no key; the timestamp is set by the producer.
* Only complete lines are emitted: a last line still being written (no
  ``\\n`` yet) waits for its end, so the task can follow a growing file.
* A file that does not exist yet is waited for (logged once), as Connect does.
  A committed position beyond the end of the file (the file was truncated or
  replaced) fails the task: resuming anywhere else could skip or repeat lines.
  Bytes that are not valid in ``encoding`` fail the task, naming the file and
  the byte position of the line.

Reading is by chunks of up to 1 MiB; one poll returns at most ``batch.size``
lines, taken from the task's files in turn, as
:class:`~connect_runtime.api.record.RecordBatch` columns: one per block of
lines read, with the position after its last line as its offset.
"""

from __future__ import annotations

import codecs
import itertools
import logging
import operator
import threading
from collections.abc import Mapping, Sequence
from typing import IO, Any

from connect_runtime import (
    ConfigDef,
    ConfigException,
    ConnectorTransactionBoundaries,
    DataException,
    ExactlyOnceSupport,
    Importance,
    InvalidOffsetException,
    NonEmptyString,
    Range,
    RecordBatch,
    SourceConnector,
    SourceTask,
    Type,
    __version__,
)

log = logging.getLogger(__name__)

FILE = "file"
FILES = "files"
TOPIC = "topic"
BATCH_SIZE = "batch.size"
ENCODING = "encoding"
POLL_IDLE_MS = "poll.idle.ms"
TASK_FILES = "file.task.files"

FILENAME_FIELD = "filename"
POSITION_FIELD = "position"
CHUNK_BYTES = 1 << 20
_ASCII_COMPATIBLE = frozenset({"utf-8", "ascii", "iso8859-1", "iso8859-15", "cp1252"})

CONFIG_DEF = (
    ConfigDef()
    .define(TOPIC, Type.STRING, validator=NonEmptyString(), importance=Importance.HIGH,
            documentation="Topic to write the lines to.")
    .define(FILE, Type.STRING, "", importance=Importance.HIGH,
            documentation="A file to read (Kafka Connect's key). Combined with 'files'.")
    .define(FILES, Type.LIST, "", importance=Importance.HIGH,
            documentation="Files to read, spread round-robin over the tasks.")
    .define(BATCH_SIZE, Type.INT, 2000, Range.at_least(1), Importance.LOW,
            "Maximum lines returned by one poll.")
    .define(ENCODING, Type.STRING, "utf-8", NonEmptyString(), Importance.LOW,
            "Character encoding of the files (a Python codec name).")
    .define(POLL_IDLE_MS, Type.INT, 100, Range.at_least(1), Importance.LOW,
            "How long a poll waits when no file has a complete new line.")
)

_TASK_CONFIG_DEF = ConfigDef().define(
    TASK_FILES, Type.LIST, documentation="The files of this task.")


def configured_files(values: dict[str, Any]) -> list[str]:
    """``file`` then ``files``, without repeats; raises if there is none."""
    out: list[str] = []
    for path in ([values[FILE]] if values[FILE] else []) + list(values[FILES]):
        if path and path not in out:
            out.append(path)
    if not out:
        raise ConfigException("Set 'file' or 'files' to at least one path", name=FILES,
                              value="")
    return out


def source_partition(path: str) -> dict[str, str]:
    return {FILENAME_FIELD: path}


class FileStreamSourceConnector(SourceConnector):
    """Hands out the configured files to tasks (see the module docstring)."""

    def __init__(self) -> None:
        self._config: dict[str, str] = {}
        self._files: list[str] = []

    def version(self) -> str:
        return __version__

    def config_def(self) -> ConfigDef:
        return CONFIG_DEF

    def start(self, config: dict[str, str]) -> None:
        values = CONFIG_DEF.parse(config)
        self._files = configured_files(values)
        try:
            "".encode(values[ENCODING])
        except LookupError:
            raise ConfigException(f"Unknown encoding {values[ENCODING]!r}", name=ENCODING,
                                  value=values[ENCODING]) from None
        self._config = dict(config)

    def task_class(self) -> type[SourceTask]:
        return FileStreamSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        tasks = min(max_tasks, len(self._files))
        return [{**self._config, TASK_FILES: ",".join(self._files[i::tasks])}
                for i in range(tasks)]

    def stop(self) -> None:
        pass

    def exactly_once_support(self, config: dict[str, str]) -> ExactlyOnceSupport:
        # Offsets are byte positions in files that only grow: replayable.
        return ExactlyOnceSupport.SUPPORTED

    def can_define_transaction_boundaries(
        self, config: dict[str, str]
    ) -> ConnectorTransactionBoundaries:
        return ConnectorTransactionBoundaries.UNSUPPORTED

    def alter_offsets(self, config: dict[str, str],
                      offsets: Sequence[tuple[Mapping[str, Any], Mapping[str, Any] | None]],
                      ) -> bool:
        """Accept ``{"filename": path}`` -> ``{"position": bytes >= 0}`` (or None).

        The positions live only in Kafka, so the change is complete: True.
        """
        for partition, offset in offsets:
            if not isinstance(partition.get(FILENAME_FIELD), str):
                raise ConfigException(f"The partition {dict(partition)} must contain the key "
                                      f"'{FILENAME_FIELD}' with a file path")
            if offset is None:
                continue
            position = offset.get(POSITION_FIELD)
            if isinstance(position, bool) or not isinstance(position, int) or position < 0:
                raise ConfigException(
                    f"The offset {dict(offset)} of {partition[FILENAME_FIELD]} must contain "
                    f"the key '{POSITION_FIELD}' with a byte position (an integer >= 0)")
        return True


class _Input:
    """One file: its handle, the bytes read but not emitted, and their position."""

    __slots__ = ("buffer", "file", "path", "position", "source_partition", "waiting_logged")

    def __init__(self, path: str, position: int) -> None:
        self.path = path
        self.source_partition = source_partition(path)
        self.position = position  # file position of buffer[0]: after the last emitted line
        self.buffer = b""
        self.file: IO[bytes] | None = None
        self.waiting_logged = False


class FileStreamSourceTask(SourceTask):
    """Reads its files' complete lines; ``stop`` may come from another thread."""

    def __init__(self) -> None:
        self._stopping = threading.Event()
        self._lock = threading.Lock()  # stop() closes the files a poll may be reading
        self._inputs: list[_Input] = []
        self._cursor = 0

    def version(self) -> str:
        return __version__

    def start(self, config: dict[str, str]) -> None:
        values = CONFIG_DEF.parse(config)
        self._topic: str = values[TOPIC]
        self._batch_size: int = values[BATCH_SIZE]
        self._encoding: str = values[ENCODING]
        # Pure-ASCII bytes mean the same text in these, so a block can skip per-line decoding.
        self._ascii_compatible = codecs.lookup(self._encoding).name in _ASCII_COMPATIBLE
        self._idle_s: float = values[POLL_IDLE_MS] / 1000
        paths = list(_TASK_CONFIG_DEF.parse(config)[TASK_FILES])
        reader = self.context.offset_storage_reader
        committed = {part.get(FILENAME_FIELD): offset for part, offset in
                     reader.offsets([source_partition(p) for p in paths])}
        self._inputs = [_Input(p, _position(p, committed.get(p))) for p in paths]
        self._cursor = 0

    def poll(self) -> list[RecordBatch] | None:
        batch: list[RecordBatch] = []
        with self._lock:
            room = self._batch_size
            for _ in range(len(self._inputs)):
                if self._stopping.is_set() or room <= 0:
                    break
                source = self._inputs[self._cursor]
                self._cursor = (self._cursor + 1) % len(self._inputs)
                room -= self._read_lines(source, batch, room)
        if not batch:
            self._stopping.wait(self._idle_s)
            return None
        return batch

    def _open(self, source: _Input) -> IO[bytes] | None:
        if source.file is None:
            try:
                source.file = open(source.path, "rb")  # noqa: SIM115 (kept open across polls)
            except FileNotFoundError:
                if not source.waiting_logged:
                    log.warning("file %s does not exist yet; waiting for it", source.path)
                    source.waiting_logged = True
                return None
            size = source.file.seek(0, 2)
            if source.position > size:
                raise InvalidOffsetException(
                    f"The committed position {source.position} of {source.path} is beyond its "
                    f"end ({size} bytes): the file was truncated or replaced. Delete the "
                    "connector's offsets to read it from the start.")
            source.file.seek(source.position)
        return source.file

    def _read_lines(self, source: _Input, batch: list[RecordBatch], room: int) -> int:
        """Append ``source``'s next complete lines to ``batch``, at most ``room``, as
        one RecordBatch per block read; returns how many lines it appended.

        Works a block of lines at a time with C-level splits, sums and decodes:
        this is the connector's whole per-line cost, so no Python loop runs per
        line. Each block's offset is per batch, the position after its last line
        (a batch is never split across transactions, so that is exact).
        """
        if self._stopping.is_set():
            return 0
        f = self._open(source)
        if f is None:
            return 0
        wanted = room
        while room > 0:
            data = source.buffer
            last = data.rfind(b"\n")
            if last < 0:
                chunk = f.read(CHUNK_BYTES)
                if not chunk:
                    return wanted - room
                source.buffer = data + chunk
                continue
            raw = data[:last].split(b"\n", room)
            if len(raw) > room:  # the rest, lines not taken this time
                raw.pop()
            # Byte position after line i: the lengths so far plus i + 1 newlines.
            ends = list(map(operator.add, itertools.accumulate(map(len, raw)),
                            range(source.position + 1, source.position + len(raw) + 1)))
            lines = self._decode(source, raw, ends)
            batch.append(RecordBatch(self._topic, lines, source_partition=source.source_partition,
                                     source_offset={POSITION_FIELD: ends[-1]}))
            source.buffer = data[ends[-1] - source.position:]
            source.position = ends[-1]
            room -= len(raw)
        return wanted - room

    def _decode(self, source: _Input, raw: list[bytes], ends: list[int]) -> list[str]:
        """The lines of ``raw`` as text, without a trailing ``\\r``."""
        block = b"\n".join(raw)
        if self._ascii_compatible and block.isascii():
            lines = block.decode("ascii").split("\n")  # one decode for the whole block
        else:
            lines = []
            for i, line in enumerate(raw):
                try:
                    lines.append(line.decode(self._encoding))
                except UnicodeDecodeError as e:
                    start = ends[i] - len(line) - 1
                    raise DataException(
                        f"{source.path}: the line at byte position {start} is not valid "
                        f"{self._encoding}: {e}") from None
        if b"\r" in block:
            lines = [line[:-1] if line.endswith("\r") else line for line in lines]
        return lines

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            for source in self._inputs:
                if source.file is not None:
                    source.file.close()
                    source.file = None


def _position(path: str, offset: dict[str, Any] | None) -> int:
    if offset is None:
        return 0
    position = offset.get(POSITION_FIELD)
    if isinstance(position, bool) or not isinstance(position, int) or position < 0:
        raise InvalidOffsetException(
            f"Source partition {source_partition(path)} has committed offset {offset!r}; "
            f"expected {{{POSITION_FIELD!r}: <int >= 0>}}")
    return position

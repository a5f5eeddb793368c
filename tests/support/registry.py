"""A real Schema Registry for the tests: Apicurio Registry, run by ``deploy/registry.sh``.

Its Confluent-compatible API (``/apis/ccompat/v7``) is what the converters and
confluent-kafka's own clients talk to. ``RegistryProxy`` is a plain TCP relay
in front of it that a test can cut and restore, to take the registry away
from a running task without losing the schemas it holds. ``compile_proto``
compiles a registered .proto with Google's protoc: a Protobuf decoder that
shares nothing with the converter's own descriptors.
"""

from __future__ import annotations

import contextlib
import datetime
import decimal
import importlib
import importlib.util
import os
import socket
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

import httpx

from connect_runtime.api.schema import Schema, Struct
from support import REPO
from support.kafka import free_port

REGISTRY_SH = str(REPO / "deploy" / "registry.sh")

# The record the registry converters' tests write: most of Connect's types and
# logical types, an optional field, a nested struct and a field with a default.
LINE = Schema.struct({"code": Schema.INT16, "label": Schema.OPTIONAL_STRING},
                     name="com.example.Line")
ORDER_FIELDS: dict[str, Schema] = {
    "id": Schema.INT64, "customer": Schema.STRING, "note": Schema.OPTIONAL_STRING,
    "amount": Schema.FLOAT64, "ratio": Schema.FLOAT32, "paid": Schema.BOOLEAN,
    "price": Schema.decimal(2), "day": Schema.date(), "at": Schema.timestamp(),
    "raw": Schema.BYTES, "tags": Schema.array(Schema.STRING),
    "attrs": Schema.map(Schema.STRING, Schema.INT32), "line": LINE,
    "qty": Schema.INT32.replace(default=1)}


def order_values(i: int) -> dict[str, Any]:
    """Row ``i``'s values for :data:`ORDER_FIELDS` (``qty`` unset: its default)."""
    return {"id": i, "customer": f"c{i}", "note": None if i % 2 else f"n{i}",
            "amount": i * 1.25, "ratio": 0.5, "paid": bool(i % 2),
            "price": decimal.Decimal(f"{i}.05"), "day": datetime.date(2024, 2, 29),
            "at": datetime.datetime(2024, 1, 2, 3, 4, 5, 678000), "raw": bytes([i % 256, 0]),
            "tags": ["a", f"t{i}"], "attrs": {"x": i}, "line": Struct(LINE, code=i % 100),
            "qty": None}


class SchemaRegistry:
    """One registry on its own port and data dir; ``env`` adds registry.sh settings
    (``REGISTRY_BASIC_AUTH_USERS``, ``REGISTRY_TLS_*``, ``REGISTRY_PERSIST``)."""

    def __init__(self, data_dir: Path, env: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self._env = dict(os.environ, **(env or {}), REGISTRY_DATA_DIR=str(data_dir),
                         REGISTRY_PORT=str(self.port))
        self.url = ""

    def start(self) -> str:
        done = subprocess.run(["bash", REGISTRY_SH, "start"], env=self._env, check=True,
                              stdout=subprocess.PIPE, text=True)
        self.url = done.stdout.strip().splitlines()[-1]
        return self.url

    def stop(self) -> None:
        subprocess.run(["bash", REGISTRY_SH, "stop"], env=self._env, check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """A call to the Confluent API (``path`` after ``/apis/ccompat/v7``)."""
        return httpx.request(method, self.url + path, timeout=30, **kwargs)


class RegistryProxy:
    """A TCP relay on a free port to ``target`` (host, port); ``cut()`` closes every
    connection and refuses new ones, ``restore()`` accepts again."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = free_port()
        self._lock = threading.Lock()  # guards _open and _server
        self._open: list[socket.socket] = []
        self._server: socket.socket | None = None
        self.restore()

    def restore(self) -> None:
        with self._lock:
            if self._server is not None:
                return
            server = socket.socket()
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            server.bind(("127.0.0.1", self.port))
            server.listen(64)
            self._server = server
        threading.Thread(target=self._accept, args=(server,), daemon=True).start()

    def cut(self) -> None:
        with self._lock:
            server, self._server = self._server, None
            sockets, self._open = self._open, []
        if server is not None:
            server.close()
        for s in sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    close = cut

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return  # cut
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                if self._server is not server:
                    client.close()
                    upstream.close()
                    return
                self._open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pipe, args=(a, b), daemon=True).start()


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for s in (source, sink):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


def compile_proto(text: str, workdir: Path, message: str) -> Any:
    """The class of ``message`` in the .proto ``text``, compiled by Google's protoc."""
    from grpc_tools import protoc

    src = workdir / "proto"
    src.mkdir()
    # A file and module name of its own per call: protobuf's default descriptor pool
    # and sys.modules outlive a test, and another test's registered.proto is not this one.
    stem = f"registered_{uuid.uuid4().hex[:12]}"
    (src / f"{stem}.proto").write_text(text)
    # confluent/type/decimal.proto, as Confluent publishes it (its registry knows it built in).
    (src / "confluent" / "type").mkdir(parents=True)
    (src / "confluent" / "type" / "decimal.proto").write_text(
        'syntax = "proto3";\npackage confluent.type;\n'
        "message Decimal {\n  bytes value = 1;\n  uint32 precision = 2;\n  int32 scale = 3;\n}\n")
    # google/protobuf/*.proto ship with protoc; google/type/*.proto with googleapis-common-protos.
    date_pb2 = importlib.util.find_spec("google.type.date_pb2")
    assert date_pb2 is not None and date_pb2.origin is not None
    includes = [str(Path(protoc.__file__).parent / "_proto"),
                str(Path(date_pb2.origin).parents[2])]
    out = workdir / "out"
    out.mkdir()
    assert protoc.main(["protoc", f"-I{src}", *(f"-I{i}" for i in includes),
                        f"--python_out={out}", str(src / f"{stem}.proto")]) == 0
    # The compiled file imports confluent.type.decimal_pb2: confluent-kafka's copy of it,
    # already in the default descriptor pool.
    from confluent_kafka.schema_registry.confluent import type as confluent_type
    from confluent_kafka.schema_registry.confluent.type import decimal_pb2
    sys.modules.setdefault("confluent", importlib.import_module(
        "confluent_kafka.schema_registry.confluent"))
    sys.modules.setdefault("confluent.type", confluent_type)
    sys.modules.setdefault("confluent.type.decimal_pb2", decimal_pb2)
    sys.path.insert(0, str(out))
    try:
        module = importlib.import_module(f"{stem}_pb2")
    finally:
        sys.path.remove(str(out))
    return getattr(module, message)

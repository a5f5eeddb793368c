"""Which converters a task loads: the connector's keys win over the worker's, which
win over Connect's defaults (pure logic: only the spec's converter keys are read)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from connect_runtime.converters import JsonConverter, SimpleHeaderConverter, StringConverter
from connect_runtime.errors import ConfigException
from connect_runtime.task.startup import _header_converter


def spec(**worker: str) -> Any:
    return SimpleNamespace(worker_converters=dict(worker))


def test_the_default_header_converter_is_connects_simple_one() -> None:
    assert type(_header_converter(spec(), {})) is SimpleHeaderConverter


def test_the_worker_and_then_the_connector_choose_with_their_sub_configs() -> None:
    worker = spec(**{"header.converter": "org.apache.kafka.connect.json.JsonConverter",
                     "header.converter.schemas.enable": "true"})
    from_worker = _header_converter(worker, {})
    assert type(from_worker) is JsonConverter
    assert from_worker.from_connect_header("t", "h", None, 1) == \
        b'{"schema":null,"payload":1}'
    mine = _header_converter(worker, {"header.converter": "StringConverter",
                                      "header.converter.converter.encoding": "latin-1"})
    assert type(mine) is StringConverter
    assert mine.from_connect_header("t", "h", None, "é") == b"\xe9"


def test_an_unknown_header_converter_names_the_key() -> None:
    with pytest.raises(ConfigException, match=r"header\.converter"):
        _header_converter(spec(), {"header.converter": "no.such.Converter"})

"""errors.py's promise: every exception class the runtime defines is a ConnectError."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import connect_runtime
import connect_runtime.connectors
import connect_runtime.rest
from connect_runtime.errors import ConnectError


def _runtime_exception_classes() -> dict[str, type[BaseException]]:
    found = {}
    # rest and connectors are walked on their own: in the editable install they live
    # outside connect_runtime's folder (package-dir), where pkgutil does not look.
    for package in (connect_runtime, connect_runtime.rest, connect_runtime.connectors):
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            module = importlib.import_module(info.name)
            for name, value in vars(module).items():
                if (inspect.isclass(value) and issubclass(value, BaseException)
                        and value.__module__ == info.name):
                    found[f"{info.name}.{name}"] = value
    return found


def test_every_runtime_exception_descends_from_connect_error() -> None:
    classes = _runtime_exception_classes()
    # The walk reaches the subpackages installed from rest/ and protocol/.
    assert "connect_runtime.rest.errors.HttpError" in classes
    assert "connect_runtime.protocol.slot_channel.InvalidSlotMessage" in classes
    strays = sorted(name for name, cls in classes.items() if not issubclass(cls, ConnectError))
    assert strays == []

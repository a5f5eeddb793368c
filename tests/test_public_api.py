"""The connector author's API is the product: its names change only on purpose."""

from __future__ import annotations

import connect_runtime

EXPECTED = {
    "NO_DEFAULT", "CaseInsensitiveValidString", "Config", "ConfigDef", "ConfigException",
    "ConfigKey", "ConfigValue", "ConnectError", "ConnectorContext",
    "ConnectorTransactionBoundaries", "DataException", "ExactlyOnceSupport", "Importance",
    "InvalidOffsetException", "NonEmptyString", "OffsetStorageReader", "Range",
    "RecordMetadata", "RetriableException", "SourceConnector", "SourceRecord", "SourceTask",
    "SourceTaskContext", "TransactionContext", "Type", "ValidString", "Validator", "Width",
    "__version__",
}


def test_exported_members_are_exactly_the_documented_api() -> None:
    assert set(connect_runtime.__all__) == EXPECTED


def test_every_exported_name_exists_and_is_documented() -> None:
    for name in connect_runtime.__all__:
        member = getattr(connect_runtime, name)
        if isinstance(member, type):
            assert member.__doc__, f"{name} has no docstring"

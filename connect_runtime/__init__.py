"""connect_runtime: exactly-once source connectors (KIP-618) whose tasks run on Spark.

This module is the connector author's whole API; ``tests/test_public_api.py``
locks the set below, and the names of :mod:`connect_runtime.testing`, the kit
for authors' tests. Everything else under ``connect_runtime.*`` that is not
re-exported here is internal and may change without notice.
"""

from connect_runtime.api.config_def import (
    NO_DEFAULT,
    CaseInsensitiveValidString,
    Config,
    ConfigDef,
    ConfigKey,
    ConfigValue,
    Importance,
    NonEmptyString,
    Range,
    Type,
    Validator,
    ValidString,
    Width,
)
from connect_runtime.api.connector import (
    ConnectorContext,
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    SourceConnector,
)
from connect_runtime.api.record import RecordBatch, RecordMetadata, SourceRecord
from connect_runtime.api.schema import (
    Field,
    Schema,
    SchemaType,
    Struct,
    connect_schema,
    schema_of,
)
from connect_runtime.api.task import (
    OffsetStorageReader,
    SourceTask,
    SourceTaskContext,
    TransactionContext,
)
from connect_runtime.api.transform import Predicate, Transformation
from connect_runtime.errors import (
    ConfigException,
    ConnectError,
    DataException,
    InvalidOffsetException,
    RetriableException,
)

__version__ = "0.1.0"

__all__ = [
    "NO_DEFAULT",
    "CaseInsensitiveValidString",
    "Config",
    "ConfigDef",
    "ConfigException",
    "ConfigKey",
    "ConfigValue",
    "ConnectError",
    "ConnectorContext",
    "ConnectorTransactionBoundaries",
    "DataException",
    "ExactlyOnceSupport",
    "Field",
    "Importance",
    "InvalidOffsetException",
    "NonEmptyString",
    "OffsetStorageReader",
    "Predicate",
    "Range",
    "RecordBatch",
    "RecordMetadata",
    "RetriableException",
    "Schema",
    "SchemaType",
    "SourceConnector",
    "SourceRecord",
    "SourceTask",
    "SourceTaskContext",
    "Struct",
    "TransactionContext",
    "Transformation",
    "Type",
    "ValidString",
    "Validator",
    "Width",
    "__version__",
    "connect_schema",
    "schema_of",
]

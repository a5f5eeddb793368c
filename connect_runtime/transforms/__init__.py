"""Single Message Transforms (SMTs) and predicates, configured as in Kafka Connect.

A task builds one :class:`TransformationChain` from its connector config
(``transforms``, ``transforms.<alias>.*``, ``predicates``, ``predicates.<alias>.*``)
and runs every record through it before conversion. The bundled plugins are
Connect's, under Connect's class names (``registry``); a user's own are found by
import path or by the entry point groups ``connect_runtime.transforms`` and
``connect_runtime.predicates``. Modules, by job:

* ``base``: the bundled plugins' base (the :class:`Transformation` and
  :class:`Predicate` contracts are public: ``connect_runtime.api.transform``);
* ``chain``: building and running the chain;
* ``registry``: names -> classes, listings, versions;
* ``validation``: the keys ``PUT .../config/validate`` reports per alias;
* the families: ``fields`` (InsertField, ReplaceField, MaskField), ``reshape``
  (ExtractField, HoistField, ValueToKey, Flatten), ``cast``, ``timestamps``
  (TimestampConverter), ``routing`` (RegexRouter, TimestampRouter, Filter),
  ``headers`` (HeaderFrom, InsertHeader, DropHeaders), ``metadata``
  (SetSchemaMetadata), ``predicates``;
* helpers: ``configs`` (ConfigDef pieces), ``data`` (schema caches, time
  values), ``field_path`` (KIP-821 paths), ``java_regex``, ``simple_date_format``.

This package sits at the converters' layer: it imports only ``api``,
``errors`` and the package root, and runs in executor processes.
"""

from connect_runtime.api.transform import Predicate, Transformation
from connect_runtime.transforms.chain import TransformationChain

__all__ = ["Predicate", "Transformation", "TransformationChain"]
